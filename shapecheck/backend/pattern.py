"""Attention patterns a backend runs as one fused operation.

The axis-meaning pass (:func:`shapecheck.meaning.analyse`, kept as ``Program.meaning``)
finds every ``softmax(scale · Q @ K.T [+ bias] [masked]) @ V`` whatever its letters or
layout, says which axis of each tensor is the query, the key, the feature, a batch axis,
and lists what happens to the scores between the product and the softmax in the order it
happens (``Attention.ops``: scale factors, biases, masks). This module does not look for
patterns again: it reads each one and decides whether it can be fused, and how:

- the score operations (:class:`ScoreOp`: a scale, an added or subtracted bias, a mask)
  are the pattern's ``ops``, in order;
- the tensors computed only for the pattern (the scores, the masked scores, the weights, a
  ``causal_mask`` read only there) are found by following the names from the contraction's
  weights down to the scores: a fused run never computes them. A pattern whose
  intermediates are needed elsewhere — an output, read by another statement, or every
  tensor kept (``--save-all``) — is not fused: the table is built anyway.
- a ``causal_mask`` (in any transpose) is generated block by block (:class:`Causal`);
  any other mask or bias is a tensor the backend evaluates and slices.

:func:`fusable` returns one :class:`Fusable` per pattern that qualifies, and the reason
(a key of :data:`errors.MESSAGES`) for each that does not.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..syntax import nodes
from ..check.builtins import BUILTINS as CHECKED, AxisKind
from ..check.program import NewAxis, Program, Range, Take
from ..meaning import SQUASHING

if TYPE_CHECKING:
    from ..meaning import Attention, Bias, Mask, Role, ScaleFactor, SoftCap


@dataclass(frozen=True)
class Part:
    """A tensor of the pattern: its expression, and the role of each of its axes."""

    node: nodes.Expr
    labels: tuple[str | None, ...]


@dataclass(frozen=True)
class Causal:
    """A ``causal_mask(n, n_k, window=W)`` call: generated per block, never built.
    ``transposed``: its rows are the keys (``where(causal_mask(N).T, ...)``)."""

    n: Any  # dims
    n_k: Any
    window: Any
    transposed: bool


@dataclass(frozen=True)
class ScoreOp:
    """One operation on the scores: ``scale`` (multiply by, or ``divides``, the scalar
    ``node``), ``bias`` (add ``part``, or subtract it: ``divides``), ``mask`` (where it does
    not keep a score, replace it by ``fill``, or add ``fill`` when ``additive``; the mask is
    ``causal`` or ``part``), ``cap`` (the `tanh` of a soft-cap, each score; its factors are
    scales)."""

    kind: str
    node: nodes.Expr | None = None
    divides: bool = False  # a scale written as a divisor; a bias subtracted
    part: Part | None = None
    causal: Causal | None = None
    keeps: bool = True
    fill: float = -math.inf
    additive: bool = False
    blockwise: Blockwise | None = None  # ``part`` evaluated per block of positions


@dataclass(frozen=True)
class Position:
    """A node whose values are the positions along its axis ``axis`` (``arange(N)[:, None]``,
    an ``arange`` under new axes), the scores' axis with the role ``role``."""

    role: str
    axis: int


@dataclass(frozen=True)
class Sliced:
    """A tensor read as a whole (broadcast against the scores): its axes' roles, so that
    a block reads the rows and keys of the block only."""

    roles: tuple[str | None, ...]


@dataclass(frozen=True)
class Inlined:
    """A name defined by a statement: its definition is evaluated in its place, per block."""

    definition: nodes.Expr


@dataclass(frozen=True)
class Generated:
    """A ``causal_mask(n, n_k, window=W)`` call whose rows and columns have the roles
    ``roles`` (query and key, either way round): made from the block's positions."""

    causal: Causal
    roles: tuple[str, str]


@dataclass(frozen=True)
class Lookup:
    """``table[index]`` (a 1-D input looked up at positions: `doc[q]`, `slopes[h]`);
    ``position``: the role of the index when it is a position itself (then the lookup is
    in range by construction), else None."""

    table: str
    position: str | None


