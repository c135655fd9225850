"""A checked program, at concrete bindings, lowered into NumPy closures.

Lowering walks the syntax tree once: one function per node kind turns a
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
import string
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..syntax import nodes
from ..check.builtins import axis_index
from ..messages.diagnostics import line_starts, span_text
from ..check.einsum import parse_subscripts
from ..check.program import NewAxis, Program, Range, Take, Value
from ..check.value_rules import axes_of
from . import fused, pattern
from .errors import CheckerBug, InputError, message
from .plan import (
    Allocation, Closure, Frame, Lowered, Plan, PlanBuilder, Statement, build,
)
from .lowering import (
    NODES, Call, Implementation, Lowerer, check_sums, lower_call, slice_word, table,
)

CHUNK = 8192  # elements per block of a blockwise builtin (gelu): bounded temporaries
SOFTMAX_TOLERANCE = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-10}


@dataclass(frozen=True, slots=True)
class WeightsCheck:
    """The weights a contraction consumes (an attention of ``Program.meaning``): they
    must sum to 1 along the axes it sums over. A violation is the spec's doing (a mask
    after the softmax, a softmax over the wrong axis), so it is a warning, not a bug."""

    weights: str  # the operand as written (`P.T`)
    contraction: str  # `P.T @ V`
    line: int
    axes: tuple[int, ...]  # of the weights, non-negative


class NumPy:
    """The NumPy framework, as the plan asks of it (:class:`.plan.Framework`): its rows are
    :data:`BUILTINS` and the node lowerers below, its fused form the blockwise kernel."""

    def __init__(self, program: Program, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.itemsize = dtype.itemsize
        self.weights = _weights_checks(program)  # id(weights operand) -> its check
        # a fused pattern's weights are never built: its check is made inside the blocks
        self.fused_weights = {id(a.output): self.weights[id(a.weights)]
                              for a in (program.meaning.patterns if program.meaning else ())
                              if id(a.weights) in self.weights}

    def fused_form(self, builder: PlanBuilder, fusable: pattern.Fusable
                   ) -> tuple[fused.Planned | None, str]:
        planned = fused.plan(fusable, builder.shape_of, builder.program.dims.evaluate,
                             self.itemsize)
        return planned, "fused_layout"

    def lower(self, builder: PlanBuilder, statement: Statement) -> Lowered:
        lowerer = _ExprLowerer(builder, self, statement.name, statement.line, statement.shape,
                               statement.donated)
        # A bool value stays bool (under a plain annotation too); a real one is numbers.
        closure = (lowerer.lower(statement.expr) if statement.value.is_bool
                   else lowerer.numeric(statement.expr))
        return Lowered(closure, lowerer.allocations, lowerer.owns_result)

    def element_dtype(self, value: Value) -> np.dtype:
        return np.dtype(bool) if value.is_bool else element_dtype(value, self.dtype)

    def running(self) -> AbstractContextManager[Any]:
        return np.errstate(all="ignore")  # NaN and inf are reported by name, not by NumPy

    def enter(self, value: Any) -> Any:
        return _read_only(value)

    def leave(self, value: Any) -> Any:
        return value

    def shape(self, value: Any) -> tuple[int, ...]:
        return np.shape(value)

    def dtype_of(self, value: Any) -> np.dtype | None:
        return getattr(value, "dtype", None)

    def dtype_text(self, dtype: np.dtype | None) -> str:
        return str(dtype)


def _read_only(value: Any) -> Any:
    """The caller's array, as a view that no step can write into: a step that would (a bug)
    fails loudly instead of changing the caller's data."""
    if not isinstance(value, np.ndarray) or not value.flags.writeable:
        return value
    view = value.view()
    view.flags.writeable = False
    return view


def build_plan(program: Program, dtype: np.dtype, *, keep_all: bool = False,
               fuse: bool = True) -> Plan:
    """Build the :class:`.plan.Plan` of a verified program whose dims are all bound; with
    ``fuse``, every attention pattern that allows it runs block by block
    (:mod:`.fused`), its score tables never built."""
    dtype = np.dtype(dtype)
    return build(program, NumPy(program, dtype), keep_all=keep_all, fuse=fuse)


# --- lowering expressions: one function per node kind ---------------------------------------


class _ExprLowerer(Lowerer):
    """Lowers the expression of one statement into NumPy closures."""

    def __init__(self, plan: PlanBuilder, numpy: NumPy, name: str, line: int,
                 result_shape: tuple[int, ...], donated: frozenset[str]) -> None:
        super().__init__(plan, name, line, result_shape)
        self.numpy = numpy
        self.dtype = numpy.dtype
        self.donated = donated

    def lower(self, node: nodes.Expr) -> Closure:
        closure = super().lower(node)
        check = None if id(node) in self.plan.fused else self.numpy.weights.get(id(node))
        if check is not None:
            # the check's float64 sums and deviations, and which sums are NaN
            self.reduced(node, check.axes[0], count=2, itemsize=8)
            self.reduced(node, check.axes[0], itemsize=1)
            closure = _checked_weights(closure, check, SOFTMAX_TOLERANCE.get(self.dtype, 1e-4))
        return closure

    def lower_fused(self, node: nodes.Expr, form: fused.Planned) -> Closure:
        return _lower_fused(self, form, self.numpy.fused_weights.get(id(node)))

    def lower_substitute(self, node: nodes.Expr, substitute: Any) -> Closure:
        return _lower_substitute(self, node, substitute)

    def quiet(self) -> AbstractContextManager[Any]:
        return np.errstate(all="ignore")

    # helpers for node and builtin lowerers

    def scalar(self, value: float | int) -> Any:
        return self.dtype.type(value)

    def boolean(self, value: bool) -> Any:
        return np.bool_(value)

    def tensor_name(self, name: str) -> Closure:
        return Closure(lambda frame: frame.values[name], fresh=name in self.donated,
                       contiguous=self.plan.contiguous.get(name, True))  # inputs are cast C-contiguous

    def reduced(self, node: nodes.Expr, axis: int | None, count: int = 1, itemsize: int = 0) -> None:
        """Record ``count`` temporaries of ``node``'s shape reduced along ``axis``
        (keepdims), as softmax and the norms make (their row maxima, sums, variances)."""
        shape = list(self.shape_of(node))
        if axis is None:
            shape = [1] * len(shape)
        elif shape:
            shape[axis] = 1
        for _ in range(count):
            self.allocations.append(Allocation(
                message("temporary_label", name=self.name, line=self.line), tuple(shape),
                math.prod(shape) * (itemsize or self.dtype.itemsize)))

    def numeric(self, node: nodes.Expr) -> Closure:
        """A value used as numbers: a bool one is read as 0 and 1 in the run's dtype
        (SC403), so that NumPy's own bool rules (``exp`` of bool is float16) never apply."""
        closure = self.lower(node)
        if not self.value_of(node).is_bool:
            return closure
        run, dtype = closure.run, self.dtype
        if self.shape_of(node):
            self.buffer(self.shape_of(node), dtype.itemsize)  # the numbers, not the bools
        return self.fold(Closure(lambda frame: run(frame).astype(dtype), fresh=True,
                                 contiguous=closure.contiguous), closure)

    def elementwise(self, node: nodes.Expr, operand: Closure,
                    apply: Callable[[Any, Any], Any]) -> Closure:
        """``apply(x, out)`` for a same-shape elementwise result, in place when
        the operand is a fresh array."""
        run = operand.run
        if operand.fresh and self.shape_of(node):
            return Closure(lambda frame: _in_place(apply, run(frame)), fresh=True,
                           contiguous=operand.contiguous)
        if self.shape_of(node):
            self.allocates(node)
        return self.fold(Closure(lambda frame: apply(run(frame), None), fresh=True,
                                 contiguous=operand.contiguous), operand)


