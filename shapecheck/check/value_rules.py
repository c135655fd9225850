"""Shape rules of the builtins that combine or gather values (issue 21, items 3 and 4):
running sums and products, pairwise minimum and maximum, `clamp`, `full`, `tile`,
reductions over several axes and the logical reductions `all` / `any`.

Each function is one row's rule (the rows are in :mod:`shapecheck.builtins`); they
report through the :class:`~shapecheck.rules.Ctx` as every rule does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..messages import codes
from .. import symbolic
from .program import Shape, Value
from .rules import Ctx, axis_index, broadcast, counterexample, real_argument, resolve_axis
from ..symbolic import Claim, to_text


def axes_of(axis: int | str | tuple[int, ...] | None, rank: int) -> tuple[int, ...] | None:
    """The axes a reduction's ``axis`` names, normalised (None: every axis). One axis
    (`-1`, `row`) or several (`(-1, -2)`): the one reading of checker, meaning and
    backends."""
    if axis is None:
        return None
    if isinstance(axis, tuple):
        return tuple(axis_index(a, rank) for a in axis)
    return (axis_index(axis, rank),)


def resolve_axes(ctx: Ctx, axis: int | str | tuple[int, ...] | None, x: Value) -> tuple[int, ...] | None:
    """Every axis of ``axis`` resolved against ``x`` (SC305 for one out of range, and for
    one named twice); ``()`` for None (every axis)."""
    if axis is None:
        return tuple(range(x.rank))
    named = axis if isinstance(axis, tuple) else (axis,)
    found: list[int] = []
    for one in named:
        index = resolve_axis(ctx, one, x)
        if index is None:
            return None
        if index in found:
            ctx.report(codes.CALL_ARGS, "axis", detail=codes.detail("axis_twice", axis=one,
                                                                    shape=x.text()))
            return None
        found.append(index)
    return tuple(found)


def reduce(ctx: Ctx, a: dict[str, Any], is_bool: bool = False) -> Value | None:
    """`sum`, `mean`, `max`, `amax`, `all`, ...: the named axes removed (kept as 1 with
    `keepdims`); ``is_bool``: the logical reductions, whose result is a mask."""
    x: Value = a["x"]
    assert x.shape is not None
    axes = resolve_axes(ctx, a["axis"], x)
    if axes is None:
        return None
    keep = bool(a["keepdims"])
    shape = tuple(symbolic.ONE if i in axes else d for i, d in enumerate(x.shape)
                  if keep or i not in axes)
    # A sum or mean of complex numbers is complex; of anything else, a real number.
    return Value(shape, is_bool, element="complex" if x.element == "complex" and not is_bool
                 else "")


def logical_reduce(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    return reduce(ctx, a, is_bool=True)


def extreme(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`max`/`min`/`amax`/`amin`: a reduction that keeps the element type (ints stay ints);
    complex numbers have no order (SC322)."""
    x: Value = a["x"]
    if not real_argument(ctx, "max", "x", x):
        return None
    result = reduce(ctx, a)
    if result is None:
        return None
    return Value(result.shape, element=x.element)  # a mask is reduced as 0 and 1


