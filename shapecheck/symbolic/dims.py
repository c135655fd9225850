"""Dims, their construction and their printing.

Dims are SymPy symbols built from the parse tree (positive integers), never from
text, so names SymPy treats specially (``E``, ``I``, ``S``, ``pi``) are ordinary
dims. Printing speaks the spec's notation (`(N + 1)//2`, `Mx - L`); ``pretty``
writes cost formulas as a reader does (``4·H·N²·d``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any, TypeAlias

import sympy
from sympy.printing.str import StrPrinter

from ..records import EnumBody, simple_enum
from .budget import TooComplex, cancel, expand, numer_denom


Dim: TypeAlias = sympy.Expr
"""A dim expression. Other modules treat it as opaque (and may use + - *)."""


@simple_enum
class Verdict(EnumBody):
    PROVED = "proved"
    DIFFERENT = "different"  # provably different (or different at the bindings)
    UNPROVED = "unproved"  # may hold for some sizes, not proved for all

    def __bool__(self) -> bool:
        return self is Verdict.PROVED


def symbol(name: str) -> Dim:
    return sympy.Symbol(name, integer=True, positive=True)


def integer(value: int) -> Dim:
    return sympy.Integer(value)


ONE: Dim = sympy.Integer(1)


def product(dims: Iterable[Dim]) -> Dim:
    return sympy.Mul(*dims)


def total(dims: Iterable[Dim]) -> Dim:
    return sympy.Add(*dims)


def exact_quotient(numerator: Dim, denominator: Dim) -> Dim:
    quotient = monomial_quotient(numerator, denominator)
    return quotient if quotient is not None else cancel(numerator / denominator)


def _powers(dim: Dim) -> tuple[int, dict[Dim, int]] | None:
    """``3*H*d**2`` -> (3, {H: 1, d: 2}); None if it is not such a monomial."""
    coefficient = 1
    powers: dict[Dim, int] = {}
    for factor in dim.args if dim.is_Mul else (dim,):
        if factor.is_Integer:
            coefficient *= int(factor)
        elif factor.is_Symbol:
            powers[factor] = powers.get(factor, 0) + 1
        elif factor.is_Pow and factor.base.is_Symbol and factor.exp.is_Integer and factor.exp > 0:
            powers[factor.base] = powers.get(factor.base, 0) + int(factor.exp)
        else:
            return None
    return coefficient, powers


def monomial_quotient(numerator: Dim, denominator: Dim) -> Dim | None:
    """Exact division of monomials by exponent arithmetic on Python ints.

    The common case (``H*d / H``) without SymPy's general machinery, whose
    first use costs a slow lazy import. None when it does not apply.
    """
    top, bottom = _powers(numerator), _powers(denominator)
    if top is None or bottom is None or bottom[0] == 0 or top[0] % bottom[0]:
        return None
    powers = dict(top[1])
    for base, exponent in bottom[1].items():
        if powers.get(base, 0) < exponent:
            return None
        powers[base] -= exponent
    factors = [base**exponent for base, exponent in powers.items() if exponent]
    return sympy.Mul(sympy.Integer(top[0] // bottom[0]), *factors)


def is_literal_one(dim: Dim) -> bool:
    return dim == ONE


def as_int(dim: Dim) -> int | None:
    return int(dim) if isinstance(dim, sympy.Integer) else None


def is_name(dim: Dim) -> bool:
    """Is the dim expression a single dim (``N``), not a compound one (``H*d``)?"""
    return bool(dim.is_Symbol)


def free_names(dim: Dim) -> set[str]:
    return {s.name for s in dim.free_symbols}


def built_of_positives(dim: Dim) -> bool:
    """Dims (positive by declaration, bound or not), positive integers, `+`, `*` and
    positive integer powers only: a positive integer whatever the sizes."""
    if dim.is_Integer:
        return bool(dim > 0)
    if dim.is_Symbol:
        return True
    if dim.is_Add or dim.is_Mul:
        return all(built_of_positives(arg) for arg in dim.args)
    if dim.is_Pow:
        return bool(dim.exp.is_Integer and dim.exp > 0) and built_of_positives(dim.base)
    return False


def floor_quotient(numerator: Dim, denominator: Dim) -> Dim:
    """``numerator // denominator``, as the spec writes it (`(d + 1)//2`)."""
    return sympy.floor(numerator / denominator)


