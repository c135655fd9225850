"""The JAX framework: a checked program at concrete bindings, lowered into JAX closures.

The only module that imports jax. The plan (:mod:`.plan`) is the one every framework is
handed; this module is JAX's table: its node rows, a row per builtin (:data:`BUILTINS`,
built by :func:`.lowering.table` from the functions below named after builtins, the shared
recipes with ``jax.numpy``'s functions, and the rows of its own), its conversions, and its
fused form, one ``jax.nn.dot_product_attention`` call. Semantics are NumPy's (docs/run.md,
"Numeric meaning"); ``jax.numpy`` follows NumPy, so most rows are NumPy's call.

Steps run eagerly, one JAX operation at a time (no ``jit``: a plan runs once per binding, and
compiling it would cost more than it saves). A run's float64 is JAX's ``jax_enable_x64``,
set for the run (building its plan included) and restored after it, as is the matmul
precision (``highest``: no TF32 on a GPU). Scalars are NumPy scalars of the run's dtype,
which JAX never promotes past it. JAX arrays are immutable, so an input is never written and
every result is a buffer of its own in the memory estimate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf

from ..check.builtins import axis_index
from ..check.program import Program, Value
from ..check.value_rules import axes_of
from ..syntax import nodes
from . import onecall, pattern
from .errors import message
from .lowering import (
    NODES, Call, Implementation, NewArrays, bounded, check_sums, flipped, lower_call, made,
    ordered, slice_word, table,
)
from .numpy_backend import SOFTMAX_TOLERANCE, checked_positions, element_dtype, index_key, where_of
from .plan import Allocation, Closure, Frame, Lowered, Plan, PlanBuilder, Statement, build

DPA_TOLERANCE = 1e-4  # float32's (a float64 run is not fused)
DPA_CHECK = ("check_softmax_dpa", "dpa_bug")


def device_of(name: str) -> jax.Device:
    """``cpu``, ``cuda`` or ``cuda:N`` as a JAX device (``cuda`` is JAX's ``gpu`` platform);
    a GPU this machine lacks is refused by the caller first (:func:`cuda_available`)."""
    platform, _, number = name.partition(":")
    return jax.devices("cpu" if platform == "cpu" else "gpu")[int(number or 0)]


def cuda_available() -> bool:
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:  # no GPU backend in this installation (jax[cpu])
        return False


@contextmanager
def configured(dtype: np.dtype | str, device: jax.Device | None = None) -> Iterator[None]:
    """JAX set for a run in ``dtype``: 64-bit types on exactly when it is float64, matmuls at
    full precision, arrays made on ``device``; every setting restored afterwards (errors too)."""
    with ExitStack() as stack:
        stack.enter_context(jax.enable_x64(np.dtype(dtype) == np.float64))
        stack.enter_context(jax.default_matmul_precision("highest"))
        if device is not None:
            stack.enter_context(jax.default_device(device))
        yield


def to_jax(array: np.ndarray, device: jax.Device | None = None) -> jax.Array:
    """A NumPy array as a JAX array (which nothing writes), under the caller's
    :func:`configured` (float64 stays float64 only there)."""
    return jax.device_put(array, device)


def to_numpy(value: Any) -> tuple[np.ndarray, str]:
    """A JAX array as a writable NumPy array, and its element type's name."""
    array = np.array(value)
    return array, str(array.dtype)


def is_array(value: Any) -> bool:
    return isinstance(value, jax.Array)


# --- the framework the plan asks ----------------------------------------------------------


class Jax:
    """The JAX framework, as the plan asks of it (:class:`.plan.Framework`)."""

    def __init__(self, dtype: np.dtype, device: jax.Device) -> None:
        self.dtype = dtype
        self.device = device
        self.itemsize = dtype.itemsize

    def fused_form(self, builder: PlanBuilder, fusable: pattern.Fusable
                   ) -> tuple[onecall.OneCall | None, str]:
        if self.dtype != np.float32:
            return None, "fused_dpa_float64"  # its softmax is float32's, whatever the inputs
        call, reason = onecall.form(builder, fusable, lambda node: _constant(self, builder, node),
                                    "fused_dpa", "fused_not_dpa")
        if call is not None and _features(builder, fusable.key) != _features(builder, fusable.value):
            return None, "fused_dpa_features"  # the call takes a value shaped as its key
        return call, reason

    def lower(self, builder: PlanBuilder, statement: Statement) -> Lowered:
        lowerer = _ExprLowerer(builder, self, statement.name, statement.line, statement.shape)
        closure = lowerer.lower(statement.expr)
        # JAX never writes an array: every result is a buffer of its own (a view too)
        return Lowered(Closure(closure.run, fresh=True), lowerer.allocations)

    def element_dtype(self, value: Value) -> np.dtype:
        return np.dtype(bool) if value.is_bool else element_dtype(value, self.dtype)

    def running(self) -> AbstractContextManager[None]:
        return configured(self.dtype, self.device)

    def enter(self, value: Any) -> Any:
        with self.running():
            return to_jax(np.asarray(value), self.device)

    def leave(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def shape(self, value: Any) -> tuple[int, ...]:
        return tuple(np.shape(value))

    def dtype_of(self, value: Any) -> np.dtype:
        return np.dtype(value.dtype)

    def dtype_text(self, dtype: np.dtype) -> str:
        return str(dtype)


def build_plan(program: Program, dtype: str | np.dtype, *, device: str = "cpu",
               keep_all: bool = False, fuse: bool = True) -> Plan:
    """The :class:`.plan.Plan` of a verified program whose dims are all bound; with ``fuse``,
    every attention pattern that allows it is one ``jax.nn.dot_product_attention`` call."""
    framework = Jax(np.dtype(dtype), device_of(device))
    with framework.running():  # constants are folded as the run computes them
        return build(program, framework, keep_all=keep_all, fuse=fuse)


def _features(builder: PlanBuilder, part: pattern.Part) -> int:
    """The size of a key's features, or of a value's: its last axis in the canonical layout."""
    return builder.shape_of(part.node)[part.labels.index(
        "feature" if "feature" in part.labels else "value")]


# --- lowering expressions ---------------------------------------------------------------------


class _ExprLowerer(NewArrays):
    """Lowers the expression of one statement into JAX closures."""

    no_builtin = "bug_no_builtin_jax"

    def __init__(self, plan: PlanBuilder, framework: Jax, name: str, line: int,
                 result_shape: tuple[int, ...]) -> None:
        super().__init__(plan, name, line, result_shape)
        self.dtype = framework.dtype

    def lower_fused(self, node: nodes.Expr, form: onecall.OneCall) -> Closure:
        return _lower_dpa(self, form)

    def scalar(self, value: float | int) -> Any:
        return self.dtype.type(value)

    def boolean(self, value: bool) -> Any:
        return np.bool_(value)

    def cast(self, value: Any) -> Any:
        return jnp.asarray(value, self.dtype)


def _lower_unary(c: _ExprLowerer, node: nodes.Unary) -> Closure:
    if node.op == "~":  # on bool (the checker made sure)
        return c.elementwise(node, c.lower(node.operand), jnp.logical_not)
    operand = c.numeric(node.operand)
    return operand if node.op == "+" else c.elementwise(node, operand, jnp.negative)


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": jnp.add, "-": jnp.subtract, "*": jnp.multiply, "/": jnp.true_divide,
    "//": jnp.floor_divide, "**": jnp.power, "%": jnp.remainder, "@": jnp.matmul,
}
_BOOL_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "==": jnp.equal, "!=": jnp.not_equal, "<": jnp.less, "<=": jnp.less_equal,
    ">": jnp.greater, ">=": jnp.greater_equal, "&": jnp.logical_and, "|": jnp.logical_or,
}