@dataclass(frozen=True)
class Blockwise:
    """A mask or bias that is a function of positions (`def f(q, k)` inlined, `j <= i`,
    `doc[q] == doc[k]`, `slopes[h] * (k - q)`): a framework evaluates ``part`` once per block
    of query rows and keys, the nodes of ``substitutes`` (by id) replaced as each says, so
    that the ``[..., N_q, N_k]`` table is never built. ``reads``: the tensors it reads from
    the run; ``inlined``: the tensors it evaluates in place (not computed when only it reads
    them); ``pure``: no tensor is sliced and no axis moved, only positions and lookups at
    positions (FlexAttention's ``mask_mod``/``score_mod`` form, one score at a time)."""

    substitutes: Mapping[int, Position | Sliced | Inlined | Generated | Lookup]
    reads: tuple[str, ...]
    inlined: frozenset[str]
    pure: bool


@dataclass(frozen=True)
class Fusable:
    """A pattern a backend may run as one operation computing the node ``output``."""

    output: nodes.Expr
    output_labels: tuple[str | None, ...]
    query: Part
    key: Part
    value: Part
    ops: tuple[ScoreOp, ...]  # what happens to the scores, in order
    batch: tuple[str, ...]  # the batch roles, in order: batch:0, batch:1, ...
    skipped: frozenset[str]  # tensors computed only for the pattern: never computed
    softmax_name: str  # the tensor the softmax defines, for messages
    softmax_line: int
    softmax_axis: int  # the axis it normalises, in its argument
    softmax_rank: int

    @property
    def canonical_query(self) -> tuple[str, ...]:
        return (*self.batch, "query", "feature")

    @property
    def canonical_key(self) -> tuple[str, ...]:
        return (*self.batch, "key", "feature")

    @property
    def canonical_value(self) -> tuple[str, ...]:
        return (*self.batch, "key", "value")

    @property
    def canonical_scores(self) -> tuple[str, ...]:
        return (*self.batch, "query", "key")

    @property
    def canonical_output(self) -> tuple[str, ...]:
        return (*self.batch, "query", "value")


