"""A checked program, at concrete bindings, compiled into NumPy closures.

Compilation walks the syntax tree once: one function per node kind turns a
node into a closure over its children's closures, and each builtin is a row
of :data:`BUILTINS` (mirroring :data:`shapecheck.builtins.BUILTINS`). Calling
the plan then runs plain NumPy calls, with no dispatch on node kinds.

Memory: a value that no named tensor shares (a *fresh* temporary) may be
overwritten by the operation that consumes it (``out=``), and a named tensor
is released after its last use, or handed over to be overwritten when that
use is its only remaining reference. So ``S = Q @ K.T / sqrt(d)`` then
``P = softmax(S)`` needs one ``[H, N, N]`` buffer, as careful hand-written
NumPy does.

Scalars (numbers, dims used as values, ``eps``) are NumPy scalars of the run's
dtype: under NumPy 2's promotion rules a float64 scalar would silently turn a
float32 array into float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import nodes
from ..builtins import axis_index
from ..program import CallInfo, NewAxis, Program, Range, Take, Value
from .errors import CheckerBug, bindings_text, message

Thunk = Callable[["Frame"], Any]
SOFTMAX_TOLERANCE = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


@dataclass(slots=True)
class Frame:
    """One execution: tensor values by name, and what the run observed."""

    values: dict[str, Any]
    check_invariants: bool = False
    warnings: list[str] = field(default_factory=list)
    checks: dict[str, str] = field(default_factory=dict)  # one line per softmax checked


@dataclass(frozen=True, slots=True)
class Compiled:
    """A node's closure. ``fresh``: the value shares memory with no named tensor,
    so its consumer may overwrite it. ``const``: folded at compile time."""

    run: Thunk
    fresh: bool = False
    const: bool = False


@dataclass(frozen=True, slots=True)
class Step:
    """One statement that defines a tensor, with what the checker expects of it."""

    name: str
    line: int
    run: Thunk
    shape: tuple[int, ...]
    symbolic: str  # the shape in the spec's notation, for a bug report
    dtype: np.dtype
    release: tuple[str, ...]  # names dead after this step


@dataclass(frozen=True, slots=True)
class Allocation:
    """A buffer the run creates: what the memory estimate adds up."""

    label: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    bindings: dict[str, int]
    peak_bytes: int  # the estimate: tensors alive plus each statement's temporaries
    largest: Allocation | None

    def execute(self, values: dict[str, Any], *, check_invariants: bool = False) -> Frame:
        """Run every step on ``values`` (inputs and params by name, already cast)."""
        frame = Frame(dict(values), check_invariants)
        with np.errstate(all="ignore"):  # NaN and inf are reported by name, not by NumPy
            for step in self.steps:
                result = step.run(frame)
                self._check(step, result)
                frame.values[step.name] = result
                for name in step.release:
                    del frame.values[name]
        return frame

    def _check(self, step: Step, result: Any) -> None:
        shape = np.shape(result)
        if shape != step.shape:
            raise CheckerBug(message(
                "shape_bug", name=step.name, line=step.line, actual=list(shape),
                symbolic=step.symbolic, expected=list(step.shape),
                bindings=bindings_text(self.bindings)))
        dtype = getattr(result, "dtype", None)
        if dtype != step.dtype:
            raise CheckerBug(message("dtype_bug", name=step.name, line=step.line,
                                     actual=dtype, expected=step.dtype))


# --- compiling a program ------------------------------------------------------------------


def compile_program(program: Program, dtype: np.dtype, *, keep_all: bool = False) -> Plan:
    """Compile a verified program whose dims are all bound into a :class:`Plan`."""
    return _PlanBuilder(program, np.dtype(dtype), keep_all).build()


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


def _definitions(program: Program) -> Iterator[tuple[nodes.Ident, nodes.Expr, int]]:
    for stmt in program.statements:
        if isinstance(stmt, nodes.Define) or (isinstance(stmt, nodes.Output) and stmt.value is not None):
            assert stmt.value is not None
            yield stmt.name, stmt.value, stmt.span.line


class _PlanBuilder:
    def __init__(self, program: Program, dtype: np.dtype, keep_all: bool) -> None:
        self.program = program
        self.dtype = dtype
        self.keep_all = keep_all
        self.kept = set(program.outputs)
        self.bindings = _bindings(program)
        self.usage = self._usage()
        self.owners: set[str] = set()  # defined tensors whose buffer no other name shares
        self.aliases: dict[str, set[str]] = {}  # defined tensor -> names it may share memory with

    def _usage(self) -> _Usage:
        usage = _Usage()
        for index, (ident, expr, _) in enumerate(_definitions(self.program)):
            reads: dict[str, int] = {}
            for name in _names(expr):
                if name in self.program.tensors:
                    reads[name] = reads.get(name, 0) + 1
                    usage.last_use[name] = index
            usage.reads.append(reads)
            usage.last_use.setdefault(ident.name, index)
        return usage

    def build(self) -> Plan:
        steps: list[Step] = []
        inputs = [t for t in self.program.tensors.values() if t.kind in ("input", "param")]
        live: dict[str, int] = {t.name: self._nbytes(t.value) for t in inputs}
        allocations = [Allocation(message("tensor_label", name=t.name), self._shape(t.value), live[t.name])
                       for t in inputs]
        peak = sum(live.values())
        for index, (ident, expr, line) in enumerate(_definitions(self.program)):
            name = ident.name
            tensor = self.program.tensors[name]
            shape = self._shape(tensor.value)
            compiler = _ExprCompiler(self, name, line, shape, self._donatable(index))
            compiled = compiler.compile(expr)
            peak = max(peak, sum(live.values()) + sum(a.nbytes for a in compiler.allocations))
            allocations += compiler.allocations
            if compiled.fresh:
                self.owners.add(name)
                live[name] = self._nbytes(tensor.value)
            else:
                shared = {n for n in _names(expr) if n in self.program.tensors}
                self.aliases[name] = shared.union(*(self.aliases.get(n, set()) for n in shared))
            release = () if self.keep_all else self.usage.dead_after(index, name, self.kept)
            for dead in release:
                if self.program.tensors[dead].kind == "defined":  # the caller holds the inputs
                    live.pop(dead, None)
            steps.append(Step(
                name, line, compiled.run, shape, tensor.value.text(),
                np.dtype(bool) if tensor.value.is_bool else self.dtype, release))
        largest = max(allocations, key=lambda a: a.nbytes, default=None)
        return Plan(tuple(steps), self.bindings, peak, largest)

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
        itemsize = 1 if value.is_bool else self.dtype.itemsize
        return math.prod(self._shape(value)) * itemsize


def evaluate_shape(program: Program, value: Value) -> tuple[int, ...]:
    """A shape at the program's bindings; every dim must be bound."""
    assert value.shape is not None
    dims = tuple(program.dims.evaluate(d) for d in value.shape)
    if any(d is None for d in dims):
        raise CheckerBug(message("bug_unbound_shape", shape=value.text()))
    return dims  # type: ignore[return-value]


