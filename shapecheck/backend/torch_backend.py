"""The PyTorch backend: a checked program at concrete bindings, lowered into torch closures.

The only module that imports torch (besides conformance of a torch function, which
converts through :func:`to_torch` and :func:`to_numpy`). It mirrors
:mod:`.numpy_backend`: one lowering function per node kind, one row per builtin in
:data:`BUILTINS` (a test checks that it covers :data:`shapecheck.builtins.BUILTINS`),
and the same checks after every statement — the runtime shape against the checker's
shape at the bindings, the element type against the run's dtype — and the same
invariants (every softmax sums to 1; a fully masked row is a warning). Semantics are
NumPy's (docs/run.md, "Numeric meaning"); where torch differs, the row says how it is
made to agree.

Scalars (numbers, dims used as values, ``eps``) are 0-d tensors of the run's dtype on
the run's device, so that nothing is promoted and nothing crosses devices.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from ..syntax import nodes
from ..check.builtins import axis_index
from ..check.program import Program, Range, Take, Value
from ..check.value_rules import axes_of
from . import onecall, pattern
from ..messages.diagnostics import line_starts, span_text
from .errors import CheckerBug, InputError, message
from .plan import (
    Allocation, Closure, Frame, Lowered, Plan, PlanBuilder, Statement, Thunk, build,
)
from .lowering import (
    NODES, Call, Implementation, NewArrays, bounded, check_sums, flipped, lower_call, made,
    ordered, slice_word, table,
)

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}
SOFTMAX_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10}
DEVICES = ("cpu", "cuda")


# --- converting arrays ----------------------------------------------------------------------


def to_torch(array: np.ndarray, device: str | torch.device = "cpu") -> torch.Tensor:
    """A NumPy array as a tensor on ``device`` (shares memory on the CPU when it can)."""
    if not array.flags.writeable or not array.flags.c_contiguous:
        # torch warns on (and may write through) read-only memory; a copy in C order
        # (np.ascontiguousarray would turn a 0-d array into [1])
        array = np.array(array, order="C")
    return torch.from_numpy(array).to(device)


def to_numpy(tensor: torch.Tensor) -> tuple[np.ndarray, str]:
    """A tensor as a NumPy array on the CPU, and its own element type's name (``bfloat16``
    has no NumPy type, so it arrives as float32: the name says what it was)."""
    name = str(tensor.dtype).removeprefix("torch.")
    value = tensor.detach()
    if value.dtype in (torch.bfloat16,):
        value = value.to(torch.float32)
    return value.cpu().numpy(), name


def device_of(name: str) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N``; a CUDA device that this machine lacks is an error
    raised by torch when the run starts (checked by the caller)."""
    return torch.device(name)


def cuda_available() -> bool:
    return torch.cuda.is_available()


# --- the framework the plan asks ---------------------------------------------------------


class Torch:
    """The torch framework, as the plan asks of it (:class:`.plan.Framework`): its rows are
    :data:`BUILTINS` and the node lowerers below, its fused form one SDPA call."""

    def __init__(self, dtype: torch.dtype, device: torch.device) -> None:
        self.dtype = dtype
        self.device = device
        self.itemsize = dtype.itemsize

    def fused_form(self, builder: PlanBuilder, fusable: pattern.Fusable) -> tuple[onecall.OneCall | None, str]:
        return _sdpa_form(self, builder, fusable)

    def lower(self, builder: PlanBuilder, statement: Statement) -> Lowered:
        lowerer = _ExprLowerer(builder, self, statement.name, statement.line, statement.shape)
        closure = lowerer.lower(statement.expr)
        # torch never overwrites a tensor it is handed: every result is counted as a
        # buffer of its own (a view too, which over-counts rather than under-counts)
        return Lowered(Closure(closure.run, fresh=True), lowerer.allocations)

    def element_dtype(self, value: Value) -> torch.dtype:
        return torch.bool if value.is_bool else element_dtype(value, self.dtype)

    def running(self) -> AbstractContextManager[Any]:
        return torch.inference_mode()

    def enter(self, value: Any) -> torch.Tensor:
        if isinstance(value, torch.Tensor):
            return value.to(self.device)
        return to_torch(np.asarray(value), self.device)

    def leave(self, value: torch.Tensor) -> np.ndarray:
        return to_numpy(value)[0]

    def shape(self, value: torch.Tensor) -> tuple[int, ...]:
        return tuple(value.shape)

    def dtype_of(self, value: torch.Tensor) -> torch.dtype:
        return value.dtype

    def dtype_text(self, dtype: torch.dtype) -> str:
        return str(dtype).removeprefix("torch.")


def build_plan(program: Program, dtype: str | np.dtype, *, device: str = "cpu",
               keep_all: bool = False, fuse: bool = True) -> Plan:
    """Build the :class:`.plan.Plan` of a verified program whose dims are all bound; with
    ``fuse``, every attention pattern that allows it runs as one
    ``scaled_dot_product_attention`` call (its scores and weights are never built)."""
    framework = Torch(DTYPES[np.dtype(dtype).name], device_of(device))
    return build(program, framework, keep_all=keep_all, fuse=fuse)


# --- lowering expressions --------------------------------------------------------------------


class _ExprLowerer(NewArrays):
    """Lowers the expression of one statement into torch closures."""

    no_builtin = "bug_no_builtin_torch"

    def __init__(self, plan: PlanBuilder, framework: Torch, name: str, line: int,
                 result_shape: tuple[int, ...]) -> None:
        super().__init__(plan, name, line, result_shape)
        self.dtype = framework.dtype
        self.device = framework.device

    def lower_fused(self, node: nodes.Expr, form: onecall.OneCall) -> Closure:
        return _lower_sdpa(self, form)

    def lower_substitute(self, node: nodes.Expr, substitute: Any) -> Closure:
        closure = _at_indices(self, substitute)
        if closure is None:  # only a pure part is lowered at FlexAttention's indices
            raise CheckerBug(message("bug_not_value", kind=type(substitute).__name__,
                                     line=node.span.line))
        return closure

    def scalar(self, value: float | int | bool, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.tensor(value, dtype=dtype or self.dtype, device=self.device)

    def boolean(self, value: bool) -> torch.Tensor:
        return self.scalar(value, torch.bool)

    def cast(self, value: Any) -> Any:
        return value.to(self.dtype)


def _lower_unary(c: _ExprLowerer, node: nodes.Unary) -> Closure:
    if node.op == "~":  # on bool (the checker made sure)
        return c.elementwise(node, c.lower(node.operand), torch.logical_not)
    operand = c.numeric(node.operand)
    if node.op == "+":
        return operand
    return c.elementwise(node, operand, torch.neg)


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.true_divide,
    "//": torch.floor_divide, "**": torch.pow,
    "%": torch.remainder,  # issue 21: Python's sign, as np.remainder
}