class _NotFusable(Exception):
    """Why a pattern is not fused: a key of the backend's messages."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def fusable(program: Program, kept: set[str] | frozenset[str] = frozenset(), *,
            keep_all: bool = False) -> tuple[list[Fusable], list[tuple[str, int, str]]]:
    """The patterns of ``program`` that can be fused, and (softmax name, line, reason) for
    the others. ``kept``: tensors the run must produce (the outputs); ``keep_all``: every
    tensor is kept (``--save-all``), so nothing is fused."""
    meaning = getattr(program, "meaning", None)
    patterns = list(meaning.patterns) if meaning is not None else []
    found: list[Fusable] = []
    refused: list[tuple[str, int, str]] = []
    definitions = _definitions(program)
    reads = _reads(program)
    for attention in patterns:
        name, line = _softmax_place(attention)
        try:
            if keep_all:
                raise _NotFusable("fused_off_save_all")
            found.append(_Builder(program, attention, definitions, reads, set(kept)).build())
        except _NotFusable as refusal:
            refused.append((name, line, refusal.reason))
    return found, refused


def _definitions(program: Program) -> dict[str, nodes.Expr]:
    result: dict[str, nodes.Expr] = {}
    for stmt in program.statements:
        if isinstance(stmt, (nodes.Define, nodes.Output)) and stmt.value is not None:
            result[stmt.name.name] = stmt.value
    return result


def _reads(program: Program) -> Counter[str]:
    """How many times each tensor is read, in the whole program."""
    counts: Counter[str] = Counter()
    for expr in _definitions(program).values():
        counts.update(n for n in _names(expr) if n in program.tensors)
    return counts


def _names(expr: nodes.Expr, made: set[int] | frozenset[int] = frozenset()) -> Iterator[str]:
    """The names ``expr`` reads, except inside the nodes ``made`` (masks made per block)."""
    if id(expr) in made:
        return
    if isinstance(expr, nodes.Name):
        yield expr.name
    for child in nodes.children(expr):
        yield from _names(child, made)


def _softmax_place(attention: Attention) -> tuple[str, int]:
    stmt = attention.softmax_statement or attention.statement
    name = getattr(stmt, "name", None)
    return (name.name if name is not None else "?"), attention.softmax.span.line


class _Builder:
    """Reads one attention pattern into a :class:`Fusable` (or refuses, saying why)."""

    def __init__(self, program: Program, attention: Attention, definitions: dict[str, nodes.Expr],
                 reads: Counter[str], kept: set[str]) -> None:
        self.program = program
        self.attention = attention
        self.definitions = definitions
        self.reads = reads
        self.kept = kept
        self.chain: set[str] = set()  # tensors on the path from the weights to the scores
        self.masks = {id(mask.node): mask for mask in attention.masks}
        # (where call, condition) of the masks generated per block
        self.causal_conditions: list[tuple[nodes.Expr, nodes.Expr]] = []
        self.blockwise_names: set[str] = set()  # tensors evaluated per block, in place

    def build(self) -> Fusable:
        a = self.attention
        if a.scores is None or a.query is None or a.key is None or a.ops is None:
            raise _NotFusable("fused_no_scores")
        if a.axis_ok is False:  # a softmax over the wrong axis, `P.T @ V`: nothing changed P
            raise _NotFusable("fused_axis")
        if a.axis_ok is None:
            raise _NotFusable("fused_axis_unknown")
        if a.changes:
            raise _NotFusable("fused_changed")
        self._walk_weights(a.weights)
        self._walk_scores(self._softmax_argument())
        inside = self._evaluated_in_parts(a.query.node, a.key.node)
        # a scale written into a named q or k (`q = Q * d ** -0.5`) is in the scores' ops,
        # but evaluating the part `q` applies it already: the kernel must not apply it twice
        ops = tuple(self._score_op(op) for op in a.ops if id(op.node) not in inside)
        name, line = _softmax_place(a)
        batch = tuple(f"batch:{i}" for i in range(len(a.batch)))
        argument = self._softmax_argument()
        return Fusable(a.output, a.output_roles.axes, _part(a.query), _part(a.key),
                       _part(a.value), ops, batch, frozenset(self._skipped(ops)), name, line,
                       a.softmax_axis, self.program.type_of(argument).rank)

    def _evaluated_in_parts(self, *parts: nodes.Expr) -> set[int]:
        """The ids of every node evaluated when the fused run evaluates ``parts`` (the query
        and the key), through the definitions of the names they read."""
        return {id(node) for node in reachable(parts, self.definitions)}

    def _score_op(self, op: ScaleFactor | Bias | Mask | SoftCap) -> ScoreOp:
        kind = type(op).__name__
        if kind == "SoftCap":
            return ScoreOp("cap")  # tanh of each score, as it stands there
        if kind == "ScaleFactor":
            return ScoreOp("scale", op.node, op.divides)  # type: ignore[union-attr]
        if kind == "Bias":
            part = Part(op.node, tuple(op.axes))  # type: ignore[union-attr]
            return ScoreOp("bias", divides=op.subtracts, part=part,  # type: ignore[union-attr]
                           blockwise=self._blockwise(part))
        return self._mask(op)  # type: ignore[arg-type]

    def _sizes(self) -> dict[str, int]:
        """The size of each role's axis at the bindings (the largest, where one broadcasts)."""
        sizes: dict[str, int] = {}
        for role in (self.attention.query, self.attention.key, self.attention.value):
            value = self.program.types.get(id(role.node)) if role is not None else None
            if value is None or value.shape is None:
                continue
            for label, dim in zip(role.axes, value.shape):
                size = self.program.dims.evaluate(dim)
                if label is not None and size is not None:
                    sizes[label] = max(size, sizes.get(label, 0))
        return sizes

    def _blockwise(self, part: Part) -> Blockwise | None:
        """``part`` as a function of positions, when it is one (else it is evaluated whole)."""
        found = blockwise(self.program, self.definitions, part, self._sizes())
        if found is not None:
            self.blockwise_names |= found.inlined
        return found

    # the path from the contraction's weights operand to the softmax

    def _walk_weights(self, node: nodes.Expr) -> None:
        while node is not self.attention.softmax:
            node = self._through(node)

    def _softmax_argument(self) -> nodes.Expr:
        info = self.program.calls.get(id(self.attention.softmax))
        if info is None or info.builtin != "softmax":  # a softmax written out by hand
            raise _NotFusable("fused_handwritten")
        return info.args["x"]

    def _through(self, node: nodes.Expr) -> nodes.Expr:
        """One step down a path of nodes that do not change values."""
        if isinstance(node, nodes.Paren):
            return node.inner
        if isinstance(node, nodes.Transpose):
            return node.operand
        if isinstance(node, nodes.Name) and node.name in self.definitions:
            self.chain.add(node.name)
            return self.definitions[node.name]
        if isinstance(node, nodes.Call):
            info = self.program.calls.get(id(node))
            if info is not None and info.builtin in ("transpose", "dropout"):
                return info.args["x"]
            if info is not None and info.builtin in SQUASHING:  # a soft-cap: a `cap` op
                return info.args["x"]
        raise _NotFusable("fused_unknown_step")

    # the path from the softmax's argument to the scores: the tensors on it

    def _walk_scores(self, node: nodes.Expr) -> None:
        """Follow the scores from the softmax's argument down to the product, naming the
        tensors met on the way (the ``ops`` say what happens along it)."""
        while node is not self.attention.scores:
            mask = self.masks.get(id(node))
            if mask is not None and not mask.additive:
                node = self._masked_operand(node, mask)
            elif isinstance(node, nodes.BinOp) and node.op in ("*", "/", "+", "-"):
                leading = [side for side in (node.left, node.right) if self._leads_to_scores(side)]
                if len(leading) != 1:
                    raise _NotFusable("fused_unknown_step")
                node = leading[0]
            else:
                node = self._through(node)

    def _leads_to_scores(self, node: nodes.Expr) -> bool:
        if node is self.attention.scores:
            return True
        if isinstance(node, nodes.Name):
            value = self.definitions.get(node.name)
            return value is not None and self._leads_to_scores(value)
        return any(self._leads_to_scores(child) for child in nodes.children(node))

    def _masked_operand(self, node: nodes.Expr, mask: Mask) -> nodes.Expr:
        info = self.program.calls[id(node)]
        return info.args["x"] if mask.keeps else info.args["y"]

    def _mask(self, mask: Mask) -> ScoreOp:
        if mask.fill is None:
            raise _NotFusable("fused_fill")
        causal = self._causal(mask) if mask.kind == "causal" else None
        if causal is not None:
            self.causal_conditions.append((mask.node, mask.condition.node))
        part = None if causal is not None else _part(mask.condition)
        return ScoreOp("mask", part=part, causal=causal, keeps=mask.keeps, fill=float(mask.fill),
                       additive=mask.additive,
                       blockwise=None if part is None else self._blockwise(part))

    def _causal(self, mask: Mask) -> Causal | None:
        """The ``causal_mask`` call under the condition, through names and transposes."""
        node, flips = mask.condition.node, 0
        while True:
            if isinstance(node, nodes.Paren):
                node = node.inner
            elif isinstance(node, nodes.Transpose):
                node, flips = node.operand, flips + 1
            elif isinstance(node, nodes.Name) and node.name in self.definitions:
                node = self.definitions[node.name]
            elif isinstance(node, nodes.Call):
                info = self.program.calls.get(id(node))
                if info is None:
                    return None
                if info.builtin == "transpose" and info.args.get("perm") in (None, (1, 0), [1, 0]):
                    node, flips = info.args["x"], flips + 1
                    continue
                if info.builtin != "causal_mask":
                    return None
                labels = mask.condition.axes
                if len(labels) != 2 or set(labels) != {"query", "key"}:
                    return None
                rows = labels[flips % 2]
                return Causal(info.args["n"], info.args.get("n_k"), info.args.get("window"),
                              transposed=rows == "key")
            else:
                return None

    # what a fused run never computes

    def _skipped(self, ops: tuple[ScoreOp, ...]) -> set[str]:
        """The chain's tensors, and causal masks read only by the pattern; refuse when a
        chain tensor is needed elsewhere."""
        for name in self.chain:
            if name in self.kept or self.reads[name] != 1:
                raise _NotFusable("fused_needed")
        skipped = set(self.chain)
        generated = self.blockwise_names - self.kept  # those read elsewhere stay: _unread
        for where, condition in self.causal_conditions:
            generated |= self._only_for_mask(condition)
            holder = self._named(where)  # `bias = where(band, 0.0, -inf)`, added to the scores
            if holder is not None and holder not in self.kept and self.reads[holder] == 1:
                generated.add(holder)
        return skipped | self._unread(generated, skipped, ops)

    def _named(self, node: nodes.Expr) -> str | None:
        """The tensor whose whole definition is ``node``, if one is."""
        for name, value in self.definitions.items():
            if nodes.strip_parens(value) is node:
                return name
        return None

    def _unread(self, generated: set[str], skipped: set[str], ops: tuple[ScoreOp, ...]
                ) -> set[str]:
        """Those of ``generated`` (tensors a generated mask makes needless) that no computed
        statement reads: one that is still computed keeps what it reads. Inside the pattern,
        the fused run reads only what its parts read (never a mask it makes per block)."""
        a = self.attention
        pattern = Fusable(a.output, (), _part(a.query), _part(a.key),  # type: ignore[arg-type]
                          _part(a.value), ops, (), frozenset(), "", 0, 0, 0)
        fused = set(names_read(a.output, {id(a.output): pattern}))
        while True:
            computed = [value for name, value in self.definitions.items()
                        if name not in generated and name not in skipped]
            read = fused | {name for value in computed
                            for name in _names(value, {id(a.output)})}
            needed = generated & read
            if not needed:
                return generated
            generated -= needed

    def _only_for_mask(self, node: nodes.Expr) -> set[str]:
        names: set[str] = set()
        while True:
            node = nodes.strip_parens(node)
            if isinstance(node, nodes.Transpose):
                node = node.operand
            elif isinstance(node, nodes.Name) and node.name in self.definitions:
                if node.name in self.kept or self.reads[node.name] != 1:
                    return names
                names.add(node.name)
                node = self.definitions[node.name]
            else:
                return names