def _lower_binop(c: _ExprLowerer, node: nodes.BinOp) -> Closure:
    """Bool operands are compared as bool only when both are, else as numbers (SC403); a
    bool result of arithmetic is computed as 0 and 1, nonzero being true."""
    both_bool = c.value_of(node.left).is_bool and c.value_of(node.right).is_bool
    compare = node.op in _BOOL_BINARY
    operand = c.lower if compare and both_bool else c.numeric
    left, right = operand(node.left), operand(node.right)
    lrun, rrun = left.run, right.run
    operation = _BOOL_BINARY[node.op] if compare else _BINARY[node.op]
    c.allocates(node)
    if not compare and c.value_of(node).is_bool:
        zero = c.scalar(0)
        return c.fold(Closure(lambda frame: jnp.not_equal(operation(lrun(frame), rrun(frame)),
                                                          zero)), left, right)
    closure = Closure(lambda frame: operation(lrun(frame), rrun(frame)))
    return closure if node.op == "@" else c.fold(closure, left, right)


def _lower_transpose(c: _ExprLowerer, node: nodes.Transpose) -> Closure:
    run = c.lower(node.operand).run
    return Closure(lambda frame: jnp.swapaxes(run(frame), -1, -2))


def _lower_subscript(c: _ExprLowerer, node: nodes.Subscript) -> Closure:
    """`x[...]` with the bounds the checker normalised (JAX slices backward too)."""
    if id(node) in c.program.calls:  # a gather, `E[ids]`: the checker read it as `take`
        return lower_call(c, node)  # type: ignore[arg-type]
    key = index_key(c, node, "[...]")
    operand = c.lower(node.operand)
    run = operand.run
    return c.fold(Closure(lambda frame: jnp.asarray(run(frame))[key]), operand)


