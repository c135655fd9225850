"""Verified fixes (issue 7): a `help:` that comes with an edit is offered only when the edited
spec re-checks clean: the diagnostic it is for is gone, and no diagnostic (warnings and
notes included) appears that was not there before.

The passes attach *candidate* fixes to their diagnostics (``Diagnostic.fixes``, each
with its help line, most likely first): `K` -> `K.T`, the operands swapped, a weight
declared the other way round, a misspelled name, the weakest constraint with the dims
it needs. :func:`verified` applies each candidate to the text, re-checks, and keeps it
only if the diagnostic it fixes is gone and no new error appeared; of those, the first
that leaves no error at all in what was re-checked (the whole spec verifies, as far as
it goes). A rejected candidate's help line is not shown; help lines without an edit
(bind a dim with `--dim`) are advice and stay.

**What is re-checked, and the cost.** An edit inside tensor statements is re-parsed
alone and checked in a slice: the edited statements, the statement of the diagnostic,
and the statements that use what they define, transitively, at most MAX_SLICE of them,
against the spec's dims and the tensors it already knows
(``Program.recheck_statements``); a value changes only what reads it. A new `dim` or
`constraint`, or an edit of one, changes what every statement may prove (it also
repairs the other statements that needed it, and what they feed): the whole edited
spec is checked again as the original was (``check_whole``: bindings, defaults,
inference), once per edit whatever diagnostics suggested it. An edit of the text
between statements (deleting an invisible character in a comment, a `# noqa` that
suppresses nothing) leaves every statement and so every diagnostic about one as it was:
it is right when its diagnostic is about the text it removes.
Each file gets a budget of statements re-checked, proportional to its size
(``WORK_PER_STATEMENT`` each, and ``MIN_WORK``), so that many errors in a large file
cost a small multiple of one check, never a square; a candidate past the budget is
not verified, and not shown.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import replace

from ..records import Record
from ..syntax import nodes
from ..messages.diagnostics import VERSION_MARK, Diagnostic, Edit, Fix, Span
from ..syntax.parser import Chunk, parse_chunk
from ..syntax.spellings import has_spelling
from ..check.program import Program

MAX_SLICE = 32
_BROKEN: list[tuple[str, int, int, bool]] = []  # an inserted line has a problem of its own
WORK_PER_STATEMENT = 8
MIN_WORK = 400

_DIM_PHASE = (nodes.DimFree, nodes.DimDef, nodes.Constraint, nodes.Broken)


CheckWhole = Callable[[str], Sequence[Diagnostic]]
"""Checks an edited spec as the original was checked (bindings, defaults, inference,
suppressions): its diagnostics."""


def verified(program: Program, check_whole: CheckWhole) -> list[Diagnostic]:
    """The program's diagnostics, each with only the fixes that re-check clean."""
    if program.recheck_statements is None or not any(d.fixes for d in program.diagnostics):
        return program.diagnostics
    verifier = _Verifier(program, check_whole)
    return [verifier.diagnostic(d) if d.fixes else d for d in program.diagnostics]


class _Outcome(Record, frozen=True):
    ok: bool
    errors_left: int = 0