def reachable(parts: Sequence[nodes.Expr], definitions: Mapping[str, nodes.Expr]
              ) -> Iterator[nodes.Expr]:
    """Every node evaluated when ``parts`` are, through the definitions of the names they
    read, each once (a stack, not recursion: parts may nest as deep as the checker allows)."""
    seen: set[int] = set()
    names: set[str] = set()
    stack = list(parts)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        if isinstance(node, nodes.Name) and node.name in definitions and node.name not in names:
            names.add(node.name)
            stack.append(definitions[node.name])
        stack.extend(nodes.children(node))


def _part(role: Role) -> Part:
    return Part(role.node, tuple(role.axes))


# --- masks and biases as functions of positions --------------------------------------------


class _NotPositional(Exception):
    """A part that is not read as a function of positions: it is evaluated whole."""


def blockwise(program: Program, definitions: Mapping[str, nodes.Expr], part: Part,
              sizes: Mapping[str, int]) -> Blockwise | None:
    """``part`` as a :class:`Blockwise` function of positions, or None. Each node's axes get
    the scores' roles by broadcasting (right-aligned, as NumPy), through elementwise
    operators and builtins, ``where``, new axes, transposes, lookups ``doc[q]`` and the
    definitions of names; a tensor read whole is sliced per block; anything else (a
    product, a reduction, a slice of a part) leaves the part whole."""
    walker = _Positions(program, definitions, sizes)
    try:
        walker.visit(part.node, tuple(part.labels), 0)
    except _NotPositional:
        return None
    if not any(isinstance(s, (Position, Generated)) for s in walker.substitutes.values()):
        return None  # tensors only: evaluated once and sliced, as before
    sliced = walker.whole or walker.moved or any(isinstance(s, Sliced) or (
        isinstance(s, Lookup) and s.position is None) for s in walker.substitutes.values())
    return Blockwise(walker.substitutes, tuple(dict.fromkeys(walker.reads)),
                     frozenset(walker.inlined), pure=not sliced)