def _in_place(apply: Callable[[Any, Any], Any], value: Any) -> Any:
    return apply(value, value)


def _owned(value: Any) -> Any:
    """``out=`` for a value this operation created: arrays only (NumPy scalars are immutable)."""
    return value if isinstance(value, np.ndarray) and value.ndim else None


def _lower_unary(c: _ExprLowerer, node: nodes.Unary) -> Closure:
    if node.op == "~":  # on bool (the checker made sure)
        return c.elementwise(node, c.lower(node.operand),
                             lambda x, out: np.logical_not(x, out=out))
    operand = c.numeric(node.operand)
    if node.op == "+":
        return operand
    return c.elementwise(node, operand, lambda x, out: np.negative(x, out=out))


_UFUNCS: dict[str, np.ufunc] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
    "//": np.floor_divide, "**": np.power,
    "%": np.remainder,  # issue 21: Python's sign, as torch.remainder
}
# Comparisons and logic: bool results.
_BOOL_UFUNCS: dict[str, np.ufunc] = {
    "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
    ">": np.greater, ">=": np.greater_equal, "&": np.logical_and, "|": np.logical_or,
}


def _lower_binop(c: _ExprLowerer, node: nodes.BinOp) -> Closure:
    if node.op in _BOOL_UFUNCS:
        return _lower_bool_binop(c, node)
    left, right = c.numeric(node.left), c.numeric(node.right)
    lrun, rrun = left.run, right.run
    if node.op == "@":
        c.allocates(node)
        return Closure(lambda frame: np.matmul(lrun(frame), rrun(frame)), fresh=True,
                       contiguous=True)  # matmul allocates C order, whatever its operands
    ufunc = _UFUNCS[node.op]
    shape = c.shape_of(node)
    both = left.contiguous and right.contiguous
    if c.value_of(node).is_bool:  # bool with bool: computed as 0 and 1, nonzero is true
        zero = c.scalar(0)        # (`+` and `*` give NumPy's logical or and and)
        if shape:
            c.buffer(shape, c.dtype.itemsize)  # the numbers
            c.allocates(node)
        return c.fold(Closure(lambda frame: np.not_equal(ufunc(lrun(frame), rrun(frame)), zero),
                              fresh=True, contiguous=both), left, right)
    if shape and left.fresh and c.shape_of(node.left) == shape and _same_kind(c, node.left, node):
        return Closure(lambda frame: _binary_into_left(ufunc, lrun(frame), rrun(frame)), fresh=True,
                       contiguous=left.contiguous)
    if shape and right.fresh and c.shape_of(node.right) == shape and _same_kind(c, node.right, node):
        return Closure(lambda frame: _binary_into_right(ufunc, lrun(frame), rrun(frame)),
                       fresh=True, contiguous=right.contiguous)
    if shape:
        c.allocates(node)
    return c.fold(Closure(lambda frame: ufunc(lrun(frame), rrun(frame)), fresh=True,
                          contiguous=both), left, right)


def _lower_bool_binop(c: _ExprLowerer, node: nodes.BinOp) -> Closure:
    """A comparison or `&` / `|`. Bool operands are compared as bool only when both
    are (`M == M2`, `M & M2`); otherwise as numbers (SC403), as the checker typed them."""
    both_bool = c.value_of(node.left).is_bool and c.value_of(node.right).is_bool
    operand = c.lower if both_bool else c.numeric
    left, right = operand(node.left), operand(node.right)
    lrun, rrun, ufunc = left.run, right.run, _BOOL_UFUNCS[node.op]
    shape = c.shape_of(node)
    if shape and both_bool and left.fresh and c.shape_of(node.left) == shape:
        return Closure(lambda frame: _binary_into_left(ufunc, lrun(frame), rrun(frame)), fresh=True,
                       contiguous=left.contiguous)
    if shape:
        c.allocates(node)
    return c.fold(Closure(lambda frame: ufunc(lrun(frame), rrun(frame)), fresh=True,
                          contiguous=left.contiguous and right.contiguous), left, right)


def _same_kind(c: _ExprLowerer, operand: nodes.Expr, node: nodes.Expr) -> bool:
    """A real buffer cannot hold a complex result (issue 21): in place only within a kind."""
    return (c.value_of(operand).element == "complex") == (c.value_of(node).element == "complex")


def _binary_into_left(ufunc: np.ufunc, left: Any, right: Any) -> Any:
    return ufunc(left, right, out=left)


def _binary_into_right(ufunc: np.ufunc, left: Any, right: Any) -> Any:
    return ufunc(left, right, out=right)


def _lower_transpose(c: _ExprLowerer, node: nodes.Transpose) -> Closure:
    operand = c.lower(node.operand)
    run = operand.run
    return Closure(lambda frame: np.swapaxes(run(frame), -1, -2), fresh=operand.fresh)


def _lower_subscript(c: _ExprLowerer, node: nodes.Subscript) -> Closure:
    """`x[...]` as NumPy basic indexing, with the bounds the checker normalised: a
    view of a named tensor (no copy); of a temporary, a copy, so that the temporary is
    freed rather than kept alive by a small view of it (the estimate counts the copy)."""
    if id(node) in c.program.calls:  # a gather, `E[ids]`: the checker read it as `take`
        return lower_call(c, node)  # type: ignore[arg-type]
    key = index_key(c, node, "[...]")
    operand = c.lower(node.operand)
    run = operand.run
    if operand.fresh:
        c.allocates(node)
        return Closure(lambda frame: np.array(run(frame)[key]), fresh=True, contiguous=True)
    return c.fold(Closure(lambda frame: run(frame)[key]), operand)


def _lower_update(c: _ExprLowerer, node: nodes.Update) -> Closure:
    """`x[...] = v` as a new array: a copy of x with the slice assigned (NumPy broadcasts v
    as the checker proved it may); x itself is left as it was."""
    key = index_key(c, node, "[...] =")
    operand, value = c.lower(node.operand), c.lower(node.value)
    run, run_value, dtype = operand.run, value.run, c.dtype
    bools = c.value_of(node).is_bool
    c.allocates(node)

    def update(frame: Frame) -> Any:
        result = np.array(run(frame), dtype=None if bools else dtype, copy=True)
        result[key] = run_value(frame)
        return result

    return Closure(update, fresh=True, contiguous=True)


