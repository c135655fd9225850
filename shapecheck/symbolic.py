"""Symbolic dims: the only module that imports SymPy.

Dims are SymPy symbols built from the parse tree (positive integers), never
from text, so names SymPy treats specially (``E``, ``I``, ``S``, ``pi``) are
ordinary dims. :class:`DimSystem` holds what the spec declares (free, derived
and fixed dims, bindings, constraints) and answers the questions the checker
asks: are two dim expressions provably equal, is one provably positive, does
a division provably leave no remainder.

**The budget.** All algebra runs under a deterministic budget, never a clock, so
a verdict is the same on every machine and inside an editor: every expansion is
measured *before* it is made (:func:`_estimate`: terms, degree, size of the
integers), the Gröbner reduction counts its steps, and SymPy's unbounded
machinery (``simplify``, ``solve``) is not used. A question that would pass the
budget raises :class:`TooComplex`; the checker reports it as SC003 on the
statement that asked, saying what to simplify.
"""

from __future__ import annotations

import heapq
import dataclasses
import math
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from enum import Enum
from fractions import Fraction
from typing import Any, NamedTuple, TypeAlias

import sympy
from sympy.core.evalf import PrecisionExhausted
from sympy.polys.domains import QQ
from sympy.polys.monomials import monomial_div, monomial_lcm
from sympy.polys.orderings import lex
from sympy.polys.rings import PolyElement, ring
from sympy.printing.str import StrPrinter

from . import codes, nodes
from .diagnostics import Diagnostic, Fix, Span

Dim: TypeAlias = sympy.Expr
"""A dim expression. Other modules treat it as opaque (and may use + - *)."""

# --- the budget ----------------------------------------------------------------------------

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


def _too_complex(key: str, limit: int) -> TooComplex:
    return TooComplex(codes.detail(key, limit=f"{limit:,}"))


class _Size(NamedTuple):
    """Upper bounds for an expression once expanded."""

    terms: int
    degree: int
    bits: int  # log2 of the sum of the absolute values of the coefficients


def _bits(value: int) -> int:
    return abs(value).bit_length()


def _estimate(expr: Dim, leaf: Callable[[Dim], _Size | None] | None = None) -> _Size:
    """Upper bounds of the size of ``sympy.expand(expr)``, computed without expanding.

    Raises TooComplex as soon as the result, or the work of an expansion it implies
    (the products a power or a product of sums multiplies out, a denominator, a
    floor's argument), passes the budget. ``leaf`` gives the size a symbol stands for
    (a derived dim: its definition's), by default one term of degree 1.
    """
    memo: dict[Dim, _Size] = {}

    def size(e: Dim) -> _Size:
        found = memo.get(e)
        if found is not None:
            return found
        if e.is_Integer:
            result = _Size(1, 0, _bits(int(e)))
        elif e.is_Rational:
            result = _Size(1, 0, _bits(int(e.p)) + _bits(int(e.q)))
        elif e.is_Symbol:
            result = (leaf(e) if leaf is not None else None) or _Size(1, 1, 0)
        elif e.is_Add:
            parts = [size(a) for a in e.args]
            result = _Size(sum(p.terms for p in parts), max(p.degree for p in parts),
                           max(p.bits for p in parts) + len(parts).bit_length())
        elif e.is_Mul:
            result = _product_size([size(a) for a in e.args], _univariate(e))
        elif e.is_Pow and e.exp.is_Integer:
            result = _power_size(size(e.base), int(e.exp), _univariate(e.base))
        else:  # floor(...), or anything else: one term; its arguments are expanded inside
            parts = [size(a) for a in e.args]
            result = _Size(1, max((p.degree for p in parts), default=1),
                           max((p.bits for p in parts), default=0))
        memo[e] = _within_budget(result)
        return memo[e]

    return size(expr)


def _within_budget(size: _Size) -> _Size:
    if size.terms > MAX_TERMS:
        raise _too_complex("too_complex_terms", MAX_TERMS)
    if size.degree > MAX_DEGREE:
        raise _too_complex("too_complex_degree", MAX_DEGREE)
    if size.bits > MAX_BITS:
        raise _too_complex("too_complex_bits", MAX_BITS)
    return size


def _work(products: int) -> None:
    """An expansion multiplies out ``products`` pairs of terms: refused past MAX_WORK."""
    if products > MAX_WORK:
        raise _too_complex("too_complex_work", MAX_WORK)


def _univariate(expr: Dim) -> bool:
    """One generator only (a floor is a generator of its own), so that at most
    degree + 1 terms survive the expansion."""
    generators = {a for a in sympy.preorder_traversal(expr)
                  if a.is_Symbol or (a.is_Function and not a.is_Number)}
    return len(generators) == 1


def _product_size(parts: list[_Size], univariate: bool) -> _Size:
    terms, degree, bits = 1, 0, 0
    for part in parts:
        terms, degree, bits = terms * part.terms, degree + part.degree, bits + part.bits
        _within_budget(_Size(1, degree, bits))
        _work(terms)
    return _Size(min(terms, degree + 1) if univariate else terms, degree, bits)


def _power_size(base: _Size, exponent: int, univariate: bool) -> _Size:
    """The size of ``base ** exponent`` expanded (a negative power expands its base's
    positive power, in a denominator: one term)."""
    n = abs(exponent)
    degree, bits = n * base.degree, n * base.bits
    _within_budget(_Size(1, degree, bits))  # before the binomial below
    # Multiplying out (t terms)**n makes C(n + t - 1, t - 1) products; a polynomial
    # in one generator keeps at most degree + 1 of them.
    products = 1 if base.terms == 1 else math.comb(n + base.terms - 1, base.terms - 1)
    _work(products)
    terms = min(products, degree + 1) if univariate else products
    expanded = _within_budget(_Size(terms, degree, bits))
    return expanded if exponent > 0 else _Size(1, degree, bits)


def _actual_bits(expanded: Dim) -> int:
    return max((_bits(int(a.p)) + _bits(int(a.q)) for a in sympy.preorder_traversal(expanded)
                if a.is_Rational), default=0)


def _expand(expr: Dim, leaf: Callable[[Dim], _Size | None] | None = None) -> Dim:
    """``sympy.expand``, refused (TooComplex) before it would pass the budget."""
    if expr.is_Symbol or expr.is_Number:
        return expr
    _estimate(expr, leaf)
    return sympy.expand(expr)