# Comparisons and logic: bool results. Bool operands are compared as bool only when
# both are; otherwise as numbers (SC403), as in the NumPy backend.
_BOOL_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "==": torch.eq, "!=": torch.ne, "<": torch.lt, "<=": torch.le, ">": torch.gt,
    ">=": torch.ge, "&": torch.logical_and, "|": torch.logical_or,
}


def _matmul(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """`@` with NumPy's promotion: torch's matmul refuses operands of two dtypes (a complex
    value times a real one), which NumPy multiplies in the wider type."""
    if left.dtype != right.dtype:
        common = torch.promote_types(left.dtype, right.dtype)
        left, right = left.to(common), right.to(common)
    return torch.matmul(left, right)


def _lower_binop(c: _ExprLowerer, node: nodes.BinOp) -> Closure:
    if node.op in _BOOL_BINARY:
        both_bool = c.value_of(node.left).is_bool and c.value_of(node.right).is_bool
        operand = c.lower if both_bool else c.numeric
        left, right = operand(node.left), operand(node.right)
        lrun, rrun, compare = left.run, right.run, _BOOL_BINARY[node.op]
        c.allocates(node)
        return c.fold(Closure(lambda frame: compare(lrun(frame), rrun(frame))), left, right)
    left, right = c.numeric(node.left), c.numeric(node.right)
    lrun, rrun = left.run, right.run
    c.allocates(node)
    if node.op == "@":
        return Closure(lambda frame: _matmul(lrun(frame), rrun(frame)))
    operation = _BINARY[node.op]
    if c.value_of(node).is_bool:  # bool with bool: computed as 0 and 1, nonzero is true
        zero = c.scalar(0)
        return c.fold(Closure(lambda frame: torch.ne(operation(lrun(frame), rrun(frame)), zero)),
                      left, right)
    return c.fold(Closure(lambda frame: operation(lrun(frame), rrun(frame))), left, right)


def _lower_transpose(c: _ExprLowerer, node: nodes.Transpose) -> Closure:
    run = c.lower(node.operand).run
    return Closure(lambda frame: run(frame).transpose(-1, -2))


def _lower_subscript(c: _ExprLowerer, node: nodes.Subscript) -> Closure:
    """`x[...]` with the bounds the checker normalised; an axis sliced backward is flipped
    first (:func:`_key`)."""
    resolved = c.program.subscripts.get(id(node))
    if resolved is None and id(node) in c.program.calls:  # a gather, `E[ids]`: read as `take`
        return lower_call(c, node)  # type: ignore[arg-type]
    key, flips = _key(c, node, "[...]", flip=True)
    operand = c.lower(node.operand)
    run, index, axes = operand.run, tuple(key), tuple(flips)
    if axes:
        c.allocates(node)
        return c.fold(Closure(lambda frame: torch.flip(run(frame), axes)[index]), operand)
    return c.fold(Closure(lambda frame: run(frame)[index]), operand)


def _lower_update(c: _ExprLowerer, node: nodes.Update) -> Closure:
    """`x[...] = v` as a new tensor: a clone of x with the slice assigned (broadcast as
    the checker proved it may); x itself is left as it was."""
    key, _ = _key(c, node, "[...] =", flip=False)
    operand, value = c.lower(node.operand), c.lower(node.value)
    run, run_value, index = operand.run, value.run, tuple(key)

    def update(frame: Frame) -> Any:
        result = run(frame).clone()
        written = run_value(frame)
        where = tuple(torch.tensor(k, dtype=torch.long, device=result.device)
                      if isinstance(k, range) else k for k in index)
        result[where] = written.to(result.dtype) if isinstance(written, torch.Tensor) else written
        return result

    return Closure(update)


def _key(c: _ExprLowerer, node: nodes.Subscript | nodes.Update, what: str,
         flip: bool) -> tuple[list[Any], list[int]]:
    """The torch index of a subscript the checker resolved, and the axes to flip first.
    Torch slices go forward only: an axis sliced backward is, with ``flip``, sliced forward
    from the mirrored bounds of the flipped axis; without (a write), its positions as a range."""
    resolved = c.program.subscripts.get(id(node))
    if resolved is None:
        raise CheckerBug(message("bug_unresolved_call", name=what, line=node.span.line))
    flips: list[int] = []
    key: list[Any] = []
    for entry in resolved.entries:
        if not isinstance(entry, Range):
            key.append(c.dim(entry.index) if isinstance(entry, Take) else None)
            continue
        start = None if entry.start is None else c.dim(entry.start)
        stop = None if entry.stop is None else c.dim(entry.stop)
        step = c.dim(entry.step)
        if step > 0:
            key.append(slice(start, stop, step))
            continue
        size = c.dim(c.value_of(node.operand).shape[entry.axis])  # type: ignore[index]
        if not flip:
            key.append(range(size)[slice(start, stop, step)])
            continue
        flips.append(entry.axis)
        key.append(slice(0 if start is None else size - 1 - start,
                         size if stop is None else size - 1 - stop, -step))
    return key, flips


_ExprLowerer.nodes = {
    **NODES, nodes.Unary: _lower_unary, nodes.BinOp: _lower_binop,
    nodes.Transpose: _lower_transpose, nodes.Subscript: _lower_subscript, nodes.Update: _lower_update,
}


# --- builtins: one row per builtin ------------------------------------------------------------




def _unary(function: Callable[[torch.Tensor], torch.Tensor]) -> Implementation:
    return lambda call: call.elementwise(function)


def _gelu_exact(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x)  # approximate="none": the exact erf form


def _softmax(call: Call) -> Closure:
    run = call.numeric().run
    axis = call.axis()
    assert axis is not None
    name, line = call.c.name, call.c.line
    tolerance = SOFTMAX_TOLERANCE.get(call.c.dtype, 1e-4)
    what = slice_word(axis, call.rank())
    call.allocates()

    def softmax(frame: Frame) -> torch.Tensor:
        value = run(frame)
        masked = int(torch.count_nonzero(torch.isneginf(torch.amax(value, dim=axis))))
        if masked:  # an entirely -inf slice gives NaN, as in NumPy
            frame.warnings.append(message("masked_rows", name=name, line=line, count=masked))
        out = torch.softmax(value, dim=axis)
        if frame.check_invariants:
            check_sums(frame, to_numpy(torch.sum(out, dim=axis, dtype=torch.float64))[0],
                       name, line, what, axis, tolerance)
        return out

    return Closure(softmax)


def _transpose(call: Call) -> Closure:
    run, perm = call.tensor().run, call.arg("perm")
    if perm is None:
        return Closure(lambda frame: run(frame).transpose(-1, -2))
    order = tuple(perm)
    return Closure(lambda frame: run(frame).permute(order))


def _reshape(call: Call) -> Closure:
    run, target = call.tensor().run, call.out_shape  # the checker inferred any -1
    return Closure(lambda frame: torch.reshape(run(frame), target))


def _split_heads(call: Call) -> Closure:
    run = call.tensor().run
    *batch, heads, n, d = call.out_shape
    grouped = (*batch, n, heads, d)  # head h owns columns h*d ... h*d+d-1
    return Closure(lambda frame: torch.reshape(run(frame), grouped).transpose(-3, -2))


def _section(call: Call) -> Closure:
    """Part `index` of equal parts along `axis` (a view, as `torch.split` gives)."""
    axis = call.axis()
    assert axis is not None
    length = call.out_shape[axis]
    start = call.dim("index") * length
    run = call.tensor().run
    return Closure(lambda frame: run(frame).narrow(axis, start, length))


def _merge_heads(call: Call) -> Closure:
    run, target = call.tensor().run, call.out_shape
    call.allocates()
    return Closure(lambda frame: torch.reshape(run(frame).transpose(-3, -2), target))


def _repeat(call: Call) -> Closure:
    run, repeats, axis = call.tensor().run, call.dim("repeats"), call.axis()
    call.allocates()  # NumPy's repeat: each element `repeats` times in a row
    return Closure(lambda frame: torch.repeat_interleave(run(frame), repeats, dim=axis))


def _concat(call: Call) -> Closure:
    parts = [p.run for p in call.tensors("tensors")]
    axis = call.axis(of="tensors")
    call.allocates()
    return Closure(lambda frame: torch.cat([p(frame) for p in parts], dim=axis))


def _all_axes(x: torch.Tensor) -> tuple[int, ...]:
    return tuple(range(x.ndim))


def _reduction(reduce: Callable[..., torch.Tensor]) -> Implementation:
    def implementation(call: Call) -> Closure:
        x = call.numeric()  # counting a mask gives a real number
        run, axis, keep = x.run, axes_of(call.arg("axis"), call.rank()), bool(call.arg("keepdims"))
        call.allocates()

        def apply(frame: Frame) -> torch.Tensor:
            value = run(frame)
            if value.ndim == 0:  # NumPy reduces a scalar to itself
                return value
            return reduce(value, dim=_all_axes(value) if axis is None else axis, keepdim=keep)

        return call.c.fold(Closure(apply), x)

    return implementation


def _normalise(rms: bool) -> Implementation:
    def implementation(call: Call) -> Closure:
        eps = call.c.scalar(call.arg("eps"))

        def apply(x: torch.Tensor) -> torch.Tensor:
            if x.ndim == 0:
                centred = x if rms else x - x
                return centred / torch.sqrt(torch.square(centred) + eps)
            centred = x if rms else x - torch.mean(x, dim=-1, keepdim=True)
            scale = torch.sqrt(torch.mean(torch.square(centred), dim=-1, keepdim=True) + eps)
            return centred / scale

        return call.elementwise(apply)

    return implementation


def _where(call: Call) -> Closure:
    crun, xrun, yrun = (call.tensor(p).run for p in ("condition", "x", "y"))
    call.allocates()
    return Closure(lambda frame: torch.where(crun(frame), xrun(frame), yrun(frame)))


def _causal_mask(call: Call) -> Closure:
    queries, device = call.dim("n"), call.c.device
    keys = call.dim("n_k") if call.arg("n_k") is not None else queries
    offset = keys - queries  # aligned bottom right: query i sees key j <= i + offset
    window = call.dim("window") if call.arg("window") is not None else None
    call.allocates()

    def mask(frame: Frame) -> torch.Tensor:
        visible = torch.ones((queries, keys), dtype=torch.bool, device=device).tril_(offset)
        if window is not None:
            visible &= ~torch.ones((queries, keys), dtype=torch.bool,
                                   device=device).tril_(offset - window)
        return visible

    return Closure(mask)


def _triangle(keep: Callable[..., torch.Tensor]) -> Implementation:
    def implementation(call: Call) -> Closure:
        x = call.tensor()
        run, k = x.run, call.dim("k")
        call.allocates()
        return call.c.fold(Closure(lambda frame: keep(run(frame), diagonal=k)), x)

    return implementation


def _arange(call: Call) -> Closure:
    n, dtype, device = call.dim("n"), call.c.dtype, call.c.device
    bounds = (n,) if call.arg("stop") is None else (n, call.dim("stop"), *(
        (call.dim("step"),) if call.arg("step") is not None else ()))
    call.allocates()
    return Closure(lambda frame: torch.arange(*bounds, dtype=dtype, device=device))


def _stack(call: Call) -> Closure:
    parts = [p.run for p in call.tensors("tensors")]
    axis = axis_index(call.arg("axis"), call.rank("tensors") + 1)
    call.allocates()
    return Closure(lambda frame: torch.stack([p(frame) for p in parts], dim=axis))


def _elu(call: Call) -> Closure:
    alpha, zero = call.c.scalar(call.arg("alpha")), call.c.scalar(0)
    # As NumPy's row: alpha * expm1 of min(x, 0), so that nothing overflows.
    return call.elementwise(lambda x: torch.where(
        x > zero, x, alpha * torch.expm1(torch.minimum(x, zero))))


def _softplus(call: Call) -> Closure:
    zero = call.c.scalar(0)  # log(1 + e^x) exactly; torch's softplus is linear past 20
    return call.elementwise(lambda x: torch.logaddexp(zero, x))


def _constant_fill(fill: Callable[..., torch.Tensor]) -> Implementation:
    def implementation(call: Call) -> Closure:
        shape, dtype, device = call.shape(), call.c.dtype, call.c.device
        if shape:
            call.allocates()
            return Closure(lambda frame: fill(shape, dtype=dtype, device=device))
        return call.c.constant(fill((), dtype=dtype, device=device))

    return implementation


def _einsum(call: Call) -> Closure:
    subscripts = call.arg("subscripts")
    runs = [o.run for o in call.tensors("operands", numeric=True)]
    call.allocates()
    return Closure(lambda frame: torch.einsum(subscripts, *[r(frame) for r in runs]))




# --- issue 21: the builtins real attention code uses beyond the contract's -------------------


def _cumulative(accumulate: Callable[..., torch.Tensor]) -> Implementation:
    def implementation(call: Call) -> Closure:
        x = call.numeric()
        run, axis = x.run, call.axis()
        call.allocates()
        return call.fold(Closure(lambda frame: accumulate(run(frame), dim=axis)
                                   if run(frame).ndim else run(frame)), x)

    return implementation


def _pairwise(function: Callable[..., torch.Tensor]) -> Implementation:
    def implementation(call: Call) -> Closure:
        x, y = call.numeric("x"), call.numeric("y")
        xrun, yrun = x.run, y.run
        call.allocates()
        return call.fold(Closure(lambda frame: function(xrun(frame), yrun(frame))), x, y)

    return implementation


def _full(call: Call) -> Closure:
    shape, device = call.shape(), call.c.device
    kind = torch.bool if call.c.value_of(call.node).is_bool else call.c.dtype
    value = call.tensor("value")
    fill = value.run
    call.allocates()
    return call.fold(Closure(lambda frame: torch.full(shape, fill(frame).item(), dtype=kind,
                                                        device=device)), value)


def _tile(call: Call) -> Closure:
    x, reps = call.tensor(), call.shape("reps")
    run = x.run
    call.allocates()
    return call.fold(Closure(lambda frame: torch.tile(run(frame), reps)), x)


def _expand(call: Call) -> Closure:
    run, target = call.tensor().run, call.out_shape  # the checker filled each -1
    return Closure(lambda frame: run(frame).expand(target))


def _logical(reduce: Callable[..., torch.Tensor]) -> Implementation:
    def implementation(call: Call) -> Closure:
        x = call.tensor()
        run, axis, keep = x.run, axes_of(call.arg("axis"), call.rank()), bool(call.arg("keepdims"))
        call.allocates()

        def apply(frame: Frame) -> torch.Tensor:
            value = run(frame).bool()
            if value.ndim == 0:
                return value
            return reduce(value, dim=_all_axes(value) if axis is None else axis, keepdim=keep)

        return call.fold(Closure(apply), x)

    return implementation




def _checked_positions(values: torch.Tensor, size: int, where: tuple[int, str, str, int]
                       ) -> torch.Tensor:
    """As numpy_backend.checked_positions: whole and within the axis, or an input error."""
    line, index, operand, axis = where
    whole = torch.floor(values) == values
    if not bool(whole.all()):
        value = values[~whole].flatten()[0].item()
        raise InputError(message("index_not_whole", line=line, index=index, value=value))
    outside = (values < 0) | (values >= size)
    if bool(outside.any()):
        value = int(values[outside].flatten()[0].item())
        raise InputError(message("index_range", line=line, index=index, value=value, axis=axis,
                                 operand=operand, size=size, last=size - 1))
    return values.long()


def _where_of(call: Call, index_param: str) -> tuple[tuple[int, str, str, int], int, int]:
    program, args = call.c.program, call.info.args
    starts = line_starts(program.source)
    axis = axis_index(args["axis"], call.rank())
    size = call.c.shape_of(args["x"])[axis]
    where = (call.node.span.line, span_text(program.source, starts, args[index_param].span),
             span_text(program.source, starts, args["x"].span), axis)
    return where, axis, size


def _gather(index_param: str, along: bool = False) -> Implementation:
    def implementation(call: Call) -> Closure:
        x, index = call.tensor(), call.tensor(index_param)
        where, axis, size = _where_of(call, index_param)
        xrun, irun, shape = x.run, index.run, call.out_shape
        call.allocates()

        def gather(frame: Frame) -> torch.Tensor:
            positions = _checked_positions(irun(frame), size, where)
            if along:
                return torch.take_along_dim(xrun(frame), positions, dim=axis)
            return torch.index_select(xrun(frame), axis, positions.reshape(-1)).reshape(shape)

        return call.fold(Closure(gather), x, index)

    return implementation


def _index_copy(call: Call) -> Closure:
    x, index, source = call.tensor(), call.tensor("index"), call.tensor("source")
    where, axis, size = _where_of(call, "index")
    xrun, irun, srun, expected = x.run, index.run, source.run, list(call.out_shape)
    call.allocates()

    def write(frame: Frame) -> torch.Tensor:
        positions = _checked_positions(irun(frame), size, where)
        expected[axis] = len(positions)
        values = srun(frame).expand(tuple(expected)).contiguous()
        return xrun(frame).index_copy(axis, positions, values)

    return call.fold(Closure(write), x, index, source)


def _scatter(call: Call) -> Closure:
    x, index, source = call.tensor(), call.tensor("index"), call.tensor("src")
    where, axis, size = _where_of(call, "index")
    xrun, irun, srun = x.run, index.run, source.run
    call.allocates()

    def write(frame: Frame) -> torch.Tensor:
        positions = _checked_positions(irun(frame), size, where)
        values = srun(frame).expand(positions.shape).contiguous()
        return torch.scatter(xrun(frame), axis, positions, values)

    return call.fold(Closure(write), x, index, source)




def element_dtype(value: Value, dtype: torch.dtype) -> torch.dtype:
    """The torch dtype a value is held in: the run's, or its complex counterpart."""
    return COMPLEX_DTYPES[dtype] if value.element == "complex" else dtype


COMPLEX_DTYPES = {torch.float32: torch.complex64, torch.float64: torch.complex128}


def _pairs_as_complex(x: torch.Tensor) -> torch.Tensor:
    return torch.complex(x[..., 0::2].contiguous(), x[..., 1::2].contiguous())


def _real_view(z: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(z.resolve_conj()).clone()


def _complex_part(function: Callable[[torch.Tensor], torch.Tensor]) -> Implementation:
    return lambda call: made(call, lambda x: function(x).clone(), "x")


def _abs(call: Call) -> Closure:
    return made(call, torch.abs, "x")


def _like(fill: Callable[..., torch.Tensor]) -> Implementation:
    def implementation(call: Call) -> Closure:
        value = call.c.value_of(call.node)
        dtype = torch.bool if value.is_bool else element_dtype(value, call.c.dtype)
        return made(call, lambda x: fill(x.shape, dtype=dtype, device=x.device), "x")

    return implementation


def _full_like(call: Call) -> Closure:
    value = call.c.value_of(call.node)
    dtype = torch.bool if value.is_bool else element_dtype(value, call.c.dtype)
    whole = value.element == "int"
    return made(call, lambda x, v: torch.full(
        x.shape, (torch.trunc(v) if whole else v).item(), dtype=dtype, device=x.device),
        "x", "value")


def _long(call: Call) -> Closure:
    dtype = call.c.dtype
    return made(call, lambda x: torch.trunc(x.to(dtype)), "x")


def _argmax(call: Call) -> Closure:
    return _extreme_at(call, torch.argmax)


def _argmin(call: Call) -> Closure:
    return _extreme_at(call, torch.argmin)


def _extreme_at(call: Call, find: Callable[..., torch.Tensor]) -> Closure:
    """Positions held in the run's float dtype, as every int tensor is."""
    given, keep, dtype = call.arg("axis"), bool(call.arg("keepdims")), call.c.dtype
    axis = None if given is None else axis_index(given, call.rank())
    return made(call, lambda x: find(x, dim=axis, keepdim=keep).to(dtype), "x")


def _conjugate(z: torch.Tensor) -> torch.Tensor:
    return torch.conj_physical(z)




# --- attention as one scaled_dot_product_attention call ----------------------------------------

SDPA_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-9}
SDPA_CHECK = ("check_softmax_sdpa", "sdpa_bug")
FLEX_CHECK = ("check_softmax_flex", "flex_bug")


def _sdpa_form(framework: Torch, builder: PlanBuilder, fusable: pattern.Fusable
               ) -> tuple[onecall.OneCall | None, str]:
    """The SDPA form of a fusable pattern at the bindings, or why there is none."""
    constant = lambda node: _constant_scalar(framework, builder, node)  # noqa: E731
    if any(step.kind == "cap" for step in fusable.ops) and _flex() is not None:
        # a soft-cap has no SDPA form: FlexAttention's score_mod applies the ops in order
        call, why = onecall.ordered(builder, fusable, constant, "fused_flex_ordered",
                                    "fused_not_flex_scale")
        return (None if call is None else replace(call, flex=True)), why
    call, why = onecall.form(builder, fusable, constant, "fused_sdpa", "fused_not_sdpa")
    if call is not None and _flex_applies(fusable):
        call = replace(call, flex=True, how="fused_flex")
    return call, why


# FlexAttention's batch and head indices by the number of batch axes of the pattern (made
# 4-D as by `_four`: one axis is the heads, two are the batch and the heads).
_FLEX_ROLES = {0: {}, 1: {"batch:0": "h"}, 2: {"batch:0": "b", "batch:1": "h"}}


def _flex_applies(fusable: pattern.Fusable) -> bool:
    """Whether the pattern runs through ``flex_attention``: a mask or bias is a function of
    positions alone (FlexAttention's ``mask_mod``/``score_mod`` form) whose every position
    has a FlexAttention index. Otherwise SDPA runs it with the mask evaluated whole."""
    roles = {"query", "key", *_FLEX_ROLES.get(len(fusable.batch), {})}
    pure = [step.blockwise for step in fusable.ops if step.blockwise and step.blockwise.pure]
    return bool(pure) and all(set(_index_roles(s)) <= roles for b in pure
                              for s in b.substitutes.values()) and _flex() is not None


def _index_roles(substitute: Any) -> tuple[str | None, ...]:
    """The positions a substitute reads (a lookup of a pure part is at a position)."""
    if isinstance(substitute, pattern.Position):
        return (substitute.role,)
    if isinstance(substitute, pattern.Lookup):
        return (substitute.position,)
    if isinstance(substitute, pattern.Generated):
        return substitute.roles
    return ()


def _flex() -> Any:
    """``torch.nn.attention.flex_attention`` (PyTorch 2.5 and later), or None."""
    try:
        from torch.nn.attention import flex_attention
    except ImportError:
        return None
    return flex_attention


def _constant_scalar(framework: Torch, builder: PlanBuilder, node: nodes.Expr) -> float | None:
    """A scale's value at the bindings, when it is a constant (`sqrt(d)`, `0.125`)."""
    closure = _ExprLowerer(builder, framework, "", node.span.line, ()).numeric(node)
    if not closure.const:
        return None
    return float(closure.run(Frame({})))


def _causal_keep(offset: int, window: int | None, transposed: bool, nq: int, nk: int,
                 device: torch.device) -> torch.Tensor:
    i = torch.arange(nq, device=device).reshape(-1, 1)
    j = torch.arange(nk, device=device).reshape(1, -1)
    near, far = (i, j) if transposed else (j, i)  # transposed: the mask's rows are the keys
    keep = near <= far + offset
    if window is not None:
        keep &= near > far + offset - window
    return keep


def _canonical(value: torch.Tensor, recipe: pattern.Layout) -> torch.Tensor:
    return value.reshape(recipe.squeezed).permute(recipe.order).reshape(recipe.shape)


def _four(value: torch.Tensor, batch: int) -> torch.Tensor:
    """[b..., n, e] as 4-D (``scaled_dot_product_attention`` falls back to its slow math
    kernel for 3-D): no batch axis gains two, one gains one, more are merged."""
    if batch == 0:
        return value.reshape(1, 1, *value.shape)
    if batch == 1:
        return value.unsqueeze(0)
    if batch == 2:
        return value
    return value.reshape(-1, *value.shape[batch - 1:])


INDEX = "\0index"  # in a FlexAttention call's frame: the indices, {"query": q_idx, ...}


def _at_indices(c: _ExprLowerer, substitute: Any) -> Closure | None:
    """A node of a pure :class:`.pattern.Blockwise` part at FlexAttention's indices (0-d
    tensors under ``vmap``): positions in the run's dtype (as ``arange``), lookups at a
    position, a ``causal_mask`` from the two positions."""
    dtype = c.dtype
    if isinstance(substitute, pattern.Position):
        role = substitute.role
        return Closure(lambda frame: frame.values[INDEX][role].to(dtype))
    if isinstance(substitute, pattern.Lookup):
        table, role = substitute.table, substitute.position
        return Closure(lambda frame: frame.values[table][frame.values[INDEX][role]])
    if isinstance(substitute, pattern.Generated):
        offset, window, _ = onecall.causal_at(c.plan, substitute.causal)
        rows, columns = substitute.roles

        def keep(frame: Frame) -> torch.Tensor:
            i, j = frame.values[INDEX][rows], frame.values[INDEX][columns]
            seen = j <= i + offset
            return seen if window is None else seen & (j > i + offset - window)

        return Closure(keep)
    return None


def _lower_flex(c: _ExprLowerer, sdpa: onecall.OneCall) -> Closure:
    """The pattern as one eager ``flex_attention`` call: each function of positions becomes
    part of ``mask_mod`` or ``score_mod``, evaluated by FlexAttention at its indices; a
    generated causal mask too; any other mask or bias is evaluated whole and looked up."""
    fusable, flex = sdpa.fusable, _flex()
    parts = [(c.lower(p.node).run, sdpa.layouts[id(p.node)])
             for p in (fusable.query, fusable.key, fusable.value)]
    batch = len(fusable.batch)
    flex_roles = _FLEX_ROLES[min(batch, 2)] if batch <= 2 else {}
    terms = [(_at_index(c, sdpa, step), step, coefficient)
             for (step, _), coefficient in zip(sdpa.form.terms, sdpa.coefficients)]
    # an ordered form's ops, each applied to the score where the spec applies it
    terms += [(_at_index(c, sdpa, step) if step.kind in ("bias", "mask") else None, step, factor)
              for step, factor in sdpa.steps]
    hides = [(_at_index(c, sdpa, step), step) for step in sdpa.form.hides]
    whole = {id(step): _whole(c, step) for run, step, *_ in (*terms, *hides)
             if run is None and step.kind in ("bias", "mask")}
    output = sdpa.layouts[id(fusable.output)]
    out_shape = c.plan.shape_of(fusable.output)
    name, line = fusable.softmax_name, fusable.softmax_line
    what = slice_word(fusable.softmax_axis, fusable.softmax_rank)
    dtype, device = c.dtype, c.device
    tolerance = SDPA_TOLERANCE.get(dtype, 1e-4)
    c.allocations.append(Allocation(message("tensor_label", name=c.name), output.shape,
                                    math.prod(output.shape) * dtype.itemsize))
    zero = c.scalar(0)

    def attention(frame: Frame) -> torch.Tensor:
        q, k, v = (_numbers(_canonical(run(frame), recipe), dtype) for run, recipe in parts)
        shape = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        q4, k4, v4 = (_four(x.expand(*shape, *x.shape[-2:]), batch).contiguous()
                      for x in (q, k, v))
        values = dict(frame.values)
        dense = {key: _dense4(run(frame), sdpa, step, shape, q4, k4)
                 for key, (run, step) in whole.items()}

        def at(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor,
               kv_idx: torch.Tensor) -> Frame:
            index = {"query": q_idx, "key": kv_idx}
            index.update({role: {"b": b, "h": h}[flex] for role, flex in flex_roles.items()})
            return Frame({**values, INDEX: index})

        def value(run: Thunk | None, step: pattern.ScoreOp, b: Any, h: Any, i: Any, j: Any) -> Any:
            if run is None:
                return dense[id(step)][b, h, i, j]
            return run(at(b, h, i, j))

        def mask_mod(b: Any, h: Any, i: Any, j: Any) -> torch.Tensor:
            keep = None
            for run, step in hides:
                seen = value(run, step, b, h, i, j)
                seen = seen if step.keeps else ~seen
                keep = seen if keep is None else keep & seen
            return keep

        def score_mod(score: torch.Tensor, b: Any, h: Any, i: Any, j: Any) -> torch.Tensor:
            for run, step, coefficient in terms:
                if step.kind == "scale":
                    score = score * coefficient
                elif step.kind == "cap":
                    score = torch.tanh(score)
                elif step.kind == "bias":
                    score = score + _numbers(value(run, step, b, h, i, j), dtype) * coefficient
                else:  # a mask with a finite fill, or one a later op does not leave hidden
                    seen = value(run, step, b, h, i, j)
                    hidden = ~seen if step.keeps else seen
                    score = score + torch.where(hidden, step.fill * coefficient, zero) \
                        if step.additive else torch.where(hidden, step.fill, score)
            return score

        batches, heads, nq, nk = q4.shape[0], q4.shape[1], q4.shape[2], k4.shape[2]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_EAGER_WARNING, category=UserWarning)
            block_mask = flex.create_block_mask(mask_mod, batches, heads, nq, nk,
                                                device=str(device)) if hides else None
            out, aux = flex.flex_attention(
                q4, k4, v4, score_mod=score_mod if terms else None, block_mask=block_mask,
                scale=sdpa.scale, return_aux=flex.AuxRequest(lse=True))
        hidden_rows = torch.isneginf(aux.lse)
        count = int(torch.count_nonzero(hidden_rows))
        if count:  # FlexAttention gives 0 for a fully masked row; the spec's softmax gives NaN
            frame.warnings.append(message("masked_rows", name=name, line=line, count=count))
            out = out.masked_fill(hidden_rows.unsqueeze(-1), math.nan)
        out = out.reshape(*shape, nq, v.shape[-1])
        if frame.check_invariants:
            def rows_mask(index: torch.Tensor) -> torch.Tensor:
                """The added terms at the rows ``index``, or (an ordered form) their scores."""
                grid = [torch.arange(batches, device=device),
                        torch.arange(heads, device=device), index,
                        torch.arange(nk, device=device)]
                added = torch.zeros((), dtype=dtype, device=device)
                if sdpa.steps:  # not affine: the function of the rows' scores themselves
                    raw = q4.index_select(2, index) @ k4.transpose(-1, -2) * sdpa.scale
                    added = _grid_scores(score_mod, raw, grid)
                elif terms:
                    added = _grid(lambda *at: score_mod(zero, *at), grid)
                if hides:
                    added = added.masked_fill(~_grid(mask_mod, grid), -math.inf)
                return added.expand(batches, heads, len(index), nk).reshape(*shape, len(index), nk)

            _check_sampled(frame, q.expand(*shape, *q.shape[-2:]), k.expand(*shape, *k.shape[-2:]),
                           v.expand(*shape, *v.shape[-2:]), rows_mask, out, sdpa, what, tolerance)
        return out.reshape(output.canonical).permute(output.inverse).reshape(out_shape)

    return Closure(attention)