def index_key(c: Lowerer, node: nodes.Subscript | nodes.Update, what: str) -> tuple[Any, ...]:
    """NumPy's basic index of a subscript the checker resolved (JAX's too)."""
    resolved = c.program.subscripts.get(id(node))
    if resolved is None:
        raise CheckerBug(message("bug_unresolved_call", name=what, line=node.span.line))
    return tuple(_index_entry(c, entry) for entry in resolved.entries)


def _index_entry(c: Lowerer, entry: Take | Range | NewAxis) -> Any:
    if isinstance(entry, Take):
        return c.dim(entry.index)
    if isinstance(entry, Range):
        start = None if entry.start is None else c.dim(entry.start)
        stop = None if entry.stop is None else c.dim(entry.stop)
        return slice(start, stop, c.dim(entry.step))
    return None  # np.newaxis


# --- masks and biases per block of positions ----------------------------------------------

BLOCK = "\0block"  # in a block's frame: the block's positions, {"query": rows, "key": keys}


def _lower_substitute(c: _ExprLowerer, node: nodes.Expr, substitute: Any) -> Closure:
    """A node of a :class:`.pattern.Blockwise` part, for the block in ``frame.values[BLOCK]``."""
    shape = c.shape_of(node)
    if isinstance(substitute, pattern.Position):
        role, axis, dtype = substitute.role, substitute.axis, c.dtype
        along = [-1 if i == axis else 1 for i in range(len(shape))]
        whole = range(shape[axis])

        def position(frame: Frame) -> Any:
            r = frame.values[BLOCK].get(role, whole)
            return np.arange(r.start, r.stop, dtype=dtype).reshape(along)

        return Closure(position, fresh=True, contiguous=True)
    if isinstance(substitute, pattern.Generated):
        causal = substitute.causal
        n = c.dim(causal.n)
        n_k = c.dim(causal.n_k) if causal.n_k is not None else n
        window = c.dim(causal.window) if causal.window is not None else None
        table, (rows, columns) = fused.Causal(n_k - n, window), substitute.roles
        return Closure(lambda frame: table.keep(frame.values[BLOCK][rows],
                                                frame.values[BLOCK][columns]), fresh=True)
    if isinstance(substitute, pattern.Sliced):
        name = node.name  # type: ignore[attr-defined]
        cut = [(i, role) for i, role in enumerate(substitute.roles)
               if role in ("query", "key") and shape[i] > 1]

        def sliced(frame: Frame) -> Any:
            key: list[Any] = [slice(None)] * len(shape)
            for axis, role in cut:
                r = frame.values[BLOCK][role]
                key[axis] = slice(r.start, r.stop)
            return frame.values[name][tuple(key)]

        return Closure(sliced)
    substitutes = c.substitutes  # a lookup: the gather row, its index per block
    c.substitutes = {key: value for key, value in substitutes.items() if key != id(node)}
    try:
        return c.lower(node)
    finally:
        c.substitutes = substitutes


def _block_part(c: _ExprLowerer, planned: fused.Planned, step: pattern.ScoreOp
                ) -> tuple[Closure, int]:
    """A blockwise bias or mask lowered for one block, and the bytes its temporaries take
    per block (the statement's own, scaled from the whole table to a block)."""
    assert step.part is not None and step.blockwise is not None
    inner = _ExprLowerer(c.plan, c.numpy, c.name, c.line, (), frozenset())
    inner.substitutes = step.blockwise.substitutes
    closure = inner.lower(step.part.node) if step.kind == "mask" else inner.numeric(step.part.node)
    fraction = planned.blocks.rows * planned.blocks.keys / max(planned.nq * planned.nk, 1)
    return closure, math.ceil(sum(a.nbytes for a in inner.allocations) * fraction)


def _lower_fused(c: _ExprLowerer, planned: fused.Planned,
                 weights: WeightsCheck | None) -> Closure:
    """An attention pattern, block by block (:func:`fused.attention`): its operands are
    evaluated as written, brought to the canonical layout, and the output written back
    in the layout of the contraction it replaces. The weights the contraction sums are
    the softmax's own (a fusable pattern changes nothing between them), so the blocks'
    row sums confirm ``weights`` too."""
    f = planned.fusable
    parts = [(c.lower(p.node).run, planned.layouts[id(p.node)]) for p in (f.query, f.key, f.value)]
    blocked = {id(step): _block_part(c, planned, step) for step in f.ops if step.blockwise}
    steps = [(step, None if step.causal is not None or id(step) in blocked or step.kind == "cap"
              else
              (c.lower(step.part.node) if step.kind == "mask" else
               c.numeric(step.node if step.part is None else step.part.node)).run)
             for step in f.ops]
    output, shape = planned.layouts[id(f.output)], c.shape_of(f.output)
    itemsize = c.dtype.itemsize
    c.allocations.append(Allocation(message("tensor_label", name=c.name), output.shape,
                                    math.prod(output.shape) * itemsize))
    blocks = planned.blocks
    per_block = sum(extra for _, extra in blocked.values())  # the blockwise parts' temporaries
    c.allocations.append(Allocation(
        message("fused_workspace", name=f.softmax_name, line=f.softmax_line),
        (planned.workers, *planned.batch, blocks.rows, blocks.keys),
        planned.workspace + planned.workers * per_block))
    name, line, axis = f.softmax_name, f.softmax_line, f.softmax_axis
    what = slice_word(axis, f.softmax_rank)
    tolerance = SOFTMAX_TOLERANCE.get(c.dtype, 1e-4)

    def op(step: pattern.ScoreOp, value: Any, frame: Frame) -> fused.Op:
        if step.kind == "cap":
            return fused.Op("cap")
        if step.kind == "scale":
            return fused.Op("scale", value=float(value), divides=step.divides)
        tensor = None if value is None else fused.to_canonical(
            np.asarray(value), planned.layouts[id(step.part.node)])  # type: ignore[union-attr]
        block = _per_block(blocked[id(step)][0], step, f.canonical_scores, frame) \
            if id(step) in blocked else None
        if step.kind == "bias":
            return fused.Op("bias", tensor=tensor, divides=step.divides, block=block)
        return fused.Op("mask", tensor=tensor, causal=planned.causal.get(id(step)),
                        keeps=step.keeps, fill=step.fill, additive=step.additive, block=block)

    def attention(frame: Frame) -> Any:
        q, k, v = (fused.to_canonical(np.asarray(run(frame)), recipe) for run, recipe in parts)
        ops = [op(step, None if run is None else run(frame), frame) for step, run in steps]
        out, seen = fused.attention(q, k, v, ops, blocks=planned.blocks, workers=planned.workers,
                                    check=frame.check_invariants, progress=frame.progress)
        if seen.masked_rows:
            frame.warnings.append(message("masked_rows", name=name, line=line,
                                          count=seen.masked_rows))
        if frame.check_invariants:
            if seen.worst_sum > tolerance:
                raise CheckerBug(message("softmax_sum", name=name, line=line, what=what,
                                         total=seen.worst_total, axis=axis))
            frame.checks[f"{name}:{line}:{axis}"] = message(
                "check_softmax_fused", name=name, line=line, what=what, axis=axis,
                error=seen.worst_sum)
            if weights is not None:
                frame.checks[f"weights:{weights.line}:{weights.contraction}"] = message(
                    "check_weights_nan" if seen.masked_rows else "check_weights",
                    weights=weights.weights, contraction=weights.contraction, line=weights.line,
                    axes=", ".join(map(str, weights.axes)), error=seen.worst_sum)
        return fused.from_canonical(out, output, shape)

    return Closure(attention, fresh=True)