def _lower_update(c: _ExprLowerer, node: nodes.Update) -> Closure:
    """`x[...] = v` as a new array (JAX's ``.at[...].set``); x itself is left as it was."""
    key = index_key(c, node, "[...] =")
    operand, value = c.lower(node.operand), c.lower(node.value)
    run, run_value = operand.run, value.run
    dtype = None if c.value_of(node).is_bool else c.dtype
    c.allocates(node)
    return Closure(lambda frame: jnp.asarray(run(frame), dtype).at[key].set(run_value(frame)))


_ExprLowerer.nodes = {
    **NODES, nodes.Unary: _lower_unary, nodes.BinOp: _lower_binop,
    nodes.Transpose: _lower_transpose, nodes.Subscript: _lower_subscript, nodes.Update: _lower_update,
}


# --- builtins: one row per builtin --------------------------------------------------------------


def _tensors(call: Call, function: Callable[..., Any], *params: str) -> Closure:
    """A new array computed from the arguments ``params`` as they are (bool stays bool)."""
    closures = [call.tensor(p) for p in params]
    runs = [c.run for c in closures]
    call.allocates()
    return call.fold(Closure(lambda frame: function(*(r(frame) for r in runs))), *closures)


def _unary(function: Callable[[Any], Any]) -> Implementation:
    return lambda call: call.elementwise(function)


def _softmax(call: Call) -> Closure:
    run, axis = call.numeric().run, call.axis()
    assert axis is not None
    name, line, what = call.c.name, call.c.line, slice_word(axis, call.rank())
    tolerance = SOFTMAX_TOLERANCE.get(call.c.dtype, 1e-4)
    call.allocates()

    def softmax(frame: Frame) -> Any:
        value = run(frame)
        masked = int(jnp.count_nonzero(jnp.isneginf(jnp.max(value, axis=axis))))
        if masked:  # an entirely -inf slice gives NaN, as in NumPy
            frame.warnings.append(message("masked_rows", name=name, line=line, count=masked))
        out = jax.nn.softmax(value, axis=axis)
        if frame.check_invariants:
            check_sums(frame, np.asarray(jnp.sum(out, axis=axis)), name, line, what, axis,
                       tolerance)
        return out

    return Closure(softmax)


def _transpose(call: Call) -> Closure:
    perm = call.arg("perm")
    order = None if perm is None else tuple(perm)
    return _tensors(call, lambda x: jnp.swapaxes(x, -1, -2) if order is None
                    else jnp.transpose(x, order), "x")


def _reshape(call: Call) -> Closure:
    target = call.out_shape  # the checker inferred any -1
    return _tensors(call, lambda x: jnp.reshape(x, target), "x")


def _split_heads(call: Call) -> Closure:
    *batch, heads, n, d = call.out_shape
    grouped = (*batch, n, heads, d)  # head h owns columns h*d ... h*d+d-1
    return _tensors(call, lambda x: jnp.swapaxes(jnp.reshape(x, grouped), -3, -2), "x")


def _merge_heads(call: Call) -> Closure:
    target = call.out_shape
    return _tensors(call, lambda x: jnp.reshape(jnp.swapaxes(x, -3, -2), target), "x")


