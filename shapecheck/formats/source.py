"""Source lines for code frames: where a span falls on screen, safely printable.

Columns are 1-based code points (as the parser counts them), end column
exclusive. On screen a tab takes four cells, a wide (East Asian) character two,
a combining mark none, control characters are shown as visible symbols, and
invisible ones (bidi controls, zero-width spaces and joiners, the soft hyphen)
by their code point, ``<U+200B>``: a spec file must never be able to drive the
terminal or hide text from its reader.
"""

from __future__ import annotations

import unicodedata

from ..messages.diagnostics import Span
from ..records import Record

TAB = "    "
#: Lines longer than this (in characters) are shown as a window around the span.
MAX_SHOWN = 160
#: How much of the line before the span a window keeps.
LEAD = 40
ELLIPSIS = "…"

_REPLACEMENT = "\ufffd"


# Characters that show nothing, or nothing that tells them apart (format characters such as
# zero-width spaces and joiners, the soft hyphen and the byte order mark are category Cf;
# these are the invisible ones outside it).
_INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180e\u3164\uffa0")


def is_invisible(char: str) -> bool:
    """A character that hides or reorders text without showing itself: zero-width spaces
    and joiners, the soft hyphen, bidi controls, the byte order mark, tag characters, fillers."""
    return char in _INVISIBLE or unicodedata.category(char) == "Cf"


def display_char(char: str) -> str:
    """How one character is printed in a frame, a message or a report."""
    if char == "\t":
        return TAB
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␛, ␍, ...
    if code == 0x7F:
        return "\u2421"  # ␡
    if is_invisible(char):  # the bidi controls (the "Trojan Source" set) among them
        return f"<U+{code:04X}>"  # shown by name: a reader must see that it is there
    if unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp"):
        return _REPLACEMENT
    return char


def cell_width(char: str) -> int:
    """Terminal cells taken by ``display_char(char)``."""
    shown = display_char(char)
    if shown != char:
        return len(shown)
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def printable(text: str) -> str:
    """``text`` with every character made safe to print; newlines are kept."""
    return "\n".join("".join(display_char(char) for char in line) for line in text.split("\n"))


def printable_line(text: str) -> str:
    """``text`` made safe to print on one line (a newline shows as ␊)."""
    return "".join(display_char(char) for char in text)


def cells(text: str) -> int:
    return sum(cell_width(char) for char in text)


class Excerpt(Record, frozen=True, slots=True):
    """One source line ready to print, and where the underline goes under it."""

    line: int
    text: str
    start: int  # cells before the underline
    width: int  # cells underlined, at least 1
    continues_to: int | None  # the span's last line, when it goes on past this one


class SourceLines:
    """The lines of a file, split the way the parser counts them (on ``\\n``)."""

    def __init__(self, source: str | None) -> None:
        self._lines = None if source is None else source.split("\n")

    def get(self, number: int) -> str | None:
        if self._lines is None or not 1 <= number <= len(self._lines):
            return None
        return self._lines[number - 1].removesuffix("\r")

    def excerpt(self, span: Span) -> Excerpt | None:
        """The first line of ``span``, or None when the span is not in the text."""
        raw = self.get(span.line)
        if raw is None or not 1 <= span.column <= len(raw) + 1:
            return None
        begin = span.column - 1
        end = _end_on_line(span, len(raw))
        continues_to = span.end_line if span.end_line > span.line else None
        lo, hi = _window(len(raw), begin)
        prefix = ELLIPSIS if lo > 0 else ""
        suffix = ELLIPSIS if hi < len(raw) else ""
        text = prefix + "".join(display_char(char) for char in raw[lo:hi]) + suffix
        start = cells(prefix) + cells(raw[lo:begin])
        width = max(1, cells(raw[begin : min(end, hi)]))
        return Excerpt(span.line, text, start, width, continues_to)


def _end_on_line(span: Span, length: int) -> int:
    """The 0-based exclusive end of the span on its first line."""
    begin = span.column - 1
    if span.end_line > span.line:
        return length
    if span.end_line < span.line:
        return begin  # a malformed span: mark its start only
    return min(max(span.end_column - 1, begin), length)


def _window(length: int, begin: int) -> tuple[int, int]:
    """The character range shown of a line: all of it, or MAX_SHOWN around ``begin``."""
    if length <= MAX_SHOWN:
        return 0, length
    lo = max(0, min(begin - LEAD, length - MAX_SHOWN))
    return lo, lo + MAX_SHOWN
