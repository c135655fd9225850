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


def literal_multiples(guards: Collection[Any], traced: dict[Any, int],
                      names: Collection[str]) -> dict[Any, tuple[str, Any]]:
    """The sizes among ``names`` that the guards admit only at multiples of a number the
    code divides them by (einops' ``(x w1)`` with ``w1=7``, a ``view(B, T // 7, 7, ...)``):
    each such size's symbol -> the quotient's name and the product ``number * quotient``.

    No single guard says it (``T // (T // 7) == 7`` holds at T = 15 too): the guards are
    evaluated together, every other size at its traced value, at multiples of the number
    near the traced size (which they must all admit) and at every other size between
    them (each of which one guard must refuse). Torch's own solver suggests the same
    (``T = 7*_T``) when the dims are declared strictly."""
    found: dict[Any, tuple[str, Any]] = {}
    for size in sorted(traced, key=str):
        if str(size) not in names:
            continue
        for number in sorted(_divisors_of(guards, size), reverse=True):
            value = traced[size]
            if value % number or value < number:
                continue
            base = dict(traced)

            def admitted(at: int) -> bool | None:
                return _all_hold(guards, {**base, size: sympy.Integer(at)})

            wholes = [value + number * step for step in (0, 1, 3)]
            others = [w + r for w in wholes for r in range(1, number)]
            if all(admitted(w) is True for w in wholes) and \
                    all(admitted(o) is False for o in others):
                quotient = sympy.Symbol(f"q{size}", integer=True, positive=True)
                found[size] = (str(quotient), number * quotient)
                break
    return found


def counted_multiples(sizes: Iterable[Any], traced: dict[Any, int],
                      names: Collection[str]) -> dict[Any, tuple[str, Any]]:
    """The sizes among ``names`` that the module cuts into a count of parts it computes from
    the size itself (Hiera's ``num_windows = N // (q_stride * window_size)`` then
    ``reshape(B, -1, num_windows, ...)``: torch writes each part's length ``N // (N // 64)``
    and keeps no guard, the reshape failing at run time where the count does not divide the
    size): each such size whose traced value is a multiple of the number -> the quotient's
    name and the product ``number * quotient``, as :func:`literal_multiples` writes them. The
    spec then holds at the multiples, the sizes the code is written for."""
    found: dict[Any, tuple[str, Any]] = {}
    for expression in sizes:
        for part in sympy.preorder_traversal(expression):
            size = _self_divided(part)
            if size is None or str(size) not in names or size in found \
                    or size not in traced:
                continue
            number = int(part.args[1].args[1])
            if traced[size] % number == 0 and traced[size] >= number:
                quotient = sympy.Symbol(f"q{size}", integer=True, positive=True)
                found[size] = (str(quotient), number * quotient)
    return found


def _self_divided(part: Any) -> Any:
    """``s`` of ``s // (s // number)`` (torch's ``FloorDiv``), else None."""
    if type(part).__name__ != "FloorDiv" or len(part.args) != 2:
        return None
    size, count = part.args
    if not isinstance(size, sympy.Symbol) or type(count).__name__ != "FloorDiv" \
            or len(count.args) != 2:
        return None
    base, number = count.args
    return size if base == size and number.is_Integer and int(number) >= 2 else None


def _divisors_of(guards: Collection[Any], size: Any) -> set[int]:
    """The numbers the guards divide ``size`` by (``size // 7``, ``size % 7``)."""
    numbers: set[int] = set()
    for guard in guards:
        for part in sympy.preorder_traversal(guard):
            args = getattr(part, "args", ())
            if len(args) == 2 and args[0] == size and args[1].is_Integer and \
                    type(part).__name__ in ("FloorDiv", "Mod", "PythonMod", "CleanDiv") and \
                    2 <= int(args[1]) <= 64:
                numbers.add(int(args[1]))
    return numbers


def _all_hold(guards: Collection[Any], values: dict[Any, Any]) -> bool | None:
    """Whether every guard holds at ``values`` (None: one could not be decided)."""
    for guard in guards:
        try:
            result = guard.xreplace(values)
        except (ArithmeticError, TypeError, ValueError):
            return None
        if result is sympy.false:
            return False
        if result is not sympy.true:
            return None
    return True
