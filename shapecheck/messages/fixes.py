"""Applying fixes: the ``help:`` suggestions that are exact edits (``Diagnostic.fixes``).

``verify --fix`` writes them, ``verify --diff`` shows them, the language server
offers them as code actions; this module is the one place that turns fixes into
new text:

- Only **safe** fixes are applied automatically (``Fix.safe``), one per diagnostic
  (its first safe fix).
- Fixes whose edits **overlap** are not applied together: in one round, fixes are
  taken in the order of their first edit and one that touches a range an earlier
  one already changes waits for the next round.
- After each round the new text is **checked again** (the diagnostics and their
  fixes come from that check); the round is kept only if the fixes applied together
  leave the text better -- fewer diagnostics, none new (else its first fix that does
  so alone) -- and rounds repeat until no safe fix is left, the
  text stops changing, or :data:`MAX_ROUNDS` is reached -- a fixed point with a
  bound, so two fixes that undo each other cannot loop forever.

Positions are those of :class:`~shapecheck.diagnostics.Edit`: 1-based lines split
on ``\\n``, 1-based character columns, end exclusive, in the text as checked.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..records import Record
from .diagnostics import Diagnostic, Edit, Fix, Span

MAX_ROUNDS = 10


class Fixed(Record, frozen=True):
    """The outcome of fixing one text."""

    text: str
    applied: int  # fixes applied, over every round
    rounds: int

    def changed(self, original: str) -> bool:
        return self.text != original


def offsets(text: str) -> list[int]:
    """The offset at which each line starts (``\\n`` ends a line)."""
    starts = [0]
    position = text.find("\n")
    while position != -1:
        starts.append(position + 1)
        position = text.find("\n", position + 1)
    return starts


def to_offset(starts: list[int], text: str, line: int, column: int) -> int:
    """A (line, column) position as an offset into ``text``, clamped into the text."""
    if line < 1:
        return 0
    if line > len(starts):
        return len(text)
    start = starts[line - 1]
    end = starts[line] - 1 if line < len(starts) else len(text)  # the line's "\n"
    return min(max(start + column - 1, start), end)


def _range(starts: list[int], text: str, span: Span) -> tuple[int, int]:
    begin = to_offset(starts, text, span.line, span.column)
    end = to_offset(starts, text, span.end_line, span.end_column)
    if span.end_line > len(starts):  # past the last line: to the very end (a deleted line)
        end = len(text)
    return begin, max(begin, end)


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """``text`` with ``edits`` applied; they must not overlap (ValueError)."""
    starts = offsets(text)
    ranges = sorted((_range(starts, text, edit.span), index, edit.replacement)
                    for index, edit in enumerate(edits))
    out: list[str] = []
    position = 0
    for (begin, end), _, replacement in ranges:
        if begin < position:
            raise ValueError("overlapping edits")
        out.append(text[position:begin])
        out.append(replacement)
        position = end
    out.append(text[position:])
    return "".join(out)


def chosen(text: str, diagnostics: Sequence[Diagnostic], *, safe_only: bool = True) -> list[Fix]:
    """The fixes one round applies: the first (safe) fix of each diagnostic, in
    text order, leaving out any that overlaps one taken before it."""
    starts = offsets(text)
    candidates: list[tuple[tuple[int, int], Fix]] = []
    for diagnostic in diagnostics:
        fix = next((f for f in diagnostic.fixes if f.safe or not safe_only), None)
        if fix is None or not fix.edits:
            continue
        spans = [_range(starts, text, edit.span) for edit in fix.edits]
        candidates.append((min(spans), fix))
    taken: list[Fix] = []
    used: list[tuple[int, int]] = []
    for _, fix in sorted(candidates, key=lambda item: item[0]):
        spans = [_range(starts, text, edit.span) for edit in fix.edits]
        if any(_overlap(span, other) for span in spans for other in used):
            continue
        if any(_overlap(a, b) for i, a in enumerate(spans) for b in spans[i + 1:]):
            continue  # a fix whose own edits overlap is malformed: leave it
        taken.append(fix)
        used.extend(spans)
    return taken


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Two ranges overlap when they share a character; two insertions at one point,
    or an insertion inside a replaced range, count as overlapping too."""
    if a == b:
        return True
    return a[0] < b[1] and b[0] < a[1] or (a[0] == a[1] and b[0] < a[0] < b[1]) \
        or (b[0] == b[1] and a[0] < b[0] < a[1])


def fix_text(text: str, check: Callable[[str], Sequence[Diagnostic]],
             diagnostics: Sequence[Diagnostic] | None = None) -> Fixed:
    """Apply safe fixes to ``text`` until none is left (at most :data:`MAX_ROUNDS`).

    ``check`` re-checks a text and returns its diagnostics; ``diagnostics`` are those
    of ``text`` when the caller has them already. Each fix was verified alone; what is
    applied together is verified together: a round's fixes are kept only if the text
    they make is better (:func:`better`), else the first one that is better alone is
    applied, and the next round re-checks and takes the others from there.
    """
    current = text
    found = list(diagnostics) if diagnostics is not None else list(check(current))
    applied = 0
    rounds = 0
    seen = {current}
    while rounds < MAX_ROUNDS:
        fixes = chosen(current, found)
        if not fixes:
            break
        rounds += 1
        step = _better_step(current, found, fixes, check, seen)
        if step is None:
            break
        current, found, count = step
        seen.add(current)
        applied += count
    return Fixed(current, applied, rounds)


def _better_step(text: str, found: list[Diagnostic], fixes: list[Fix],
                 check: Callable[[str], Sequence[Diagnostic]],
                 seen: set[str]) -> tuple[str, list[Diagnostic], int] | None:
    """The round's fixes together, or else the first alone, that make the text better."""
    tries = [fixes] if len(fixes) == 1 else [fixes, *([fix] for fix in fixes)]
    for subset in tries:
        after = apply_edits(text, [edit for fix in subset for edit in fix.edits])
        if after == text or after in seen:  # no progress, or back to an earlier text
            continue
        diagnostics = list(check(after))
        if better(text, found, after, diagnostics):
            return after, diagnostics, len(subset)
    return None


def better(before: str, found: Sequence[Diagnostic], after: str,
           diagnostics: Sequence[Diagnostic]) -> bool:
    """``after`` (with ``diagnostics``) is better than ``before`` (with ``found``): fewer
    diagnostics, and none that was not there before -- warnings and notes count, and so
    does an error a fix would expose that another error hid. A diagnostic is known by its
    code and the text it underlines (positions move with the edits; a counterexample in
    a message may change when a constraint is added)."""
    from collections import Counter

    old = Counter(_keys(before, found))
    new = Counter(_keys(after, diagnostics))
    return sum(new.values()) < sum(old.values()) and not (new - old)


def _keys(text: str, diagnostics: Sequence[Diagnostic]) -> list[tuple[str, str]]:
    starts = offsets(text)
    keys = []
    for diagnostic in diagnostics:
        start, end = _range(starts, text, diagnostic.span)
        keys.append((diagnostic.code, text[start:end]))
    return keys


def unified_diff(path: str, before: str, after: str) -> str:
    """``--diff``: a unified diff of one file (``--- path`` / ``+++ path``)."""
    import difflib

    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=path, tofile=path)
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
