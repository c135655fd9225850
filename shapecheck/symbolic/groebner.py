"""Gröbner bases, counted in steps.

SymPy's `groebner` has no budget: a few nonlinear constraints in 8 dims run for minutes.
This is Buchberger's algorithm with the coprime-leading-monomial criterion and the
normal selection strategy, on SymPy's sparse polynomials (`PolyElement`), where every
step that cancels a leading term is counted against MAX_STEPS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
from sympy.polys.domains import QQ
from sympy.polys.monomials import monomial_div, monomial_lcm
from sympy.polys.orderings import lex
from sympy.polys.rings import PolyElement, ring

from ..records import Record
from .budget import MAX_BASIS, MAX_BITS, MAX_STEPS, MAX_TERMS, bits_of, too_complex
from .dims import Dim


class Steps:
    def __init__(self, limit: int = MAX_STEPS) -> None:
        self.left = limit

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise too_complex("too_complex_steps", MAX_STEPS)


def _coefficient_bits(poly: PolyElement) -> int:
    return max((bits_of(int(c.numerator)) + bits_of(int(c.denominator)) for c in poly.values()),
               default=0)


def checked_poly(poly: PolyElement) -> PolyElement:
    if len(poly) > MAX_TERMS:
        raise too_complex("too_complex_terms", MAX_TERMS)
    if _coefficient_bits(poly) > MAX_BITS:
        raise too_complex("too_complex_bits", MAX_BITS)
    return poly


def _reduce(poly: PolyElement, basis: Sequence[PolyElement], steps: Steps) -> PolyElement:
    """The remainder of ``poly`` divided by ``basis`` (monic polynomials)."""
    remainder = poly.ring.zero
    poly = poly.copy()
    while poly:
        steps.take()
        monom, coefficient = poly.LT
        for divisor in basis:
            quotient = monomial_div(monom, divisor.LM)
            if quotient is not None:
                poly = poly - divisor.mul_term((quotient, coefficient))
                break
        else:
            remainder[monom] = coefficient
            del poly[monom]
        if len(poly) > MAX_TERMS:
            raise too_complex("too_complex_terms", MAX_TERMS)
    return checked_poly(remainder)


def groebner_basis(polys: Sequence[PolyElement], steps: Steps) -> list[PolyElement]:
    """A Gröbner basis (monic) of ``polys``, or TooComplex past the budget."""
    import heapq  # here: a spec with linear constraints only never loads it (issue 36)

    basis: list[PolyElement] = []
    pairs: list[tuple[Any, int, int]] = []  # a heap: smallest lcm first (normal strategy)
    order = polys[0].ring.order if polys else lex

    def add(poly: PolyElement) -> None:
        basis.append(checked_poly(poly.monic()))
        if len(basis) > MAX_BASIS:
            raise too_complex("too_complex_steps", MAX_STEPS)
        new = len(basis) - 1
        for i in range(new):
            first, second = basis[i].LM, basis[new].LM
            if any(a and b for a, b in zip(first, second)):  # coprime: reduces to 0
                heapq.heappush(pairs, (order(monomial_lcm(first, second)), i, new))

    for poly in polys:
        reduced = _reduce(poly, basis, steps)
        if reduced:
            add(reduced)
    while pairs:
        _, i, j = heapq.heappop(pairs)
        first, second = basis[i], basis[j]
        lcm = monomial_lcm(first.LM, second.LM)
        steps.take()
        spoly = first.mul_monom(monomial_div(lcm, first.LM)) \
            - second.mul_monom(monomial_div(lcm, second.LM))
        reduced = _reduce(checked_poly(spoly), basis, steps)
        if reduced:
            add(reduced)
    return basis


class Basis(Record, frozen=True):
    """A Gröbner basis of the relations, over their dims (lex, sorted by name)."""

    gens: tuple[Dim, ...]
    polys: tuple[PolyElement, ...]

    def remainder(self, difference: Dim) -> Dim | None:
        """The normal form of ``difference``; None when it is not a polynomial.

        Dims that no relation mentions come after the basis's own in the order, so
        the basis stays a Gröbner basis in the larger ring.
        """
        extra = sorted(difference.free_symbols - set(self.gens), key=lambda s: s.name)
        poly_ring = ring(list(self.gens) + extra, QQ, lex)[0]
        try:
            poly = poly_ring.from_expr(difference)
        except (ValueError, sympy.polys.polyerrors.BasePolynomialError):
            return None
        basis = [p.set_ring(poly_ring) for p in self.polys]
        return _reduce(checked_poly(poly), basis, Steps()).as_expr()
