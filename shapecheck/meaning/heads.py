"""Parts and heads (SC414, SC415, SC419): key/value heads tiled rather than repeated for
grouped queries, Q and K concatenated from parts in different orders, and K and V
concatenated along the keys in different orders.
"""

from __future__ import annotations

from ..messages import codes
from ..symbolic import to_text
from .facts import Axis, Contraction, index_of
from .masks import reordered


def _tiled_alike(sides: list[tuple[Contraction, int]]) -> bool:
    """Whether K and V are tiled alike (x-transformers' `repeat(t, 'b kvh n d -> b (r kvh) n
    d')` of both): query head i then meets key *and* value head i mod Hkv, a grouping of the
    query heads other than `split_heads`' contiguous one but the same for K and V. Which
    grouping is meant only the trained weights say (a relabelling of the query heads' rows
    of the projection gives the other), so no diagnostic is true of the code alone; K tiled
    and V repeated (or the reverse) pairs each query head with the keys of one head and the
    values of another, which no relabelling undoes."""
    tiled = [contraction.infos[operand].tiled for contraction, operand in sides]
    *scored, value = tiled
    keys = [t for t in scored if t is not None]
    return value is not None and len(keys) == 1 and keys[0][2] == value[2]


class HeadChecks:
    """SC414, SC415, SC419: grouped heads, parts of Q and K, parts of K and V."""

    def _heads(self, scores: Contraction, output: Contraction, v: int) -> None:
        """SC414: K or V tiled along a batch (head) axis of the attention, for grouped
        query heads."""
        sides = [(scores, operand) for operand in (0, 1)] + [(output, v)]
        if _tiled_alike(sides):
            return
        for contraction, operand in sides:
            info = contraction.infos[operand]
            if info.tiled is None or info.axes is None:
                continue
            node, axis, kv, copied = info.tiled
            position = index_of(info.axes, axis)
            report = ("SC414", id(node))
            if position not in contraction.batch[operand] or report in self._reported:
                continue
            self._reported.add(report)
            notes = [codes.note("weights_summed", output.node.span,
                                contraction=self._text(output.node))]
            if copied is not None and copied is not node:  # the copies made on a line before
                notes.insert(0, codes.note("copies_here", copied.span, copies=self._text(copied)))
            self._report(codes.TILED_HEADS.diag(
                node.span, tiled=self._text(node), kv=to_text(kv), notes=notes,
                help=[codes.help_text("repeat_heads")]))

    def _parts(self, scores: Contraction) -> None:
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
        # the candidate fix: the key's parts in the query's order (verified by fixcheck)
        remaining = list(zip(k_text, k_parts))
        order = []
        for size in q_text:
            match = next(pair for pair in remaining if pair[0] == size)
            remaining.remove(match)
            order.append(match[1])
        fix = reordered(k_parts, order, self._text)
        self._report(codes.PARTS_MISALIGNED.diag(
            scores.node.span, scores=self._text(scores.node),
            query=self._text(self._strip(scores.operands[0])),
            key=self._text(self._strip(scores.operands[1])),
            q_parts=", ".join(q_text), k_parts=", ".join(k_text),
            notes=[codes.note(note, parts[0].span.to(parts[-1].span),
                              parts=", ".join(self._text(p) for p in parts))
                   for note, parts in (("query_parts_here", q_parts), ("key_parts_here", k_parts))],
            help=[codes.help_text("same_part_order"), fix.help], fixes=[fix]))

    def _kv_parts(self, scores: Contraction, output: Contraction, v: int, key: Axis) -> None:
        """SC419: K and V both concatenations along the keys (a cache and the new keys)
        whose parts have the same sizes in different orders (`concat([K_cache, k])`
        against `concat([v, V_cache])`): key j and value j are different positions."""
        if key.node is not scores.node or len(key.sources) != 1 or len(output.summed[v]) != 1:
            return  # the key axis is one axis of K, kept by the scores
        k_operand, k_index = key.sources[0]
        k_info, v_info = scores.infos[k_operand], output.infos[v]
        if k_info.joined is None or v_info.joined is None or k_info.axes is None \
                or v_info.axes is None:
            return
        if k_info.axes[k_index] is not k_info.joined[0] \
                or v_info.axes[output.summed[v][0]] is not v_info.joined[0]:
            return
        (_, k_sizes, k_parts), (_, v_sizes, v_parts) = k_info.joined, v_info.joined
        k_text, v_text = [to_text(x) for x in k_sizes], [to_text(x) for x in v_sizes]
        if len(k_text) != len(k_parts) or len(v_text) != len(v_parts):
            return
        report = ("SC419", id(v_parts[0]))
        if k_text == v_text or sorted(k_text) != sorted(v_text) or report in self._reported:
            return
        self._reported.add(report)
        remaining = list(zip(v_text, v_parts))
        order = []
        for size in k_text:  # the candidate fix: V's parts in K's order (verified by fixcheck)
            match = next(pair for pair in remaining if pair[0] == size)
            remaining.remove(match)
            order.append(match[1])
        fix = reordered(v_parts, order, self._text)
        self._report(codes.KV_PARTS_MISALIGNED.diag(
            v_parts[0].span.to(v_parts[-1].span), values=self._text(self._strip(output.operands[v])),
            keys=self._text(self._strip(scores.operands[k_operand])),
            k_parts=", ".join(k_text), v_parts=", ".join(v_text),
            notes=[codes.note("key_parts_here", k_parts[0].span.to(k_parts[-1].span),
                              parts=", ".join(self._text(p) for p in k_parts)),
                   codes.note("scores_here", scores.node.span, scores=self._text(scores.node))],
            help=[codes.help_text("same_part_order_kv"), fix.help], fixes=[fix]))
