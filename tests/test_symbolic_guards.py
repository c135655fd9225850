"""Torch's guards read as facts about sizes (shapecheck/symbolic/guards.py): a size the
guards admit only at multiples of a number the code divides it by (issue 29, MaxViT's
einops windows)."""

from __future__ import annotations

import pytest
import sympy

pytest.importorskip("torch")

from torch.utils._sympy.functions import FloorDiv, Mod  # noqa: E402

from shapecheck.symbolic import counted_multiples, literal_multiples  # noqa: E402

T = sympy.Symbol("s0", integer=True, positive=True)


def test_guards_that_admit_only_multiples_make_the_size_a_product() -> None:
    guards = [sympy.Eq(FloorDiv(T, FloorDiv(T, 7)), 7), sympy.Eq(Mod(T, 7), 0)]
    [(size, (quotient, whole))] = literal_multiples(guards, {T: 14}, {"s0"}).items()
    assert size == T and quotient == "qs0" and whole == 7 * sympy.Symbol("qs0", integer=True,
                                                                         positive=True)


@pytest.mark.parametrize("guards", [
    # alone, the window count's guard holds at 15 too (15 // 2 == 7): no multiple
    [sympy.Eq(FloorDiv(T, FloorDiv(T, 7)), 7)],
    # a map padded up to a multiple (ViTDet's windows) takes any size
    [sympy.Eq(Mod(T + Mod(-T, 7), 7), 0)],
    # a size the code divides by nothing
    [sympy.Gt(T, 3)],
])
def test_guards_that_admit_other_sizes_claim_nothing(guards: list[sympy.Basic]) -> None:
    assert literal_multiples(guards, {T: 14}, {"s0"}) == {}


def test_a_size_traced_at_no_multiple_claims_nothing() -> None:
    guards = [sympy.Eq(Mod(T, 7), 0)]
    assert literal_multiples(guards, {T: 15}, {"s0"}) == {}


def test_a_size_cut_into_a_count_computed_from_itself_is_a_product() -> None:
    """Hiera's `reshape(B, -1, N // 64, ...)`: torch writes each part `N // (N // 64)` and
    keeps no guard; traced at a multiple of 64, the size is written `64 * q`."""
    part = FloorDiv(T, FloorDiv(T, 64))
    [(size, (quotient, whole))] = counted_multiples([3 * part], {T: 256}, {"s0"}).items()
    assert size == T and whole == 64 * sympy.Symbol(quotient, integer=True, positive=True)


@pytest.mark.parametrize(("sizes", "traced"), [
    ([FloorDiv(T, FloorDiv(T, 64))], 260),  # traced at no multiple
    ([FloorDiv(T, 64)], 256),               # a count, no part cut by it
    ([FloorDiv(T, FloorDiv(T + 1, 64))], 256),
])
def test_other_quotients_claim_nothing(sizes: list[sympy.Basic], traced: int) -> None:
    assert counted_multiples(sizes, {T: traced}, {"s0"}) == {}
