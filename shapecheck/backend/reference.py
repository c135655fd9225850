"""The spec's side of conformance: reference cases and the comparison with them.

:mod:`shapecheck.conform` drives a user's function; everything it needs from
NumPy is here, so that the backend stays the only NumPy importer:

- :func:`reference` — at one binding, the inputs and params (generated from the
  seed, as ``run`` does) and the outputs of the spec's own execution;
- :func:`arrange` / :func:`restore` — an array in the function's layout
  (``transpose``, or a permutation of the axes) and back;
- :func:`as_array` — a returned value as a NumPy array;
- :func:`compare` — the worst disagreement between an output and the spec's, within a
  tolerance that follows the element type (:func:`tolerance`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..check.program import Program
from . import runtime
from .compiled import CompiledSpec
from .plan import evaluate_shape

# (rtol, atol) by the element type compared at: the coarser of the run's dtype and the
# returned one. float64 is far looser than rounding (a correct implementation agrees to
# about 1e-14 at these sizes) and far tighter than any mistake (a wrong eps in a norm
# already moves values by 1e-6); float32 allows about 1000 ulps.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
}
PRECISION = ("bfloat16", "float16", "float32", "float64")  # coarsest first


@dataclass(frozen=True)
class Case:
    """The spec at one binding: what goes in, what must come out."""

    bindings: dict[str, int]  # every dim, derived ones included
    inputs: dict[str, np.ndarray]  # inputs and params, by spec name
    outputs: dict[str, np.ndarray]  # by output name
    dtype: str


def reference(program: Program, dtype: str, seed: int, *, fused: str = "auto") -> Case:
    """The inputs and outputs of a spec checked at a binding that fixes every dim
    (``fused``: as ``run --fused``)."""
    spec = CompiledSpec(program, dims=program.dims.bindings, dtype=dtype, max_memory=None,
                        fused=fused)
    inputs = {name: runtime.generate_for(program, tensor, evaluate_shape(program, tensor.value),
                                         spec.dtype, seed)
              for name, tensor in spec.declared.items()}
    result = spec.run(inputs)
    return Case(result.bindings, inputs, result.outputs, dtype)


def zero_rows_reference(program: Program, case: Case) -> Case:
    """``case`` read the second way (docs/conform.md, "Fully masked rows"): the same inputs,
    each fully masked softmax row given zero weights — what SDPA and FlexAttention return
    for a query that sees no key — instead of the eager softmax's NaN, and every statement
    after it computed from those zeros (an output projection's bias included)."""
    spec = CompiledSpec(program, dims=program.dims.bindings, dtype=case.dtype, max_memory=None,
                        fused="off")
    result = spec.run(case.inputs, zero_masked_rows=True)
    return Case(result.bindings, case.inputs, result.outputs, case.dtype)


def has_nan(case: Case) -> bool:
    """Whether some output of ``case`` holds a NaN (a fully masked row, or another)."""
    return any(a.dtype.kind in "fc" and bool(np.isnan(a).any()) for a in case.outputs.values())


def permutation(rank: int, layout: str | Sequence[int]) -> tuple[int, ...] | None:
    """Axes of the function's array in terms of the spec's: ``"transpose"`` swaps the last
    two; a sequence is a permutation of ``0..rank-1``. None when the layout does not fit
    the rank."""
    if layout == "transpose":
        return (*range(rank - 2), rank - 1, rank - 2) if rank >= 2 else None
    if isinstance(layout, str):
        return None
    axes = tuple(layout)
    return axes if sorted(axes) == list(range(rank)) else None


def arrange(array: np.ndarray, axes: tuple[int, ...] | None, integers: bool = False
            ) -> np.ndarray:
    """The spec's array in the function's layout (contiguous, as a freshly made array);
    ``integers``: an `int[...]` input, passed as int64 (what indexing code expects)."""
    if integers:
        array = array.astype(np.int64)
    return array if axes is None else np.ascontiguousarray(np.transpose(array, axes))


def restore(array: np.ndarray, axes: tuple[int, ...] | None) -> np.ndarray:
    """The function's array in the spec's layout."""
    return array if axes is None else np.transpose(array, np.argsort(axes))


def as_array(value: Any) -> np.ndarray | None:
    """A returned value as a NumPy array: arrays and anything with ``__array__`` (not a
    tensor: :mod:`.torch_backend` converts those); None for anything else."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (np.generic, float, int, bool)) or hasattr(value, "__array__"):
        try:
            array = np.asarray(value)
        except (TypeError, ValueError):
            return None
        return array if array.dtype.kind in "fiubc" else None
    return None


def dtype_name(array: np.ndarray) -> str:
    return array.dtype.name


def tolerance(run_dtype: str, returned: str) -> tuple[float, float, str]:
    """(rtol, atol, the element type they are for): the coarser of the two types."""
    known = [t for t in (run_dtype, returned) if t in TOLERANCES]
    coarsest = min(known, key=PRECISION.index) if known else run_dtype
    rtol, atol = TOLERANCES.get(coarsest, TOLERANCES["float64"])
    return rtol, atol, coarsest


@dataclass(frozen=True)
class Difference:
    """How an output departs from the spec's, when it does beyond the tolerance."""

    max_abs: float
    max_rel: float
    worst: tuple[int, ...]  # the element furthest beyond the tolerance
    expected: float
    got: float
    count: int  # elements beyond the tolerance
    size: int


def compare(expected: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> Difference | None:
    """None when ``|got - expected| <= atol + rtol * |expected|`` everywhere (NaN only where
    the spec has NaN, infinities equal); else the worst disagreement. Same shapes."""
    paired = np.iscomplexobj(expected) or np.iscomplexobj(got)
    if paired:  # complex values: their real and imaginary parts, each held to the tolerance
        expected, got = (np.stack([np.real(a), np.imag(a)], axis=-1) for a in (expected, got))
    want = np.asarray(expected, dtype=np.float64)
    have = np.asarray(got, dtype=np.float64)
    with np.errstate(all="ignore"):
        error = np.abs(have - want)
        same = (want == have) | (np.isnan(want) & np.isnan(have))  # equal infinities, NaNs
        error = np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))
        allowed = atol + rtol * np.abs(np.where(np.isfinite(want), want, 0.0))
        excess = error / allowed
        relative = np.where(want != 0, error / np.abs(want), np.where(error > 0, np.inf, 0.0))
    beyond = excess > 1.0
    if not beyond.any():
        return None
    worst = np.unravel_index(int(np.argmax(excess)), want.shape) if want.ndim else ()
    return Difference(
        max_abs=float(error.max()), max_rel=float(relative.max()),
        worst=tuple(int(i) for i in worst)[:-1] if paired else tuple(int(i) for i in worst), expected=float(want[worst]), got=float(have[worst]),
        count=int(np.count_nonzero(beyond)), size=int(want.size))


def finite_text(value: float) -> str:
    return "NaN" if math.isnan(value) else f"{value:.6g}"