def _bindings(program: Program) -> dict[str, int]:
    values = {name: program.dims.value_of(name) for name in program.dims.dims}
    return {name: value for name, value in values.items() if value is not None}


def _names(expr: nodes.Expr) -> Iterator[str]:
    """Every name read by an expression (keyword and list arguments included)."""
    if isinstance(expr, nodes.Name):
        yield expr.name
    for child in nodes.children(expr):
        yield from _names(child)


# --- compiling expressions: one function per node kind --------------------------------------


class _ExprCompiler:
    """Compiles the expression of one statement."""

    def __init__(self, plan: _PlanBuilder, name: str, line: int, result_shape: tuple[int, ...],
                 donated: frozenset[str]) -> None:
        self.plan = plan
        self.program = plan.program
        self.dtype = plan.dtype
        self.name = name
        self.line = line
        self.donated = donated
        self.allocations: list[Allocation] = []
        self.result_shape = result_shape

    def compile(self, node: nodes.Expr) -> Compiled:
        handler = _NODE_COMPILERS.get(type(node))
        if handler is None:
            raise CheckerBug(message("bug_not_value", kind=type(node).__name__, line=node.span.line))
        return handler(self, node)

    # helpers for node and builtin compilers

    def scalar(self, value: float | int) -> Any:
        return self.dtype.type(value)

    def constant(self, value: Any) -> Compiled:
        return Compiled(lambda frame: value, const=True)

    def value_of(self, node: nodes.Expr) -> Value:
        value = self.program.types.get(id(node))
        if value is None or value.shape is None:
            raise CheckerBug(message("bug_no_type", line=node.span.line))
        return value

    def shape_of(self, node: nodes.Expr) -> tuple[int, ...]:
        return evaluate_shape(self.program, self.value_of(node))

    def dim(self, dim: Any) -> int:
        value = self.program.dims.evaluate(dim)
        if value is None:
            raise CheckerBug(message("bug_unbound_shape", shape=f"[{dim}]"))
        return value

    def allocates(self, node: nodes.Expr) -> None:
        """Record that ``node`` creates a buffer of its own shape."""
        value = self.value_of(node)
        shape = self.shape_of(node)
        itemsize = 1 if value.is_bool else self.dtype.itemsize
        if shape == self.result_shape:  # most likely the buffer that becomes the tensor
            label = message("tensor_label", name=self.name)
        else:
            label = message("temporary_label", name=self.name, line=self.line)
        self.allocations.append(Allocation(label, shape, math.prod(shape) * itemsize))

    def fold(self, compiled: Compiled, *children: Compiled) -> Compiled:
        """Evaluate at compile time when every operand is a constant."""
        if children and all(c.const for c in children):
            with np.errstate(all="ignore"):
                return self.constant(compiled.run(Frame({})))
        return compiled

    def numeric(self, node: nodes.Expr) -> Compiled:
        """A value used as numbers: a bool one is read as 0 and 1 in the run's dtype
        (SC403), so that NumPy's own bool rules (``exp`` of bool is float16) never apply."""
        compiled = self.compile(node)
        if not self.value_of(node).is_bool:
            return compiled
        run, dtype = compiled.run, self.dtype
        if self.shape_of(node):
            self.allocates(node)
        return self.fold(Compiled(lambda frame: run(frame).astype(dtype), fresh=True), compiled)

    def elementwise(self, node: nodes.Expr, operand: Compiled,
                    apply: Callable[[Any, Any], Any]) -> Compiled:
        """``apply(x, out)`` for a same-shape elementwise result, in place when
        the operand is a fresh array."""
        run = operand.run
        if operand.fresh and self.shape_of(node):
            return Compiled(lambda frame: _in_place(apply, run(frame)), fresh=True)
        if self.shape_of(node):
            self.allocates(node)
        return self.fold(Compiled(lambda frame: apply(run(frame), None), fresh=True), operand)


