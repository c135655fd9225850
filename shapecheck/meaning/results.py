"""The public result of the meaning pass: the attention patterns found (`Attention` and
the tensors, scales, biases and masks it names) and `Meaning`, what `analyse` returns.
The report, `run`, the fused plans and conformance read these fields.
"""

from __future__ import annotations

from fractions import Fraction

from ..records import NamedTuple
from ..syntax import nodes
from ..messages.diagnostics import Diagnostic
from ..symbolic import Dim, DimSystem
from .facts import Axis, Info


class Role(NamedTuple):
    """A tensor of an attention, and what each of its axes is.

    ``node`` is the expression as written under parentheses, transposes
    (`.T`, `transpose`) and scalar factors: for ``(Q / sqrt(d)) @ K.T`` the query is
    ``Q`` and the key ``K``, in their own layout. ``axes`` has one entry per axis of
    ``node``'s value: ``"query"``, ``"key"``, ``"feature"`` (the axis Q and K are
    contracted over), ``"value"`` (V's and the output's kept axis), ``"batch:0"``,
    ``"batch:1"``, ... (the same label on every tensor: batch or head axes, numbered
    in the order of the weights' batch axes), or None (a size-1 broadcast axis, or
    unknown).
    """

    node: nodes.Expr
    axes: tuple[str | None, ...]

    def axis(self, role: str) -> int | None:
        """The index of the axis with this role, if exactly one has it."""
        found = [i for i, r in enumerate(self.axes) if r == role]
        return found[0] if len(found) == 1 else None


class Bias(NamedTuple):
    """A tensor added to the scores (an ALiBi or relative-position bias), with the role of
    each of its axes as :class:`Role` gives them; ``subtracts``: written `S - B`."""

    node: nodes.Expr
    axes: tuple[str | None, ...]
    subtracts: bool


class SoftCap(NamedTuple):
    """A soft-cap of the scores: ``node`` is the `tanh` call of `c * tanh(S / c)` (the
    factors `c` and `1 / c` are :class:`ScaleFactor` ops of their own)."""

    node: nodes.Expr


class ScaleFactor(NamedTuple):
    """One scalar factor of the scores: ``node`` is the scalar (`sqrt(d)` in `/ sqrt(d)`)."""

    node: nodes.Expr
    divides: bool  # written as a divisor (`/ sqrt(d)`), not a multiplier (`* 0.125`)
    operand: nodes.Expr | None  # the factor (Q or K) it scales before the product; None: after


class Scale(NamedTuple):
    """The scale of the scores and its verdict.

    The value is ``coefficient * prod(base ** exponent for base, exponent in powers)``;
    ``coefficient`` is None when a scalar of unknown value takes part (a scalar input).
    ``radicand`` is X when the dims part is ``1/sqrt(X)`` (None otherwise); ``expected``
    the size of the contracted axis. ``verdict``: ``"ok"`` (X provably equals it, up to a
    numeric factor), ``"wrong"`` (it does not: SC404), ``"inverted"`` (multiplied by
    ``sqrt(expected)``: SC404), ``"constant"`` (numbers only: no opinion), ``"unusual"``
    (another power of the dims: no opinion), ``"inferred"`` (X differs from the size, but
    a sketch's inference named one of them: no opinion), ``"deliberate"`` (X differs, but
    is no other size of the formula: a model constant, no opinion), ``"one_side"`` (only Q
    or only K scaled by the size ** -0.25: SC404), ``"none"`` (no scale at all: note SC405).
    """

    factors: tuple[ScaleFactor, ...]
    coefficient: float | None
    powers: tuple[tuple[Dim, Fraction], ...]
    radicand: Dim | None
    expected: Dim | None
    verdict: str

    def value(self, system: DimSystem) -> float | None:
        """The scale at the bindings of ``system`` (None when something is unbound)."""
        if self.coefficient is None:
            return None
        total = self.coefficient
        for base, exponent in self.powers:
            size = system.evaluate(base)
            if size is None:
                return None
            try:
                total *= float(size) ** float(exponent)
            except OverflowError:  # a size to a power past a float: no value to compare
                return None
        return total