def _section(call: Call) -> Closure:
    """Part `index` of equal parts along `axis`."""
    axis = call.axis()
    assert axis is not None
    length = call.out_shape[axis]
    start = call.dim("index") * length
    return _tensors(call, lambda x: jax.lax.slice_in_dim(x, start, start + length, axis=axis),
                    "x")


def _repeat(call: Call) -> Closure:
    repeats, axis = call.dim("repeats"), call.axis()
    return _tensors(call, lambda x: jnp.repeat(x, repeats, axis=axis), "x")


def _concat(call: Call) -> Closure:
    parts, axis = [p.run for p in call.tensors("tensors")], call.axis(of="tensors")
    call.allocates()
    return Closure(lambda frame: jnp.concatenate([p(frame) for p in parts], axis=axis))


def _stack(call: Call) -> Closure:
    parts = [p.run for p in call.tensors("tensors")]
    axis = axis_index(call.arg("axis"), call.rank("tensors") + 1)
    call.allocates()
    return Closure(lambda frame: jnp.stack([p(frame) for p in parts], axis=axis))


def _reduction(reduce: Callable[..., Any]) -> Implementation:
    def implementation(call: Call) -> Closure:
        axis, keep = axes_of(call.arg("axis"), call.rank()), bool(call.arg("keepdims"))
        return made(call, lambda x: reduce(x, axis=axis, keepdims=keep), "x")

    return implementation


def _logical(reduce: Callable[..., Any]) -> Implementation:
    def implementation(call: Call) -> Closure:
        axis, keep = axes_of(call.arg("axis"), call.rank()), bool(call.arg("keepdims"))
        return _tensors(call, lambda x: reduce(jnp.asarray(x, bool), axis=axis, keepdims=keep),
                        "x")

    return implementation


def _cumulative(accumulate: Callable[..., Any]) -> Implementation:
    return lambda call: made(call, lambda x, axis=call.axis(): accumulate(x, axis=axis), "x")


def _pairwise(function: Callable[..., Any]) -> Implementation:
    return lambda call: made(call, function, "x", "y")


def _normalise(rms: bool) -> Implementation:
    def implementation(call: Call) -> Closure:
        eps = call.c.scalar(call.arg("eps"))

        def apply(x: Any) -> Any:
            centred = x if rms else x - jnp.mean(x, axis=-1, keepdims=True)
            return centred / jnp.sqrt(jnp.mean(jnp.square(centred), axis=-1, keepdims=True) + eps)

        return call.elementwise(apply)

    return implementation


def _where(call: Call) -> Closure:
    return _tensors(call, jnp.where, "condition", "x", "y")


def _causal_mask(call: Call) -> Closure:
    queries = call.dim("n")
    keys = call.dim("n_k") if call.arg("n_k") is not None else queries
    offset = keys - queries  # aligned bottom right: query i sees key j <= i + offset
    window = call.dim("window") if call.arg("window") is not None else None
    call.allocates()
    return Closure(lambda frame: _causal_keep(offset, window, False, queries, keys))


def _causal_keep(offset: int, window: int | None, transposed: bool, nq: int, nk: int) -> Any:
    """Query i sees key j when j <= i + offset (and j > i + offset - window); ``transposed``:
    the mask as written has the keys as rows."""
    i, j = jnp.arange(nq)[:, None], jnp.arange(nk)[None, :]
    near, far = (i, j) if transposed else (j, i)
    keep = near <= far + offset
    return keep if window is None else keep & (near > far + offset - window)


def _triangle(keep: Callable[..., Any]) -> Implementation:
    return lambda call: _tensors(call, lambda x, k=call.dim("k"): keep(x, k=k), "x")


def _arange(call: Call) -> Closure:
    n, dtype = call.dim("n"), call.c.dtype
    bounds = (n,) if call.arg("stop") is None else (n, call.dim("stop"), *(
        (call.dim("step"),) if call.arg("step") is not None else ()))
    call.allocates()
    return Closure(lambda frame: jnp.arange(*bounds, dtype=dtype))


def _constant_fill(fill: Callable[..., Any]) -> Implementation:
    def implementation(call: Call) -> Closure:
        shape, dtype = call.shape(), call.c.dtype
        if shape:
            call.allocates()
            return Closure(lambda frame: fill(shape, dtype=dtype))
        return call.c.constant(dtype.type(fill((), dtype=dtype)))

    return implementation