def _per_block(closure: Closure, step: pattern.ScoreOp, target: tuple[str, ...],
               frame: Frame) -> Callable[[range, range], Any]:
    """``block(rows, keys)``: the part for one block, in the canonical layout."""
    labels, run = step.part.labels, closure.run  # type: ignore[union-attr]

    def block(rows: range, keys: range) -> Any:
        values = {**frame.values, BLOCK: {"query": rows, "key": keys}}
        return fused.block_to_canonical(np.asarray(run(Frame(values))), labels, target)

    return block


_ExprLowerer.nodes = {
    **NODES, nodes.Unary: _lower_unary, nodes.BinOp: _lower_binop,
    nodes.Transpose: _lower_transpose, nodes.Subscript: _lower_subscript, nodes.Update: _lower_update,
}


# --- builtins: one row per builtin ----------------------------------------------------------




def _unary(ufunc: np.ufunc) -> Implementation:
    return lambda call: call.elementwise(lambda x, out: ufunc(x, out=out))


def _relu(call: Call) -> Closure:
    zero = call.c.scalar(0)
    return call.elementwise(lambda x, out: np.maximum(x, zero, out=out))


def _sigmoid_apply(zero: Any) -> Callable[[Any, Any], Any]:
    def apply(x: Any, out: Any) -> Any:  # exp(-log(1 + exp(-x))): no overflow either way
        t = np.negative(x, out=out)
        t = np.logaddexp(zero, t, out=_owned(t))
        t = np.negative(t, out=_owned(t))
        return np.exp(t, out=_owned(t))

    return apply


def _sigmoid(call: Call) -> Closure:
    return call.elementwise(_sigmoid_apply(call.c.scalar(0)))


def _gelu(call: Call) -> Closure:
    half, root2 = call.c.scalar(0.5), call.c.scalar(math.sqrt(2.0))
    one = call.c.scalar(1)

    def block(x: Any, out: Any) -> None:  # x * (1 + erf(x / sqrt 2)) / 2, the exact form
        t = erf(np.true_divide(x, root2))
        t += one
        t *= half
        np.multiply(x, t, out=out)

    _blockwise_temporaries(call)
    return call.elementwise(lambda x, out: _blockwise(block, x, out))


def _blockwise_temporaries(call: Call) -> None:
    """What :func:`_blockwise` holds besides its input and result: the iterator's
    buffers and the block's own temporaries (erf's), all of one block's size."""
    count = math.prod(call.out_shape)
    if count:
        call.c.buffer((_BLOCK_TEMPORARIES, min(count, CHUNK)), call.c.dtype.itemsize)


_BLOCK_TEMPORARIES = 16


def _blockwise(block: Callable[[Any, Any], None], x: Any, out: Any) -> Any:
    """``block(x, out)`` over blocks of CHUNK elements, so that its temporaries stay small
    whatever the array's size (a NumPy buffered iterator handles any layout)."""
    if out is None:
        out = np.empty_like(x)
    if x.ndim == 0:
        block(x, out)
        return out
    with np.nditer([x, out], flags=["external_loop", "buffered", "zerosize_ok"],
                   op_flags=[["readonly"], ["writeonly"]], buffersize=CHUNK) as blocks:
        for x_block, out_block in blocks:
            block(x_block, out_block)
    return out


def _silu(call: Call) -> Closure:
    sigmoid = _sigmoid_apply(call.c.scalar(0))

    def block(x: Any, out: Any) -> None:  # x * sigmoid(x)
        np.multiply(x, sigmoid(x, None), out=out)

    _blockwise_temporaries(call)
    return call.elementwise(lambda x, out: _blockwise(block, x, out))


def _softplus(call: Call) -> Closure:
    zero = call.c.scalar(0)
    return call.elementwise(lambda x, out: np.logaddexp(zero, x, out=out))  # log(1 + e^x), stable


def _elu(call: Call) -> Closure:
    alpha, zero = call.c.scalar(call.arg("alpha")), call.c.scalar(0)

    def block(x: Any, out: Any) -> None:  # x where x > 0, alpha * (e^x - 1) elsewhere
        negative = np.expm1(np.minimum(x, zero))  # of min(x, 0): no overflow
        negative *= alpha
        np.copyto(out, np.where(x > zero, x, negative))

    _blockwise_temporaries(call)
    return call.elementwise(lambda x, out: _blockwise(block, x, out))


def _erf(call: Call) -> Closure:
    def block(x: Any, out: Any) -> None:
        np.copyto(out, erf(x))

    _blockwise_temporaries(call)
    return call.elementwise(lambda x, out: _blockwise(block, x, out))


def _rsqrt(call: Call) -> Closure:
    one = call.c.scalar(1)

    def apply(x: Any, out: Any) -> Any:
        root = np.sqrt(x, out=out)
        return np.true_divide(one, root, out=_owned(root))

    return call.elementwise(apply)


def _softmax(call: Call) -> Closure:
    x = call.numeric()
    axis = call.axis()
    assert axis is not None
    run, fresh = x.run, x.fresh
    name, line = call.c.name, call.c.line
    tolerance = SOFTMAX_TOLERANCE.get(call.c.dtype, 1e-4)
    what = slice_word(axis, call.rank())
    if not fresh:
        call.allocates()
    node = call.info.args["x"]
    call.c.reduced(node, axis, count=2)  # the maxima and the sums
    call.c.reduced(node, axis, itemsize=1)  # which maxima are -inf
    call.c.reduced(node, axis, count=4, itemsize=8)  # the invariant check's float64 sums
    call.c.reduced(node, axis, itemsize=1)

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
        if frame.zero_masked_rows and masked.any():  # as SDPA and FlexAttention give them
            np.copyto(out, 0, where=masked)
        if frame.check_invariants:
            check_sums(frame, np.sum(out, axis=axis, dtype=np.float64), name, line, what, axis,
                       tolerance)
        return out

    return Closure(softmax, fresh=True, contiguous=x.contiguous)


