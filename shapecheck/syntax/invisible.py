"""Invisible characters (SC005): a spec must not look different from what it is.

Zero-width characters, soft hyphens, bidirectional controls (the "Trojan Source"
trick: an override that reorders what an editor shows) and other characters that
print as nothing are reported wherever they are, comments and strings included,
one warning per run of them, located exactly and with the character named
(`U+200B ZERO WIDTH SPACE`). A name cannot contain them (they are not letters or
digits to the grammar, so such a name is a syntax error as well).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache

from ..messages import codes
from ..messages.diagnostics import Diagnostic, Edit, Fix, Span
from ..messages.suppress import scan_line

# Unicode's format characters (category Cf: soft hyphen, zero-width characters, bidi
# controls, word joiner, invisible operators, tags, ...; Unicode 15.1, a superset of what
# Python 3.10's tables hold, and tests/test_invisible_characters.py holds it against them) and the
# few other characters that draw nothing (a combining grapheme joiner, Hangul fillers,
# Khmer inherent vowels). Written out: deriving it scans a million code points per start.
_CLASS = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
    "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0"
)


def _members(spec: str) -> frozenset[str]:
    """The characters of a character class's body (single characters and ``a-b`` ranges)."""
    found: set[str] = set()
    index = 0
    while index < len(spec):
        if index + 2 < len(spec) and spec[index + 1] == "-":
            found.update(map(chr, range(ord(spec[index]), ord(spec[index + 2]) + 1)))
            index += 3
        else:
            found.add(spec[index])
            index += 1
    return frozenset(found)


# Each character of the class: a text holding none of them (every correct spec) is never
# searched with the pattern, whose compilation is ~1.5M instructions of a cold start (issue 36).
MEMBERS = _members(_CLASS)


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern[str]:
    return re.compile(f"[{_CLASS}]+")
# Past this many runs in one file, one more warning says how many were left out.
MAX_REPORTED = 20


def find(text: str, code_spans: list[tuple[int, int]] | None = None) -> list[Diagnostic]:
    """SC005 for every run of invisible characters in ``text``."""
    diagnostics: list[Diagnostic] = []
    runs = list(_runs(text))
    for start, end in runs[:MAX_REPORTED]:
        diagnostics.append(_diagnostic(text, start, end))
    if len(runs) > MAX_REPORTED:
        start, end = runs[MAX_REPORTED]
        diagnostics.append(codes.INVISIBLE.diag(
            _span(text, start, end), character=_name(text[start]),
            where=codes.detail("invisible_more", count=len(runs) - MAX_REPORTED)))
    return diagnostics


def _runs(text: str) -> Iterator[tuple[int, int]]:
    if MEMBERS.isdisjoint(text):
        return
    for match in _pattern().finditer(text):
        start, end = match.span()
        if start == 0 and text[0] == "\ufeff":  # a byte order mark leading the file
            start += 1
            if start == end:
                continue
        yield start, end


def _diagnostic(text: str, start: int, end: int) -> Diagnostic:
    span = _span(text, start, end)
    count = end - start
    where = codes.detail(_where(text, start)) if count == 1 else codes.detail(
        "invisible_run", count=count, where=codes.detail(_where(text, start)))
    help_text = codes.help_text("delete_invisible")
    diagnostic = codes.INVISIBLE.diag(span, character=_name(text[start]), where=where,
                                      help=[help_text])
    # Deleting it is always what the warning asks, and never changes what the spec says
    # (it is no part of any token): offered as an exact edit.
    return _with_fix(diagnostic, Fix(help_text, (Edit(span, ""),)))


def _with_fix(diagnostic: Diagnostic, fix: Fix) -> Diagnostic:
    from dataclasses import replace

    return replace(diagnostic, fixes=(fix,))


def _name(character: str) -> str:
    name = unicodedata.name(character, "")
    return f"U+{ord(character):04X} {name}" if name else f"U+{ord(character):04X}"


def _where(text: str, offset: int) -> str:
    """`invisible_in_comment`, `invisible_in_string` or `invisible_in_code`."""
    comment, in_string = scan_line(text[text.rfind("\n", 0, offset) + 1:offset])
    if comment is not None:
        return "invisible_in_comment"
    return "invisible_in_string" if in_string else "invisible_in_code"


def _span(text: str, start: int, end: int) -> Span:
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return Span(line, column, line, column + (end - start))