def _full(call: Call) -> Closure:
    shape = call.shape()
    kind = np.dtype(bool) if call.c.value_of(call.node).is_bool else call.c.dtype
    return _tensors(call, lambda value: jnp.full(shape, value, dtype=kind), "value")


def _like(fill: Callable[..., Any]) -> Implementation:
    def implementation(call: Call) -> Closure:
        dtype = call.c.plan.framework.element_dtype(call.c.value_of(call.node))
        return made(call, lambda x: fill(jnp.shape(x), dtype=dtype), "x")

    return implementation


def _full_like(call: Call) -> Closure:
    value = call.c.value_of(call.node)
    dtype, whole = call.c.plan.framework.element_dtype(value), value.element == "int"
    return made(call, lambda x, v: jnp.full(jnp.shape(x), jnp.trunc(v) if whole else v,
                                             dtype=dtype), "x", "value")


def _einsum(call: Call) -> Closure:
    subscripts = call.arg("subscripts")
    runs = [o.run for o in call.tensors("operands", numeric=True)]
    call.allocates()
    return Closure(lambda frame: jnp.einsum(subscripts, *[r(frame) for r in runs]))


def _elu(call: Call) -> Closure:
    alpha, zero = call.c.scalar(call.arg("alpha")), call.c.scalar(0)
    # alpha * expm1 of min(x, 0), as NumPy's row, so that nothing overflows
    return call.elementwise(lambda x: jnp.where(x > zero, x,
                                                alpha * jnp.expm1(jnp.minimum(x, zero))))


def _softplus(call: Call) -> Closure:
    zero = call.c.scalar(0)  # log(1 + e^x), stable
    return call.elementwise(lambda x: jnp.logaddexp(zero, x))


def _long(call: Call) -> Closure:
    dtype = call.c.dtype
    return made(call, lambda x: jnp.trunc(jnp.asarray(x, dtype)), "x")


def _complex_part(function: Callable[[Any], Any]) -> Implementation:
    return lambda call: made(call, function, "x")


def _complex(real: Any, imaginary: Any) -> Any:
    return jax.lax.complex(*jnp.broadcast_arrays(real, imaginary))


def _polar(call: Call) -> Closure:
    return made(call, lambda r, a: _complex(r * jnp.cos(a), r * jnp.sin(a)), "abs", "angle")


def _view_as_real(call: Call) -> Closure:
    return made(call, lambda z: jnp.stack([jnp.real(z), jnp.imag(z)], axis=-1), "x")


def _as_real(call: Call) -> Closure:
    return made(call, lambda z: jnp.stack([jnp.real(z), jnp.imag(z)], axis=-1).reshape(
        *z.shape[:-1], -1), "x")


# --- integer tensors as positions ------------------------------------------------------------


def _positions(call: Call, index_param: str) -> tuple[Closure, Closure, Callable[[Frame], Any], int]:
    """The operand, the index, a thunk of the checked positions, and the axis."""
    x, index = call.tensor(), call.tensor(index_param)
    line, text, operand, axis, size = where_of(call, index_param)
    irun, where = index.run, (line, text, operand, axis)
    return x, index, lambda frame: checked_positions(irun(frame), size, where), axis


def _gather(index_param: str, along: bool = False) -> Implementation:
    def implementation(call: Call) -> Closure:
        x, index, positions, axis = _positions(call, index_param)
        xrun, gather = x.run, jnp.take_along_axis if along else jnp.take
        call.allocates()
        return call.fold(Closure(lambda frame: gather(xrun(frame), positions(frame), axis=axis)),
                         x, index)

    return implementation


def _index_copy(call: Call) -> Closure:
    x, index, positions, axis = _positions(call, "index")
    source = call.tensor("source")
    xrun, srun, expected = x.run, source.run, list(call.out_shape)
    call.allocates()

    def write(frame: Frame) -> Any:
        where = positions(frame)
        expected[axis] = len(where)
        values = jnp.broadcast_to(srun(frame), tuple(expected))
        return jnp.asarray(xrun(frame)).at[(slice(None),) * axis + (where,)].set(values)

    return call.fold(Closure(write), x, index, source)