def _cancel(expr: Dim) -> Dim:
    """``sympy.cancel`` (a polynomial gcd), on expressions within the budget only."""
    _estimate(expr)
    return sympy.cancel(expr)


def _numer_denom(expr: Dim) -> tuple[Dim, Dim]:
    """Numerator and denominator over a common denominator, within the budget."""
    if not _has_denominator(expr):
        return expr, sympy.Integer(1)
    _estimate(expr)
    together = sympy.together(expr)
    _estimate(together)
    return sympy.fraction(together)


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
    return quotient if quotient is not None else _cancel(numerator / denominator)


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
        try:
            numerator, denominator = _numer_denom(expr.args[0])
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


# --- the system of dims -----------------------------------------------------------------


@dataclass
class ConstraintUse:
    """A constraint and what it was used for (shown by the report)."""

    text: str
    span: Span
    eliminates: str | None = None
    sides: tuple[Dim, str, Dim] | None = None  # left, op, right (replayed by without_bindings)


@dataclass
class DimInfo:
    name: str
    kind: str  # "free", "derived", "fixed"
    span: Span
    definition: Dim | None = None


@dataclass
class DimSystem:
    """What the spec says about its dims, and the questions the checker asks of it.

    Each dim with a *rule* stands for something else: a value (``_values``: a binding,
    a fixed dim, a constraint such as ``2 * d == 128``), a definition (``_derived``)
    or an elimination made by a constraint (``_eliminated``: ``D_model := H*d``).
    Rules are kept as they were made and resolved lazily, with memo (``_resolve``):
    rewriting every earlier rule whenever a constraint arrives is quadratic in the
    constraints, and its expansions are what blew up on chains of constraints.
    """

    bindings: dict[str, int] = field(default_factory=dict)  # from --dim
    dims: dict[str, DimInfo] = field(default_factory=dict)
    constraints: list[ConstraintUse] = field(default_factory=list)
    _symbols: dict[str, Dim] = field(default_factory=dict)
    _values: dict[Dim, int] = field(default_factory=dict)
    _derived: dict[Dim, Dim] = field(default_factory=dict)
    # dim := replacement, written in the dims that had no rule when it was made
    _eliminated: dict[Dim, Dim] = field(default_factory=dict)
    _eliminated_by: dict[Dim, int] = field(default_factory=dict)
    # Equations that are no elimination, as polynomials equal to 0 (the Gröbner basis's).
    _relations: list[Dim] = field(default_factory=list)
    # Equations that are neither (floor divisions in odd places: `d == 2 * (d // 2)`):
    # checked at the bindings, never used in a proof.
    _opaque: list[Dim] = field(default_factory=list)
    _lower: dict[Dim, int] = field(default_factory=dict)
    # Inequalities between dims, each as an expression known to be >= 0.
    _facts: list[Dim] = field(default_factory=list)
    # Each dim with a rule, fully resolved and expanded; dropped when a dim it
    # mentions gets a rule (``_users``: dim -> resolved dims that mention it).
    _resolved: dict[Dim, Dim] = field(default_factory=dict)
    _resolved_unvalued: dict[Dim, Dim] = field(default_factory=dict)  # values not substituted
    _resolved_sizes: dict[Dim, _Size] = field(default_factory=dict)
    _users: dict[Dim, set[Dim]] = field(default_factory=dict)
    _canon_cache: dict[Dim, Dim | TooComplex] = field(default_factory=dict)
    # `!=` constraints, each as an expression that is never 0 (used by refutation).
    _unequal: list[Dim] = field(default_factory=list)
    # Answers are memoised until the next declaration or constraint changes
    # what is known; checking statements asks the same questions many times.
    _answers: dict[tuple[str, Dim, Dim | None], Any] = field(default_factory=dict)
    _basis: _Basis | TooComplex | None = None
    # Derived dims bound on the command line, checked against their definition.
    _derived_bindings: list[tuple[Dim, int]] = field(default_factory=list)
    _unbound_view: DimSystem | None = None

    def without_bindings(self) -> DimSystem:
        """The same dims and constraints without the `--dim` bindings.

        The meaning checks (a scale by the wrong size, axes matched across a
        reshape) hold for every admissible size, as the spec is written: bindings
        that happen to make two sizes equal must not hide a mistake. Fixed dims
        (`dim T = 128`) and constraints are part of the spec and stay.
        """
        if not self.bindings:
            return self
        if self._unbound_view is None:
            view = DimSystem()
            for info in self.dims.values():
                if info.kind == "free":
                    view.declare_free(info.name, info.span)
                elif info.kind == "fixed" and info.definition is not None:
                    view.declare_fixed(info.name, int(info.definition), info.span)
                elif info.definition is not None:
                    view.declare_derived(info.name, info.definition, info.span)
            for use in self.constraints:
                if use.sides is not None:
                    left, op, right = use.sides
                    view.add_constraint(left, op, right, use.text, use.span)
            self._unbound_view = view
        return self._unbound_view
    # Every name the spec defines (tensors too): a dim a suggestion introduces avoids them.
    taken: frozenset[str] = frozenset()
    # The statement being checked (the checker sets it): inference notes where a size came from.
    at: Span = Span(1, 1, 1, 1)

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
        self._forget(sym)  # a name declared twice (an error) must not keep a stale rule
        self._invalidate()
        return sym

    def value_of(self, name: str) -> int | None:
        """The concrete value of a dim at the bindings, if it has one."""
        sym = self._symbols.get(name)
        if sym is None:
            return None
        try:
            return as_int(self.canonical(sym))
        except TooComplex:
            return None

    # constraints

    def add_constraint(self, left: Dim, op: str, right: Dim, text: str, span: Span) -> ConstraintOutcome:
        use = ConstraintUse(text, span, sides=(left, op, right))
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
        difference = _expand(_numer_denom(lhs - rhs)[0])
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
        linear = _linear_in(difference, sym)
        if linear is None:
            return None
        coefficient, rest = linear
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
            difference = _expand(definition - value)
            if difference == 0:
                continue
            if difference.is_number or self._no_positive_solution(difference) is not None:
                conflicts.append((sym.name, value, definition))
            else:
                self._use_equation(difference, None, None)
        self._derived_bindings.clear()
        return conflicts

    def _use_equation(self, difference: Dim, index: int | None, preferred: Dim | None) -> None:
        target = self._pick_elimination(difference, preferred)
        if target is not None:
            self._eliminate(*target, index)
            return
        symbols = sorted(difference.free_symbols, key=lambda s: s.name)
        if difference.is_polynomial(*symbols):
            self._relations.append(difference)
        else:
            self._opaque.append(difference)
        self._invalidate()

    def _eliminate(self, sym: Dim, replacement: Dim, index: int | None) -> None:
        """Record ``sym := replacement`` (a value, or an expression in other dims)."""
        if replacement.is_number:
            self._values[sym] = int(replacement)
        else:
            self._eliminated[sym] = replacement
            if not _built_of_positives(replacement):
                # `d == N // 2` also says that N // 2 is at least 1 (d is a dim).
                self._facts.append(_expand(replacement - 1))
        self._forget(sym)
        if index is not None:
            self._eliminated_by[sym] = index
            self.constraints[index].eliminates = sym.name
        self._invalidate()

    def _forget(self, sym: Dim) -> None:
        """``sym`` has a new rule: resolved forms that mention it are stale."""
        for user in self._users.pop(sym, ()):
            self._resolved.pop(user, None)
            self._resolved_unvalued.pop(user, None)
            self._resolved_sizes.pop(user, None)

    def _invalidate(self) -> None:
        self._canon_cache.clear()
        self._answers.clear()
        self._basis = None

    def _memo(self, question: str, a: Dim, b: Dim | None, answer: Callable[[], Any]) -> Any:
        key = (question, a, b)
        cached = self._answers.get(key)
        if cached is None:
            try:
                cached = answer()
            except TooComplex as error:
                cached = error
            except PrecisionExhausted:  # SymPy could not evaluate a huge number: past the budget
                cached = _too_complex("too_complex_bits", MAX_BITS)
            self._answers[key] = cached
        if isinstance(cached, TooComplex):
            raise TooComplex(cached.detail)
        return cached

    def _pick_elimination(self, difference: Dim, preferred: Dim | None) -> tuple[Dim, Dim] | None:
        """A dim with coefficient +-1 that the equation defines, if any (or one it
        fixes to a positive integer)."""
        candidates = sorted(difference.free_symbols, key=lambda s: (s != preferred, s.name))
        linear = [(sym, found) for sym in candidates
                  if (found := _linear_in(difference, sym)) is not None]
        # A coefficient of +-1 first (the replacement keeps integer coefficients), then
        # any (`2 * a == 3 * b` makes a stand for 3*b/2: exact, with no Gröbner basis).
        for sym, (coefficient, rest) in sorted(linear, key=lambda f: f[1][0] not in (1, -1)):
            replacement = _expand(-rest / coefficient)
            if not replacement.is_number or (replacement.is_integer and replacement > 0):
                return sym, replacement
        return None

    def _add_inequality(self, left: Dim, op: str, right: Dim) -> ConstraintOutcome:
        lhs, rhs = self.canonical(left), self.canonical(right)
        relation = {"<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge, "!=": sympy.Ne}[op]
        if lhs.is_number and rhs.is_number:
            holds = lhs.is_Rational and rhs.is_Rational and bool(relation(lhs, rhs))
            return ConstraintOutcome("ok" if holds else "violated", self._values_text(left, right))
        # A lower bound on one dim (`N >= 2`) helps prove positivity (`N - 1`).
        if lhs.is_Symbol and rhs.is_Integer and op in (">", ">="):
            self._lower[lhs] = max(self._lower.get(lhs, 1), int(rhs) + (op == ">"))
        elif rhs.is_Symbol and lhs.is_Integer and op in ("<", "<="):
            self._lower[rhs] = max(self._lower.get(rhs, 1), int(lhs) + (op == "<"))
        elif op != "!=":
            # `W <= N` is the fact `N - W >= 0`, which proves `N - W + 1` positive.
            larger, smaller = (lhs, rhs) if op in (">", ">=") else (rhs, lhs)
            self._facts.append(_expand(larger - smaller - (1 if op in (">", "<") else 0)))
        else:
            self._unequal.append(_expand(lhs - rhs))
        self._invalidate()
        return ConstraintOutcome("ok")

    def _values_text(self, left: Dim, right: Dim) -> tuple[str, str, str]:
        names = sorted(free_names(left) | free_names(right))
        bound = ", ".join(
            f"{n}={self.value_of(n)}" for n in names if self.value_of(n) is not None
        )
        return (to_text(self.canonical(left)), to_text(self.canonical(right)),
                bound or codes.detail("no_bindings"))

    # resolving rules

    def _rule(self, sym: Dim, values: bool = True) -> Dim | None:
        """What ``sym`` stands for: its value (unless ``values`` is false), its
        definition, or the elimination a constraint made; None when it is itself."""
        value = self._values.get(sym) if values else None
        if value is not None:
            return sympy.Integer(value)
        rule = self._derived.get(sym)
        return rule if rule is not None else self._eliminated.get(sym)

    def _has_rule(self, sym: Dim, values: bool = True) -> bool:
        return (values and sym in self._values) or sym in self._derived or sym in self._eliminated

    def _resolve(self, sym: Dim, values: bool = True) -> Dim:
        """The dim's rule with every rule in it resolved, expanded. A depth-first walk
        with an explicit path: a chain of a thousand definitions is no recursion."""
        resolved = self._resolved if values else self._resolved_unvalued
        if sym in resolved:
            return resolved[sym]

        def rule_of(dim: Dim) -> Dim:
            rule = self._rule(dim, values)
            assert rule is not None, dim
            return rule

        path = [(sym, iter(rule_of(sym).free_symbols))]
        on_path = {sym}
        while path:
            top, dependencies = path[-1]
            for dependency in dependencies:
                if dependency not in resolved and dependency not in on_path \
                        and self._has_rule(dependency, values):
                    path.append((dependency, iter(rule_of(dependency).free_symbols)))
                    on_path.add(dependency)
                    break
            else:
                path.pop()
                on_path.discard(top)
                rule = rule_of(top)
                known = {s: resolved[s] for s in rule.free_symbols if s in resolved}
                resolved[top] = _expand(rule.xreplace(known) if known else rule)
                for mentioned in resolved[top].free_symbols:
                    self._users.setdefault(mentioned, set()).add(top)
        return resolved[sym]

    def _leaf_size(self, sym: Dim) -> _Size | None:
        """The size a dim stands for once its rules are substituted (None: itself)."""
        if not self._has_rule(sym):
            return None
        size = self._resolved_sizes.get(sym)
        if size is None:
            size = self._resolved_sizes[sym] = _estimate(self._resolve(sym))
        return size

    def check_size(self, dim: Dim) -> None:
        """TooComplex if the canonical form of ``dim`` would pass the budget (no expansion)."""
        _estimate(dim, self._leaf_size)

    # questions

    def canonical(self, dim: Dim) -> Dim:
        """The expression with derived dims, bindings and eliminations substituted, expanded."""
        cached = self._canon_cache.get(dim)
        if cached is None:
            try:
                cached = self._canonical(dim)
            except TooComplex as error:
                cached = error
            self._canon_cache[dim] = cached
        if isinstance(cached, TooComplex):
            raise TooComplex(cached.detail)
        return cached

    def _canonical(self, dim: Dim) -> Dim:
        known = {s: self._resolve(s) for s in dim.free_symbols if self._has_rule(s)}
        result = _expand(dim.xreplace(known) if known else dim)
        if _actual_bits(result) > MAX_BITS:  # the estimate is an upper bound; this is exact
            raise _too_complex("too_complex_bits", MAX_BITS)
        return result

    def simplest(self, dim: Dim) -> Dim:
        """``dim`` rewritten by definitions and constraints (not bindings) when that makes
        it shorter (`(d + 1)//2` and `d - h` are `h` under `dim d = 2 * h`); else as it is."""
        known = {s: self._resolve(s, values=False) for s in dim.free_symbols
                 if self._has_rule(s, values=False)}
        if not known:
            return dim
        rewritten = _expand(dim.xreplace(known))
        return rewritten if sympy.count_ops(rewritten) < sympy.count_ops(dim) else dim

    def equal(self, left: Dim, right: Dim) -> Verdict:
        if left == right:
            return Verdict.PROVED
        return self._memo("equal", left, right, lambda: self._equal(left, right))

    def _equal(self, left: Dim, right: Dim) -> Verdict:
        a, b = self.canonical(left), self.canonical(right)
        if a == b:
            return Verdict.PROVED
        difference = _expand(a - b)
        if difference == 0:
            return Verdict.PROVED
        if difference.is_number:
            return Verdict.DIFFERENT
        if self._distinct_dims(a, b):
            return Verdict.DIFFERENT
        remainder = self._reduced(difference) if self._relations else None
        if remainder == 0:
            return Verdict.PROVED
        if remainder is not None and remainder.is_number:
            return Verdict.DIFFERENT  # `F*G` vs 24 under `F*G == 12`
        if _has_denominator(difference) and _cancel(difference) == 0:
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
            _expand(dim.xreplace({s: s + self._lower.get(s, 1) for s in symbols})))

    def _distinct_dims(self, left: Dim, right: Dim) -> bool:
        """Two different free dims are not equal (language.md, section 1)."""
        return left.is_Symbol and right.is_Symbol and left != right \
            and not self._relations and not self._opaque

    def _reduces_to_zero(self, difference: Dim) -> bool:
        return self._reduced(difference) == 0

    def _reduced(self, difference: Dim) -> Dim | None:
        """The remainder of ``difference`` modulo the relations (None: cannot tell)."""
        basis = self._relation_basis()
        return basis.remainder(difference) if basis is not None else None

    def _relation_basis(self) -> _Basis | None:
        if self._basis is None:
            try:
                self._basis = self._build_basis()
            except TooComplex as error:
                self._basis = error
        if isinstance(self._basis, TooComplex):
            raise TooComplex(self._basis.detail)
        return self._basis

    def _build_basis(self) -> _Basis:
        # A relation stated before a later constraint eliminated one of its dims is
        # rewritten first, so that the basis speaks of the dims canonical forms use.
        polys = [p for p in (self.canonical(r) for r in self._relations) if p != 0]
        gens = tuple(sorted(set().union(*(p.free_symbols for p in polys)), key=lambda s: s.name))
        if not gens:
            return _Basis((), ())
        poly_ring = ring(list(gens), QQ, lex)[0]
        converted = []
        for poly in polys:
            try:
                converted.append(_checked_poly(poly_ring.from_expr(poly)))
            except (ValueError, sympy.polys.polyerrors.BasePolynomialError):
                continue  # no longer a polynomial (a floor came in): not used
        return _Basis(gens, tuple(_groebner(converted, _Steps())))

    def constant_ratio(self, left: Dim, right: Dim) -> Fraction | None:
        """``left / right`` when it is a number for every admissible size (`3*d` / `d`)."""
        def answer() -> Fraction | None:
            ratio = sympy.cancel(self.canonical(left) / self.canonical(right))
            return Fraction(int(ratio.p), int(ratio.q)) if ratio.is_Rational and ratio != 0 else None
        return self._memo("ratio", left, right, answer) or None

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
            return _number_verdict(direct)
        if self._positive_polynomial(direct) or self._positive_floor(direct) \
                or self._positive_relaxed(direct):
            return Verdict.PROVED
        reduced = self.canonical(dim)
        if reduced.is_number:
            return _number_verdict(reduced)
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
        for term in sympy.Add.make_args(_expand(dim)):
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
        bound = _expand(sympy.Add(*relaxed))
        return bool(bound > 0) if bound.is_number else self._definite(bound)

    def _positive_by_fact(self, dim: Dim) -> bool:
        """``dim = fact + p`` with ``fact >= 0`` (an inequality) and ``p`` provably
        positive: then ``dim`` is positive too."""
        return any(
            self._positive_polynomial(_expand(dim - self.canonical(fact)))
            for fact in self._facts
        )

    def _positive_floor(self, dim: Dim) -> bool:
        """`p // q` is at least 1 exactly when `p >= q`, i.e. when `p - q + 1` is positive."""
        if not isinstance(dim, sympy.floor):
            return False
        numerator, denominator = _numer_denom(dim.args[0])
        return bool(self.positive(denominator)) and bool(
            self.positive(_expand(numerator - denominator + 1)))

    def _bind_only(self, dim: Dim) -> Dim:
        values = {s: sympy.Integer(v) for s, v in self._values.items() if s in dim.free_symbols}
        return _expand(dim.xreplace(values) if values else dim)

    def _positive_polynomial(self, dim: Dim) -> bool:
        """Every dim is >= its lower bound (1 unless constrained): shift and look at signs."""
        shifted = self._shifted(dim)
        if shifted is None:  # SymPy's own positivity, where it is cheap enough to ask
            return _affordable(dim) and bool(dim.is_positive) and bool(dim.is_integer)
        coefficients, constant = shifted
        if not all(c.is_integer and c >= 0 for c in coefficients):
            return False
        return constant > 0 and self._integer_valued(dim)

    def _integer_valued(self, dim: Dim) -> bool:
        symbols = sorted(dim.free_symbols, key=lambda s: s.name)
        if not symbols:
            return bool(dim.is_integer)
        return all(c.is_integer for c in _coefficients(_expand(dim))[0])

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
        known = {s: self._resolve(s, values=False) for s in dim.free_symbols
                 if self._has_rule(s, values=False)}
        return _expand(dim.xreplace(known) if known else dim)

    def _divides(self, numerator: Dim, denominator: Dim) -> Verdict:
        top, bottom = self.canonical(numerator), self.canonical(denominator)
        if _monomial_quotient(top, bottom) is not None:
            return Verdict.PROVED
        if bottom == 0:
            return Verdict.DIFFERENT
        quotient = _cancel(top / bottom)
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
        try:
            value = self.canonical(dim)
        except TooComplex:
            return None
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
        return self.positive(_expand(right - left + 1))

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
                verdict, _within(lambda: self.counterexample(claim)),
                _within(lambda: self.weakest_constraint(claim, names)))
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
        # A relation about a dim of the claim brings in its other dims: a walk over the
        # dims, each equation taken once (linear in the equations, not quadratic).
        mentions: dict[Dim, list[int]] = {}
        for index, (expression, _) in enumerate(equations):
            for sym in expression.free_symbols:
                mentions.setdefault(sym, []).append(index)
        variables = set(roots)
        pending = list(roots)
        taken: set[int] = set()
        chosen: list[Callable[[Env], bool]] = []
        while pending:
            for index in mentions.get(pending.pop(), ()):
                if index in taken:
                    continue
                taken.add(index)
                expression, test = equations[index]
                compiled = _compiled(expression)
                chosen.append(lambda values, c=compiled, t=test: t(c(values)))
                new = expression.free_symbols - variables
                variables |= new
                pending.extend(new)
        return chosen, variables

    def _described(self, claim: Claim, sides: list[Dim], values: dict[Dim, int]) -> Counterexample:
        """The counterexample as the user reads it: the dims the claim names (evaluated
        through definitions and constraints), the free dims it reduces to, and any other
        dim a constraint ties to them that is not at its smallest size."""
        shown: dict[str, int] = {}
        for sym in set().union(*(d.free_symbols for d in claim.dims)):
            expression = self.canonical(sym)
            if not expression.free_symbols <= values.keys():
                continue  # it cancelled out of the claim (`H // (H*d)`): any size will do
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
        terms = sympy.Add.make_args(_expand(right - left))
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
        for name in ("constraints", "_relations", "_opaque", "_facts", "_unequal",
                     "_derived_bindings"):
            setattr(copy, name, list(getattr(self, name)))
        # Resolved rules stay valid in the copy until it gets rules of its own.
        for name in ("_resolved", "_resolved_unvalued", "_resolved_sizes"):
            setattr(copy, name, dict(getattr(self, name)))
        copy._users = {sym: set(users) for sym, users in self._users.items()}
        # Answers stay valid in the copy until it learns something (then they are dropped).
        copy._canon_cache, copy._answers = dict(self._canon_cache), dict(self._answers)
        return copy