def _in_place(apply: Callable[[Any, Any], Any], value: Any) -> Any:
    return apply(value, value)


def _owned(value: Any) -> Any:
    """``out=`` for a value this operation created: arrays only (NumPy scalars are immutable)."""
    return value if isinstance(value, np.ndarray) and value.ndim else None


def _compile_name(c: _ExprCompiler, node: nodes.Name) -> Compiled:
    if node.name not in c.program.tensors:  # a dim used as a value: a scalar
        value = c.program.dims.value_of(node.name)
        if value is None:
            raise CheckerBug(message("bug_unbound_shape", shape=f"[{node.name}]"))
        return c.constant(c.scalar(value))
    name = node.name
    return Compiled(lambda frame: frame.values[name], fresh=name in c.donated)


def _compile_number(c: _ExprCompiler, node: nodes.Integer | nodes.Decimal) -> Compiled:
    return c.constant(c.scalar(node.value))


def _compile_inf(c: _ExprCompiler, node: nodes.Inf) -> Compiled:
    return c.constant(c.scalar(math.inf))


def _compile_boolean(c: _ExprCompiler, node: nodes.Boolean) -> Compiled:
    return c.constant(np.bool_(node.value))


def _compile_paren(c: _ExprCompiler, node: nodes.Paren) -> Compiled:
    return c.compile(node.inner)


def _compile_unary(c: _ExprCompiler, node: nodes.Unary) -> Compiled:
    if node.op == "~":  # on bool (the checker made sure)
        return c.elementwise(node, c.compile(node.operand),
                             lambda x, out: np.logical_not(x, out=out))
    operand = c.numeric(node.operand)
    if node.op == "+":
        return operand
    return c.elementwise(node, operand, lambda x, out: np.negative(x, out=out))


_UFUNCS: dict[str, np.ufunc] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
    "//": np.floor_divide, "**": np.power,
}
# Comparisons and logic: bool results.
_BOOL_UFUNCS: dict[str, np.ufunc] = {
    "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
    ">": np.greater, ">=": np.greater_equal, "&": np.logical_and, "|": np.logical_or,
}