class _Verifier:
    def __init__(self, program: Program, check_whole: CheckWhole) -> None:
        from ..messages.fixes import offsets  # only a spec with a candidate fix gets here: not at start-up

        self.program = program
        self.check_whole = check_whole
        self.source = program.source
        self.lines = self.source.split("\n")
        self.line_starts = offsets(self.source)
        self.statements = program.statements
        self.starts = [(s.span.line, s.span.column) for s in self.statements]
        self.readers: dict[str, list[int]] = {}
        self.definer: dict[str, int] = {}  # the statement that defines a name first
        for index, statement in enumerate(self.statements):
            for name in _read(statement):
                self.readers.setdefault(name, []).append(index)
            for name in _defined(statement):
                self.definer.setdefault(name, index)
        self.work_left = max(MIN_WORK, WORK_PER_STATEMENT * len(self.statements))
        self.outcomes: dict[tuple[Edit, ...], _Outcome | None] = {}
        self.whole: dict[tuple[Edit, ...], list[tuple[str, int, int, bool]] | None] = {}

    # --- choosing ---------------------------------------------------------------------

    def diagnostic(self, diagnostic: Diagnostic) -> Diagnostic:
        best: tuple[bool, int, Fix] | None = None
        for order, fix in enumerate(diagnostic.fixes):
            outcome = self.outcome(diagnostic, fix)
            if outcome is None or not outcome.ok:
                continue
            key = (outcome.errors_left > 0, order, fix)
            if best is None or key[:2] < best[:2]:
                best = key
            if outcome.errors_left == 0:
                break  # the whole slice verifies: no later candidate can do better
        candidates = {fix.help for fix in diagnostic.fixes}
        helps = [h for h in diagnostic.help if h not in candidates]
        if best is None:
            return replace(diagnostic, help=tuple(helps), fixes=())
        chosen = best[2]
        # The verified help takes the place of the first candidate's.
        first = next((i for i, h in enumerate(diagnostic.help) if h in candidates), len(helps))
        position = sum(1 for h in diagnostic.help[:first] if h not in candidates)
        helps.insert(position, chosen.help)
        return replace(diagnostic, help=tuple(helps), fixes=(chosen,))

    def outcome(self, diagnostic: Diagnostic, fix: Fix) -> _Outcome | None:
        key = (*fix.edits, Edit(diagnostic.span, diagnostic.code))
        if key not in self.outcomes:
            self.outcomes[key] = self._evaluate(diagnostic, fix)
        return self.outcomes[key]

    # --- re-checking -------------------------------------------------------------------

    def _evaluate(self, diagnostic: Diagnostic, fix: Fix) -> _Outcome | None:
        edits = sorted(fix.edits, key=lambda e: (e.span.line, e.span.column))
        if not edits or any(not self._valid(e) for e in edits) or _overlap(edits):
            return _Outcome(False)
        edited = self._apply(edits)
        target = self._statement_at(diagnostic.span)
        inserted = [e for e in edits if self._is_anchor(e)]
        in_place = [e for e in edits if not self._is_anchor(e)]
        touched = sorted({self._statement_containing(e.span) for e in in_place},
                         key=lambda i: -1 if i is None else i)
        if len(edits) == 1 and target is None and self._between_statements(edits[0]) \
                and _about_the_text(diagnostic, edits[0]):
            # Every statement stays as it was, so does every diagnostic about one.
            return _Outcome(True)
        if inserted or None in touched or self.program.inferred is not None or any(
                isinstance(self.statements[i], _DIM_PHASE)
                for i in [*touched, target] if i is not None):
            # What the dims mean changes, so any statement may (a new constraint also
            # repairs the other statements that needed it, and what they feed); in a
            # sketch, what is inferred may change.
            return self._whole(diagnostic, edited, edits)
        if any(VERSION_MARK in name for name in self.program.tensors):
            # Rebound names are versions (shapecheck.versions), numbered over the whole
            # file: a statement parsed alone cannot say which version it means.
            return self._whole(diagnostic, edited, edits)
        return self._local(diagnostic, edited, in_place, [i for i in touched if i is not None],
                           target, edits)

    def _local(self, diagnostic: Diagnostic, edited: str, in_place: list[Edit],
               touched: list[int], target: int | None,
               edits: list[Edit]) -> _Outcome | None:
        new_statements: dict[int, nodes.Stmt] = {}
        for index in touched:
            parsed = self._reparse(index, edited, in_place)
            if parsed is None:
                return _Outcome(False)  # the edit does not even parse
            if isinstance(parsed, (nodes.Write, nodes.Unpack)) or has_spelling(parsed):
                return self._whole(diagnostic, edited, edits)  # lowered with the file
            new_statements[index] = parsed
        seeds = set(touched) | ({target} if target is not None else set())
        slice_indices = self._slice(seeds, new_statements)
        if any(isinstance(self.statements[i], _DIM_PHASE) for i in slice_indices):
            # A dim statement reads what the edit changes (a tensor's name): the dims may
            # change, so the whole spec is checked again.
            return self._whole(diagnostic, edited, in_place)
        if len(slice_indices) > self.work_left:
            return None
        self.work_left -= len(slice_indices)
        # The slice defines again what its statements defined first (and the new names
        # an edit gives them), so the tensors of the spec leave those out.
        redefined = {name for index in slice_indices for name in _defined(self.statements[index])
                     if self.definer.get(name) == index}
        redefined |= {name for index in touched for name in _defined(new_statements[index])
                      if self.definer.get(name, index) == index}
        checked = [new_statements.get(i, self.statements[i]) for i in slice_indices]
        assert self.program.recheck_statements is not None
        found = self.program.recheck_statements(edited, checked, redefined)
        after: list[tuple[str, int, int, bool]] = []
        for index, diagnostics in zip(slice_indices, found):
            for d in diagnostics:
                line, column = d.span.line, d.span.column
                if index in new_statements:
                    column = _original_column(line, column, in_place)
                after.append((d.code, line, column, d.is_error))
        before = {(d.code, d.span.line, d.span.column) for d in self.program.diagnostics
                  if self._statement_at(d.span) in slice_indices}
        return _judge(diagnostic, after, before)

    def _whole(self, diagnostic: Diagnostic, edited: str, edits: list[Edit]) -> _Outcome | None:
        """Check the whole edited spec (once per edit, whatever diagnostic it is for)."""
        key = tuple(edits)
        if key not in self.whole:
            self.whole[key] = self._check_whole(edited, edits)
        after = self.whole[key]
        if after is None:
            return None
        if after is _BROKEN:
            return _Outcome(False)
        before = {(d.code, d.span.line, d.span.column) for d in self.program.diagnostics}
        outcome = _judge(diagnostic, after, before)
        if not outcome.ok:
            return outcome
        # Errors left count as for an edit checked in a slice: in the statement of the
        # diagnostic and what it feeds (errors elsewhere in the file are no measure of
        # this fix, and would make every whole-spec fix look worse than a local one).
        target = self._statement_at(diagnostic.span)
        near = set(self._slice({target}, {})) if target is not None else set()
        return _Outcome(True, sum(1 for code, line, column, is_error in after if is_error
                                  and self._statement_at(Span(line, column, line, column)) in near))

    def _check_whole(self, edited: str,
                     edits: list[Edit]) -> list[tuple[str, int, int, bool]] | None:
        if len(self.statements) > self.work_left:
            return None
        self.work_left -= len(self.statements)
        found = self.check_whole(edited)
        # Lines an inserted dim or constraint takes: (first, count); later lines move down.
        new_lines = [lines for e in edits if (lines := self._insertion(e)) is not None]
        in_place = [e for e in edits if not self._is_anchor(e)]
        after = []
        for d in found:
            line, column = d.span.line, d.span.column
            for first, count in new_lines:
                if first <= line < first + count:
                    return _BROKEN  # a problem in the inserted lines themselves
                if line >= first + count:
                    line -= count
            after.append((d.code, line, _original_column(line, column, in_place), d.is_error))
        return after

    def _slice(self, seeds: set[int], new_statements: dict[int, nodes.Stmt]) -> list[int]:
        """The seeds and the statements that use what they define, transitively (in file
        order, at most MAX_SLICE)."""
        chosen = set(seeds)
        pending = sorted(seeds)
        while pending and len(chosen) < MAX_SLICE:
            index = pending.pop(0)
            names = _defined(self.statements[index])
            if index in new_statements:
                names |= _defined(new_statements[index])
            for name in names:
                for reader in self.readers.get(name, ()):
                    if reader not in chosen and len(chosen) < MAX_SLICE:
                        chosen.add(reader)
                        pending.append(reader)
        return sorted(chosen)

    # --- text and positions ---------------------------------------------------------------

    def _offset(self, line: int, column: int) -> int:
        return self.line_starts[line - 1] + column - 1

    def _valid(self, edit: Edit) -> bool:
        span = edit.span
        if not 1 <= span.line <= span.end_line <= len(self.lines):
            return False
        return 1 <= span.column <= len(self.lines[span.line - 1]) + 1 \
            and 1 <= span.end_column <= len(self.lines[span.end_line - 1]) + 1

    def _apply(self, edits: list[Edit]) -> str:
        """The edited text, exactly as `verify --fix` will write it."""
        from ..messages.fixes import apply_edits

        return apply_edits(self.source, edits)

    def _is_anchor(self, edit: Edit) -> bool:
        return self._insertion(edit) is not None

    def _insertion(self, edit: Edit) -> tuple[int, int] | None:
        """For an edit that inserts whole lines (new dims and constraints: at the end of a
        line, or at the start of one), the first new line and how many there are."""
        span, text = edit.span, edit.replacement
        if (span.line, span.column) != (span.end_line, span.end_column) or "\n" not in text:
            return None
        if span.column == len(self.lines[span.line - 1].rstrip("\r")) + 1 \
                and text.startswith(("\n", "\r\n")):
            return span.line + 1, text.count("\n")
        if span.column == 1 and text.endswith("\n"):
            return span.line, text.count("\n")
        return None

    def _between_statements(self, edit: Edit) -> bool:
        """The edit touches no statement (it is in a comment or a blank)."""
        span = edit.span
        index = bisect.bisect_right(self.starts, (span.line, span.column)) - 1
        if index >= 0:
            previous = self.statements[index].span
            if (previous.end_line, previous.end_column) > (span.line, span.column):
                return False
        return index + 1 >= len(self.starts) \
            or self.starts[index + 1] >= (span.end_line, span.end_column)

    def _statement_at(self, span: Span) -> int | None:
        return self._statement_containing(Span(span.line, span.column, span.line, span.column))

    def _statement_containing(self, span: Span) -> int | None:
        index = bisect.bisect_right(self.starts, (span.line, span.column)) - 1
        if index < 0:
            return None
        statement = self.statements[index].span
        if (span.end_line, span.end_column) <= (statement.end_line, statement.end_column):
            return index
        return None

    def _reparse(self, index: int, edited: str, edits: list[Edit]) -> nodes.Stmt | None:
        """The edited statement, parsed alone, its positions as in the edited text."""
        span = self.statements[index].span
        start = self._offset(span.line, span.column)
        end = self._offset(span.end_line, span.end_column)
        inside = [e for e in edits if start <= self._offset(e.span.line, e.span.column) <= end]
        before = [e for e in edits if e not in inside
                  and self._offset(e.span.end_line, e.span.end_column) <= start]
        delta_before = sum(len(e.replacement) - self._length(e) for e in before)
        delta_inside = sum(len(e.replacement) - self._length(e) for e in inside)
        text = edited[start + delta_before: end + delta_before + delta_inside]
        column = span.column + sum(len(e.replacement) - self._length(e) for e in before
                                   if e.span.end_line == span.line)
        return _parse_one(text, span.line, column)

    def _length(self, edit: Edit) -> int:
        return self._offset(edit.span.end_line, edit.span.end_column) \
            - self._offset(edit.span.line, edit.span.column)