_EAGER_WARNING = "flex_attention called without torch.compile"


def _at_index(c: _ExprLowerer, sdpa: onecall.OneCall, step: pattern.ScoreOp) -> Thunk | None:
    """A mask or bias of the flex form as a closure at FlexAttention's indices; None for
    one evaluated whole (a tensor, or a function that reads a tensor whole)."""
    if step.causal is not None:
        roles = ("key", "query") if sdpa.causal[id(step)][2] else ("query", "key")
        generated = _at_indices(c, pattern.Generated(step.causal, roles))  # type: ignore[arg-type]
        return generated.run if generated is not None else None
    if step.blockwise is None or not step.blockwise.pure:
        return None
    assert step.part is not None
    inner = _ExprLowerer(c.plan, c.plan.framework, c.name, c.line, ())  # type: ignore[arg-type]
    inner.substitutes = step.blockwise.substitutes
    return (inner.lower(step.part.node) if step.kind == "mask" else
            inner.numeric(step.part.node)).run


def _whole(c: _ExprLowerer, step: pattern.ScoreOp) -> tuple[Thunk, pattern.ScoreOp]:
    assert step.part is not None
    return (c.lower(step.part.node) if step.kind == "mask" else
            c.numeric(step.part.node)).run, step


def _dense4(value: torch.Tensor, sdpa: onecall.OneCall, step: pattern.ScoreOp, shape: torch.Size,
            q4: torch.Tensor, k4: torch.Tensor) -> torch.Tensor:
    """A mask or bias evaluated whole, 4-D and expanded to the scores, to be looked up."""
    assert step.part is not None
    value = _canonical(value, sdpa.layouts[id(step.part.node)])
    value = value.expand(*shape, *value.shape[-2:]) if len(shape) else value
    return _four(value, len(shape)).expand(q4.shape[0], q4.shape[1], q4.shape[2], k4.shape[2])