def _compile_binop(c: _ExprCompiler, node: nodes.BinOp) -> Compiled:
    if node.op in _BOOL_UFUNCS:
        return _compile_bool_binop(c, node)
    left, right = c.numeric(node.left), c.numeric(node.right)
    lrun, rrun = left.run, right.run
    if node.op == "@":
        c.allocates(node)
        return Compiled(lambda frame: np.matmul(lrun(frame), rrun(frame)), fresh=True)
    ufunc = _UFUNCS[node.op]
    shape = c.shape_of(node)
    if c.value_of(node).is_bool:  # bool with bool: computed as 0 and 1, nonzero is true
        zero = c.scalar(0)        # (`+` and `*` give NumPy's logical or and and)
        if shape:
            c.allocates(node)
        return c.fold(Compiled(lambda frame: np.not_equal(ufunc(lrun(frame), rrun(frame)), zero),
                               fresh=True), left, right)
    if shape and left.fresh and c.shape_of(node.left) == shape:
        return Compiled(lambda frame: _binary_into_left(ufunc, lrun(frame), rrun(frame)), fresh=True)
    if shape and right.fresh and c.shape_of(node.right) == shape:
        return Compiled(lambda frame: _binary_into_right(ufunc, lrun(frame), rrun(frame)), fresh=True)
    if shape:
        c.allocates(node)
    return c.fold(Compiled(lambda frame: ufunc(lrun(frame), rrun(frame)), fresh=True), left, right)


def _compile_bool_binop(c: _ExprCompiler, node: nodes.BinOp) -> Compiled:
    """A comparison or `&` / `|`. Bool operands are compared as bool only when both
    are (`M == M2`, `M & M2`); otherwise as numbers (SC403), as the checker typed them."""
    both_bool = c.value_of(node.left).is_bool and c.value_of(node.right).is_bool
    operand = c.compile if both_bool else c.numeric
    left, right = operand(node.left), operand(node.right)
    lrun, rrun, ufunc = left.run, right.run, _BOOL_UFUNCS[node.op]
    shape = c.shape_of(node)
    if shape and both_bool and left.fresh and c.shape_of(node.left) == shape:
        return Compiled(lambda frame: _binary_into_left(ufunc, lrun(frame), rrun(frame)), fresh=True)
    if shape:
        c.allocates(node)
    return c.fold(Compiled(lambda frame: ufunc(lrun(frame), rrun(frame)), fresh=True), left, right)


def _binary_into_left(ufunc: np.ufunc, left: Any, right: Any) -> Any:
    return ufunc(left, right, out=left)


def _binary_into_right(ufunc: np.ufunc, left: Any, right: Any) -> Any:
    return ufunc(left, right, out=right)


def _compile_transpose(c: _ExprCompiler, node: nodes.Transpose) -> Compiled:
    operand = c.compile(node.operand)
    run = operand.run
    return Compiled(lambda frame: np.swapaxes(run(frame), -1, -2), fresh=operand.fresh)


def _compile_subscript(c: _ExprCompiler, node: nodes.Subscript) -> Compiled:
    """`x[...]` as NumPy basic indexing, with the bounds the checker normalised: a
    view of the operand (no copy), fresh when the operand is."""
    plan = c.program.subscripts.get(id(node))
    if plan is None:
        raise CheckerBug(message("bug_unresolved_call", name="[...]", line=node.span.line))
    key = tuple(_index_key(c, entry) for entry in plan.entries)
    operand = c.compile(node.operand)
    run = operand.run
    return c.fold(Compiled(lambda frame: run(frame)[key], fresh=operand.fresh), operand)


def _index_key(c: _ExprCompiler, entry: Take | Range | NewAxis) -> Any:
    if isinstance(entry, Take):
        return c.dim(entry.index)
    if isinstance(entry, Range):
        start = None if entry.start is None else c.dim(entry.start)
        stop = None if entry.stop is None else c.dim(entry.stop)
        return slice(start, stop, c.dim(entry.step))
    return None  # np.newaxis


