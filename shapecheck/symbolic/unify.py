"""Inference: unification over dims."""

from __future__ import annotations

from collections.abc import Iterable

import sympy

from ..messages.diagnostics import Span
from .budget import expand
from .counterexamples import Claim, Decision
from .dims import Dim, Verdict, built_of_positives, monomial_quotient
from .proofs import DimSystem


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
        if monomial_quotient(top, bottom) is not None:
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
                 if a in self._unknowns and a not in b.free_symbols and built_of_positives(b)]
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

    def decide_definition(self, name: str, claim: Claim, taken: Iterable[str] = ()) -> Decision:
        # Inference reads only whether a definition fails: no trial system of its own.
        return self.decide(claim, taken)

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
        return expand(result) if summed else result

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
        difference = expand(self.resolved(left) - self.resolved(right))
        # Sizes are never 0: a factor common to every term can go (`M*k - M*k2`).
        kept = [f for f in sympy.Mul.make_args(sympy.factor_terms(difference))
                if not (f.is_number or built_of_positives(f))]
        if len(kept) == 1:
            difference = expand(kept[0])
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
            solution = expand(-rest / coefficient)
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
            expression = expand(self.resolved(first))
            found = [u for u in expression.free_symbols & self._unknowns.keys()
                     if expression.coeff(u) == 1]
            if len(found) != 1:
                return False
            target, value = found[0], expand(found[0] - expression)
        if target not in self._unknowns or target in value.free_symbols \
                or self.positive(value + 1) is not Verdict.PROVED:
            return False
        self._bind(target, value + self.unknown())
        return True

    def _bind(self, sym: Dim, value: Dim) -> None:
        self.links[sym] = (value, self.at)
        self._eliminate(sym, value, None)
