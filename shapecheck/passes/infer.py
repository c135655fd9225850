"""Inference: the shapes of the names a spec uses without declaring them (issue 9).

A *sketch* is a spec that declares nothing (no `dim`, `input` or `param`), as the study
note writes its formulas: ``S = Q @ K.T; P = softmax(S, axis=row); O = P @ V``. Every
name it uses undeclared gets the most general declaration that makes every statement
correct, and the spec is checked with those declarations. In a spec that declares
anything, an undeclared name stays an error (a typo must not become a new input), and
its `help:` offers the inferred declaration. `api.check_text(..., infer=True/False)`
(`--infer` / `--no-infer`) forces either behaviour.

One entry point, :func:`infer`, reads the checked program. It never checks anything
itself: every shape rule it relies on is the checker's own, run with a
:class:`symbolic.Unifier` in which the undeclared tensors' dims are unknowns that the
rules' own questions ("are these equal?", "does H divide this?") bind.

1. The checker records each undeclared use and whether it stands where a dim or a value
   is needed (``Program.undeclared``). A name used where a dim is needed is a dim; every
   other is an input tensor.
2. Ranks are not dims, and a shape rule needs a rank before it can ask about dims. So
   the ranks are searched: every tensor starts at the smallest rank (a matrix for a name
   that is an operand of `@`), the spec is checked, and the first failure that a larger
   rank (or `bool`) could fix names the tensors to grow. Attempts are tried cheapest
   first (total rank), so the answer uses the smallest ranks the formula needs. The
   search is bounded (runs and statements checked) and deterministic.
3. Two preferences a rule cannot express are checked on each attempt's types (never by
   re-deriving a shape): an operand of `@` is at least a matrix (the note's Q is N×d, not
   a vector), and a name that is itself an operand of an elementwise operation (or of a
   builtin listed in :data:`PARTNERS`) takes its partner's shape rather than
   broadcasting as a scalar (a bias, a mask).
4. The unknowns left are named by their position in the first tensor that has them
   (:data:`POOLS`); a tensor nothing gives axes is a size used as a scalar: a dim.
5. The spec is checked again with the declarations, as if they were pasted in.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterator
from dataclasses import field
from typing import Protocol

from ..messages import codes
from ..records import Record
from ..syntax import nodes
from ..check.builtins import BUILTINS
from ..messages.diagnostics import Diagnostic, Note, Severity, Span
from ..check.program import Inferred, InferredTensor, Program, Value
from ..symbolic import Dim, DimSystem, Unifier, free_names, symbol, to_text

class CheckAgain(Protocol):
    """Check the spec again, declaring ``inferred`` first, with the given dim system;
    ``complete``: every statement, however many diagnostics."""

    def __call__(self, inferred: Inferred | None = None, dims: DimSystem | None = None, *,
                 complete: bool = False) -> Program: ...

MAX_RANK = 6
RUN_BUDGET = 120  # checks of the whole spec per inference
WORK_BUDGET = 30_000  # statements checked over all of them (a large spec gets fewer runs)

# The builtin arguments that take each other's shape when one is an undeclared name
# (as the operands of `+`): a fact of each builtin's row (`Builtin.partners`).
PARTNERS: dict[str, tuple[str, ...]] = {name: row.partners for name, row in BUILTINS.items()}

# The failures a larger rank can fix (the operation needs more axes, or exactly as many
# as a subscript, a permutation, an annotation or another operand has), and the one
# `bool` fixes. Any other failure is a real conflict between two uses.
RANK_FIXES = frozenset({"SC202", "SC302", "SC304", "SC305", "SC306", "SC307", "SC308",
                        "SC309", "SC310", "SC319"})
BOOL_FIXES = frozenset({"SC311", "SC321"})
MATRIX, PARTNER = "matrix", "partner"  # the two preferences, as failures

# Names for the dims inference introduces, by the axis they first appear on (counted
# from the end: the feature axis, the sequence axis, heads, batch), and for the quotient
# of a division it needed (`H*k`). A name the spec uses is skipped; then `d2`, `N2`, ...
POOLS: dict[int, tuple[str, ...]] = {
    -1: ("d", "e", "f", "g"), -2: ("N", "M", "L"), -3: ("H", "G"), -4: ("B", "C"),
}
QUOTIENTS = ("k",)
# A last axis that is also the rows of another tensor is a width a projection maps from
# (`X @ W_Q`: X's model width, `D`), not a feature of the attention itself (`d`).
WIDTHS = ("D", "E", "F")


def infer(program: Program, check_again: CheckAgain, mode: bool | None) -> Program:
    """The spec with its undeclared names inferred (a sketch, or ``mode`` True), or
    with the inferred declarations offered in the help of their SC101 errors."""
    if not program.undeclared or mode is False:
        return program
    sketch = mode is True or is_sketch(program)
    collected = program
    if sketch and any(d.code == codes.TOO_MANY.id for d in program.diagnostics):
        # The check stopped early: every undeclared name is needed, not the first ones.
        collected = check_again(complete=True)
    found = _Inference(collected, check_again).run()
    if not sketch:
        return _offer_declarations(program, found)
    if found is None:  # past the budget before a single attempt: the spec as written
        return program
    checked = check_again(found, None)
    checked.diagnostics = sorted(checked.diagnostics + [_inferred_note(collected, found)],
                                 key=lambda d: (d.span.line, d.span.column))
    return checked


def is_sketch(program: Program) -> bool:
    """Does the spec declare nothing (no `dim`, `input` or `param`, not even a broken one)?"""
    lines = program.source.splitlines()
    for statement in program.statements:
        if isinstance(statement, (nodes.DimFree, nodes.DimDef, nodes.TensorDecl)):
            return False
        if isinstance(statement, nodes.Broken) and statement.span.line <= len(lines):
            start = lines[statement.span.line - 1][statement.span.column - 1:]
            if start.split(maxsplit=1)[:1] in (["dim"], ["input"], ["param"]):
                return False
    return True


# --- the search -----------------------------------------------------------------------------


class _Guess(Record, frozen=True):
    """A rank and an element type for each undeclared tensor (in first-use order)."""

    ranks: tuple[int, ...]
    bools: tuple[bool, ...]

    @property
    def cost(self) -> int:
        return sum(self.ranks) + sum(self.bools)

    def grown(self, index: int) -> _Guess | None:
        if self.ranks[index] >= MAX_RANK:
            return None
        ranks = list(self.ranks)
        ranks[index] += 1
        return _Guess(tuple(ranks), self.bools)

    def as_bool(self, index: int) -> _Guess | None:
        if self.bools[index]:
            return None
        bools = list(self.bools)
        bools[index] = True
        return _Guess(self.ranks, tuple(bools))


class _Failure(Record, frozen=True):
    span: Span
    code: str
    candidates: tuple[int, ...]  # indices of the tensors that could fix it


class _Attempt(Record):
    guess: _Guess
    unifier: Unifier
    shapes: list[tuple[Dim, ...]]
    blocking: list[_Failure]

    def progress(self) -> tuple[int, int, int, int]:
        """Which failed attempt to keep (smaller is better): the one whose first blocking
        failure comes latest, then with the fewest, then with the smallest ranks."""
        first = self.blocking[0].span if self.blocking else Span(1 << 30, 0, 0, 0)
        return (-first.line, -first.column, len(self.blocking), self.guess.cost)


class _Inference:
    def __init__(self, program: Program, check_again: CheckAgain) -> None:
        self.program = program
        self.check_again = check_again
        uses = sorted(program.undeclared.items(), key=lambda item: min(s for s, _ in item[1]))
        self.dims = [(name, min(s for s, _ in spans)) for name, spans in uses
                     if any(role == "dim" for _, role in spans)]
        dim_names = {name for name, _ in self.dims}
        self.tensors = [(name, min(s for s, _ in spans)) for name, spans in uses
                        if name not in dim_names]
        self.index = {name: i for i, (name, _) in enumerate(self.tensors)}
        self.names = _NameIndex(program, self.index)
        self.runs = 0
        self.work = 0

    def run(self) -> Inferred | None:
        attempt = self._search()
        if attempt is None:
            return None
        return _Namer(self, attempt).inferred()

    def _search(self) -> _Attempt | None:
        start = _Guess(tuple(2 if name in self.names.matrices else 0 for name, _ in self.tensors),
                       (False,) * len(self.tensors))
        queue: list[tuple[int, int, _Guess]] = [(start.cost, 0, start)]
        seen = {start}
        best: _Attempt | None = None
        pushed = 1
        statements = max(1, len(self.program.statements))
        while queue and self.runs < RUN_BUDGET and self.work + statements <= WORK_BUDGET:
            _, _, guess = heapq.heappop(queue)
            attempt = self._attempt(guess)
            if not attempt.blocking:
                return attempt
            if best is None or attempt.progress() < best.progress():
                best = attempt
            first = attempt.blocking[0]
            for index in first.candidates:
                grow = guess.as_bool(index) if first.code in BOOL_FIXES else guess.grown(index)
                if grow is not None and grow not in seen:
                    seen.add(grow)
                    heapq.heappush(queue, (grow.cost, pushed, grow))
                    pushed += 1
        return best

    def _attempt(self, guess: _Guess) -> _Attempt:
        unifier = Unifier()
        shapes: list[tuple[Dim, ...]] = []
        tensors = []
        for (name, span), rank, is_bool in zip(self.tensors, guess.ranks, guess.bools):
            shape = tuple(unifier.unknown() for _ in range(rank))
            shapes.append(shape)
            tensors.append(InferredTensor(name, Value(shape, is_bool), span))
        inferred = Inferred(tuple(self.dims), tuple(tensors))
        checked = self.check_again(inferred, unifier)
        self.runs += 1
        self.work += max(1, len(self.program.statements))
        return _Attempt(guess, unifier, shapes, self._blocking(checked))

    def _blocking(self, checked: Program) -> list[_Failure]:
        failures = []
        for diagnostic in checked.diagnostics:
            fixable = diagnostic.code in RANK_FIXES or diagnostic.code in BOOL_FIXES
            if diagnostic.is_error and fixable:
                candidates = self.names.candidates(diagnostic.span)
                if candidates:
                    failures.append(_Failure(diagnostic.span, diagnostic.code, candidates))
        failures += self.names.preferences(checked)
        return sorted(failures, key=lambda f: (f.span.line, f.span.column, f.span.end_line,
                                               f.span.end_column))


# --- reading the syntax tree --------------------------------------------------------------


class _NameIndex:
    """Where each undeclared tensor occurs, and the preferences to check on an attempt."""

    def __init__(self, program: Program, index: dict[str, int]) -> None:
        tensors = set(index)
        self.tensors = tensors
        self._index = index
        self.statements: list[tuple[Span, list[tuple[Span, str]]]] = []
        self.matrices: set[str] = set()
        self.operations: list[nodes.Expr] = []
        # The undeclared tensors each defined tensor is computed from: a failure at a
        # defined tensor (`K2.T`, K2 = repeat(K, ...)) is one its sources can fix.
        sources: dict[str, set[str]] = {}
        for statement in program.statements:
            uses = [(n.span, n.name) for n in _walk(statement) if isinstance(n, nodes.Name)]
            if isinstance(statement, (nodes.Assert, nodes.Output)):  # `assert O: [...]` uses O
                uses.append((statement.name.span, statement.name.name))
            found = [(span, source) for span, name in uses
                     for source in sorted(sources.get(name, {name} & tensors))]
            if isinstance(statement, (nodes.Define, nodes.Output)) and statement.value is not None:
                sources.setdefault(statement.name.name, {source for _, source in found})
            self.statements.append((statement.span, found))
            for node in _walk(statement):
                # A comparison's other side is a threshold as often as a tensor (`i - j <
                # W`, `S > 0`): its operands are not partners.
                if (isinstance(node, nodes.BinOp) and node.op not in nodes.COMPARISONS) or (
                        isinstance(node, nodes.Call) and PARTNERS.get(node.func.name)):
                    self.operations.append(node)
                if isinstance(node, nodes.BinOp) and node.op == "@":
                    self.matrices.update(n for n in (_direct(node.left), _direct(node.right)) if n)

    def candidates(self, span: Span, whole_statement: bool = True) -> tuple[int, ...]:
        """The undeclared tensors that occur inside ``span``, or that a tensor there is
        computed from; none there, those of its statement (``whole_statement``)."""
        for statement, found in self.statements:
            if _inside(span, statement) or _inside(statement, span):
                inside = [name for where, name in found if _inside(where, span)]
                names = inside or ([name for _, name in found] if whole_statement else [])
                return tuple(sorted({self._index[n] for n in names}))
        return ()

    def preferences(self, checked: Program) -> list[_Failure]:
        """Attempts that check but give an operand of `@` fewer than two axes (the tensors
        it is computed from can grow), or give a name that is itself an operand of an
        elementwise operation fewer axes than its partner (it would broadcast as a scalar
        or a vector, where the formula means a tensor like its partner)."""
        failures = []
        for node in self.operations:
            if isinstance(node, nodes.BinOp):
                operands = [node.left, node.right]
            else:
                info = checked.calls.get(id(node))
                if info is None:
                    continue
                operands = [info.args[p] for p in PARTNERS[node.func.name] if p in info.args]
            values = [checked.type_of(o) for o in operands]
            if not all(v.known for v in values):
                continue
            matrix = isinstance(node, nodes.BinOp) and node.op == "@"
            need = 2 if matrix else max(v.rank for v in values)
            kind = MATRIX if matrix else PARTNER
            for operand, value in zip(operands, values):
                if value.rank >= need:
                    continue
                if matrix:
                    candidates = self.candidates(operand.span, whole_statement=False)
                else:
                    name = _direct(operand)
                    candidates = (self._index[name],) if name in self.tensors else ()
                if candidates:
                    failures.append(_Failure(operand.span, kind, candidates))
        return failures


def _direct(node: nodes.Expr) -> str | None:
    """The name an operand is, through brackets, a sign and transposes (`(-K).T`)."""
    while isinstance(node, (nodes.Paren, nodes.Unary, nodes.Transpose)):
        node = node.inner if isinstance(node, nodes.Paren) else node.operand
    return node.name if isinstance(node, nodes.Name) else None


def _walk(node: object) -> Iterator[object]:
    """Every syntax node below ``node`` (statements, expressions, shapes), whatever its
    type: new node kinds need no change here."""
    yield node
    if not dataclasses.is_dataclass(node):
        return
    for item in dataclasses.fields(node):
        value = getattr(node, item.name)
        if isinstance(value, Span) or isinstance(value, (str, int, float, bool)) or value is None:
            continue
        if isinstance(value, tuple):
            for element in value:
                if dataclasses.is_dataclass(element):
                    yield from _walk(element)
        elif dataclasses.is_dataclass(value):
            yield from _walk(value)


def _inside(inner: Span, outer: Span) -> bool:
    return (outer.line, outer.column) <= (inner.line, inner.column) and (
        inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column)


# --- naming and declaring ----------------------------------------------------------------


class _Namer(Record):
    inference: _Inference
    attempt: _Attempt
    names: dict[Dim, str] = field(default_factory=dict)

    def inferred(self) -> Inferred:
        unifier = self.attempt.unifier
        resolved = [tuple(unifier.resolved(d) for d in shape) for shape in self.attempt.shapes]
        scalars = self._scalars(resolved)
        dims = list(self.inference.dims) + [self.inference.tensors[i] for i in sorted(scalars)]
        dims += self._name_unknowns(resolved, scalars)
        named = {u: symbol(n) for u, n in self.names.items()}
        tensors = []
        for i, ((name, span), shape) in enumerate(zip(self.inference.tensors, resolved)):
            if i not in scalars:
                value = Value(tuple(d.xreplace(named) for d in shape), self.attempt.guess.bools[i])
                tensors.append(InferredTensor(name, value, span,
                                              self._origins(self.attempt.shapes[i], value)))
        # The spec's own names first, then the names given to axes, each by first use.
        own = set(self.inference.program.undeclared)
        ordered = sorted(dims, key=lambda item: (item[0] not in own, item[1]))
        return Inferred(tuple(ordered), tuple(tensors))

    def _scalars(self, resolved: list[tuple[Dim, ...]]) -> set[int]:
        """The tensors nothing gives axes: sizes used as scalars (the note's `sqrt(d)`),
        so dims, unless `bool` or a use needs a tensor (`output x`)."""
        uses = self.inference.program.undeclared
        return {i for i, shape in enumerate(resolved)
                if not shape and not self.attempt.guess.bools[i]
                and all(role == "value" for _, role in uses[self.inference.tensors[i][0]])}

    def _name_unknowns(self, resolved: list[tuple[Dim, ...]],
                       scalars: set[int]) -> list[tuple[str, Span]]:
        """Name each unknown left by the slot of its first whole axis (a quotient: `k`),
        avoiding every name of the spec; the new dims, with where each is first needed."""
        unifier = self.attempt.unifier
        taken = set(self.inference.program.undeclared) | set(unifier.taken) | set(unifier.dims)
        numbered: dict[tuple[str, ...], int] = {}
        rows = {entry for shape in resolved if len(shape) >= 2 for entry in shape[-2:-1]}
        dims = []
        for i, ((_, span), shape) in enumerate(zip(self.inference.tensors, resolved)):
            if i in scalars:
                continue
            for axis, entry in enumerate(shape):
                for unknown in unifier.roots(entry):
                    if unknown not in self.names:
                        slot = axis - len(shape) if entry == unknown else None
                        pool = QUOTIENTS if slot is None else WIDTHS if (
                            slot == -1 and unknown in rows) else POOLS[max(slot, -4)]
                        self.names[unknown] = _fresh(pool, taken, numbered)
                        taken.add(self.names[unknown])
                        dims.append((self.names[unknown], span))
        return dims

    def _origins(self, unknowns: tuple[Dim, ...], value: Value) -> tuple[Note, ...]:
        """For each axis a use gave a size (a number, a dim of the spec, a product), the use."""
        assert value.shape is not None
        by_span: dict[Span, list[tuple[int, str]]] = {}
        for axis, unknown in enumerate(unknowns):
            span = self._fixed_at(unknown)
            if span is not None:
                by_span.setdefault(span, []).append((axis, to_text(value.shape[axis])))
        notes = []
        for span, axes in sorted(by_span.items()):
            if len(axes) == 1:
                notes.append(codes.note("inferred_axis", span, axis=axes[0][0], size=axes[0][1]))
            else:
                notes.append(codes.note("inferred_axes", span,
                                        axes=", ".join(str(a) for a, _ in axes),
                                        sizes=", ".join(s for _, s in axes)))
        return tuple(notes)

    def _fixed_at(self, unknown: Dim) -> Span | None:
        """Where the chain of bindings from ``unknown`` first reached a size that is not
        another unknown (None: it is still free, or only merged with other unknowns)."""
        unifier = self.attempt.unifier
        current = unknown
        for _ in range(len(unifier.links) + 1):
            link = unifier.links.get(current)
            if link is None:
                return None
            value, span = link
            if not unifier.is_unknown(value):
                return span
            current = value
        return None


def _fresh(pool: tuple[str, ...], taken: set[str], start: dict[tuple[str, ...], int]) -> str:
    """The first name of the pool not taken: `d`, `e`, ..., then `d2`, `e2`, ...
    (``start`` remembers where a pool's numbered names continue)."""
    for name in pool:
        if name not in taken:
            return name
    index = start.get(pool, 2)
    while True:
        for name in pool:
            if f"{name}{index}" not in taken:
                start[pool] = index
                return f"{name}{index}"
        index += 1


# --- saying it ----------------------------------------------------------------------------


def _inferred_note(program: Program, inferred: Inferred) -> Diagnostic:
    """SC106 at the first undeclared use: the names, and (one per help line) the
    declarations to paste at the top of the spec to state what was inferred."""
    uses = sorted((min(s for s, _ in spans), name) for name, spans in program.undeclared.items())
    return codes.INFERRED.diag(uses[0][0], names=", ".join(f"`{name}`" for _, name in uses),
                               help=inferred.declarations())


def _dim_names(value: Value) -> set[str]:
    return set().union(*(free_names(d) for d in value.shape or ()))


def _offer_declarations(program: Program, inferred: Inferred | None) -> Program:
    """A spec that declares something keeps its SC101 errors; each gets a help line
    with the inferred declaration (and the new dims it needs)."""
    if inferred is None:
        return program
    offers = _declarations_by_name(program, inferred)
    diagnostics = []
    for diagnostic in program.diagnostics:
        name = _undefined_name(program, diagnostic)
        if name in offers:
            diagnostic = dataclasses.replace(diagnostic, help=diagnostic.help + (
                codes.help_text("declare_it", declaration=offers[name]),))
        diagnostics.append(diagnostic)
    program.diagnostics = diagnostics
    return program


def _declarations_by_name(program: Program, inferred: Inferred) -> dict[str, str]:
    declared = set(program.dims.dims)
    offers: dict[str, str] = {}
    for name, _ in inferred.dims:
        if name in program.undeclared:
            offers[name] = f"dim {name}"
    for tensor in inferred.tensors:
        new = [n for n, _ in inferred.dims if n in _dim_names(tensor.value) and n not in declared]
        line = tensor.declaration()
        offers[tensor.name] = f"dim {', '.join(new)}; {line}" if new else line
    return offers


def _undefined_name(program: Program, diagnostic: Diagnostic) -> str | None:
    if diagnostic.code != codes.UNDEFINED.id or diagnostic.severity is not Severity.ERROR:
        return None
    for name, uses in program.undeclared.items():
        if any(span == diagnostic.span for span, _ in uses):
            return name
    return None


__all__ = ["PARTNERS", "infer", "is_sketch"]