def _compile_call(c: _ExprCompiler, node: nodes.Call) -> Compiled:
    info = c.program.calls.get(id(node))
    if info is None:
        raise CheckerBug(message("bug_unresolved_call", name=node.func.name, line=node.span.line))
    implementation = BUILTINS.get(info.builtin)
    if implementation is None:
        raise CheckerBug(message("bug_no_builtin", name=info.builtin))
    return implementation(_Call(c, node, info))


_NODE_COMPILERS: dict[type, Callable[[_ExprCompiler, Any], Compiled]] = {
    nodes.Name: _compile_name,
    nodes.Integer: _compile_number,
    nodes.Decimal: _compile_number,
    nodes.Inf: _compile_inf,
    nodes.Boolean: _compile_boolean,
    nodes.Paren: _compile_paren,
    nodes.Unary: _compile_unary,
    nodes.BinOp: _compile_binop,
    nodes.Transpose: _compile_transpose,
    nodes.Call: _compile_call,
    nodes.Subscript: _compile_subscript,
}


# --- builtins: one row per builtin ----------------------------------------------------------


@dataclass
class _Call:
    """What a builtin's implementation may ask about its call."""

    c: _ExprCompiler
    node: nodes.Call
    info: CallInfo

    def tensor(self, param: str = "x") -> Compiled:
        return self.c.compile(self.info.args[param])

    def numeric(self, param: str = "x") -> Compiled:
        return self.c.numeric(self.info.args[param])

    def tensors(self, param: str, numeric: bool = False) -> list[Compiled]:
        items: nodes.ListExpr = self.info.args[param]
        compile = self.c.numeric if numeric else self.c.compile
        return [compile(item) for item in items.items]

    def rank(self, param: str = "x") -> int:
        argument = self.info.args[param]
        if isinstance(argument, nodes.ListExpr):
            argument = argument.items[0]
        return self.c.value_of(argument).rank

    def axis(self, param: str = "axis", of: str = "x") -> int | None:
        """``row``/``col``/negative -> a non-negative index (None: every axis)."""
        axis = self.info.args[param]
        if axis is None:
            return None
        return axis_index(axis, self.rank(of))

    def arg(self, param: str) -> Any:
        return self.info.args[param]

    def dim(self, param: str) -> int:
        return self.c.dim(self.info.args[param])

    def shape(self, param: str = "shape") -> tuple[int, ...]:
        return tuple(self.c.dim(d) for d in self.info.args[param])

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.c.shape_of(self.node)

    def allocates(self) -> None:
        self.c.allocates(self.node)

    def elementwise(self, apply: Callable[[Any, Any], Any]) -> Compiled:
        return self.c.elementwise(self.node, self.numeric(), apply)


Implementation = Callable[[_Call], Compiled]


def _ufunc_row(ufunc: np.ufunc) -> Implementation:
    return lambda call: call.elementwise(lambda x, out: ufunc(x, out=out))


def _relu(call: _Call) -> Compiled:
    zero = call.c.scalar(0)
    return call.elementwise(lambda x, out: np.maximum(x, zero, out=out))


def _sigmoid_apply(zero: Any) -> Callable[[Any, Any], Any]:
    def apply(x: Any, out: Any) -> Any:  # exp(-log(1 + exp(-x))): no overflow either way
        t = np.negative(x, out=out)
        t = np.logaddexp(zero, t, out=_owned(t))
        t = np.negative(t, out=_owned(t))
        return np.exp(t, out=_owned(t))

    return apply


def _sigmoid(call: _Call) -> Compiled:
    return call.elementwise(_sigmoid_apply(call.c.scalar(0)))


def _gelu(call: _Call) -> Compiled:
    half, root2 = call.c.scalar(0.5), call.c.scalar(math.sqrt(2.0))
    one = call.c.scalar(1)

    def apply(x: Any, out: Any) -> Any:  # x * (1 + erf(x / sqrt 2)) / 2, the exact form
        t = erf(np.true_divide(x, root2))
        t += one
        t *= half
        return np.multiply(x, t, out=out)

    return call.elementwise(apply)


def _silu(call: _Call) -> Compiled:
    sigmoid = _sigmoid_apply(call.c.scalar(0))
    return call.elementwise(lambda x, out: np.multiply(x, sigmoid(x, None), out=out))


def _softplus(call: _Call) -> Compiled:
    zero = call.c.scalar(0)
    return call.elementwise(lambda x, out: np.logaddexp(zero, x, out=out))  # log(1 + e^x), stable