def _within(question: Callable[[], Any]) -> Any:
    """The answer, or None when finding it would pass the budget (for what is only
    extra: a counterexample, a suggestion)."""
    try:
        return question()
    except (TooComplex, _Unsupported):
        return None


def _number_verdict(value: Dim) -> Verdict:
    return Verdict.PROVED if value.is_integer and value > 0 else Verdict.DIFFERENT


def _linear_in(expr: Dim, sym: Dim) -> tuple[Dim, Dim] | None:
    """``(c, rest)`` with ``expr == c*sym + rest``, ``c`` a number and ``rest`` free of
    ``sym`` (an expanded expression); None when ``sym`` occurs otherwise (``sym**2``,
    ``sym * N``, inside a floor)."""
    coefficient: Dim = sympy.Integer(0)
    rest: list[Dim] = []
    for term in sympy.Add.make_args(expr):
        if sym not in term.free_symbols:
            rest.append(term)
            continue
        number, factor = term.as_coeff_Mul()
        if factor != sym:
            return None
        coefficient += number
    if coefficient == 0:
        return None
    return coefficient, sympy.Add(*rest)


def _has_denominator(expr: Dim) -> bool:
    return any((p.is_Pow and p.exp.is_negative) or (p.is_Rational and not p.is_Integer)
               for p in sympy.preorder_traversal(expr))


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