def _scatter(call: Call) -> Closure:
    x, index, positions, axis = _positions(call, "index")
    source = call.tensor("src")
    xrun, srun = x.run, source.run
    call.allocates()

    def write(frame: Frame) -> Any:
        where = positions(frame)
        values = jnp.broadcast_to(srun(frame), where.shape)
        return jnp.put_along_axis(jnp.asarray(xrun(frame)), where, values, axis, inplace=False)

    return call.fold(Closure(write), x, index, source)


# --- attention as one jax.nn.dot_product_attention call ---------------------------------------


def _constant(framework: Jax, builder: PlanBuilder, node: nodes.Expr) -> float | None:
    """A scale's value at the bindings, when it is a constant (`sqrt(d)`, `0.125`)."""
    closure = _ExprLowerer(builder, framework, "", node.span.line, ()).numeric(node)
    return float(closure.run(Frame({}))) if closure.const else None


def _canonical(value: Any, recipe: pattern.Layout) -> Any:
    return jnp.reshape(jnp.transpose(jnp.reshape(value, recipe.squeezed), recipe.order),
                       recipe.shape)


def _four(value: Any, shape: tuple[int, ...]) -> Any:
    """[b..., n, e] (fewer batch axes broadcast) as [B, H, n, e], the call's 4-D layout: no
    batch axis gains two, one gains one, more are merged into B (after broadcasting)."""
    batch = len(shape)
    value = jnp.reshape(value, (1,) * (batch + 2 - value.ndim) + value.shape)
    if batch > 2:
        value = jnp.broadcast_to(value, (*shape, *value.shape[-2:]))
    return jnp.reshape(value, (1,) * (2 - batch) + value.shape) if batch < 2 else \
        jnp.reshape(value, (-1, *value.shape[-3:]))


def _heads_last(value: Any) -> Any:
    """[B, H, n, e] as the call's [B, n, H, e] (and back)."""
    return jnp.swapaxes(value, 1, 2)


def _lower_dpa(c: _ExprLowerer, call: onecall.OneCall) -> Closure:
    fusable = call.fusable
    parts = [(c.numeric(p.node).run, call.layouts[id(p.node)])
             for p in (fusable.query, fusable.key, fusable.value)]
    terms = [(None if step.part is None else (c.numeric if step.kind == "bias" else c.lower)(
        step.part.node).run, step, coefficient)
        for (step, _), coefficient in zip(call.form.terms, call.coefficients)]
    hides = [(None if step.part is None else c.lower(step.part.node).run, step)
             for step in call.form.hides]
    output = call.layouts[id(fusable.output)]
    out_shape = c.shape_of(fusable.output)
    dtype = c.dtype
    name, line = fusable.softmax_name, fusable.softmax_line
    what = slice_word(fusable.softmax_axis, fusable.softmax_rank)
    tolerance = DPA_TOLERANCE
    c.allocations.append(Allocation(message("tensor_label", name=c.name), output.shape,
                                    math.prod(output.shape) * dtype.itemsize))

    def keeps(run: Any, step: pattern.ScoreOp, frame: Frame, nq: int, nk: int) -> Any:
        keep = (_causal_keep(*call.causal[id(step)], nq, nk) if step.causal is not None
                else _canonical(run(frame), call.layouts[id(step.part.node)]))  # type: ignore[union-attr]
        return keep if step.keeps else ~keep

    def attention(frame: Frame) -> Any:
        q, k, v = (_canonical(run(frame), recipe) for run, recipe in parts)
        shape = jnp.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        q, k, v = (jnp.broadcast_to(x, (*shape, *x.shape[-2:])) for x in (q, k, v))
        nq, nk = q.shape[-2], k.shape[-2]
        added = None
        for run, step, coefficient in terms:
            term = (_canonical(run(frame), call.layouts[id(step.part.node)]) * coefficient
                    if step.kind == "bias" else  # an additive mask with a finite fill
                    jnp.where(keeps(run, step, frame, nq, nk), dtype.type(0),
                              dtype.type(step.fill * coefficient)))
            added = term if added is None else added + term
        keep = None
        for run, step in ([] if call.is_causal else hides):
            mask = keeps(run, step, frame, nq, nk)
            keep = mask if keep is None else keep & mask
        bias4, mask4 = (None if t is None else _four(t, shape) for t in (added, keep))
        out = _heads_last(jax.nn.dot_product_attention(
            *(_heads_last(_four(x, shape)) for x in (q, k, v)), bias4, mask4,
            scale=call.scale, is_causal=call.is_causal)).reshape(*shape, nq, v.shape[-1])
        if keep is not None or added is not None:
            seen = jnp.ones((nq, nk), bool) if keep is None else keep
            seen = seen if added is None else seen & ~jnp.isneginf(added)
            hidden = jnp.broadcast_to(~jnp.any(seen, axis=-1), (*shape, nq))
            count = int(jnp.count_nonzero(hidden))
            if count:  # the call gives a number for a fully masked row; the spec's softmax NaN
                frame.warnings.append(message("masked_rows", name=name, line=line, count=count))
                out = jnp.where(hidden[..., None], dtype.type(math.nan), out)
        if frame.check_invariants:
            _check_sampled(frame, call, q, k, v, keep, added, out, what, tolerance)
        return jnp.reshape(jnp.transpose(jnp.reshape(out, output.canonical), output.inverse),
                           out_shape)

    return Closure(attention)