def _elu(call: _Call) -> Compiled:
    alpha, zero = call.c.scalar(call.arg("alpha")), call.c.scalar(0)
    # x where x > 0, alpha * (e^x - 1) elsewhere (expm1 of min(x, 0): no overflow)
    return call.elementwise(lambda x, out: np.where(
        x > zero, x, np.multiply(np.expm1(np.minimum(x, zero)), alpha)))


def _erf(call: _Call) -> Compiled:
    return call.elementwise(lambda x, out: erf(x))


def _rsqrt(call: _Call) -> Compiled:
    one = call.c.scalar(1)

    def apply(x: Any, out: Any) -> Any:
        root = np.sqrt(x, out=out)
        return np.true_divide(one, root, out=_owned(root))

    return call.elementwise(apply)


def _softmax(call: _Call) -> Compiled:
    x = call.numeric()
    axis = call.axis()
    assert axis is not None
    run, fresh = x.run, x.fresh
    name, line = call.c.name, call.c.line
    tolerance = SOFTMAX_TOLERANCE.get(call.c.dtype, 1e-4)
    what = message("what_row" if axis == call.rank() - 1 else
                   "what_column" if axis == call.rank() - 2 else "what_slice")
    if not fresh:
        call.allocates()

    def softmax(frame: Frame) -> Any:
        value = run(frame)
        peak = np.max(value, axis=axis, keepdims=True)
        masked = np.isneginf(peak)
        if masked.any():  # an entirely -inf slice: -inf - -inf is NaN, as in NumPy
            frame.warnings.append(message("masked_rows", name=name, line=line,
                                          count=int(np.count_nonzero(masked))))
        out = np.subtract(value, peak, out=value if fresh else None)
        np.exp(out, out=out)
        out /= np.sum(out, axis=axis, keepdims=True)
        if frame.check_invariants:
            _check_softmax(frame, out, axis, name, line, what, tolerance)
        return out

    return Compiled(softmax, fresh=True)


def _check_softmax(frame: Frame, out: Any, axis: int, name: str, line: int, what: str,
                   tolerance: float) -> None:
    totals = np.sum(out, axis=axis, dtype=np.float64)
    valid = ~np.isnan(totals)
    error = float(np.max(np.abs(totals[valid] - 1.0))) if valid.any() else 0.0
    if error > tolerance:
        worst = totals[valid].ravel()[np.argmax(np.abs(totals[valid] - 1.0))]
        raise CheckerBug(message("softmax_sum", name=name, line=line, what=what,
                                 total=float(worst), axis=axis))
    key = "check_softmax" if valid.all() else "check_softmax_nan"
    frame.checks[f"{name}:{line}:{axis}"] = message(key, name=name, line=line, what=what,
                                                     axis=axis, error=error)


def _transpose(call: _Call) -> Compiled:
    x = call.tensor()
    run, perm = x.run, call.arg("perm")
    if perm is None:
        return Compiled(lambda frame: np.swapaxes(run(frame), -1, -2), fresh=x.fresh)
    return Compiled(lambda frame: np.transpose(run(frame), perm), fresh=x.fresh)


def _reshape(call: _Call) -> Compiled:
    x = call.tensor()
    run, target = x.run, call.out_shape  # the checker inferred any -1
    return Compiled(lambda frame: np.reshape(run(frame), target), fresh=x.fresh)


def _split_heads(call: _Call) -> Compiled:
    x = call.tensor()
    *batch, heads, n, d = call.out_shape
    run, grouped = x.run, (*batch, n, heads, d)  # head h owns columns h*d ... h*d+d-1
    return Compiled(lambda frame: np.swapaxes(np.reshape(run(frame), grouped), -3, -2),
                    fresh=x.fresh)


def _merge_heads(call: _Call) -> Compiled:
    x = call.tensor()
    run, target = x.run, call.out_shape
    call.allocates()
    return Compiled(lambda frame: np.reshape(np.swapaxes(run(frame), -3, -2), target),
                    fresh=x.fresh)


def _repeat(call: _Call) -> Compiled:
    x = call.tensor()
    run, repeats, axis = x.run, call.dim("repeats"), call.axis()
    call.allocates()
    return Compiled(lambda frame: np.repeat(run(frame), repeats, axis=axis), fresh=True)


