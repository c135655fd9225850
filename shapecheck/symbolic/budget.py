"""The work budget: every expansion is measured before it is made.

All algebra runs under a deterministic budget, never a clock, so a verdict is the
same on every machine and inside an editor: every expansion is measured *before*
it is made (:func:`estimate`: terms, degree, size of the integers), the Gröbner
reduction counts its steps (:mod:`.groebner`), and SymPy's unbounded machinery
(``simplify``, ``solve``) is not used. A question that would pass the budget
raises :class:`TooComplex`; the checker reports it as SC003 on the statement that
asked, saying what to simplify.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import sympy

from ..records import NamedTuple
from ..messages import codes

if TYPE_CHECKING:
    from .dims import Dim


MAX_EXPONENT = 64  # of `**` in a dim expression, as written
# Expanding a product of sums multiplies their term counts: `(a+1)*(b+1)*...` with
# 40 factors has 2**40 terms, and a few hundred terms of high degree already take
# seconds. Every expansion (of an expression, or of one with derived dims and
# constraints substituted) is refused past these, before it is made.
MAX_TERMS = 256
MAX_DEGREE = 256
MAX_WORK = 4096  # products of terms one expansion multiplies out
# Integers stay far below the 4,300 digits Python will print (8,192 bits is 2,467 digits).
MAX_BITS = 8192
# SymPy re-evaluates a floor each time its argument is rebuilt (every expansion), asking
# the argument's sign through its real roots and derivatives: seconds at degree 32,
# tens of seconds at 64 (`(3**64 + d)**64 // 7`), which the terms and bits above do not
# see. A floor's argument stays below this degree.
MAX_FLOOR_DEGREE = 16
# Steps of the Gröbner basis and of one reduction (a step cancels one leading term).
MAX_STEPS = 4000
MAX_BASIS = 64  # polynomials in a Gröbner basis


class TooComplex(Exception):
    """A question about dims would pass the budget: the checker reports SC003.

    ``detail`` is the wording of the message (from ``codes.DETAILS``): what was
    too large, and what to simplify.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def too_complex(key: str, limit: int) -> TooComplex:
    return TooComplex(codes.detail(key, limit=f"{limit:,}"))


class Size(NamedTuple):
    """Upper bounds for an expression once expanded."""

    terms: int
    degree: int
    bits: int  # log2 of the sum of the absolute values of the coefficients


def bits_of(value: int) -> int:
    return abs(value).bit_length()


def estimate(expr: Dim, leaf: Callable[[Dim], Size | None] | None = None) -> Size:
    """Upper bounds of the size of ``sympy.expand(expr)``, computed without expanding.

    Raises TooComplex as soon as the result, or the work of an expansion it implies
    (the products a power or a product of sums multiplies out, a denominator, a
    floor's argument), passes the budget. ``leaf`` gives the size a symbol stands for
    (a derived dim: its definition's), by default one term of degree 1.
    """
    memo: dict[Dim, Size] = {}

    def size(e: Dim) -> Size:
        found = memo.get(e)
        if found is not None:
            return found
        if e.is_Integer:
            result = Size(1, 0, bits_of(int(e)))
        elif e.is_Rational:
            result = Size(1, 0, bits_of(int(e.p)) + bits_of(int(e.q)))
        elif e.is_Symbol:
            result = (leaf(e) if leaf is not None else None) or Size(1, 1, 0)
        elif e.is_Add:
            parts = [size(a) for a in e.args]
            result = Size(sum(p.terms for p in parts), max(p.degree for p in parts),
                           max(p.bits for p in parts) + len(parts).bit_length())
        elif e.is_Mul:
            result = _product_size([size(a) for a in e.args], _univariate(e))
        elif e.is_Pow and e.exp.is_Integer:
            result = _power_size(size(e.base), int(e.exp), _univariate(e.base))
        else:  # floor(...), or anything else: one term; its arguments are expanded inside
            parts = [size(a) for a in e.args]
            result = Size(1, max((p.degree for p in parts), default=1),
                           max((p.bits for p in parts), default=0))
            if result.degree > MAX_FLOOR_DEGREE:  # SymPy evaluates a floor's argument's sign
                raise too_complex("too_complex_degree", MAX_FLOOR_DEGREE)
        memo[e] = _within_budget(result)
        return memo[e]

    return size(expr)


