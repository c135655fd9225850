"""Parts and heads (SC414, SC415): key/value heads tiled rather than repeated for
grouped queries, and Q and K concatenated from parts in different orders.
"""

from __future__ import annotations

from ..messages import codes
from ..symbolic import to_text
from .facts import Contraction, index_of
from .masks import reordered


class HeadChecks:
    """SC414, SC415: grouped heads and parts of Q and K."""

    def _heads(self, scores: Contraction, output: Contraction, v: int) -> None:
        """SC414: K or V tiled along a batch (head) axis of the attention, for grouped
        query heads."""
        sides = [(scores, operand) for operand in (0, 1)] + [(output, v)]
        for contraction, operand in sides:
            info = contraction.infos[operand]
            if info.tiled is None or info.axes is None:
                continue
            node, axis, kv = info.tiled
            position = index_of(info.axes, axis)
            report = ("SC414", id(node))
            if position not in contraction.batch[operand] or report in self._reported:
                continue
            self._reported.add(report)
            self._report(codes.TILED_HEADS.diag(
                node.span, tiled=self._text(node), kv=to_text(kv),
                notes=[codes.note("weights_summed", output.node.span,
                                  contraction=self._text(output.node))],
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
            help=[codes.help_text("same_part_order"), fix.help], fixes=[fix]))
