"""Checking a spec again after an edit, re-checking only what the edit can change.

An editor checks the same document again and again, a statement or two different
each time. :class:`Memo` drives a :class:`~shapecheck.checker.Checker` through its
``start`` / ``check`` / ``finish`` steps and remembers, for each tensor statement
(by the identity of its syntax tree, which :class:`shapecheck.lsp.analysis.IncrementalParser`
keeps for a statement whose text did not change), what checking it did to the
checker's tables. The next time, a statement whose tree is the same object and
whose *inputs* are equal is not checked: its recorded effect is applied instead.
The result is the program a full check gives — same shapes, same diagnostics, same
tables (``tests/test_incremental.py`` compares them after series of edits).

**What a statement's check reads** (its inputs), for every name the statement
mentions: what the name is so far (a dim, a tensor, unknown), the kind and type of
the tensor it names, and where the name is first defined relative to the statement
(here, above, below: redefinitions and uses above a definition depend on it). Besides
those, only the dims and constraints (the :class:`~shapecheck.symbolic.DimSystem`)
— checked first, always again (they are few): when the text of any dim statement
or the bindings differ from the last check, nothing is reused.

**What it writes** (its effect): new entries in the name table and in every table of
the program (tensors, the types of its expressions, its builtin calls, its subscripts:
each ``dict`` field of :class:`~shapecheck.program.Program`), and the names it uses. A statement
whose check reported anything is not remembered (it is checked every time): a
diagnostic can depend on more than the inputs above (the names close to a misspelt
one, the text of the spec), and only correct statements are cheap to trust.
Likewise ``output`` statements and statements the parser could not read.

A correct statement whose inputs did not change after an edit above it therefore
costs a comparison; an edit that changes a tensor's type re-checks the statements
that use it, and theirs only if their types changed in turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache
from itertools import islice
from typing import Any

from ..records import Record
from ..syntax import nodes
from ..check.checker import Checker, is_dim_statement
from ..messages.diagnostics import Diagnostic, Span
from ..meaning import Meaning, Pass
from ..check.program import Program, Tensor
from ..symbolic import Dim, free_names

__all__ = ["Memo"]

# Statements whose effect can be recorded and replayed.
_REMEMBERED = (nodes.TensorDecl, nodes.Define, nodes.Assert)


class _Effect(Record, slots=True):
    """What checking one statement did, and what it read."""

    statement: nodes.Stmt  # held, so that its id stays its own
    line: int  # the statement's line when it was checked
    mentions: tuple[str, ...]
    inputs: tuple[Any, ...]
    kinds: tuple[tuple[str, str], ...]
    added: tuple[tuple[tuple[Any, Any], ...], ...]  # to each of the program's _tables
    used: frozenset[str]
    replayable: bool = True  # it reported nothing: replaying it is checking it
    movable: bool | None = True  # ... also where it moved (see _anchored; None: not asked yet)
    dims: frozenset[str] = frozenset()  # the dims in its names and shapes, in and out
    tree: frozenset[int] = frozenset()  # the ids of the statement's nodes (see _walk)
    relied: bool = False  # one of its proofs reduced modulo the relations of the dims

    def same_as(self, other: _Effect) -> bool:
        """The same tables as ``other`` left (the tensors' spans aside)."""
        return (self.kinds, self.used) == (other.kinds, other.used) and all(
            mine == theirs if table != "tensors" else
            [(n, t.kind, t.value, t.inferred) for n, t in mine] ==
            [(n, t.kind, t.value, t.inferred) for n, t in theirs]
            for table, mine, theirs in zip(_TABLES, self.added, other.added))


#: The program's tables a statement's check adds entries to: every ``dict`` field of
#: :class:`Program` (tensors, expression types, calls, subscripts, and any a later pass of
#: the checker adds) but ``undeclared``, whose lists grow in place (a statement that adds
#: to it reported SC101, and is checked every time).
_TABLES = tuple(f.name for f in dataclasses.fields(Program)
                if f.default_factory is dict and f.name != "undeclared")  # type: ignore[comparison-overlap]


class Memo:
    """What checking each statement of one document did, for the next check of it.

    ``run(checker, statements, parse_diagnostics)`` is ``checker.run(...)``, and
    ``meaning(program)`` is :func:`shapecheck.meaning.analyse`, both reusing the
    previous run's work where it is still valid. One memo per document.
    """

    #: Statements between two checkpoints of the axis-meaning pass.
    CHECKPOINT_EVERY = 20

    def __init__(self) -> None:
        self._effects: dict[int, _Effect] = {}
        self._dims_key: tuple[Any, ...] | None = None
        self._program: Program | None = None  # what the last run made
        self._unchanged: set[int] = set()  # its statements whose check did what it did before
        self._before: list[tuple[nodes.Stmt, int]] = []  # its statements, and their lines
        self._same_until = 0  # its statements up to here are those of the run before
        self._same_but_dims = 0  # ... but for dim statements (see run)
        self._answers_kept = False  # its dims answer every question as the run before's
        self._moved_at = 0  # its statements up to _same_but_dims that kept their lines
        self._checkpoints: list[tuple[int, dict[str, Any]]] = []  # of the meaning pass
        self._meaning_of: Program | None = None  # the program they were taken on
        self.reused = 0  # statements not checked in the last run (for tests and benchmarks)
        self.plain: dict[int, nodes.Stmt] = {}  # its statements without a PyTorch spelling
        self.resumed_at = 0  # statements the last meaning pass did not follow again

    def run(self, checker: Checker, statements: list[nodes.Stmt],
            parse_diagnostics: Sequence[Diagnostic]) -> Program:
        order = checker.start(statements, parse_diagnostics)
        if self._meaning_of is not self._program:  # the last run's meaning pass did not end
            self._checkpoints = []
        before = self._before
        self._before = []  # until this run ends (a checker failure leaves nothing to trust)
        common = min(len(statements), len(before))
        self._same_until = next((index for index, (s, (old, _)) in enumerate(
            zip(statements, before)) if s is not old), common)
        # ... and up to here, but for dim statements (an edit of the dims that leaves every
        # answer as it was leaves the meaning pass, which reads only their answers, as it was)
        self._same_but_dims = next((index for index, (s, (old, _)) in enumerate(
            zip(statements, before)) if s is not old and not (
                is_dim_statement(s) and is_dim_statement(old))), common)
        self._answers_kept = True  # until the dims are found to answer otherwise (below)
        self._moved_at = next((index for index, (s, (_, line)) in enumerate(
            zip(statements[:self._same_but_dims], before)) if s.span.line != line),
            self._same_but_dims)
        previous, effects = self._effects, {}
        self.reused = 0
        self._unchanged = set()
        dims: list[nodes.Stmt] = []
        stale: set[int] = set()  # effects that involve a dim whose answers may have changed
        changed: frozenset[str] = frozenset()  # those dims
        in_dims = True
        for statement in order:
            if in_dims and not is_dim_statement(statement):
                in_dims = False
                key = (tuple((type(s).__name__, checker.text(s)) for s in dims),
                       tuple(sorted(checker.dims.bindings.items())))
                if key != self._dims_key:
                    stale, changed = self._stale(previous, checker)
                    self._answers_kept = self._program is not None and \
                        checker.dims.answers_as(self._program.dims)
                self._dims_key = key
            if in_dims:
                dims.append(statement)
            elif isinstance(statement, _REMEMBERED) and not checker.sink.full:
                last = previous.get(id(statement))
                if last is not None and last.statement is not statement:
                    last = None
                if last is not None and last.replayable and id(statement) not in stale and \
                        (last.line == statement.span.line or _movable(last)) and \
                        last.inputs == _inputs(checker, statement, last.mentions):
                    effects[id(statement)] = _replay(checker, statement, last)
                    self._unchanged.add(id(statement))
                    self.reused += 1
                    continue
                effect = effects[id(statement)] = _record(checker, statement, last)
                if last is not None and effect.same_as(last) and not effect.dims & changed:
                    self._unchanged.add(id(statement))
                continue
            if not checker.check(statement):
                break
        self._program = checker.finish()
        self._effects, self._before = effects, [(s, s.span.line) for s in statements]
        return self._program

    def _stale(self, previous: dict[int, _Effect],
               checker: Checker) -> tuple[set[int], frozenset[str]]:
        """After an edit of the dims: the effects that involve a dim whose answers may
        have changed (``DimSystem.changed_since`` the last run), and those dims. Their
        statements are checked again; the others' effects still hold."""
        if self._program is None:
            return set(previous), frozenset()
        changes = checker.dims.changed_since(self._program.dims)
        return {key for key, effect in previous.items()
                if effect.dims & changes.dims
                or (effect.relied and effect.dims & changes.relations)}, changes.dims

    def meaning(self, program: Program) -> Meaning:
        """The axis-meaning pass over ``program``, resumed after the longest beginning
        of it whose statements are the same trees, checked as before, with the same dims."""
        analysis = Pass(program)
        if program is not self._program:  # not what run made (inference checked it again)
            self._checkpoints = []
            return analysis.run()
        statements = program.statements
        unchanged = 0
        same = self._same_but_dims if self._answers_kept else self._same_until
        for statement in statements[:same]:
            if not (is_dim_statement(statement) or id(statement) in self._unchanged):
                break
            unchanged += 1
        # A checkpoint holds the diagnostics found so far at the lines they had: one with
        # any is only good when none of the statements before it moved.
        kept = [(index, state) for index, state in self._checkpoints
                if index <= unchanged and (index <= self._moved_at or not state["diagnostics"])]
        start = 0
        if kept:
            start, state = kept[-1]
            analysis.restore(state)
        for index in range(start, len(statements)):
            if index % self.CHECKPOINT_EVERY == 0 and index > start:
                kept.append((index, analysis.checkpoint()))
            analysis.step(statements[index])
        self._checkpoints, self._meaning_of = kept, program
        self.resumed_at = start
        return analysis.result()


def _walk(statement: nodes.Stmt) -> tuple[tuple[str, ...], set[int]]:
    """Every name the statement's tree holds (once each), and the ids of its nodes."""
    found: dict[str, None] = {}
    tree: set[int] = set()
    stack: list[Any] = [statement]
    while stack:
        node = stack.pop()
        kind = _SHAPES.get(type(node))
        if kind is None:
            kind = _shape_of(type(node))
        if kind is _SEQUENCE:
            stack.extend(node)
        elif kind is not _LEAF and kind.__class__ is tuple:  # a node: its slots
            tree.add(id(node))
            if isinstance(node, (nodes.Name, nodes.Ident)):
                found[node.name] = None
            stack.extend(getattr(node, slot) for slot in kind)
    return tuple(found), tree


def _movable(effect: _Effect) -> bool:
    """Whether the effect may be replayed where its statement moved: worked out the first
    time it moves (most effects are recorded again before they ever move, after an edit
    of the dims above all, and the walk costs a quarter of recording one)."""
    if effect.movable is None:
        effect.movable = _anchored(effect.added, effect.tree)
    return effect.movable


def _anchored(added: Any, tree: frozenset[int]) -> bool:
    """No syntax node in ``added`` but the statement's own. A node the checker made (the
    operand list of a call with any number of operands) keeps the spans it was made
    with: the parser moves the statement's tree, not it, so such an effect cannot move."""
    stack = [added]
    while stack:
        value = stack.pop()
        kind = _SHAPES.get(type(value))
        if kind is None:
            kind = _shape_of(type(value))
        if kind is _LEAF:
            continue
        if kind is _SEQUENCE:
            stack.extend(value)
        elif kind is _MAPPING:
            stack.extend(value.values())
        elif type(value).__module__ == nodes.__name__:
            if id(value) not in tree:
                return False
        else:  # a dataclass of the checker's (a CallInfo, a Value)
            stack.extend(getattr(value, name) for name in kind)
    return True


# How the walks above take a value apart, by its type (worked out once per type: these
# walks visit every entry a statement's check adds, and `is_dataclass` is slow).
_LEAF, _SEQUENCE, _MAPPING = "leaf", "sequence", "mapping"
_SHAPES: dict[type, Any] = {}


def _shape_of(kind: type) -> Any:
    """_LEAF (a span, a number, a SymPy expression), _SEQUENCE, _MAPPING, or the names of
    the attributes to follow (a syntax node's slots, a dataclass's fields)."""
    if issubclass(kind, Span):
        shape: Any = _LEAF
    elif issubclass(kind, (tuple, list)):
        shape = _SEQUENCE
    elif issubclass(kind, dict):
        shape = _MAPPING
    elif kind.__module__ == nodes.__name__ and hasattr(kind, "__slots__"):
        shape = tuple(kind.__slots__)
    elif dataclasses.is_dataclass(kind):
        shape = tuple(item.name for item in dataclasses.fields(kind))
    else:
        shape = _LEAF
    _SHAPES[kind] = shape
    return shape


def _inputs(checker: Checker, statement: nodes.Stmt, mentions: tuple[str, ...]) -> tuple[Any, ...]:
    kind_of = checker.names.kind.get
    tensor_of = checker.program.tensors.get
    first_of = checker.first_definition
    start = (statement.span.line, statement.span.column)
    defined = getattr(statement, "name", None)
    here = defined.span if defined is not None else None
    result = []
    for name in mentions:
        tensor = tensor_of(name)
        first = first_of(name)
        where = None
        if first is not None:
            span = first[0]
            where = (first[1], "here" if span == here
                     else "above" if (span.line, span.column) < start else "below")
        result.append((kind_of(name),
                       None if tensor is None else (tensor.kind, tensor.value, tensor.inferred),
                       where))
    return tuple(result)


def _added(table: dict[Any, Any], before: int) -> tuple[tuple[Any, Any], ...]:
    """The entries added to ``table`` since it had ``before`` of them, in order."""
    count = len(table) - before
    return tuple(reversed(list(islice(reversed(table.items()), count)))) if count else ()


def _record(checker: Checker, statement: nodes.Stmt, last: _Effect | None = None) -> _Effect:
    """Check the statement; its effect (replayable when it reported nothing). ``last``:
    the effect of the same statement (the same tree) in the run before, if any."""
    program, names = checker.program, checker.names
    if last is not None:
        mentions, tree = last.mentions, last.tree
    else:
        mentions, found = _walk(statement)
        tree = frozenset(found)
    inputs = _inputs(checker, statement, mentions)
    kinds = len(names.kind)
    counts = [len(getattr(program, table)) for table in _TABLES]
    before = {name: names.kind[name] for name in mentions if name in names.kind}
    reported = (len(checker.sink.items), checker.sink.dropped, len(program.undeclared))
    uses = checker.dims.relation_uses
    checker.check(statement)
    # Replayable unless it reported something, or changed what it does not add.
    replayable = (len(checker.sink.items), checker.sink.dropped,
                  len(program.undeclared)) == reported and \
        all(names.kind.get(name) == kind for name, kind in before.items())
    added = tuple(_added(getattr(program, table), count)
                  for table, count in zip(_TABLES, counts))
    return _Effect(
        statement, statement.span.line, mentions, inputs, _added(names.kind, kinds), added,
        frozenset(name for name in mentions if name in names.used), replayable,
        None if replayable else False, dims=_dims_in(mentions, inputs, added),
        tree=tree, relied=checker.dims.relation_uses != uses)


def _dims_in(mentions: tuple[str, ...], inputs: tuple[Any, ...],
             added: tuple[tuple[tuple[Any, Any], ...], ...]) -> frozenset[str]:
    """Every name the statement's shapes hold (what it read and what it made), and the
    names it mentions: a dim edit re-checks the statement when one of them changed."""
    found: set[str] = set(mentions)
    values = [tensor[1] for _, tensor, _ in inputs if tensor is not None]
    for table, entries in zip(_TABLES, added):
        if table == "tensors":
            values.extend(tensor.value for _, tensor in entries)
        elif table == "types":
            values.extend(value for _, value in entries)
    for value in values:
        for dim in value.shape or ():
            found |= _names_of(dim)
        if value.dim is not None:
            found |= _names_of(value.dim)
    return frozenset(found)


@lru_cache(maxsize=4096)
def _names_of(dim: Dim) -> frozenset[str]:
    return frozenset(free_names(dim))


def _replay(checker: Checker, statement: nodes.Stmt, effect: _Effect) -> _Effect:
    """Apply a recorded effect; the effect, its spans moved where the statement moved."""
    moved = statement.span.line - effect.line
    if moved:
        effect = dataclasses.replace(effect, line=statement.span.line, added=tuple(
            added if table != "tensors" else tuple(
                (name, Tensor(tensor.name, tensor.kind, tensor.value, _down(tensor.span, moved),
                              _down(tensor.name_span, moved), tensor.inferred))
                for name, tensor in added)
            for table, added in zip(_TABLES, effect.added)))
    checker.names.kind.update(effect.kinds)
    checker.names.used.update(effect.used)
    for table, added in zip(_TABLES, effect.added):
        getattr(checker.program, table).update(added)
    return effect


def _down(span: Span, lines: int) -> Span:
    return Span(span.line + lines, span.column, span.end_line + lines, span.end_column)
