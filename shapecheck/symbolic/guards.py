"""Torch's guards read as facts about sizes: the equations torch.export assumed while it
traced symbolic sizes (``ShapeEnv.guards``; their expressions are SymPy's, so they are read
here, in the one package that imports SymPy)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import sympy


def pins_sizes(expression: Any, traced: dict[Any, int]) -> bool:
    """Whether a guard is an equation that ties the sizes to the ones traced (``traced``:
    each symbol's traced size): torch kept it as a guard rather than solving it, and it is
    false with every size twice or three times as large (CLIP's attention pool: ``H*W + 1
    == 10``). An equation that scales with the sizes (a size a multiple of another, Swin's
    windows; ``Max(1, n) == n``) claims nothing of one size."""
    if not isinstance(expression, sympy.Eq) or not expression.free_symbols:
        return False
    for factor in (2, 3):
        values = {symbol: traced[symbol] * factor for symbol in expression.free_symbols
                  if symbol in traced}
        if len(values) < len(expression.free_symbols):
            return False
        try:
            if expression.xreplace(values) is sympy.false:
                return True
        except (ArithmeticError, TypeError, ValueError):
            continue
    return False


def multiples(equations: Iterable[Any], names: Collection[str]) -> dict[Any, tuple[str, Any]]:
    """The sizes among ``names`` that an equation makes a multiple of another (Swin's
    ``attn.view(B_ // nW, nW, ...)``: ``Eq(B_, (B_//nW) * (B_//(B_//nW)))`` holds for every
    multiple of ``nW`` and nothing else): each such size's symbol -> the quotient's name and
    the product ``quotient * divisor`` it is."""
    found: dict[Any, tuple[str, Any]] = {}
    for equation in equations:
        if not isinstance(equation, sympy.Eq):
            continue
        for size, other in ((equation.lhs, equation.rhs), (equation.rhs, equation.lhs)):
            if not isinstance(size, sympy.Symbol) or str(size) not in names \
                    or size in found or not other.has(size):
                continue
            for divisor in other.free_symbols - {size}:
                if str(divisor) not in names or divisor in found:
                    continue
                quotient = sympy.Symbol(f"q{size}", integer=True, positive=True)
                whole = quotient * divisor
                if sympy.simplify(other.xreplace({size: whole}) - whole) == 0:
                    found[size] = (str(quotient), whole)
                    break
    return found