def _weights_checks(program: Program) -> dict[int, WeightsCheck]:
    """The weights operand of every attention the meaning pass found, by node."""
    meaning = program.meaning
    if meaning is None:
        return {}
    text = _SourceText(program.source)
    checks = {}
    for attention in meaning.patterns:
        if attention.summed_axes:
            checks[id(attention.weights)] = WeightsCheck(
                text(attention.weights), text(attention.output), attention.output.span.line,
                attention.summed_axes)
    return checks


class _SourceText:
    """A node's source text on one line (for the names in run's messages)."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines()

    def __call__(self, node: nodes.Expr) -> str:
        span = node.span
        parts = [self.lines[number - 1] if number - 1 < len(self.lines) else ""
                 for number in range(span.line, span.end_line + 1)]
        parts[-1] = parts[-1][: span.end_column - 1]
        parts[0] = parts[0][span.column - 1:]
        return " ".join(" ".join(parts).split())


def _checked_weights(closure: Closure, check: WeightsCheck, tolerance: float) -> Closure:
    run = closure.run

    def weights(frame: Frame) -> Any:
        value = run(frame)
        if frame.check_invariants:
            _check_weights(frame, value, check, tolerance)
        return value

    return Closure(weights, fresh=closure.fresh, const=False, contiguous=closure.contiguous)


def _check_weights(frame: Frame, value: Any, check: WeightsCheck, tolerance: float) -> None:
    totals = np.sum(value, axis=check.axes, dtype=np.float64)
    # A fully masked row is NaN (warned about already); a row zeroed whole (a padded
    # query, `where(pad_q, P, 0)`) gives no weight to anything: neither is a mistake.
    valid = ~np.isnan(totals) & (totals != 0)
    deviation = np.abs(totals[valid] - 1.0)
    error = float(np.max(deviation)) if deviation.size else 0.0
    fields = dict(weights=check.weights, contraction=check.contraction, line=check.line,
                  axes=", ".join(map(str, check.axes)))
    key = f"weights:{check.line}:{check.contraction}"
    if error > tolerance:
        worst = float(totals[valid].ravel()[int(np.argmax(deviation))])
        bad = int(np.count_nonzero(deviation > tolerance))
        frame.warnings.append(message("weights_sum", total=worst, count=bad, **fields))
        frame.checks.pop(key, None)
    elif key not in frame.checks or "NaN" not in frame.checks[key]:
        frame.checks[key] = message("check_weights" if valid.all() else "check_weights_nan",
                                    error=error, **fields)


def _transpose(call: Call) -> Closure:
    x = call.tensor()
    run, perm = x.run, call.arg("perm")
    if perm is None:
        return Closure(lambda frame: np.swapaxes(run(frame), -1, -2), fresh=x.fresh)
    return Closure(lambda frame: np.transpose(run(frame), perm), fresh=x.fresh,
                   contiguous=x.contiguous and list(perm) == sorted(perm))


def _reshape(call: Call) -> Closure:
    x = call.tensor()
    run, target = x.run, call.out_shape  # the checker inferred any -1
    if x.contiguous or x.fresh:
        if not x.contiguous:  # NumPy may copy what it cannot view with the new shape
            call.allocates()
        return Closure(lambda frame: np.reshape(run(frame), target), fresh=x.fresh,
                       contiguous=x.contiguous)
    # Not known to be C-contiguous: NumPy copies when it cannot view the array with the new
    # shape, but size-1 axes often let it view a transposed one. The copy is made sure, so
    # that the result is fresh: a later step may overwrite it without touching a named
    # tensor (or the caller's array).
    call.allocates()
    return Closure(lambda frame: _reshaped_copy(run(frame), target), fresh=True,
                   contiguous=True)


def _reshaped_copy(value: Any, target: tuple[int, ...]) -> Any:
    result = np.reshape(value, target)
    return np.array(result, order="C") if np.may_share_memory(result, value) else result


def _split_heads(call: Call) -> Closure:
    x = call.tensor()
    *batch, heads, n, d = call.out_shape
    run, grouped = x.run, (*batch, n, heads, d)  # head h owns columns h*d ... h*d+d-1
    if not x.contiguous:  # the reshape copies
        call.allocates()
    return Closure(lambda frame: np.swapaxes(np.reshape(run(frame), grouped), -3, -2),
                   fresh=x.fresh)


def _section(call: Call) -> Closure:
    """Part `index` of equal parts along `axis`: a view, as NumPy's `split` gives."""
    x = call.tensor()
    axis = call.axis()
    assert axis is not None
    length = call.out_shape[axis]
    start = call.dim("index") * length
    key = (slice(None),) * axis + (slice(start, start + length),)
    run = x.run
    return Closure(lambda frame: run(frame)[key], fresh=False, contiguous=False)


def _merge_heads(call: Call) -> Closure:
    x = call.tensor()
    run, target = x.run, call.out_shape
    call.allocates()
    return Closure(lambda frame: np.reshape(np.swapaxes(run(frame), -3, -2), target),
                   fresh=x.fresh, contiguous=True)


def _repeat(call: Call) -> Closure:
    x = call.tensor()
    run, repeats, axis = x.run, call.dim("repeats"), call.axis()
    call.allocates()
    return Closure(lambda frame: np.repeat(run(frame), repeats, axis=axis), fresh=True,
                   contiguous=True)


def _concat(call: Call) -> Closure:
    parts = [p.run for p in call.tensors("tensors")]
    axis = call.axis(of="tensors")
    call.allocates()
    return Closure(lambda frame: np.concatenate([p(frame) for p in parts], axis=axis), fresh=True,
                   contiguous=True)


def _reduction(reduce: Callable[..., Any]) -> Implementation:
    def implementation(call: Call) -> Closure:
        x = call.numeric()  # counting a mask gives a real number
        run, axis, keep = x.run, axes_of(call.arg("axis"), call.rank()), bool(call.arg("keepdims"))
        if call.out_shape:
            call.allocates()
        return call.c.fold(Closure(lambda frame: reduce(run(frame), axis=axis, keepdims=keep),
                                   fresh=True, contiguous=x.contiguous), x)

    return implementation


def _normalise(rms: bool) -> Implementation:
    def implementation(call: Call) -> Closure:
        eps = call.c.scalar(call.arg("eps"))  # (the checker refuses a scalar: SC305)
        width = call.c.scalar(call.c.shape_of(call.info.args["x"])[-1])
        call.c.reduced(call.info.args["x"], call.rank() - 1, count=2)  # the means, the scales

        def apply(x: Any, out: Any) -> Any:
            centred = x if rms else np.subtract(x, np.mean(x, axis=-1, keepdims=True), out=out)
            # the mean of squares without an array of squares: a sum of products per row
            scale = np.einsum("...i,...i->...", centred, centred)[..., np.newaxis]
            scale /= width
            scale += eps
            np.sqrt(scale, out=scale)
            return np.true_divide(centred, scale, out=out if rms else _owned(centred))

        return call.elementwise(apply)

    return implementation