def _concat(call: _Call) -> Compiled:
    parts = [p.run for p in call.tensors("tensors")]
    axis = call.axis(of="tensors")
    call.allocates()
    return Compiled(lambda frame: np.concatenate([p(frame) for p in parts], axis=axis), fresh=True)


def _reduction(reduce: Callable[..., Any]) -> Implementation:
    def implementation(call: _Call) -> Compiled:
        x = call.numeric()  # counting a mask gives a real number
        run, axis, keep = x.run, call.axis(), bool(call.arg("keepdims"))
        if call.out_shape:
            call.allocates()
        return call.c.fold(Compiled(lambda frame: reduce(run(frame), axis=axis, keepdims=keep),
                                    fresh=True), x)

    return implementation


def _normalise(rms: bool) -> Implementation:
    def implementation(call: _Call) -> Compiled:
        eps = call.c.scalar(call.arg("eps"))
        axis = -1 if call.rank() else None

        def apply(x: Any, out: Any) -> Any:
            centred = x if rms else np.subtract(x, np.mean(x, axis=axis, keepdims=True), out=out)
            scale = np.sqrt(np.mean(np.square(centred), axis=axis, keepdims=True) + eps)
            return np.true_divide(centred, scale, out=out if rms else _owned(centred))

        return call.elementwise(apply)

    return implementation


def _where(call: _Call) -> Compiled:
    condition, x, y = call.tensor("condition"), call.tensor("x"), call.tensor("y")
    crun, xrun, yrun = condition.run, x.run, y.run
    shape = call.out_shape
    same_type = call.c.value_of(call.node).is_bool == call.c.value_of(call.info.args["x"]).is_bool
    if x.fresh and same_type and call.c.shape_of(call.info.args["x"]) == shape:
        # overwrite x where the condition is false (a masked score table stays one buffer)
        return Compiled(lambda frame: _copy_where(xrun(frame), yrun(frame), crun(frame), False),
                        fresh=True)
    same_type = call.c.value_of(call.node).is_bool == call.c.value_of(call.info.args["y"]).is_bool
    if y.fresh and same_type and call.c.shape_of(call.info.args["y"]) == shape:
        return Compiled(lambda frame: _copy_where(yrun(frame), xrun(frame), crun(frame), True),
                        fresh=True)
    if shape:
        call.allocates()
    return Compiled(lambda frame: np.where(crun(frame), xrun(frame), yrun(frame)), fresh=True)


def _copy_where(target: Any, source: Any, condition: Any, where: bool) -> Any:
    np.copyto(target, source, where=condition if where else np.logical_not(condition))
    return target


def _causal_mask(call: _Call) -> Compiled:
    queries = call.dim("n")
    keys = call.dim("n_k") if call.arg("n_k") is not None else queries
    # Aligned bottom right: query i sees key j <= i + keys - queries, as
    # np.tril(ones, k=keys - queries); with a window W, not j <= i + offset - W.
    offset = keys - queries
    window = call.dim("window") if call.arg("window") is not None else None
    call.allocates()

    def mask(frame: Frame) -> Any:
        visible = np.tri(queries, keys, k=offset, dtype=bool)
        if window is not None:
            visible &= ~np.tri(queries, keys, k=offset - window, dtype=bool)
        return visible

    return Compiled(mask, fresh=True)


def _triangle(keep: Callable[..., Any]) -> Implementation:
    def implementation(call: _Call) -> Compiled:
        x = call.tensor()
        run, k = x.run, call.dim("k")
        call.allocates()
        return call.c.fold(Compiled(lambda frame: keep(run(frame), k=k), fresh=True), x)

    return implementation


def _arange(call: _Call) -> Compiled:
    n, dtype = call.dim("n"), call.c.dtype
    call.allocates()
    return Compiled(lambda frame: np.arange(n, dtype=dtype), fresh=True)


def _stack(call: _Call) -> Compiled:
    parts = [p.run for p in call.tensors("tensors")]
    axis = axis_index(call.arg("axis"), call.rank("tensors") + 1)
    call.allocates()
    return Compiled(lambda frame: np.stack([p(frame) for p in parts], axis=axis), fresh=True)


def _constant_fill(fill: Callable[..., Any]) -> Implementation:
    def implementation(call: _Call) -> Compiled:
        shape, dtype = call.shape(), call.c.dtype
        if shape:
            call.allocates()
            return Compiled(lambda frame: fill(shape, dtype=dtype), fresh=True)
        return call.c.constant(fill((), dtype=dtype)[()])

    return implementation


