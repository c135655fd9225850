"""Complex values (issue 21, item 1): the shape rules of the builtins rotary embeddings
in complex form use (Meta's Llama, Mistral's reference, DeepSeek-V3):
`view_as_complex(x)` (`[..., 2]` -> `complex[...]`), `view_as_real` (its inverse), the
bare `as_complex`/`as_real` (neighbouring pairs of an even last axis), `polar`, and the
parts `real`, `imag`, `conj` (no `angle`: rotary code names its tensors so). Complex multiplication and broadcasting are the
operators' (:func:`shapecheck.value_rules.combined_element`).
"""

from __future__ import annotations

from typing import Any

from ..messages import codes
from .. import symbolic
from .program import Value
from .rules import Ctx, broadcast, counterexample, real_argument
from ..symbolic import Claim, to_text


def _complex_argument(ctx: Ctx, builtin: str, param: str, value: Value) -> bool:
    """``value`` holds complex numbers (SC322 otherwise)."""
    if value.element == "complex":
        return True
    ctx.report(codes.WRONG_ELEMENT, param, notes=ctx.notes(param), detail=codes.detail(
        "not_complex", builtin=builtin, text=ctx.text(param), shape=value.text()))
    return False


def _last_axis(ctx: Ctx, builtin: str, x: Value) -> bool:
    if x.rank >= 1:
        return True
    ctx.report(codes.RANK, "x", operation=f"`{builtin}`",
               requirement=codes.detail("at_least_axes", count=1), operand=ctx.text("x"),
               shape=x.text())
    return False


def view_as_complex(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`[..., 2]` -> `complex[...]`: the last axis, proved to be 2, as (real, imaginary)."""
    x: Value = a["x"]
    if not real_argument(ctx, "view_as_complex", "x", x) or not _last_axis(ctx, "view_as_complex", x):
        return None
    assert x.shape is not None
    last = x.shape[-1]
    if not ctx.dims.equal(last, symbolic.integer(2)):
        decision = ctx.dims.decide(Claim.equal(last, symbolic.integer(2)))
        ctx.report(codes.COMPLEX_PAIRS, "x", notes=ctx.notes("x"), needed=decision,
                   counterexample=counterexample(decision),
                   detail=codes.detail("complex_pairs", shape=x.text(), last=to_text(last)))
        return None
    return Value(x.shape[:-1], element="complex")


def as_complex(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`[..., 2*h]` -> `complex[..., h]`: neighbours (2i, 2i+1) paired; the width proved even."""
    x: Value = a["x"]
    if not real_argument(ctx, "as_complex", "x", x) or not _last_axis(ctx, "as_complex", x):
        return None
    assert x.shape is not None
    last, two = x.shape[-1], symbolic.integer(2)
    if not ctx.dims.divides(last, two):
        decision = ctx.dims.decide(Claim.divides(last, two))
        ctx.report(codes.COMPLEX_PAIRS, "x", notes=ctx.notes("x"), needed=decision,
                   counterexample=counterexample(decision),
                   detail=codes.detail("complex_even", shape=x.text(), last=to_text(last),
                                       relation=ctx.dims.divisibility_claim(last, two, decision)))
        return None
    return Value(x.shape[:-1] + (ctx.dims.quotient(last, two),), element="complex")


def view_as_real(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`complex[...]` -> `[..., 2]`: each number as (real, imaginary)."""
    z: Value = a["x"]
    if not _complex_argument(ctx, "view_as_real", "x", z):
        return None
    assert z.shape is not None
    return Value(z.shape + (symbolic.integer(2),))


def as_real(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`complex[..., h]` -> `[..., 2*h]`: the inverse of `as_complex` (pairs interleaved)."""
    z: Value = a["x"]
    if not _complex_argument(ctx, "as_real", "x", z) or not _last_axis(ctx, "as_real", z):
        return None
    assert z.shape is not None
    return Value(z.shape[:-1] + (z.shape[-1] * 2,))


def polar(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`polar(abs, angle)`: `abs * (cos(angle) + i sin(angle))`; the two broadcast."""
    magnitude: Value = a["abs"]
    angle: Value = a["angle"]
    if not (real_argument(ctx, "polar", "abs", magnitude)
            and real_argument(ctx, "polar", "angle", angle)):
        return None
    shape = broadcast(ctx, magnitude, angle, "`polar`", "angle", ("abs", "angle"))
    return None if shape is None else Value(shape, element="complex")


def part(name: str, complex_only: bool) -> Any:
    """`real`, `imag` (real results) and `conj` (complex): elementwise, x's shape.
    ``complex_only``: a real x is refused (`imag` of a real tensor is all zeros: a slip)."""
    def rule(ctx: Ctx, a: dict[str, Any]) -> Value | None:
        x: Value = a["x"]
        if complex_only and not _complex_argument(ctx, name, "x", x):
            return None
        return Value(x.shape, element="complex" if name == "conj" else "")

    return rule


__all__ = ["as_complex", "as_real", "part", "polar", "real_argument", "view_as_complex",
           "view_as_real"]
