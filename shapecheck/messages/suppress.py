"""Suppression: ``# noqa`` comments, and the codes a configuration turns off.

- ``# noqa: SC402`` (several codes: ``# noqa: SC401, SC402``; any code: a bare
  ``# noqa``) on a line of a statement suppresses those warnings and notes of that
  statement (a statement over several lines, or several ``;``-statements on one
  line, count as a whole). Text after the codes is free (``# noqa: SC402 scaled by
  D_model on purpose``).
- ``# shapecheck: noqa: SC402`` anywhere in the file (or a bare ``# shapecheck:
  noqa``) suppresses them in the whole file.
- The codes that the settings turn off (``select``/``ignore``/``per-file-ignores``)
  are removed first.
- Only warnings and notes can be suppressed. An error means the spec is not
  shape-correct, so it stays, and a ``noqa`` that names an error code is itself
  reported (SC502). A suppression that suppresses nothing is reported (SC501, with
  a fix that removes it), and so is one that cannot be read (SC503).

One entry point, :func:`apply`; it runs last in :func:`shapecheck.api.check_text`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import field, replace
from functools import cache

from ..records import Record
from . import codes
from .diagnostics import Diagnostic, Edit, Fix, Severity, Span


# A directive starts the comment or follows a blank (`# why # noqa`), so that a
# comment that mentions `# noqa` in backticks is not one.
@cache  # compiled on first use: most runs never need it (issue 36)
def _file() -> re.Pattern[str]:
    return re.compile(r"(?:^|(?<=\s))#\s*shapecheck\s*:\s*noqa(?![\w`-])(?P<tail>\s*:?)",
                      re.IGNORECASE)


@cache  # compiled on first use: most runs never need it (issue 36)
def _line() -> re.Pattern[str]:
    return re.compile(r"(?:^|(?<=\s))#\s*noqa(?![\w`-])(?P<tail>\s*:?)", re.IGNORECASE)


@cache  # compiled on first use: most runs never need it (issue 36)
def _token() -> re.Pattern[str]:
    return re.compile(r"[^\s,]+")


@cache  # compiled on first use: most runs never need it (issue 36)
def _code_like() -> re.Pattern[str]:
    return re.compile(r"[A-Za-z]+[0-9]+")


class Directive(Record):
    """One ``noqa`` comment: where it is, which codes it names (None: all)."""

    line: int
    span: Span  # the directive, from its `#` to its last code
    codes: list[tuple[str, Span]] | None
    file_level: bool
    whole_comment: bool  # the comment holds nothing but the directive
    comment_start: int  # column of the comment's `#`
    code_end: int  # column after the last non-blank character before the comment
    line_end: int  # column after the line's last character
    used: set[str] = field(default_factory=set)


def apply(diagnostics: Sequence[Diagnostic], source: str, statement_spans: Iterable[Span],
          disabled: frozenset[str] = frozenset()) -> list[Diagnostic]:
    """The diagnostics that remain, plus those about the suppressions themselves."""
    kept = [d for d in diagnostics if d.is_error or d.code not in disabled]
    if "noqa" not in source and "NOQA" not in source.upper():
        return kept
    directives, problems = _directives(source)
    if not directives and not problems:
        return kept
    covered = _coverage(directives, statement_spans)
    remaining: list[Diagnostic] = []
    for diagnostic in kept:
        if diagnostic.is_error or not _suppress(diagnostic, directives, covered):
            remaining.append(diagnostic)
    remaining.extend(problems)
    remaining.extend(_reports(directives))
    file_codes = _file_codes(directives)
    remaining = [d for d in remaining if d.is_error or not (
        d.code in disabled or (d.code.startswith("SC5") and d.code in file_codes))]
    return sorted(remaining, key=lambda d: (d.span.line, d.span.column))


def _suppress(diagnostic: Diagnostic, directives: list[Directive],
              covered: dict[int, list[Directive]]) -> bool:
    hit = False
    candidates = [d for d in directives if d.file_level] + covered.get(diagnostic.span.line, [])
    for directive in candidates:
        if directive.codes is None:
            directive.used.add("*")
            hit = True
        elif any(code == diagnostic.code for code, _ in directive.codes):
            directive.used.add(diagnostic.code)
            hit = True
    return hit


def _file_codes(directives: list[Directive]) -> set[str]:
    found: set[str] = set()
    for directive in directives:
        if directive.file_level and directive.codes is not None:
            found.update(code for code, _ in directive.codes)
    return found


def _coverage(directives: list[Directive], spans: Iterable[Span]) -> dict[int, list[Directive]]:
    """Line -> the line directives that cover it (the whole statement they sit on)."""
    by_line: dict[int, list[Directive]] = {}
    for directive in directives:
        if not directive.file_level:
            by_line.setdefault(directive.line, []).append(directive)
    if not by_line:
        return {}
    covered: dict[int, list[Directive]] = {line: list(found) for line, found in by_line.items()}
    for span in spans:
        on_it = [d for line in range(span.line, span.end_line + 1) for d in by_line.get(line, ())]
        for directive in on_it:
            for line in range(span.line, span.end_line + 1):
                bucket = covered.setdefault(line, [])
                if directive not in bucket:
                    bucket.append(directive)
    return covered


# --- reading the comments ----------------------------------------------------------------


def _directives(source: str) -> tuple[list[Directive], list[Diagnostic]]:
    directives: list[Directive] = []
    problems: list[Diagnostic] = []
    for number, line in enumerate(source.split("\n"), start=1):
        start = comment_start(line)
        if start is None:
            continue
        comment = line[start:]
        file_level = _file().search(comment)
        match = file_level or _line().search(comment)
        if match is None:
            continue
        before = line[:start].rstrip()
        directive, problem = _read(number, line, start, match, file_level is not None,
                                   code_end=len(before) + 1)
        if problem is not None:
            problems.append(problem)
        if directive is not None:
            directives.append(directive)
    return directives, problems


def comment_start(line: str) -> int | None:
    """The index of the `#` that starts the line's comment (not one inside a string)."""
    return scan_line(line)[0]


