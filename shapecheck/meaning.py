"""Axis meaning: which axis is which, followed through the whole formula.

The shape checker sees sizes; this pass sees *axes*. Every axis of every value is an
:class:`Axis` object, and identity is the object: two axes of size ``N`` are two axes.
An axis keeps its identity through `.T`, `transpose`, elementwise operations,
broadcasting, `where`, `dropout`, `repeat`, reductions (the axes that remain),
`split_heads` / `merge_heads` (the token axis), a `reshape` whose axes can be matched
(C order: equal sizes from either end), and `einsum` batch letters. A contraction (`@`,
`einsum`) creates the axes of its result, each remembering the operand axes it comes
from. Where an identity is lost (an opaque reshape) the axis is new and the checks
that would need it stay silent. How each builtin maps axes is the ``axes`` field of
its row in :data:`builtins.BUILTINS`.

One entry point, :func:`analyse`, reads the checked :class:`~program.Program` (its
statements, the type of every node, the resolved builtin calls) and returns a
:class:`Meaning`: the attention patterns it found and the diagnostics of the meaning
checks (SC402, SC404-SC411). ``api.check_text`` runs it on every check, so every
format, the report and `run` get its diagnostics; ``Program.meaning`` keeps the result.

**An attention** (:class:`Attention`) is a contraction (`@` or a two-operand `einsum`)
of which one operand, the *weights*, is a softmax (or a softmax written out as
``E / sum(E, axis=a, keepdims=true)``) after any transposes, permutations, reshapes
that keep the axis, `repeat`, `dropout` -- or masks and other changes, which are
reported. By definition the **query axis** is the weights' axis that the contraction
keeps and the **key axis** the one it sums over; the softmax should normalise over
the key axis. The other operand is V. When the query and key axes both come from one
contraction (``S = Q @ K.T`` in any layout or letters), that contraction is the
*scores*, and its operands Q and K. Between the scores and the softmax the pass
collects the scale (scalar factors, also those applied to Q or K before the product),
the biases (tensors added) and the masks (`where` with a bool condition, or an added
``where(mask, 0, -inf)``). See :class:`Attention` for the fields and docs/language.md
("Axis meaning") for what is checked and what stays silent.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any, NamedTuple

from . import codes, nodes, symbolic
from .builtins import BUILTINS, AxisKind, axis_index
from .diagnostics import Diagnostic, Note, Span, line_starts, span_text
from .einsum import SubscriptError, parse_subscripts
from .program import NewAxis, Program, Take, Value
from .symbolic import Dim, DimSystem, Verdict, to_text

# A fill at or below this blocks a key after the softmax (`-1e9`, `-1e4`, `-inf`);
# one above `_LEAKS` leaves the key a real weight (SC410). Between, no opinion.
_BLOCKS = -1e3
_LEAKS = -10.0
_MAX_SCALAR_DEPTH = 64
# Reshapes whose unmatched middle has more axes are not searched for the order that groups them.
_MAX_VIEW_AXES = 6


# --- the public result ---------------------------------------------------------------------


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
      :class:`Bias` or :class:`Mask` (masks after the softmax are not in it). Shifts by a
      constant or by a row maximum, `dropout` and moves are left out: the softmax does not
      see them. None when the scores reach the softmax through something else (a `tanh`
      soft-cap, an unknown construct): then only the roles are known.
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
    ops: tuple[ScaleFactor | Bias | Mask, ...] | None
    changes: tuple[nodes.Expr, ...]
    axis_ok: bool | None
    scale_ok: bool | None
    mask_ok: bool | None


class Meaning:
    """What :func:`analyse` found: the attention patterns and the diagnostics."""

    __slots__ = ("patterns", "diagnostics", "_infos")

    def __init__(self, patterns: list[Attention], diagnostics: list[Diagnostic],
                 infos: dict[int, _Info]) -> None:
        self.patterns = patterns
        self.diagnostics = diagnostics
        self._infos = infos

    def axes(self, node: nodes.Expr) -> tuple[Axis, ...] | None:
        """The axes of an expression's value (identity is the object), None if unknown."""
        info = self._infos.get(id(node))
        return info.axes if info is not None else None


# --- axes and facts ---------------------------------------------------------------------------


class Axis:
    """One axis, an index of the formula; identity is the object.

    ``size`` is its dim expression. ``node`` is the expression that created it (None for
    the axes of a declared tensor, named by ``tensor``); ``sources`` the (operand, axis)
    positions it comes from when ``node`` is a contraction; ``opaque`` marks an axis whose
    relation to the arguments' axes is unknown (an unmatched reshape).
    """

    __slots__ = ("size", "node", "tensor", "sources", "opaque")

    def __init__(self, size: Dim, node: nodes.Expr | None = None, tensor: str | None = None,
                 sources: tuple[tuple[int, int], ...] = (), opaque: bool = False) -> None:
        self.size = size
        self.node = node
        self.tensor = tensor
        self.sources = sources
        self.opaque = opaque


class _Scalar:
    """A scalar as ``coef * prod(base ** exponent)``; ``opaque``: a factor of unknown value."""

    __slots__ = ("coef", "powers", "opaque")

    def __init__(self, coef: float = 1.0, powers: tuple[tuple[Dim, Fraction], ...] = (),
                 opaque: bool = False) -> None:
        self.coef = coef
        self.powers = powers
        self.opaque = opaque


_OPAQUE = _Scalar(opaque=True)


class _Factor:
    """A scalar factor of a value: its node is evaluated (:meth:`_Analysis.scalar`) only
    when a scale is judged."""

    __slots__ = ("node", "divides", "operand")

    def __init__(self, node: nodes.Expr, divides: bool, operand: nodes.Expr | None = None) -> None:
        self.node = node
        self.divides = divides
        self.operand = operand


class _Applied:
    """A mask applied to a value, in the value's own axes."""

    __slots__ = ("node", "condition", "kind", "seer", "seen", "keeps", "fill", "aligned",
                 "additive", "origin", "strict")

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

    def moved(self, mapping: dict[int, Axis]) -> _Applied:
        def move(axis: Axis | None) -> Axis | None:
            return None if axis is None else mapping.get(id(axis))
        return _Applied(self.node, self.condition, self.kind, move(self.seer), move(self.seen),
                        self.keeps, self.fill, tuple(move(a) for a in self.aligned),
                        self.additive, self.origin, self.strict)


class _Causal:
    """A value that is a causal mask: true (non-zero) only where ``seer``'s index >=
    ``seen``'s (``strict``: >; None: shifted by an offset of unknown sign).

    Built by a row whose axis map names a ``triangle`` (`causal_mask`, `tril`, `triu`) or
    by comparing positions (`arange(N)[:, None] >= arange(N)[None, :]`); joined by `&`
    (or `*`) with another mask it still holds; negated (`~m`, `m == 0`) it swaps."""

    __slots__ = ("seer", "seen", "node", "strict")

    def __init__(self, seer: Axis, seen: Axis, node: nodes.Expr, strict: bool | None = False) -> None:
        self.seer = seer
        self.seen = seen
        self.node = node
        self.strict = strict

    def negated(self) -> _Causal:
        return _Causal(self.seen, self.seer, self.node, None if self.strict is None else not self.strict)

    def moved(self, mapping: dict[int, Axis]) -> _Causal | None:
        seer, seen = mapping.get(id(self.seer)), mapping.get(id(self.seen))
        if seer is None or seen is None or seer is seen:
            return None
        return _Causal(seer, seen, self.node, self.strict)