def _parse_one(text: str, line: int, column: int) -> nodes.Stmt | None:
    """One statement, with its positions as if it stood at (line, column) of the file;
    None if it does not parse."""
    span = Span(line, column, line, column)
    statement, problem = parse_chunk(Chunk(text, line, column, span, (), False))
    return None if problem is not None or isinstance(statement, nodes.Broken) else statement


def _about_the_text(diagnostic: Diagnostic, edit: Edit) -> bool:
    """The diagnostic is about the text the edit replaces (an invisible character,
    a `# noqa` that suppresses nothing), within one line."""
    span, at = diagnostic.span, edit.span
    return at.line == at.end_line and "\n" not in edit.replacement \
        and (at.line, at.column) <= (span.line, span.column) \
        and (span.end_line, span.end_column) <= (at.end_line, at.end_column)


def _judge(diagnostic: Diagnostic, after: Sequence[tuple[str, int, int, bool]],
           before: set[tuple[str, int, int]]) -> _Outcome:
    """Fixed: the diagnostic is gone and every diagnostic left, warnings and notes
    included, was there before: a fix leaves the file better (issue 18)."""
    target = (diagnostic.code, diagnostic.span.line, diagnostic.span.column)
    if any((code, line, column) == target for code, line, column, _ in after):
        return _Outcome(False)
    if any((code, line, column) not in before for code, line, column, _ in after):
        return _Outcome(False)
    return _Outcome(True, sum(1 for *_, is_error in after if is_error))


