"""Positions (SC413, SC418): rotary transforms (products with cos and sin tables and
rotate-half, or the interleaved pairs) are followed; applied to V, or to one of Q and K
only, they are a bug.
"""

from __future__ import annotations

from ..messages import codes
from ..syntax import nodes
from .. import symbolic
from ..symbolic import Dim, Verdict, to_text
from .facts import Contraction, Info, Positions, base_of, children
from .results import RotatedCache


class PositionChecks:
    """SC413, SC418: rotary transforms, V rotated, one side of the scores rotated."""

    def _follow_positions(self, node: nodes.BinOp, operands: list[Info], info: Info) -> None:
        """A rotary transform: `x * cos + rotate_half(x) * sin` (or the halves of x, or
        its even and odd features, each times a table, added or subtracted). Its result,
        and what is built from it, is a value whose features depend on positions."""
        left, right = operands
        if node.op == "*":
            for a, b in ((left, right), (right, left)):
                if a.table and not b.table and b.positional is None:
                    info.term_of = base_of(b)
                    info.scale = b.scale  # the rotation is linear: x's scale goes on
                    info.projection = b.projection
                    if b.paired:  # complex pairs times a table of e^(i·angle): the whole
                        info.positional = node  # rotation in one product (Meta's llama)
            if left.table and right.table:
                info.table = True
        elif node.op in ("+", "-"):
            if left.term_of is not None and left.term_of == right.term_of:
                info.positional = node
                info.projection = left.projection or right.projection
                # Q scaled before it is rotated (ESM, fairseq): both terms carry the scale
                if [id(f.node) for f in left.scale] == [id(f.node) for f in right.scale]:
                    info.scale = left.scale
            elif left.positional is not None or right.positional is not None:
                info.positional = left.positional or right.positional

    def _rotated_values(self, contraction: Contraction, v: int, keys: nodes.Expr | None) -> None:
        """SC413: V went through a rotary transform (alone or besides Q and K)."""
        rotary = contraction.infos[v].positional
        report = ("SC413", id(contraction.node))
        if rotary is None or report in self._reported:
            return
        self._reported.add(report)
        values = self._strip(contraction.operands[v])
        notes = [codes.note("rotary_here", rotary.span)]
        shared = self._read_of_keys(contraction.operands[v], keys) if keys is not None else None
        if shared is not None:  # `v = transpose(key, ...)`: V built from the keys' tensor
            notes.append(codes.note("values_read_keys", shared.span, name=shared.name))
        self._report(codes.POSITIONS_ON_VALUES.diag(
            values.span, values=self._text(values), contraction=self._text(contraction.node),
            rotary=self._text(rotary), notes=notes, help=[codes.help_text("rotary_qk_only")]))

    def _read_of_keys(self, values: nodes.Expr, keys: nodes.Expr) -> nodes.Name | None:
        """The first read, along V's definitions, of a rotated name the keys are built from."""
        key_names = {name.name for name in self._reads(keys)}
        for name in self._reads(values):
            info = self.names.get(name.name)
            if name.name in key_names and info is not None and info.positional is not None:
                return name
        return None

    def _reads(self, operand: nodes.Expr) -> list[nodes.Name]:
        """The names ``operand`` reads, then those its names' definitions read, nearest
        first (each name's definition once)."""
        definitions = {s.name.name: s.value for s in self.program.statements
                       if isinstance(s, (nodes.Define, nodes.Output)) and s.value is not None}
        found: list[nodes.Name] = []
        queue, seen = [operand], set()
        while queue:
            for name in _names(queue.pop(0)):
                found.append(name)
                if name.name in definitions and name.name not in seen:
                    seen.add(name.name)
                    queue.append(definitions[name.name])
        return found

    def _projections(self, info: Info) -> set[str]:
        """The tensors ``info`` is a projection of: its own, or its parts' when it is a
        concatenation (a cache, then the new keys: `concat([K_cache, X @ Wk.T])`)."""
        if info.projection is not None:
            return {info.projection}
        if info.joined is None:
            return set()
        parts = (self.infos.get(id(part)) for part in info.joined[2])
        return {part.projection for part in parts if part is not None and part.projection}

    def _one_side_rotated(self, scores: Contraction) -> None:
        """SC418: one operand of the scores went through a rotary transform and the other,
        a projection of the same tensor (or a concatenation holding one: a cache, then the
        new keys), did not. The product of a query rotated by its
        position i and a key rotated by j depends on i - j only; rotating one side keeps
        an absolute position in every score."""
        rotated = [info.positional for info in scores.infos]
        if (rotated[0] is None) == (rotated[1] is None):
            return
        side = 0 if rotated[0] is not None else 1
        rotary, plain = scores.infos[side], scores.infos[1 - side]
        if not self._projections(rotary) & self._projections(plain):
            return  # the other side is not plainly the same tensor projected: no opinion
        report = ("SC418", id(rotated[side]))
        if report in self._reported:
            return
        self._reported.add(report)
        rotary_node = rotated[side]
        assert rotary_node is not None
        names = ("Q", "K") if side == 0 else ("K", "Q")
        notes = [codes.note("scores_here", scores.node.span, scores=self._text(scores.node))]
        unrotated = self._unrotated_read(scores.operands[1 - side])
        if unrotated is not None:
            notes.append(codes.note("unrotated_read", unrotated.span, name=unrotated.name))
        self._report(codes.ROTARY_ONE_SIDE.diag(
            rotary_node.span, scores=self._text(scores.node), rotated=names[0], plain=names[1],
            rotary=self._text(rotary_node),
            operand=self._text(self._strip(scores.operands[1 - side])),
            notes=notes, help=[codes.help_text("rotary_both_sides")]))

    def _unrotated_read(self, operand: nodes.Expr) -> nodes.Name | None:
        """Where the plain side reads, as it is, a tensor that a rotary transform of the
        spec rotates (`keys = concat([cache_k, xk])` while `xk_rot` rotates `xk`): the
        place a rotated name was meant. The plain operand is searched first, then the
        definitions of the names it reads, nearest first."""
        rotated = {name.name for info in self.infos.values() if info.positional is not None
                   for name in _names(info.positional)
                   if not (table := self.names.get(name.name)) or not table.table}
        return next((name for name in self._reads(operand) if name.name in rotated), None)

    def _positions_after_cache(self, node: nodes.Call, parts: list[tuple[nodes.Expr, Info]],
                               axis: int) -> None:
        """SC420: keys concatenated along ``axis`` after a cache (inputs as they are), then
        rotated by positions made in the spec that do not start where the keys before them
        end (`arange(N)` where `arange(P, P + N)` was meant). Said only when the positions
        count the part's keys and the difference is proved. Keys rotated by tables the spec
        is given are recorded (:class:`RotatedCache`): a whole model reads their values."""
        before, cache = symbolic.integer(0), []
        for i, (part_node, info) in enumerate(parts):
            if info.axes is None or len(info.axes) <= axis:
                return
            positions = info.positions
            size = info.axes[axis].size
            if i and info.positional is not None and positions is None:
                self._rotated_after(tuple(cache), info, axis)
            elif i and positions is not None and info.positional is not None \
                    and self.system.equal(positions.count, size) \
                    and self._provably_other(positions.start, before):
                self._report_positions(node, part_node, positions, before)
            name = self._cached(part_node)
            if name is None:
                return  # keys of the module's own (learned memory keys) are not a cache
            before, cache = before + size, cache + [name]

    def _rotated_after(self, cache: tuple[str, ...], info: Info, axis: int) -> None:
        """The input tables that rotate keys put after the inputs ``cache``."""
        assert info.positional is not None
        read = [name for name in self._reads(info.positional)
                if (table := self.names.get(name.name)) is not None and table.table]
        tables = tuple(dict.fromkeys(  # the inputs the tables are cut from (`cos = pe[0]`)
            name.name for table in read for name in self._reads(table)
            if (tensor := self.program.tensors.get(name.name)) is not None
            and tensor.kind == "input"))
        if tables:
            self.rotated_caches.append(RotatedCache(tables, cache, axis))

    def _cached(self, part: nodes.Expr) -> str | None:
        """The input a part of the keys is, as it is (the cache a step is given)."""
        part = nodes.strip_parens(part)
        if not isinstance(part, nodes.Name):
            return None
        tensor = self.program.tensors.get(part.name)
        return part.name if tensor is not None and tensor.kind == "input" else None

    def _provably_other(self, a: Dim, b: Dim) -> bool:
        return Verdict.PROVED in (self.system.positive(a - b), self.system.positive(b - a))

    def _report_positions(self, node: nodes.Call, part: nodes.Expr, positions: Positions,
                          cached: Dim) -> None:
        report = ("SC420", id(positions.node))
        if report in self._reported:
            return
        self._reported.add(report)
        cached_text = to_text(cached)
        fixed = f"arange({cached_text}, {cached_text} + {to_text(positions.count)})"
        self._report(codes.ROTARY_POSITIONS_CACHE.diag(
            positions.node.span, positions=self._text(positions.node),
            start=to_text(positions.start), cached=cached_text, keys=self._text(node),
            notes=[codes.note("keys_after_cache", node.span, part=self._text(part),
                              cached=cached_text)],
            help=[codes.help_text("positions_after_cache", cached=cached_text, fixed=fixed)]))


def _names(expr: nodes.Expr) -> list[nodes.Name]:
    """The names an expression reads, in reading order."""
    if isinstance(expr, nodes.Name):
        return [expr]
    return [name for child in children(expr) for name in _names(child)]
