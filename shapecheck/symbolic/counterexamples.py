"""Claims, counterexamples and the weakest constraint.

A claim the checker cannot prove is *refuted* when a bounded search finds an
admissible size where it fails (deterministic: no clock, no randomness), or left
*undetermined*; either way the weakest constraint that makes it hold is offered
when the checker can then prove it. ``draw_bindings`` proposes sizes for the free
dims a spec leaves to choose.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeAlias

import sympy

from ..records import NamedTuple
from ..messages.diagnostics import Span
from .budget import MAX_EXPONENT, TooComplex, expand
from .dims import ONE, Dim, Verdict, built_of_positives, free_names, is_name, spaced, symbol, to_text

if TYPE_CHECKING:
    from .proofs import DimSystem


# Assignments tried per claim, smallest sums first: enough for every counterexample
# with a few small dims (the common case), and a fixed amount of work on any input.
REFUTATION_POINTS = 2000

Env: TypeAlias = "dict[Dim, int]"


class Claim(NamedTuple):
    """A fact about dims that a statement needs.

    ``kind``: ``equal`` (left == right), ``divides`` (right divides left),
    ``positive`` (left is a positive integer), ``at_most`` (left <= right),
    ``broadcasts`` (two sizes of one broadcast axis: proved as ``equal``, since only
    the literal 1 broadcasts, but it fails only at sizes where neither is 1 -- at 1
    NumPy broadcasts, so that is no counterexample).
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

    @classmethod
    def broadcasts(cls, left: Dim, right: Dim) -> Claim:
        return cls("broadcasts", left, right)

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
    # Declared free dims that could be the quotient instead of the new one (`d` in
    # `constraint D == H * d` when the spec declares `d` and no constraint ties it):
    # further candidates, each verified like the first (shapecheck.fixcheck).
    reuse: tuple[str, ...] = ()

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


def _within(question: Callable[[], Any]) -> Any:
    """The answer, or None when finding it would pass the budget (for what is only
    extra: a counterexample, a suggestion)."""
    try:
        return question()
    except (TooComplex, _Unsupported):
        return None


def _evaluator(dim: Dim) -> Callable[[Env], Fraction | int]:
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
        parts = [_evaluator(arg) for arg in dim.args]
        if dim.is_Add:
            return lambda env: sum(part(env) for part in parts)
        return lambda env: math.prod(part(env) for part in parts)
    if dim.is_Pow and dim.exp.is_Integer and abs(int(dim.exp)) <= MAX_EXPONENT:
        base, exponent = _evaluator(dim.base), int(dim.exp)
        if exponent >= 0:
            return lambda env: base(env) ** exponent
        return lambda env: Fraction(1) / Fraction(base(env)) ** -exponent
    if isinstance(dim, sympy.floor):
        inner = _evaluator(dim.args[0])
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
    if kind == "broadcasts":
        left, right = sides
        return lambda env: left(env) != right(env) and left(env) != 1 and right(env) != 1
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
    for term in sympy.Add.make_args(expand(dim)):
        if term.is_Integer:
            rest += term
        else:
            terms.append(term)
    if len(terms) == 1 and terms[0].is_Symbol:
        return terms[0], int(rest)
    return None