@dataclass(frozen=True)
class ConstraintOutcome:
    status: str  # "ok", "trivial", "violated", "unsatisfiable"
    values: tuple[str, str, str] | None = None
    unknown: str | None = None  # "unsatisfiable": the dim no positive integer can be


# --- Gröbner bases, counted in steps ------------------------------------------------------
#
# SymPy's `groebner` has no budget: a few nonlinear constraints in 8 dims run for minutes.
# This is Buchberger's algorithm with the coprime-leading-monomial criterion and the
# normal selection strategy, on SymPy's sparse polynomials (`PolyElement`), where every
# step that cancels a leading term is counted against MAX_STEPS.


class _Steps:
    def __init__(self, limit: int = MAX_STEPS) -> None:
        self.left = limit

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise _too_complex("too_complex_steps", MAX_STEPS)


def _coefficient_bits(poly: PolyElement) -> int:
    return max((_bits(int(c.numerator)) + _bits(int(c.denominator)) for c in poly.values()),
               default=0)


def _checked_poly(poly: PolyElement) -> PolyElement:
    if len(poly) > MAX_TERMS:
        raise _too_complex("too_complex_terms", MAX_TERMS)
    if _coefficient_bits(poly) > MAX_BITS:
        raise _too_complex("too_complex_bits", MAX_BITS)
    return poly