def _where(call: Call) -> Closure:
    condition, x, y = call.tensor("condition"), call.tensor("x"), call.tensor("y")
    crun, xrun, yrun = condition.run, x.run, y.run
    shape = call.out_shape
    same_type = call.c.value_of(call.node).is_bool == call.c.value_of(call.info.args["x"]).is_bool
    contiguous = condition.contiguous and x.contiguous and y.contiguous
    if shape and x.fresh and same_type and call.c.shape_of(call.info.args["x"]) == shape:
        # overwrite x where the condition is false (a masked score table stays one buffer)
        call.c.buffer(call.c.shape_of(call.info.args["condition"]), 1)  # the negated condition
        return Closure(lambda frame: _copy_where(xrun(frame), yrun(frame), crun(frame), False),
                       fresh=True, contiguous=x.contiguous)
    same_type = call.c.value_of(call.node).is_bool == call.c.value_of(call.info.args["y"]).is_bool
    if shape and y.fresh and same_type and call.c.shape_of(call.info.args["y"]) == shape:
        return Closure(lambda frame: _copy_where(yrun(frame), xrun(frame), crun(frame), True),
                       fresh=True, contiguous=y.contiguous)
    if shape:
        call.allocates()
    return Closure(lambda frame: np.where(crun(frame), xrun(frame), yrun(frame)), fresh=True,
                   contiguous=contiguous)


def _copy_where(target: Any, source: Any, condition: Any, where: bool) -> Any:
    np.copyto(target, source, where=condition if where else np.logical_not(condition))
    return target


def _causal_mask(call: Call) -> Closure:
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

    return Closure(mask, fresh=True, contiguous=True)


def _triangle(keep: Callable[..., Any]) -> Implementation:
    def implementation(call: Call) -> Closure:
        x = call.tensor()
        run, k = x.run, call.dim("k")
        call.allocates()
        return call.c.fold(Closure(lambda frame: keep(run(frame), k=k), fresh=True,
                                   contiguous=True), x)

    return implementation


def _arange(call: Call) -> Closure:
    n, dtype = call.dim("n"), call.c.dtype
    bounds = (n,) if call.arg("stop") is None else (n, call.dim("stop"), *(
        (call.dim("step"),) if call.arg("step") is not None else ()))
    call.allocates()
    return Closure(lambda frame: np.arange(*bounds, dtype=dtype), fresh=True, contiguous=True)


def _stack(call: Call) -> Closure:
    parts = [p.run for p in call.tensors("tensors")]
    axis = axis_index(call.arg("axis"), call.rank("tensors") + 1)
    call.allocates()
    return Closure(lambda frame: np.stack([p(frame) for p in parts], axis=axis), fresh=True,
                   contiguous=True)


def _constant_fill(fill: Callable[..., Any]) -> Implementation:
    def implementation(call: Call) -> Closure:
        shape, dtype = call.shape(), call.c.dtype
        if shape:
            call.allocates()
            return Closure(lambda frame: fill(shape, dtype=dtype), fresh=True, contiguous=True)
        return call.c.constant(fill((), dtype=dtype)[()])

    return implementation


def _einsum(call: Call) -> Closure:
    """The checker's reading of the subscripts (``shapecheck.einsum``), executed as one
    single-operand ``np.einsum`` per operand (diagonals, sums over letters used nowhere
    else) and one ``np.matmul`` per pair of operands, left to right: BLAS speed, and
    every buffer known to the memory estimate (NumPy's ``optimize`` path copies its
    operands without saying)."""
    node_operands: nodes.ListExpr = call.info.args["operands"]
    operands = call.tensors("operands", numeric=True)
    shapes = [call.c.shape_of(item) for item in node_operands.items]
    terms, output = einsum_letters(call.arg("subscripts"), shapes)
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        for letter, size in zip(term, shape):
            sizes[letter] = max(size, sizes.get(letter, 1))  # a broadcast 1 takes the other size
    runs = [o.run for o in operands]
    contract = _contraction(call.c, terms, shapes, output, sizes)
    view = len(runs) == 1 and set(terms[0]) == set(output)  # a transpose or a diagonal

    def einsum(frame: Frame) -> Any:
        return contract([r(frame) for r in runs])

    return Closure(einsum, fresh=operands[0].fresh if view else True)


def einsum_letters(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """One letter per axis of each operand and of the result: ``...`` becomes letters
    unused elsewhere (right-aligned, as NumPy broadcasts); those the output leaves out are
    summed, as the checker reads them (``shapecheck.einsum``)."""
    parsed = parse_subscripts(subscripts, len(shapes))  # the checker's one reading
    terms, output = list(parsed.inputs), parsed.output
    used = set("".join(terms) + output)
    spare = [c for c in string.ascii_letters if c not in used]
    width = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t),
                default=0)
    ellipsis = "".join(spare[:width])
    expanded = [t.replace("...", ellipsis[width - (len(s) - len(t.replace("...", ""))):])
                for t, s in zip(terms, shapes)]
    return expanded, output.replace("...", ellipsis)


def _contraction(c: _ExprLowerer, terms: list[str], shapes: list[tuple[int, ...]], output: str,
                 sizes: dict[str, int]) -> Callable[[list[Any]], Any]:
    """Lower the contraction, recording every buffer it creates; returns the runner."""
    itemsize = c.dtype.itemsize
    stages: list[Callable[[Any, Any], tuple[Any, str]]] = []
    letters = ""
    for index, (term, shape) in enumerate(zip(terms, shapes)):
        later = set(output).union(*terms[index + 1:])
        reduce_to = "".join(dict.fromkeys(ch for ch in term if ch in later or ch in letters))
        if index == 0:
            letters = reduce_to
        stages.append(_reduce_stage(c, term, reduce_to, shape, sizes, itemsize))
        if index:
            stage, letters = _pair_stage(c, letters, reduce_to, later, sizes, itemsize)
            stages.append(stage)
    order = [letters.index(ch) for ch in output]

    def run(values: list[Any]) -> Any:
        accumulated: Any = None
        position = 0
        for index, value in enumerate(values):
            reduced, _ = stages[position](value, None)
            position += 1
            if index == 0:
                accumulated = reduced
                continue
            accumulated, _ = stages[position](accumulated, reduced)
            position += 1
        return np.transpose(accumulated, order) if order else accumulated

    return run