def _einsum(call: _Call) -> Compiled:
    # The subscripts as the checker read them (einsum.parse_subscripts: no whitespace, the
    # output explicit). optimize=True: NumPy's Python parser, which also sums `...` axes
    # the output leaves out ("...i->i"), and contraction through BLAS; same meaning.
    subscripts = call.arg("subscripts")
    operands = call.tensors("operands", numeric=True)
    runs = [o.run for o in operands]
    if len(operands) == 1:  # may return a view of its operand
        run = runs[0]
        return Compiled(lambda frame: np.einsum(subscripts, run(frame), optimize=True),
                        fresh=operands[0].fresh)
    call.allocates()
    return Compiled(lambda frame: np.einsum(subscripts, *[r(frame) for r in runs], optimize=True),
                    fresh=True)


def _dropout(call: _Call) -> Compiled:
    return call.numeric()  # identity when executed (language.md, section 6)


BUILTINS: dict[str, Implementation] = {
    "softmax": _softmax,
    "transpose": _transpose,
    "reshape": _reshape,
    "split_heads": _split_heads,
    "merge_heads": _merge_heads,
    "repeat": _repeat,
    "concat": _concat,
    "layernorm": _normalise(rms=False),
    "rmsnorm": _normalise(rms=True),
    "where": _where,
    "causal_mask": _causal_mask,
    "tril": _triangle(np.tril),
    "triu": _triangle(np.triu),
    "arange": _arange,
    "stack": _stack,
    "ones": _constant_fill(np.ones),
    "zeros": _constant_fill(np.zeros),
    "einsum": _einsum,
    "dropout": _dropout,
    "exp": _ufunc_row(np.exp),
    "log": _ufunc_row(np.log),
    "sqrt": _ufunc_row(np.sqrt),
    "tanh": _ufunc_row(np.tanh),
    "abs": _ufunc_row(np.abs),
    "sigmoid": _sigmoid,
    "relu": _relu,
    "gelu": _gelu,
    "cos": _ufunc_row(np.cos),
    "sin": _ufunc_row(np.sin),
    "square": _ufunc_row(np.square),
    "rsqrt": _rsqrt,
    "silu": _silu,
    "softplus": _softplus,
    "elu": _elu,
    "erf": _erf,
    "sum": _reduction(np.sum),
    "mean": _reduction(np.mean),
    "max": _reduction(np.max),
    "min": _reduction(np.min),
}


# --- erf, for the exact gelu -------------------------------------------------------------------

_ERF_SPLIT = 2.0
_ERF_SERIES_TERMS = 30
_ERF_FRACTION_TERMS = 60
# erf(x) = 2/sqrt(pi) * x * exp(-x^2) * sum_k (2x^2)^k / (1*3*...*(2k+1)): positive terms
_ERF_SERIES = tuple(1.0 / math.prod(range(1, 2 * k + 2, 2)) for k in range(_ERF_SERIES_TERMS))


def erf(x: Any) -> Any:
    """The error function, elementwise, in the dtype of ``x`` (NumPy has none).

    Below 2: the power series above (no cancellation, all terms positive).
    From 2 on: erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + (2/2)/(x + (3/2)/...))),
    Laplace's continued fraction, evaluated from the bottom up. Within a few ulps
    of ``math.erf`` in float64 (tests/test_run_numeric.py).
    """
    values = np.asarray(x)
    dtype = values.dtype.type
    magnitude = np.abs(values)
    result = np.empty_like(magnitude)
    small = magnitude < _ERF_SPLIT
    near = magnitude[small]
    square = near * near
    twice = square * dtype(2)
    series = np.zeros_like(near)
    for coefficient in reversed(_ERF_SERIES):
        series *= twice
        series += dtype(coefficient)
    result[small] = dtype(2 / math.sqrt(math.pi)) * near * np.exp(-square) * series
    far = magnitude[~small]
    fraction = far.copy()
    for k in range(_ERF_FRACTION_TERMS, 0, -1):
        fraction = far + dtype(k / 2) / fraction
    result[~small] = dtype(1) - np.exp(-far * far) / dtype(math.sqrt(math.pi)) / fraction
    return np.copysign(result, values)