def cumulative(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`cumsum`/`cumprod` along one axis: the shape of x (a mask counts as numbers)."""
    x: Value = a["x"]
    if resolve_axis(ctx, a["axis"], x) is None:
        return None
    return Value(x.shape, element=x.element)


def pairwise(name: str) -> Callable[[Ctx, dict[str, Any]], Value | None]:
    """`minimum`/`maximum`: x and y broadcast (NumPy rules); ints of both stay ints."""
    def rule(ctx: Ctx, a: dict[str, Any]) -> Value | None:
        x: Value = a["x"]
        y: Value = a["y"]
        if not (real_argument(ctx, name, "x", x) and real_argument(ctx, name, "y", y)):
            return None
        shape = broadcast(ctx, x, y, f"`{name}`", "y", ("x", "y"))
        if shape is None:
            return None
        return Value(shape, element=combined_element(x, y))

    return rule


def clamp(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`clamp(x, min=lo, max=hi)`: each bound (a number, a dim or a tensor) broadcasts to
    x's shape; at least one is given, as PyTorch asks."""
    x: Value = a["x"]
    low: Value | None = a["min"]
    high: Value | None = a["max"]
    if low is None and high is None:
        ctx.report(codes.CALL_ARGS, None, detail=codes.detail("clamp_no_bound"))
        return None
    if not real_argument(ctx, "clamp", "x", x):
        return None
    shape: Shape | None = x.shape
    element = x.element
    for param, bound in (("min", low), ("max", high)):
        if bound is None:
            continue
        assert shape is not None
        widened = broadcast(ctx, Value(shape), bound, "clamp", param, ("x", param))
        if widened is None:
            return None
        if tuple(widened) != tuple(shape):
            ctx.report(codes.CALL_ARGS, param, detail=codes.detail(
                "clamp_bound_shape", bound=bound.text(), shape=x.text()))
            return None
        element = combined_element(Value(shape, element=element), bound)
    return Value(x.shape, element=element)


def full(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`full(shape, value)`: a constant; the value is one number (a dim, `-inf`, `0.5`)."""
    shape: Shape = a["shape"]
    value: Value = a["value"]
    if any(symbolic.as_int(d) == -1 for d in shape):
        ctx.report(codes.CALL_ARGS, "shape", detail=codes.detail("minus_one_outside_reshape"))
        return None
    if value.rank != 0:
        ctx.report(codes.CALL_ARGS, "value", detail=codes.detail(
            "full_value_not_scalar", shape=value.text()))
        return None
    return Value(shape, value.is_bool, element=value.element)


def tile(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`tile(x, reps)` (NumPy's; PyTorch's `x.repeat(...)`): x and reps right-aligned,
    the shorter padded with 1s, each size multiplied by its repetition."""
    x: Value = a["x"]
    reps: Shape = a["reps"]
    assert x.shape is not None
    for count in reps:
        number = symbolic.as_int(count)
        if number is not None and number < 1:
            ctx.report(codes.CALL_ARGS, "reps", detail=codes.detail("tile_reps", reps=number))
            return None
    rank = max(len(reps), len(x.shape))
    sizes = (symbolic.ONE,) * (rank - len(x.shape)) + x.shape
    counts = (symbolic.ONE,) * (rank - len(reps)) + tuple(reps)
    return Value(tuple(size * count for size, count in zip(sizes, counts)), x.is_bool,
                 element=x.element)


def flatten(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`flatten(x, start, end)` (PyTorch's `x.flatten(start_dim, end_dim)`, defaults 0 and
    -1): the axes start..end, both included, merged into one whose size is their product."""
    x: Value = a["x"]
    assert x.shape is not None
    if not x.shape:  # PyTorch: a scalar flattens to one element
        return Value((symbolic.ONE,), x.is_bool, element=x.element)
    start = resolve_axis(ctx, a["start"], x, "start")
    end = resolve_axis(ctx, a["end"], x, "end")
    if start is None or end is None:
        return None
    if start > end:
        ctx.report(codes.CALL_ARGS, "start", detail=codes.detail(
            "flatten_order", start=a["start"], end=a["end"], shape=x.text()))
        return None
    merged = symbolic.product(x.shape[start:end + 1])
    return Value(x.shape[:start] + (merged,) + x.shape[end + 1:], x.is_bool, element=x.element)


def arg_extreme(name: str) -> Callable[[Ctx, dict[str, Any]], Value | None]:
    """`argmax`/`argmin(x, axis, keepdims)`: the position of the extreme along one axis, an
    int tensor of x's shape without that axis (kept as 1 with keepdims); without an axis,
    one position in x flattened (PyTorch's and NumPy's)."""
    def rule(ctx: Ctx, a: dict[str, Any]) -> Value | None:
        x: Value = a["x"]
        if not real_argument(ctx, name, "x", x):
            return None
        if a["axis"] is None:
            return Value((symbolic.ONE,) * x.rank if a["keepdims"] else (), element="int")
        result = reduce(ctx, a)
        return None if result is None else Value(result.shape, element="int")

    return rule


def ordered(positions: bool) -> Callable[[Ctx, dict[str, Any]], Value | None]:
    """`sort`/`argsort(x, axis, descending)`: x's shape; the values in order along the axis,
    or (``positions``) where each came from, as ints."""
    def rule(ctx: Ctx, a: dict[str, Any]) -> Value | None:
        x: Value = a["x"]
        name = "argsort" if positions else "sort"
        if not real_argument(ctx, name, "x", x) or resolve_axis(ctx, a["axis"], x) is None:
            return None
        return Value(x.shape, element="int" if positions else x.element)

    return rule


def flip(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`flip(x, axis)` (PyTorch's `x.flip(dims)`, NumPy's `flip`): x with the order along
    each named axis reversed; every axis without one."""
    x: Value = a["x"]
    if resolve_axes(ctx, a["axis"], x) is None:
        return None
    return Value(x.shape, x.is_bool, element=x.element)


def expand(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`expand(x, shape)` (PyTorch's `x.expand(...)`): x's axes right-aligned with the shape;
    new leading axes are allowed, `-1` keeps x's size, and only an axis of size 1 grows --
    any other size must be proved equal to the one asked for."""
    x: Value = a["x"]
    target: Shape = a["shape"]
    assert x.shape is not None
    lead = len(target) - len(x.shape)
    if lead < 0:
        ctx.report(codes.CALL_ARGS, "shape", detail=codes.detail(
            "expand_rank", x=ctx.text("x"), rank=len(x.shape), count=len(target)))
        return None
    out = []
    for index, size in enumerate(target):
        have = x.shape[index - lead] if index >= lead else None
        if symbolic.as_int(size) == -1:
            if have is None:
                ctx.report(codes.CALL_ARGS, "shape", detail=codes.detail("expand_new_keep"))
                return None
            out.append(have)
        elif have is None or ctx.dims.equal(have, size) or ctx.dims.equal(have, symbolic.ONE):
            out.append(size)
        else:
            decision = ctx.dims.decide(Claim.equal(have, size))
            ctx.report(codes.CALL_ARGS, "shape", counterexample=counterexample(decision),
                       detail=codes.detail("expand_grows", x=ctx.text("x"), axis=index - lead,
                                           have=to_text(have), size=to_text(size)))
            return None
    return Value(tuple(out), x.is_bool, element=x.element)


def arange(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`arange(n)`: 0 .. n-1; `arange(start, stop, step)`: as Python's range, the step a
    non-zero integer; the count is proved positive (an empty range is a mistake)."""
    start, stop, step = a["n"], a["stop"], a["step"]
    if stop is None:
        start, stop = symbolic.integer(0), start
    if step is None:
        step = symbolic.ONE
    stride = symbolic.as_int(step)
    if stride is None or stride == 0:
        ctx.report(codes.CALL_ARGS, "step", detail=codes.detail("arange_step", step=to_text(step)))
        return None
    span = stop - start if stride > 0 else start - stop
    size = abs(stride)
    count = span if size == 1 else (ctx.dims.quotient(span, symbolic.integer(size))
                                    if ctx.dims.divides(span, symbolic.integer(size))
                                    else symbolic.floor_quotient(span + size - 1, symbolic.integer(size)))
    if not ctx.dims.positive(count):  # SC201, as for a shape entry: `arange(N - 1)`
        decision = ctx.dims.decide(Claim.positive(count))
        example = decision.counterexample
        reason = codes.detail("not_positive_at", value=example.sides[0], values=example.text()) \
            if example is not None else ""
        ctx.report(codes.NOT_POSITIVE, "n" if a["stop"] is None else None, needed=decision,
                   counterexample=counterexample(decision), expr=to_text(count), reason=reason)
        return None
    return Value((ctx.dims.simplest(count),), element="int")


def outer(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`outer(a, b)`: two vectors -> `[len(a), len(b)]` (Llama's `torch.outer(t, freqs)`)."""
    for param in ("x", "y"):
        value: Value = a[param]
        if value.rank != 1:
            ctx.report(codes.RANK, param, operation="`outer`",
                       requirement=codes.detail("vector_only"), operand=ctx.text(param),
                       shape=value.text())
            return None
    x, y = a["x"], a["y"]
    return Value((x.shape[0], y.shape[0]), element=combined_element(x, y))


def like(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`ones_like`, `zeros_like`: x's shape and element type."""
    x: Value = a["x"]
    return Value(x.shape, x.is_bool, element=x.element)


def full_like(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`full_like(x, value)`: x's shape and element type, as NumPy and PyTorch keep x's
    dtype (T5's cap of the buckets, `full_like(large, num_buckets - 1)`)."""
    value: Value = a["value"]
    if value.rank != 0:
        ctx.report(codes.CALL_ARGS, "value", detail=codes.detail(
            "full_value_not_scalar", shape=value.text()))
        return None
    return like(ctx, a)


def to_int(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`long(x)`: integers, rounded toward zero (PyTorch's `.long()`, `.to(torch.long)`);
    a mask gives 0 and 1."""
    x: Value = a["x"]
    if x.element == "complex":
        ctx.report(codes.WRONG_ELEMENT, "x", detail=codes.detail(
            "complex_input", builtin="long", text=ctx.text("x"), shape=x.text()))
        return None
    return Value(x.shape, element="int")


def combined_element(x: Value, y: Value) -> str:
    """The element type of an arithmetic result: complex wins, then float; two ints (or an
    int and a dim or integer literal) stay int."""
    elements = {x.element or ("float" if not x.is_bool else "bool"),
                y.element or ("float" if not y.is_bool else "bool")}
    if "complex" in elements:
        return "complex"
    if elements <= {"int", "bool"} and "int" in elements:
        return "int"
    return ""


__all__ = ["axes_of", "clamp", "combined_element", "cumulative", "extreme", "full",
           "expand", "logical_reduce", "pairwise", "reduce", "resolve_axes", "tile"]