def _within_budget(size: Size) -> Size:
    if size.terms > MAX_TERMS:
        raise too_complex("too_complex_terms", MAX_TERMS)
    if size.degree > MAX_DEGREE:
        raise too_complex("too_complex_degree", MAX_DEGREE)
    if size.bits > MAX_BITS:
        raise too_complex("too_complex_bits", MAX_BITS)
    return size


def _work(products: int) -> None:
    """An expansion multiplies out ``products`` pairs of terms: refused past MAX_WORK."""
    if products > MAX_WORK:
        raise too_complex("too_complex_work", MAX_WORK)


def _univariate(expr: Dim) -> bool:
    """One generator only (a floor is a generator of its own), so that at most
    degree + 1 terms survive the expansion."""
    generators = {a for a in sympy.preorder_traversal(expr)
                  if a.is_Symbol or (a.is_Function and not a.is_Number)}
    return len(generators) == 1


def _product_size(parts: list[Size], univariate: bool) -> Size:
    terms, degree, bits = 1, 0, 0
    for part in parts:
        terms, degree, bits = terms * part.terms, degree + part.degree, bits + part.bits
        _within_budget(Size(1, degree, bits))
        _work(terms)
    return Size(min(terms, degree + 1) if univariate else terms, degree, bits)


def _power_size(base: Size, exponent: int, univariate: bool) -> Size:
    """The size of ``base ** exponent`` expanded (a negative power expands its base's
    positive power, in a denominator: one term)."""
    n = abs(exponent)
    degree, bits = n * base.degree, n * base.bits
    _within_budget(Size(1, degree, bits))  # before the binomial below
    # Multiplying out (t terms)**n makes C(n + t - 1, t - 1) products; a polynomial
    # in one generator keeps at most degree + 1 of them.
    products = 1 if base.terms == 1 else math.comb(n + base.terms - 1, base.terms - 1)
    _work(products)
    terms = min(products, degree + 1) if univariate else products
    expanded = _within_budget(Size(terms, degree, bits))
    return expanded if exponent > 0 else Size(1, degree, bits)


def actual_bits(expanded: Dim) -> int:
    return max((bits_of(int(a.p)) + bits_of(int(a.q)) for a in sympy.preorder_traversal(expanded)
                if a.is_Rational), default=0)


def expand(expr: Dim, leaf: Callable[[Dim], Size | None] | None = None) -> Dim:
    """``sympy.expand``, refused (TooComplex) before it would pass the budget."""
    if expr.is_Symbol or expr.is_Number:
        return expr
    estimate(expr, leaf)
    return sympy.expand(expr)


def cancel(expr: Dim) -> Dim:
    """``sympy.cancel`` (a polynomial gcd), on expressions within the budget only."""
    estimate(expr)
    return sympy.cancel(expr)


def numer_denom(expr: Dim) -> tuple[Dim, Dim]:
    """Numerator and denominator over a common denominator, within the budget."""
    if not has_denominator(expr):
        return expr, sympy.Integer(1)
    estimate(expr)
    together = sympy.together(expr)
    estimate(together)
    return sympy.fraction(together)


def has_denominator(expr: Dim) -> bool:
    return any((p.is_Pow and p.exp.is_negative) or (p.is_Rational and not p.is_Integer)
               for p in sympy.preorder_traversal(expr))


# SymPy's assumptions (``is_positive``) isolate the real roots of a univariate expression
# (``_monotonic_sign``), work the budget above does not measure: seconds for
# `2**4096 - d**64`. They are asked only of expressions this small; past it, positivity
# is unproved (issue 17).
ASSUMPTION_DEGREE = 8
ASSUMPTION_BITS = 256


def affordable(dim: Dim) -> bool:
    """Whether SymPy's assumptions may be asked about ``dim`` within the budget."""
    for part in sympy.preorder_traversal(dim):
        if part.is_Pow and part.exp.is_Integer and abs(int(part.exp)) > ASSUMPTION_DEGREE:
            return False
        if part.is_Rational and bits_of(int(part.p)) + bits_of(int(part.q)) > ASSUMPTION_BITS:
            return False
    return True