def _grid(function: Callable[..., torch.Tensor], grid: list[torch.Tensor]) -> torch.Tensor:
    """``function(b, h, q, kv)`` at every combination of the four index vectors."""
    for axis in (3, 2, 1, 0):
        function = torch.vmap(function, in_dims=tuple(0 if a == axis else None for a in range(4)))
    return function(*grid)


def _grid_scores(score_mod: Callable[..., torch.Tensor], scores: torch.Tensor,
                 grid: list[torch.Tensor]) -> torch.Tensor:
    """``score_mod(s, b, h, q, kv)`` of each score of ``scores`` ([B, H, rows, keys]) at the
    combination of the four index vectors it stands at (FlexAttention's eager vmap)."""
    function = score_mod
    for axis in (3, 2, 1, 0):
        function = torch.vmap(function, in_dims=(0, *(0 if a == axis else None for a in range(4))))
    return function(scores, *grid)


def _lower_sdpa(c: _ExprLowerer, sdpa: onecall.OneCall) -> Closure:
    if sdpa.flex:
        return _lower_flex(c, sdpa)
    fusable, plan = sdpa.fusable, c.plan
    parts = [(c.lower(p.node).run, sdpa.layouts[id(p.node)])
             for p in (fusable.query, fusable.key, fusable.value)]
    terms = [(c.numeric(step.part.node).run if step.kind == "bias" else
              c.lower(step.part.node).run if step.part is not None else None, step, coefficient)
             for (step, _), coefficient in zip(sdpa.form.terms, sdpa.coefficients)]
    hides = [(c.lower(step.part.node).run if step.part is not None else None, step)
             for step in sdpa.form.hides]
    output = sdpa.layouts[id(fusable.output)]
    out_shape = plan.shape_of(fusable.output)
    batch = len(fusable.batch)
    name, line = fusable.softmax_name, fusable.softmax_line
    what = slice_word(fusable.softmax_axis, fusable.softmax_rank)
    dtype, device = c.dtype, c.device
    tolerance = SDPA_TOLERANCE.get(dtype, 1e-4)
    for shape in (output.shape,):
        c.allocations.append(Allocation(message("tensor_label", name=c.name), shape,
                                        math.prod(shape) * dtype.itemsize))

    def canonical_mask(run: Thunk | None, step: pattern.ScoreOp, frame: Frame, nq: int,
                       nk: int) -> torch.Tensor:
        if step.causal is not None:
            keep = _causal_keep(*sdpa.causal[id(step)], nq, nk, device)
        else:
            assert run is not None and step.part is not None
            keep = _canonical(run(frame), sdpa.layouts[id(step.part.node)])
        return keep if step.keeps else ~keep

    def attention(frame: Frame) -> torch.Tensor:
        # a bool part (a mask used as values: SC403) is read as numbers, as unfused
        q, k, v = (_numbers(_canonical(run(frame), recipe), dtype) for run, recipe in parts)
        shape = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        q, k, v = (x.expand(*shape, *x.shape[-2:]) for x in (q, k, v))
        nq, nk = q.shape[-2], k.shape[-2]
        added: torch.Tensor | None = None
        for run, step, coefficient in terms:
            if step.kind == "bias":
                assert run is not None and step.part is not None
                term = _canonical(run(frame), sdpa.layouts[id(step.part.node)]) * coefficient
            else:  # an additive mask with a finite fill
                hidden = ~canonical_mask(run, step, frame, nq, nk)
                term = torch.where(hidden, torch.tensor(step.fill * coefficient, dtype=dtype,
                                                        device=device), 0).to(dtype)
            added = term if added is None else added + term
        keep: torch.Tensor | None = None
        if not sdpa.is_causal:
            for run, step in hides:
                mask = canonical_mask(run, step, frame, nq, nk)
                keep = mask if keep is None else keep & mask
        mask = keep
        if added is not None:
            mask = added if keep is None else added.masked_fill(~keep, -math.inf)
        mask4 = None if mask is None else _four(mask, batch) if mask.ndim == batch + 2 else mask
        out = torch.nn.functional.scaled_dot_product_attention(
            _four(q, batch), _four(k, batch), _four(v, batch), attn_mask=mask4,
            is_causal=sdpa.is_causal, scale=sdpa.scale).reshape(*shape, nq, v.shape[-1])
        if mask is not None:
            hidden_rows = (~mask).all(dim=-1) if mask.dtype == torch.bool else \
                torch.isneginf(mask).all(dim=-1)
            hidden_rows = hidden_rows.expand(*shape, nq)
            count = int(torch.count_nonzero(hidden_rows))
            if count:  # PyTorch gives 0 for a fully masked row; the spec's softmax gives NaN
                frame.warnings.append(message("masked_rows", name=name, line=line, count=count))
                out = out.masked_fill(hidden_rows.unsqueeze(-1), math.nan)
        if frame.check_invariants:
            _check_sampled(frame, q, k, v, lambda index: _sampled_rows(mask, index, sdpa, k),
                           out, sdpa, what, tolerance)
        return out.reshape(output.canonical).permute(output.inverse).reshape(out_shape)

    return Closure(attention)