class _Contraction:
    """A `@` or an einsum: operands, which of their axes are summed, kept, batch."""

    __slots__ = ("node", "operands", "infos", "summed", "kept", "batch", "axes", "size",
                 "statement")

    def __init__(self, node: nodes.Expr, operands: Sequence[nodes.Expr], infos: Sequence[_Info],
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


class _Product:
    """A value that is a contraction, then scaled, biased or masked: possibly scores.

    ``parts``: the contracted sizes of products added to it with the same result axes
    (``Qn @ Kn.T + Qr @ Kr.T``, a content and a rotary part): the scores then sum over
    ``size + sum(parts)`` features, as if the factors were concatenated."""

    __slots__ = ("contraction", "inner_scale", "parts", "node")

    def __init__(self, contraction: _Contraction, inner_scale: tuple[_Factor, ...],
                 parts: tuple[Dim, ...] = (), node: nodes.Expr | None = None) -> None:
        self.contraction = contraction
        self.inner_scale = inner_scale  # factors applied to the operands before the product
        self.parts = parts
        self.node = node or contraction.node  # the sum of the products, if there are parts

    @property
    def size(self) -> Dim | None:
        size = self.contraction.size
        if size is None or not self.parts:
            return size
        return symbolic.total((size, *self.parts))


# A tensor added to the scores: its node, the scores' axis each of its axes lines up
# with, and whether it is subtracted.
_Bias = tuple[nodes.Expr, tuple["Axis | None", ...], bool]


class _Norm:
    """A value that is softmax weights: every slice along ``axis`` sums to 1 (unless changed)."""

    __slots__ = ("call", "axis", "source", "argument", "changed", "after", "statement")

    def __init__(self, call: nodes.Expr, axis: Axis, source: _Info, argument: nodes.Expr,
                 statement: nodes.Stmt | None, changed: tuple[nodes.Expr, ...] = (),
                 after: tuple[_Applied, ...] = ()) -> None:
        self.call = call
        self.axis = axis
        self.source = source  # the softmax argument: the scores' facts
        self.argument = argument
        self.statement = statement
        self.changed = changed  # what changed the weights since
        self.after = after  # masks applied to the weights (after the softmax)

    def changed_by(self, node: nodes.Expr, applied: _Applied | None = None) -> _Norm:
        return _Norm(self.call, self.axis, self.source, self.argument, self.statement,
                     self.changed + (node,), self.after + ((applied,) if applied else ()))


class _Reduced:
    __slots__ = ("call", "x", "axes")

    def __init__(self, call: nodes.Expr, x: nodes.Expr, axes: tuple[int, ...]) -> None:
        self.call = call
        self.x = x
        self.axes = axes  # the positions removed, in the reduced tensor


class _Info:
    """What the pass knows about one value: its axes and the facts that travel with it.

    Facts default to the class attributes; a value sets only those it has (most values
    have none), which keeps the pass cheap on long specs.
    """

    norm: _Norm | None = None
    product: _Product | None = None  # the contraction this value is, through scales, biases, masks
    scale: tuple[_Factor, ...] = ()  # scalar factors applied since the last contraction
    applied: tuple[_Applied, ...] = ()  # masks applied to this value (before any softmax)
    biases: tuple[_Bias, ...] = ()  # tensors added to it
    # The scales, biases and masks above, in the order they were applied.
    ops: tuple[_Factor | _Bias | _Applied, ...] = ()
    masks: tuple[_Applied, ...] = ()  # the additive masks this value is (where(m, 0, -inf))
    causal: tuple[_Causal, ...] = ()  # bool values: the causal masks this value is
    position: Axis | None = None  # each value is its index along this axis (`arange`)
    shifted_position: bool = False  # ... plus an offset (`arange(N) + M - N`)
    reduced: _Reduced | None = None  # a reduction's result (its axes are the ones left)
    exp_of: _Info | None = None  # exp(x): x's facts (a softmax written by hand)
    constant: float | None = None  # every entry is this number (`ones(...) * -inf`)
    nonzero: float | None = None  # a causal value: its entries where it is not zero
    squashed: tuple[tuple[_Applied, nodes.Expr], ...] = ()  # masks, and the soft-cap after them
    positional: nodes.Expr | None = None  # a rotary transform of positions made this value
    table: bool = False  # a table of positions' cos or sin (`cos(angle)`, an input `cos_t`)
    pieces_of: int | None = None  # parts of this value (its id), cut, negated or rejoined
    term_of: int | None = None  # a value's parts times a table (a term of a rotation)
    copies: Axis | None = None  # the values are copies along this axis (`repeat` of a 1)
    tiled: tuple[nodes.Expr, Axis, Dim] | None = None  # heads tiled (j, j+Hkv, ...): where,
    # the tiled axis, the number of heads tiled
    joined: tuple[Axis, tuple[Dim, ...], tuple[nodes.Expr, ...]] | None = None  # concat parts
    linear: bool = False  # a triangle of a Q·K product (causal linear attention, no softmax)

    def __init__(self, axes: tuple[Axis, ...] | None, **facts: Any) -> None:
        self.axes = axes
        if facts:
            self.__dict__.update(facts)

    def moved(self, axes: tuple[Axis, ...]) -> _Info:
        """The same facts on a value whose values were only moved (same axis identities)."""
        info = _Info(axes)
        info.__dict__.update(self.__dict__)
        info.axes = axes
        info.__dict__.pop("exp_of", None)
        return info

    def shifted(self, axes: tuple[Axis, ...], norm: _Norm | None = None,
                ops: tuple[_Factor | _Bias | _Applied, ...] = ()) -> _Info:
        """Scores scaled, shifted, biased or masked (``ops``, in order): the facts go on."""
        info = _Info(axes)
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
        if ops or self.ops:
            info.ops = self.ops + ops
            info.scale = self.scale + tuple(op for op in ops if type(op) is _Factor)
            info.applied = self.applied + tuple(op for op in ops if type(op) is _Applied)
            info.biases = self.biases + tuple(op for op in ops if type(op) is tuple)
        return info


_UNKNOWN = _Info(None)
_SCALAR = _Info(())


# --- the pass -------------------------------------------------------------------------------------


def analyse(program: Program) -> Meaning:
    """Follow every axis through ``program``; find the attention patterns; check them."""
    return _Analysis(program).run()


class _Analysis:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.types = program.types
        self.calls = program.calls
        self.names: dict[str, _Info] = {}
        self.scalars: dict[str, nodes.Expr] = {}  # scalar tensors: their definitions
        self.infos: dict[int, _Info] = {}
        self.contractions: dict[int, _Contraction] = {}
        self.patterns: list[Attention] = []
        self.diagnostics: list[Diagnostic] = []
        self._reported: set[tuple[str, int]] = set()
        self._statement: nodes.Stmt | None = None
        self._line_starts = line_starts(program.source)
        self._system: DimSystem | None = None
        self._verdicts: dict[tuple[Any, ...], tuple[str, Dim | None]] = {}
        inferred = program.inferred
        self._inferred = frozenset(name for name, _ in inferred.dims) if inferred else frozenset()

    @property
    def system(self) -> DimSystem:
        """Questions about sizes are asked without the `--dim` bindings (symbolic only)."""
        if self._system is None:
            self._system = self.program.dims.without_bindings()
        return self._system

    def run(self) -> Meaning:
        for statement in self.program.statements:
            self.step(statement)
        return self.result()

    # `run` in steps, for a driver that resumes from the state after an unchanged
    # beginning of the program (:mod:`shapecheck.incremental`).

    def step(self, statement: nodes.Stmt) -> None:
        """Follow the next statement of ``program.statements``."""
        if isinstance(statement, nodes.TensorDecl):
            self._declare(statement)
        elif isinstance(statement, (nodes.Define, nodes.Output)) and statement.value is not None:
            try:
                self._define(statement)
            except symbolic.TooComplex:  # past the algebra budget (SC003): no opinion on it
                tensor = self.program.tensors.get(statement.name.name)
                if tensor is not None and tensor.span == statement.span:
                    self.names[statement.name.name] = _UNKNOWN

    def result(self) -> Meaning:
        return Meaning(self.patterns, self.diagnostics, self.infos)

    def checkpoint(self) -> dict[str, Any]:
        """What the statements followed so far found (copies of the tables; the facts in
        them are never changed once made, so they are shared)."""
        return {name: copy.copy(getattr(self, name)) for name in _STATE}

    def restore(self, checkpoint: dict[str, Any]) -> None:
        """Continue from a checkpoint taken on a program whose statements up to there
        are the same (same trees, lines, types and dims) as this one's."""
        for name, value in checkpoint.items():
            setattr(self, name, copy.copy(value))

    def _declare(self, statement: nodes.TensorDecl) -> None:
        tensor = self.program.tensors.get(statement.name.name)
        if tensor is None or tensor.span != statement.span or tensor.value.shape is None:
            return
        name = statement.name.name
        info = self.names[name] = _Info(tuple(Axis(size, tensor=name) for size in tensor.value.shape))
        if _TABLE_NAME.search(name):
            info.table = True

    def _define(self, statement: nodes.Define | nodes.Output) -> None:
        assert statement.value is not None
        self._statement = statement
        info = self.value(statement.value)
        name = statement.name.name
        tensor = self.program.tensors.get(name)
        if tensor is None or tensor.span != statement.span:
            return  # a redefinition (an error): the first definition stands
        if tensor.value.shape is not None and info.axes is not None \
                and len(info.axes) != len(tensor.value.shape):
            info = _UNKNOWN  # an annotation that failed: the checker kept another shape
        self.names[name] = info
        if tensor.value.shape == ():
            self.scalars[name] = statement.value

    # --- values ----------------------------------------------------------------------------

    def value(self, node: nodes.Expr) -> _Info:
        info = self._value(node)
        self.infos[id(node)] = info
        return info

    def _value(self, node: nodes.Expr) -> _Info:
        kind = type(node)
        if kind is nodes.Name:
            info = self.names.get(node.name)  # type: ignore[union-attr]
            if info is not None:
                return info
        value = self.types.get(id(node))
        if value is None or value.shape is None:
            self._visit_children(node)
            return _UNKNOWN
        if kind is nodes.Paren:
            return self.value(node.inner)  # type: ignore[union-attr]
        if kind is nodes.Name:
            if value.shape == ():
                return _SCALAR
            # A tensor the spec uses without declaring it (a sketch: inference gave its
            # shape): its axes are new at its first use, and shared by every later one.
            name = node.name  # type: ignore[union-attr]
            info = self.names[name] = _Info(tuple(Axis(size, tensor=name) for size in value.shape))
            return info
        if not value.shape:  # a scalar has no axes; an `@` inside one still has meaning
            self._visit_children(node)
            return _SCALAR
        handler = _HANDLERS.get(kind)
        return handler(self, node, value) if handler is not None else self._opaque(node, value)

    def _binop(self, node: nodes.BinOp, value: Value) -> _Info:
        if node.op == "@":
            return self._matmul(node)
        return self._arithmetic(node, value)

    def _unary(self, node: nodes.Unary, value: Value) -> _Info:
        operand = self.value(node.operand)
        if operand.axes is None or node.op == "+":
            return operand
        if node.op == "~":
            return _Info(operand.axes, causal=tuple(c.negated() for c in operand.causal),
                         nonzero=1.0)
        changed = operand.norm.changed_by(node) if operand.norm is not None else None
        info = _Info(operand.axes, norm=changed)
        if node.op == "-":
            info.pieces_of, info.table = _base(operand), operand.table
            info.term_of, info.positional = operand.term_of, operand.positional
        return info

    def _transpose(self, node: nodes.Transpose, value: Value) -> _Info:
        operand = self.value(node.operand)
        axes = operand.axes
        if axes is None or len(axes) < 2:
            return _UNKNOWN
        return operand.moved(axes[:-2] + (axes[-1], axes[-2]))

    def _subscript(self, node: nodes.Subscript, value: Value) -> _Info:
        """`x[...]` (the checker's plan of it): an axis taken whole keeps its identity, a
        new axis (`None`) is new, a part of an axis is a new, opaque axis (a window of the
        keys is not the keys). x's facts go on only when no axis is cut or dropped
        (`P[None]` is still normalised); otherwise the pass stays silent about it."""
        operand = self.value(node.operand)
        plan = self.program.subscripts.get(id(node))
        if operand.axes is None or plan is None or value.shape is None:
            return _UNKNOWN
        sizes = iter(value.shape)
        axes: list[Axis] = []
        whole = True
        windows: dict[int, tuple[Axis, Any]] = {}  # old axis -> (its window, the start)
        for entry in plan.entries:
            if isinstance(entry, Take):
                whole = False
                continue
            size = next(sizes)
            if isinstance(entry, NewAxis):
                axes.append(Axis(size, node))
            elif entry.start is None and entry.stop is None and entry.step == 1:
                axes.append(operand.axes[entry.axis])
            else:
                axes.append(Axis(size, node, opaque=True))
                whole = False
                if entry.step == 1:
                    windows[id(operand.axes[entry.axis])] = (axes[-1], entry.start)
        if whole:
            return operand.moved(tuple(axes))
        info = _Info(tuple(axes))
        if operand.causal or operand.masks:
            self._windowed(info, operand, windows)
        info.table = operand.table
        info.pieces_of = _base(operand)
        return info

    def _windowed(self, info: _Info, operand: _Info, windows: dict[int, tuple[Axis, Any]]) -> None:
        """A causal mask cut from a buffer of the largest size (`bias[:T, :T]`, nanoGPT's
        and Whisper's form): windows of both of its axes are still a triangle, the same
        way round. Windows starting at different places shift its diagonal (a KV-cache
        window `bias[M:M+N, :M+N]`): the diagonal is then of unknown offset."""
        assert info.axes is not None and operand.axes is not None
        mapping = {id(a): a for a in info.axes if not a.opaque}
        zero = symbolic.integer(0)
        starts: dict[int, Any] = {}
        for old, (new, start) in windows.items():
            mapping[old] = new
            starts[id(new)] = zero if start is None else start

        def strict(seer: Axis | None, seen: Axis | None, was: bool | None) -> bool | None:
            a, b = starts.get(id(seer), zero), starts.get(id(seen), zero)
            return was if self.system.equal(a, b) else None
        causal = []
        for c in operand.causal:
            moved = c.moved(mapping)
            if moved is not None:
                causal.append(_Causal(moved.seer, moved.seen, moved.node,
                                      strict(moved.seer, moved.seen, moved.strict)))
        if causal:
            info.causal, info.nonzero = tuple(causal), operand.nonzero
        masks = []
        for m in operand.masks:
            moved_mask = m.moved(mapping)
            if m.kind == "causal" and (moved_mask.seer is None or moved_mask.seen is None):
                continue
            moved_mask.strict = strict(moved_mask.seer, moved_mask.seen, m.strict)
            masks.append(moved_mask)
        if masks:
            info.masks = tuple(masks)

    def _visit_children(self, node: nodes.Expr) -> None:
        """Unknown or scalar values: still look inside (an `@` in an argument has meaning)."""
        for child in _children(node):
            self.value(child)

    def _opaque(self, node: nodes.Expr, value: Value) -> _Info:
        """A construct whose axes this pass does not follow: new axes, no facts."""
        self._visit_children(node)
        assert value.shape is not None
        return _Info(tuple(Axis(size, node, opaque=True) for size in value.shape))

    # --- contractions ------------------------------------------------------------------------

    def _matmul(self, node: nodes.BinOp) -> _Info:
        left, right = self.value(node.left), self.value(node.right)
        result = self.types[id(node)].shape
        laxes, raxes = left.axes, right.axes
        if not laxes or not raxes or result is None:
            return _UNKNOWN
        lrank, rrank = len(laxes), len(raxes)
        summed = [[lrank - 1], [rrank - 2 if rrank >= 2 else 0]]
        kept = [[lrank - 2] if lrank >= 2 else [], [rrank - 1] if rrank >= 2 else []]
        batch_rank = len(result) - len(kept[0]) - len(kept[1])
        axes: list[Axis] = []
        if batch_rank:
            left_batch = list(range(lrank - 2 - batch_rank, lrank - 2))
            right_batch = list(range(rrank - 2 - batch_rank, rrank - 2))
            for position in range(batch_rank):
                sources = tuple((operand, index) for operand, index in
                                ((0, left_batch[position]), (1, right_batch[position])) if index >= 0)
                axes.append(Axis(result[position], node, None, sources))
            batch = [[i for i in left_batch if i >= 0], [i for i in right_batch if i >= 0]]
        else:
            batch = [[], []]
        if kept[0]:
            axes.append(Axis(result[len(axes)], node, None, ((0, kept[0][0]),)))
        if kept[1]:
            axes.append(Axis(result[len(axes)], node, None, ((1, kept[1][0]),)))
        return self._contracted(node, (node.left, node.right), (left, right), summed, kept,
                                batch, tuple(axes), laxes[-1].size)

    def _einsum(self, node: nodes.Call, operands: Sequence[nodes.Expr], subscripts: str) -> _Info:
        infos = [self.value(operand) for operand in operands]
        result = self.types[id(node)].shape
        if result is None or any(info.axes is None for info in infos):
            return _UNKNOWN
        try:
            parsed = parse_subscripts(subscripts, len(operands))
        except SubscriptError:
            return _UNKNOWN
        terms, output = parsed.inputs, parsed.output
        keys = [_einsum_keys(term, len(info.axes or ())) for term, info in zip(terms, infos)]
        out_keys = _einsum_keys(output, len(result))
        if out_keys is None or any(k is None for k in keys):
            return _UNKNOWN
        placed: dict[Any, list[tuple[int, int]]] = {}
        for operand, operand_keys in enumerate(keys):
            for position, key in enumerate(operand_keys or ()):
                placed.setdefault(key, []).append((operand, position))
        axes = tuple(Axis(size, node, sources=tuple(placed.get(key, ())))
                     for key, size in zip(out_keys, result))
        outputs = set(out_keys)
        summed = [[p for p, k in enumerate(ks or ()) if k not in outputs] for ks in keys]
        kept, batch = [], []
        for operand_keys in keys:
            shared = [p for p, k in enumerate(operand_keys or ())
                      if k in outputs and len({o for o, _ in placed[k]}) > 1]
            batch.append(shared)
            kept.append([p for p, k in enumerate(operand_keys or ()) if k in outputs and p not in shared])
        size = None
        if len(operands) == 2:
            both = [k for k in set(keys[0] or ()) & set(keys[1] or ()) if k not in outputs]
            if both:
                size = symbolic.product(_einsum_size(self.types, operands, placed[k][0]) for k in
                                        sorted(both, key=str))
        return self._contracted(node, operands, infos, summed, kept, batch, axes, size)

    def _contracted(self, node: nodes.Expr, operands: Sequence[nodes.Expr], infos: Sequence[_Info],
                    summed: list[list[int]], kept: list[list[int]], batch: list[list[int]],
                    axes: tuple[Axis, ...], size: Dim | None) -> _Info:
        assert self._statement is not None
        contraction = _Contraction(node, operands, infos, summed, kept, batch, axes,
                                   size if len(operands) == 2 else None, self._statement)
        self.contractions[id(node)] = contraction
        if len(operands) == 2:
            for operand, info in enumerate(infos):
                if info.norm is not None:
                    self._attention(contraction, operand)
                elif info.linear and info.causal:
                    self._prefix_sums(contraction, operand)
        if size is None or len(operands) != 2:
            return _Info(axes)
        inner: tuple[_Factor, ...] = ()
        for operand, info in zip(operands, infos):
            if info.scale:
                inner += tuple(_Factor(f.node, f.divides, f.operand or operand)
                               for f in info.scale)
        return _Info(axes, product=_Product(contraction, inner))

    # --- arithmetic ------------------------------------------------------------------------

    def _arithmetic(self, node: nodes.BinOp, value: Value) -> _Info:
        left, right = self.value(node.left), self.value(node.right)
        if left.axes is None or right.axes is None:
            return _UNKNOWN
        if not right.axes or not left.axes:  # a tensor and a scalar
            tensor, scalar, tensor_node, scalar_node = (
                (left, right, node.left, node.right) if not right.axes
                else (right, left, node.right, node.left))
            return self._with_scalar(node, tensor, scalar_node, tensor_node is node.left)
        if node.op == "/" and self._normalises(node, right):
            return self._handmade_softmax(node, left, right)
        return self._tensors(node, [node.left, node.right], [left, right], value)

    def _with_scalar(self, node: nodes.BinOp, tensor: _Info, scalar_node: nodes.Expr,
                     tensor_first: bool) -> _Info:
        assert tensor.axes is not None
        if node.op in nodes.COMPARISONS:
            return self._compare_number(node, tensor, scalar_node, tensor_first)
        norm = tensor.norm.changed_by(node) if tensor.norm is not None else None
        if node.op == "*" or (node.op == "/" and tensor_first):
            factor = _Factor(scalar_node, node.op == "/")
            info = tensor.shifted(tensor.axes, norm, (factor,))
            number = self._number(scalar_node)
            if number is not None and number != 0 and math.isfinite(number) | (node.op == "*"):
                self._scaled_values(node, tensor, info, 1 / number if node.op == "/" else number)
            return info
        if node.op in ("+", "-"):  # a constant shift: the softmax does not see it
            info = tensor.shifted(tensor.axes, norm)
            if tensor.position is not None and (node.op == "+" or tensor_first):
                # positions plus an offset (`i + M - N`) keep their order; `T - i` does not
                info.position, info.shifted_position = tensor.position, True
            if node.op == "-" and not tensor_first and self._number(scalar_node) == 1.0:
                self._complement(info, tensor)
            return info
        return _Info(tensor.axes, norm=norm, reduced=tensor.reduced)

    def _scaled_values(self, node: nodes.BinOp, tensor: _Info, info: _Info, factor: float) -> None:
        """The numbers of a mask times a number: a triangle of `-1e9` (or `-inf`) added to
        the scores hides where it is not zero (`(1 - tril(ones([N, N]))) * -1e9`, a padding
        mask `(1 - m) * -1e9`): it is an additive mask."""
        if tensor.constant is not None:
            info.constant = tensor.constant * factor
            return
        if tensor.product is not None or tensor.norm is not None or tensor.masks:
            return
        if tensor.causal:
            info.causal = tensor.causal
            if tensor.nonzero is not None:
                info.nonzero = tensor.nonzero * factor
        value = (tensor.nonzero if tensor.causal else 1.0) or 0.0
        if value > 0 and value * factor <= _BLOCKS:
            info.masks = (self._own_mask(node, node, info, keeps=False, fill=value * factor),)

    def _own_mask(self, node: nodes.Expr, condition: nodes.Expr, info: _Info, keeps: bool,
                  fill: float) -> _Applied:
        """A value that is itself an additive mask, in its own axes."""
        assert info.axes is not None
        return self._applied(node, condition, info, {id(a): a for a in info.axes}, keeps, fill,
                             additive=True)

    def _complement(self, info: _Info, tensor: _Info) -> None:
        """`1 - m` of a 0/1 mask: the positions it hides become the ones it allows."""
        if tensor.causal and tensor.nonzero == 1.0:
            info.causal = tuple(c.negated() for c in tensor.causal)
            info.nonzero = 1.0

    def _compare_number(self, node: nodes.BinOp, tensor: _Info, number_node: nodes.Expr,
                        tensor_first: bool) -> _Info:
        """A causal mask compared with 0 or 1 (`tril(ones([N, N])) == 1`, `m == 0`,
        `m != false`): the same mask, or its negation."""
        number = self._number(number_node)
        op = node.op if tensor_first else _MIRRORED[node.op]
        truth = _TRUTH.get((op, number))
        if truth is None or not tensor.causal:
            return _Info(tensor.axes)
        return _Info(tensor.axes, causal=tensor.causal if truth else
                     tuple(c.negated() for c in tensor.causal), nonzero=1.0)

    def _compare(self, node: nodes.Expr, operands: list[_Info], axes: tuple[Axis, ...],
                 mappings: list[dict[int, Axis]]) -> _Info:
        """Positions compared along two axes (`arange(N)[:, None] >= arange(M)[None, :]`):
        a causal mask whose rows see the columns at or before them."""
        left, right = operands
        a = mappings[0].get(id(left.position)) if left.position is not None else None
        b = mappings[1].get(id(right.position)) if right.position is not None else None
        op = node.op if isinstance(node, nodes.BinOp) else ""
        if a is None or b is None or a is b or op not in (">=", ">", "<=", "<"):
            return _Info(axes)
        seer, seen = (a, b) if op in (">=", ">") else (b, a)
        strict = None if left.shifted_position or right.shifted_position else op in (">", "<")
        return _Info(axes, causal=(_Causal(seer, seen, node, strict),), nonzero=1.0)

    def _tensors(self, node: nodes.Expr, operand_nodes: list[nodes.Expr], operands: list[_Info],
                 value: Value) -> _Info:
        """An elementwise operation on several tensors, with NumPy broadcasting."""
        info = self._elementwise_tensors(node, operand_nodes, operands, value)
        if info.axes is not None and info is not _UNKNOWN and isinstance(node, nodes.BinOp):
            self._follow_positions(node, operands, info)
        return info

    def _follow_positions(self, node: nodes.BinOp, operands: list[_Info], info: _Info) -> None:
        """A rotary transform: `x * cos + rotate_half(x) * sin` (or the halves of x, or
        its even and odd features, each times a table, added or subtracted). Its result,
        and what is built from it, is a value whose features depend on positions."""
        left, right = operands
        if node.op == "*":
            for a, b in ((left, right), (right, left)):
                if a.table and not b.table and b.positional is None:
                    info.term_of = _base(b)
            if left.table and right.table:
                info.table = True
        elif node.op in ("+", "-"):
            if left.term_of is not None and left.term_of == right.term_of:
                info.positional = node
            elif left.positional is not None or right.positional is not None:
                info.positional = left.positional or right.positional

    def _elementwise_tensors(self, node: nodes.Expr, operand_nodes: list[nodes.Expr],
                             operands: list[_Info], value: Value) -> _Info:
        order = sorted(range(len(operands)), key=lambda i: (
            operands[i].product is None and operands[i].norm is None, i))
        axes, mappings = self._broadcast(node, operand_nodes, operands, order)
        if axes is None:
            return _UNKNOWN
        op = node.op if isinstance(node, nodes.BinOp) else ""
        if op in nodes.COMPARISONS:
            return self._compare(node, operands, axes, mappings)
        if value.is_bool or op == "&":
            # `&` (or `*` on bools) is "and": each causal part still holds, if they agree.
            if op not in ("&", "*"):
                return _Info(axes)
            causal = [moved for i, o in enumerate(operands) for c in o.causal
                      if (moved := c.moved(mappings[i])) is not None]
            if len({(id(c.seer), id(c.seen)) for c in causal}) != 1:
                return _Info(axes)
            return _Info(axes, causal=(causal[0],), nonzero=1.0)
        norms = [o.norm for o in operands if o.norm is not None]
        if op == "*" and not norms and len(operands) == 2:
            linear = self._masked_product(operands, mappings, axes)
            if linear is not None:
                return linear
        if op in ("+", "-") and not norms:
            # Scores plus a bias, an additive mask, or a shift by a reduction (a softmax
            # written by hand): the scores' facts go on.
            if op == "-" and order[0] != 0:
                return _Info(axes)  # `B - S`: the scores negated, not understood
            main = operands[order[0]]
            ops: tuple[_Bias | _Applied, ...] = ()
            parts: tuple[Dim, ...] = ()
            for i, other in enumerate(operands):
                if i == order[0]:
                    continue
                if other.masks:
                    ops += tuple(m.moved(mappings[i]) for m in other.masks)
                elif other.reduced is None:
                    lined_up = tuple(mappings[i].get(id(a)) for a in other.axes or ())
                    ops += ((operand_nodes[i], lined_up, op == "-"),)
                    if op == "+" and other.product is not None and main.product is not None \
                            and other.product.size is not None and lined_up == axes:
                        parts += (other.product.size,)  # a product of the same axes
            info = main.shifted(axes, None, ops)
            if parts:
                assert main.product is not None
                info.product = _Product(main.product.contraction, main.product.inner_scale,
                                        main.product.parts + parts, node)
            return info
        if len(norms) == 1:
            # Weights masked, scaled by a tensor or mixed with other numbers.
            return _Info(axes, norm=norms[0].changed_by(node))
        return _Info(axes)

    @staticmethod
    def _masked_product(operands: list[_Info], mappings: list[dict[int, Axis]],
                        axes: tuple[Axis, ...]) -> _Info | None:
        """`(Q @ K.T) * tril(ones([N, N]))`: the product kept on one side of the diagonal
        (causal linear attention, the running sums of its keys written as a matrix)."""
        for mine, other in ((0, 1), (1, 0)):
            product, mask = operands[mine], operands[other]
            if product.product is None or not mask.causal or mask.nonzero != 1.0:
                continue
            moved = mask.causal[0].moved(mappings[other])
            if moved is not None:
                return _Info(axes, causal=(moved,), linear=True)
        return None

    def _broadcast(self, node: nodes.Expr, operand_nodes: list[nodes.Expr], operands: list[_Info],
                   order: list[int]) -> tuple[tuple[Axis, ...] | None, list[dict[int, Axis]]]:
        """The result's axes (from the first operand in ``order`` that is not 1 there),
        and per operand the result axis each of its axes lines up with."""
        layouts = [o.axes for o in operands]
        if any(layout is None for layout in layouts):
            return None, []
        rank = max(len(layout or ()) for layout in layouts)
        mappings: list[dict[int, Axis]] = [{} for _ in operands]
        result: list[Axis] = []
        for from_right in range(rank, 0, -1):
            present = [(i, layouts[i][-from_right]) for i in order  # type: ignore[index]
                       if len(layouts[i] or ()) >= from_right]
            sized = [(i, a) for i, a in present if not symbolic.is_literal_one(a.size)]
            chosen = (sized or present)[0][1]
            result.append(chosen)
            for i, axis in present:
                if axis is chosen or not symbolic.is_literal_one(axis.size):
                    mappings[i][id(axis)] = chosen
            if len(sized) > 1:
                self._check_alignment(node, operand_nodes, operands, sized, layouts)
        return tuple(result), mappings

    def _check_alignment(self, node: nodes.Expr, operand_nodes: list[nodes.Expr],
                         operands: list[_Info], lined_up: list[tuple[int, Axis]],
                         layouts: list[Any]) -> None:
        """SC409: a reduction's remaining axis lined up with a different axis of the
        tensor it was reduced from (`E / sum(E, axis=-1)` without keepdims)."""
        for i, axis in lined_up:
            reduced = operands[i].reduced
            if reduced is None:
                continue
            for j, other in lined_up:
                if j == i or other is axis or axis not in layouts[j]:
                    continue
                key = ("SC409", id(node))
                if key in self._reported:
                    return
                self._reported.add(key)
                x = self._text(reduced.x)
                self._report(codes.REDUCED_AXIS.diag(
                    node.span, reduction=self._text(reduced.call), x=x,
                    other=self._text(operand_nodes[j]), expr=self._text(node),
                    size=to_text(axis.size),
                    notes=[codes.note("reduced_here", reduced.call.span,
                                      reduction=self._text(reduced.call))],
                    help=[codes.help_text("keepdims", reduction=self._text(reduced.call))]))
                return

    def _normalises(self, node: nodes.BinOp, right: _Info) -> bool:
        """`E / sum(E, axis=a, keepdims=true)` (the sum may be named): each slice of the
        result along a sums to 1."""
        reduced = right.reduced
        if reduced is None or self.infos.get(id(reduced.call)) is not right:
            return False  # not the sum itself (`2 * sum(E)` does not normalise)
        info = self.calls.get(id(reduced.call))
        if info is None or info.builtin != "sum" or not info.args.get("keepdims") \
                or info.args.get("axis") is None:
            return False
        return self._same(node.left, reduced.x)

    def _handmade_softmax(self, node: nodes.BinOp, left: _Info, right: _Info) -> _Info:
        assert right.reduced is not None
        info = self.calls[id(right.reduced.call)]
        assert left.axes is not None
        axis = left.axes[axis_index(info.args["axis"], len(left.axes))]
        source = left.exp_of or left
        argument = node.left
        assert self._statement is not None
        return _Info(left.axes, norm=_Norm(node, axis, source, argument, self._statement))

    def _same(self, a: nodes.Expr, b: nodes.Expr) -> bool:
        a, b = nodes.strip_parens(a), nodes.strip_parens(b)
        if isinstance(a, nodes.Name) and isinstance(b, nodes.Name):
            return a.name == b.name
        return self._text(a) == self._text(b)

    # --- calls ------------------------------------------------------------------------------

    def _call(self, node: nodes.Call, value: Value) -> _Info:
        info = self.calls.get(id(node))
        builtin = BUILTINS.get(info.builtin) if info is not None else None
        if info is None or builtin is None:
            return self._opaque(node, value)
        axis_map = builtin.axes
        kind = axis_map.kind
        if kind is AxisKind.CONTRACT:
            return self._einsum(node, info.args["operands"].items, info.args["subscripts"])
        tensors = self._tensor_arguments(info.args, axis_map.tensors)
        if info.builtin == "where":
            return self._where(node, tensors, value)
        if kind is AxisKind.CREATE:
            return self._create(node, axis_map, info.args, value)
        if kind is AxisKind.OPAQUE or any(i.axes is None for _, i in tensors):
            return self._opaque(node, value) if kind is AxisKind.OPAQUE else _UNKNOWN
        if kind is AxisKind.ELEMENTWISE:
            return self._elementwise(node, info.args, axis_map, tensors, value)
        x_node, x = tensors[0]
        assert x.axes is not None and value.shape is not None
        if kind is AxisKind.PERMUTE:
            perm = info.args.get(axis_map.axis or "")
            if perm is None:
                return x.moved(x.axes[:-2] + (x.axes[-1], x.axes[-2]))
            return x.moved(tuple(x.axes[p] for p in perm))
        if kind is AxisKind.RESHAPE:
            return self._reshape(node, x_node, x, value.shape)
        if kind is AxisKind.SPLIT_HEADS:
            *batch, tokens, last = x.axes
            heads, per_head = (Axis(size, node) for size in value.shape[-3::2])
            return x.moved((*batch, heads, tokens, per_head))
        if kind is AxisKind.MERGE_HEADS:
            *batch, _, tokens, _ = x.axes
            return x.moved((*batch, tokens, Axis(value.shape[-1], node)))
        if kind is AxisKind.RESIZE:
            moved = x.moved(x.axes)
            where = axis_index(info.args[axis_map.axis or ""], len(x.axes))
            if x.norm is not None and x.axes[where] is x.norm.axis:
                moved.norm = x.norm.changed_by(node)  # copies along the softmax axis
            if symbolic.is_literal_one(x.axes[where].size):
                # a new axis of copies (`repeat(K[:, None], G, axis=1)`, torch's `expand`)
                axes = list(x.axes)
                axes[where] = Axis(value.shape[where], node)
                moved = x.moved(tuple(axes))
                moved.copies = axes[where]
            return moved
        if kind is AxisKind.JOIN:
            return self._join(node, info.args, axis_map.axis, tensors, value)
        if kind is AxisKind.REDUCE:
            return self._reduce(node, info.args, axis_map, x_node, x, value)
        return self._opaque(node, value)

    def _tensor_arguments(self, args: dict[str, Any], names: tuple[str, ...]
                          ) -> list[tuple[nodes.Expr, _Info]]:
        found = []
        for name in names:
            arg = args.get(name)
            items = arg.items if isinstance(arg, nodes.ListExpr) else (arg,) if arg is not None else ()
            for item in items:
                found.append((item, self.value(item)))
        return found

    def _elementwise(self, node: nodes.Call, args: dict[str, Any], axis_map: Any,
                     tensors: list[tuple[nodes.Expr, _Info]], value: Value) -> _Info:
        if len(tensors) != 1:
            return self._tensors(node, [n for n, _ in tensors], [i for _, i in tensors], value)
        x_node, x = tensors[0]
        assert x.axes is not None
        if axis_map.normalises is not None:
            axis = x.axes[axis_index(args[axis_map.normalises], len(x.axes))] if x.axes else None
            if axis is None:
                return _Info(x.axes)
            source = x
            return _Info(x.axes, norm=_Norm(node, axis, source, x_node, self._statement))
        if axis_map.keeps_values:
            return x.moved(x.axes)
        if axis_map.triangle is not None and len(x.axes) >= 2:
            return self._triangle_of(node, axis_map, args, x)
        name = node.func.name
        if name == "log" and x.causal and x.nonzero is not None and x.nonzero > 0:
            # log of a 0/1 triangle: 0 where it allows, -inf where it hides (an additive mask)
            info = _Info(x.axes, causal=x.causal)
            info.masks = (self._own_mask(node, x_node, info, keeps=True, fill=-math.inf),)
            return info
        norm = x.norm.changed_by(node) if x.norm is not None else None
        exp_of = x if name == "exp" else None
        info = _Info(x.axes, norm=norm, reduced=x.reduced, exp_of=exp_of)
        if name in ("cos", "sin") or x.table:
            info.table = True
        if name in _SQUASHING and (x.applied or x.squashed):
            # a soft-cap after the mask: its fills turn finite
            info.squashed = x.squashed + tuple((m, node) for m in x.applied)
        return info

    def _triangle_of(self, node: nodes.Call, axis_map: Any, args: dict[str, Any], x: _Info) -> _Info:
        """`tril(x)`, `triu(x, 1)`: a causal value; of a constant (`triu(full([N, N], -inf),
        1)`, `tril(ones(...))`) its entries on the triangle are that number, and a very
        negative one makes it an additive mask hiding the triangle."""
        assert x.axes is not None
        made = self._triangle(node, axis_map, args, x.axes)
        # A triangle of a triangle (Mistral's band `triu(tril(ones), -W)`) is nonzero only
        # where both are: x's mask still holds; the new one only if it agrees.
        agrees = all((c.seer, c.seen) == (made.seer, made.seen) for c in x.causal)
        info = _Info(x.axes, causal=x.causal + ((made,) if agrees else ()))
        info.linear = x.product is not None and x.norm is None
        if x.causal and x.nonzero is not None:
            info.nonzero = x.nonzero
        if x.constant is not None:
            info.nonzero = x.constant
            if x.constant <= _BLOCKS:
                info.masks = (self._own_mask(node, node, info, keeps=False, fill=x.constant),)
        return info

    def _create(self, node: nodes.Call, axis_map: Any, args: dict[str, Any], value: Value) -> _Info:
        assert value.shape is not None
        axes = tuple(Axis(size, node) for size in value.shape)
        if axis_map.triangle is not None and len(axes) >= 2:
            return _Info(axes, causal=(self._triangle(node, axis_map, args, axes),), nonzero=1.0)
        if axis_map.positions and len(axes) == 1:
            return _Info(axes, position=axes[0])
        constant = _CONSTANTS.get(node.func.name)
        if constant is None and axis_map.fill is not None and args.get(axis_map.fill) is not None:
            constant = self._number(args[axis_map.fill])
        return _Info(axes, constant=constant)

    def _triangle(self, node: nodes.Call, axis_map: Any, args: dict[str, Any],
                  axes: tuple[Axis, ...]) -> _Causal:
        """The causal mask of a row with a ``triangle``: which of the last two axes sees
        the other, and whether the diagonal is excluded (its ``offset``: tril's k < 0,
        triu's k > 0; another offset is of unknown effect)."""
        rows, columns = axes[-2], axes[-1]
        offset = args.get(axis_map.offset) if axis_map.offset is not None else None
        k = symbolic.as_int(offset) if offset is not None else 0
        if axis_map.triangle == "lower":
            return _Causal(rows, columns, node, None if k is None or k > 0 else k < 0)
        return _Causal(columns, rows, node, None if k is None or k < 0 else k > 0)

    def _reshape(self, node: nodes.Call, x_node: nodes.Expr, x: _Info, target: tuple[Dim, ...]) -> _Info:
        """Axes matched by size from either end keep their identity (C order keeps the
        first and the last indices when those sizes agree); the rest are new. Axes of size
        1 move nothing, so they are set aside first (`[1, N] -> [N, 1]` keeps `N`)."""
        source = x.axes
        assert source is not None
        one = symbolic.is_literal_one
        sized = [axis for axis in source if not one(axis.size)]
        places = [i for i, size in enumerate(target) if not one(size)]
        equal = self.system.equal
        front = 0
        while front < min(len(sized), len(places)) and equal(sized[front].size, target[places[front]]):
            front += 1
        back = 0
        while back < min(len(sized), len(places)) - front and \
                equal(sized[-1 - back].size, target[places[-1 - back]]):
            back += 1
        middle_source = sized[front: len(sized) - back]
        middle_places = places[front: len(places) - back]
        mixed = len(middle_source) > 1 and len(middle_places) > 1
        if mixed:
            self._check_mixing(node, x_node, middle_source, [target[i] for i in middle_places])
        matched = dict(zip(places[:front], sized[:front]))
        matched.update(zip(places[len(places) - back:], sized[len(sized) - back:]))
        axes = tuple(matched.get(i) or Axis(size, node, opaque=mixed and i in middle_places)
                     for i, size in enumerate(target))
        info = x.moved(axes)
        if x.norm is not None and x.norm.axis not in axes:
            info.norm = None
        info.copies = None
        if x.copies is not None and len(middle_places) == 1 and len(middle_source) == 2 \
                and middle_source[0] is x.copies:
            # copies merged in front of the heads: head g * Hkv + j is kv head j (tiling)
            info.tiled = (node, axes[middle_places[0]], middle_source[1].size)
        return info

    def _check_mixing(self, node: nodes.Call, x_node: nodes.Expr, source: Sequence[Axis],
                      target: Sequence[Dim]) -> None:
        """SC411: a reshape that would have to move an axis (`[H, N, d]` -> `[N, H*d]`),
        or one that groups the source's axes out of their order (ViT's patches cut with a
        view and no permute: `[C, h, P, w, P]` -> `[h*w, P*P*C]`)."""
        for position, size in enumerate(target):
            for index, axis in enumerate(source):
                if index != position and self.system.equal(axis.size, size):
                    self._report_mixing(node, x_node, size)
                    return
        sizes = [axis.size for axis in source]
        if len(sizes) > _MAX_VIEW_AXES or len(target) > _MAX_VIEW_AXES:
            return
        if not all(_monomial_text(to_text(size)) for size in (*sizes, *target)):
            return  # sums, differences, quotients: no opinion on their factors
        failed = self._view_failure(sizes, list(target))
        if failed is None:
            return
        for order in itertools.permutations(sizes):
            # whole axes only: each target axis is a product of some of the source's axes
            if self._view_failure(list(order), list(target), splits=False) is None:
                self._report_mixing(node, x_node, failed)  # a moved order would group them
                return

    def _report_mixing(self, node: nodes.Call, x_node: nodes.Expr, size: Dim) -> None:
        x_value = self.types[id(x_node)]
        result = self.types[id(node)]
        self._report(codes.RESHAPE_MIXES.diag(
            node.span, source=x_value.text(), target=result.text(), size=to_text(size),
            notes=self._origin_notes(x_node), help=[codes.help_text("move_axes_first")]))

    def _view_failure(self, source: list[Dim], target: list[Dim], splits: bool = True
                      ) -> Dim | None:
        """None when ``target`` only splits and merges the sizes of ``source`` in their
        order (a view; ``splits=False``: only merges); else the first target size that
        takes sizes out of order."""
        system = self.system
        i = j = 0
        have, want = source[0], target[0]
        while True:
            if system.equal(have, want):
                i, j = i + 1, j + 1
                if i == len(source) or j == len(target):
                    return None if i == len(source) and j == len(target) else target[-1]
                have, want = source[i], target[j]
            elif splits and system.divides(have, want):  # a split of the source axis
                have = system.quotient(have, want)
                j += 1
                if j == len(target):
                    return target[-1]
                want = target[j]
            elif system.divides(want, have):  # a merge into the target axis
                want = system.quotient(want, have)
                i += 1
                if i == len(source):
                    return target[j]
                have = source[i]
            else:
                return target[j]

    def _join(self, node: nodes.Call, args: dict[str, Any], axis_param: str | None,
              tensors: list[tuple[nodes.Expr, _Info]], value: Value) -> _Info:
        assert value.shape is not None
        first = tensors[0][1].axes
        if not first:
            return _UNKNOWN
        axes = list(first)
        if len(value.shape) == len(first) + 1:  # `stack`: a new axis between the others
            where = axis_index(args.get(axis_param or "", 0), len(first) + 1)
            axes.insert(where, Axis(value.shape[where], node))
        else:  # `concat`: the joined axis is new, the others aligned
            where = axis_index(args.get(axis_param or "", 0), len(first))
            axes[where] = Axis(value.shape[where], node)
        # Parts scaled alike keep their scale (a rotary part concatenated to the rest).
        scales = {tuple(id(f.node) for f in i.scale) for _, i in tensors}
        scale = tensors[0][1].scale if len(scales) == 1 else ()
        info = _Info(tuple(axes), scale=scale)
        if len(value.shape) == len(first) and len(tensors) > 1:
            self._cache_blocks(node, info, tensors, where)
        names = {self._text(n) for n, _ in tensors}
        if len(names) == 1 and len(tensors) > 1 and len(value.shape) == len(first):
            # `concat([K, K], axis=1)`: the tensor tiled along that axis
            info.tiled = (node, axes[where], first[where].size)
        bases = {_base(i) for _, i in tensors}
        if len(bases) == 1 and len(tensors) > 1:
            info.pieces_of = bases.pop()  # `concat([-x2, x1])`: rotate_half
        positional = [i.positional for _, i in tensors if i.positional is not None]
        if positional:  # a rotated part (the new keys after the cache, MLA's rotary part)
            info.positional = positional[0]
        if len(value.shape) == len(first) and len(tensors) > 1:
            info.joined = (axes[where], tuple(i.axes[where].size for _, i in tensors  # type: ignore[index]
                                              if i.axes), tuple(n for n, _ in tensors))
        return info

    def _cache_blocks(self, node: nodes.Call, info: _Info, tensors: list[tuple[nodes.Expr, _Info]],
                      where: int) -> None:
        """A KV-cache mask assembled from parts along the keys (Meta's Llama:
        `hstack([zeros((N, M)), triu(full((N, N), -inf), 1)])`): blocks every query sees
        (ones, or zeros added), then a causal block for the new keys. That is a causal
        mask aligned bottom right; the causal block before visible ones lets each query
        see every key after it (SC416)."""
        assert info.axes is not None
        blocks = [i for i, (_, part) in enumerate(tensors) if part.causal or part.masks]
        if len(blocks) != 1:
            return
        block_node, block = tensors[blocks[0]]
        additive = bool(block.masks)
        visible = 0.0 if additive else 1.0
        if any(part.constant != visible for i, (_, part) in enumerate(tensors) if i != blocks[0]):
            return
        layout = block.axes or ()
        fact = block.masks[0] if additive else block.causal[0]
        seer, seen = _index(layout, fact.seer), _index(layout, fact.seen)
        if seer is None or seen is None or where not in (seer, seen) or seer == seen:
            return
        if blocks[0] != len(tensors) - 1:
            report = ("SC416", id(node))
            if report not in self._reported:
                self._reported.add(report)
                after = tensors[blocks[0] + 1][0]
                self._report(codes.CACHE_MASK_ORDER.diag(
                    node.span, concat=self._text(node), block=self._text(block_node),
                    visible=self._text(after), help=[codes.help_text("causal_block_last")]))
            return
        causal = _Causal(info.axes[seer], info.axes[seen], node, None)
        if additive:
            marked = _Info(info.axes, causal=(causal,))
            fill = block.masks[0].fill
            info.masks = (self._own_mask(node, node, marked, keeps=block.masks[0].keeps,
                                         fill=fill if fill is not None else -math.inf),)
        else:
            info.causal, info.nonzero = (causal,), 1.0

    def _reduce(self, node: nodes.Call, args: dict[str, Any], axis_map: Any, x_node: nodes.Expr,
                x: _Info, value: Value) -> _Info:
        assert x.axes is not None and value.shape is not None
        axis = args.get(axis_map.axis or "")
        removed = tuple(range(len(x.axes))) if axis is None else (axis_index(axis, len(x.axes)),)
        if args.get(axis_map.keepdims or ""):
            axes = tuple(Axis(value.shape[i], node) if i in removed else a
                         for i, a in enumerate(x.axes))
        else:
            axes = tuple(a for i, a in enumerate(x.axes) if i not in removed)
        return _Info(axes, reduced=_Reduced(node, x_node, removed))

    # --- masks ---------------------------------------------------------------------------------

    def _where(self, node: nodes.Call, tensors: list[tuple[nodes.Expr, _Info]], value: Value) -> _Info:
        (c_node, cond), (x_node, x), (y_node, y) = tensors
        if cond.axes is None or x.axes is None or y.axes is None:
            return _UNKNOWN
        order = [1, 2, 0] if x.axes or not y.axes else [2, 1, 0]
        axes, mappings = self._broadcast(node, [c_node, x_node, y_node], [cond, x, y], order)
        if axes is None:
            return _UNKNOWN
        if not x.axes and not y.axes:
            # where(m, 0, -inf): an additive mask; true entries keep when x is the larger.
            high, low = self._number(x_node), self._number(y_node)
            keeps = high is not None and low is not None and high > low
            applied = self._applied(node, c_node, cond, mappings[0], keeps,
                                    low if keeps else high, additive=True)
            return _Info(axes, masks=(applied,))
        if x.axes and y.axes:
            return _Info(axes)  # two tensors: a choice, not a mask
        keeps = bool(x.axes)
        target, fill_node, mapping = (x, y_node, mappings[1]) if keeps else (y, x_node, mappings[2])
        applied = self._applied(node, c_node, cond, mappings[0], keeps, self._number(fill_node),
                                additive=False)
        if target.norm is not None:
            normalised = mapping.get(id(target.norm.axis))
            if self._remasks(target.norm, c_node) or normalised not in applied.aligned:
                # The same mask again, or one constant along the normalised axis: it
                # zeroes whole rows (padded queries), no row's weights change.
                return target.moved(axes)
            return _Info(axes, norm=target.norm.changed_by(node, applied))
        return target.shifted(axes, None, (applied,))

    def _applied(self, node: nodes.Call, c_node: nodes.Expr, cond: _Info, mapping: dict[int, Axis],
                 keeps: bool, fill: float | None, additive: bool) -> _Applied:
        assert cond.axes is not None
        aligned = tuple(mapping.get(id(a)) for a in cond.axes)
        for causal in cond.causal:
            seer, seen = mapping.get(id(causal.seer)), mapping.get(id(causal.seen))
            return _Applied(node, c_node, "causal", seer, seen, keeps, fill, aligned, additive,
                            causal.node, causal.strict)
        return _Applied(node, c_node, "bool", None, None, keeps, fill, aligned, additive, None)

    def _remasks(self, norm: _Norm, condition: nodes.Expr) -> bool:
        """The weights masked again with the mask the scores already had (zeroing NaN rows)."""
        return any(self._same(m.condition, condition) for m in norm.source.applied)

    def _number(self, node: nodes.Expr) -> float | None:
        scalar = self.scalar(node)
        return None if scalar.opaque or scalar.powers else scalar.coef

    # --- scalars -------------------------------------------------------------------------------

    def scalar(self, node: nodes.Expr, depth: int = 0) -> _Scalar:
        """A scalar expression as ``coef * prod(base ** exponent)`` (`1 / sqrt(d)`, `d ** -0.5`)."""
        node = nodes.strip_parens(node)
        if depth > _MAX_SCALAR_DEPTH:
            return _OPAQUE
        if isinstance(node, (nodes.Integer, nodes.Decimal)):
            return _Scalar(float(node.value))
        if isinstance(node, nodes.Inf):
            return _Scalar(math.inf)
        if isinstance(node, nodes.Boolean):
            return _Scalar(1.0 if node.value else 0.0)
        if isinstance(node, nodes.Name):
            value = self.types.get(id(node))
            if value is not None and value.dim is not None:
                return _Scalar(powers=((value.dim, Fraction(1)),))
            definition = self.scalars.get(node.name)
            return self.scalar(definition, depth + 1) if definition is not None else _OPAQUE
        if isinstance(node, nodes.Unary):
            inner = self.scalar(node.operand, depth + 1)
            return _Scalar(-inner.coef if node.op == "-" else inner.coef, inner.powers, inner.opaque)
        if isinstance(node, nodes.Call):
            info = self.calls.get(id(node))
            power = _POWERS.get(info.builtin) if info is not None else None
            if power is not None and isinstance(info.args.get("x"), nodes.Expr):
                return _power(self.scalar(info.args["x"], depth + 1), power)
            return _OPAQUE
        if isinstance(node, nodes.BinOp):
            left = self.scalar(node.left, depth + 1)
            right = self.scalar(node.right, depth + 1)
            if node.op == "*":
                return _Scalar(left.coef * right.coef, left.powers + right.powers,
                               left.opaque or right.opaque)
            if node.op == "/":
                if right.coef == 0:
                    return _OPAQUE
                inverse = tuple((b, -e) for b, e in right.powers)
                return _Scalar(left.coef / right.coef, left.powers + inverse,
                               left.opaque or right.opaque)
            if node.op == "**" and not right.powers and not right.opaque and math.isfinite(right.coef):
                return _power(left, Fraction(right.coef).limit_denominator(64))
            if node.op in "+-":
                return _sum(left, right, node.op)
        return _OPAQUE

    # --- attention -------------------------------------------------------------------------------

    def _attention(self, contraction: _Contraction, w: int) -> None:
        info = contraction.infos[w]
        norm = info.norm
        assert norm is not None and info.axes is not None
        weights_axes = info.axes
        summed = contraction.summed[w]
        kept = contraction.kept[w]
        v = 1 - w
        normalised = _index(weights_axes, norm.axis)
        axis_ok = None if normalised is None or not summed else normalised in summed
        key = weights_axes[summed[0]] if len(summed) == 1 else None
        query, guessed = self._query_axis(weights_axes, kept, summed)
        scores = self._scores(norm, query, key)
        roles = self._roles(contraction, w, query, key)
        value_roles, output_roles = self._output_roles(contraction, w, roles)
        if axis_ok is False:
            self._wrong_axis(contraction, w, norm, scores)
        for change in norm.changed[:1]:
            self._changed(contraction, norm, change)
        product = norm.source.product
        if product is not None and scores is not None and product.contraction is not scores:
            product = None
        scale = self._scale(product, norm.source, key, contraction) if product is not None else None
        masks, after, mask_verdicts = self._masks(contraction, w, norm,
                                                  None if guessed else query, key, roles)
        if not guessed:
            self._mask_axes(contraction, norm, query, key)
        self._soft_capped(norm)
        self._rotated_values(contraction, v)
        if scores is not None:
            self._heads(scores, contraction, v)
            self._parts(scores)
        biases = {id(b): Bias(b[0], tuple(roles.get(id(a)) if a else None for a in b[1]), b[2])
                  for b in norm.source.biases}
        ops = None
        if product is not None and scale is not None:
            factors = {id(f.node): f for f in scale.factors}
            ops = tuple(factors[id(f.node)] for f in product.inner_scale) + tuple(
                factors[id(op.node)] if type(op) is _Factor else
                masks[id(op)] if type(op) is _Applied else biases[id(op)]
                for op in norm.source.ops)
        summed_set = set(summed)
        batch_sizes = tuple(axis.size for i, axis in enumerate(weights_axes)
                            if i in contraction.batch[w])
        self.patterns.append(Attention(
            statement=contraction.statement, output=contraction.node,
            output_roles=Role(contraction.node, tuple(output_roles.get(id(a))
                                                      for a in contraction.axes)),
            weights=contraction.operands[w], weights_operand=w,
            weights_roles=self._role(contraction.operands[w], roles, strip=False),
            summed_axes=tuple(sorted(summed_set)), softmax=norm.call,
            softmax_statement=norm.statement,
            softmax_axis=_index(norm.source.axes or (), norm.axis) or 0,
            softmax_roles=self._role(norm.argument, roles, strip=False),
            scores=scores.node if scores is not None else None,
            scores_statement=scores.statement if scores is not None else None,
            query=self._operand_role(scores, query, roles, 0),
            key=self._operand_role(scores, key, roles, 1),
            value=self._role(contraction.operands[v], value_roles),
            batch=batch_sizes, scale=scale,
            biases=tuple(biases.values()), masks=tuple(masks.values()) + after,
            ops=ops, changes=norm.changed, axis_ok=axis_ok,
            scale_ok=None if scale is None else {"ok": True, "wrong": False, "inverted": False,
                                                 "one_side": False}.get(scale.verdict),
            mask_ok=all(mask_verdicts) if mask_verdicts else None,
        ))

    @staticmethod
    def _query_axis(weights: tuple[Axis, ...], kept: list[int], summed: list[int]
                    ) -> tuple[Axis | None, bool]:
        """The query axis: the weights' one kept axis. With several (multi-query
        attention, `einsum("bhij,bjd->bhid", P, V)`: the heads are kept too) it is the kept
        axis next to the key axis, if only one is; ``guessed`` then says so."""
        if len(kept) == 1:
            return weights[kept[0]], False
        if len(kept) < 2 or len(summed) != 1:
            return None, False
        beside = [p for p in (summed[0] - 1, summed[0] + 1) if p in kept]
        return (weights[beside[0]], True) if len(beside) == 1 else (None, False)

    def _scores(self, norm: _Norm, query: Axis | None, key: Axis | None) -> _Contraction | None:
        """The contraction both the query and the key axes come from (`Q @ K.T`)."""
        if query is not None and key is not None and query.node is key.node \
                and query.node is not None:
            found = self.contractions.get(id(query.node))
            if found is not None and len(found.operands) == 2:
                origin = {o for a in (query, key) for o, _ in a.sources[:1]}
                if len(origin) == 2:
                    return found
        product = norm.source.product
        if product is not None and query is None and key is None:
            return product.contraction
        return None

    def _roles(self, contraction: _Contraction, w: int, query: Axis | None, key: Axis | None
               ) -> dict[int, str]:
        """The role of each axis of the weights (and of the softmax's argument: the same
        axes), by identity: kept is the query, summed the key, shared the batch axes."""
        roles: dict[int, str] = {}
        weights = contraction.infos[w].axes or ()
        if query is not None:
            roles[id(query)] = "query"
        if key is not None:
            roles[id(key)] = "key"
        for number, position in enumerate(contraction.batch[w]):
            roles[id(weights[position])] = f"batch:{number}"
        return roles

    def _output_roles(self, contraction: _Contraction, w: int, roles: dict[int, str]
                      ) -> tuple[dict[int, str], dict[int, str]]:
        """The roles of V's axes and of the output's: summed is the key, kept the value,
        batch axes labelled as the weights' axes they line up with."""
        v = 1 - w
        weights = contraction.infos[w].axes or ()
        v_axes = contraction.infos[v].axes or ()
        values: dict[int, str] = {}
        for position in contraction.summed[v]:
            values[id(v_axes[position])] = "key"
        for position in contraction.kept[v]:
            values[id(v_axes[position])] = "value"
        output: dict[int, str] = {}
        for axis in contraction.axes:
            from_weights = [p for o, p in axis.sources if o == w]
            from_values = [p for o, p in axis.sources if o == v]
            role = roles.get(id(weights[from_weights[0]])) if from_weights else \
                values.get(id(v_axes[from_values[0]])) if from_values else None
            if role is not None:
                output[id(axis)] = role
                for position in from_values:
                    values.setdefault(id(v_axes[position]), role)
        return values, output

    def _operand_roles(self, scores: _Contraction, operand: int, roles: dict[int, str]
                       ) -> dict[int, str]:
        """The roles of one factor of the scores: the axes it gives the scores take their
        role; the axes it is summed over are the feature axis."""
        operand_axes = scores.infos[operand].axes or ()
        found: dict[int, str] = {}
        for axis in scores.axes:
            role = roles.get(id(axis))
            for source, position in axis.sources:
                if source == operand and role is not None and position < len(operand_axes):
                    found[id(operand_axes[position])] = role
        for position in scores.summed[operand]:
            found[id(operand_axes[position])] = "feature"
        return found

    def _role(self, node: nodes.Expr, roles: dict[int, str], strip: bool = True) -> Role:
        if strip:
            node = self._strip(node)
        axes = self.infos.get(id(node), _UNKNOWN).axes
        if axes is None:
            axes = self.infos.get(id(nodes.strip_parens(node)), _UNKNOWN).axes or ()
        return Role(node, tuple(roles.get(id(a)) for a in axes))

    def _operand_role(self, scores: _Contraction | None, axis: Axis | None,
                      roles: dict[int, str], fallback: int) -> Role | None:
        if scores is None:
            return None
        if axis is not None and axis.sources and axis.node is scores.node:
            operand = axis.sources[0][0]
        else:
            operand = fallback  # the weights' axes were lost: Q and K as written
        return self._role(scores.operands[operand], self._operand_roles(scores, operand, roles))

    def _strip(self, node: nodes.Expr) -> nodes.Expr:
        """Under parentheses, transposes and scalar factors: the tensor as the user named it."""
        while True:
            node = nodes.strip_parens(node)
            if isinstance(node, nodes.Transpose):
                node = node.operand
                continue
            info = self.calls.get(id(node)) if isinstance(node, nodes.Call) else None
            if info is not None and info.builtin == "transpose":
                node = info.args["x"]
                continue
            if isinstance(node, nodes.BinOp) and node.op in "*/":
                left = self.infos.get(id(node.left), _UNKNOWN).axes
                right = self.infos.get(id(node.right), _UNKNOWN).axes
                if right == () and left:
                    node = node.left
                    continue
                if left == () and right and node.op == "*":
                    node = node.right
                    continue
            return node

    # --- the checks ------------------------------------------------------------------------------

    def _wrong_axis(self, contraction: _Contraction, w: int, norm: _Norm,
                    scores: _Contraction | None) -> None:
        key = ("SC402", id(contraction.node))
        if key in self._reported:
            return
        self._reported.add(key)
        weights = contraction.infos[w].axes or ()
        summed_axis = weights[contraction.summed[w][0]]
        source = norm.source.axes or ()
        argument = self._text(norm.argument)
        consequence = self._consequence(summed_axis, norm.axis, scores,
                                        self._text(contraction.operands[1 - w]))
        self._report(codes.SOFTMAX_AXIS.diag(
            contraction.node.span, contraction=self._text(contraction.node),
            summed=self._describe(summed_axis, source, argument, scores),
            normalised=self._describe(norm.axis, source, argument, scores),
            consequence=consequence,
            notes=[codes.note("softmax_here", norm.call.span,
                              axis=_index(source, norm.axis), argument=argument)]
            + self._scores_note(scores),
            help=[codes.help_text("same_axis")]))

    def _consequence(self, summed: Axis, normalised: Axis, scores: _Contraction | None,
                     values: str) -> str:
        """What the formula computes instead, in the notes' words. By convention the first
        factor of the scores gives the queries (`Q @ K.T`), the second the keys."""
        if scores is None or summed.node is not scores.node or not summed.sources:
            return codes.detail("sum_not_normalised")
        operand, position = summed.sources[0]
        origin = self._text(self._strip(scores.operands[operand]))
        if position in scores.batch[operand]:
            return codes.detail("sum_over_batch", size=to_text(summed.size))
        if operand == 0:
            return codes.detail("sum_over_queries", origin=origin, values=values)
        if normalised.node is scores.node and normalised.sources:
            other, where = normalised.sources[0]
            if where in scores.batch[other]:
                return codes.detail("normalised_over_batch", size=to_text(normalised.size))
            return codes.detail("normalised_over_queries",
                                origin=self._text(self._strip(scores.operands[other])))
        return codes.detail("sum_not_normalised")

    def _describe(self, axis: Axis, layout: Sequence[Axis], tensor: str,
                  scores: _Contraction | None) -> str:
        index = _index(layout, axis)
        size = to_text(axis.size)
        if index is None:
            return codes.detail("an_axis", size=size)
        if scores is not None and axis.node is scores.node and axis.sources:
            operand, _ = axis.sources[0]
            return codes.detail("axis_from", index=index, tensor=tensor, size=size,
                                origin=self._text(self._strip(scores.operands[operand])))
        return codes.detail("axis_of", index=index, tensor=tensor, size=size)

    def _scores_note(self, scores: _Contraction | None) -> list[Note]:
        if scores is None:
            return []
        return [codes.note("scores_here", scores.node.span, scores=self._text(scores.node))]

    def _changed(self, contraction: _Contraction, norm: _Norm, change: nodes.Expr) -> None:
        key = ("SC406", id(change))
        if key in self._reported:
            return
        self._reported.add(key)
        self._report(codes.WEIGHTS_CHANGED.diag(
            change.span, change=self._text(change), contraction=self._text(contraction.node),
            notes=[codes.note("softmax_normalises", norm.call.span,
                              argument=self._text(norm.argument)),
                   codes.note("summed_here", contraction.node.span,
                              contraction=self._text(contraction.node))],
            help=[codes.help_text("mask_before_softmax")]))

    def _scale(self, product: _Product, source: _Info, key: Axis | None,
               output: _Contraction) -> Scale:
        factors = product.inner_scale + source.scale
        scores = product.contraction
        public = tuple(ScaleFactor(f.node, f.divides, f.operand) for f in factors)
        coefficient: float | None = 1.0
        powers: list[tuple[Dim, Fraction]] = []
        scalars = [self.scalar(factor.node) for factor in factors]
        for factor, scalar in zip(factors, scalars):
            sign = -1 if factor.divides else 1
            if scalar.opaque:
                coefficient = None
            elif coefficient is not None and scalar.coef != 0:
                coefficient *= scalar.coef ** sign
            for base, exponent in scalar.powers:
                _add_power(powers, base, exponent * sign)
        expected = product.size
        if not factors:
            verdict, radicand = "none", None
        elif not powers:
            verdict, radicand = "constant", None
        else:
            verdict, radicand = self._scale_verdict(powers, expected)
            if verdict == "wrong" and radicand is not None and expected is not None \
                    and not self._evident(radicand, expected, product, output):
                verdict = "deliberate"
            elif verdict == "unusual" and self._one_side(powers, expected, factors):
                verdict = "one_side"
        scale = Scale(public, coefficient, tuple(powers), radicand, expected, verdict)
        if verdict in ("wrong", "inverted", "one_side"):
            located = next(f for f, s in zip(factors, scalars) if s.powers)
            self._wrong_scale(product, factors, located, scale)
        elif verdict == "none" and not self._learned(scores, key):
            self._unscaled(product)
        return scale

    def _evident(self, radicand: Dim, expected: Dim, product: _Product,
                 output: _Contraction) -> bool:
        """Whether a scale by 1/sqrt(X), X not the contracted size, is evidently wrong:
        X is the size of another axis of the same formula (an axis of Q, K, the scores, V,
        the output, or of a declared input: sequence lengths, heads, the model width), a
        multiple of the contracted size or a part of it (`d_n` of `d_n + d_r`). A dim that
        is none of these (Gemma's `query_pre_attn_scalar` as a `dim` of its own, MLA's
        absorbed path scaled by the original head width) is a deliberate scale: no opinion."""
        system = self.system
        if symbolic.free_names(radicand) <= symbolic.free_names(expected):
            return True  # built of the contracted size's own dims: a part, a multiple
        for big, small in ((radicand, expected), (expected, radicand)):
            if system.divides(big, small):
                return True
        sizes: list[Dim] = []
        for contraction in (product.contraction, output):
            for info in contraction.infos:
                sizes += [a.size for a in info.axes or ()]
            sizes += [a.size for a in contraction.axes]
        for tensor in self.program.tensors.values():
            if tensor.kind == "input" and tensor.value.shape is not None:
                sizes += list(tensor.value.shape)
        return any(system.equal(radicand, size) for size in sizes)

    def _one_side(self, powers: list[tuple[Dim, Fraction]], expected: Dim | None,
                  factors: Sequence[_Factor]) -> bool:
        """`(Q * d ** -0.25) @ K.T`: half of the symmetric scale, on one factor only."""
        if expected is None or not factors or any(f.operand is None for f in factors):
            return False
        ratio = symbolic.radicand([(base, 2 * exponent) for base, exponent in powers])
        if ratio is None or not symbolic.is_literal_one(ratio[1]):
            return False
        return self.system.equal(ratio[0], expected)

    def _learned(self, scores: _Contraction, axis: Axis | None) -> bool:
        """The scores' axis comes straight from a parameter's axis: `X @ W_g` is a learned
        projection (a gate over experts, a classifier), not queries against keys."""
        if axis is None or axis.node is not scores.node or not axis.sources:
            return False
        operand, position = axis.sources[0]
        layout = scores.infos[operand].axes or ()
        name = layout[position].tensor if position < len(layout) else None
        tensor = self.program.tensors.get(name) if name is not None else None
        return tensor is not None and tensor.kind == "param"

    def _scale_verdict(self, powers: list[tuple[Dim, Fraction]], expected: Dim | None
                       ) -> tuple[str, Dim | None]:
        key = (tuple(powers), expected)
        known = self._verdicts.get(key)
        if known is None:
            known = self._verdicts[key] = self._judge_scale(powers, expected)
        return known

    def _judge_scale(self, powers: list[tuple[Dim, Fraction]], expected: Dim | None
                     ) -> tuple[str, Dim | None]:
        ratio = symbolic.radicand(powers)
        if ratio is None or expected is None:
            return "unusual", None
        numerator, denominator = ratio
        unit = symbolic.is_literal_one(denominator)
        radicand = numerator if unit else None
        system = self.system
        target = expected if unit else expected * denominator
        if system.equal(numerator, target) or system.constant_ratio(numerator, target) is not None:
            return "ok", radicand
        if system.equal(numerator * expected, denominator):
            return "inverted", radicand
        if radicand is None:
            return "unusual", None
        if (symbolic.free_names(radicand) | symbolic.free_names(expected)) & self._inferred:
            # A sketch: inference named these dims and cannot know `sqrt(d)` meant the
            # head dim it called `k`.
            return "inferred", radicand
        return "wrong", radicand

    def _wrong_scale(self, product: _Product, factors: Sequence[_Factor], located: _Factor,
                     scale: Scale) -> None:
        scores = product.contraction
        key = ("SC404", id(scores.node))
        if key in self._reported:
            return
        self._reported.add(key)
        expected = scale.expected
        assert expected is not None
        written = " ".join(("/ " if f.divides else "* ") + self._text(f.node) for f in factors)
        size = to_text(expected)
        if scale.verdict == "inverted":
            reason = codes.detail("scale_inverted", size=size)
        elif scale.verdict == "one_side":
            reason = codes.detail("scale_one_side", size=size)
        else:
            assert scale.radicand is not None
            reason = self._scale_reason(scale.radicand, expected)
        self._report(codes.SCALE.diag(
            located.node.span, scores=self._text(product.node), written=written, size=size,
            where="" if product.parts else self._contracted_where(scores), reason=reason,
            notes=self._scores_note(scores),
            help=[codes.help_text("scale_by", size=symbolic.spaced(size))]))

    def _scale_reason(self, radicand: Dim, expected: Dim) -> str:
        system = self.system
        x, size = to_text(radicand), to_text(expected)
        if system.equal(radicand, expected * expected):
            return codes.detail("scale_squared", size=size)
        for big, small in ((radicand, expected), (expected, radicand)):
            if system.divides(big, small):
                quotient = system.quotient(system.canonical(big), system.canonical(small))
                if not symbolic.is_literal_one(quotient):
                    return codes.detail("scale_multiple", big=to_text(big), small=to_text(small),
                                        factor=to_text(quotient))
        if symbolic.free_names(radicand) < symbolic.free_names(expected):
            return codes.detail("scale_part", x=x, size=size)
        verdict = system.equal(radicand, expected)
        relation = codes.RELATIONS["differs_from" if verdict is Verdict.DIFFERENT else "unproved_to"]
        return codes.detail("scale_differs", x=x, relation=relation, size=size)

    def _contracted_where(self, scores: _Contraction) -> str:
        operand = self._strip(scores.operands[0])
        positions = [_index(self.infos[id(operand)].axes or (), scores.infos[0].axes[p])
                     for p in scores.summed[0] if scores.infos[0].axes]
        value = self.types.get(id(operand))
        if value is None or not positions or positions[0] is None:
            return ""
        return codes.detail("contracted_axis", index=positions[0] - len(value.shape or ()),
                            operand=self._text(operand), shape=value.text())

    def _unscaled(self, product: _Product) -> None:
        key = ("SC405", id(product.contraction.node))
        size = product.size
        if key in self._reported or size is None:
            return
        self._reported.add(key)
        text = to_text(size)
        self._report(codes.UNSCALED.diag(
            product.node.span, scores=self._text(product.node), size=text,
            help=[codes.help_text("scale_by", size=symbolic.spaced(text))]))

    def _masks(self, contraction: _Contraction, w: int, norm: _Norm, query: Axis | None,
               key: Axis | None, roles: dict[int, str]
               ) -> tuple[dict[int, Mask], tuple[Mask, ...], list[bool]]:
        """The masks on the scores (by the identity of their fact), those after the softmax,
        and for each causal mask whose alignment is known whether it is right."""
        applied = [(m, False) for m in norm.source.applied] + [(m, True) for m in norm.after]
        before: dict[int, Mask] = {}
        masks = []
        verdicts = []
        kept = [a for i, a in enumerate(contraction.infos[w].axes or ()) if i in contraction.kept[w]]
        for mask, after in applied:
            orientation = None  # of the condition: are its rows (the seeing axis) the queries?
            if mask.kind == "causal" and key is not None:
                # With several kept axes (multi-query layouts), the one the mask pairs with
                # the keys is the query axis.
                queries = [query] if query is not None else kept
                if mask.seen is key and mask.seer in queries:
                    orientation = "aligned"
                elif mask.seer is key and mask.seen in queries:
                    orientation = "transposed"
            # What the mask lets through: hiding where the condition is true flips it.
            alignment = orientation if mask.keeps or orientation is None else \
                _FLIPPED[orientation]
            condition = Role(mask.condition, tuple(roles.get(id(a)) if a is not None else None
                                                   for a in mask.aligned))
            public = Mask(mask.node, condition, mask.kind, mask.keeps, mask.fill,
                          mask.additive, alignment, after, mask.strict)
            if after:
                masks.append(public)
            else:
                before[id(mask)] = public
            wrong = self._check_mask(contraction, mask, orientation, after)
            if alignment is not None:
                verdicts.append(not wrong)
        return before, tuple(masks), verdicts

    def _mask_axes(self, contraction: _Contraction, norm: _Norm, query: Axis | None,
                   key: Axis | None) -> None:
        """SC412: a mask on the scores that varies along the queries and is constant along
        the keys (a key-padding mask broadcast as `[B, 1, M, 1]` instead of `[B, 1, 1, M]`):
        it hides or shifts whole rows, which changes no query's choice among the keys."""
        if query is None or key is None:
            return
        for mask in norm.source.applied:
            if query not in mask.aligned or key in mask.aligned:
                continue
            report = ("SC412", id(mask.node))
            if report in self._reported:
                continue
            self._reported.add(report)
            self._report(codes.MASK_AXIS.diag(
                mask.node.span, where=self._text(mask.node), size=to_text(query.size),
                key_size=to_text(key.size),
                notes=[codes.note("weights_summed", contraction.node.span,
                                  contraction=self._text(contraction.node))],
                help=[codes.help_text("mask_keys")]))

    def _prefix_sums(self, contraction: _Contraction, w: int) -> None:
        """SC407 for causal linear attention: a triangle of `Q @ K.T` summed with the
        values (`tril(S) @ V`, `(S * tril(ones([N, N]))) @ V`) must keep the rows it
        sums for, and sum over the keys up to each: the other triangle reads the future."""
        info = contraction.infos[w]
        causal = info.causal[0]
        layout = info.axes or ()
        seer, seen = _index(layout, causal.seer), _index(layout, causal.seen)
        if seer is None or seen is None:
            return
        if not (seer in contraction.summed[w] and seen in contraction.kept[w]):
            return
        report = ("SC407", id(contraction.node))
        if report in self._reported:
            return
        self._reported.add(report)
        where = self._strip(contraction.operands[w])
        self._report(codes.MASK_TRANSPOSED.diag(
            where.span, where=self._text(where), contraction=self._text(contraction.node),
            notes=[codes.note("mask_built", causal.node.span, mask=self._text(causal.node))],
            help=[codes.help_text("untranspose_mask")]))

    def _rotated_values(self, contraction: _Contraction, v: int) -> None:
        """SC413: V went through a rotary transform (alone or besides Q and K)."""
        rotary = contraction.infos[v].positional
        report = ("SC413", id(contraction.node))
        if rotary is None or report in self._reported:
            return
        self._reported.add(report)
        values = self._strip(contraction.operands[v])
        self._report(codes.POSITIONS_ON_VALUES.diag(
            values.span, values=self._text(values), contraction=self._text(contraction.node),
            rotary=self._text(rotary), notes=[codes.note("rotary_here", rotary.span)],
            help=[codes.help_text("rotary_qk_only")]))

    def _heads(self, scores: _Contraction, output: _Contraction, v: int) -> None:
        """SC414: K or V tiled along a batch (head) axis of the attention, for grouped
        query heads."""
        sides = [(scores, operand) for operand in (0, 1)] + [(output, v)]
        for contraction, operand in sides:
            info = contraction.infos[operand]
            if info.tiled is None or info.axes is None:
                continue
            node, axis, kv = info.tiled
            position = _index(info.axes, axis)
            report = ("SC414", id(node))
            if position not in contraction.batch[operand] or report in self._reported:
                continue
            self._reported.add(report)
            self._report(codes.TILED_HEADS.diag(
                node.span, tiled=self._text(node), kv=to_text(kv),
                notes=[codes.note("weights_summed", output.node.span,
                                  contraction=self._text(output.node))],
                help=[codes.help_text("repeat_heads")]))

    def _parts(self, scores: _Contraction) -> None:
        """SC415: Q and K concatenated from the same parts in different orders."""
        sides = []
        for operand in (0, 1):
            info = scores.infos[operand]
            if info.joined is None or info.axes is None or len(scores.summed[operand]) != 1:
                return
            axis, sizes, parts = info.joined
            if info.axes[scores.summed[operand][0]] is not axis:
                return
            sides.append((sizes, parts))
        (q_sizes, q_parts), (k_sizes, k_parts) = sides
        q_text, k_text = [to_text(x) for x in q_sizes], [to_text(x) for x in k_sizes]
        report = ("SC415", id(scores.node))
        if q_text == k_text or sorted(q_text) != sorted(k_text) or report in self._reported:
            return
        self._reported.add(report)
        self._report(codes.PARTS_MISALIGNED.diag(
            scores.node.span, scores=self._text(scores.node),
            query=self._text(self._strip(scores.operands[0])),
            key=self._text(self._strip(scores.operands[1])),
            q_parts=", ".join(q_text), k_parts=", ".join(k_text),
            help=[codes.help_text("same_part_order")]))

    def _soft_capped(self, norm: _Norm) -> None:
        """SC410: a mask filled with `-inf` before a soft-cap (`c * tanh(S / c)`): the cap
        turns the fill into `-c`, a real weight."""
        for mask, cap in norm.source.squashed:
            report = ("SC410", id(mask.node))
            if mask.fill is None or mask.fill > _BLOCKS or report in self._reported:
                continue
            self._reported.add(report)
            self._report(codes.MASK_FILL.diag(
                mask.node.span, where=self._text(mask.node),
                fill=codes.detail("fill_squashed", fill=_number_text(mask.fill),
                                  cap=self._text(cap)),
                notes=[codes.note("capped_here", cap.span, cap=self._text(cap))],
                help=[codes.help_text("mask_after_cap")]))

    def _check_mask(self, contraction: _Contraction, mask: _Applied, orientation: str | None,
                    after: bool) -> bool:
        """SC407, SC408 (by the condition's ``orientation`` and which branch keeps the
        scores), SC410; whether the mask lets a query see the wrong keys."""
        key = (id(mask.node), id(contraction.node))
        where = self._text(mask.node)
        notes = [codes.note("weights_summed", contraction.node.span,
                            contraction=self._text(contraction.node))]
        if mask.origin is not None:
            notes.insert(0, codes.note("mask_built", mask.origin.span, mask=self._text(mask.origin)))
        # Hiding where a transposed condition is true hides the future: right when the
        # condition leaves the diagonal out (`where(j > i, -inf, S)`, `triu(.., 1)`);
        # when it has the diagonal, each query loses itself (SC408); unknown: no opinion.
        inverted = not mask.keeps and (orientation == "aligned" or
                                       (orientation == "transposed" and mask.strict is False))
        transposed = mask.keeps and orientation == "transposed"
        if inverted and ("SC408",) + key not in self._reported:
            self._reported.add(("SC408",) + key)
            sees = codes.detail("sees_future_only" if orientation == "aligned" else "sees_past_only")
            self._report(codes.MASK_INVERTED.diag(mask.node.span, where=where, sees=sees,
                                                  notes=notes, help=[codes.help_text("swap_branches")]))
        elif transposed and ("SC407",) + key not in self._reported:
            self._reported.add(("SC407",) + key)
            self._report(codes.MASK_TRANSPOSED.diag(
                mask.node.span, where=where, contraction=self._text(contraction.node),
                notes=notes, help=[codes.help_text(
                    "flip_comparison" if isinstance(mask.origin, nodes.BinOp) else "untranspose_mask")]))
        if not after and mask.fill is not None and mask.fill > _LEAKS and \
                ("SC410", id(mask.node)) not in self._reported:
            self._reported.add(("SC410", id(mask.node)))
            self._report(codes.MASK_FILL.diag(mask.node.span, where=where,
                                              fill=_number_text(mask.fill),
                                              help=[codes.help_text("fill_minus_inf")]))
        return inverted or transposed

    # --- text and reporting ------------------------------------------------------------------

    def _report(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    def _text(self, node: nodes.Expr | nodes.Stmt) -> str:
        return span_text(self.program.source, self._line_starts, node.span)

    def _origin_notes(self, node: nodes.Expr) -> list[Note]:
        node = nodes.strip_parens(node)
        value = self.types.get(id(node))
        if value is None or value.shape is None:
            return []
        return [codes.note("operand", node.span, text=self._text(node), shape=value.text())]


# --- helpers ---------------------------------------------------------------------------------------


def _monomial_text(text: str) -> bool:
    """A size written as a product of dims and numbers (`P*P*C`, `16*h`): its factors
    can be matched without algebra on sums."""
    return not any(sign in text for sign in "+-/()")


def _base(info: _Info) -> int:
    """The value that ``info`` is cut or rearranged from (itself when it is whole)."""
    return info.pieces_of if info.pieces_of is not None else id(info)


def _index(layout: Sequence[Axis | None], axis: Axis | None) -> int | None:
    if axis is None:
        return None
    for position, candidate in enumerate(layout):
        if candidate is axis:
            return position
    return None


def _power(scalar: _Scalar, exponent: Fraction) -> _Scalar:
    if scalar.opaque or (scalar.coef < 0 and exponent.denominator != 1):
        return _OPAQUE
    try:
        coef = scalar.coef ** float(exponent)
    except (OverflowError, ZeroDivisionError):
        return _OPAQUE
    return _Scalar(coef, tuple((b, e * exponent) for b, e in scalar.powers))


def _sum(left: _Scalar, right: _Scalar, op: str) -> _Scalar:
    """`d_n + d_r`: a sum of dims is one base; numbers add; anything else is opaque."""
    if left.opaque or right.opaque:
        return _OPAQUE
    if not left.powers and not right.powers:
        return _Scalar(left.coef + right.coef if op == "+" else left.coef - right.coef)
    a, b = _as_dim(left), _as_dim(right)
    if a is None or b is None:
        return _OPAQUE
    total = a + b if op == "+" else a - b
    return _Scalar(powers=((total, Fraction(1)),))


def _integral(number: float | Fraction) -> bool:
    """A whole number (never for ``inf`` or NaN: `J - inf` is a number, not a dim)."""
    try:
        return number == int(number)
    except (OverflowError, ValueError):
        return False


def _as_dim(scalar: _Scalar) -> Dim | None:
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


def _add_power(powers: list[tuple[Dim, Fraction]], base: Dim, exponent: Fraction) -> None:
    for index, (known, total) in enumerate(powers):
        if known == base:
            if total + exponent == 0:
                powers.pop(index)
            else:
                powers[index] = (known, total + exponent)
            return
    powers.append((base, exponent))


def _number_text(value: float) -> str:
    if math.isinf(value):
        return "-inf" if value < 0 else "inf"
    return str(int(value)) if value == int(value) else repr(value)


def _einsum_keys(term: str, rank: int) -> list[Any] | None:
    """One key per axis: its letter, or ("...", k) for the k-th axis from the right of `...`."""
    head, ellipsis, tail = term.partition("...")
    width = rank - len(head) - len(tail)
    if width < 0 or (not ellipsis and width != 0):
        return None
    return list(head) + [("...", width - 1 - k) for k in range(width)] + list(tail)


def _einsum_size(types: dict[int, Value], operands: Sequence[nodes.Expr],
                 place: tuple[int, int]) -> Dim:
    operand, position = place
    shape = types[id(operands[operand])].shape
    assert shape is not None
    return shape[position]


def _children(node: nodes.Expr) -> Iterable[nodes.Expr]:
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



# `x OP number` written `number OP' x`; and what `m OP number` is for a 0/1 mask m:
# True the mask itself, False its negation.
# Functions of a scalar that are a power of it (`sqrt(d)`, `rsqrt(d)`, `square(d)`).
_POWERS = {"sqrt": Fraction(1, 2), "rsqrt": Fraction(-1, 2), "square": Fraction(2)}
_FLIPPED = {"aligned": "transposed", "transposed": "aligned"}
# Creating builtins whose every entry is one number; rows with a ``fill`` parameter say theirs.
_CONSTANTS = {"ones": 1.0, "zeros": 0.0}
# Soft-caps (`c * tanh(S / c)`): a `-inf` fill passed through them becomes `-c`.
_SQUASHING = frozenset({"tanh"})
# Inputs that are tables of positions by their name (`cos_t`, `freqs_cis`, `sin_cached`).
_TABLE_NAME = re.compile(r"(?:^|_)(?:cos|sin|freqs?|rope|rotary)(?:_|\d|$)", re.IGNORECASE)
_MIRRORED = {"==": "==", "!=": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}
_TRUTH = {("==", 1.0): True, ("!=", 0.0): True, (">", 0.0): True, (">=", 1.0): True,
          ("==", 0.0): False, ("!=", 1.0): False, ("<", 1.0): False, ("<=", 0.0): False}

_HANDLERS: dict[type, Any] = {
    nodes.BinOp: _Analysis._binop, nodes.Unary: _Analysis._unary,
    nodes.Transpose: _Analysis._transpose, nodes.Call: _Analysis._call,
    nodes.Subscript: _Analysis._subscript,
}

#: What :meth:`_Analysis.checkpoint` keeps: everything a statement leaves for the next ones.
_STATE = ("names", "scalars", "infos", "contractions", "patterns", "diagnostics", "_reported")
#: Stepping through a program (:mod:`shapecheck.incremental`); :func:`analyse` runs it whole.
Pass = _Analysis


__all__ = ["Attention", "Axis", "Bias", "Mask", "Meaning", "Pass", "Role", "Scale", "ScaleFactor",
           "analyse"]
