"""Masks and score changes as formulas over integer positions, and what can be proved of them.

A mask function's body (`(k <= q) & (q - k < W)`) becomes a SymPy formula over the position
variables and the dims; the reads of inputs (`pad[k]`, `doc[q] == doc[k]`) are opaque atoms.
A claim is an implication over every admissible size and position. It is **proved** when no
conjunct of its negation (in disjunctive normal form) is feasible: each conjunct's linear
literals are eliminated by Fourier-Motzkin over the rationals (infeasible over the rationals is
infeasible over the integers; literals on integers are tightened first, `a < b` as
`a + 1 <= b`), the opaque atoms only being checked for contradiction. It is **refuted** when a
search over small sizes finds a counterexample, and **undetermined** otherwise: never a guess.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from fractions import Fraction

import sympy
from sympy.logic.boolalg import Boolean, BooleanFalse, BooleanTrue

from ..records import Record
from ..syntax import nodes

# The counterexample search: sizes 1..SEARCH_SIZE for every dim, every position in range.
SEARCH_SIZE = 6
SEARCH_CASES = 60  # admissible size choices tried, the smallest first
SEARCH_CELLS = 5000  # points (sizes and positions) a search evaluates at most
# Past this many conjuncts in a negation's normal form the proof gives up (undetermined).
MAX_CONJUNCTS = 256

_RELATIONS = {"==": sympy.Eq, "!=": sympy.Ne, "<": sympy.Lt, "<=": sympy.Le,
              ">": sympy.Gt, ">=": sympy.Ge}
_FUNCTIONS = {"tanh": sympy.tanh, "exp": sympy.exp, "log": sympy.log, "sqrt": sympy.sqrt,
              "abs": sympy.Abs, "sin": sympy.sin, "cos": sympy.cos}


class Unsupported(Exception):
    """A part of a body that has no formula (a tensor product, a reduction)."""


class Outcome(Record, frozen=True):
    """``status``: "proved", "refuted" or "undetermined". ``sizes`` and ``positions``: the
    counterexample (dim and position values); ``inputs``: input reads it sets; ``detail``:
    what a refutation shows or what would decide an undetermined claim."""

    status: str
    sizes: tuple[tuple[str, int], ...] = ()
    positions: tuple[tuple[str, int], ...] = ()
    inputs: tuple[tuple[str, bool], ...] = ()
    detail: str = ""
    depends: tuple[str, ...] = ()  # undetermined: the inputs whose values decide


class Space(Record):
    """Where a claim is asked: the position variables with their ranges, the dims, the
    constraints the spec states."""

    dims: dict[str, sympy.Symbol] = field(default_factory=dict)
    positions: dict[str, sympy.Symbol] = field(default_factory=dict)
    ranges: dict[str, sympy.Expr] = field(default_factory=dict)  # position -> its size
    constraints: list[Boolean] = field(default_factory=list)
    # Inputs a counterexample may set (bool masks, int ids: any value is one a caller can
    # pass); a claim that fails only for some real values (ALiBi's slopes) is undetermined.
    choosable: set[str] = field(default_factory=set)

    def dim(self, name: str) -> sympy.Symbol:
        if name not in self.dims:
            self.dims[name] = sympy.Symbol(name, integer=True, positive=True)
        return self.dims[name]

    def position(self, name: str, size: sympy.Expr) -> sympy.Symbol:
        symbol = sympy.Symbol(name, integer=True)
        self.positions[name] = symbol
        self.ranges[name] = size
        return symbol

    def hypotheses(self, read: set[sympy.Basic]) -> Boolean:
        """The constraints, and the range of each position in ``read`` (a position a claim
        does not read is any in its range)."""
        parts: list[Boolean] = list(self.constraints)
        for name, symbol in self.positions.items():
            if symbol in read:
                parts += [sympy.Ge(symbol, 0), sympy.Lt(symbol, self.ranges[name])]
        return sympy.And(*parts)


def size_expr(text_or_dim: object, space: Space) -> sympy.Expr:
    """A size (a dim of the checked program, SymPy already) with its symbols in ``space``."""
    expr = sympy.sympify(text_or_dim)
    return expr.subs({s: space.dim(s.name) for s in expr.free_symbols})


class Formulas:
    """Syntax → formula, for one function: ``bound`` maps its parameters to symbols (or
    formulas), dims resolve in ``space``, ``inputs`` are the names read as opaque atoms."""

    def __init__(self, space: Space, bound: Mapping[str, sympy.Expr], inputs: Iterable[str],
                 bools: Iterable[str] = ()) -> None:
        self.space = space
        self.bound = dict(bound)
        self.inputs = set(inputs)
        self.bools = set(bools)

    def of(self, node: nodes.Expr) -> sympy.Basic:
        node = nodes.strip_parens(node)
        if isinstance(node, nodes.Name):
            if node.name in self.bound:
                return self.bound[node.name]
            if node.name in self.inputs:
                return self._read(node.name, ())
            return self.space.dim(node.name)
        if isinstance(node, nodes.Integer):
            return sympy.Integer(node.value)
        if isinstance(node, nodes.Decimal):
            return sympy.Float(node.value)
        if isinstance(node, nodes.Inf):
            return sympy.oo
        if isinstance(node, nodes.Boolean):
            return sympy.true if node.value else sympy.false
        if isinstance(node, nodes.Unary):
            operand = self.of(node.operand)
            if node.op == "~":
                return sympy.Not(operand)
            return -operand if node.op == "-" else operand
        if isinstance(node, nodes.BinOp):
            return self._binop(node)
        if isinstance(node, nodes.Subscript) and isinstance(node.operand, nodes.Name) \
                and node.operand.name in self.inputs:
            return self._read(node.operand.name, tuple(self.of(i) for i in node.indices))  # type: ignore[arg-type]
        chained = _chained_read(node, self.inputs, self.bound)
        if chained is not None:  # `x[:, 0][ids[k]]`, `ids[k]` of a value the spec defines
            name, indices = chained
            return self._read(name, tuple(self.of(i) for i in indices))
        flat = _flattened_input(node, self.inputs)
        if flat is not None:  # `reshape(pad, [B * T])[b * T + k]`: a read of pad, opaque
            return self._read(flat, tuple(self.of(i) for i in node.indices))  # type: ignore[attr-defined]
        if isinstance(node, nodes.Call):
            return self._call(node)
        raise Unsupported(type(node).__name__)

    def _read(self, name: str, indices: tuple[sympy.Basic, ...]) -> sympy.Basic:
        value = sympy.Function(name)(*indices) if indices else sympy.Symbol(name)
        # A bool input's entry is true or false: the atom `pad(k) != 0`.
        return sympy.Ne(value, 0) if name in self.bools else value

    def _binop(self, node: nodes.BinOp) -> sympy.Basic:
        left, right = self.of(node.left), self.of(node.right)
        if node.op in _RELATIONS:
            return _relation(node.op, left, right)
        if node.op == "&":
            return sympy.And(left, right)
        if node.op == "|":
            return sympy.Or(left, right)
        arithmetic = {"+": lambda a, b: a + b, "-": lambda a, b: a - b,
                      "*": lambda a, b: a * b, "/": lambda a, b: a / b,
                      "//": lambda a, b: sympy.floor(a / b), "%": sympy.Mod,
                      "**": lambda a, b: a ** b}
        if node.op in arithmetic:
            return arithmetic[node.op](left, right)
        raise Unsupported(node.op)

    def _call(self, node: nodes.Call) -> sympy.Basic:
        name = node.func.name
        args = [self.of(a) for a in node.args]
        if name in _FUNCTIONS and len(args) == 1:
            return _FUNCTIONS[name](args[0])
        if name == "where" and len(args) == 3:
            return sympy.Piecewise((args[1], args[0]), (args[2], True))
        if name in ("minimum", "maximum") and len(args) == 2:
            return (sympy.Min if name == "minimum" else sympy.Max)(*args)
        raise Unsupported(name)


def _chained_read(node: nodes.Expr, inputs: set[str], bound: Mapping[str, sympy.Expr]
                  ) -> tuple[str, list[nodes.Expr]] | None:
    """A read the plain form does not cover, as its tensor and one index per axis: a chain
    whose earlier subscripts leave whole axes (`x[:, 0][i]` reads `x[i, 0]`; the later
    indices fill the `:` in order, then the axes after), or a read of a value the spec
    defines rather than declares (`ids = repeat(...)`; `ids[k]`): a subscripted name is a
    tensor, never a position or a dim. Each entry is opaque like an input's; None for any
    other form (a slice with bounds, a step, a new axis)."""
    if not isinstance(node, nodes.Subscript):
        return None
    chain: list[tuple[nodes.Index, ...]] = []
    base: nodes.Expr = node
    while isinstance(base, nodes.Subscript):
        chain.append(base.indices)
        base = nodes.strip_parens(base.operand)
    if not isinstance(base, nodes.Name) or base.name in bound \
            or len(chain) == 1 and base.name in inputs:
        return None
    placed: list[nodes.Index] = []
    for indices in reversed(chain):  # the innermost subscript first
        given = list(indices)
        for slot, entry in enumerate(placed):
            if _whole(entry) and given:
                placed[slot] = given.pop(0)
        placed += given
    if any(isinstance(entry, (nodes.Slice, nodes.EllipsisIndex, nodes.NewAxis))
           for entry in placed):
        return None
    return base.name, placed  # type: ignore[return-value]


def _whole(entry: object) -> bool:
    """`:`, an axis taken whole."""
    return isinstance(entry, nodes.Slice) and entry.start is None and entry.stop is None \
        and entry.step is None


def _flattened_input(node: nodes.Expr, inputs: set[str]) -> str | None:
    """The input a read of its flattened form reads (`reshape(x, [B * T])[i]`, how a read
    by several positions is written: Hugging Face's `padding_mask[batch_idx, kv_idx]`), else
    None. Its entry is an input's value like any other: opaque, which a claim reads with
    every input letting the key through."""
    if not isinstance(node, nodes.Subscript) or len(node.indices) != 1:
        return None
    operand = nodes.strip_parens(node.operand)
    if not (isinstance(operand, nodes.Call) and operand.func.name == "reshape"
            and len(operand.args) == 2):
        return None
    source = nodes.strip_parens(operand.args[0])
    return source.name if isinstance(source, nodes.Name) and source.name in inputs else None


def _relation(op: str, left: sympy.Basic, right: sympy.Basic) -> sympy.Basic:
    """A comparison; `abs(x) <= w` as `-w <= x <= w` (and the like), which linear reasoning
    reads (attention-gym's dilated window compares `abs(q - k)`)."""
    flipped = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
    if isinstance(right, sympy.Abs) and not isinstance(left, sympy.Abs) and op in flipped:
        op, left, right = flipped[op], right, left
    if isinstance(left, sympy.Abs) and op in flipped:
        x = left.args[0]
        if op in ("<", "<="):
            return sympy.And(_RELATIONS[op](x, right), _RELATIONS[op](-x, right))
        return sympy.Or(_RELATIONS[op](x, right), _RELATIONS[op](-x, right))
    return _RELATIONS[op](left, right)


# --- the decision ---------------------------------------------------------------------------


def permissive(formula: sympy.Basic, atoms: Iterable[sympy.Basic]) -> sympy.Basic:
    """``formula`` with every input read letting the key through (each occurrence, in
    negation normal form, made true): what the positions alone allow."""
    nnf = sympy.to_nnf(formula, simplify=False) if isinstance(formula, Boolean) else formula
    atoms = set(atoms)
    return nnf.xreplace({**{sympy.Not(a): sympy.true for a in atoms},
                         **{a: sympy.true for a in atoms}})


def input_atoms(formula: sympy.Basic) -> set[sympy.Basic]:
    """The relational atoms that read an input (an applied function or an input symbol)."""
    found = set()
    for atom in formula.atoms(sympy.core.relational.Relational):
        if atom.atoms(sympy.core.function.AppliedUndef):
            found.add(atom)
    return found


def prove(space: Space, claim: Boolean) -> Outcome:
    """``claim`` for every admissible size and every position in range."""
    hypotheses = space.hypotheses(claim.free_symbols)
    negation = sympy.And(hypotheses, sympy.Not(claim))
    if _infeasible(negation, space):
        return Outcome("proved")
    found = _search(space, negation)
    if found is not None:
        return found
    return Outcome("undetermined", detail=_nonlinear(negation), depends=_inputs_read(negation))


def prove_nonempty(space: Space, mask: Boolean, query: str, key: str,
                   candidates: Sequence[sympy.Expr]) -> Outcome:
    """Every query in range sees at least one key in range. Proved when one key, a formula
    of the query (``candidates``: the diagonal, the first key, the last), is seen by every
    query; refuted by a query that no key of the search lets through."""
    q, k = space.positions[query], space.positions[key]
    size_k = space.ranges[key]
    for candidate in candidates:
        claim = sympy.And(sympy.Ge(candidate, 0), sympy.Lt(candidate, size_k),
                          mask.xreplace({k: candidate}))
        inner = Space(space.dims, {query: q}, {query: space.ranges[query]}, space.constraints)
        if prove(inner, claim).status == "proved":
            return Outcome("proved")
    atoms = input_atoms(mask)
    read = mask.free_symbols | space.ranges[query].free_symbols | size_k.free_symbols
    for sizes in _sizes(space, read):
        for qv in range(_int(space.ranges[query].xreplace(sizes))):
            keys = _int(size_k.xreplace(sizes))
            row = [mask.xreplace({**sizes, q: sympy.Integer(qv), k: sympy.Integer(kv)}) for kv in range(keys)]
            if all(_decided(permissive(cell, atoms), False) or _empty(cell, space)
                   for cell in row):
                return Outcome("refuted", _named(sizes), ((query, qv),))
    return Outcome("undetermined", depends=_inputs_read(mask))


def _empty(cell: sympy.Basic, space: Space) -> bool:
    """No value of the integer inputs ``cell`` reads lets it through (`(q >= iv(j, 0)) & (q <
    iv(j, 0))` is never true, whatever `iv` holds); a cell reading no input or another input
    is not judged."""
    unknown = _as_unknowns(cell, space)
    return unknown is not None and bool(cell.atoms(sympy.core.function.AppliedUndef)) \
        and _infeasible(unknown, space)


def _as_unknowns(formula: sympy.Basic, space: Space) -> sympy.Basic | None:
    """``formula`` with each entry of the integer inputs it reads (``space.choosable``: ints
    and bools) an unknown integer, one entry read twice one unknown; None where it reads
    another input, whose entries are not integers."""
    reads = sorted(formula.atoms(sympy.core.function.AppliedUndef), key=sympy.default_sort_key)
    if any(r.func.__name__ not in space.choosable for r in reads):
        return None
    return formula.xreplace({read: sympy.Symbol(f"_entry{i}", integer=True)
                             for i, read in enumerate(reads)})


def never_true(space: Space, formula: Boolean) -> bool:
    """No position in range, at no admissible size, with no value of the integer inputs it
    reads (each entry an unknown integer, one entry read twice one unknown), makes
    ``formula`` true. A formula reading another input is not judged."""
    unknown = _as_unknowns(formula, space)
    return unknown is not None and _infeasible(
        sympy.And(space.hypotheses(formula.free_symbols), unknown), space)


def score_at_masked(space: Space, score: sympy.Expr, variable: sympy.Symbol) -> Outcome:
    """A score change keeps a masked score masked: at −inf it gives −inf."""
    value = score.xreplace({variable: -sympy.oo})
    opaque = {f: sympy.Symbol(f"_{i}", real=True)
              for i, f in enumerate(value.atoms(sympy.core.function.AppliedUndef))}
    value = sympy.simplify(value.xreplace(opaque))
    if value == -sympy.oo:
        return Outcome("proved")
    if value.has(sympy.nan, sympy.zoo) or value.has(sympy.oo) or value.has(-sympy.oo):
        return Outcome("undetermined", detail=str(value))
    return Outcome("refuted", detail=sympy.sstr(value.xreplace({v: k for k, v in opaque.items()})))


def _infeasible(formula: Boolean, space: Space) -> bool:
    """No integer point satisfies ``formula`` (sound: False may only mean "not shown")."""
    formula = _expand_ne(formula)
    if formula is sympy.false:
        return True
    try:
        dnf = sympy.to_dnf(formula, simplify=False)
    except (TypeError, ValueError):
        return False
    conjuncts = dnf.args if isinstance(dnf, sympy.Or) else (dnf,)
    if len(conjuncts) > MAX_CONJUNCTS:
        return False
    return all(_conjunct_infeasible(c, space) for c in conjuncts)


def _expand_ne(formula: sympy.Basic) -> sympy.Basic:
    """`a != b` on linear integers is `a < b | a > b` (Fourier-Motzkin cannot read `!=`)."""
    def rewrite(ne: sympy.Ne) -> sympy.Basic:
        if _linear(ne.lhs - ne.rhs) is None:
            return ne
        return sympy.Or(sympy.Lt(ne.lhs, ne.rhs), sympy.Gt(ne.lhs, ne.rhs))
    nnf = sympy.to_nnf(formula, simplify=False)
    return nnf.replace(lambda e: isinstance(e, sympy.Ne), rewrite)


def _conjunct_infeasible(conjunct: sympy.Basic, space: Space) -> bool:
    literals = conjunct.args if isinstance(conjunct, sympy.And) else (conjunct,)
    rows: list[tuple[dict[sympy.Symbol, Fraction], Fraction]] = []  # sum(c*x) + d <= 0
    opaque: set[sympy.Basic] = set()
    for literal in literals:
        if literal is sympy.false or isinstance(literal, BooleanFalse):
            return True
        if literal is sympy.true or isinstance(literal, BooleanTrue):
            continue
        negated = isinstance(literal, sympy.Not)
        atom = literal.args[0] if negated else literal
        if sympy.Not(literal) in opaque or (negated and atom in opaque):
            return True
        converted = _rows(atom, negated)
        if converted is None:
            opaque.add(literal)
            continue
        rows += converted
    for dim in space.dims.values():  # every dim is a positive integer
        rows.append(({dim: Fraction(-1)}, Fraction(1)))
    return _fourier_motzkin(rows)


def _rows(atom: sympy.Basic, negated: bool
          ) -> list[tuple[dict[sympy.Symbol, Fraction], Fraction]] | None:
    """A linear relation on integers as rows `sum(c*x) + d <= 0`; None if not linear."""
    if not isinstance(atom, sympy.core.relational.Relational) or isinstance(atom, sympy.Ne):
        return None
    relation = type(atom)
    if negated:
        relation = {sympy.Lt: sympy.Ge, sympy.Le: sympy.Gt, sympy.Gt: sympy.Le,
                    sympy.Ge: sympy.Lt, sympy.Eq: sympy.Ne}[relation]
        if relation is sympy.Ne:
            return None
    linear = _linear(atom.lhs - atom.rhs)
    if linear is None:
        return None
    coefficients, constant = linear
    negative = ({s: -c for s, c in coefficients.items()}, -constant)
    if relation is sympy.Le:  # e <= 0
        return [(coefficients, constant)]
    if relation is sympy.Lt:  # e <= -1 on integers
        return [(coefficients, constant + 1)]
    if relation is sympy.Ge:
        return [negative]
    if relation is sympy.Gt:
        return [(negative[0], negative[1] + 1)]
    return [(coefficients, constant), negative]  # Eq


def _linear(expr: sympy.Expr) -> tuple[dict[sympy.Symbol, Fraction], Fraction] | None:
    """``expr`` as integer-coefficient-free linear form over integer symbols, or None."""
    expr = sympy.expand(expr)
    if not all(s.is_integer for s in expr.free_symbols):
        return None
    try:
        poly = sympy.Poly(expr, *sorted(expr.free_symbols, key=str)) if expr.free_symbols else None
    except sympy.PolynomialError:
        return None
    if poly is None:
        return ({}, Fraction(str(expr))) if expr.is_Rational else None
    if poly.total_degree() > 1 or not all(c.is_Rational for c in poly.coeffs()):
        return None
    coefficients: dict[sympy.Symbol, Fraction] = {}
    constant = Fraction(0)
    for monomial, coefficient in poly.terms():
        value = Fraction(int(coefficient.p), int(coefficient.q))
        degree = [i for i, power in enumerate(monomial) if power]
        if not degree:
            constant = value
        else:
            coefficients[poly.gens[degree[0]]] = value
    return coefficients, constant


def _fourier_motzkin(rows: list[tuple[dict[sympy.Symbol, Fraction], Fraction]]) -> bool:
    """True when the rows have no rational solution (and so no integer one)."""
    rows = [(dict(c), d) for c, d in rows]
    variables = {s for c, _ in rows for s in c}
    for variable in sorted(variables, key=str):
        upper = [(c, d) for c, d in rows if c.get(variable, 0) > 0]
        lower = [(c, d) for c, d in rows if c.get(variable, 0) < 0]
        rest = [(c, d) for c, d in rows if c.get(variable, 0) == 0]
        if len(upper) * len(lower) > 4000:
            return False  # too large to decide here: not shown
        for cu, du in upper:
            for cl, dl in lower:
                a, b = cu[variable], -cl[variable]
                combined = {s: cu.get(s, 0) * b + cl.get(s, 0) * a for s in set(cu) | set(cl)}
                combined = {s: v for s, v in combined.items() if v and s != variable}
                rest.append((combined, du * b + dl * a))
        rows = rest
        for c, d in rows:
            if not c and d > 0:
                return True
    return any(not c and d > 0 for c, d in rows)


# --- the counterexample search ---------------------------------------------------------------


def _sizes(space: Space, read: set[sympy.Basic]) -> Iterable[dict[sympy.Symbol, int]]:
    """Admissible sizes of the dims in ``read`` (and those the constraints tie to them), the
    smallest first (by their largest, then their sum), at most SEARCH_CASES of them: a
    counterexample at small sizes is the one a reader checks."""
    wanted = set(read)
    for constraint in space.constraints:
        if constraint.free_symbols & wanted:
            wanted |= constraint.free_symbols
    dims = sorted((d for d in space.dims.values() if d in wanted), key=str)
    cases = sorted(itertools.product(range(1, SEARCH_SIZE + 1), repeat=len(dims)),
                   key=lambda v: (max(v, default=0), sum(v), v))
    found = 0
    for values in cases:
        sizes = {d: sympy.Integer(v) for d, v in zip(dims, values)}
        if all(_decided(c.xreplace(sizes), True) for c in space.constraints
               if c.free_symbols <= set(sizes)):
            yield sizes
            found += 1
            if found >= SEARCH_CASES:
                return


def _search(space: Space, negation: Boolean) -> Outcome | None:
    """A counterexample among small sizes and every position in range: only the positions
    the claim reads vary (a mask of `(b, h, q, k)` that reads no head is searched over q
    and k), and at most SEARCH_CELLS points are tried (past that: no counterexample shown)."""
    read = negation.free_symbols
    positions = [(n, s) for n, s in space.positions.items() if s in read]
    left = SEARCH_CELLS
    lengths = set().union(*(space.ranges[n].free_symbols for n, _ in positions))
    for sizes in _sizes(space, read | lengths):
        ranges = [range(_int(space.ranges[name].xreplace(sizes))) for name, _ in positions]
        for point in itertools.product(*ranges):
            left -= 1
            if left < 0:
                return None
            values = {**sizes, **{symbol: sympy.Integer(v) for (_, symbol), v in zip(positions, point)}}
            cell = negation.xreplace(values)
            if _decided(cell, True):
                return Outcome("refuted", _named(sizes),
                               tuple((name, v) for (name, _), v in zip(positions, point)))
            chosen = _choose_inputs(cell, space.choosable)
            if chosen is not None:
                return Outcome("refuted", _named(sizes),
                               tuple((name, v) for (name, _), v in zip(positions, point)),
                               chosen)
    return None


def _choose_inputs(cell: sympy.Basic, choosable: set[str]
                   ) -> tuple[tuple[str, bool], ...] | None:
    """Input values (each read true or false) that make ``cell`` true, trying every
    assignment of the few reads it still has; only reads of ``choosable`` inputs."""
    left = sorted(input_atoms(cell), key=str)
    names = {f.func.__name__ for atom in left for f in atom.atoms(sympy.core.function.AppliedUndef)}
    if not left or len(left) > 6 or not names <= choosable:
        return None
    for values in itertools.product((True, False), repeat=len(left)):
        if _decided(cell.xreplace(dict(zip(left, map(sympy.sympify, values)))), True):
            return tuple((sympy.sstr(atom), value) for atom, value in zip(left, values))
    return None


def _decided(value: sympy.Basic, wanted: bool) -> bool:
    return bool(value == (sympy.true if wanted else sympy.false))


def _int(value: sympy.Basic) -> int:
    return int(value) if value.is_Integer else 0


def _named(sizes: Mapping[sympy.Symbol, int]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((s.name, int(v)) for s, v in sizes.items()))


def _read_of(atom: sympy.Basic, name: str) -> bool:
    """Whether the atom (`pad(b, q) != 0`) reads the input ``name``."""
    return any(f.func.__name__ == name for f in atom.atoms(sympy.core.function.AppliedUndef))


def _inputs_read(formula: sympy.Basic) -> tuple[str, ...]:
    """The inputs ``formula`` reads, by name: what an undecided claim may depend on."""
    return tuple(sorted({f.func.__name__
                         for f in formula.atoms(sympy.core.function.AppliedUndef)}))


def _nonlinear(formula: sympy.Basic) -> str:
    """The parts no linear reasoning reads (`%`, a product of dims): what would decide it."""
    parts = [r for r in formula.atoms(sympy.core.relational.Relational)
             if _linear(r.lhs - r.rhs) is None and not r.atoms(sympy.core.function.AppliedUndef)]
    return ", ".join(sorted(sympy.sstr(p) for p in parts))


# --- the questions the mask model asks, one function each --------------------------------------


class Question:
    """One function of positions, ready for claims. ``roles``: each parameter's role (`q`,
    `k`, `b`, `h`, `s` for the score); ``sizes``: the query and key lengths (dims of the
    checked program, or None for lengths of their own, `N_q` and `N_k`); ``constraints``: the
    spec's `constraint` statements (those with no formula are left out)."""

    def __init__(self, params: Sequence[str], roles: Sequence[str], body: nodes.Expr,
                 inputs: Iterable[str], bools: Iterable[str],
                 sizes: Mapping[str, object | None],
                 constraints: Iterable[nodes.Constraint], choosable: Iterable[str] = ()) -> None:
        self.space = space = Space(choosable=set(choosable))
        # Lengths nothing gives: the queries and the keys one length (a square table, where
        # top left and bottom right agree), the heads and the batch their own.
        lengths = {"q": "N_qk", "k": "N_qk", "b": "N_b", "h": "N_h"}
        bound: dict[str, sympy.Basic] = {}
        for param, role in zip(params, roles):
            if role == "s":
                bound[param] = self.score = sympy.Symbol(param, real=True)
                continue
            given = sizes.get(role)
            if given is None:
                size = space.dim(lengths[role])
            elif hasattr(given, "span"):  # a length written in a claim
                size = Formulas(space, {}, ()).of(given)  # type: ignore[arg-type]
            else:
                size = size_expr(given, space)
            bound[param] = space.position(param, size)
        self.role_param = {role: param for param, role in zip(params, roles)}
        formulas = Formulas(space, bound, inputs, bools)
        for constraint in constraints:
            try:
                space.constraints.append(_RELATIONS[constraint.op](
                    formulas.of(constraint.left), formulas.of(constraint.right)))
            except (Unsupported, KeyError, TypeError):
                continue
        self.formulas = formulas
        self.body = formulas.of(body)  # raises Unsupported for a body with no formula
        if isinstance(self.body, Boolean):
            self.atoms = input_atoms(self.body)

    def _qk(self) -> tuple[sympy.Symbol, sympy.Symbol, sympy.Expr]:
        q = self.space.positions[self.role_param["q"]]
        k = self.space.positions[self.role_param["k"]]
        offset = self.space.ranges[self.role_param["k"]] - self.space.ranges[self.role_param["q"]]
        return q, k, offset

    def later_key(self) -> Outcome:
        """No query sees a key after its own position (bottom right: q + N_k - N_q)."""
        q, k, offset = self._qk()
        return prove(self.space, sympy.Implies(self.body, sympy.Le(k, q + offset)))

    def own_key(self) -> Outcome:
        """Each query's own position (bottom right), when it is a key, is let through by
        the positions (the inputs letting every key through)."""
        q, k, offset = self._qk()
        return prove(self.space, sympy.Implies(sympy.Eq(k, q + offset),
                                               permissive(self.body, self.atoms)))

    def beyond(self, width: nodes.Expr, inclusive: bool) -> Outcome:
        """No key further back than the window: distance < W (or <= W, ``inclusive``)."""
        q, k, offset = self._qk()
        distance = q + offset - k
        w = self.formulas.of(width)
        return prove(self.space, sympy.Implies(
            self.body, sympy.Le(distance, w) if inclusive else sympy.Lt(distance, w)))

    def edge(self, width: nodes.Expr, inclusive: bool) -> Outcome:
        """Every key of the window, its edge included, is let through by the positions."""
        q, k, offset = self._qk()
        distance = q + offset - k
        w = self.formulas.of(width)
        inside = sympy.And(sympy.Ge(distance, 0),
                           sympy.Le(distance, w) if inclusive else sympy.Lt(distance, w))
        return prove(self.space, sympy.Implies(inside, permissive(self.body, self.atoms)))

    def never_true(self, part: nodes.Expr) -> bool:
        """``part`` of the body (a side of an `|`), read at positions of the function's
        own, is never true: whatever the sizes, the positions and the integer inputs."""
        formula = self.formulas.of(part)
        positions = {p for r, p in self.role_param.items() if r != "s"}
        return isinstance(formula, Boolean) and bool(set(nodes.names_in(part)) & positions) \
            and never_true(self.space, formula)

    def every_row(self) -> Outcome:
        """Every query sees at least one key."""
        q, k, offset = self._qk()
        size_k = self.space.ranges[self.role_param["k"]]
        return prove_nonempty(self.space, self.body, self.role_param["q"], self.role_param["k"],
                              [q + offset, q, sympy.Integer(0), size_k - 1])

    def same_as(self, other: "Question") -> Outcome:
        """The two masks let the same keys through at every size and position."""
        theirs = other.body.xreplace({  # position by position, by role (`q_idx` is `q`)
            other.space.positions[other.role_param[role]]: self.space.positions[param]
            for role, param in self.role_param.items()
            if role in other.role_param and role != "s"})
        theirs = theirs.xreplace({d: self.space.dim(d.name) for d in other.space.dims.values()})
        return prove(self.space, sympy.Equivalent(self.body, theirs))

    def decays(self) -> Outcome:
        """A score change favours nearer keys: for two keys a query sees, the later one's
        score is changed by at least as much (ALiBi's slopes, a relative bias's sign)."""
        q, k, offset = self._qk()
        key = self.role_param["k"]
        later = self.space.position(f"{key}_2", self.space.ranges[key])
        try:
            claim = sympy.Implies(sympy.And(sympy.Lt(k, later), sympy.Le(later, q + offset)),
                                  sympy.Le(self.body, self.body.xreplace({k: later})))
            return prove(self.space, claim)
        finally:
            del self.space.positions[later.name]
            del self.space.ranges[later.name]

    def keeps_masked(self) -> Outcome:
        return score_at_masked(self.space, self.body, self.score)

    def polarity(self, name: str) -> set[bool]:
        """How the body reads the bool input ``name``: True where a true entry lets the
        key through (the read stands as is in negation normal form), False where it hides it."""
        found: set[bool] = set()
        nnf = sympy.to_nnf(self.body, simplify=False)

        def walk(node: sympy.Basic, negated: bool) -> None:
            if isinstance(node, sympy.Not):
                walk(node.args[0], not negated)
            elif isinstance(node, sympy.Ne) and isinstance(node.lhs, sympy.core.function.AppliedUndef) \
                    and node.lhs.func.__name__ == name and node.rhs == 0:
                found.add(not negated)
            elif isinstance(node, sympy.Eq) and isinstance(node.lhs, sympy.core.function.AppliedUndef) \
                    and node.lhs.func.__name__ == name and node.rhs == 0:
                found.add(negated)
            else:
                for arg in node.args:
                    walk(arg, negated)
        walk(nnf, False)
        return found

    def reads_at_query(self, name: str) -> list[sympy.Basic]:
        """The reads of the bool input ``name`` at the query position: an index that holds
        the query's position and not the key's (`pad[b, q_idx]`, or its flattened form)."""
        q, k, _offset = self._qk()
        return [atom for atom in getattr(self, "atoms", ()) if _read_of(atom, name)
                and q in atom.free_symbols and k not in atom.free_symbols]

    def reads_key_position(self) -> bool:
        """Whether the body depends on the key's position at all."""
        _q, k, _offset = self._qk()
        return k in getattr(self.body, "free_symbols", set())

    def reads_at_key(self, name: str) -> bool:
        """Whether some read of the input ``name`` holds the key's position."""
        _q, k, _offset = self._qk()
        return any(_read_of(atom, name) and k in atom.free_symbols
                   for atom in getattr(self, "atoms", ()))

    def padding_on_queries(self, name: str, length: object) -> bool:
        """The bool input ``name``, whose last axis is ``length`` long, is a vector over the
        keys read on the wrong side: its length is the keys', it is read at the query
        position and never at the key's, and one value of such a read hides the query's
        whole row (a conjunct: `pad[b, q_idx] & ...`, or `~pad[b, q_idx] & ...`)."""
        if not isinstance(self.body, Boolean) or self.reads_at_key(name):
            return False
        key_length = self.space.ranges[self.role_param["k"]]
        if sympy.simplify(size_expr(length, self.space) - key_length) != 0:
            return False
        return any(self.body.xreplace({read: value}) == sympy.false
                   for read in self.reads_at_query(name) for value in (sympy.false, sympy.true))

    def value_at(self, verdict_sizes: tuple[tuple[str, int], ...], expr: sympy.Expr,
                 positions: tuple[tuple[str, int], ...]) -> int:
        """``expr`` (a formula of positions and dims) at a counterexample."""
        values = {self.space.dims[n] if n in self.space.dims else self.space.positions[n]:
                  sympy.Integer(v) for n, v in (*verdict_sizes, *positions)
                  if n in self.space.dims or n in self.space.positions}
        return int(sympy.sympify(expr).xreplace(values))

    def direction(self) -> tuple[int, int] | None:
        """The signs of the query's and the key's coefficients in a body linear in both
        (`k - q + N - 1`: (-1, 1)), or None."""
        q, k, _offset = self._qk()
        expr = sympy.expand(self.body) if isinstance(self.body, sympy.Expr) else None
        if expr is None or not expr.is_polynomial(q, k):
            return None
        poly = sympy.Poly(expr, q, k)
        if poly.total_degree() != 1:
            return None
        signs = []
        for coefficient in (poly.coeff_monomial(q), poly.coeff_monomial(k)):
            sign = sympy.sign(coefficient)
            if not sign.is_Integer:
                return None
            signs.append(int(sign))
        return signs[0], signs[1]

    def lengths(self) -> tuple[str, str]:
        """The query and key lengths, in the spec's notation."""
        return (sympy.sstr(self.space.ranges[self.role_param["q"]]),
                sympy.sstr(self.space.ranges[self.role_param["k"]]))

    def table(self, sizes: Mapping[str, int], default: int) -> tuple[dict[str, int],
                                                                   list[list[bool | None]]]:
        """The mask at concrete sizes (``sizes`` by dim name, ``default`` for the others):
        the sizes used, and a row per query, a cell per key: True seen, False hidden, None
        when the inputs' values decide."""
        values = {d: sympy.Integer(sizes.get(n, default)) for n, d in self.space.dims.items()}
        used = {n: int(values[d]) for n, d in self.space.dims.items()}
        q, k, _offset = self._qk()
        rows: list[list[bool | None]] = []
        for qv in range(_int(self.space.ranges[self.role_param["q"]].xreplace(values))):
            row: list[bool | None] = []
            for kv in range(_int(self.space.ranges[self.role_param["k"]].xreplace(values))):
                cell = self.body.xreplace({**values, q: sympy.Integer(qv), k: sympy.Integer(kv)})
                row.append(True if cell == sympy.true else False if cell == sympy.false else None)
            rows.append(row)
        return used, rows

    def own_position(self, sizes: tuple[tuple[str, int], ...],
                     positions: tuple[tuple[str, int], ...]) -> int:
        q, _k, offset = self._qk()
        return self.value_at(sizes, q + offset, positions)


__all__ = ["Question", "Formulas", "MAX_CONJUNCTS", "SEARCH_SIZE", "Space", "Unsupported", "Outcome",
           "input_atoms", "permissive", "prove", "prove_nonempty", "score_at_masked",
           "size_expr"]