def _original_column(line: int, column: int, edits: Sequence[Edit]) -> int:
    """A column of the edited text, in the text before the edits (single-line edits)."""
    shift = 0
    for edit in sorted((e for e in edits if e.span.line == line == e.span.end_line),
                       key=lambda e: e.span.column):
        start = edit.span.column + shift
        new_end = start + len(edit.replacement)
        old_length = edit.span.end_column - edit.span.column
        if column < new_end and column >= start:
            return edit.span.column
        if column >= new_end:
            shift += len(edit.replacement) - old_length
    return column - shift


def _read(statement: nodes.Stmt) -> frozenset[str]:
    """The names a statement reads: those in its expressions and shapes, and the tensor an
    `assert S: [...]` or a bare `output S: [...]` checks (an ``Ident``, not a ``Name``).

    Remembered per statement tree: an editor verifies a fix on most changes that leave an
    error, and its parser keeps the trees of the statements an edit did not touch, so the
    index of who reads what (a walk of every tree, ~12 ms at 1,000 statements) is mostly
    read back (issue 36)."""
    known = _READ.get(id(statement))
    if known is not None and known[0] is statement:
        return known[1]
    names = set(nodes.names_in(statement))
    if isinstance(statement, nodes.Assert) or (
            isinstance(statement, nodes.Output) and statement.value is None):
        names.add(statement.name.name)
    if len(_READ) >= _READ_LIMIT:
        _READ.clear()
    found = frozenset(names)
    _READ[id(statement)] = (statement, found)  # the tree held, so that its id stays its own
    return found


# id(statement) -> (the statement, the names it reads); cleared when it grows past the limit.
_READ: dict[int, tuple[nodes.Stmt, frozenset[str]]] = {}
_READ_LIMIT = 50_000


def _defined(statement: nodes.Stmt) -> set[str]:
    if isinstance(statement, nodes.DimFree):
        return {ident.name for ident in statement.names}
    if isinstance(statement, (nodes.DimDef, nodes.TensorDecl, nodes.Define)) or (
            isinstance(statement, nodes.Output) and statement.value is not None):
        return {statement.name.name}
    return set()


def _overlap(edits: list[Edit]) -> bool:
    return any((b.span.line, b.span.column) < (a.span.end_line, a.span.end_column)
               for a, b in zip(edits, edits[1:]))