_MINUS_HALF = Fraction(-1, 2)


def radicand(factors: Sequence[tuple[Dim, Fraction]]) -> tuple[Dim, Dim] | None:
    """``X`` with ``prod(base ** exponent) == 1 / sqrt(X)``, as (numerator, denominator).

    None when ``X`` would not be a ratio of products of the bases (a fourth root).
    A scale `1 / sqrt(d)` is ``[(d, -1/2)]`` and gives ``(d, 1)``; `1 / d` gives ``(d**2, 1)``.
    """
    if len(factors) == 1 and factors[0][1] == _MINUS_HALF:
        return factors[0][0], ONE  # the common `/ sqrt(d)`: no arithmetic
    numerator: Dim = ONE
    denominator: Dim = ONE
    for base, exponent in factors:
        power = -2 * exponent
        if power.denominator != 1:
            return None
        if power > 0:
            numerator *= base ** int(power)
        elif power < 0:
            denominator *= base ** int(-power)
    return numerator, denominator


def spaced(text: str) -> str:
    return text.replace("*", " * ") if "**" not in text else text


class _SpecPrinter(StrPrinter):
    """SymPy's printer, as the spec writes: floor division as `//`, and a sum with
    a positive term first (`Mx - L`, not `-L + Mx`)."""

    def _print_Add(self, expr: Any, order: str | None = None) -> str:
        ordered = list(self._as_ordered_terms(expr, order=order))
        first_positive = next(
            (i for i, t in enumerate(ordered) if not t.could_extract_minus_sign()), 0)
        ordered.insert(0, ordered.pop(first_positive))
        text = self._print(ordered[0])
        for term in ordered[1:]:
            if term.could_extract_minus_sign():
                text += " - " + self.parenthesize(-term, 40)
            else:
                text += " + " + self.parenthesize(term, 40)
        return text

    def parenthesize(self, item: Any, level: int, strict: bool = False) -> str:
        # `a//b` binds like `*` (left to right): as a factor or a base it needs brackets,
        # or `2*((N + 1)//2)` would print as `2*(N + 1)//2`, which reads `(2*(N + 1))//2`.
        if isinstance(item, sympy.floor) and level >= 50:
            return f"({self._print(item)})"
        return str(super().parenthesize(item, level, strict))

    def _print_floor(self, expr: Any) -> str:
        try:
            numerator, denominator = numer_denom(expr.args[0])
        except TooComplex:  # printing never fails: as written, then
            numerator, denominator = sympy.fraction(expr.args[0])
        return f"{self.parenthesize(numerator, 50)}//{self.parenthesize(denominator, 50)}"


_PRINTER = _SpecPrinter()


def to_text(dim: Dim) -> str:
    return _PRINTER.doprint(dim)


def shape_text(shape: Sequence[Dim] | None, is_bool: bool = False) -> str:
    if shape is None:
        return "<unknown>"
    inner = "[" + ", ".join(to_text(d) for d in shape) + "]"
    return "bool" + inner if is_bool else inner


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


class _PrettyPrinter(_SpecPrinter):
    """Cost formulas as a reader writes them: ``4·H·N²·d``, largest terms first."""

    def _print_Pow(self, expr: Any, rational: bool = False) -> str:
        exponent = expr.exp
        if exponent.is_Integer and int(exponent) > 1:
            return self.parenthesize(expr.base, 60) + str(int(exponent)).translate(_SUPERSCRIPT)
        return super()._print_Pow(expr, rational)


_PRETTY = _PrettyPrinter({"order": "grlex"})


def pretty(dim: Dim) -> str:
    """An expanded dim expression, printed with ``·`` and superscript powers (as it
    stands when expanding it would pass the budget)."""
    try:
        expanded = expand(dim)
    except TooComplex:
        expanded = dim
    return _PRETTY.doprint(expanded).replace("*", "·")