def _sampled_rows(mask: torch.Tensor | None, index: torch.Tensor, sdpa: onecall.OneCall,
                  k: torch.Tensor) -> torch.Tensor | None:
    """The rows ``index`` of SDPA's mask (bool: true attends; else added to the scores)."""
    if sdpa.is_causal:
        mask = _causal_keep(0, None, False, k.shape[-2], k.shape[-2], k.device)
    if mask is None:
        return None
    return mask.index_select(-2, index) if mask.shape[-2] != 1 else mask


def _check_sampled(frame: Frame, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   rows_mask: Callable[[torch.Tensor], torch.Tensor | None], out: torch.Tensor,
                   sdpa: onecall.OneCall, what: str, tolerance: float) -> None:
    """The sampled rows of the call recomputed as the spec writes them (:func:`onecall.check_rows`);
    ``rows_mask(index)``: the mask's rows at those queries (bool: true attends; else added)."""
    index = torch.tensor(onecall.sampled_rows(q.shape[-2]), device=q.device)
    rows = rows_mask(index)
    bool_mask = rows is not None and rows.dtype == torch.bool
    host = [None if t is None else to_numpy(t)[0] for t in
            (q.index_select(-2, index), k, v, rows if bool_mask else None,
             None if bool_mask or sdpa.steps else rows, out.index_select(-2, index))]
    scores = to_numpy(rows)[0] if sdpa.steps and rows is not None else None
    onecall.check_rows(frame, sdpa, *host, what, tolerance, FLEX_CHECK if sdpa.flex else SDPA_CHECK,
                       scores)