_SCORE_ROLES = ("query", "key")


class _Positions:
    def __init__(self, program: Program, definitions: Mapping[str, nodes.Expr],
                 sizes: Mapping[str, int]) -> None:
        self.program, self.definitions, self.sizes = program, definitions, sizes
        self.substitutes: dict[int, Position | Sliced | Inlined | Generated | Lookup] = {}
        self.reads: list[str] = []
        self.inlined: set[str] = set()
        self.whole = False  # a tensor with a sized axis read whole (broadcast, not looked up)
        self.moved = False  # axes added or swapped above a position (a value, not an index)

    def rank(self, node: nodes.Expr) -> int:
        value = self.program.types.get(id(node))
        if value is None or value.shape is None:
            raise _NotPositional
        return len(value.shape)

    def visit(self, node: nodes.Expr, roles: tuple[str | None, ...], depth: int) -> None:
        if depth > 64:
            raise _NotPositional
        rank = self.rank(node)
        if rank > len(roles):
            raise _NotPositional
        roles = roles[len(roles) - rank:]  # broadcasting aligns the last axes
        if isinstance(node, (nodes.Integer, nodes.Decimal, nodes.Boolean, nodes.Inf)):
            return
        if isinstance(node, nodes.Paren):
            return self.visit(node.inner, roles, depth + 1)
        if isinstance(node, nodes.Unary):
            return self.visit(node.operand, roles, depth + 1)
        if isinstance(node, nodes.BinOp) and node.op != "@":
            self.visit(node.left, roles, depth + 1)
            return self.visit(node.right, roles, depth + 1)
        if isinstance(node, nodes.Transpose) and rank >= 2:
            self.moved = True
            return self.visit(node.operand, (*roles[:-2], roles[-1], roles[-2]), depth + 1)
        if isinstance(node, nodes.Name):
            return self._name(node, roles, depth)
        if isinstance(node, nodes.Subscript):
            return self._subscript(node, roles, depth)
        if isinstance(node, nodes.Call):
            return self._call(node, roles, depth)
        raise _NotPositional

    def _name(self, node: nodes.Name, roles: tuple[str | None, ...], depth: int) -> None:
        if isinstance(node, nodes.ShapeOf) or node.name not in self.program.tensors:
            return  # a size
        definition = self.definitions.get(node.name)
        if definition is not None and self._positional(definition):
            self.substitutes[id(node)] = Inlined(definition)
            self.inlined.add(node.name)
            return self.visit(definition, roles, depth + 1)
        self.reads.append(node.name)
        shape = self.program.types[id(node)].shape or ()
        self.whole |= any(self.program.dims.evaluate(size) != 1 for size in shape)
        if any(role in _SCORE_ROLES for role in roles):
            self.substitutes[id(node)] = Sliced(roles)

    def _positional(self, node: nodes.Expr) -> bool:
        """Whether ``node`` makes positions (an ``arange``, a ``causal_mask``) itself or
        through the definitions it reads: only then is it evaluated in place."""
        return any(isinstance(current, nodes.Call)
                   and current.func.name in ("arange", "causal_mask")
                   for current in reachable((node,), self.definitions))

    def _subscript(self, node: nodes.Subscript, roles: tuple[str | None, ...], depth: int) -> None:
        info = self.program.calls.get(id(node))
        if info is not None:  # a lookup, `doc[q]`: the index has the result's axes
            return self._lookup(node, info, roles, depth)
        resolved = self.program.subscripts.get(id(node))
        if resolved is None:
            raise _NotPositional
        operand_roles: list[str | None] = []
        for entry, role in zip(resolved.entries, _entry_roles(resolved.entries, roles)):
            if isinstance(entry, Range):
                if not self._whole(entry, node.operand):
                    raise _NotPositional
                operand_roles.append(role)
            elif not isinstance(entry, NewAxis):
                raise _NotPositional
        self._positions_or(node, node.operand, tuple(operand_roles), roles, depth)

    def _whole(self, entry: Range, operand: nodes.Expr) -> bool:
        dims = self.program.dims
        size = self.program.types[id(operand)].shape[entry.axis]  # type: ignore[index]
        return dims.evaluate(entry.step) == 1 and (
            entry.start is None or dims.evaluate(entry.start) == 0) and (
            entry.stop is None or dims.evaluate(entry.stop) == dims.evaluate(size))

    def _positions_or(self, node: nodes.Expr, operand: nodes.Expr,
                      operand_roles: tuple[str | None, ...], roles: tuple[str | None, ...],
                      depth: int) -> None:
        """``node`` moves ``operand``'s axes only: a position when ``operand`` is an
        ``arange`` along an axis of the scores, else the operand visited in its roles."""
        bare = nodes.strip_parens(operand)
        if isinstance(bare, nodes.Call) and self._arange(bare, operand_roles[0]):
            axis = [i for i, role in enumerate(roles) if role == operand_roles[0]]
            if len(axis) == 1:
                self.substitutes[id(node)] = Position(operand_roles[0], axis[0])
                return
        self.moved = True
        self.visit(operand, operand_roles, depth + 1)

    def _arange(self, call: nodes.Call, role: str | None) -> bool:
        """Whether ``call`` is `arange(n)` running along the whole axis of ``role`` (an
        `arange(1)` broadcast along it is a constant, not the positions)."""
        info = self.program.calls.get(id(call))
        if role is None or info is None or info.builtin != "arange" \
                or info.args.get("stop") is not None:
            return False
        shape = self.program.types[id(call)].shape or ()
        return len(shape) == 1 and self.program.dims.evaluate(shape[0]) == self.sizes.get(role)

    def _lookup(self, node: nodes.Expr, info: Any, roles: tuple[str | None, ...],
                depth: int) -> None:
        if info.builtin not in ("take", "index_select"):
            raise _NotPositional
        table, index = info.args["x"], info.args.get("indices", info.args.get("index"))
        table_rank, index_rank = self.rank(table), self.rank(index)
        axis = info.args.get("axis", 0) or 0
        if table_rank != 1 or axis != 0:
            raise _NotPositional
        table_bare = nodes.strip_parens(table)
        if not (isinstance(table_bare, nodes.Name) and table_bare.name in self.program.tensors):
            raise _NotPositional
        self.reads.append(table_bare.name)  # read whole: looked up at positions
        self.visit(index, roles[:index_rank] if index_rank else (), depth + 1)
        # at a position of its own axis's size: in range by construction
        position = self.substitutes.get(id(nodes.strip_parens(index)))
        shape = self.program.types[id(table)].shape or ()
        role = position.role if isinstance(position, Position) else None
        inside = role is not None and self.program.dims.evaluate(shape[0]) == self.sizes.get(role)
        self.substitutes[id(node)] = Lookup(table_bare.name, role if inside else None)

    def _call(self, call: nodes.Call, roles: tuple[str | None, ...], depth: int) -> None:
        info = self.program.calls.get(id(call))
        if info is None:
            raise _NotPositional
        if info.builtin == "arange":
            if roles and self._arange(call, roles[0]):
                self.substitutes[id(call)] = Position(roles[0], 0)  # type: ignore[arg-type]
            return  # else a constant: evaluated as written
        if info.builtin == "causal_mask" and tuple(roles) in (_SCORE_ROLES, _SCORE_ROLES[::-1]):
            rows, columns = roles[0], roles[1]
            causal = Causal(info.args["n"], info.args.get("n_k"), info.args.get("window"),
                            transposed=rows == "key")
            self.substitutes[id(call)] = Generated(causal, (rows, columns))  # type: ignore[arg-type]
            return
        row = CHECKED.get(info.builtin)
        if row is None or row.axes.kind is not AxisKind.ELEMENTWISE:
            raise _NotPositional
        for name in row.axes.tensors or ("x",):
            argument = info.args.get(name)
            if isinstance(argument, nodes.Expr):
                self.visit(argument, roles, depth + 1)