def _reduce_stage(c: _ExprLowerer, term: str, keep: str, shape: tuple[int, ...],
                  sizes: dict[str, int], itemsize: int) -> Callable[[Any, Any], tuple[Any, str]]:
    """An operand's diagonals taken and its unneeded letters summed (np.einsum on one operand)."""
    if term == keep:
        return lambda value, _: (value, keep)
    if len(set(term)) > len(keep):  # a letter summed away: a new, smaller array
        kept = tuple(shape[term.index(ch)] for ch in keep)
        c.buffer(kept, itemsize)
    subscripts = f"{term}->{keep}"
    return lambda value, _: (np.einsum(subscripts, value), keep)


def _pair_stage(c: _ExprLowerer, left: str, right: str, later: set[str], sizes: dict[str, int],
                itemsize: int) -> tuple[Callable[[Any, Any], tuple[Any, str]], str]:
    """Contract two operands with one matmul: [batch, rows, inner] @ [batch, inner, columns]."""
    batch = [ch for ch in left if ch in right and ch in later]
    inner = [ch for ch in left if ch in right and ch not in later]
    rows = [ch for ch in left if ch not in right]
    columns = [ch for ch in right if ch not in left]
    result = "".join(batch + rows + columns)

    def group(letters: list[str]) -> int:
        return math.prod(sizes[ch] for ch in letters)

    batch_shape = tuple(sizes[ch] for ch in batch)
    left_shape = (*batch_shape, group(rows), group(inner))
    right_shape = (*batch_shape, group(inner), group(columns))
    # Merging two or more letters into one axis may copy the (transposed) operand.
    if len(rows) > 1 or len(inner) > 1:
        c.buffer(left_shape, itemsize)
    if len(inner) > 1 or len(columns) > 1:
        c.buffer(right_shape, itemsize)
    c.buffer((*batch_shape, group(rows), group(columns)), itemsize)
    left_order = [left.index(ch) for ch in batch + rows + inner]
    right_order = [right.index(ch) for ch in batch + inner + columns]
    final_shape = tuple(sizes[ch] for ch in result)

    def contract(a: Any, b: Any) -> tuple[Any, str]:
        a = np.transpose(a, left_order)
        b = np.transpose(b, right_order)
        a = a.reshape(*a.shape[:len(batch)], group(rows), group(inner))
        b = b.reshape(*b.shape[:len(batch)], group(inner), group(columns))
        return np.matmul(a, b).reshape(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
                                       + final_shape[len(batch):]), result

    return contract, result




# --- issue 21: the builtins real attention code uses beyond the contract's -------------------


def _cumulative(accumulate: Callable[..., Any]) -> Implementation:
    def implementation(call: Call) -> Closure:
        x = call.numeric()
        run, axis = x.run, call.axis()
        if call.out_shape:
            call.allocates()
        return call.fold(Closure(lambda frame: accumulate(run(frame), axis=axis), fresh=True,
                                   contiguous=True), x)

    return implementation


def _pairwise(ufunc: np.ufunc) -> Implementation:
    def implementation(call: Call) -> Closure:
        x, y = call.numeric("x"), call.numeric("y")
        xrun, yrun = x.run, y.run
        if call.out_shape:
            call.allocates()
        return call.fold(Closure(lambda frame: ufunc(xrun(frame), yrun(frame)), fresh=True,
                                   contiguous=True), x, y)

    return implementation


def _clamp(call: Call) -> Closure:
    x = call.numeric()
    given, (low, high) = call.given("min", "max")
    run = x.run
    if call.out_shape:
        call.allocates()
    return call.fold(Closure(lambda frame: np.clip(run(frame), low(frame), high(frame)),
                             fresh=True, contiguous=True), x, *given)


def _full(call: Call) -> Closure:
    shape, dtype = call.shape(), call.c.dtype
    value = call.tensor("value")
    fill = value.run
    bool_fill = call.c.value_of(call.node).is_bool
    kind = np.dtype(bool) if bool_fill else dtype
    if shape:
        call.allocates()
    return call.fold(Closure(lambda frame: np.full(shape, fill(frame), dtype=kind)
                               if shape else kind.type(fill(frame)), fresh=True,
                               contiguous=True), value)


def _tile(call: Call) -> Closure:
    x, reps = call.tensor(), call.shape("reps")
    run = x.run
    call.allocates()
    return call.fold(Closure(lambda frame: np.tile(run(frame), reps), fresh=True,
                               contiguous=True), x)


def _expand(call: Call) -> Closure:
    """A read-only broadcast view (PyTorch's expand also copies nothing)."""
    run, target = call.tensor().run, call.out_shape  # the checker filled each -1
    return Closure(lambda frame: np.broadcast_to(run(frame), target))


def _logical(reduce: Callable[..., Any]) -> Implementation:
    def implementation(call: Call) -> Closure:
        x = call.tensor()
        run, axis, keep = x.run, axes_of(call.arg("axis"), call.rank()), bool(call.arg("keepdims"))
        if call.out_shape:
            call.allocates()
        return call.fold(Closure(lambda frame: np.asarray(reduce(run(frame), axis=axis,
                                                                   keepdims=keep)),
                                    fresh=True, contiguous=True), x)

    return implementation




# --- issue 21: integer tensors as positions (gathers and writes) ------------------------------


def checked_positions(values: Any, size: int, where: tuple[int, str, str, int]) -> Any:
    """Positions held in the run's float dtype as int64, each proved whole and within
    ``0 .. size - 1`` here (the checker cannot know the values): an input error naming the
    statement, the index, the axis and the value otherwise. ``where``: (line, index text,
    operand text, axis)."""
    line, index, operand, axis = where
    array = np.asarray(values)
    whole = np.floor(array) == array
    if not whole.all():
        value = array[~whole].flat[0]
        raise InputError(message("index_not_whole", line=line, index=index, value=value))
    outside = (array < 0) | (array >= size)
    if outside.any():
        value = int(array[outside].flat[0])
        raise InputError(message("index_range", line=line, index=index, value=value, axis=axis,
                                 operand=operand, size=size, last=size - 1))
    return array.astype(np.int64)


def where_of(call: Call, index_param: str) -> tuple[int, str, str, int, int]:
    """(line, index text, operand text, axis, axis size) of a gather or write."""
    program, args = call.c.program, call.info.args
    starts = line_starts(program.source)
    axis = axis_index(args["axis"], call.rank())
    size = call.c.shape_of(args["x"])[axis]
    return (call.node.span.line, span_text(program.source, starts, args[index_param].span),
            span_text(program.source, starts, args["x"].span), axis, size)


def _gather(index_param: str, along: bool = False) -> Implementation:
    def implementation(call: Call) -> Closure:
        x, index = call.tensor(), call.tensor(index_param)
        line, text, operand, axis, size = where_of(call, index_param)
        xrun, irun, where = x.run, index.run, (line, text, operand, axis)
        if call.out_shape:
            call.allocates()

        def gather(frame: Frame) -> Any:
            positions = checked_positions(irun(frame), size, where)
            if along:
                return np.take_along_axis(xrun(frame), positions, axis=axis)
            return np.take(xrun(frame), positions, axis=axis)

        return call.fold(Closure(gather, fresh=True, contiguous=True), x, index)

    return implementation


