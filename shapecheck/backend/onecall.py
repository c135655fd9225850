"""An attention pattern as one framework call: torch's ``scaled_dot_product_attention``,
JAX's ``jax.nn.dot_product_attention``.

What such a call can compute is the same for every framework: ``softmax(scale · Q @ K.T +
bias)`` with keys hidden by a bool mask, every operand in the canonical layout. This module
decides, at the bindings, whether a :class:`.pattern.Fusable` has that form (:func:`form`:
the scale, each bias term's coefficient, each causal mask's offset and window), and checks a
call's output afterwards on a few query rows recomputed as the spec writes them
(:func:`check_rows`, on NumPy arrays). A framework lowers the call itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..syntax import nodes
from . import pattern
from .errors import CheckerBug, message
from .plan import Frame, PlanBuilder

SAMPLED_ROWS = 8  # query rows recomputed from Q, K and V to check the call


@dataclass(frozen=True)
class OneCall:
    """How one attention pattern runs as one call: every operand in the canonical layout
    (batch axes, then query or key, then features)."""

    fusable: pattern.Fusable
    layouts: dict[int, pattern.Layout]  # id(node) -> its layout to canonical
    scale: float
    coefficients: tuple[float, ...]  # per term of the affine form
    form: pattern.Affine
    causal: dict[int, tuple[int, int | None, bool]]  # id(step) -> (offset, window, transposed)
    is_causal: bool  # the one mask is causal_mask(N) as written: the call's is_causal
    mask_kind: str
    how: str  # the note's key: which call
    flex: bool = False  # torch: a mask or bias is a function of positions, run by flex_attention
    # ops applied to each score in the spec's order after ``form``'s scales, before its
    # hides (a soft-capped pattern: :func:`ordered`), with each scale's factor or a bias's sign
    steps: tuple[tuple[pattern.ScoreOp, float], ...] = ()

    def note(self) -> str:
        return message("fused", name=self.fusable.softmax_name, line=self.fusable.softmax_line,
                       how=message(self.how, mask=message(self.mask_kind)))


def form(builder: PlanBuilder, fusable: pattern.Fusable,
         constant: Callable[[nodes.Expr], float | None], how: str,
         refused: str) -> tuple[OneCall | None, str]:
    """The one-call form of ``fusable`` at the bindings, or None and why (``refused`` when
    no such call computes it). ``constant``: a scale's value, when it is a constant."""
    if any(step.kind == "cap" for step in fusable.ops):
        return None, f"{refused}_capped"
    affine = pattern.affine(fusable.ops)
    if affine is None:
        return None, refused
    scalars = [constant(step.node) for step in affine.scales]  # type: ignore[arg-type]
    if any(value is None or value <= 0 for value in scalars):
        return None, refused
    layouts = _layouts(builder, fusable)
    if layouts is None:
        return None, "fused_layout"
    by_step = {id(step): value for step, value in zip(affine.scales, scalars)}

    def factor(step: pattern.ScoreOp) -> float:
        return 1 / by_step[id(step)] if step.divides else by_step[id(step)]  # type: ignore[operator]

    scale = math.prod(factor(step) for step in affine.scales)
    coefficients = tuple((-1 if term.kind == "bias" and term.divides else 1)
                         * math.prod(factor(s) for s in after) for term, after in affine.terms)
    causal = {id(step): causal_at(builder, step.causal) for step in fusable.ops if step.causal}
    nq, nk = _lengths(builder, fusable)
    if not pattern.parts_span_scores(fusable, builder.shape_of, nq, nk):
        return None, "fused_layout"
    hides = affine.hides
    is_causal = (not affine.terms and len(hides) == 1 and hides[0].causal is not None
                 and hides[0].keeps and causal[id(hides[0])] == (0, None, False) and nq == nk)
    kind = ("sdpa_causal" if is_causal else "sdpa_float" if affine.terms
            else "sdpa_bool" if hides else "sdpa_no_mask")
    return OneCall(fusable, layouts, scale, coefficients, affine, causal, is_causal, kind, how), ""


def ordered(builder: PlanBuilder, fusable: pattern.Fusable,
            constant: Callable[[nodes.Expr], float | None], how: str,
            refused: str) -> tuple[OneCall | None, str]:
    """The form of a call that applies a function to each score (FlexAttention's
    ``score_mod``), for ops no affine form has (a soft-cap's ``tanh``): the leading scales
    multiply into ``scale``; the masks that hide with ``-inf`` where nothing after them can
    bring a score back (:func:`_absorbed`) are ``form.hides``, applied after the function, as
    ``mask_mod`` is; every other op is one of ``steps``, applied in the spec's order, each
    scale with its factor. Every scale must be a constant (any sign: it is applied as written)."""
    scalars = {id(step): constant(step.node)  # type: ignore[arg-type]
               for step in fusable.ops if step.kind == "scale"}
    if any(value is None or value == 0 for value in scalars.values()):
        return None, refused
    layouts = _layouts(builder, fusable)
    if layouts is None:
        return None, "fused_layout"
    factors: dict[int, float] = {  # each scale's factor: its value, or 1 / it for a divisor
        id(step): 1 / scalars[id(step)] if step.divides else scalars[id(step)]  # type: ignore[misc]
        for step in fusable.ops if step.kind == "scale"}
    ops = list(fusable.ops)
    leading = 0  # the scales before any other op: FlexAttention's `scale`
    while leading < len(ops) and ops[leading].kind == "scale" and factors[id(ops[leading])] > 0:
        leading += 1
    hides = tuple(step for at, step in enumerate(ops) if at >= leading
                  and _absorbed(step, ops[at + 1:], factors))
    hidden = {id(step) for step in hides}
    steps = tuple((step, factors[id(step)] if step.kind == "scale" else
                   -1.0 if step.kind == "bias" and step.divides else 1.0)
                  for step in ops[leading:] if id(step) not in hidden)
    causal = {id(step): causal_at(builder, step.causal) for step in fusable.ops if step.causal}
    scale = math.prod(factors[id(step)] for step in ops[:leading])
    if not pattern.parts_span_scores(fusable, builder.shape_of, *_lengths(builder, fusable)):
        return None, "fused_layout"
    return OneCall(fusable, layouts, scale, (), pattern.Affine(tuple(ops[:leading]), (), hides),
                   causal, False, "sdpa_no_mask", how, steps=steps), ""


