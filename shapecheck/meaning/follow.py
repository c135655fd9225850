"""Following axis identities through the program: one class, `Follow`, whose
methods read each statement's expressions and the builtin rows' axis maps
(`builtins.AxisMap`: elementwise, permute, reshape, heads, resize, join, reduce,
create, contract) and give every value its axes and facts. The checks live in the
modules beside it, one per family.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..messages import codes
from ..syntax import nodes
from .. import symbolic
from ..check.builtins import BUILTINS, AxisKind, axis_index
from ..messages.diagnostics import Diagnostic, Note, line_starts, span_text
from ..check.program import NewAxis, Program, Take, Value
from ..check.value_rules import axes_of
from ..symbolic import Dim, DimSystem
from .facts import (
    Axis,
    Positions,
    Applied,
    Capped,
    BLOCKS,
    LINEAR_REDUCTIONS,
    BiasTerm,
    CONSTANTS,
    Causal,
    Contraction,
    Factor,
    Info,
    MAX_SCALAR_DEPTH,
    MIRRORED,
    Norm,
    OPAQUE,
    POWERS,
    Product,
    Reduced,
    SCALAR,
    FEATURE_NORMS,
    SQUASHING,
    Scalar,
    TABLE_NAME,
    TRUTH,
    UNKNOWN,
    base_of,
    children,
    einsum_keys,
    einsum_size,
    index_of,
    scalar_power,
    scalar_sum,
)
from .results import Attention, Meaning, RotatedCache


class Follow:
    """Every value's axes and facts, statement by statement; checks are the mixins'."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.types = program.types
        self.calls = program.calls
        self.names: dict[str, Info] = {}
        self.scalars: dict[str, nodes.Expr] = {}  # scalar tensors: their definitions
        self.definitions: dict[str, str] = {}  # each defined tensor: its expression's text
        self.infos: dict[int, Info] = {}
        self.contractions: dict[int, Contraction] = {}
        self.patterns: list[Attention] = []
        self.diagnostics: list[Diagnostic] = []
        self.rotated_caches: list[RotatedCache] = []
        self._algebra: set[int] = set()  # softmaxes whose weights met their own (`P @ P.T`)
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
                    self.names[statement.name.name] = UNKNOWN

    def result(self) -> Meaning:
        return Meaning(self.patterns, self.diagnostics, self.infos, self.rotated_caches)

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
        info = self.names[name] = Info(tuple(Axis(size, tensor=name) for size in tensor.value.shape))
        if TABLE_NAME.search(name):
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
            info = UNKNOWN  # an annotation that failed: the checker kept another shape
        elif TABLE_NAME.search(name) and info.axes and not info.table and info.product is None \
                and info.positional is None and isinstance(statement.value, nodes.Subscript):
            # a table named as one, cut from an input (`cos = position_embeddings[0]`,
            # `cos_ = cos[:, None]`: how a traced module hands its rotary tables down)
            info = info.moved(info.axes)
            info.table = True
        self.names[name] = info
        self.definitions[name] = self._text(statement.value)
        if tensor.value.shape == ():
            self.scalars[name] = statement.value

    def value(self, node: nodes.Expr) -> Info:
        info = self._value(node)
        self.infos[id(node)] = info
        return info

    def _value(self, node: nodes.Expr) -> Info:
        kind = type(node)
        if kind is nodes.Name:
            info = self.names.get(node.name)  # type: ignore[union-attr]
            if info is not None:
                return info
        value = self.types.get(id(node))
        if value is None or value.shape is None:
            self._visit_children(node)
            return UNKNOWN
        if kind is nodes.Paren:
            return self.value(node.inner)  # type: ignore[union-attr]
        if kind is nodes.Name:
            if value.shape == ():
                return SCALAR
            # A tensor the spec uses without declaring it (a sketch: inference gave its
            # shape): its axes are new at its first use, and shared by every later one.
            name = node.name  # type: ignore[union-attr]
            info = self.names[name] = Info(tuple(Axis(size, tensor=name) for size in value.shape))
            return info
        if not value.shape:  # a scalar has no axes; an `@` inside one still has meaning
            self._visit_children(node)
            return SCALAR
        handler = _HANDLERS.get(kind)
        return handler(self, node, value) if handler is not None else self._opaque(node, value)

    def _binop(self, node: nodes.BinOp, value: Value) -> Info:
        if node.op == "@":
            info = self._matmul(node)
            projected = self._projected(node.left, node.right)
        else:
            info = self._arithmetic(node, value)
            # a projection's bias added (`X @ W.T + b`) keeps it a projection
            left = self.infos.get(id(node.left))
            projected = left.projection if left is not None and node.op == "+" \
                and self._param(node.right) else None
        if projected is None or info.axes is None:
            return info
        info = info.moved(info.axes)
        info.projection = projected
        return info

    def _param(self, node: nodes.Expr) -> bool:
        """A param of the spec (a weight, a bias), transposed or reshaped or not (a conv's
        `[O, C, k, k]` weight is the matrix `reshape(w, [O, C * k * k])`)."""
        while isinstance(node, (nodes.Transpose, nodes.Paren)) or isinstance(node, nodes.Call) \
                and node.func.name == "reshape" and node.args and not node.keywords:
            node = node.operand if isinstance(node, nodes.Transpose) else \
                node.inner if isinstance(node, nodes.Paren) else node.args[0]
        tensor = self.program.tensors.get(node.name) if isinstance(node, nodes.Name) else None
        return tensor is not None and tensor.kind == "param"

    def _projected(self, left: nodes.Expr, right: nodes.Expr) -> str | None:
        """`X @ W.T` with W a param: a projection of X (its text names it); a projection
        of a projection of X (a low-rank pair, DeepSeek's `rmsnorm(x @ wq_a) @ wq_b`) is one
        of X."""
        if self._param(right) and not self._param(left):
            inner = self.infos.get(id(left))
            return inner.projection if inner is not None and inner.projection \
                else self._text(left)
        return None

    def _unary(self, node: nodes.Unary, value: Value) -> Info:
        operand = self.value(node.operand)
        if operand.axes is None or node.op == "+":
            return operand
        if node.op == "~":
            return Info(operand.axes, causal=tuple(c.negated() for c in operand.causal),
                         nonzero=1.0)
        changed = operand.norm.changed_by(node) if operand.norm is not None else None
        info = Info(operand.axes, norm=changed)
        if node.op == "-":
            info.pieces_of, info.table = base_of(operand), operand.table
            info.term_of, info.positional = operand.term_of, operand.positional
            info.positions = operand.positions
        return info

    def _transpose(self, node: nodes.Transpose, value: Value) -> Info:
        operand = self.value(node.operand)
        axes = operand.axes
        if axes is None or len(axes) < 2:
            return UNKNOWN
        return operand.moved(axes[:-2] + (axes[-1], axes[-2]))

    def _subscript(self, node: nodes.Subscript, value: Value) -> Info:
        """`x[...]` (as the checker resolved it): an axis taken whole keeps its identity, a
        new axis (`None`) is new, a part of an axis is a new, opaque axis (a window of the
        keys is not the keys). x's facts go on only when no axis is cut or dropped
        (`P[None]` is still normalised); otherwise the pass stays silent about it."""
        if id(node) in self.calls:  # a gather, `E[ids]`: the checker read it as `take`
            return self._call(node, value)  # type: ignore[arg-type]
        operand = self.value(node.operand)
        resolved = self.program.subscripts.get(id(node))
        if operand.axes is None or resolved is None or value.shape is None:
            return UNKNOWN
        sizes = iter(value.shape)
        axes: list[Axis] = []
        whole = True
        windows: dict[int, tuple[Axis, Any]] = {}  # old axis -> (its window, the start)
        for entry in resolved.entries:
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
        info = Info(tuple(axes))
        if operand.causal or operand.masks:
            self._windowed(info, operand, windows)
        info.table = operand.table
        info.pieces_of = base_of(operand)
        info.projection = operand.projection  # a part of a projection (`qkv[..., :E]`)
        return info

    def _windowed(self, info: Info, operand: Info, windows: dict[int, tuple[Axis, Any]]) -> None:
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
                causal.append(Causal(moved.seer, moved.seen, moved.node,
                                      strict(moved.seer, moved.seen, moved.strict), moved.negation,
                                      moved.edge if strict(moved.seer, moved.seen, True) else None))
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
        for child in children(node):
            self.value(child)

    def _opaque(self, node: nodes.Expr, value: Value) -> Info:
        """A construct whose axes this pass does not follow: new axes, no facts."""
        self._visit_children(node)
        assert value.shape is not None
        return Info(tuple(Axis(size, node, opaque=True) for size in value.shape))

    def _matmul(self, node: nodes.BinOp) -> Info:
        left, right = self.value(node.left), self.value(node.right)
        result = self.types[id(node)].shape
        laxes, raxes = left.axes, right.axes
        if not laxes or not raxes or result is None:
            return UNKNOWN
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

    def _einsum(self, node: nodes.Call, operands: Sequence[nodes.Expr], subscripts: str) -> Info:
        infos = [self.value(operand) for operand in operands]
        result = self.types[id(node)].shape
        if result is None or any(info.axes is None for info in infos):
            return UNKNOWN
        from ..check.einsum import SubscriptError, parse_subscripts  # an einsum's own rules
        try:
            parsed = parse_subscripts(subscripts, len(operands))
        except SubscriptError:
            return UNKNOWN
        terms, output = parsed.inputs, parsed.output
        keys = [einsum_keys(term, len(info.axes or ())) for term, info in zip(terms, infos)]
        out_keys = einsum_keys(output, len(result))
        if out_keys is None or any(k is None for k in keys):
            return UNKNOWN
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
                size = symbolic.product(einsum_size(self.types, operands, placed[k][0]) for k in
                                        sorted(both, key=str))
        return self._contracted(node, operands, infos, summed, kept, batch, axes, size)

    def _contracted(self, node: nodes.Expr, operands: Sequence[nodes.Expr], infos: Sequence[Info],
                    summed: list[list[int]], kept: list[list[int]], batch: list[list[int]],
                    axes: tuple[Axis, ...], size: Dim | None) -> Info:
        assert self._statement is not None
        contraction = Contraction(node, operands, infos, summed, kept, batch, axes,
                                   size if len(operands) == 2 else None, self._statement)
        self.contractions[id(node)] = contraction
        if len(operands) == 2:
            softmaxes = {id(info.norm.call) for info in infos if info.norm is not None}
            if len(softmaxes) == 1 and all(info.norm is not None for info in infos):
                # weights times their own (transposed, scaled): matrix algebra on them
                # (Nyströmformer's pseudo-inverse iteration), no sum of values; their
                # later products are that algebra's too
                self._algebra |= softmaxes
            for operand, info in enumerate(infos):
                if info.norm is not None and id(info.norm.call) in self._algebra:
                    continue
                if info.norm is not None:
                    mixed = self._mixed_maps(contraction, operand)
                    if mixed is not None:
                        return Info(axes, norm=mixed)
                    self._attention(contraction, operand)
                elif info.linear and info.causal:
                    self._prefix_sums(contraction, operand)
        if size is None or len(operands) != 2:
            return Info(axes)
        mixed_scores = self._mixed_scores(contraction)
        if mixed_scores is not None:
            return mixed_scores
        inner: tuple[Factor, ...] = ()
        for operand, info in zip(operands, infos):
            if info.scale:
                inner += tuple(Factor(f.node, f.divides, f.operand or operand)
                               for f in info.scale)
        return Info(axes, product=Product(contraction, inner))

    def _arithmetic(self, node: nodes.BinOp, value: Value) -> Info:
        left, right = self.value(node.left), self.value(node.right)
        if left.axes is None or right.axes is None:
            return UNKNOWN
        if not right.axes or not left.axes:  # a tensor and a scalar
            tensor, scalar, tensor_node, scalar_node = (
                (left, right, node.left, node.right) if not right.axes
                else (right, left, node.right, node.left))
            return self._with_scalar(node, tensor, scalar_node, tensor_node is node.left)
        if node.op == "/" and self._normalises(node, right):
            return self._handmade_softmax(node, left, right)
        return self._tensors(node, [node.left, node.right], [left, right], value)

    def _with_scalar(self, node: nodes.BinOp, tensor: Info, scalar_node: nodes.Expr,
                     tensor_first: bool) -> Info:
        assert tensor.axes is not None
        if node.op in nodes.COMPARISONS:
            return self._compare_number(node, tensor, scalar_node, tensor_first)
        norm = tensor.norm.changed_by(node) if tensor.norm is not None else None
        if node.op == "*" or (node.op == "/" and tensor_first):
            factor = Factor(scalar_node, node.op == "/")
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
            info.positions = None
            if tensor.positions is not None and (node.op == "+" or tensor_first):
                offset = self._size_of(scalar_node)  # `arange(N) + P`: positions from P
                if offset is not None:
                    info.positions = tensor.positions.plus(offset if node.op == "+" else -offset, node)
            if node.op == "-" and not tensor_first and self._number(scalar_node) == 1.0:
                self._complement(info, tensor)
            return info
        return Info(tensor.axes, norm=norm, reduced=tensor.reduced)

    def _size_of(self, node: nodes.Expr) -> Dim | None:
        """A scalar that is a size (`T3`, `M - N`, `3`) as its dim expression."""
        value = self.types.get(id(node))
        if value is not None and value.dim is not None:
            return value.dim
        number = self._number(node)
        return symbolic.integer(int(number)) if number is not None and number.is_integer() else None

    def _scaled_values(self, node: nodes.BinOp, tensor: Info, info: Info, factor: float) -> None:
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
        if value > 0 and value * factor <= BLOCKS:
            info.masks = (self._own_mask(node, node, info, keeps=False, fill=value * factor),)

    def _own_mask(self, node: nodes.Expr, condition: nodes.Expr, info: Info, keeps: bool,
                  fill: float) -> Applied:
        """A value that is itself an additive mask, in its own axes."""
        assert info.axes is not None
        mask = self._applied(node, condition, info, {id(a): a for a in info.axes}, keeps, fill,
                             additive=True)
        mask.numeric = True
        return mask

    def _complement(self, info: Info, tensor: Info) -> None:
        """`1 - m` of a 0/1 mask: the positions it hides become the ones it allows."""
        if tensor.causal and tensor.nonzero == 1.0:
            info.causal = tuple(c.negated() for c in tensor.causal)
            info.nonzero = 1.0

    def _compare_number(self, node: nodes.BinOp, tensor: Info, number_node: nodes.Expr,
                        tensor_first: bool) -> Info:
        """A causal mask compared with 0 or 1 (`tril(ones([N, N])) == 1`, `m == 0`,
        `m != false`): the same mask, or its negation."""
        number = self._number(number_node)
        op = node.op if tensor_first else MIRRORED[node.op]
        truth = TRUTH.get((op, number))
        if truth is None or not tensor.causal:
            return Info(tensor.axes)
        return Info(tensor.axes, causal=tensor.causal if truth else
                     tuple(c.negated() for c in tensor.causal), nonzero=1.0)

    def _compare(self, node: nodes.Expr, operands: list[Info], axes: tuple[Axis, ...],
                 mappings: list[dict[int, Axis]]) -> Info:
        """Positions compared along two axes (`arange(N)[:, None] >= arange(M)[None, :]`):
        a causal mask whose rows see the columns at or before them."""
        left, right = operands
        a = mappings[0].get(id(left.position)) if left.position is not None else None
        b = mappings[1].get(id(right.position)) if right.position is not None else None
        op = node.op if isinstance(node, nodes.BinOp) else ""
        if a is None or b is None or a is b or op not in (">=", ">", "<=", "<"):
            return Info(axes)
        seer, seen = (a, b) if op in (">=", ">") else (b, a)
        strict = None if left.shifted_position or right.shifted_position else op in (">", "<")
        edge = None if strict is None else int(strict)
        return Info(axes, causal=(Causal(seer, seen, node, strict, edge=edge),), nonzero=1.0)

    def _tensors(self, node: nodes.Expr, operand_nodes: list[nodes.Expr], operands: list[Info],
                 value: Value) -> Info:
        """An elementwise operation on several tensors, with NumPy broadcasting."""
        info = self._elementwise_tensors(node, operand_nodes, operands, value)
        if info.axes is not None and info is not UNKNOWN and isinstance(node, nodes.BinOp):
            self._follow_positions(node, operands, info)
            if node.op == "*":
                self._expanded(operands, info)
                carried = {id(o.positions): o.positions for o in operands if o.positions is not None}
                if len(carried) == 1 and info.positions is None:  # angles: positions * freqs
                    info.positions = next(iter(carried.values()))
        return info

    @staticmethod
    def _expanded(operands: list[Info], info: Info) -> None:
        """`x[:, :, None] * ones([B, Hkv, G, N, d])` (torch's `expand`, as the spellings
        write it): the axis the ones bring where x had 1 holds copies of x."""
        assert info.axes is not None
        for mine, other in ((0, 1), (1, 0)):
            x, ones = operands[mine], operands[other]
            if ones.constant != 1.0 or x.constant is not None or x.axes is None:
                continue
            own = {id(a) for a in x.axes}
            brought = [a for a in info.axes if id(a) not in own]
            if len(brought) == 1:
                info.copies = brought[0]
                info.positional = info.positional or x.positional

    def _elementwise_tensors(self, node: nodes.Expr, operand_nodes: list[nodes.Expr],
                             operands: list[Info], value: Value) -> Info:
        order = sorted(range(len(operands)), key=lambda i: (
            operands[i].product is None and operands[i].norm is None, i))
        axes, mappings = self._broadcast(node, operand_nodes, operands, order)
        if axes is None:
            return UNKNOWN
        op = node.op if isinstance(node, nodes.BinOp) else ""
        if op in nodes.COMPARISONS:
            return self._compare(node, operands, axes, mappings)
        if value.is_bool or op == "&":
            # `&` (or `*` on bools) is "and": each causal part still holds, if they agree.
            if op not in ("&", "*"):
                return Info(axes)
            causal = [moved for i, o in enumerate(operands) for c in o.causal
                      if (moved := c.moved(mappings[i])) is not None]
            if len({(id(c.seer), id(c.seen)) for c in causal}) != 1:
                return Info(axes)
            return Info(axes, causal=(causal[0],), nonzero=1.0)
        norms = [o.norm for o in operands if o.norm is not None]
        if op == "*" and not norms and len(operands) == 2:
            linear = self._masked_product(operands, mappings, axes)
            if linear is not None:
                return linear
        if op == "+" and not norms and all(o.masks and o.product is None for o in operands):
            # additive masks added together (`(1 - pad) * -1e9 + where(j <= i, 0, -1e9)`,
            # BERT's and T5's padding plus a triangle): one that hides what either hides,
            # so each mask goes on, in the sum's axes (issue 33: read as a bias, it was none)
            info = Info(axes)
            info.masks = tuple(m.moved(mappings[i]) for i, o in enumerate(operands)
                               for m in o.masks)
            return info
        if op in ("+", "-") and not norms:
            # Scores plus a bias, an additive mask, or a shift by a reduction (a softmax
            # written by hand): the scores' facts go on.
            if op == "-" and order[0] != 0:
                return Info(axes)  # `B - S`: the scores negated, not understood
            main = operands[order[0]]
            ops: tuple[BiasTerm | Applied, ...] = ()
            parts: tuple[Dim, ...] = ()
            terms: tuple[Contraction, ...] = ()
            for i, other in enumerate(operands):
                if i == order[0]:
                    continue
                if other.masks:
                    ops += tuple(m.added_as(operand_nodes[i], mappings[i]) for m in other.masks)
                elif other.reduced is None:
                    lined_up = tuple(mappings[i].get(id(a)) for a in other.axes or ())
                    ops += ((operand_nodes[i], lined_up, op == "-"),)
                    if op == "+" and other.product is not None and main.product is not None \
                            and other.product.size is not None and lined_up == axes:
                        parts += (other.product.size,)  # a product of the same axes
                        terms += (other.product.contraction,)
            info = main.shifted(axes, None, ops)
            if parts:
                assert main.product is not None
                info.product = Product(main.product.contraction, main.product.inner_scale,
                                        main.product.parts + parts, node,
                                        main.product.terms + terms)
            return info
        if op == "/" and not norms and self._per_row_count(operands):
            # a sum divided by how many entries it summed, row by row (a masked mean:
            # `sum(q * m) / (sum(m) + eps)`): scaled vectors averaged keep their scale
            return Info(axes, scale=operands[0].scale)
        if len(norms) == 1:
            # Weights masked, scaled by a tensor or mixed with other numbers.
            return Info(axes, norm=norms[0].changed_by(node))
        return Info(axes)

    def _per_row_count(self, operands: list[Info]) -> bool:
        """Scaled vectors summed (`mean`, `sum`), divided by numbers constant along their
        features (one per row: `count[..., None]`)."""
        total, count = operands
        reduced = total.reduced
        if not total.scale or reduced is None or total.axes is None or count.axes is None \
                or not count.axes or len(count.axes) > len(total.axes):
            return False
        info = self.calls.get(id(reduced.call))
        return info is not None and info.builtin in LINEAR_REDUCTIONS and \
            symbolic.is_literal_one(count.axes[-1].size)

    @staticmethod
    def _masked_product(operands: list[Info], mappings: list[dict[int, Axis]],
                        axes: tuple[Axis, ...]) -> Info | None:
        """`(Q @ K.T) * tril(ones([N, N]))`: the product kept on one side of the diagonal
        (causal linear attention, the running sums of its keys written as a matrix)."""
        for mine, other in ((0, 1), (1, 0)):
            product, mask = operands[mine], operands[other]
            if product.product is None or not mask.causal or mask.nonzero != 1.0:
                continue
            moved = mask.causal[0].moved(mappings[other])
            if moved is not None:
                return Info(axes, causal=(moved,), linear=True)
        return None

    def _broadcast(self, node: nodes.Expr, operand_nodes: list[nodes.Expr], operands: list[Info],
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

    def _normalises(self, node: nodes.BinOp, right: Info) -> bool:
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

    def _handmade_softmax(self, node: nodes.BinOp, left: Info, right: Info) -> Info:
        assert right.reduced is not None
        info = self.calls[id(right.reduced.call)]
        assert left.axes is not None
        axis = left.axes[axis_index(info.args["axis"], len(left.axes))]
        source = left.exp_of or left
        argument = node.left
        assert self._statement is not None
        return Info(left.axes, norm=Norm(node, axis, source, argument, self._statement))

    def _same(self, a: nodes.Expr, b: nodes.Expr) -> bool:
        a, b = nodes.strip_parens(a), nodes.strip_parens(b)
        if isinstance(a, nodes.Name) and isinstance(b, nodes.Name):
            return a.name == b.name
        return self._text(a) == self._text(b)

    def _definition_text(self, node: nodes.Expr) -> str:
        """A name's defining expression (a name not defined is itself), else the text."""
        if isinstance(node, nodes.Name):
            return self.definitions.get(node.name, node.name)
        return self._text(node)

    def _call(self, node: nodes.Call, value: Value) -> Info:
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
            return self._opaque(node, value) if kind is AxisKind.OPAQUE else UNKNOWN
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
        if kind is AxisKind.GATHER:
            return self._gather(node, info.args, axis_map, x, value)
        if kind is AxisKind.PAIRS:  # the last axis paired into complex numbers, or back
            kept = x.axes[:-1] if len(value.shape) <= len(x.axes) else x.axes
            # the same features, paired or unpaired: a projection, its scale and a rotation
            # of it go on (a complex rotary: `view_as_real(view_as_complex(x) * freqs)`)
            return Info(kept + tuple(Axis(size, node) for size in value.shape[len(kept):]),
                        projection=x.projection, scale=x.scale, positional=x.positional,
                        positions=x.positions,
                        table=x.table, paired=len(value.shape) < len(x.axes))
        return self._opaque(node, value)

    def _gather(self, node: nodes.Expr, args: dict[str, Any], axis_map: Any, x: Info,
                value: Value) -> Info:
        """`take`, `x[ids]`: x's other axes keep their identity; the gathered one gives way
        to the index's axes (`E[ids]`: the ids' batch and tokens), or, along an axis
        (`take_along_axis`), to a new axis of picked entries."""
        assert x.axes is not None and value.shape is not None
        where = axis_index(args[axis_map.axis], len(x.axes))
        index = self.value(args[axis_map.index])
        if axis_map.along or index.axes is None:
            picked = (Axis(value.shape[where], node),) if axis_map.along else tuple(
                Axis(size, node) for size in value.shape[where: where + len(value.shape)
                                                         - len(x.axes) + 1])
        else:
            picked = index.axes
        return Info(x.axes[:where] + picked + x.axes[where + 1:])

    def _tensor_arguments(self, args: dict[str, Any], names: tuple[str, ...]
                          ) -> list[tuple[nodes.Expr, Info]]:
        found = []
        for name in names:
            arg = args.get(name)
            items = arg.items if isinstance(arg, nodes.ListExpr) else (arg,) if arg is not None else ()
            for item in items:
                found.append((item, self.value(item)))
        return found

    def _elementwise(self, node: nodes.Call, args: dict[str, Any], axis_map: Any,
                     tensors: list[tuple[nodes.Expr, Info]], value: Value) -> Info:
        if len(tensors) != 1:
            return self._tensors(node, [n for n, _ in tensors], [i for _, i in tensors], value)
        x_node, x = tensors[0]
        assert x.axes is not None
        if axis_map.normalises is not None:
            axis = x.axes[axis_index(args[axis_map.normalises], len(x.axes))] if x.axes else None
            if axis is None:
                return Info(x.axes)
            source = x
            return Info(x.axes, norm=Norm(node, axis, source, x_node, self._statement))
        if axis_map.keeps_values:
            return x.moved(x.axes)
        if axis_map.triangle is not None and len(x.axes) >= 2:
            return self._triangle_of(node, axis_map, args, x)
        name = node.func.name
        if name == "log" and x.causal and x.nonzero is not None and x.nonzero > 0:
            # log of a 0/1 triangle: 0 where it allows, -inf where it hides (an additive mask)
            info = Info(x.axes, causal=x.causal)
            info.masks = (self._own_mask(node, x_node, info, keeps=True, fill=-math.inf),)
            return info
        if name in SQUASHING and x.product is not None and x.norm is None:
            # soft-capped scores (`c * tanh(S / c)`) are still the scores, capped: the
            # pattern and its masks go on (its scale is not judged: scale.py); a `-inf`
            # fill before it turns finite
            info = x.shifted(x.axes, ops=(Capped(node),))
            info.squashed = x.squashed + tuple((m, node) for m in x.applied)
            return info
        norm = x.norm.changed_by(node) if x.norm is not None else None
        exp_of = x if name == "exp" else None
        info = Info(x.axes, norm=norm, reduced=x.reduced, exp_of=exp_of)
        if name in ("cos", "sin") or x.table:
            info.table = True
            info.positions = x.positions
        if name in FEATURE_NORMS:
            info.projection = x.projection
        if name in SQUASHING and (x.applied or x.squashed):
            # a soft-cap after the mask: its fills turn finite
            info.squashed = x.squashed + tuple((m, node) for m in x.applied)
        return info

    def _triangle_of(self, node: nodes.Call, axis_map: Any, args: dict[str, Any], x: Info) -> Info:
        """`tril(x)`, `triu(x, 1)`: a causal value; of a constant (`triu(full([N, N], -inf),
        1)`, `tril(ones(...))`) its entries on the triangle are that number, and a very
        negative one makes it an additive mask hiding the triangle."""
        assert x.axes is not None
        made = self._triangle(node, axis_map, args, x.axes)
        # A triangle of a triangle (Mistral's band `triu(tril(ones), -W)`) is nonzero only
        # where both are: x's mask still holds; the new one only if it agrees.
        agrees = all((c.seer, c.seen) == (made.seer, made.seen) for c in x.causal)
        info = Info(x.axes, causal=x.causal + ((made,) if agrees else ()))
        info.linear = x.product is not None and x.norm is None
        if x.causal and x.nonzero is not None:
            info.nonzero = x.nonzero
        if x.constant is not None:
            info.nonzero = x.constant
            if x.constant <= BLOCKS:
                info.masks = (self._own_mask(node, node, info, keeps=False, fill=x.constant),)
        return info

    def _create(self, node: nodes.Call, axis_map: Any, args: dict[str, Any], value: Value) -> Info:
        assert value.shape is not None
        axes = tuple(Axis(size, node) for size in value.shape)
        if axis_map.triangle is not None and len(axes) >= 2:
            return Info(axes, causal=(self._triangle(node, axis_map, args, axes),), nonzero=1.0)
        if axis_map.positions and len(axes) == 1:
            return Info(axes, position=axes[0], positions=self._arange(node, args, axes[0]))
        constant = CONSTANTS.get(node.func.name)
        if constant is None and axis_map.fill is not None and args.get(axis_map.fill) is not None:
            constant = self._number(args[axis_map.fill])
        return Info(axes, constant=constant)

    @staticmethod
    def _arange(node: nodes.Call, args: dict[str, Any], axis: Axis) -> Positions | None:
        """`arange(N)`: the positions 0, ..., N - 1; `arange(P, P + N)` from P (a step other
        than 1 is not a run of positions)."""
        step = args.get("step")
        if step is not None and symbolic.as_int(step) != 1:
            return None
        start = args.get("n") if args.get("stop") is not None else symbolic.integer(0)
        return Positions(start, axis.size, node) if start is not None else None

    def _triangle(self, node: nodes.Call, axis_map: Any, args: dict[str, Any],
                  axes: tuple[Axis, ...]) -> Causal:
        """The causal mask of a row with a ``triangle``: which of the last two axes sees
        the other, and whether the diagonal is excluded (its ``offset``: tril's k < 0,
        triu's k > 0; another offset is of unknown effect)."""
        rows, columns = axes[-2], axes[-1]
        offset = args.get(axis_map.offset) if axis_map.offset is not None else None
        k = symbolic.as_int(offset) if offset is not None else 0
        # tril's and triu's diagonal says the alignment; `causal_mask(N, M)` is bottom-right
        literal = k is not None and axis_map.offset is not None
        if axis_map.triangle == "lower":  # rows - columns >= -k
            return Causal(rows, columns, node, None if k is None or k > 0 else k < 0,
                          edge=-k if literal else None)
        return Causal(columns, rows, node, None if k is None or k < 0 else k > 0,
                      edge=k if literal else None)

    def _reshape(self, node: nodes.Call, x_node: nodes.Expr, x: Info, target: tuple[Dim, ...]) -> Info:
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
        elif len(middle_source) == 1 and len(middle_places) > 1 and middle_source[0].parts:
            self._check_split(node, x_node, middle_source[0], [target[i] for i in middle_places])
        matched = dict(zip(places[:front], sized[:front]))
        matched.update(zip(places[len(places) - back:], sized[len(sized) - back:]))
        # axes merged into one (`[N, H, d]` -> `[N*H, d]`) are its parts, outer first
        parts = tuple(middle_source) if len(middle_places) == 1 and len(middle_source) > 1 else ()
        axes = tuple(matched.get(i) or Axis(size, node, opaque=mixed and i in middle_places,
                                            parts=parts if i in middle_places else ())
                     for i, size in enumerate(target))
        info = x.moved(axes)
        if x.norm is not None and x.norm.axis not in axes:
            info.norm = None
        info.copies = None
        if x.copies is not None and len(middle_places) == 1 and len(middle_source) == 2 \
                and middle_source[0] is x.copies:
            # copies merged in front of the heads: head g * Hkv + j is kv head j (tiling)
            info.tiled = (node, axes[middle_places[0]], middle_source[1].size, x.copies.node)
        return info

    def _join(self, node: nodes.Call, args: dict[str, Any], axis_param: str | None,
              tensors: list[tuple[nodes.Expr, Info]], value: Value) -> Info:
        assert value.shape is not None
        first = tensors[0][1].axes
        if not first:
            return UNKNOWN
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
        info = Info(tuple(axes), scale=scale)
        if len(value.shape) == len(first) and len(tensors) > 1:
            self._cache_blocks(node, info, tensors, where)
        names = {self._text(n) for n, _ in tensors}
        if len(names) == 1 and len(tensors) > 1 and len(value.shape) == len(first):
            # `concat([K, K], axis=1)`: the tensor tiled along that axis
            info.tiled = (node, axes[where], first[where].size, None)
        bases = {base_of(i) for _, i in tensors}
        if len(bases) == 1 and len(tensors) > 1:
            info.pieces_of = bases.pop()  # `concat([-x2, x1])`: rotate_half
        positional = [i.positional for _, i in tensors if i.positional is not None]
        if positional:  # a rotated part (the new keys after the cache, MLA's rotary part)
            info.positional = positional[0]
        if len(value.shape) == len(first) and len(tensors) > 1:  # a concat of parts
            positions = {id(i.positions): i.positions for _, i in tensors}
            if len(positions) == 1 and tensors[0][1].positions is not None:
                info.positions = tensors[0][1].positions  # `concat([freqs, freqs])`
            else:
                self._positions_after_cache(node, tensors, where)
        projections = {i.projection for _, i in tensors}
        if len(projections) == 1:  # the interleaved pairs of one projection, stacked back
            info.projection = projections.pop()
        if len(value.shape) == len(first) and len(tensors) > 1:
            info.joined = (axes[where], tuple(i.axes[where].size for _, i in tensors  # type: ignore[index]
                                              if i.axes), tuple(n for n, _ in tensors))
        return info

    def _cache_blocks(self, node: nodes.Call, info: Info, tensors: list[tuple[nodes.Expr, Info]],
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
        seer, seen = index_of(layout, fact.seer), index_of(layout, fact.seen)
        if seer is None or seen is None or where not in (seer, seen) or seer == seen:
            return
        if blocks[0] != len(tensors) - 1:
            self._misplaced_block(node, [n for n, _ in tensors], blocks[0])
            return
        # a square block keeps its diagonal, now at the bottom right: whether it is hidden
        # (`triu(-inf, 0)`: each new query loses itself) still holds; its offset is the cache's
        square = self.system.equal(layout[seer].size, layout[seen].size)
        causal = Causal(info.axes[seer], info.axes[seen], node, fact.strict if square else None)
        if additive:
            marked = Info(info.axes, causal=(causal,))
            fill = block.masks[0].fill
            info.masks = (self._own_mask(node, node, marked, keeps=block.masks[0].keeps,
                                         fill=fill if fill is not None else -math.inf),)
        else:
            info.causal, info.nonzero = (causal,), 1.0

    def _reduce(self, node: nodes.Call, args: dict[str, Any], axis_map: Any, x_node: nodes.Expr,
                x: Info, value: Value) -> Info:
        assert x.axes is not None and value.shape is not None
        axis = args.get(axis_map.axis or "")
        removed = axes_of(axis, len(x.axes))  # one axis or several (`axis=(-1, -2)`)
        removed = tuple(range(len(x.axes))) if removed is None else removed
        if args.get(axis_map.keepdims or ""):
            axes = tuple(Axis(value.shape[i], node) if i in removed else a
                         for i, a in enumerate(x.axes))
        else:
            axes = tuple(a for i, a in enumerate(x.axes) if i not in removed)
        info = Info(axes, reduced=Reduced(node, x_node, removed))
        if x.scale and self.calls[id(node)].builtin in LINEAR_REDUCTIONS:
            # the mean of scaled queries is scaled as they are (Nyströmformer's landmarks,
            # means of segments of `Q / d ** 0.25`): its product with the keys keeps it
            info.scale = x.scale
        return info

    def _where(self, node: nodes.Call, tensors: list[tuple[nodes.Expr, Info]], value: Value) -> Info:
        (c_node, cond), (x_node, x), (y_node, y) = tensors
        if cond.axes is None or x.axes is None or y.axes is None:
            return UNKNOWN
        order = [1, 2, 0] if x.axes or not y.axes else [2, 1, 0]
        axes, mappings = self._broadcast(node, [c_node, x_node, y_node], [cond, x, y], order)
        if axes is None:
            return UNKNOWN
        zero = self._zero_branch(c_node, x_node, y_node)
        if zero is not None and not (y.axes if zero == 1 else x.axes):
            # where(m != 0, -inf, m): m is 0 wherever the condition is false (a mask filled
            # in place, `mask.masked_fill_(mask.bool(), -inf)`): the additive mask below.
            x, y = (x, Info(())) if zero == 2 else (Info(()), y)
        if not x.axes and not y.axes:
            # where(m, 0, -inf): an additive mask; true entries keep when x is the larger.
            high = self._branch_number(x_node, zero == 1)
            low = self._branch_number(y_node, zero == 2)
            keeps = high is not None and low is not None and high > low
            applied = self._applied(node, c_node, cond, mappings[0], keeps,
                                    low if keeps else high, additive=True)
            return Info(axes, masks=(applied,))
        if x.axes and y.axes:
            return Info(axes)  # two tensors: a choice, not a mask
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
            return Info(axes, norm=target.norm.changed_by(node, applied))
        return target.shifted(axes, None, (applied,))

    def _zero_branch(self, c_node: nodes.Expr, x_node: nodes.Expr, y_node: nodes.Expr
                     ) -> int | None:
        """Which branch of `where(c, x, y)` is zero wherever it is taken (1: x, 2: y): the
        tensor the condition compares with 0, on the side the comparison leaves it 0
        (`where(m != 0, fill, m)`, `where(m == 0, m, fill)`); None otherwise."""
        condition = nodes.strip_parens(c_node)
        if not isinstance(condition, nodes.BinOp) or condition.op not in ("!=", "=="):
            return None
        sides = (nodes.strip_parens(condition.left), nodes.strip_parens(condition.right))
        named = [s.name for s in sides if isinstance(s, nodes.Name)]
        if len(named) != 1 or not any(self._number(s) == 0.0 for s in sides
                                      if not isinstance(s, nodes.Name)):
            return None
        branch = nodes.strip_parens(y_node if condition.op == "!=" else x_node)
        if isinstance(branch, nodes.Name) and branch.name == named[0]:
            return 2 if condition.op == "!=" else 1
        return None

    def _branch_number(self, node: nodes.Expr, zero: bool) -> float | None:
        return 0.0 if zero else self._number(node)

    def _applied(self, node: nodes.Call, c_node: nodes.Expr, cond: Info, mapping: dict[int, Axis],
                 keeps: bool, fill: float | None, additive: bool) -> Applied:
        assert cond.axes is not None
        aligned = tuple(mapping.get(id(a)) for a in cond.axes)
        for causal in cond.causal:
            seer, seen = mapping.get(id(causal.seer)), mapping.get(id(causal.seen))
            applied = Applied(node, c_node, "causal", seer, seen, keeps, fill, aligned, additive,
                              causal.node, causal.strict)
            applied.negation, applied.edge = causal.negation, causal.edge
            return applied
        return Applied(node, c_node, "bool", None, None, keeps, fill, aligned, additive, None)

    def _remasks(self, norm: Norm, condition: nodes.Expr) -> bool:
        """The weights masked again with the mask the scores already had (zeroing NaN rows)."""
        # or a mask of the same expression under another name (SpeechBrain's
        # `key_padding_mask.view(...)` written again where it masks the weights): the spec
        # is pure, so the two are one value
        return any(self._same(m.condition, condition)
                   or self._definition_text(nodes.strip_parens(m.condition))
                   == self._definition_text(nodes.strip_parens(condition))
                   for m in norm.source.applied)

    def _number(self, node: nodes.Expr) -> float | None:
        scalar = self.scalar(node)
        return None if scalar.opaque or scalar.powers else scalar.coef

    def scalar(self, node: nodes.Expr, depth: int = 0) -> Scalar:
        """A scalar expression as ``coef * prod(base ** exponent)`` (`1 / sqrt(d)`, `d ** -0.5`)."""
        node = nodes.strip_parens(node)
        if depth > MAX_SCALAR_DEPTH:
            return OPAQUE
        if isinstance(node, (nodes.Integer, nodes.Decimal)):
            return Scalar(float(node.value))
        if isinstance(node, nodes.Inf):
            return Scalar(math.inf)
        if isinstance(node, nodes.Boolean):
            return Scalar(1.0 if node.value else 0.0)
        if isinstance(node, nodes.Name):
            value = self.types.get(id(node))
            if value is not None and value.dim is not None:
                return Scalar(powers=((value.dim, Fraction(1)),))
            definition = self.scalars.get(node.name)
            return self.scalar(definition, depth + 1) if definition is not None else OPAQUE
        if isinstance(node, nodes.Unary):
            inner = self.scalar(node.operand, depth + 1)
            return Scalar(-inner.coef if node.op == "-" else inner.coef, inner.powers, inner.opaque)
        if isinstance(node, nodes.Call):
            info = self.calls.get(id(node))
            power = POWERS.get(info.builtin) if info is not None else None
            if power is not None and isinstance(info.args.get("x"), nodes.Expr):
                return scalar_power(self.scalar(info.args["x"], depth + 1), power)
            return OPAQUE
        if isinstance(node, nodes.BinOp):
            left = self.scalar(node.left, depth + 1)
            right = self.scalar(node.right, depth + 1)
            if node.op == "*":
                return Scalar(left.coef * right.coef, left.powers + right.powers,
                               left.opaque or right.opaque)
            if node.op == "/":
                if right.coef == 0:
                    return OPAQUE
                inverse = tuple((b, -e) for b, e in right.powers)
                return Scalar(left.coef / right.coef, left.powers + inverse,
                               left.opaque or right.opaque)
            if node.op == "**" and not right.powers and not right.opaque and math.isfinite(right.coef):
                return scalar_power(left, Fraction(right.coef).limit_denominator(64))
            if node.op in "+-":
                return scalar_sum(left, right, node.op)
        return OPAQUE

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


_HANDLERS: dict[type, Any] = {
    nodes.BinOp: Follow._binop, nodes.Unary: Follow._unary,
    nodes.Transpose: Follow._transpose, nodes.Call: Follow._call,
    nodes.Subscript: Follow._subscript,
}

#: What :meth:`Follow.checkpoint` keeps: everything a statement leaves for the next ones.
_STATE = ("names", "scalars", "infos", "contractions", "patterns", "diagnostics",
          "rotated_caches", "_reported")