def _reduce(poly: PolyElement, basis: Sequence[PolyElement], steps: _Steps) -> PolyElement:
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
            raise _too_complex("too_complex_terms", MAX_TERMS)
    return _checked_poly(remainder)


def _groebner(polys: Sequence[PolyElement], steps: _Steps) -> list[PolyElement]:
    """A Gröbner basis (monic) of ``polys``, or TooComplex past the budget."""
    basis: list[PolyElement] = []
    pairs: list[tuple[Any, int, int]] = []  # a heap: smallest lcm first (normal strategy)
    order = polys[0].ring.order if polys else lex

    def add(poly: PolyElement) -> None:
        basis.append(_checked_poly(poly.monic()))
        if len(basis) > MAX_BASIS:
            raise _too_complex("too_complex_steps", MAX_STEPS)
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
        reduced = _reduce(_checked_poly(spoly), basis, steps)
        if reduced:
            add(reduced)
    return basis


@dataclass(frozen=True)
class _Basis:
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
        return _reduce(_checked_poly(poly), basis, _Steps()).as_expr()


# --- claims, counterexamples and the weakest constraint -------------------------------------

# Assignments tried per claim, smallest sums first: enough for every counterexample
# with a few small dims (the common case), and a fixed amount of work on any input.
REFUTATION_POINTS = 2000

