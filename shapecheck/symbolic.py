"""Symbolic dims: the only module that imports SymPy.

Dims are SymPy symbols built from the parse tree (positive integers), never
from text, so names SymPy treats specially (``E``, ``I``, ``S``, ``pi``) are
ordinary dims. :class:`DimSystem` holds what the spec declares (free, derived
and fixed dims, bindings, constraints) and answers the questions the checker
asks: are two dim expressions provably equal, is one provably positive, does
a division provably leave no remainder.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from enum import Enum
from typing import Any, TypeAlias

import sympy
from sympy.printing.str import StrPrinter

from . import codes, nodes
from .diagnostics import Diagnostic, Span

Dim: TypeAlias = sympy.Expr
"""A dim expression. Other modules treat it as opaque (and may use + - *)."""

MAX_EXPONENT = 64
MAX_BITS = 4096
# Expanding a product of sums multiplies their term counts: `(a+1)*(b+1)*...` with
# 40 factors has 2**40 terms, and a few hundred terms of high degree already take
# seconds. Past this many, an expression is refused (SC003).
MAX_TERMS = 256


class Verdict(Enum):
    PROVED = "proved"
    DIFFERENT = "different"  # provably different (or different at the bindings)
    UNPROVED = "unproved"  # may hold for some sizes, not proved for all

    def __bool__(self) -> bool:
        return self is Verdict.PROVED


# --- construction and printing ------------------------------------------------------


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
    quotient = _monomial_quotient(numerator, denominator)
    return quotient if quotient is not None else sympy.cancel(numerator / denominator)


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


def _monomial_quotient(numerator: Dim, denominator: Dim) -> Dim | None:
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
        numerator, denominator = sympy.fraction(sympy.together(expr.args[0]))
        return f"{self.parenthesize(numerator, 50)}//{self.parenthesize(denominator, 50)}"


_PRINTER = _SpecPrinter()


def to_text(dim: Dim) -> str:
    return _PRINTER.doprint(dim)


def shape_text(shape: Sequence[Dim] | None, is_bool: bool = False) -> str:
    if shape is None:
        return "<unknown>"
    inner = "[" + ", ".join(to_text(d) for d in shape) + "]"
    return "bool" + inner if is_bool else inner


# --- the system of dims -----------------------------------------------------------------


@dataclass
class ConstraintUse:
    """A constraint and what it was used for (shown by the report)."""

    text: str
    span: Span
    eliminates: str | None = None


@dataclass
class DimInfo:
    name: str
    kind: str  # "free", "derived", "fixed"
    span: Span
    definition: Dim | None = None


@dataclass
class DimSystem:
    bindings: dict[str, int] = field(default_factory=dict)  # from --dim
    dims: dict[str, DimInfo] = field(default_factory=dict)
    constraints: list[ConstraintUse] = field(default_factory=list)
    _symbols: dict[str, Dim] = field(default_factory=dict)
    _values: dict[Dim, int] = field(default_factory=dict)
    _derived: dict[Dim, Dim] = field(default_factory=dict)
    _eliminated: dict[Dim, Dim] = field(default_factory=dict)
    _eliminated_by: dict[Dim, int] = field(default_factory=dict)
    _relations: list[Dim] = field(default_factory=list)
    _lower: dict[Dim, int] = field(default_factory=dict)
    # Inequalities between dims, each as an expression known to be >= 0.
    _facts: list[Dim] = field(default_factory=list)
    # `!=` constraints, each as an expression that is never 0 (used by refutation).
    _unequal: list[Dim] = field(default_factory=list)
    _canon_cache: dict[Dim, Dim] = field(default_factory=dict)
    # Answers are memoised until the next declaration or constraint changes
    # what is known; checking statements asks the same questions many times.
    _answers: dict[tuple[str, Dim, Dim | None], Any] = field(default_factory=dict)
    _groebner: Any = None
    # Derived dims bound on the command line, checked against their definition.
    _derived_bindings: list[tuple[Dim, int]] = field(default_factory=list)
    # Every name the spec defines (tensors too): a dim a suggestion introduces avoids them.
    taken: frozenset[str] = frozenset()

    # declarations

    def symbol_of(self, name: str) -> Dim | None:
        return self._symbols.get(name)

    def declare_free(self, name: str, span: Span) -> Dim:
        sym = self._new_symbol(name, DimInfo(name, "free", span))
        if name in self.bindings:
            self._values[sym] = self.bindings[name]
        return sym

    def declare_fixed(self, name: str, value: int, span: Span) -> Dim:
        sym = self._new_symbol(name, DimInfo(name, "fixed", span, sympy.Integer(value)))
        self._values[sym] = value
        return sym

    def declare_derived(self, name: str, definition: Dim, span: Span) -> Dim:
        sym = self._new_symbol(name, DimInfo(name, "derived", span, definition))
        self._derived[sym] = definition
        if name in self.bindings:
            # Binding a derived dim is checked against its definition later:
            # it becomes the equation `value == definition`.
            self._derived_bindings.append((sym, self.bindings[name]))
        return sym

    def _new_symbol(self, name: str, info: DimInfo) -> Dim:
        sym = symbol(name)
        self._symbols[name] = sym
        self.dims[name] = info
        self._invalidate()
        return sym

    def value_of(self, name: str) -> int | None:
        """The concrete value of a dim at the bindings, if it has one."""
        sym = self._symbols.get(name)
        if sym is None:
            return None
        return as_int(self.canonical(sym))

    # constraints

    def add_constraint(self, left: Dim, op: str, right: Dim, text: str, span: Span) -> ConstraintOutcome:
        use = ConstraintUse(text, span)
        self.constraints.append(use)
        if op != "==":
            return self._add_inequality(left, op, right)
        lhs, rhs = self.canonical(left), self.canonical(right)
        if lhs == rhs:
            return self._satisfied(left, right)
        if lhs.is_Symbol and lhs not in rhs.free_symbols and not rhs.is_number \
                and sympy.fraction(rhs)[1] == 1:
            # The common `D_model == H * d`: eliminate the lone dim directly
            # (no subtraction: building a SymPy Add costs a slow lazy import).
            self._eliminate(lhs, rhs, len(self.constraints) - 1)
            return ConstraintOutcome("ok")
        # Clear denominators: `d == D_model / H` is the equation `H*d - D_model = 0`.
        difference = sympy.expand(sympy.fraction(sympy.together(lhs - rhs))[0])
        if difference == 0:
            return self._satisfied(left, right)
        if difference.is_number:
            return ConstraintOutcome("violated", self._values_text(left, right))
        unknown = self._no_positive_solution(difference)
        if unknown is not None:
            return ConstraintOutcome("unsatisfiable", self._values_text(left, right), unknown)
        self._use_equation(difference, len(self.constraints) - 1, left)
        return ConstraintOutcome("ok")

    def _no_positive_solution(self, difference: Dim) -> str | None:
        """The dim, when the equation is linear in one dim and no positive integer solves it."""
        if len(difference.free_symbols) != 1:
            return None
        (sym,) = difference.free_symbols
        if not difference.is_polynomial(sym):
            return None  # `N // 2 == 3`: not an equation in N itself
        poly = sympy.Poly(difference, sym)
        if poly.degree() != 1:
            return None
        coefficient, rest = poly.all_coeffs()
        value = -rest / coefficient
        return None if value.is_integer and value > 0 else str(sym.name)

    def _satisfied(self, left: Dim, right: Dim) -> ConstraintOutcome:
        """A constraint that already holds: trivial, unless it holds only at the `--dim` values."""
        return ConstraintOutcome("ok" if self._involves_bindings(left, right) else "trivial")

    def _involves_bindings(self, *dims: Dim) -> bool:
        """Does any dim bound on the command line occur, directly or through a definition?"""
        if not self.bindings:
            return False
        pending = set().union(*(d.free_symbols for d in dims))
        seen: set[Dim] = set()
        while pending:
            sym = pending.pop()
            seen.add(sym)
            if sym.name in self.bindings:
                return True
            definition = self._derived.get(sym)
            if definition is not None:
                pending |= definition.free_symbols - seen
        return False

    def check_derived_bindings(self) -> list[tuple[str, int, Dim]]:
        """Derived dims bound on the command line whose binding contradicts the definition."""
        conflicts = []
        for sym, value in self._derived_bindings:
            definition = self.canonical(self._derived[sym])
            difference = sympy.expand(definition - value)
            if difference == 0:
                continue
            if difference.is_number:
                conflicts.append((sym.name, value, definition))
            else:
                self._use_equation(difference, None, None)
        self._derived_bindings.clear()
        return conflicts

    def _use_equation(self, difference: Dim, index: int | None, preferred: Dim | None) -> None:
        target = self._pick_elimination(difference, preferred)
        if target is None:
            self._relations.append(difference)
            self._invalidate()
        else:
            self._eliminate(*target, index)

    def _eliminate(self, sym: Dim, replacement: Dim, index: int | None) -> None:
        """Record ``sym := replacement`` (a value, or an expression in other dims)."""
        if replacement.is_number:
            self._values[sym] = int(replacement)
        else:
            self._eliminated = {
                s: _substitute(r, sym, replacement) for s, r in self._eliminated.items()
            }
            self._eliminated[sym] = replacement
        if index is not None:
            self._eliminated_by[sym] = index
            self.constraints[index].eliminates = sym.name
        self._invalidate()

    def _invalidate(self) -> None:
        self._canon_cache.clear()
        self._answers.clear()
        self._groebner = None

    def _memo(self, question: str, a: Dim, b: Dim | None, answer: Callable[[], Any]) -> Any:
        key = (question, a, b)
        cached = self._answers.get(key)
        if cached is None:
            cached = self._answers[key] = answer()
        return cached

    def _pick_elimination(self, difference: Dim, preferred: Dim | None) -> tuple[Dim, Dim] | None:
        """A symbol with coefficient +-1 that the equation defines, if any."""
        candidates = sorted(difference.free_symbols, key=lambda s: (s != preferred, s.name))
        for sym in candidates:
            if not difference.is_polynomial(sym):
                continue  # inside a floor division: the equation does not define it
            poly = sympy.Poly(difference, sym)
            if poly.degree() != 1:
                continue
            coefficient, rest = poly.all_coeffs()
            if coefficient.free_symbols:
                continue
            if coefficient in (1, -1):
                return sym, sympy.expand(-rest / coefficient)
            if not rest.free_symbols:
                value = -rest / coefficient
                if value.is_integer and value > 0:
                    return sym, value
        return None

    def _add_inequality(self, left: Dim, op: str, right: Dim) -> ConstraintOutcome:
        lhs, rhs = self.canonical(left), self.canonical(right)
        relation = {"<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge, "!=": sympy.Ne}[op]
        if lhs.is_number and rhs.is_number:
            holds = bool(relation(lhs, rhs))
            return ConstraintOutcome("ok" if holds else "violated", self._values_text(left, right))
        # A lower bound on one dim (`N >= 2`) helps prove positivity (`N - 1`).
        if lhs.is_Symbol and rhs.is_Integer and op in (">", ">="):
            self._lower[lhs] = max(self._lower.get(lhs, 1), int(rhs) + (op == ">"))
        elif rhs.is_Symbol and lhs.is_Integer and op in ("<", "<="):
            self._lower[rhs] = max(self._lower.get(rhs, 1), int(lhs) + (op == "<"))
        elif op != "!=":
            # `W <= N` is the fact `N - W >= 0`, which proves `N - W + 1` positive.
            larger, smaller = (lhs, rhs) if op in (">", ">=") else (rhs, lhs)
            self._facts.append(sympy.expand(larger - smaller - (1 if op in (">", "<") else 0)))
        else:
            self._unequal.append(sympy.expand(lhs - rhs))
        self._invalidate()
        return ConstraintOutcome("ok")

    def _values_text(self, left: Dim, right: Dim) -> tuple[str, str, str]:
        names = sorted(free_names(left) | free_names(right))
        bound = ", ".join(
            f"{n}={self.value_of(n)}" for n in names if self.value_of(n) is not None
        )
        return (to_text(self.canonical(left)), to_text(self.canonical(right)),
                bound or codes.detail("no_bindings"))

    # questions

    def canonical(self, dim: Dim) -> Dim:
        """The expression with derived dims, bindings and eliminations substituted."""
        cached = self._canon_cache.get(dim)
        if cached is not None:
            return cached
        result = dim
        for _ in range(len(self._derived) + 1):
            if not result.free_symbols & self._derived.keys():
                break
            result = result.xreplace(self._derived)
        result = result.xreplace(self._eliminated)
        result = result.xreplace({s: sympy.Integer(v) for s, v in self._values.items()})
        result = sympy.expand(result)
        if result.has(sympy.floor):
            result = sympy.simplify(result)
        self._canon_cache[dim] = result
        return result

    def simplest(self, dim: Dim) -> Dim:
        """``dim`` rewritten by definitions and constraints when that makes it shorter
        (`(d + 1)//2` and `d - h` are `h` under `dim d = 2 * h`); else as it is."""
        if dim.is_Atom:
            return dim
        rewritten = dim
        for _ in range(len(self._derived) + 1):
            if not rewritten.free_symbols & self._derived.keys():
                break
            rewritten = rewritten.xreplace(self._derived)
        rewritten = sympy.expand(rewritten.xreplace(self._eliminated))
        return rewritten if sympy.count_ops(rewritten) < sympy.count_ops(dim) else dim

    def equal(self, left: Dim, right: Dim) -> Verdict:
        if left == right:
            return Verdict.PROVED
        return self._memo("equal", left, right, lambda: self._equal(left, right))

    def _equal(self, left: Dim, right: Dim) -> Verdict:
        if self.canonical(left) == self.canonical(right):
            return Verdict.PROVED
        difference = sympy.expand(self.canonical(left) - self.canonical(right))
        if difference == 0:
            return Verdict.PROVED
        if difference.is_number:
            return Verdict.DIFFERENT
        if self._distinct_dims(left, right):
            return Verdict.DIFFERENT
        remainder = self._reduced(difference) if self._relations else None
        if remainder == 0:
            return Verdict.PROVED
        if remainder is not None and remainder.is_number:
            return Verdict.DIFFERENT  # `F*G` vs 24 under `F*G == 12`
        together = sympy.cancel(sympy.together(difference))
        if together == 0:
            return Verdict.PROVED
        if self._definite(difference) or self._definite(-difference):
            return Verdict.DIFFERENT  # `H*d` vs `2*H*d`: never equal for positive dims
        return Verdict.UNPROVED

    def _definite(self, dim: Dim) -> bool:
        """Positive (not necessarily an integer) for every admissible size."""
        shifted = self._shifted(dim)
        if shifted is None:
            return False
        coefficients, constant = shifted
        return all(c >= 0 for c in coefficients) and constant > 0

    def _shifted(self, dim: Dim) -> tuple[list[Dim], Dim] | None:
        """The coefficients and constant of a polynomial with every dim moved to its
        lower bound (``x = lower(x) + t``, ``t >= 0``); None if it is not one."""
        symbols = sorted(dim.free_symbols, key=lambda s: s.name)
        if not symbols or not dim.is_polynomial(*symbols):
            return None
        return _coefficients(
            sympy.expand(dim.xreplace({s: s + self._lower.get(s, 1) for s in symbols})))

    def _distinct_dims(self, left: Dim, right: Dim) -> bool:
        """Two different free dims are not equal (language.md, section 1)."""
        a, b = self.canonical(left), self.canonical(right)
        return a.is_Symbol and b.is_Symbol and a != b and not self._relations

    def _reduces_to_zero(self, difference: Dim) -> bool:
        return self._reduced(difference) == 0

    def _reduced(self, difference: Dim) -> Dim | None:
        """The remainder of ``difference`` modulo the relations (None: cannot tell)."""
        gens = sorted(set().union(*(r.free_symbols for r in self._relations)) | difference.free_symbols,
                      key=lambda s: s.name)
        try:
            # The basis is over these generators: one built for another question may
            # lack a dim of this one (reducing would fail), so it is rebuilt then.
            if self._groebner is None or self._groebner.gens != tuple(gens):
                self._groebner = sympy.groebner(self._relations, *gens, order="lex")
            _, remainder = self._groebner.reduce(difference)
        except (sympy.polys.polyerrors.BasePolynomialError, ValueError):
            return None
        return remainder

    def positive(self, dim: Dim) -> Verdict:
        """Is the dim expression a positive integer under every admissible binding?"""
        if dim.is_Symbol and dim not in self._values:
            return Verdict.PROVED  # a declared dim is positive by definition
        return self._memo("positive", dim, None, lambda: self._positive(dim))

    def _positive(self, dim: Dim) -> Verdict:
        if _built_of_positives(dim):  # no expansion: `(N + 1)**64 * (d + 1)` is instant
            return Verdict.PROVED
        direct = self._bind_only(dim)
        if direct.is_number:
            return Verdict.PROVED if direct.is_integer and direct > 0 else Verdict.DIFFERENT
        if self._positive_polynomial(direct) or self._positive_floor(direct) \
                or self._positive_relaxed(direct):
            return Verdict.PROVED
        reduced = self.canonical(dim)
        if reduced.is_number:
            return Verdict.PROVED if reduced.is_integer and reduced > 0 else Verdict.DIFFERENT
        if self._positive_polynomial(reduced) or self._positive_by_fact(reduced) \
                or self._positive_relaxed(reduced):
            return Verdict.PROVED
        return Verdict.UNPROVED

    def _positive_relaxed(self, dim: Dim) -> bool:
        """Floor divisions by a number, as in slice lengths (`d - d//2 + 1`): each
        ``c * (p // q)`` is replaced by the bound of ``p // q`` that makes the sum
        smallest, ``p/q`` or ``(p - q + 1)/q``. When that polynomial is positive for
        every admissible size, so is ``dim``, an integer: it is at least 1."""
        if not dim.has(sympy.floor):
            return False
        relaxed: list[Dim] = []
        for term in sympy.Add.make_args(sympy.expand(dim)):
            coefficient, rest = term.as_coeff_Mul()
            if not coefficient.is_Integer:
                return False
            if isinstance(rest, sympy.floor):
                numerator, denominator = sympy.fraction(sympy.together(rest.args[0]))
                if not (denominator.is_Integer and denominator > 0) \
                        or not self._integer_valued(numerator):
                    return False
                low = (numerator - denominator + 1) / denominator
                relaxed.append(coefficient * (low if coefficient > 0 else numerator / denominator))
            elif rest.has(sympy.floor) or not self._integer_valued(rest):
                return False
            else:
                relaxed.append(term)
        bound = sympy.expand(sympy.Add(*relaxed))
        return bool(bound > 0) if bound.is_number else self._definite(bound)

    def _positive_by_fact(self, dim: Dim) -> bool:
        """``dim = fact + p`` with ``fact >= 0`` (an inequality) and ``p`` provably
        positive: then ``dim`` is positive too."""
        return any(
            self._positive_polynomial(sympy.expand(dim - self.canonical(fact)))
            for fact in self._facts
        )

    def _positive_floor(self, dim: Dim) -> bool:
        """`p // q` is at least 1 exactly when `p >= q`, i.e. when `p - q + 1` is positive."""
        if not isinstance(dim, sympy.floor):
            return False
        numerator, denominator = sympy.fraction(sympy.together(dim.args[0]))
        return bool(self.positive(denominator)) and bool(
            self.positive(sympy.expand(numerator - denominator + 1)))

    def expanded_terms(self, dim: Dim) -> int:
        """An upper bound of the number of terms of ``dim`` expanded, capped past MAX_TERMS.

        Cheap on purpose (no expansion, no canonical form): it guards the expansions.
        """
        counts: dict[Dim, int] = {}

        def terms(expr: Dim) -> int:
            if expr in counts:
                return counts[expr]
            if expr.is_Symbol:
                definition = self._eliminated.get(expr, self._derived.get(expr))
                count = 1 if definition is None or expr in self._values else terms(definition)
            elif expr.is_Add:
                count = sum(terms(a) for a in expr.args)
            elif expr.is_Mul:
                count = 1
                for factor in expr.args:
                    count = min(count * terms(factor), MAX_TERMS + 1)
            elif expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:
                # (t terms) ** n has at most C(n + t - 1, t - 1) monomials: (N + 1)**64 has 65.
                base = terms(expr.base)
                count = 1 if base == 1 else math.comb(min(int(expr.exp), 64) + base - 1, base - 1)
            else:
                count = 1
            counts[expr] = min(count, MAX_TERMS + 1)
            return counts[expr]

        return terms(dim)

    def _bind_only(self, dim: Dim) -> Dim:
        return sympy.expand(dim.xreplace({s: sympy.Integer(v) for s, v in self._values.items()}))

    def _positive_polynomial(self, dim: Dim) -> bool:
        """Every dim is >= its lower bound (1 unless constrained): shift and look at signs."""
        shifted = self._shifted(dim)
        if shifted is None:
            return bool(dim.is_positive) and bool(dim.is_integer)
        coefficients, constant = shifted
        if not all(c.is_integer and c >= 0 for c in coefficients):
            return False
        return constant > 0 and self._integer_valued(dim)

    def _integer_valued(self, dim: Dim) -> bool:
        symbols = sorted(dim.free_symbols, key=lambda s: s.name)
        if not symbols:
            return bool(dim.is_integer)
        return all(c.is_integer for c in _coefficients(sympy.expand(dim))[0])

    def divides(self, numerator: Dim, denominator: Dim) -> Verdict:
        """Does ``denominator`` divide ``numerator`` for every admissible binding?"""
        return self._memo("divides", numerator, denominator,
                          lambda: self._divides(numerator, denominator))

    def divisibility_claim(self, numerator: Dim, denominator: Dim, decision: Decision) -> str:
        """The words of an SC202 message, with the values when the dims are bound, or
        the counterexample when the division was refuted."""
        top, bottom = self.evaluate(numerator), self.evaluate(denominator)
        values = (top, bottom) if top is not None and bottom is not None else None
        return codes.divisibility(decision.verdict is Verdict.DIFFERENT, to_text(numerator),
                                  to_text(denominator), values, decision.counterexample)

    def quotient(self, numerator: Dim, denominator: Dim) -> Dim:
        """``numerator / denominator`` simplified (divisibility proved by the caller)."""
        return self._memo("quotient", numerator, denominator,
                          lambda: self._quotient(numerator, denominator))

    def _quotient(self, numerator: Dim, denominator: Dim) -> Dim:
        quotient = exact_quotient(numerator, denominator)
        below = sympy.fraction(quotient)[1]
        if below == 1:
            return quotient
        named = self._named_quotient(numerator, denominator)
        if named is not None:
            return named
        if below.is_Integer or below.is_Symbol:
            return quotient  # `D_model/H`, `D_model/8`: the spec's own notation
        # Written in the spec's dims the quotient is a fraction (`A*N/(N*gamma)`
        # with derived dims inside); in rewritten form it is the size it proves.
        return exact_quotient(self.canonical(numerator), self.canonical(denominator))

    def _named_quotient(self, numerator: Dim, denominator: Dim) -> Dim | None:
        """The quotient by the name the spec gives it: `d` for `D/H` when `dim D = H * d` or
        `constraint D == H * d` says so, or when `dim d = D / H` declares it. First without
        the bindings (the spec's own relations), then with them (a constraint applied at
        `--dim` values); never a bare number, which would hide the dims."""
        for top, bottom in ((self._unvalued(numerator), self._unvalued(denominator)),
                            (self.canonical(numerator), self.canonical(denominator))):
            rewritten = exact_quotient(top, bottom)
            for name, info in self.dims.items():
                if info.kind == "derived" and self._unvalued(self._symbols[name]) == rewritten:
                    return self._symbols[name]
            if sympy.fraction(rewritten)[1] == 1 and not rewritten.is_number:
                return rewritten
        return None

    def _unvalued(self, dim: Dim) -> Dim:
        """``dim`` with derived dims and eliminations substituted, but no value."""
        result = dim
        for _ in range(len(self._derived) + 1):
            if not result.free_symbols & self._derived.keys():
                break
            result = result.xreplace(self._derived)
        return sympy.expand(result.xreplace(self._eliminated))

    def _divides(self, numerator: Dim, denominator: Dim) -> Verdict:
        if _monomial_quotient(self.canonical(numerator), self.canonical(denominator)) is not None:
            return Verdict.PROVED
        quotient = sympy.cancel(self.canonical(numerator) / self.canonical(denominator))
        if quotient.is_number:
            return Verdict.PROVED if quotient.is_integer else Verdict.DIFFERENT
        symbols = sorted(quotient.free_symbols, key=lambda s: s.name)
        if quotient.is_polynomial(*symbols) and self._integer_valued(quotient):
            return Verdict.PROVED
        if quotient.is_integer:  # e.g. a product of dims and floor divisions
            return Verdict.PROVED
        return Verdict.UNPROVED

    def evaluate(self, dim: Dim) -> int | None:
        """The concrete value at the bindings, when every dim in it is bound."""
        value = self.canonical(dim)
        return int(value) if value.is_Integer else None

    def unbound(self) -> list[str]:
        """Free dims with no value at the bindings, that no constraint defines (run names them)."""
        return [
            info.name for info in self.dims.values()
            if info.kind == "free" and self.value_of(info.name) is None
            and self._symbols[info.name] not in self._eliminated
        ]

    def determined(self) -> list[str]:
        """Free dims with no value yet that a constraint defines from others (``D_model``
        under ``constraint D_model == H * d``): binding the others gives their value."""
        return [
            info.name for info in self.dims.values()
            if info.kind == "free" and self.value_of(info.name) is None
            and self._symbols[info.name] in self._eliminated
        ]

    def fresh_name(self, preferred: str, *used_in: Dim, taken: Iterable[str] = ()) -> str:
        """The quotient's name in a suggested constraint: ``preferred`` unless the
        relation itself uses it (which would give `d == N * d`) or ``taken`` has it."""
        taken = set(taken) | self.taken | self._symbols.keys()
        taken = taken.union(*(free_names(dim) for dim in used_in))
        if preferred not in taken:
            return preferred
        index = 2
        while f"{preferred}{index}" in taken:
            index += 1
        return f"{preferred}{index}"

    def suggestion(self, left: Dim, right: Dim) -> tuple[str, str]:
        """The constraint that would make ``left == right``, as the user would write it."""
        lone = [d for d in (left, right) if d.is_Symbol]
        if lone and lone[0] is right:
            left, right = right, left
        return to_text(left), spaced(to_text(right))

    # --- three-way verdicts: proved, refuted with a counterexample, or undetermined ----

    def holds(self, claim: Claim) -> Verdict:
        """The verdict on a claim (the checker's own question for its kind)."""
        if claim.kind == "equal":
            return self.equal(claim.left, claim.right)
        if claim.kind == "divides":
            return self.divides(claim.left, claim.right)
        if claim.kind == "positive":
            return self.positive(claim.left)
        return self.at_most(claim.left, claim.right)

    def at_most(self, left: Dim, right: Dim) -> Verdict:
        """Is ``left <= right`` for every admissible size? (``right - left + 1`` is a size.)"""
        return self.positive(sympy.expand(right - left + 1))

    def decide(self, claim: Claim, taken: Iterable[str] = ()) -> Decision:
        """The three-way verdict on a claim: the entry point for every "cannot be proved".

        Proved and provably different stay as they are. Otherwise the claim is
        *refuted* when a bounded search finds an admissible size where it fails
        (the smallest sum of the free dims; ``Decision.counterexample``), or
        *undetermined*. Either way ``Decision.needed`` is the weakest constraint
        that makes it hold, when the checker can then prove it: new dims get
        names not in ``taken`` (the spec's other names) and are declared by it.
        """
        verdict = self.holds(claim)
        if verdict is not Verdict.UNPROVED:
            return Decision(verdict)
        names = frozenset(taken)
        key = ("decide", claim, names)
        cached = self._answers.get(key)
        if cached is None:
            cached = self._answers[key] = Decision(
                verdict, self.counterexample(claim), self.weakest_constraint(claim, names))
        return cached

    def counterexample(self, claim: Claim) -> Counterexample | None:
        """The admissible assignment of the claim's free dims with the smallest sum
        (then the first in name order) where the claim fails, if one is found among
        the first REFUTATION_POINTS assignments. Deterministic: no clock, no randomness."""
        sides = [self.canonical(d) for d in claim.dims]
        roots = set().union(*(s.free_symbols for s in sides))
        if not roots:
            return None
        try:
            fails = _failure_test(claim.kind, [_compiled(s) for s in sides])
            conditions, variables = self._admissible(roots)
        except _Unsupported:
            return None
        names = sorted(variables, key=lambda s: s.name)
        lower = [self._lower.get(s, 1) for s in names]
        for point in _points(lower, REFUTATION_POINTS):
            values = dict(zip(names, point))
            try:
                if fails(values) and all(condition(values) for condition in conditions):
                    return self._described(claim, sides, values)
            except ZeroDivisionError:
                continue
        return None

    def _admissible(self, roots: set[Dim]) -> tuple[list[Callable[[Env], bool]], set[Dim]]:
        """The conditions an assignment of ``roots`` must meet to be admissible, and the
        dims they involve: relations hold, inequalities hold, and every dim a constraint
        or a definition expresses through them is a positive integer (at least its bound)."""
        equations = [(r, _is_zero) for r in self._relations]
        equations += [(self.canonical(f), _is_non_negative) for f in self._facts]
        equations += [(self.canonical(u), _is_non_zero) for u in self._unequal]
        for sym, replacement in (*self._eliminated.items(), *self._derived.items()):
            size = self.canonical(replacement) - self._lower.get(sym, 1) + 1
            if sym not in self._values and not _built_of_positives(size):
                equations.append((size, _is_size))
        variables = set(roots)
        chosen: list[Callable[[Env], bool]] = []
        pending = list(equations)
        grew = True
        while grew:  # a relation about a dim of the claim brings in its other dims
            grew = False
            for item in list(pending):
                expression, test = item
                if expression.free_symbols & variables:
                    variables |= expression.free_symbols
                    compiled = _compiled(expression)
                    chosen.append(lambda values, c=compiled, t=test: t(c(values)))
                    pending.remove(item)
                    grew = True
        return chosen, variables

    def _described(self, claim: Claim, sides: list[Dim], values: dict[Dim, int]) -> Counterexample:
        """The counterexample as the user reads it: the dims the claim names (evaluated
        through definitions and constraints), the free dims it reduces to, and any other
        dim a constraint ties to them that is not at its smallest size."""
        shown: dict[str, int] = {}
        for sym in set().union(*(d.free_symbols for d in claim.dims)):
            expression = self.canonical(sym)
            if not expression.free_symbols <= values.keys():
                continue  # a dim the claim does not depend on once rewritten (`d // E`, E == H*d)
            value = _compiled(expression)(values)
            if _is_integer(value):
                shown[sym.name] = int(value)
        for sym, value in values.items():
            # A dim only a constraint ties to the claim is shown when it matters (not 1).
            if any(sym in s.free_symbols for s in sides) or value != self._lower.get(sym, 1):
                shown.setdefault(sym.name, value)
        evaluated = tuple(_number_text(_compiled(s)(values)) for s in sides)
        return Counterexample(tuple(sorted(shown.items())), evaluated)

    def weakest_constraint(self, claim: Claim, taken: frozenset[str] = frozenset()) -> Needed | None:
        """The constraint that states exactly the claim, as the user would paste it
        (any new dim declared), if adding it lets the checker prove the claim."""
        needed = self._needed(claim, taken)
        if needed is None:
            return None
        trial = self.fork()
        for name in needed.dims:
            trial.declare_free(name, Span(1, 1, 1, 1))
        left, op, right = needed.built
        trial.add_constraint(left, op, right, "", Span(1, 1, 1, 1))
        return needed if trial.holds(claim) is Verdict.PROVED else None

    def _needed(self, claim: Claim, taken: frozenset[str]) -> Needed | None:
        left, right = claim.left, claim.right
        if claim.kind == "equal":
            if is_name(left) and is_name(right):
                return None  # `N == d` merges two dims the spec keeps apart on purpose
            if free_names(left) & free_names(right):
                return None  # `N == N**2` would only say that some dim is 1
            lhs, rhs = self.suggestion(left, right)
            return Needed((), lhs, "==", rhs, (left, "==", right))
        if claim.kind == "divides":
            name = self.fresh_name("k", left, right, taken=taken)
            quotient = symbol(name)
            return Needed((name,), to_text(left), "==", f"{spaced(to_text(right))} * {name}",
                          (left, "==", right * quotient))
        if claim.kind == "positive":
            if isinstance(left, sympy.floor):  # p // q >= 1 exactly when p >= q
                top, bottom = sympy.fraction(sympy.together(left.args[0]))
                return Needed((), spaced(to_text(top)), ">=", spaced(to_text(bottom)),
                              (top, ">=", bottom))
            lone = _lone_dim_offset(left)
            if lone is not None:
                dim, offset = lone
                return Needed((), to_text(dim), ">=", str(1 - offset),
                              (dim, ">=", sympy.Integer(1 - offset)))
            return Needed((), spaced(to_text(left)), ">=", "1", (left, ">=", ONE))
        # `left <= right` with the terms on the side where they are positive: `0 <= h - N`
        # reads `N <= h`, and `2 <= N` reads `N >= 2`.
        terms = sympy.Add.make_args(sympy.expand(right - left))
        larger = sympy.Add(*[t for t in terms if not t.could_extract_minus_sign()])
        smaller = sympy.Add(*[-t for t in terms if t.could_extract_minus_sign()])
        if larger == 0:
            return Needed((), spaced(to_text(left)), "<=", spaced(to_text(right)), (left, "<=", right))
        if smaller.is_Integer:
            return Needed((), spaced(to_text(larger)), ">=", to_text(smaller), (larger, ">=", smaller))
        return Needed((), spaced(to_text(smaller)), "<=", spaced(to_text(larger)), (smaller, "<=", larger))

    def fork(self) -> DimSystem:
        """An independent copy (a trial constraint must not change this system)."""
        copy = dataclasses.replace(self)
        for name in ("bindings", "dims", "_symbols", "_values", "_derived", "_eliminated",
                     "_eliminated_by", "_lower"):
            setattr(copy, name, dict(getattr(self, name)))
        for name in ("constraints", "_relations", "_facts", "_unequal", "_derived_bindings"):
            setattr(copy, name, list(getattr(self, name)))
        copy._canon_cache, copy._answers, copy._groebner = {}, {}, None
        return copy


def _coefficients(expanded: Dim) -> tuple[list[Dim], Dim]:
    """The numeric coefficient of each term of an expanded polynomial, and its constant.

    Read off the terms directly: `sympy.Poly` is dense in its generators and takes
    seconds on a sum of 200 dims.
    """
    coefficients: list[Dim] = []
    constant: Dim = sympy.Integer(0)
    for term in sympy.Add.make_args(expanded):
        coefficient, rest = term.as_coeff_Mul()
        coefficients.append(coefficient)
        if rest == 1:
            constant += coefficient
    return coefficients, constant


def _substitute(expr: Dim, sym: Dim, replacement: Dim) -> Dim:
    """``expr`` with ``sym := replacement``, expanded only when that can distribute."""
    if sym not in expr.free_symbols:
        return expr
    result = expr.xreplace({sym: replacement})
    return sympy.expand(result) if replacement.is_Add else result


def _built_of_positives(dim: Dim) -> bool:
    """Dims (positive by declaration, bound or not), positive integers, `+`, `*` and
    positive integer powers only: a positive integer whatever the sizes."""
    if dim.is_Integer:
        return bool(dim > 0)
    if dim.is_Symbol:
        return True
    if dim.is_Add or dim.is_Mul:
        return all(_built_of_positives(arg) for arg in dim.args)
    if dim.is_Pow:
        return bool(dim.exp.is_Integer and dim.exp > 0) and _built_of_positives(dim.base)
    return False


def spaced(text: str) -> str:
    return text.replace("*", " * ") if "**" not in text else text


@dataclass(frozen=True)
class ConstraintOutcome:
    status: str  # "ok", "trivial", "violated", "unsatisfiable"
    values: tuple[str, str, str] | None = None
    unknown: str | None = None  # "unsatisfiable": the dim no positive integer can be


# --- claims, counterexamples and the weakest constraint -------------------------------------

# Assignments tried per claim, smallest sums first: enough for every counterexample
# with a few small dims (the common case), and a fixed amount of work on any input.
REFUTATION_POINTS = 2000

Env: TypeAlias = "dict[Dim, int]"


@dataclass(frozen=True)
class Claim:
    """A fact about dims that a statement needs.

    ``kind``: ``equal`` (left == right), ``divides`` (right divides left),
    ``positive`` (left is a positive integer), ``at_most`` (left <= right).
    """

    kind: str
    left: Dim
    right: Dim = ONE

    @classmethod
    def equal(cls, left: Dim, right: Dim) -> Claim:
        return cls("equal", left, right)

    @classmethod
    def divides(cls, numerator: Dim, denominator: Dim) -> Claim:
        return cls("divides", numerator, denominator)

    @classmethod
    def positive(cls, dim: Dim) -> Claim:
        return cls("positive", dim)

    @classmethod
    def at_most(cls, left: Dim, right: Dim) -> Claim:
        return cls("at_most", left, right)

    @property
    def dims(self) -> tuple[Dim, ...]:
        return (self.left,) if self.kind == "positive" else (self.left, self.right)


@dataclass(frozen=True)
class Counterexample:
    """Sizes at which a claim fails: ``values`` (dim name, size), sorted by name, and
    the claim's sides evaluated there (``sides``, printed: `1`, `3/2`)."""

    values: tuple[tuple[str, int], ...]
    sides: tuple[str, ...]

    def text(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in self.values)


@dataclass(frozen=True)
class Needed:
    """The weakest constraint that makes a claim hold: ``constraint {lhs} {op} {rhs}``,
    after declaring ``dims`` (new dims, e.g. the quotient `k` of a division); ``built``
    holds the same constraint as dim expressions."""

    dims: tuple[str, ...]
    lhs: str
    op: str
    rhs: str
    built: tuple[Dim, str, Dim] = field(compare=False, repr=False)

    @property
    def constraint(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"


@dataclass(frozen=True)
class Decision:
    """A three-way verdict: proved (or provably different), refuted (a
    counterexample), or undetermined; and the weakest constraint that would make
    it hold (``needed``), for either of the last two."""

    verdict: Verdict
    counterexample: Counterexample | None = None
    needed: Needed | None = None

    def __bool__(self) -> bool:
        return self.verdict is Verdict.PROVED

    @property
    def refuted(self) -> bool:
        return self.counterexample is not None


class _Unsupported(Exception):
    """An expression the evaluator does not handle (refutation gives up on it)."""


def _compiled(dim: Dim) -> Callable[[Env], Fraction | int]:
    """An evaluator of a dim expression at integer sizes, built from its tree (never
    by generating code): exact, with Python ints and Fractions."""
    if dim.is_Integer:
        value = int(dim)
        return lambda env: value
    if dim.is_Rational:
        fraction = Fraction(int(dim.p), int(dim.q))
        return lambda env: fraction
    if dim.is_Symbol:
        return lambda env: env[dim]
    if dim.is_Add or dim.is_Mul:
        parts = [_compiled(arg) for arg in dim.args]
        if dim.is_Add:
            return lambda env: sum(part(env) for part in parts)
        return lambda env: math.prod(part(env) for part in parts)
    if dim.is_Pow and dim.exp.is_Integer and abs(int(dim.exp)) <= MAX_EXPONENT:
        base, exponent = _compiled(dim.base), int(dim.exp)
        if exponent >= 0:
            return lambda env: base(env) ** exponent
        return lambda env: Fraction(1) / Fraction(base(env)) ** -exponent
    if isinstance(dim, sympy.floor):
        inner = _compiled(dim.args[0])
        return lambda env: math.floor(inner(env))
    raise _Unsupported(dim)


def _is_integer(value: Fraction | int) -> bool:
    return isinstance(value, int) or value.denominator == 1


def _is_zero(value: Fraction | int) -> bool:
    return value == 0


def _is_non_zero(value: Fraction | int) -> bool:
    return value != 0


def _is_non_negative(value: Fraction | int) -> bool:
    return value >= 0


def _is_size(value: Fraction | int) -> bool:
    return _is_integer(value) and value >= 1


def _failure_test(kind: str, sides: list[Callable[[Env], Fraction | int]]) -> Callable[[Env], bool]:
    """Does the claim fail at these sizes?"""
    if kind == "equal":
        left, right = sides
        return lambda env: left(env) != right(env)
    if kind == "divides":
        top, bottom = sides
        return lambda env: not _is_integer(Fraction(top(env)) / Fraction(bottom(env)))
    if kind == "positive":
        (value,) = sides
        return lambda env: not _is_size(value(env))
    left, right = sides
    return lambda env: left(env) > right(env)


def _points(lower: list[int], budget: int) -> Iterator[tuple[int, ...]]:
    """Assignments of len(lower) dims, each at least its lower bound, by increasing
    sum (within one sum, the first dim largest first), at most ``budget`` of them."""
    if not lower:
        return
    count, extra = 0, 0
    while True:
        for parts in _compositions(extra, len(lower)):
            yield tuple(bound + part for bound, part in zip(lower, parts))
            count += 1
            if count >= budget:
                return
        extra += 1


def _compositions(total: int, count: int) -> Iterator[tuple[int, ...]]:
    if count == 1:
        yield (total,)
        return
    for first in range(total, -1, -1):
        for rest in _compositions(total - first, count - 1):
            yield (first, *rest)


def _number_text(value: Fraction | int) -> str:
    return str(int(value)) if _is_integer(value) else str(value)


def _lone_dim_offset(dim: Dim) -> tuple[Dim, int] | None:
    """``N - 1`` -> (N, -1): one dim with coefficient 1 plus an integer."""
    rest, terms = sympy.Integer(0), []
    for term in sympy.Add.make_args(sympy.expand(dim)):
        if term.is_Integer:
            rest += term
        else:
            terms.append(term)
    if len(terms) == 1 and terms[0].is_Symbol:
        return terms[0], int(rest)
    return None


# --- from the syntax tree -----------------------------------------------------------------

Resolve = Callable[[nodes.Name], "Dim | None"]


@dataclass
class DimBuilder:
    """Turns an expression node into a dim expression, reporting what is not allowed."""

    system: DimSystem
    resolve: Resolve
    diagnostics: list[Diagnostic]
    in_constraint: bool = False

    def constraint_side(self, node: nodes.Expr) -> Dim | None:
        """A side of a constraint: `/` there states a relation (`d == D_model / H`
        says that H divides D_model), so it needs no proof of its own."""
        self.in_constraint = True
        try:
            return self._build(node)
        finally:
            self.in_constraint = False

    def build(self, node: nodes.Expr, allow_minus_one: bool = False) -> Dim | None:
        if allow_minus_one and isinstance(node, nodes.Unary) and node.op == "-" \
                and isinstance(node.operand, nodes.Integer) and node.operand.value == 1:
            return sympy.Integer(-1)
        return self._build(node)

    def _build(self, node: nodes.Expr) -> Dim | None:
        if isinstance(node, nodes.Integer):
            return sympy.Integer(node.value)
        if isinstance(node, nodes.Name):
            return self.resolve(node)
        if isinstance(node, nodes.Paren):
            return self._build(node.inner)
        if isinstance(node, nodes.Unary) and node.op in "+-":
            operand = self._build(node.operand)
            return None if operand is None else (-operand if node.op == "-" else operand)
        if isinstance(node, nodes.BinOp):
            return self._binop(node)
        self.diagnostics.append(codes.NOT_A_DIM_EXPR.diag(node.span, what_found=_describe(node)))
        return None

    def _binop(self, node: nodes.BinOp) -> Dim | None:
        if node.op not in nodes.DIM_OPERATORS:  # `@`, comparisons, `&`, `|`
            self.diagnostics.append(codes.NOT_A_DIM_EXPR.diag(node.op_span,
                                                              what_found=f"`{node.op}`"))
            return None
        if node.op == "**":
            return self._power(node)
        left, right = self._build(node.left), self._build(node.right)
        if left is None or right is None:
            return None
        if node.op == "+":
            return self._sized(left + right, node.span)
        if node.op == "-":
            return left - right
        if node.op == "*":
            return self._sized(left * right, node.span)
        if right == 0:
            self.diagnostics.append(codes.NOT_DIVISIBLE.diag(
                node.span, claim=codes.divisibility(True, to_text(left), "0")))
            return None
        if node.op == "//":
            return sympy.floor(left / right)
        if self.in_constraint:
            return left / right  # the constraint asserts the division; it is not a size
        verdict = self.system.divides(left, right)
        if not verdict:
            decision = self.system.decide(Claim.divides(left, right))
            needed = decision.needed
            self.diagnostics.append(codes.NOT_DIVISIBLE.diag(
                node.span, claim=self.system.divisibility_claim(left, right, decision),
                counterexample=decision.counterexample.values if decision.refuted else (),
                help=[codes.needed_help(needed.dims, needed.constraint)] if needed else [],
            ))
            return None
        return sympy.cancel(left / right)

    def _power(self, node: nodes.BinOp) -> Dim | None:
        base = self._build(node.left)
        exponent_node = node.right
        if not isinstance(exponent_node, nodes.Integer):
            self.diagnostics.append(codes.POWER.diag(
                exponent_node.span, detail=codes.detail("power_exponent")))
            return None
        if exponent_node.value > MAX_EXPONENT:
            self.diagnostics.append(codes.LIMIT.diag(exponent_node.span, detail=codes.syntax_text(
                "exponent_too_large", value=exponent_node.value, limit=MAX_EXPONENT)))
            return None
        if base is None:
            return None
        return self._sized(base ** exponent_node.value, node.span)

    def _sized(self, dim: Dim, span: Span) -> Dim | None:
        """Refuse expressions whose numbers or degrees are absurdly large."""
        too_big = any(
            (p.is_Pow and p.exp.is_Integer and abs(int(p.exp)) > MAX_EXPONENT)
            or (p.is_Integer and abs(int(p)).bit_length() > MAX_BITS)
            for p in sympy.preorder_traversal(dim)
        ) or self.system.expanded_terms(dim) > MAX_TERMS
        if too_big:
            self.diagnostics.append(codes.LIMIT.diag(
                span, detail=codes.detail("expression_too_large")))
            return None
        return dim


def floor_quotient(numerator: Dim, denominator: Dim) -> Dim:
    """``numerator // denominator``, as the spec writes it (`(d + 1)//2`)."""
    return sympy.floor(numerator / denominator)


def _describe(node: nodes.Expr) -> str:
    if isinstance(node, nodes.Decimal):
        return codes.detail("found_number", text=node.text)
    if isinstance(node, nodes.Call):
        return codes.detail("found_call", name=node.func.name)
    if isinstance(node, nodes.Transpose):
        return "`.T`"
    if isinstance(node, nodes.String):
        return codes.detail("found_string")
    if isinstance(node, nodes.Inf):
        return "`inf`"
    if isinstance(node, nodes.ListExpr):
        return codes.detail("found_list")
    if isinstance(node, nodes.AxisName):
        return f"`{node.name}`"
    if isinstance(node, nodes.Boolean):
        return codes.detail("found_boolean")
    return codes.detail("found_expression")


# --- for the report: how a fact was proved, and cost expressions ------------------------------
#
# The report explains each check the way the notes teach it ("inner d = d, by the
# constraint on line 9"). These helpers retrace the checker's own reasoning in stages, so
# the explanation names the smallest kind of fact that was needed; the verdict itself is
# always the checker's (DimSystem.equal / divides), never recomputed differently.


@dataclass(frozen=True)
class Proof:
    """How a verdict on a fact about dims was reached.

    ``method``: ``identical`` (the same expression), ``algebra`` (equal after expanding),
    ``definition`` (after substituting derived and fixed dims), ``constraint`` (after the
    eliminations that constraints made), ``bindings`` (only at the bound sizes), ``relations``
    (by the checker's algebra over the constraints), or ``""`` when not proved.
    """

    verdict: Verdict
    method: str
    definitions: tuple[str, ...] = ()
    constraints: tuple[int, ...] = ()  # indices into DimSystem.constraints
    bound: tuple[str, ...] = ()


def explain_equal(system: DimSystem, left: Dim, right: Dim) -> Proof:
    verdict = system.equal(left, right)
    if not verdict:
        return Proof(verdict, "")
    if left == right:
        return Proof(verdict, "identical")
    return _explain(system, (left, right), lambda a, b: sympy.expand(a - b) == 0)


def explain_divides(system: DimSystem, numerator: Dim, denominator: Dim) -> Proof:
    verdict = system.divides(numerator, denominator)
    if not verdict:
        return Proof(verdict, "")

    def exact(top: Dim, bottom: Dim) -> bool:
        quotient = sympy.cancel(top / bottom)
        if quotient.is_number:
            return bool(quotient.is_integer)
        symbols = sorted(quotient.free_symbols, key=lambda s: s.name)
        return bool(quotient.is_polynomial(*symbols)) and system._integer_valued(quotient)

    return _explain(system, (numerator, denominator), exact, direct="identical")


def _explain(system: DimSystem, dims: tuple[Dim, Dim], holds: Callable[[Dim, Dim], bool],
             direct: str = "algebra") -> Proof:
    verdict = Verdict.PROVED
    if holds(*dims):
        return Proof(verdict, direct)
    # 1. definitions: derived dims, and dims fixed by `dim T = 128`
    fixed = {s: sympy.Integer(v) for s, v in system._values.items()
             if system.dims.get(s.name) is not None and system.dims[s.name].kind == "fixed"}
    defined: set[Dim] = set()
    current = list(dims)
    for _ in range(len(system._derived) + 1):
        found = set().union(*(d.free_symbols for d in current)) & (system._derived.keys() | fixed.keys())
        if not found:
            break
        defined |= found
        current = [d.xreplace(system._derived).xreplace(fixed) for d in current]
    definitions = tuple(sorted(s.name for s in defined))
    if holds(*current):
        return Proof(verdict, "definition", definitions)
    # 2. constraints: the eliminations they made (and values they fixed)
    present = set().union(*(d.free_symbols for d in current))
    by_constraint = {s for s in present if s in system._eliminated_by}
    replacements = {s: system._eliminated.get(s, sympy.Integer(system._values.get(s, 0)))
                    for s in by_constraint}
    current = [d.xreplace(replacements) for d in current]
    constraints = tuple(sorted({system._eliminated_by[s] for s in by_constraint}))
    if holds(*current):
        return Proof(verdict, "constraint", definitions, constraints)
    # 3. bindings
    remaining = set().union(*(d.free_symbols for d in current))
    other = {s: e for s, e in system._eliminated.items() if s in remaining}
    current = [d.xreplace(other) for d in current]
    remaining = set().union(*(d.free_symbols for d in current))
    bound = {s for s in remaining if s in system._values}
    current = [d.xreplace({s: sympy.Integer(system._values[s]) for s in bound}) for d in current]
    if holds(*current):
        return Proof(verdict, "bindings", definitions, constraints, tuple(sorted(s.name for s in bound)))
    return Proof(verdict, "relations", definitions, constraints)


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
    """An expanded dim expression, printed with ``·`` and superscript powers."""
    return _PRETTY.doprint(sympy.expand(dim)).replace("*", "·")


def growth(system: DimSystem, dim: Dim, names: Iterable[str] = ()) -> tuple[int, int]:
    """(degree in ``names``, total degree) of a dim expression with derived dims substituted
    (constraints and bindings not): how fast it grows. (0, 0) if not a polynomial."""
    expanded = dim
    for _ in range(len(system._derived) + 1):
        if not expanded.free_symbols & system._derived.keys():
            break
        expanded = expanded.xreplace(system._derived)
    expanded = sympy.expand(expanded)
    symbols = sorted(expanded.free_symbols, key=lambda s: s.name)
    if not symbols or not expanded.is_polynomial(*symbols):
        return (0, 0)
    poly = sympy.Poly(expanded, *symbols)
    wanted = {i for i, s in enumerate(symbols) if s.name in set(names)}
    return (max(sum(m[i] for i in wanted) for m in poly.monoms()), poly.total_degree())


def solve_for(system: DimSystem, dim: Dim, value: int) -> tuple[str, int] | None:
    """The dim that makes ``dim == value`` at the bindings, when exactly one dim is
    left unbound in ``dim`` and exactly one positive integer solves the equation
    (``run`` binds dims from arrays with it: ``[N, H * d]`` with H bound gives d)."""
    expression = system.canonical(dim)
    if len(expression.free_symbols) != 1:
        return None
    (unknown,) = expression.free_symbols
    try:
        roots = sympy.solve(sympy.Eq(expression, value), unknown)
    except Exception:  # SymPy's solver fails in many ways on what it cannot solve
        return None
    fits = [r for r in roots if r.is_Integer and r > 0]
    return (unknown.name, int(fits[0])) if len(fits) == 1 else None


# --- drawing bindings ----------------------------------------------------------------------

# Sizes of the first candidate: a different size for every dim, odd ones first, so that
# no table is square by accident and no size is a power of two.
DISTINCT_SIZES = (3, 5, 7, 2, 9, 4, 11, 6, 13, 8, 10, 12)
SQUARE_SIZE = 4  # the second candidate: every dim the same size


def draw_bindings(system: DimSystem, *, seed: int = 0, high: int = 8) -> Iterator[dict[str, int]]:
    """Candidate bindings for the free dims a spec leaves to choose, without end.

    The dims chosen are ``system.unbound()`` (free dims without a value that no
    constraint defines); the others follow from the constraints (``D_model`` from
    ``D_model == H * d``). First every dim a different size, odd sizes first (a
    cross-attention table is not square, ``N`` differs from ``d``); then every dim
    the same size (square tables, ``N == d``); then sizes drawn uniformly from
    ``1..high``, reproducibly from ``seed``. A candidate may still violate a
    constraint or a divisibility (``dim d = D_model / H``): the checker decides,
    by checking the spec at the candidate (``check_text(source, candidate)``).
    """
    names = system.unbound()
    extra = range(max(DISTINCT_SIZES) + 1, max(DISTINCT_SIZES) + 1 + len(names))
    yield dict(zip(names, (*DISTINCT_SIZES, *extra)))
    yield {name: SQUARE_SIZE for name in names}
    rng = random.Random(seed)
    while True:
        yield {name: rng.randint(1, high) for name in names}