def _entry_roles(entries: Sequence[Any], roles: tuple[str | None, ...]) -> Iterator[str | None]:
    """The role of each entry's result axis (an integer index has none)."""
    position = 0
    for entry in entries:
        if isinstance(entry, Take):
            yield None
        else:
            yield roles[position] if position < len(roles) else None
            position += 1


# --- the score operations in scaled_dot_product_attention's form ------------------------------


@dataclass(frozen=True)
class Affine:
    """The ops as ``softmax(scale · Q @ K.T + mask)``: ``scales`` multiply into the scale;
    each of ``terms`` (a bias, or an additive mask's fill where it hides) is added, times
    the scales applied after it; ``hides`` are the masks that hide with ``-inf`` (replaced or
    added, wherever they stand: ``-inf`` absorbs every later finite addition and every
    positive scale)."""

    scales: tuple[ScoreOp, ...]
    terms: tuple[tuple[ScoreOp, tuple[ScoreOp, ...]], ...]
    hides: tuple[ScoreOp, ...]


def affine(ops: Sequence[ScoreOp]) -> Affine | None:
    """The score operations in :class:`Affine` form; None when a mask *replaces* scores by a finite
    value (``where(m, S, -1e9)``): no additive mask equals that."""
    scales: list[ScoreOp] = []
    terms: list[tuple[ScoreOp, tuple[ScoreOp, ...]]] = []
    hides: list[ScoreOp] = []
    for step in ops:
        if step.kind == "cap":  # tanh: no scale, bias or mask is that
            return None
        if step.kind == "scale":
            scales.append(step)
            terms = [(term, (*after, step)) for term, after in terms]
        elif step.kind == "bias" or (step.additive and step.fill != -math.inf):
            terms.append((step, ()))
        elif step.fill == -math.inf:
            hides.append(step)
        else:
            return None
    return Affine(tuple(scales), tuple(terms), tuple(hides))