Env: TypeAlias = "dict[Dim, int]"


class Claim(NamedTuple):
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


class Counterexample(NamedTuple):
    """Sizes at which a claim fails: ``values`` (dim name, size), sorted by name, and
    the claim's sides evaluated there (``sides``, printed: `1`, `3/2`)."""

    values: tuple[tuple[str, int], ...]
    sides: tuple[str, ...]

    def text(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in self.values)


class Needed(NamedTuple):
    """The weakest constraint that makes a claim hold: ``constraint {lhs} {op} {rhs}``,
    after declaring ``dims`` (new dims, e.g. the quotient `k` of a division); ``built``
    holds the same constraint as dim expressions."""

    dims: tuple[str, ...]
    lhs: str
    op: str
    rhs: str
    built: tuple[Dim, str, Dim]

    @property
    def constraint(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"


class Decision(NamedTuple):
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
    for term in sympy.Add.make_args(_expand(dim)):
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
    # The weakest constraint of a decision as candidate fixes (the checker knows where
    # a new constraint goes in the file).
    needed_fixes: Callable[[Decision], list[Fix]] = lambda decision: []

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
            return self._sized(left - right, node.span)
        if node.op == "*":
            return self._sized(left * right, node.span)
        if right == 0:
            self.diagnostics.append(codes.NOT_DIVISIBLE.diag(
                node.span, claim=codes.divisibility(True, to_text(left), "0")))
            return None
        if not self._positive_divisor(right, node.right):
            return None
        if node.op == "//":
            return self._sized(sympy.floor(left / right), node.span)
        if self.in_constraint:
            # The constraint asserts the division; it is not a size.
            return self._sized(left / right, node.span)
        verdict = self._proved(lambda: self.system.divides(left, right), node.span)
        if verdict is None:
            return None
        if not verdict:
            decision = self.system.decide(Claim.divides(left, right))
            needed = decision.needed
            self.diagnostics.append(codes.NOT_DIVISIBLE.diag(
                node.span, claim=self.system.divisibility_claim(left, right, decision),
                counterexample=decision.counterexample.values if decision.refuted else (),
                help=[codes.needed_help(needed.dims, needed.constraint)] if needed else [],
                fixes=self.needed_fixes(decision),
            ))
            return None
        return self._proved(lambda: exact_quotient(left, right), node.span)

    def _positive_divisor(self, divisor: Dim, node: nodes.Expr) -> bool:
        """A divisor must be a positive integer wherever the quotient is taken: `N // (H // 2)`
        is a division by zero at H = 1 (SC201 on the divisor)."""
        verdict = self._proved(lambda: self.system.positive(divisor), node.span)
        if verdict is None:
            return False
        if not verdict:
            at_bindings = verdict is Verdict.DIFFERENT and free_names(divisor)
            self.diagnostics.append(codes.NOT_POSITIVE.diag(
                node.span, expr=to_text(divisor),
                reason=codes.detail("not_positive_at_bindings") if at_bindings else ""))
            return False
        return True

    def _proved(self, question: Callable[[], Any], span: Span) -> Any:
        """The answer, or None with SC003 when it is too complex to find."""
        try:
            return question()
        except TooComplex as error:
            self.diagnostics.append(codes.LIMIT.diag(span, detail=error.detail))
            return None

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
        """Refuse expressions whose exponents or expansions (with derived dims and
        constraints substituted) pass the budget, before anything expands them."""
        too_big = any(p.is_Pow and p.exp.is_Integer and abs(int(p.exp)) > MAX_EXPONENT
                      for p in sympy.preorder_traversal(dim))
        if too_big:
            self.diagnostics.append(codes.LIMIT.diag(
                span, detail=codes.detail("expression_too_large")))
            return None
        try:
            self.system.check_size(dim)
        except TooComplex as error:
            self.diagnostics.append(codes.LIMIT.diag(span, detail=error.detail))
            return None
        return dim


# SymPy's assumptions (``is_positive``) isolate the real roots of a univariate expression
# (``_monotonic_sign``), work the budget does not measure: seconds for `2**4096 - d**64`.
# They are asked only of expressions this small; past it, positivity is unproved.
ASSUMPTION_DEGREE = 8
ASSUMPTION_BITS = 256


def _affordable(dim: Dim) -> bool:
    """Whether SymPy's assumptions may be asked about ``dim`` within the budget."""
    for part in sympy.preorder_traversal(dim):
        if part.is_Pow and part.exp.is_Integer and abs(int(part.exp)) > ASSUMPTION_DEGREE:
            return False
        if part.is_Rational and _bits(int(part.p)) + _bits(int(part.q)) > ASSUMPTION_BITS:
            return False
    return True


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
    try:
        verdict = system.equal(left, right)
    except TooComplex:
        return Proof(Verdict.UNPROVED, "")
    if not verdict:
        return Proof(verdict, "")
    if left == right:
        return Proof(verdict, "identical")
    return _explain(system, (left, right), lambda a, b: _expand(a - b) == 0)


def explain_divides(system: DimSystem, numerator: Dim, denominator: Dim) -> Proof:
    try:
        verdict = system.divides(numerator, denominator)
    except TooComplex:
        return Proof(Verdict.UNPROVED, "")
    if not verdict:
        return Proof(verdict, "")

    def exact(top: Dim, bottom: Dim) -> bool:
        quotient = _cancel(top / bottom)
        if quotient.is_number:
            return bool(quotient.is_integer)
        symbols = sorted(quotient.free_symbols, key=lambda s: s.name)
        return bool(quotient.is_polynomial(*symbols)) and system._integer_valued(quotient)

    return _explain(system, (numerator, denominator), exact, direct="identical")


def _explain(system: DimSystem, dims: tuple[Dim, Dim], holds: Callable[[Dim, Dim], bool],
             direct: str = "algebra") -> Proof:
    try:
        return _explain_stages(system, dims, holds, direct)
    except TooComplex:  # the checker proved it; retracing the stages passed the budget
        return Proof(Verdict.PROVED, "relations")


def _explain_stages(system: DimSystem, dims: tuple[Dim, Dim], holds: Callable[[Dim, Dim], bool],
                    direct: str) -> Proof:
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
    # 2. constraints: the eliminations they made (and values they fixed), followed
    # through chains (an elimination is written in the dims of its time)
    constraints: set[int] = set()
    for _ in range(len(system._eliminated_by) + 1):
        present = set().union(*(d.free_symbols for d in current))
        by_constraint = {s for s in present if s in system._eliminated_by}
        if not by_constraint:
            break
        constraints |= {system._eliminated_by[s] for s in by_constraint}
        replacements = {s: system._eliminated.get(s, sympy.Integer(system._values.get(s, 0)))
                        for s in by_constraint}
        current = [_expand(d.xreplace(replacements)) for d in current]
    if holds(*current):
        return Proof(verdict, "constraint", definitions, tuple(sorted(constraints)))
    # 3. bindings
    remaining = set().union(*(d.free_symbols for d in current))
    bound = {s for s in remaining if s in system._values}
    current = [d.xreplace({s: sympy.Integer(system._values[s]) for s in bound}) for d in current]
    if holds(*current):
        return Proof(verdict, "bindings", definitions, tuple(sorted(constraints)),
                     tuple(sorted(s.name for s in bound)))
    return Proof(verdict, "relations", definitions, tuple(sorted(constraints)))


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
        expanded = _expand(dim)
    except TooComplex:
        expanded = dim
    return _PRETTY.doprint(expanded).replace("*", "·")


def growth(system: DimSystem, dim: Dim, names: Iterable[str] = ()) -> tuple[int, int]:
    """(degree in ``names``, total degree) of a dim expression with derived dims substituted
    (constraints and bindings not): how fast it grows. (0, 0) if not a polynomial, or
    too large to expand."""
    expanded = dim
    for _ in range(len(system._derived) + 1):
        if not expanded.free_symbols & system._derived.keys():
            break
        expanded = expanded.xreplace(system._derived)
    try:
        expanded = _expand(expanded)
    except TooComplex:
        return (0, 0)
    symbols = sorted(expanded.free_symbols, key=lambda s: s.name)
    if not symbols or not expanded.is_polynomial(*symbols):
        return (0, 0)
    wanted = {s for s in symbols if s.name in set(names)}
    degrees = [_degrees(term, wanted) for term in sympy.Add.make_args(expanded)]
    return (max(d[0] for d in degrees), max(d[1] for d in degrees))


def _degrees(term: Dim, wanted: set[Dim]) -> tuple[int, int]:
    """(degree in ``wanted``, total degree) of one monomial."""
    powers = term.as_powers_dict()
    degree = {base: int(exp) for base, exp in powers.items() if base.is_Symbol}
    return (sum(e for b, e in degree.items() if b in wanted), sum(degree.values()))


def solve_for(system: DimSystem, dim: Dim, value: int) -> tuple[str, int] | None:
    """The dim that makes ``dim == value`` at the bindings, when exactly one dim is
    left unbound in ``dim`` and exactly one positive integer solves the equation
    (``run`` binds dims from arrays with it: ``[N, H * d]`` with H bound gives d).

    Only where the answer is unique and found in bounded steps: a polynomial whose
    terms all grow with the dim (non-negative coefficients: increasing, so bisection
    finds the one solution), which is every shape a spec writes with `+` and `*`.
    """
    try:
        expression = system.canonical(dim)
    except TooComplex:
        return None
    if len(expression.free_symbols) != 1:
        return None
    (unknown,) = expression.free_symbols
    if not expression.is_polynomial(unknown):
        return None
    terms = []
    for term in sympy.Add.make_args(expression):
        coefficient, power = term.as_coeff_exponent(unknown)
        if not (coefficient.is_Integer and power.is_Integer and power >= 0):
            return None
        terms.append((int(coefficient), int(power)))
    if any(c < 0 for c, p in terms if p > 0) or all(p == 0 for c, p in terms):
        return None

    def at(x: int) -> int:
        return sum(c * x**p for c, p in terms)

    constant = sum(c for c, p in terms if p == 0)
    low, high = 1, max(1, value - constant)  # at(x) >= x + constant for x >= 1
    while low < high:
        middle = (low + high) // 2
        if at(middle) < value:
            low = middle + 1
        else:
            high = middle
    return (unknown.name, low) if at(low) == value else None


# --- inference: unification over dims ----------------------------------------------------------


class Unifier(DimSystem):
    """A :class:`DimSystem` with *unknowns*: dims of undeclared tensors whose size
    is to be found (:mod:`shapecheck.infer`).

    The checker asks its usual questions; where the answer is not "proved" and
    an unknown could make it so, the unknown is bound, and the answer becomes
    "proved": ``equal(?1, N)`` binds ``?1 := N``, ``divides(?2, H)`` binds
    ``?2 := H*?3`` with a new unknown ``?3``. A binding is an elimination, as a
    constraint makes one, so every later question sees it; it is made only when
    the bound value is a size for every admissible binding. Declared dims are
    never bound: two different ones stay different, and a use that needs a
    different size than an earlier one fixed is an error where it occurs.
    ``links`` records each binding and where (``at``, the statement being checked)
    it was made, so that an error can point at the use that fixed a size.
    """

    # Not a dataclass of its own: creating one costs start-up time every `verify` pays.
    def __init__(self) -> None:
        super().__init__()
        self.links: dict[Dim, tuple[Dim, Span]] = {}
        self._unknowns: dict[Dim, int] = {}  # unknown -> creation order
        self._failed_at: Span | None = None  # the statement where a check last failed

    def unknown(self) -> Dim:
        """A new unknown size (named `?0`, `?1`, ...: never a name of the spec)."""
        sym = sympy.Symbol(f"?{len(self._unknowns)}", integer=True, positive=True)
        self._unknowns[sym] = len(self._unknowns)
        return sym

    def is_unknown(self, dim: Dim) -> bool:
        return dim in self._unknowns

    def equal(self, left: Dim, right: Dim) -> Verdict:
        if self._bound_directly(left, right):
            return Verdict.PROVED
        verdict = super().equal(left, right)
        if verdict or not self._unknowns or not self._unify(left, right):
            return verdict
        return super().equal(left, right)

    def divides(self, numerator: Dim, denominator: Dim) -> Verdict:
        top, bottom = self.resolved(numerator), self.resolved(denominator)
        if _monomial_quotient(top, bottom) is not None:
            return Verdict.PROVED  # `H*?3` by `H`, without SymPy's general machinery
        verdict = super().divides(numerator, denominator)
        if verdict or not self._make_divisible(numerator, denominator):
            return verdict
        return super().divides(numerator, denominator)

    def _bound_directly(self, left: Dim, right: Dim) -> bool:
        """The common case, `?1 == N`: an unknown on one side, a size on the other (no
        expansion: SymPy's first `Add` costs a slow lazy import)."""
        if not self._unknowns or self._frozen():
            return False
        lhs, rhs = self.resolved(left), self.resolved(right)
        if lhs == rhs:
            return True
        sides = [(a, b) for a, b in ((lhs, rhs), (rhs, lhs))
                 if a in self._unknowns and a not in b.free_symbols and _built_of_positives(b)]
        if not sides:
            return False
        sym, value = max(sides, key=lambda side: self._unknowns[side[0]])  # the newest goes
        self._bind(sym, value)
        return True

    def decide(self, claim: Claim, taken: Iterable[str] = ()) -> Decision:
        # A rule asks this only once a check has failed, before it words the error and
        # probes for a help line (`Q.T @ X`?): nothing is bound for the rest of this
        # statement, so a probe cannot change a shape. Inference reads only whether a
        # statement fails, not its message: no counterexample search.
        # Indexing asks its bounds here first (the claim is its check, not a probe): one
        # that holds, or that an unknown axis can be lengthened to meet (`x[:h]`), fails
        # nothing.
        if claim.kind in ("positive", "at_most"):
            verdict = DimSystem.holds(self, claim)
            if not verdict and self._lengthen(*claim.dims):
                verdict = DimSystem.holds(self, claim)
            if verdict:
                return Decision(verdict)
        self._failed_at = self.at
        return Decision(DimSystem.holds(self, claim))

    def resolved(self, dim: Dim) -> Dim:
        """``dim`` with the bindings of unknowns substituted (in the spec's notation:
        the constraints' eliminations are not applied)."""
        result, summed = dim, False
        for _ in range(len(self.links) + 1):  # a binding may name an unknown bound later
            found = result.free_symbols & self.links.keys()
            if not found:
                break
            bound = {u: self._eliminated[u] if u in self._eliminated
                     else sympy.Integer(self._values[u]) for u in found}
            summed = summed or any(r.is_Add for r in bound.values())
            result = result.xreplace(bound)
        return _expand(result) if summed else result

    def roots(self, dim: Dim) -> list[Dim]:
        """The unknowns left in ``dim`` after resolving it, oldest first."""
        return sorted(self.resolved(dim).free_symbols & self._unknowns.keys(),
                      key=self._unknowns.__getitem__)

    def _frozen(self) -> bool:
        return self._failed_at is not None and self._failed_at == self.at

    def _unify(self, left: Dim, right: Dim) -> bool:
        """Bind one unknown so that ``left == right``; False if none can be."""
        if self._frozen():
            return False
        difference = _expand(self.resolved(left) - self.resolved(right))
        # Sizes are never 0: a factor common to every term can go (`M*k - M*k2`).
        kept = [f for f in sympy.Mul.make_args(sympy.factor_terms(difference))
                if not (f.is_number or _built_of_positives(f))]
        if len(kept) == 1:
            difference = _expand(kept[0])
        newest_first = sorted(difference.free_symbols & self._unknowns.keys(),
                              key=self._unknowns.__getitem__, reverse=True)
        for sym in newest_first:
            if not difference.is_polynomial(sym):
                continue
            poly = sympy.Poly(difference, sym)
            if poly.degree() != 1:
                continue
            coefficient, rest = poly.all_coeffs()
            if coefficient.free_symbols:
                continue
            solution = _expand(-rest / coefficient)
            if self.positive(solution) is Verdict.PROVED:
                self._bind(sym, solution)
                return True
        return False

    def _make_divisible(self, numerator: Dim, denominator: Dim) -> bool:
        """``?a`` divisible by ``H``: bind ``?a := H*?b``, a new unknown ``?b``."""
        if self._frozen():
            return False
        factors = sympy.Mul.make_args(self.resolved(numerator))
        unknowns = [f for f in factors if f in self._unknowns]
        if not unknowns:
            return False
        newest = max(unknowns, key=self._unknowns.__getitem__)
        self._bind(newest, self.resolved(denominator) * self.unknown())
        return True

    def _lengthen(self, first: Dim, second: Dim | None = None) -> bool:
        """Indexing's bounds on an axis of unknown size ``?a``: ``bound <= ?a`` (a slice
        bound; ``at_most(first, second)``) or ``?a - index`` positive (an index from the
        start; ``positive(first)``). Binds ``?a := bound + ?b`` (or ``index + ?b``), a
        new unknown, as :meth:`_make_divisible` folds a divisibility into the size. The
        axis is then longer than the bound, so the part past it is never empty
        (`x[..., :h]` and `x[..., h:]` of one axis give it `2*h`)."""
        if self._frozen():
            return False
        if second is not None:
            target, value = self.resolved(second), self.resolved(first)
        else:
            expression = _expand(self.resolved(first))
            found = [u for u in expression.free_symbols & self._unknowns.keys()
                     if expression.coeff(u) == 1]
            if len(found) != 1:
                return False
            target, value = found[0], _expand(found[0] - expression)
        if target not in self._unknowns or target in value.free_symbols \
                or self.positive(value + 1) is not Verdict.PROVED:
            return False
        self._bind(target, value + self.unknown())
        return True

    def _bind(self, sym: Dim, value: Dim) -> None:
        self.links[sym] = (value, self.at)
        self._eliminate(sym, value, None)


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