def _index_copy(call: Call) -> Closure:
    x, index, source = call.tensor(), call.tensor("index"), call.tensor("source")
    line, text, operand, axis, size = where_of(call, "index")
    xrun, irun, srun, where = x.run, index.run, source.run, (line, text, operand, axis)
    expected = list(call.out_shape)
    call.allocates()

    def write(frame: Frame) -> Any:
        positions = checked_positions(irun(frame), size, where)
        result = np.array(xrun(frame))
        expected[axis] = len(positions)
        values = np.broadcast_to(srun(frame), tuple(expected))
        np.moveaxis(result, axis, 0)[positions] = np.moveaxis(values, axis, 0)
        return result

    return call.fold(Closure(write, fresh=True, contiguous=True), x, index, source)


def _scatter(call: Call) -> Closure:
    x, index, source = call.tensor(), call.tensor("index"), call.tensor("src")
    line, text, operand, axis, size = where_of(call, "index")
    xrun, irun, srun, where = x.run, index.run, source.run, (line, text, operand, axis)
    call.allocates()

    def write(frame: Frame) -> Any:
        positions = checked_positions(irun(frame), size, where)
        result = np.array(xrun(frame))
        np.put_along_axis(result, positions, np.broadcast_to(srun(frame), positions.shape), axis)
        return result

    return call.fold(Closure(write, fresh=True, contiguous=True), x, index, source)




def element_dtype(value: Value, dtype: np.dtype) -> np.dtype:
    """The NumPy dtype a value is held in: the run's, or its complex counterpart."""
    return np.result_type(dtype, np.complex64) if value.element == "complex" else dtype


def _complex_dtype(call: Call) -> np.dtype:
    return np.result_type(call.c.dtype, np.complex64)


def _made(call: Call, function: Callable[..., Any], *params: str) -> Closure:
    """A new array computed from the tensor arguments ``params`` (no buffer reused)."""
    closure = [call.numeric(p) for p in params]  # a mask as 0 and 1, as the checker types it
    runs = [c.run for c in closure]
    if call.out_shape:
        call.allocates()
    return call.fold(Closure(lambda frame: function(*(r(frame) for r in runs)), fresh=True,
                               contiguous=True), *closure)


def _view_as_complex(call: Call) -> Closure:
    unit = _complex_dtype(call).type(1j)
    return _made(call, lambda x: np.asarray(x[..., 0] + unit * x[..., 1]), "x")


def _as_complex(call: Call) -> Closure:
    unit = _complex_dtype(call).type(1j)
    return _made(call, lambda x: np.asarray(x[..., 0::2] + unit * x[..., 1::2]), "x")


def _view_as_real(call: Call) -> Closure:
    return _made(call, lambda z: np.stack([z.real, z.imag], axis=-1), "x")


def _as_real(call: Call) -> Closure:
    return _made(call, lambda z: np.stack([z.real, z.imag], axis=-1).reshape(*z.shape[:-1], -1),
                 "x")


def _polar(call: Call) -> Closure:
    """abs·cos(angle) and abs·sin(angle) written into the two parts, as torch.polar does:
    `cos + 1j * sin` would multiply an infinite part by the 0 of `1j` and give NaN."""
    dtype = _complex_dtype(call)

    def polar(r: Any, a: Any) -> Any:
        r, a = np.broadcast_arrays(r, a)
        out = np.empty(r.shape, dtype)
        out.real = r * np.cos(a)
        out.imag = r * np.sin(a)
        return out
    return _made(call, polar, "abs", "angle")


def _complex_part(function: Callable[[Any], Any]) -> Implementation:
    return lambda call: _made(call, lambda x: np.array(function(x)), "x")


def _abs(call: Call) -> Closure:
    """|x|; of complex numbers a real array, never written into the complex operand."""
    if call.c.value_of(call.info.args["x"]).element == "complex":
        return _made(call, np.abs, "x")
    return call.elementwise(lambda x, out: np.abs(x, out=out))


def _outer(call: Call) -> Closure:
    return _made(call, np.outer, "x", "y")


def _like(fill: Callable[..., Any]) -> Implementation:
    def implementation(call: Call) -> Closure:
        value = call.c.value_of(call.node)
        dtype = np.dtype(bool) if value.is_bool else element_dtype(value, call.c.dtype)
        return _made(call, lambda x: fill(np.shape(x), dtype=dtype), "x")

    return implementation


def _full_like(call: Call) -> Closure:
    value = call.c.value_of(call.node)
    dtype = np.dtype(bool) if value.is_bool else element_dtype(value, call.c.dtype)
    whole = value.element == "int"  # PyTorch and NumPy keep x's integer dtype: truncated
    return _made(call, lambda x, v: np.full(np.shape(x), np.trunc(v) if whole else v, dtype=dtype),
                 "x", "value")


def _long(call: Call) -> Closure:
    dtype = call.c.dtype
    return _made(call, lambda x: np.asarray(np.trunc(np.asarray(x, dtype=dtype))), "x")


def _argmax(call: Call) -> Closure:
    return _extreme_at(call, np.argmax)


def _argmin(call: Call) -> Closure:
    return _extreme_at(call, np.argmin)


def _extreme_at(call: Call, find: Callable[..., Any]) -> Closure:
    """Positions held in the run's float dtype, as every int tensor is."""
    given, keep, dtype = call.arg("axis"), bool(call.arg("keepdims")), call.c.dtype
    axis = None if given is None else axis_index(given, call.rank())
    return _made(call, lambda x: np.asarray(find(x, axis=axis, keepdims=keep), dtype=dtype), "x")


def _sort(call: Call) -> Closure:
    axis, descending = axis_index(call.arg("axis"), call.rank()), bool(call.arg("descending"))
    return _made(call, lambda x: np.flip(np.sort(x, axis=axis), axis) if descending
                 else np.sort(x, axis=axis), "x")


def _argsort(call: Call) -> Closure:
    """Ties in their first order (a stable sort), descending too (PyTorch's stable=True)."""
    axis, descending = axis_index(call.arg("axis"), call.rank()), bool(call.arg("descending"))
    dtype = call.c.dtype
    return _made(call, lambda x: np.argsort(-x if descending else x, axis=axis,
                                            kind="stable").astype(dtype), "x")


def _flip(call: Call) -> Closure:
    axes = axes_of(call.arg("axis"), call.rank())
    x = call.tensor()  # a mask stays a mask
    run = x.run
    call.allocates()
    return call.fold(Closure(lambda frame: np.flip(run(frame), axis=axes).copy()), x)




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


# The NumPy op table: a row per builtin (lowering.table: its own functions above, by name,
# and the shared recipes with NumPy's functions).
BUILTINS: dict[str, Implementation] = table(globals(), np, {})
_ExprLowerer.builtins = BUILTINS
