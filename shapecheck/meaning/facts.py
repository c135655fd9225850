"""What the meaning pass knows about values: axes (identity is the object) and the facts
that travel with them (masks, products, scales, positions, parts), with the small
helpers the passes share. Nothing here reads the program.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ..syntax import nodes
from .. import symbolic
from ..check.program import Value
from ..symbolic import Dim


# A fill at or below this blocks a key after the softmax (`-1e9`, `-1e4`, `-inf`);
# one above `LEAKS` leaves the key a real weight (SC410). Between, no opinion.
BLOCKS = -1e3
LEAKS = -10.0
MAX_SCALAR_DEPTH = 64
# Reshapes whose unmatched middle has more axes are not searched for the order that groups them.
MAX_VIEW_AXES = 6


class Axis:
    """One axis, an index of the formula; identity is the object.

    ``size`` is its dim expression. ``node`` is the expression that created it (None for
    the axes of a declared tensor, named by ``tensor``); ``sources`` the (operand, axis)
    positions it comes from when ``node`` is a contraction; ``opaque`` marks an axis whose
    relation to the arguments' axes is unknown (an unmatched reshape); ``parts`` the
    axes a reshape merged into this one, outer first (`[N, H, d]` -> `[N*H, d]`: N, H).
    """

    __slots__ = ("size", "node", "tensor", "sources", "opaque", "parts")

    def __init__(self, size: Dim, node: nodes.Expr | None = None, tensor: str | None = None,
                 sources: tuple[tuple[int, int], ...] = (), opaque: bool = False,
                 parts: tuple[Axis, ...] = ()) -> None:
        self.size = size
        self.node = node
        self.tensor = tensor
        self.sources = sources
        self.opaque = opaque
        self.parts = parts


class Scalar:
    """A scalar as ``coef * prod(base ** exponent)``; ``opaque``: a factor of unknown value."""

    __slots__ = ("coef", "powers", "opaque")

    def __init__(self, coef: float = 1.0, powers: tuple[tuple[Dim, Fraction], ...] = (),
                 opaque: bool = False) -> None:
        self.coef = coef
        self.powers = powers
        self.opaque = opaque


OPAQUE = Scalar(opaque=True)


class Factor:
    """A scalar factor of a value: its node is evaluated (:meth:`_Analysis.scalar`) only
    when a scale is judged."""

    __slots__ = ("node", "divides", "operand")

    def __init__(self, node: nodes.Expr, divides: bool, operand: nodes.Expr | None = None) -> None:
        self.node = node
        self.divides = divides
        self.operand = operand


class Capped:
    """A soft-cap on the scores (the `tanh` of `c * tanh(S / c)`); the factors around it
    are :class:`Factor` ops of their own."""

    __slots__ = ("node",)

    def __init__(self, node: nodes.Expr) -> None:
        self.node = node


class Positions:
    """Values computed from the positions ``start``, ..., ``start + count - 1``, made at
    ``node``: `arange(P, P + N)`, the angles a rotary table makes of them, their cos and
    sin, a value rotated by them (issue 30: where the new keys' positions start)."""

    __slots__ = ("start", "count", "node")

    def __init__(self, start: Dim, count: Dim, node: nodes.Expr) -> None:
        self.start = start
        self.count = count
        self.node = node

    def plus(self, offset: Dim, node: nodes.Expr) -> Positions:
        """The positions shifted by ``offset`` at ``node`` (`arange(N) + P`)."""
        return Positions(self.start + offset, self.count, node)


class Applied:
    """A mask applied to a value, in the value's own axes."""

    __slots__ = ("node", "condition", "kind", "seer", "seen", "keeps", "fill", "aligned",
                 "additive", "origin", "strict", "numeric", "negation", "edge", "added")

    def __init__(self, node: nodes.Expr, condition: nodes.Expr, kind: str, seer: Axis | None,
                 seen: Axis | None, keeps: bool, fill: float | None,
                 aligned: tuple[Axis | None, ...], additive: bool, origin: nodes.Expr | None,
                 strict: bool | None = False) -> None:
        self.node = node
        self.condition = condition
        self.kind = kind
        self.seer = seer  # the axis of i in "i may see j <= i" (causal_mask's rows)
        self.seen = seen
        self.keeps = keeps
        self.fill = fill
        self.aligned = aligned  # per axis of the condition: the value's axis it lines up with
        self.additive = additive
        self.origin = origin  # what built the causal condition (`causal_mask`, `i >= j`)
        self.strict = strict  # the condition excludes the diagonal (None: unknown)
        # the mask is a tensor of numbers added as it is (`(1 - tril(..)) * -1e9`), not a
        # `where` of a bool condition: the fused plans add it as a bias
        self.numeric = False
        self.negation = False  # the causal condition is a negated mask (`~causal`)
        self.edge: int | None = None  # where its triangle's edge lies (Causal.edge)
        self.added: nodes.Expr | None = None  # an additive mask: the term added to the scores

    def added_as(self, term: nodes.Expr, mapping: dict[int, Axis]) -> Applied:
        """The mask moved into the scores' axes, added to them as ``term``."""
        moved = self.moved(mapping)
        moved.added = term
        return moved

    def moved(self, mapping: dict[int, Axis]) -> Applied:
        def move(axis: Axis | None) -> Axis | None:
            return None if axis is None else mapping.get(id(axis))
        moved = Applied(self.node, self.condition, self.kind, move(self.seer), move(self.seen),
                         self.keeps, self.fill, tuple(move(a) for a in self.aligned),
                         self.additive, self.origin, self.strict)
        moved.numeric, moved.negation, moved.edge = self.numeric, self.negation, self.edge
        moved.added = self.added
        return moved


class Causal:
    """A value that is a causal mask: true (non-zero) only where ``seer``'s index >=
    ``seen``'s (``strict``: >; None: shifted by an offset of unknown sign).

    Built by a row whose axis map names a ``triangle`` (`causal_mask`, `tril`, `triu`) or
    by comparing positions (`arange(N)[:, None] >= arange(N)[None, :]`); joined by `&`
    (or `*`) with another mask it still holds; negated (`~m`, `m == 0`) it swaps."""

    __slots__ = ("seer", "seen", "node", "strict", "negation", "edge")

    def __init__(self, seer: Axis, seen: Axis, node: nodes.Expr, strict: bool | None = False,
                 negation: bool = False, edge: int | None = None) -> None:
        self.seer = seer
        self.seen = seen
        self.node = node
        self.strict = strict
        # reached through an odd number of negations (`~m`, `m == 0`, `1 - m`): a mask
        # that keeps the other triangle is then inverted, not transposed (SC408, not SC407)
        self.negation = negation
        # the mask is true where seer's index - seen's index >= edge, a literal number from
        # the top-left corner (tril(x, k): -k; triu(x, k): k; `i >= j`: 0; `i > j`: 1);
        # None: unknown or shifted by an offset of the sizes (bottom-right, a cache window)
        self.edge = edge

    def negated(self) -> Causal:
        return Causal(self.seen, self.seer, self.node, None if self.strict is None else not self.strict,
                      not self.negation, None if self.edge is None else 1 - self.edge)

    def moved(self, mapping: dict[int, Axis]) -> Causal | None:
        seer, seen = mapping.get(id(self.seer)), mapping.get(id(self.seen))
        if seer is None or seen is None or seer is seen:
            return None
        return Causal(seer, seen, self.node, self.strict, self.negation, self.edge)


class Contraction:
    """A `@` or an einsum: operands, which of their axes are summed, kept, batch."""

    __slots__ = ("node", "operands", "infos", "summed", "kept", "batch", "axes", "size",
                 "statement")

    def __init__(self, node: nodes.Expr, operands: Sequence[nodes.Expr], infos: Sequence[Info],
                 summed: list[list[int]], kept: list[list[int]], batch: list[list[int]],
                 axes: tuple[Axis, ...], size: Dim | None, statement: nodes.Stmt) -> None:
        self.node = node
        self.operands = tuple(operands)
        self.infos = tuple(infos)
        self.summed = summed  # per operand: its axes summed over (contracted)
        self.kept = kept  # per operand: its axes kept, not shared with another operand
        self.batch = batch  # per operand: its axes kept and shared (batch letters)
        self.axes = axes  # the result's axes
        self.size = size  # the product of the contracted sizes (two operands), else None
        self.statement = statement


class Product:
    """A value that is a contraction, then scaled, biased or masked: possibly scores.

    ``parts``: the contracted sizes of products added to it with the same result axes
    (``Qn @ Kn.T + Qr @ Kr.T``, a content and a rotary part): the scores then sum over
    ``size + sum(parts)`` features, as if the factors were concatenated."""

    __slots__ = ("contraction", "inner_scale", "parts", "node", "terms")

    def __init__(self, contraction: Contraction, inner_scale: tuple[Factor, ...],
                 parts: tuple[Dim, ...] = (), node: nodes.Expr | None = None,
                 terms: tuple[Contraction, ...] = ()) -> None:
        self.contraction = contraction
        self.inner_scale = inner_scale  # factors applied to the operands before the product
        self.parts = parts
        self.node = node or contraction.node  # the sum of the products, if there are parts
        self.terms = terms  # the contractions of the parts, in order

    @property
    def size(self) -> Dim | None:
        size = self.contraction.size
        if size is None or not self.parts:
            return size
        return symbolic.total((size, *self.parts))


# A tensor added to the scores: its node, the scores' axis each of its axes lines up
# with, and whether it is subtracted.
BiasTerm = tuple[nodes.Expr, tuple["Axis | None", ...], bool]


class Norm:
    """A value that is softmax weights: every slice along ``axis`` sums to 1 (unless changed)."""

    __slots__ = ("call", "axis", "source", "argument", "changed", "after", "statement")

    def __init__(self, call: nodes.Expr, axis: Axis, source: Info, argument: nodes.Expr,
                 statement: nodes.Stmt | None, changed: tuple[nodes.Expr, ...] = (),
                 after: tuple[Applied, ...] = ()) -> None:
        self.call = call
        self.axis = axis
        self.source = source  # the softmax argument: the scores' facts
        self.argument = argument
        self.statement = statement
        self.changed = changed  # what changed the weights since
        self.after = after  # masks applied to the weights (after the softmax)

    def changed_by(self, node: nodes.Expr, applied: Applied | None = None) -> Norm:
        return Norm(self.call, self.axis, self.source, self.argument, self.statement,
                     self.changed + (node,), self.after + ((applied,) if applied else ()))


class Reduced:
    __slots__ = ("call", "x", "axes")

    def __init__(self, call: nodes.Expr, x: nodes.Expr, axes: tuple[int, ...]) -> None:
        self.call = call
        self.x = x
        self.axes = axes  # the positions removed, in the reduced tensor


class Info:
    """What the pass knows about one value: its axes and the facts that travel with it.

    Facts default to the class attributes; a value sets only those it has (most values
    have none), which keeps the pass cheap on long specs.
    """

    norm: Norm | None = None
    product: Product | None = None  # the contraction this value is, through scales, biases, masks
    scale: tuple[Factor, ...] = ()  # scalar factors applied since the last contraction
    applied: tuple[Applied, ...] = ()  # masks applied to this value (before any softmax)
    biases: tuple[BiasTerm, ...] = ()  # tensors added to it
    # The scales, biases and masks above, in the order they were applied.
    ops: tuple[Factor | BiasTerm | Applied | Capped, ...] = ()
    masks: tuple[Applied, ...] = ()  # the additive masks this value is (where(m, 0, -inf))
    causal: tuple[Causal, ...] = ()  # bool values: the causal masks this value is
    position: Axis | None = None  # each value is its index along this axis (`arange`)
    shifted_position: bool = False  # ... plus an offset (`arange(N) + M - N`)
    reduced: Reduced | None = None  # a reduction's result (its axes are the ones left)
    exp_of: Info | None = None  # exp(x): x's facts (a softmax written by hand)
    constant: float | None = None  # every entry is this number (`ones(...) * -inf`)
    nonzero: float | None = None  # a causal value: its entries where it is not zero
    squashed: tuple[tuple[Applied, nodes.Expr], ...] = ()  # masks, and the soft-cap after them
    positional: nodes.Expr | None = None  # a rotary transform of positions made this value
    table: bool = False  # a table of positions' cos or sin (`cos(angle)`, an input `cos_t`)
    positions: Positions | None = None  # computed from these positions (`arange(P, P + N)`)
    projection: str | None = None  # a projection of this tensor (`X @ W.T`, W a param), moved
    pieces_of: int | None = None  # parts of this value (its id), cut, negated or rejoined
    term_of: int | None = None  # a value's parts times a table (a term of a rotation)
    paired: bool = False  # a real value's features paired as complex numbers (`view_as_complex`)
    copies: Axis | None = None  # the values are copies along this axis (`repeat` of a 1)
    tiled: tuple[nodes.Expr, Axis, Dim, nodes.Expr | None] | None = None  # heads tiled
    # (j, j+Hkv, ...): where, the tiled axis, the number of heads tiled, where the copies
    # merged were made (`repeat`, `expand`)
    joined: tuple[Axis, tuple[Dim, ...], tuple[nodes.Expr, ...]] | None = None  # concat parts
    linear: bool = False  # a triangle of a Q·K product (causal linear attention, no softmax)

    def __init__(self, axes: tuple[Axis, ...] | None, **facts: Any) -> None:
        self.axes = axes
        if facts:
            self.__dict__.update(facts)

    def moved(self, axes: tuple[Axis, ...]) -> Info:
        """The same facts on a value whose values were only moved (same axis identities)."""
        info = Info(axes)
        info.__dict__.update(self.__dict__)
        info.axes = axes
        info.__dict__.pop("exp_of", None)
        return info

    def shifted(self, axes: tuple[Axis, ...], norm: Norm | None = None,
                ops: tuple[Factor | BiasTerm | Applied | Capped, ...] = ()) -> Info:
        """Scores scaled, shifted, biased or masked (``ops``, in order): the facts go on."""
        info = Info(axes)
        if self.product is not None:
            info.product = self.product
        if norm is not None:
            info.norm = norm
        if self.reduced is not None:
            info.reduced = self.reduced
        if self.squashed:
            info.squashed = self.squashed
        if self.positional is not None:
            info.positional = self.positional
        if self.table:
            info.table = True
        if self.positions is not None:
            info.positions = self.positions
        if self.projection is not None and all(type(op) is Factor for op in ops):
            info.projection = self.projection  # a projection scaled (`(X @ Wq) * d ** -0.5`)
        if ops or self.ops:
            info.ops = self.ops + ops
            info.scale = self.scale + tuple(op for op in ops if type(op) is Factor)
            info.applied = self.applied + tuple(op for op in ops if type(op) is Applied)
            info.biases = self.biases + tuple(op for op in ops if type(op) is tuple)
        return info


UNKNOWN = Info(None)


SCALAR = Info(())


def monomial_text(text: str) -> bool:
    """A size written as a product of dims and numbers (`P*P*C`, `16*h`): its factors
    can be matched without algebra on sums."""
    return not any(sign in text for sign in "+-/()")


def base_of(info: Info) -> int:
    """The value that ``info`` is cut or rearranged from (itself when it is whole)."""
    return info.pieces_of if info.pieces_of is not None else id(info)


def index_of(layout: Sequence[Axis | None], axis: Axis | None) -> int | None:
    if axis is None:
        return None
    for position, candidate in enumerate(layout):
        if candidate is axis:
            return position
    return None


def scalar_power(scalar: Scalar, exponent: Fraction) -> Scalar:
    if scalar.opaque or (scalar.coef < 0 and exponent.denominator != 1):
        return OPAQUE
    try:
        coef = scalar.coef ** float(exponent)
    except (OverflowError, ZeroDivisionError):
        return OPAQUE
    return Scalar(coef, tuple((b, e * exponent) for b, e in scalar.powers))


def scalar_sum(left: Scalar, right: Scalar, op: str) -> Scalar:
    """`d_n + d_r`: a sum of dims is one base; numbers add; anything else is opaque."""
    if left.opaque or right.opaque:
        return OPAQUE
    if not left.powers and not right.powers:
        return Scalar(left.coef + right.coef if op == "+" else left.coef - right.coef)
    a, b = _as_dim(left), _as_dim(right)
    if a is None or b is None:
        return OPAQUE
    total = a + b if op == "+" else a - b
    return Scalar(powers=((total, Fraction(1)),))


def _integral(number: float | Fraction) -> bool:
    """A whole number (never for ``inf`` or NaN: `J - inf` is a number, not a dim)."""
    try:
        return number == int(number)
    except (OverflowError, ValueError):
        return False


def _as_dim(scalar: Scalar) -> Dim | None:
    """A scalar that is a polynomial in dims with integer coefficients, as a dim expression."""
    if scalar.opaque or not _integral(scalar.coef):
        return None
    result: Dim = symbolic.integer(int(scalar.coef))
    for base, exponent in scalar.powers:
        if exponent.denominator != 1 or exponent < 0:
            return None
        for _ in range(int(exponent)):
            result = result * base
    return result


def add_power(powers: list[tuple[Dim, Fraction]], base: Dim, exponent: Fraction) -> None:
    for index, (known, total) in enumerate(powers):
        if known == base:
            if total + exponent == 0:
                powers.pop(index)
            else:
                powers[index] = (known, total + exponent)
            return
    powers.append((base, exponent))


def number_text(value: float) -> str:
    if math.isinf(value):
        return "-inf" if value < 0 else "inf"
    return str(int(value)) if value == int(value) else repr(value)


def einsum_keys(term: str, rank: int) -> list[Any] | None:
    """One key per axis: its letter, or ("...", k) for the k-th axis from the right of `...`."""
    head, ellipsis, tail = term.partition("...")
    width = rank - len(head) - len(tail)
    if width < 0 or (not ellipsis and width != 0):
        return None
    return list(head) + [("...", width - 1 - k) for k in range(width)] + list(tail)


def einsum_size(types: dict[int, Value], operands: Sequence[nodes.Expr],
                 place: tuple[int, int]) -> Dim:
    operand, position = place
    shape = types[id(operands[operand])].shape
    assert shape is not None
    return shape[position]


def children(node: nodes.Expr) -> Iterable[nodes.Expr]:
    if isinstance(node, nodes.Paren):
        return (node.inner,)
    if isinstance(node, nodes.BinOp):
        return (node.left, node.right)
    if isinstance(node, (nodes.Unary, nodes.Transpose)):
        return (node.operand,)
    if isinstance(node, nodes.Call):
        return tuple(a for a in node.args if not isinstance(a, (nodes.String, nodes.AxisName))) + \
            tuple(k.value for k in node.keywords)
    if isinstance(node, nodes.ListExpr):
        return node.items
    if isinstance(node, nodes.Subscript):
        return (node.operand,)  # the entries are dims, not values
    return ()


# Functions of a scalar that are a power of it (`sqrt(d)`, `rsqrt(d)`, `square(d)`).
POWERS = {"sqrt": Fraction(1, 2), "rsqrt": Fraction(-1, 2), "square": Fraction(2)}


FLIPPED = {"aligned": "transposed", "transposed": "aligned"}


# Creating builtins whose every entry is one number; rows with a ``fill`` parameter say theirs.
CONSTANTS = {"ones": 1.0, "zeros": 0.0}


# Soft-caps (`c * tanh(S / c)`): a `-inf` fill passed through them becomes `-c`.
SQUASHING = frozenset({"tanh"})

# Reductions that commute with a constant factor: `mean(c * x) == c * mean(x)`
LINEAR_REDUCTIONS = frozenset({"mean", "sum"})

# Normalisations of each feature vector (QK-norm: Gemma 3, OLMo 2): a projection normalised
# is still a projection of the same tensor.
FEATURE_NORMS = frozenset({"layernorm", "rmsnorm"})


# Inputs that are tables of positions by their name (`cos_t`, `freqs_cis`, `sin_cached`).
TABLE_PATTERN = r"(?:^|_)(?:cos|sin|freqs?|rope|rotary)(?:_|\d|$)"  # (re.IGNORECASE)
_TABLE_WORDS = ("freqs", "freq", "cos", "sin", "rope", "rotary")


class _TableName:
    """``TABLE_NAME.search(name)``: whether ``TABLE_PATTERN`` finds a match in the name, read
    by hand for an ASCII name (the pattern's compilation was ~0.5M instructions of every cold
    start, issue 36), with the pattern for any other."""

    def search(self, name: str) -> bool:
        if not name.isascii() or "\n" in name:
            return _table_pattern().search(name) is not None
        lowered = name.lower()
        starts = [0] + [index + 1 for index, char in enumerate(lowered) if char == "_"]
        for start in starts:
            for word in _TABLE_WORDS:
                if lowered.startswith(word, start):
                    end = start + len(word)
                    if end == len(lowered) or lowered[end] == "_" or lowered[end].isdigit():
                        return True
        return False


@lru_cache(maxsize=1)
def _table_pattern() -> re.Pattern[str]:
    return re.compile(TABLE_PATTERN, re.IGNORECASE)


TABLE_NAME = _TableName()


# `x OP number` written `number OP' x`; and what `m OP number` is for a 0/1 mask m:
# True the mask itself, False its negation.
MIRRORED = {"==": "==", "!=": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}
TRUTH = {("==", 1.0): True, ("!=", 0.0): True, (">", 0.0): True, (">=", 1.0): True,
          ("==", 0.0): False, ("!=", 1.0): False, ("<", 1.0): False, ("<=", 0.0): False}
