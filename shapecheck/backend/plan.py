"""One plan for every framework: a checked program, at concrete bindings, lowered once.

The plan is framework-neutral and imports none: a framework is an object handed to
:func:`build` (:class:`Framework`: the NumPy one in :mod:`.numpy_backend`, the torch one
in :mod:`.torch_backend`). Written once here, for every framework:

- the statement loop: which statements run (a fused pattern's scores are never built),
  in order, each checked after it runs -- its shape against the checker's at the
  bindings, its element type against the run's;
- liveness: a tensor is released after its last use, and handed over to be overwritten
  (*donated*) when that use is its only remaining reference;
- the memory estimate, one for all: buffers by owner (a view such as ``B = A.T`` keeps
  ``A``'s buffer alive after ``A``'s last use), the peak of what is held plus each
  statement's temporaries, and the refusal of an array no framework can index;
- the fusion decision: which attention patterns :mod:`.pattern` finds, and whether the
  framework has a fused form for each (the notes say which ran fused and why not).

A framework lowers one statement into a :class:`Closure` (what it computes, whether the
value is *fresh* -- shares memory with no named tensor -- and the buffers it creates),
and says how its arrays enter, leave and are described.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..check.program import Program, Value
from ..syntax import nodes
from . import pattern
from .errors import CheckerBug, InputError, bindings_text, message

Thunk = Callable[["Frame"], Any]
MAX_BYTES = sys.maxsize  # the largest array any framework can index, in bytes


@dataclass(slots=True)
class Frame:
    """One execution: tensor values by name, and what the run observed."""

    values: dict[str, Any]
    check_invariants: bool = False
    warnings: list[str] = field(default_factory=list)
    checks: dict[str, str] = field(default_factory=dict)  # one line per invariant checked
    progress: Callable[[int, int], None] | None = None  # a long statement's progress (done, total)
    # A fully masked softmax row gives zero weights (SDPA's and FlexAttention's value), not
    # NaN: conformance's second reading of a spec (docs/conform.md); unfused NumPy only.
    zero_masked_rows: bool = False


@dataclass(frozen=True, slots=True)
class Closure:
    """A node's closure. ``fresh``: the value shares memory with no named tensor,
    so its consumer may overwrite it. ``const``: folded when lowered.
    ``contiguous``: known C-contiguous, so that the estimate knows when a reshape copies."""

    run: Thunk
    fresh: bool = False
    const: bool = False
    contiguous: bool = False


@dataclass(frozen=True, slots=True)
class Allocation:
    """A buffer the run creates: what the memory estimate adds up."""

    label: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass(frozen=True, slots=True)
class Lowered:
    """A statement as a framework lowered it: its closure, the buffers it creates, and
    whether one of them (of the result's shape) may become the tensor itself."""

    closure: Closure
    allocations: list[Allocation]
    owns_result: bool = False


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement to lower: the tensor it defines, and what a framework may overwrite."""

    name: str
    line: int
    expr: nodes.Expr
    shape: tuple[int, ...]
    value: Value
    donated: frozenset[str]  # tensors read once here, for the last time, by no one shared


class Fused(Protocol):
    """A framework's form of an attention pattern (NumPy's blocks, torch's SDPA call)."""

    fusable: pattern.Fusable

    def note(self) -> str: ...


class Framework(Protocol):
    """What the plan asks of a framework: its rows stay in its own module."""

    itemsize: int  # bytes per element of the run's dtype

    def fused_form(self, builder: PlanBuilder, fusable: pattern.Fusable) -> tuple[Fused | None, str]:
        """The fused form of ``fusable`` at the bindings, or None and the reason's key."""
        ...

    def lower(self, builder: PlanBuilder, statement: Statement) -> Lowered: ...

    def element_dtype(self, value: Value) -> Any:
        """The framework's element type of a tensor of the program (bool, real, complex)."""
        ...

    def running(self) -> AbstractContextManager[Any]:
        """The context a run executes in (NumPy's error state, torch's inference mode)."""
        ...

    def enter(self, value: Any) -> Any:
        """A caller's array as the steps read it, never written."""
        ...

    def leave(self, value: Any) -> Any:
        """A value as a NumPy-level caller reads it back."""
        ...

    def shape(self, value: Any) -> tuple[int, ...]: ...

    def dtype_of(self, value: Any) -> Any: ...

    def dtype_text(self, dtype: Any) -> str: ...


@dataclass(frozen=True, slots=True)
class Step:
    """One statement that defines a tensor, with what the checker expects of it."""

    name: str
    line: int
    run: Thunk
    shape: tuple[int, ...]
    symbolic: str  # the shape in the spec's notation, for a bug report
    dtype: Any
    release: tuple[str, ...]  # names dead after this step


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    bindings: dict[str, int]
    peak_bytes: int  # the estimate: tensors alive plus each statement's temporaries
    largest: Allocation | None
    framework: Framework
    final_bytes: int = 0  # what is still held after the last statement
    element_counts: dict[str, int] = field(default_factory=dict)  # every tensor, by name
    notes: tuple[str, ...] = ()  # which attention patterns run fused, and why others do not

    def execute(self, values: dict[str, Any], *, check_invariants: bool = False,
                progress: Callable[[float, str], None] | None = None,
                tensors: bool = False, zero_masked_rows: bool = False) -> Frame:
        """Run every step on ``values`` (inputs and params by name, already cast);
        ``progress(fraction, label)`` hears how far it is. The frame's values come back
        as NumPy arrays, or as the framework's own with ``tensors``."""
        framework = self.framework
        frame = Frame({name: framework.enter(value) for name, value in values.items()},
                      check_invariants, zero_masked_rows=zero_masked_rows)
        with framework.running():
            for index, step in enumerate(self.steps):
                if progress is not None:
                    frame.progress = _tracker(progress, index, len(self.steps), step.name)
                    frame.progress(0, 1)
                result = step.run(frame)
                self._check(step, result)
                frame.values[step.name] = result
                for name in step.release:
                    del frame.values[name]
        if not tensors:
            frame.values = {name: framework.leave(v) for name, v in frame.values.items()}
        return frame

    def _check(self, step: Step, result: Any) -> None:
        shape = self.framework.shape(result)
        if shape != step.shape:
            raise CheckerBug(message(
                "shape_bug", name=step.name, line=step.line, actual=list(shape),
                symbolic=step.symbolic, expected=list(step.shape),
                bindings=bindings_text(self.bindings)))
        dtype = self.framework.dtype_of(result)
        if dtype != step.dtype:
            raise CheckerBug(message("dtype_bug", name=step.name, line=step.line,
                                     actual=self.framework.dtype_text(dtype),
                                     expected=self.framework.dtype_text(step.dtype)))


def _tracker(progress: Callable[[float, str], None], index: int, count: int,
             name: str) -> Callable[[int, int], None]:
    """Progress inside step ``index`` of ``count`` (done of total), as a fraction of the run."""
    return lambda done, total: progress((index + done / max(total, 1)) / count, name)


# --- building a plan ----------------------------------------------------------------------


def build(program: Program, framework: Framework, *, keep_all: bool = False,
          fuse: bool = True) -> Plan:
    """The :class:`Plan` of a verified program whose dims are all bound, lowered by
    ``framework``; with ``fuse``, every attention pattern that the framework has a fused
    form for runs so, its score tables never built."""
    return PlanBuilder(program, framework, keep_all, fuse).build()


@dataclass
class _Usage:
    """Where each tensor is read, for releasing it and handing its buffer over."""

    last_use: dict[str, int] = field(default_factory=dict)
    reads: list[dict[str, int]] = field(default_factory=list)  # per statement: name -> count

    def dead_after(self, index: int, defined: str, kept: set[str]) -> tuple[str, ...]:
        """What statement ``index`` reads for the last time, and what it defines if
        nothing reads it (and it is not an output)."""
        names = [*self.reads[index], defined]  # a statement never reads what it defines
        return tuple(n for n in names if self.last_use[n] == index and n not in kept)


def definitions_of(program: Program) -> Iterator[tuple[nodes.Ident, nodes.Expr, int]]:
    for stmt in program.statements:
        if isinstance(stmt, nodes.Define) or (isinstance(stmt, nodes.Output) and stmt.value is not None):
            assert stmt.value is not None
            yield stmt.name, stmt.value, stmt.span.line


class PlanBuilder:
    """One program lowered by one framework: the statement loop and the memory ledger.
    Frameworks read ``program``, ``fused`` (id(P @ V node) -> their fused form),
    ``contiguous`` and :meth:`shape_of`."""

    def __init__(self, program: Program, framework: Framework, keep_all: bool,
                 fuse: bool) -> None:
        self.program = program
        self.framework = framework
        self.keep_all = keep_all
        self.kept = set(program.outputs)
        self.bindings = bindings_of(program)
        self.fused: dict[int, Any] = {}  # id(P @ V node) -> the framework's fused form
        self.notes: list[str] = []
        if fuse:
            self._choose_fused()
        skipped = set().union(*(f.fusable.skipped for f in self.fused.values()))
        self.definitions = [d for d in definitions_of(program) if d[0].name not in skipped]
        self.usage = self._usage()
        self.owners: set[str] = set()  # defined tensors whose buffer no other name shares
        self.contiguous: dict[str, bool] = {}  # defined tensor -> surely C-contiguous
        self.aliases: dict[str, set[str]] = {}  # defined tensor -> names it may share memory with

    def _choose_fused(self) -> None:
        found, refused = pattern.fusable(self.program, self.kept, keep_all=self.keep_all)
        for name, line, reason in dict.fromkeys(refused):  # a softmax may head several patterns
            self.notes.append(message("not_fused", name=name, line=line, reason=message(reason)))
        for fusable in found:
            form, reason = self.framework.fused_form(self, fusable)
            if form is None:
                self.notes.append(message("not_fused", name=fusable.softmax_name,
                                          line=fusable.softmax_line, reason=message(reason)))
                continue
            self.fused[id(fusable.output)] = form
            self.notes.append(form.note())

    def shape_of(self, node: nodes.Expr) -> tuple[int, ...]:
        return evaluate_shape(self.program, self.program.type_of(node))

    def _reads(self, expr: nodes.Expr) -> Iterator[str]:
        """The names a statement reads (a fused pattern reads what its parts read)."""
        return pattern.names_read(expr, {key: f.fusable for key, f in self.fused.items()})

    def _usage(self) -> _Usage:
        usage = _Usage()
        for index, (ident, expr, _) in enumerate(self.definitions):
            reads: dict[str, int] = {}
            for name in self._reads(expr):
                if name in self.program.tensors:
                    reads[name] = reads.get(name, 0) + 1
                    usage.last_use[name] = index
            usage.reads.append(reads)
            usage.last_use.setdefault(ident.name, index)
        return usage

    def build(self) -> Plan:
        steps: list[Step] = []
        inputs = [t for t in self.program.tensors.values() if t.kind in ("input", "param")]
        input_bytes = sum(self._nbytes(t.value) for t in inputs)
        allocations = [Allocation(message("tensor_label", name=t.name), self._shape(t.value),
                                  self._nbytes(t.value)) for t in inputs]
        self._check_sizes(allocations)
        # Memory by owner: a defined tensor's buffer stays held while any live name may
        # share it (a view such as `B = A.T` keeps A's buffer alive after A's last use).
        owned: dict[str, int] = {}  # defined tensor -> bytes of the buffer it may own
        holds: dict[str, set[str]] = {}  # live defined tensor -> owners it may share
        peak = input_bytes

        def held() -> int:
            return input_bytes + sum(owned[o] for o in set().union(*holds.values()))

        for index, (ident, expr, line) in enumerate(self.definitions):
            name = ident.name
            tensor = self.program.tensors[name]
            shape = self._shape(tensor.value)
            lowered = self.framework.lower(self, Statement(
                name, line, expr, shape, tensor.value, self._donatable(index)))
            closure = lowered.closure
            self._check_sizes(lowered.allocations)
            peak = max(peak, held() + sum(a.nbytes for a in lowered.allocations))
            allocations += lowered.allocations
            reads = {n for n in self._reads(expr) if n in holds}
            # A fresh result owns a buffer (new, or one handed over and released here);
            # a view may still own one when its builtin may have copied.
            owned[name] = (self._nbytes(tensor.value)
                           if closure.fresh or lowered.owns_result else 0)
            holds[name] = {name} if closure.fresh else {name}.union(*(holds[n] for n in reads))
            self.contiguous[name] = closure.contiguous
            if closure.fresh:
                self.owners.add(name)
            else:
                shared = {n for n in self._reads(expr) if n in self.program.tensors}
                self.aliases[name] = shared.union(*(self.aliases.get(n, set()) for n in shared))
            release = () if self.keep_all else self.usage.dead_after(index, name, self.kept)
            for dead in release:
                holds.pop(dead, None)  # the caller holds the inputs
            steps.append(Step(name, line, closure.run, shape, tensor.value.text(),
                              self.framework.element_dtype(tensor.value), release))
        largest = max(allocations, key=lambda a: a.nbytes, default=None)
        counts = {n: math.prod(self._shape(t.value)) for n, t in self.program.tensors.items()}
        return Plan(tuple(steps), self.bindings, peak, largest, self.framework, held(), counts,
                    tuple(self.notes))

    def _check_sizes(self, allocations: list[Allocation]) -> None:
        """Refuse, before anything is allocated, an array no framework can index."""
        for allocation in allocations:
            count = math.prod(allocation.shape)
            if count * max(1, self.framework.itemsize) > MAX_BYTES:
                raise InputError(message(
                    "too_large", what=allocation.label, shape=list(allocation.shape),
                    size=f"about 2^{count.bit_length() - 1}", limit=f"2^{MAX_BYTES.bit_length()}",
                    bindings=bindings_text(self.bindings)))

    def _donatable(self, index: int) -> frozenset[str]:
        """Tensors read once by this statement, for the last time, whose buffer no
        other live name shares: the statement may overwrite them."""
        if self.keep_all:
            return frozenset()
        result = set()
        for name, count in self.usage.reads[index].items():
            if count != 1 or name not in self.owners or name in self.kept:
                continue
            if self.usage.last_use.get(name) != index:
                continue
            sharers = [t for t, shared in self.aliases.items() if name in shared]
            if all(t not in self.kept and self.usage.last_use.get(t, -1) < index for t in sharers):
                result.add(name)
        return frozenset(result)

    def _shape(self, value: Value) -> tuple[int, ...]:
        return evaluate_shape(self.program, value)

    def _nbytes(self, value: Value) -> int:
        itemsize = 1 if value.is_bool else self.framework.itemsize
        return math.prod(self._shape(value)) * itemsize


def evaluate_shape(program: Program, value: Value) -> tuple[int, ...]:
    """A shape at the program's bindings; every dim must be bound."""
    assert value.shape is not None
    dims = tuple(program.dims.evaluate(d) for d in value.shape)
    if any(d is None for d in dims):
        raise CheckerBug(message("bug_unbound_shape", shape=value.text()))
    return dims  # type: ignore[return-value]


def bindings_of(program: Program) -> dict[str, int]:
    values = {name: program.dims.value_of(name) for name in program.dims.dims}
    return {name: value for name, value in values.items() if value is not None}
