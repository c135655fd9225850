"""The human format: a rustc/ruff-style frame per diagnostic and a one-line verdict.

::

    attn/bad.attn:11:5: error[SC301]: inner dimensions of `@` differ: ...
      --> attn/bad.attn:11:5
       |
    11 | S = Q @ K / sqrt(d)
       |     ^^^^^
       |
    note: `K` is declared here as [N, d]
      --> attn/bad.attn:8:1
       |
     8 | input K: [N, d]
       | ---------------
       |
    help: did you mean `Q @ K.T`?
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages.diagnostics import Diagnostic, FileResult, Note, Severity, Span
from ..records import Record
from .common import WORDS, Totals, plural
from .source import Excerpt, SourceLines, printable, printable_line

RESET = "\x1b[0m"
BOLD = "1"
GUTTER = "1;34"  # blue, as rustc and ruff draw the frame
LABEL = "1;36"  # note:, help:
SEVERITY_STYLE: dict[Severity, str] = {
    Severity.ERROR: "1;31",
    Severity.WARNING: "1;33",
    Severity.NOTE: "1;36",
}
PRIMARY_MARK = "^"
SECONDARY_MARK = "-"


class Palette(Record, frozen=True, slots=True):
    """ANSI styling, or none at all: the caller decides (a terminal, no NO_COLOR)."""

    enabled: bool

    def paint(self, text: str, style: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\x1b[{style}m{text}{RESET}"


def render_text(results: list[FileResult], *, color: bool, fail_on: str,
                notices: Sequence[Diagnostic] = (), quiet: bool = False) -> str:
    palette = Palette(color)
    blocks: list[str] = []
    for result in results:
        lines = SourceLines(result.source)
        path = printable_line(result.path)
        for diagnostic in result.diagnostics:
            blocks.append(render_diagnostic(diagnostic, path, lines, color=color) + "\n")
    blocks.extend(_notice(notice, palette) + "\n" for notice in notices)
    if not quiet:
        # what a whole model's target covered, then the verdict
        covered = "".join(printable(r.covered) + "\n" for r in results if r.covered)
        blocks.append(covered + palette.paint(summary_line(Totals.of(results, notices), fail_on),
                                              BOLD) + "\n")
    return "\n".join(blocks)


def _notice(notice: Diagnostic, palette: Palette) -> str:
    """A problem of the run, not of a file: `warning[SC207]: message`, then help."""
    kind = palette.paint(f"{notice.severity.value}[{printable_line(notice.code)}]",
                         SEVERITY_STYLE[notice.severity])
    out = [f"{kind}{palette.paint(': ' + printable(notice.message), BOLD)}"]
    out.extend(_labelled("help", line, palette) for line in notice.help)
    return "\n".join(out)


def summary_line(totals: Totals, fail_on: str) -> str:
    """The verdict: counts, worded so that it agrees with the exit status."""
    if totals.files == 0:
        return WORDS["no_files"]
    files = plural(totals.files, "file")
    if not totals.failed(fail_on):
        verified = WORDS["verified_all" if totals.files > 1 else "verified_one"].format(files=files)
        if totals.warnings:
            return WORDS["verified_with"].format(verified=verified,
                                                 warnings=plural(totals.warnings, "warning"))
        return WORDS["verified"].format(verified=verified)
    found = WORDS["found"].format(errors=plural(totals.errors, "error"),
                                  warnings=plural(totals.warnings, "warning"), files=files)
    return WORDS["found_end"].format(found=found)


def render_diagnostic(diagnostic: Diagnostic, path: str, lines: SourceLines, *,
                      color: bool = False) -> str:
    """One diagnostic as ``verify`` prints it: header, code frame, notes and ``help:`` lines
    (no trailing newline). ``path`` is shown as given; the report uses this too, uncoloured."""
    palette = Palette(color)
    span = diagnostic.span
    width = _gutter_width(diagnostic)
    out = [_header(diagnostic, path, palette)]
    primary = lines.excerpt(span)
    if primary is not None:
        out.append(_arrow(path, span, width, palette))
        out.extend(
            _snippet(primary, width, PRIMARY_MARK, SEVERITY_STYLE[diagnostic.severity], palette)
        )
    for note in diagnostic.notes:
        out.extend(_note(note, path, lines, width, palette))
    for line in diagnostic.help:
        out.append(_labelled("help", line, palette))
    return "\n".join(line.rstrip() for line in out)


def _header(diagnostic: Diagnostic, path: str, palette: Palette) -> str:
    span = diagnostic.span
    where = palette.paint(f"{path}:{span.line}:{span.column}:", BOLD)
    kind = palette.paint(
        f"{diagnostic.severity.value}[{printable_line(diagnostic.code)}]",
        SEVERITY_STYLE[diagnostic.severity],
    )
    message = palette.paint(f": {printable(diagnostic.message)}", BOLD)
    return f"{where} {kind}{message}"


def _note(note: Note, path: str, lines: SourceLines, width: int, palette: Palette) -> list[str]:
    out = [_labelled("note", note.message, palette)]
    if note.span is None:
        return out
    out.append(_arrow(path, note.span, width, palette))
    excerpt = lines.excerpt(note.span)
    if excerpt is not None:
        out.extend(_snippet(excerpt, width, SECONDARY_MARK, LABEL, palette))
    return out


def _labelled(label: str, text: str, palette: Palette) -> str:
    return f"{palette.paint(label + ':', LABEL)} {printable(text)}"


def _arrow(path: str, span: Span, width: int, palette: Palette) -> str:
    return f"{' ' * width}{palette.paint('-->', GUTTER)} {path}:{span.line}:{span.column}"


def _snippet(excerpt: Excerpt, width: int, mark: str, style: str, palette: Palette) -> list[str]:
    bar = f"{' ' * width} {palette.paint('|', GUTTER)}"
    number = palette.paint(f"{excerpt.line:>{width}} |", GUTTER)
    underline = palette.paint(mark * excerpt.width, style)
    if excerpt.continues_to is not None:
        underline += " " + palette.paint(WORDS["continues"].format(line=excerpt.continues_to), style)
    return [
        bar,
        f"{number} {excerpt.text}",
        f"{bar} {' ' * excerpt.start}{underline}",
        bar,
    ]


def _gutter_width(diagnostic: Diagnostic) -> int:
    """Digits of the largest line number the diagnostic shows, so all its bars align."""
    numbers = [diagnostic.span.line]
    numbers.extend(note.span.line for note in diagnostic.notes if note.span is not None)
    return max(len(str(number)) for number in numbers)