def scan_line(line: str) -> tuple[int | None, bool]:
    """The index of the `#` that starts ``line``'s comment (None: no comment), and whether
    ``line`` (up to that `#`, or to its end) ends inside a string."""
    quote: str | None = None
    for index, char in enumerate(line):
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            return index, False
    return None, quote is not None


def _read(number: int, line: str, start: int, match: re.Match[str], file_level: bool,
          code_end: int) -> tuple[Directive | None, Diagnostic | None]:
    directive_start = start + match.start()
    after = start + match.end()
    has_colon = match.group("tail").strip() == ":"
    listed: list[tuple[str, Span]] = []
    end = after
    if has_colon:
        for token in _token().finditer(line, after):
            text = token.group()
            if not _code_like().fullmatch(text):
                break
            span = Span(number, token.start() + 1, number, token.end() + 1)
            if text.upper() not in codes.REGISTRY:
                return None, codes.BAD_SUPPRESSION.diag(
                    span, detail=codes.detail("noqa_unknown_code", code=text))
            listed.append((text.upper(), span))
            end = token.end()
        if not listed:
            span = Span(number, directive_start + 1, number, after + 1)
            return None, codes.BAD_SUPPRESSION.diag(span, detail=codes.detail("noqa_no_codes"))
    trailing = line[end:].strip()
    whole = trailing == "" and line[start:directive_start].strip("# \t") == ""
    span = Span(number, directive_start + 1, number, end + 1)
    return Directive(number, span, listed if has_colon else None, file_level, whole,
                     start + 1, code_end, len(line.rstrip("\r")) + 1), None


# --- reporting --------------------------------------------------------------------------------


def _reports(directives: list[Directive]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for directive in directives:
        text = _directive_text(directive)
        if directive.codes is None:
            if "*" not in directive.used:
                out.append(_unused(directive, directive.span, text))
            continue
        unused = []
        for code, span in directive.codes:
            if codes.REGISTRY[code].severity is Severity.ERROR:
                out.append(codes.ERROR_SUPPRESSED.diag(span, code=code))
            elif code not in directive.used:
                unused.append((code, span))
        if unused and len(unused) == len(directive.codes):
            out.append(_unused(directive, directive.span, text))
        else:
            out.extend(_unused(directive, span, f"{_prefix(directive)}: {code}", whole=False)
                       for code, span in unused)
    return out


def _prefix(directive: Directive) -> str:
    return "# shapecheck: noqa" if directive.file_level else "# noqa"


def _directive_text(directive: Directive) -> str:
    prefix = _prefix(directive)
    if directive.codes is None:
        return prefix
    return f"{prefix}: {', '.join(code for code, _ in directive.codes)}"


def _unused(directive: Directive, span: Span, text: str, *, whole: bool = True) -> Diagnostic:
    where = codes.detail("noqa_in_file" if directive.file_level else "noqa_on_statement")
    diagnostic = codes.UNUSED_SUPPRESSION.diag(
        span, directive=text, where=where, help=[codes.help_text("remove_noqa")])
    if not (whole and directive.whole_comment):
        return diagnostic
    if directive.code_end == 1:  # a comment on a line of its own: the whole line goes
        edit = Edit(Span(directive.line, 1, directive.line + 1, 1), "")
    else:  # the comment goes, and the blanks before it
        edit = Edit(Span(directive.line, directive.code_end, directive.line, directive.line_end), "")
    return replace(diagnostic, fixes=(Fix(diagnostic.help[0], (edit,)),))