def _check_sampled(frame: Frame, call: onecall.OneCall, q: Any, k: Any, v: Any, keep: Any,
                   added: Any, out: Any, what: str, tolerance: float) -> None:
    nq = q.shape[-2]
    rows = jnp.asarray(onecall.sampled_rows(nq))
    if call.is_causal:
        keep = _causal_keep(0, None, False, nq, k.shape[-2])

    def sampled(value: Any) -> Any:
        if value is None:
            return None
        return np.asarray(value if value.shape[-2] == 1 else jnp.take(value, rows, axis=-2))

    onecall.check_rows(frame, call, sampled(q), np.asarray(k), np.asarray(v), sampled(keep),
                       sampled(added), sampled(out), what, tolerance, DPA_CHECK)


def _extreme_at(find: Callable[..., Any]) -> Implementation:
    """argmax/argmin: positions held in the run's float dtype, as every int tensor is."""
    def implementation(call: Call) -> Closure:
        given, keep, dtype = call.arg("axis"), bool(call.arg("keepdims")), call.c.dtype
        axis = None if given is None else axis_index(given, call.rank())
        return made(call, lambda x: jnp.asarray(find(x, axis=axis, keepdims=keep), dtype), "x")
    return implementation


# The JAX op table: a row per builtin (lowering.table: the functions above by name, the shared
# recipes with jax.numpy's functions, and these rows of its own).
BUILTINS: dict[str, Implementation] = table(globals(), jnp, {
    "clamp": bounded(jnp.clip),
    "sort": ordered(lambda x, axis, descending, _: jnp.sort(x, axis=axis, descending=descending)),
    # ties in their first order (a stable sort), descending too (PyTorch's stable=True)
    "argsort": ordered(lambda x, axis, descending, dtype: jnp.argsort(
        x, axis=axis, stable=True, descending=descending).astype(dtype)),
    "flip": flipped(lambda x, axes: jnp.flip(x, axis=axes)),
    "argmax": _extreme_at(jnp.argmax), "argmin": _extreme_at(jnp.argmin),
    "sigmoid": _unary(jax.nn.sigmoid), "relu": _unary(jax.nn.relu),
    "rsqrt": _unary(jax.lax.rsqrt), "erf": _unary(erf), "silu": _unary(jax.nn.silu),
    "gelu": _unary(lambda x: jax.nn.gelu(x, approximate=False)),
    "abs": lambda call: made(call, jnp.abs, "x"),
    "outer": lambda call: made(call, jnp.outer, "x", "y"),
    "tile": lambda call: _tensors(call, lambda x, reps=call.shape("reps"): jnp.tile(x, reps), "x"),
    "expand": lambda call: _tensors(call, lambda x, to=call.out_shape: jnp.broadcast_to(x, to),
                                    "x"),
    "view_as_complex": lambda call: made(call, lambda x: _complex(x[..., 0], x[..., 1]), "x"),
    "as_complex": lambda call: made(call, lambda x: _complex(x[..., 0::2], x[..., 1::2]), "x"),
})
_ExprLowerer.builtins = BUILTINS