def reads(fusable: Fusable) -> Iterator[nodes.Expr]:
    """Every expression a fused run evaluates: Q, K, V, scalars, biases, mask tensors."""
    yield fusable.query.node
    yield fusable.key.node
    yield fusable.value.node
    for step in fusable.ops:
        if step.node is not None:
            yield step.node
        if step.blockwise is not None:
            yield from (nodes.Name(name, step.part.node.span)  # type: ignore[union-attr]
                        for name in step.blockwise.reads)
        elif step.part is not None:
            yield step.part.node


def inlined(fusable: Fusable) -> dict[int, Inlined]:
    """The names the blockwise parts evaluate in place (never computed as statements when
    only the pattern reads them): a framework evaluating such a part whole inlines them too."""
    return {key: value for step in fusable.ops if step.blockwise is not None
            for key, value in step.blockwise.substitutes.items() if isinstance(value, Inlined)}


def names_read(expr: nodes.Expr, fused: Mapping[int, Fusable]) -> Iterator[str]:
    """The names an expression reads when the patterns in ``fused`` (by ``id`` of their
    output node) run fused: theirs are the names their parts read."""
    fusable = fused.get(id(expr))
    if fusable is not None:
        for node in reads(fusable):
            yield from names_read(node, fused)
        return
    if isinstance(expr, nodes.Name):
        yield expr.name
    for child in nodes.children(expr):
        yield from names_read(child, fused)


