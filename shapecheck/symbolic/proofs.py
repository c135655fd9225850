"""The system of dims: what the spec declares, and proofs about it.

:class:`DimSystem` holds what the spec declares (free, derived and fixed dims,
bindings, constraints) and answers the questions the checker asks: are two dim
expressions provably equal, is one provably positive, does a division provably
leave no remainder. :func:`explain_equal` and :func:`explain_divides` retrace a
proof for the report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import sympy
from sympy.core.evalf import PrecisionExhausted
from sympy.polys.domains import QQ
from sympy.polys.orderings import lex
from sympy.polys.rings import ring

from ..messages import codes
from ..messages.diagnostics import Span
from ..records import NamedTuple, Record
from .budget import (
    MAX_BITS, Size, TooComplex, actual_bits, affordable, cancel, estimate, expand, has_denominator,
    numer_denom, too_complex,
)
from .counterexamples import Claim, Decision, Refutation
from .dims import (
    Dim, Verdict, as_int, built_of_positives, exact_quotient, free_names, monomial_quotient,
    spaced, symbol, to_text,
)

if TYPE_CHECKING:
    from .groebner import Basis


class ConstraintUse(Record):
    """A constraint and what it was used for (shown by the report)."""

    text: str
    span: Span
    eliminates: str | None = None
    sides: tuple[Dim, str, Dim] | None = None  # left, op, right (replayed by without_bindings)


class DimInfo(Record):
    name: str
    kind: str  # "free", "derived", "fixed"
    span: Span
    definition: Dim | None = None


class DimSystem(Refutation, Record):
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
    _resolved_sizes: dict[Dim, Size] = field(default_factory=dict)
    _users: dict[Dim, set[Dim]] = field(default_factory=dict)
    _canon_cache: dict[Dim, Dim | TooComplex] = field(default_factory=dict)
    # `!=` constraints, each as an expression that is never 0 (used by refutation).
    _unequal: list[Dim] = field(default_factory=list)
    # Answers are memoised until the next declaration or constraint changes
    # what is known; checking statements asks the same questions many times.
    _answers: dict[tuple[str, Dim, Dim | None], Any] = field(default_factory=dict)
    # The answers that reduced modulo the relations (directly or through another answer),
    # and a count of such reductions, memoised ones included: the language server keeps
    # a statement's check across a dim edit that removes a relation only if it used none.
    _relying: set[tuple[str, Dim, Dim | None]] = field(default_factory=set)
    relation_uses: int = 0
    _basis: Basis | TooComplex | None = None
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
        difference = expand(numer_denom(lhs - rhs)[0])
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
            difference = expand(definition - value)
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
            if not built_of_positives(replacement):
                # `d == N // 2` also says that N // 2 is at least 1 (d is a dim).
                self._facts.append(expand(replacement - 1))
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
        self._relying.clear()
        self._basis = None

    def _memo(self, question: str, a: Dim, b: Dim | None, answer: Callable[[], Any]) -> Any:
        key = (question, a, b)
        cached = self._answers.get(key)
        if cached is None:
            uses = self.relation_uses
            try:
                cached = answer()
            except TooComplex as error:
                cached = error
            except PrecisionExhausted:  # SymPy could not evaluate a huge number: past the budget
                cached = too_complex("too_complex_bits", MAX_BITS)
            self._answers[key] = cached
            if self.relation_uses != uses:
                self._relying.add(key)
        elif key in self._relying:
            self.relation_uses += 1
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
            replacement = expand(-rest / coefficient)
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
            self._facts.append(expand(larger - smaller - (1 if op in (">", "<") else 0)))
        else:
            self._unequal.append(expand(lhs - rhs))
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
                resolved[top] = expand(rule.xreplace(known) if known else rule)
                for mentioned in resolved[top].free_symbols:
                    self._users.setdefault(mentioned, set()).add(top)
        return resolved[sym]

    def _leaf_size(self, sym: Dim) -> Size | None:
        """The size a dim stands for once its rules are substituted (None: itself)."""
        if not self._has_rule(sym):
            return None
        size = self._resolved_sizes.get(sym)
        if size is None:
            size = self._resolved_sizes[sym] = estimate(self._resolve(sym))
        return size

    def check_size(self, dim: Dim) -> None:
        """TooComplex if the canonical form of ``dim`` would pass the budget (no expansion)."""
        estimate(dim, self._leaf_size)

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
        result = expand(dim.xreplace(known) if known else dim)
        if actual_bits(result) > MAX_BITS:  # the estimate is an upper bound; this is exact
            raise too_complex("too_complex_bits", MAX_BITS)
        return result

    def simplest(self, dim: Dim) -> Dim:
        """``dim`` rewritten by definitions and constraints (not bindings) when that makes
        it shorter (`(d + 1)//2` and `d - h` are `h` under `dim d = 2 * h`); else as it is."""
        known = {s: self._resolve(s, values=False) for s in dim.free_symbols
                 if self._has_rule(s, values=False)}
        if not known:
            return dim
        rewritten = expand(dim.xreplace(known))
        return rewritten if sympy.count_ops(rewritten) < sympy.count_ops(dim) else dim

    def equal(self, left: Dim, right: Dim) -> Verdict:
        if left == right:
            return Verdict.PROVED
        return self._memo("equal", left, right, lambda: self._equal(left, right))

    def _equal(self, left: Dim, right: Dim) -> Verdict:
        a, b = self.canonical(left), self.canonical(right)
        if a == b:
            return Verdict.PROVED
        difference = expand(a - b)
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
        if has_denominator(difference) and cancel(difference) == 0:
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
            expand(dim.xreplace({s: s + self._lower.get(s, 1) for s in symbols})))

    def _distinct_dims(self, left: Dim, right: Dim) -> bool:
        """Two different free dims are not equal (language.md, section 1)."""
        return left.is_Symbol and right.is_Symbol and left != right \
            and not self._relations and not self._opaque

    def _reduces_to_zero(self, difference: Dim) -> bool:
        return self._reduced(difference) == 0

    def _reduced(self, difference: Dim) -> Dim | None:
        """The remainder of ``difference`` modulo the relations (None: cannot tell)."""
        self.relation_uses += 1
        basis = self._relation_basis()
        return basis.remainder(difference) if basis is not None else None

    def _relation_basis(self) -> Basis | None:
        if self._basis is None:
            try:
                self._basis = self._build_basis()
            except TooComplex as error:
                self._basis = error
        if isinstance(self._basis, TooComplex):
            raise TooComplex(self._basis.detail)
        return self._basis

    def _build_basis(self) -> Basis:
        # Imported here: a spec whose proofs never need a basis never loads it (issue 36).
        from .groebner import Basis, Steps, checked_poly, groebner_basis

        # A relation stated before a later constraint eliminated one of its dims is
        # rewritten first, so that the basis speaks of the dims canonical forms use.
        polys = [p for p in (self.canonical(r) for r in self._relations) if p != 0]
        gens = tuple(sorted(set().union(*(p.free_symbols for p in polys)), key=lambda s: s.name))
        if not gens:
            return Basis((), ())
        poly_ring = ring(list(gens), QQ, lex)[0]
        converted = []
        for poly in polys:
            try:
                converted.append(checked_poly(poly_ring.from_expr(poly)))
            except (ValueError, sympy.polys.polyerrors.BasePolynomialError):
                continue  # no longer a polynomial (a floor came in): not used
        return Basis(gens, tuple(groebner_basis(converted, Steps())))

    def constant_ratio(self, left: Dim, right: Dim) -> Fraction | None:
        """``left / right`` when it is a number for every admissible size (`3*d` / `d`)."""
        def answer() -> Fraction | None:
            ratio = sympy.cancel(self.canonical(left) / self.canonical(right))
            return Fraction(int(ratio.p), int(ratio.q)) if ratio.is_Rational and ratio != 0 else None
        return self._memo("ratio", left, right, answer) or None

    def ratio_of_forms(self, left: Dim, right: Dim) -> Fraction | None:
        """``left / right`` when it is a number whatever sizes the fixed dims have (`2*d` /
        `d`; not `H` / `d` at `dim H = 6`, `dim d = 6`): derived dims substituted, values not."""
        def answer() -> Fraction | None:
            ratio = sympy.cancel(self._unvalued(left) / self._unvalued(right))
            return Fraction(int(ratio.p), int(ratio.q)) if ratio.is_Rational and ratio != 0 else None
        return self._memo("form_ratio", left, right, answer) or None

    def names_of_form(self, dim: Dim) -> set[str]:
        """The free dims ``dim`` is built of once derived dims are substituted, values not
        (`{h}` for `d` under `dim d = 2 * h`, even where `h = 5` is bound)."""
        return {s.name for s in self._unvalued(dim).free_symbols}

    def _unvalued(self, dim: Dim) -> Dim:
        known = {s: self._resolve(s, values=False) for s in dim.free_symbols
                 if self._has_rule(s, values=False)}
        return expand(dim.xreplace(known) if known else dim)

    def positive(self, dim: Dim) -> Verdict:
        """Is the dim expression a positive integer under every admissible binding?"""
        if dim.is_Symbol and dim not in self._values:
            return Verdict.PROVED  # a declared dim is positive by definition
        return self._memo("positive", dim, None, lambda: self._positive(dim))

    def _positive(self, dim: Dim) -> Verdict:
        if built_of_positives(dim):  # no expansion: `(N + 1)**64 * (d + 1)` is instant
            return Verdict.PROVED
        if self._positive_product(dim):  # before expansion, which loses the factors
            return Verdict.PROVED
        direct = self._bind_only(dim)
        if direct.is_number:
            return _number_verdict(direct)
        if self._positive_polynomial(direct) or self._positive_floor(direct) \
                or self._positive_relaxed(direct) or self._positive_product(direct):
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
        every admissible size, so is ``dim``, an integer: it is at least 1. A floor by a
        size (`T // (T // 64)`: Hiera's tokens per window, its count of windows computed from
        `T`) is bounded by ``0 <= p // q <= p`` where both are positive integers."""
        if not dim.has(sympy.floor):
            return False
        relaxed: list[Dim] = []
        for term in sympy.Add.make_args(expand(dim)):
            coefficient, rest = term.as_coeff_Mul()
            if not coefficient.is_Integer:
                return False
            if isinstance(rest, sympy.floor):
                numerator, denominator = sympy.fraction(sympy.together(rest.args[0]))
                if not self._integer_valued(numerator):
                    return False
                if not denominator.is_Integer:
                    bound = self._floor_by_size_bound(numerator, denominator, coefficient > 0)
                    if bound is None:
                        return False
                    relaxed.append(coefficient * bound)
                    continue
                if denominator <= 0:
                    return False
                low = (numerator - denominator + 1) / denominator
                relaxed.append(coefficient * (low if coefficient > 0 else numerator / denominator))
            elif rest.has(sympy.floor) or not self._integer_valued(rest):
                return False
            else:
                relaxed.append(term)
        bound = expand(sympy.Add(*relaxed))
        return bool(bound > 0) if bound.is_number else self._definite(bound)

    def _floor_by_size_bound(self, numerator: Dim, denominator: Dim, low: bool) -> Dim | None:
        """The bound of ``numerator // denominator`` by a size (not a number) that makes a sum
        smallest: 0 below, ``numerator`` above; None unless both are positive integers."""
        if self.positive(denominator) is not Verdict.PROVED \
                or self.positive(numerator) is not Verdict.PROVED:
            return None
        return sympy.Integer(0) if low else numerator

    def _positive_by_fact(self, dim: Dim) -> bool:
        """``dim = fact + p`` with ``fact >= 0`` (an inequality) and ``p`` provably
        positive: then ``dim`` is positive too."""
        return any(
            self._positive_polynomial(expand(dim - self.canonical(fact)))
            for fact in self._facts
        )

    def _positive_floor(self, dim: Dim) -> bool:
        """`p // q` is at least 1 exactly when `p >= q`, i.e. when `p - q + 1` is positive."""
        if not isinstance(dim, sympy.floor):
            return False
        numerator, denominator = numer_denom(dim.args[0])
        return bool(self.positive(denominator)) and bool(
            self.positive(expand(numerator - denominator + 1)))

    def _positive_product(self, dim: Dim) -> bool:
        """A product of positive integers is one (a flattened map's `(T//5) * (S//5)`, each
        floor positive on its own; an overlapping convolution's `(T//2 - 1) * (S//2 - 1)`,
        each factor positive where `T >= 4`, as the product's expansion is not)."""
        if isinstance(dim, sympy.Pow):  # a flattened square map's `(T//2)**2`
            base, exponent = dim.args
            return exponent.is_Integer and int(exponent) > 0 and \
                self.positive(base) is Verdict.PROVED
        return isinstance(dim, sympy.Mul) and all(
            self.positive(factor) is Verdict.PROVED for factor in dim.args)

    def _bind_only(self, dim: Dim) -> Dim:
        values = {s: sympy.Integer(v) for s, v in self._values.items() if s in dim.free_symbols}
        return expand(dim.xreplace(values) if values else dim)

    def _positive_polynomial(self, dim: Dim) -> bool:
        """Every dim is >= its lower bound (1 unless constrained): shift and look at signs."""
        shifted = self._shifted(dim)
        if shifted is None:  # SymPy's own positivity, where it is cheap enough to ask
            return affordable(dim) and bool(dim.is_positive) and bool(dim.is_integer)
        coefficients, constant = shifted
        if not all(c.is_integer and c >= 0 for c in coefficients):
            return False
        return constant > 0 and self._integer_valued(dim)

    def _integer_valued(self, dim: Dim) -> bool:
        symbols = sorted(dim.free_symbols, key=lambda s: s.name)
        if not symbols:
            return bool(dim.is_integer)
        return all(c.is_integer for c in _coefficients(expand(dim))[0])

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
        `--dim` values); never a bare number, which would hide the dims. With bindings the
        spec's relations are those of :meth:`without_bindings` (bound, `D == H * d` solves
        `d` to a number, and the name would be lost)."""
        if self.bindings:
            unbound = self.without_bindings()
            if unbound is not self:
                named = unbound._named_quotient(numerator, denominator)
                if named is not None and named.free_symbols <= set(self._symbols.values()):
                    return named
        for top, bottom in ((self._unvalued(numerator), self._unvalued(denominator)),
                            (self.canonical(numerator), self.canonical(denominator))):
            rewritten = exact_quotient(top, bottom)
            for name, info in self.dims.items():
                if info.kind == "derived" and self._unvalued(self._symbols[name]) == rewritten:
                    return self._symbols[name]
            for name, info in self.dims.items():
                # A free dim a constraint solves for (`d` is `D/H` once D and H are bound).
                sym = self._symbols[name]
                if info.kind == "free" and self._has_rule(sym, values=False) \
                        and self._unvalued(sym) == rewritten:
                    return sym
            if sympy.fraction(rewritten)[1] == 1 and not rewritten.is_number:
                return rewritten
        return None

    def named(self, dim: Dim) -> Dim:
        """``dim`` by the name the spec gives it: `hd` for `2*h` under `dim hd = 2 * h`
        (a derived dim whose definition it is, without the bindings); else as it is."""
        if dim.is_Symbol or dim.is_number:
            return dim
        target = self._unvalued(dim)
        for name, info in self.dims.items():
            if info.kind == "derived" and self._unvalued(self._symbols[name]) == target:
                return self._symbols[name]
        return dim

    def _unvalued(self, dim: Dim) -> Dim:
        """``dim`` with derived dims and eliminations substituted, but no value."""
        known = {s: self._resolve(s, values=False) for s in dim.free_symbols
                 if self._has_rule(s, values=False)}
        return expand(dim.xreplace(known) if known else dim)

    def _divides(self, numerator: Dim, denominator: Dim) -> Verdict:
        top, bottom = self.canonical(numerator), self.canonical(denominator)
        if monomial_quotient(top, bottom) is not None:
            return Verdict.PROVED
        if bottom == 0:
            return Verdict.DIFFERENT
        quotient = cancel(top / bottom)
        if quotient.is_number:
            return Verdict.PROVED if quotient.is_integer else Verdict.DIFFERENT
        symbols = sorted(quotient.free_symbols, key=lambda s: s.name)
        if quotient.is_polynomial(*symbols) and self._integer_valued(quotient):
            return Verdict.PROVED
        # e.g. a product of dims and floor divisions (SymPy's assumptions: where affordable)
        if affordable(quotient) and quotient.is_integer:
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

    def least(self, name: str) -> int:
        """The least size a constraint allows the dim (`constraint S >= 512`: 512; 1 where
        none bounds it from below)."""
        sym = self._symbols.get(name)
        return 1 if sym is None else self._lower.get(sym, 1)

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
        if claim.kind in ("equal", "broadcasts"):
            return self.equal(claim.left, claim.right)
        if claim.kind == "divides":
            return self.divides(claim.left, claim.right)
        if claim.kind == "positive":
            return self.positive(claim.left)
        return self.at_most(claim.left, claim.right)

    def at_most(self, left: Dim, right: Dim) -> Verdict:
        """Is ``left <= right`` for every admissible size? (``right - left + 1`` is a size.)"""
        return self.positive(expand(right - left + 1))

    def changed_since(self, before: DimSystem) -> DimChanges:
        """The dims about which this system may answer a question otherwise than ``before``
        did, so that a statement whose shapes and names involve none of them checks as
        it did (the language server re-checks only the others after a `dim` or
        `constraint` edit); and the dims of the relations ``before`` had and this one
        has not, which change the answers that reduced modulo them (``relation_uses``).

        A dim is unchanged when it has the same kind, canonical form (definitions,
        bindings and eliminations substituted) and lower bound in both, and every
        inequality, `!=` and floor equation that mentions it is in both. Relations (the
        Gröbner basis's equations) may be added: a question answered "proved" under fewer
        relations is answered so under more, and a question that was not proved gave its
        statement a diagnostic, which is checked again anyway. A derived dim added,
        removed or redefined changes the dims of its definition too (a quotient is shown
        by the name the spec gives it).
        """
        changed: set[str] = set()
        for name in self.dims.keys() | before.dims.keys():
            if self._meaning_of(name) != before._meaning_of(name):
                changed.add(name)
        for mine, theirs in ((self, before), (before, self)):
            derived = {n: i.definition for n, i in mine.dims.items() if i.kind == "derived"}
            for name, definition in derived.items():
                other = theirs.dims.get(name)
                if other is None or other.kind != "derived" or other.definition != definition:
                    changed |= {name} | free_names(definition) if definition is not None \
                        else {name}
            for expressions, others in ((mine._facts, theirs._facts),
                                        (mine._unequal, theirs._unequal),
                                        (mine._opaque, theirs._opaque)):
                for expression in set(expressions) - set(others):
                    changed |= free_names(expression)
        lost: set[str] = set()
        for relation in set(before._relations) - set(self._relations):
            lost |= free_names(relation)
        return DimChanges(frozenset(changed), frozenset(lost))

    def answers_as(self, before: DimSystem) -> bool:
        """Whether this system answers every question as ``before`` did: no dim changed
        (``changed_since``) and the same relations (a relation added may prove what was
        not proved before, which a pass that reports nothing unproved would miss)."""
        changes = self.changed_since(before)
        return not changes.dims and not changes.relations and \
            set(self._relations) == set(before._relations)

    def _meaning_of(self, name: str) -> tuple[Any, ...] | None:
        info, sym = self.dims.get(name), self._symbols.get(name)
        if info is None or sym is None:
            return None
        try:
            canonical: Dim | None = self.canonical(sym)
        except TooComplex:
            canonical = None
        return (info.kind, canonical, self._lower.get(sym, 1))

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
        copy._relying = set(self._relying)
        return copy


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


class DimChanges(NamedTuple):
    """What :meth:`DimSystem.changed_since` found: dims whose answers may differ, and the
    dims of removed relations (only answers that used a relation may differ there)."""

    dims: frozenset[str]
    relations: frozenset[str]


class ConstraintOutcome(Record, frozen=True):
    status: str  # "ok", "trivial", "violated", "unsatisfiable"
    values: tuple[str, str, str] | None = None
    unknown: str | None = None  # "unsatisfiable": the dim no positive integer can be


# --- for the report: how a fact was proved, and cost expressions ------------------------------
#
# The report explains each check the way the notes teach it ("inner d = d, by the
# constraint on line 9"). These helpers retrace the checker's own reasoning in stages, so
# the explanation names the smallest kind of fact that was needed; the verdict itself is
# always the checker's (DimSystem.equal / divides), never recomputed differently.


class Proof(Record, frozen=True):
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
    return _explain(system, (left, right), lambda a, b: expand(a - b) == 0)


def explain_divides(system: DimSystem, numerator: Dim, denominator: Dim) -> Proof:
    try:
        verdict = system.divides(numerator, denominator)
    except TooComplex:
        return Proof(Verdict.UNPROVED, "")
    if not verdict:
        return Proof(verdict, "")

    def exact(top: Dim, bottom: Dim) -> bool:
        quotient = cancel(top / bottom)
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
        current = [expand(d.xreplace(replacements)) for d in current]
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
        expanded = expand(expanded)
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