def _numbers(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return value.to(dtype) if value.dtype == torch.bool else value


# The torch op table: a row per builtin (lowering.table: its own functions above, by name,
# the shared recipes with torch's functions, and these rows of its own).
BUILTINS: dict[str, Implementation] = table(globals(), torch, {
    "clamp": bounded(torch.clamp),
    "sort": ordered(lambda x, axis, descending, _: torch.sort(
        x, dim=axis, descending=descending, stable=True).values),
    "argsort": ordered(lambda x, axis, descending, dtype: torch.argsort(
        x, dim=axis, descending=descending, stable=True).to(dtype)),
    "flip": flipped(lambda x, axes: torch.flip(
        x, dims=tuple(range(x.ndim)) if axes is None else axes)),
    "gelu": _unary(_gelu_exact),
    "silu": _unary(torch.nn.functional.silu),
    "max": _reduction(torch.amax),  # torch.max(x, dim) is (values, indices)
    "min": _reduction(torch.amin),
    "conj": _complex_part(_conjugate),
    "view_as_complex": lambda call: made(call, lambda x: torch.view_as_complex(
        x.contiguous()).clone(), "x"),
    "as_complex": lambda call: made(call, _pairs_as_complex, "x"),
    "view_as_real": lambda call: made(call, _real_view, "x"),
    "as_real": lambda call: made(call, lambda z: _real_view(z).reshape(*z.shape[:-1], -1), "x"),
    "polar": lambda call: made(call, lambda r, a: torch.polar(*torch.broadcast_tensors(r, a)),
                                "abs", "angle"),
    "outer": lambda call: made(call, torch.outer, "x", "y"),
})
_ExprLowerer.builtins = BUILTINS