# --- layouts -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """How to bring an array into a canonical axis order: reshape to ``squeezed`` (size-1
    axes without a role dropped), permute by ``order``, reshape to ``shape`` (a size-1 axis
    for each role the array lacks, so that it broadcasts). Back: reshape to ``canonical``
    (``shape`` without those size-1 axes), permute by ``inverse``, reshape to the array's."""

    squeezed: tuple[int, ...]
    order: tuple[int, ...]
    shape: tuple[int, ...]
    canonical: tuple[int, ...]
    inverse: tuple[int, ...]


def parts_span_scores(fusable: Fusable, shape_of: Any, nq: int, nk: int) -> bool:
    """Whether every bias or mask part spans the scores' query and key axes at the bindings
    (or broadcasts along them). A max-size buffer followed through a slice (Whisper's
    `mask[:T, :T]`, T < L) does not: such a pattern runs unfused, on every backend."""
    sizes = {"query": nq, "key": nk}
    return not any(
        label in sizes and size not in (1, sizes[label])
        for step in fusable.ops if step.part is not None
        for label, size in zip(step.part.labels, shape_of(step.part.node)))


def layout(labels: Sequence[str | None], shape: Sequence[int],
           target: Sequence[str]) -> Layout | None:
    """The :class:`Layout` taking axes labelled ``labels`` (``batch:0``, ``query``, ``key``,
    ..., None for a size-1 axis without a role) to the order ``target``; None when the
    labels do not allow it (a role twice, a role not in ``target``, a sized axis with no
    role)."""
    if len(labels) != len(shape) or any(label is not None and label not in target
                                        for label in labels):
        return None
    if any(label is None and size != 1 for label, size in zip(labels, shape)):
        return None
    present = [label for label in labels if label is not None]
    if len(set(present)) != len(present):
        return None
    sizes = {label: size for label, size in zip(labels, shape) if label is not None}
    ordered = [label for label in target if label in sizes]
    order = tuple(present.index(label) for label in ordered)
    inverse = tuple(ordered.index(label) for label in present)
    return Layout(tuple(sizes[label] for label in present), order,
                  tuple(sizes.get(label, 1) for label in target),
                  tuple(sizes[label] for label in ordered), inverse)