class Mask(NamedTuple):
    """A mask applied to the scores (or, wrongly, to the weights).

    ``node`` is the `where(...)` call; ``condition`` the bool tensor with the role of each
    of its axes in this attention. ``kind`` is ``"causal"`` (built by `causal_mask`, `tril`,
    `triu` or by comparing positions, `i >= j`; in any transpose, negated or joined with `&`)
    or ``"bool"`` (any other bool tensor). ``keeps``: true entries keep the
    score (``where(m, S, -inf)``); False when they are the hidden ones
    (``where(m, -inf, S)``). ``fill`` is the value hidden scores get (None if it is not a
    number); ``additive`` says the mask was built as ``where(m, 0, -inf)`` and added.
    ``alignment`` (causal only), of what the mask lets through: ``"aligned"`` (each query
    sees the keys up to itself: `where(causal_mask(N), S, -inf)`, or
    `where(j > i, -inf, S)` hiding the future), ``"transposed"`` (each query sees the
    keys after it: a transposed mask, or the branches of `where` swapped), or None
    (unknown). ``strict``: the condition leaves its diagonal out (`j < i`, `tril(m, -1)`;
    None: shifted by an offset).
    """

    node: nodes.Expr
    condition: Role
    kind: str
    keeps: bool
    fill: float | None
    additive: bool
    alignment: str | None
    after_softmax: bool
    strict: bool | None = False


class Attention(NamedTuple):
    """One attention pattern: ``softmax(scale * Q @ K.T [+ bias] [masked]) @ V``, any layout.

    Nodes are syntax-tree nodes of the program (``Program.type_of`` gives their shapes).

    - ``statement`` / ``output``: the statement and the contraction (`P @ V` or
      `einsum(...)`); ``output_roles`` the roles of its result's axes.
    - ``weights``: the operand that is the softmax (as written, e.g. `P.T`), operand number
      ``weights_operand`` (0 or 1) of ``output``; ``weights_roles`` its axes' roles;
      ``summed_axes`` the axes of the weights the contraction sums over.
    - ``softmax`` / ``softmax_statement``: the softmax call (or the division of a softmax
      written by hand); ``softmax_axis``: the axis it normalises (an index into its
      argument, non-negative); ``softmax_roles`` the roles of its argument's axes.
    - ``scores`` / ``scores_statement``: the Q·K contraction, when found; ``query``,
      ``key``: its operands as :class:`Role`; ``value``: V.
    - ``batch``: the sizes of the batch axes ``batch:0``, ``batch:1``, ...
    - ``scale`` (None without scores), ``biases`` (tensors added to the scores), ``masks``,
      ``changes`` (what changed the weights between the softmax and the sum).
    - ``ops``: what happens to the scores between the product and the softmax, in the order
      it happens: each a :class:`ScaleFactor` (those on Q or K, before the product, first),
      :class:`Bias`, :class:`Mask` (masks after the softmax are not in it) or
      :class:`SoftCap`. Shifts by a
      constant or by a row maximum, `dropout` and moves are left out: the softmax does not
      see them. None when the scores reach the softmax through something else (an unknown
      construct): then only the roles are known.
    - Verdicts: ``axis_ok`` (the softmax normalises the summed axis), ``scale_ok`` (None:
      no opinion or no scale), ``mask_ok`` (None: no mask whose alignment is known).
    """

    statement: nodes.Stmt
    output: nodes.Expr
    output_roles: Role
    weights: nodes.Expr
    weights_operand: int
    weights_roles: Role
    summed_axes: tuple[int, ...]
    softmax: nodes.Expr
    softmax_statement: nodes.Stmt | None
    softmax_axis: int
    softmax_roles: Role | None
    scores: nodes.Expr | None
    scores_statement: nodes.Stmt | None
    query: Role | None
    key: Role | None
    value: Role
    batch: tuple[Dim, ...]
    scale: Scale | None
    biases: tuple[Bias, ...]
    masks: tuple[Mask, ...]
    ops: tuple[ScaleFactor | Bias | Mask | SoftCap, ...] | None
    changes: tuple[nodes.Expr, ...]
    axis_ok: bool | None
    scale_ok: bool | None
    mask_ok: bool | None


class RotatedCache(NamedTuple):
    """Keys rotated by tables the spec is given (inputs: the positions are not made in the
    spec), concatenated along ``axis`` after ``cache`` (inputs as they are): where the
    tables' positions start can only be read from their values (a whole model's
    positions, :mod:`shapecheck.pytorch.front.model`)."""

    tables: tuple[str, ...]
    cache: tuple[str, ...]
    axis: int


class Meaning:
    """What :func:`analyse` found: the attention patterns and the diagnostics."""

    __slots__ = ("patterns", "diagnostics", "_infos", "rotated_caches")

    def __init__(self, patterns: list[Attention], diagnostics: list[Diagnostic],
                 infos: dict[int, Info], rotated_caches: list[RotatedCache] | None = None) -> None:
        self.patterns = patterns
        self.diagnostics = diagnostics
        self._infos = infos
        self.rotated_caches = rotated_caches or []

    def axes(self, node: nodes.Expr) -> tuple[Axis, ...] | None:
        """The axes of an expression's value (identity is the object), None if unknown."""
        info = self._infos.get(id(node))
        return info.axes if info is not None else None