class Refutation:
    """The part of :class:`~.proofs.DimSystem` that refutes: the three-way verdict
    (:meth:`decide`), the counterexample search and the weakest constraint."""

    def decide(self: DimSystem, claim: Claim, taken: Iterable[str] = ()) -> Decision:
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

    def decide_definition(self: DimSystem, name: str, claim: Claim,
                          taken: Iterable[str] = ()) -> Decision:
        """:meth:`decide` for a claim about the definition of the derived dim ``name``
        (``dim NBh = NB // 2`` is a positive integer), once every constraint of the spec
        is known -- constraints are facts about the whole spec, wherever they stand. The
        definition is what is in question, so the trial does not assume the dim is a
        size (that would make every failing size inadmissible)."""
        trial = self.fork()
        sym = trial._symbols.get(name)
        if sym is not None:
            trial._derived.pop(sym, None)
        return trial.decide(claim, taken)

    def counterexample(self: DimSystem, claim: Claim) -> Counterexample | None:
        """The admissible assignment of the claim's free dims with the smallest sum
        (then the first in name order) where the claim fails, if one is found among
        the first REFUTATION_POINTS assignments. Deterministic: no clock, no randomness."""
        sides = [self.canonical(d) for d in claim.dims]
        roots = set().union(*(s.free_symbols for s in sides))
        if not roots:
            return None
        try:
            fails = _failure_test(claim.kind, [_evaluator(s) for s in sides])
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

    def _admissible(self: DimSystem, roots: set[Dim]) -> tuple[list[Callable[[Env], bool]], set[Dim]]:
        """The conditions an assignment of ``roots`` must meet to be admissible, and the
        dims they involve: relations hold, inequalities hold, and every dim a constraint
        or a definition expresses through them is a positive integer (at least its bound)."""
        equations = [(r, _is_zero) for r in self._relations]
        equations += [(self.canonical(f), _is_non_negative) for f in self._facts]
        equations += [(self.canonical(u), _is_non_zero) for u in self._unequal]
        for sym, replacement in (*self._eliminated.items(), *self._derived.items()):
            size = self.canonical(replacement) - self._lower.get(sym, 1) + 1
            if sym not in self._values and not built_of_positives(size):
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
                evaluate = _evaluator(expression)
                chosen.append(lambda values, c=evaluate, t=test: t(c(values)))
                new = expression.free_symbols - variables
                variables |= new
                pending.extend(new)
        return chosen, variables

    def _described(self: DimSystem, claim: Claim, sides: list[Dim], values: dict[Dim, int]) -> Counterexample:
        """The counterexample as the user reads it: the dims the claim names (evaluated
        through definitions and constraints), the free dims it reduces to, and any other
        dim a constraint ties to them that is not at its smallest size."""
        shown: dict[str, int] = {}
        for sym in set().union(*(d.free_symbols for d in claim.dims)):
            expression = self.canonical(sym)
            if not expression.free_symbols <= values.keys():
                continue  # it cancelled out of the claim (`H // (H*d)`): any size will do
            value = _evaluator(expression)(values)
            if _is_integer(value):
                shown[sym.name] = int(value)
        for sym, value in values.items():
            # A dim only a constraint ties to the claim is shown when it matters (not 1).
            if any(sym in s.free_symbols for s in sides) or value != self._lower.get(sym, 1):
                shown.setdefault(sym.name, value)
        evaluated = tuple(_number_text(_evaluator(s)(values)) for s in sides)
        return Counterexample(tuple(sorted(shown.items())), evaluated)

    def weakest_constraint(self: DimSystem, claim: Claim, taken: frozenset[str] = frozenset()) -> Needed | None:
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

    def _unconstrained(self: DimSystem, *claim: Dim) -> tuple[str, ...]:
        """Free dims the spec declares that no constraint or binding ties and the claim
        does not name: the candidates for a quotient the spec may already have named."""
        tied = set().union(*(free_names(d) for d in claim))
        for use in self.constraints:
            if use.sides is not None:
                tied |= free_names(use.sides[0]) | free_names(use.sides[2])
        return tuple(name for name, info in self.dims.items()
                     if info.kind == "free" and name not in tied and name not in self.bindings)[:3]

    def _needed(self: DimSystem, claim: Claim, taken: frozenset[str]) -> Needed | None:
        left, right = claim.left, claim.right
        if claim.kind in ("equal", "broadcasts"):
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
                          (left, "==", right * quotient), self._unconstrained(left, right))
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
        terms = sympy.Add.make_args(expand(right - left))
        larger = sympy.Add(*[t for t in terms if not t.could_extract_minus_sign()])
        smaller = sympy.Add(*[-t for t in terms if t.could_extract_minus_sign()])
        if larger == 0:
            return Needed((), spaced(to_text(left)), "<=", spaced(to_text(right)), (left, "<=", right))
        if smaller.is_Integer:
            return Needed((), spaced(to_text(larger)), ">=", to_text(smaller), (larger, ">=", smaller))
        return Needed((), spaced(to_text(smaller)), "<=", spaced(to_text(larger)), (smaller, "<=", larger))


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
    least = {name: system.least(name) for name in names}

    def lifted(sizes: dict[str, int]) -> dict[str, int]:
        # a size below a dim's least (`constraint S >= 512`, a relative table's span that
        # torch guards) is drawn again above it: `least + size - 1`, so sizes still differ
        return {n: v if v >= least[n] else least[n] + v - 1 for n, v in sizes.items()}

    extra = range(max(DISTINCT_SIZES) + 1, max(DISTINCT_SIZES) + 1 + len(names))
    yield lifted(dict(zip(names, (*DISTINCT_SIZES, *extra))))
    yield lifted({name: SQUARE_SIZE for name in names})
    rng = random.Random(seed)
    while True:
        yield lifted({name: rng.randint(1, high) for name in names})