def _absorbed(step: pattern.ScoreOp, later: Sequence[pattern.ScoreOp],
              factors: dict[int, float]) -> bool:
    """Whether ``step`` hides with ``-inf`` and every op after it keeps ``-inf`` as it is (a
    positive scale, a bias, an added mask, another ``-inf`` mask): then it is the same mask
    applied last. A soft-cap after it makes ``-inf`` a finite ``-c`` (SC410); a finite fill
    that replaces would show a hidden score again."""
    if step.kind != "mask" or step.fill != -math.inf:
        return False
    return all((s.kind == "scale" and factors[id(s)] > 0) or s.kind == "bias"
               or (s.kind == "mask" and (s.additive or s.fill == -math.inf)) for s in later)


def _layouts(builder: PlanBuilder, fusable: pattern.Fusable) -> dict[int, pattern.Layout] | None:
    """Each operand's layout to the canonical one (by ``id`` of its node); None when an axis
    has no role."""
    layouts: dict[int, pattern.Layout] = {}
    wanted = [(fusable.query, fusable.canonical_query), (fusable.key, fusable.canonical_key),
              (fusable.value, fusable.canonical_value)]
    wanted += [(step.part, fusable.canonical_scores) for step in fusable.ops if step.part]
    wanted += [(pattern.Part(fusable.output, fusable.output_labels), fusable.canonical_output)]
    for part, target in wanted:
        recipe = pattern.layout(part.labels, builder.shape_of(part.node), target)
        if recipe is None:
            return None
        layouts[id(part.node)] = recipe
    return layouts


def _lengths(builder: PlanBuilder, fusable: pattern.Fusable) -> tuple[int, int]:
    """The number of queries and of keys at the bindings."""
    nq = builder.shape_of(fusable.query.node)[fusable.query.labels.index("query")]
    nk = builder.shape_of(fusable.key.node)[fusable.key.labels.index("key")]
    return nq, nk


def causal_at(builder: PlanBuilder, causal: pattern.Causal) -> tuple[int, int | None, bool]:
    """(offset, window, transposed) of a ``causal_mask(n, n_k, window)`` at the bindings:
    query i sees key j when j <= i + offset (j > i + offset - window)."""
    evaluate = builder.program.dims.evaluate
    n = evaluate(causal.n)
    n_k = evaluate(causal.n_k) if causal.n_k is not None else n
    window = evaluate(causal.window) if causal.window is not None else None
    return n_k - n, window, causal.transposed


def sampled_rows(nq: int) -> list[int]:
    """The query rows the check recomputes: up to :data:`SAMPLED_ROWS`, first and last included."""
    count = min(SAMPLED_ROWS, nq)
    return sorted({round(i * (nq - 1) / max(count - 1, 1)) for i in range(count)})


def check_rows(frame: Frame, call: OneCall, q: Any, k: Any, v: Any, keep: Any, added: Any,
               out: Any, what: str, tolerance: float, keys: tuple[str, str],
               scores: Any = None) -> None:
    """Recompute the sampled query rows as the spec writes them (scores, mask, softmax, @ V)
    from NumPy arrays in the canonical layout: ``q``, ``keep`` (bool, or None), ``added``
    (the additive terms, or None) and ``out`` hold only those rows. Their weights must sum
    to 1 and give the call's output; ``keys``: the messages (the check, the bug).
    ``scores``: those rows' scores after the call's score function, when it is not affine
    (:func:`ordered`), in place of ``q @ k.T · scale``."""
    if scores is None:
        scores = q @ np.swapaxes(k, -1, -2) * call.scale
    if added is not None:
        scores = scores + added
    if keep is not None:
        scores = np.where(keep, scores, -np.inf)
    with np.errstate(all="ignore"):  # a fully masked row is NaN, as in the spec
        peak = np.max(scores, axis=-1, keepdims=True)
        weights = np.exp(scores - peak)
        weights /= np.sum(weights, axis=-1, keepdims=True)
    totals = np.sum(weights, axis=-1, dtype=np.float64)
    expected = weights @ v
    valid = ~np.isnan(expected)
    scale = float(np.abs(expected[valid]).max()) if valid.any() else 1.0
    error = float(np.abs(out[valid] - expected[valid]).max()) / max(scale, 1.0) \
        if valid.any() else 0.0
    sums = totals[~np.isnan(totals)]
    error = max(error, float(np.abs(sums - 1).max()) if sums.size else 0.0)
    fusable = call.fusable
    name, line = fusable.softmax_name, fusable.softmax_line
    if error > tolerance:
        raise CheckerBug(message(keys[1], name=name, line=line, what=what, error=error))
    frame.checks[f"{name}:{line}:sdpa"] = message(
        keys[0], name=name, line=line, count=q.shape[-2], what=what,
        axis=fusable.softmax_axis, error=error)
