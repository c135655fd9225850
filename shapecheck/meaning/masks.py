"""Checks on masks (SC407, SC408, SC410, SC412): which axis a causal mask lets see
which, which branch keeps the scores, whether the fill hides a key (also after a
soft-cap), whether a padding mask lies on the keys; and the triangles of causal
linear attention.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import codes
from ..syntax import nodes
from ..messages.diagnostics import Edit, Fix, Note
from ..symbolic import Verdict, to_text
from .facts import (
    Axis,
    Applied,
    BLOCKS,
    Contraction,
    FLIPPED,
    LEAKS,
    Norm,
    index_of,
    number_text,
)
from .results import Mask, Role


class MaskChecks:
    """SC407, SC408, SC410, SC412: the masks of an attention."""

    def _masks(self, contraction: Contraction, w: int, norm: Norm, query: Axis | None,
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
                FLIPPED[orientation]
            condition = Role(mask.condition, tuple(roles.get(id(a)) if a is not None else None
                                                   for a in mask.aligned))
            public = Mask(mask.node, condition, mask.kind, mask.keeps, mask.fill,
                          mask.additive, alignment, after, mask.strict)
            if after:
                masks.append(public)
            else:
                before[id(mask)] = public
            wrong = self._check_mask(contraction, mask, orientation, after)
            if alignment == "aligned" and not wrong and key is not None:
                wrong = self._top_left(contraction, mask, key)
            if alignment is not None:
                verdicts.append(not wrong)
        return before, tuple(masks), verdicts

    def _swap_help(self, node: nodes.Expr) -> str:
        """SC408's help in the spec's own words: its `where` with the branches swapped."""
        call = nodes.strip_parens(node)
        if isinstance(call, nodes.Call) and call.func.name == "where" and len(call.args) == 3 \
                and not call.keywords:
            condition, hidden, kept = (self._text(arg) for arg in call.args)
            return codes.help_text("swap_branches_to", fixed=f"where({condition}, {kept}, {hidden})")
        return codes.help_text("swap_branches")

    def _mask_axes(self, contraction: Contraction, norm: Norm, query: Axis | None,
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
                notes=self._added_note(mask) + self._condition_defined(mask) + [codes.note(
                    "weights_summed", contraction.node.span,
                    contraction=self._text(contraction.node))],
                help=[codes.help_text("mask_keys")]))

    def _prefix_sums(self, contraction: Contraction, w: int) -> None:
        """SC407 for causal linear attention: a triangle of `Q @ K.T` summed with the
        values (`tril(S) @ V`, `(S * tril(ones([N, N]))) @ V`) must keep the rows it
        sums for, and sum over the keys up to each: the other triangle reads the future."""
        info = contraction.infos[w]
        causal = info.causal[0]
        layout = info.axes or ()
        seer, seen = index_of(layout, causal.seer), index_of(layout, causal.seen)
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

    def _soft_capped(self, norm: Norm) -> None:
        """SC410: a mask filled with `-inf` before a soft-cap (`c * tanh(S / c)`): the cap
        turns the fill into `-c`, a real weight."""
        for mask, cap in norm.source.squashed:
            report = ("SC410", id(mask.node))
            if mask.fill is None or mask.fill > BLOCKS or report in self._reported:
                continue
            self._reported.add(report)
            self._report(codes.MASK_FILL.diag(
                mask.node.span, where=self._text(mask.node),
                fill=codes.detail("fill_squashed", fill=number_text(mask.fill),
                                  cap=self._text(cap)),
                notes=[codes.note("capped_here", cap.span, cap=self._text(cap))],
                help=[codes.help_text("mask_after_cap")]))

    def _check_mask(self, contraction: Contraction, mask: Applied, orientation: str | None,
                    after: bool) -> bool:
        """SC407, SC408 (by the condition's ``orientation`` and which branch keeps the
        scores), SC410; whether the mask lets a query see the wrong keys."""
        key = (id(mask.node), id(contraction.node))
        where = self._text(mask.node)
        notes = [codes.note("weights_summed", contraction.node.span,
                            contraction=self._text(contraction.node))]
        if mask.origin is not None:
            notes.insert(0, codes.note("mask_built", mask.origin.span, mask=self._text(mask.origin)))
        notes[:0] = self._added_note(mask)
        # Hiding where a transposed condition is true hides the future: right when the
        # condition leaves the diagonal out (`where(j > i, -inf, S)`, `triu(.., 1)`);
        # when it has the diagonal, each query loses itself (SC408); unknown: no opinion.
        inverted = not mask.keeps and (orientation == "aligned" or
                                       (orientation == "transposed" and mask.strict is False))
        transposed = mask.keeps and orientation == "transposed"
        negation = transposed and mask.negation
        if negation:  # `where(~causal, S, -inf)`: the negation keeps the future, no transpose
            inverted, transposed = True, False
        # keeping a condition that leaves the diagonal out (`where(j < i, S, -inf)`): each
        # query loses itself and the first sees nothing, as with the hiding form above
        # (a mask function, `def m(q, k) = k < q`: SC433 says so, with the sizes)
        selfless = mask.keeps and orientation == "aligned" and mask.strict is True \
            and not self._in_function(mask.origin)
        if (inverted or selfless) and ("SC408",) + key not in self._reported:
            self._reported.add(("SC408",) + key)
            # the first query sees nothing only where the triangle starts at the corner; a
            # block aligned bottom-right (a cache first) leaves it the cache
            sees = codes.detail("sees_future_only" if (orientation == "aligned" and not selfless)
                                or negation else "sees_past_only" if mask.edge is not None
                                else "loses_own_key")
            fix = codes.help_text("drop_negation") if negation else \
                codes.help_text("keep_diagonal") if selfless else self._swap_help(mask.node)
            self._report(codes.MASK_INVERTED.diag(mask.node.span, where=where, sees=sees,
                                                  notes=notes, help=[fix]))
        elif transposed and ("SC407",) + key not in self._reported:
            self._reported.add(("SC407",) + key)
            self._report(codes.MASK_TRANSPOSED.diag(
                mask.node.span, where=where, contraction=self._text(contraction.node),
                notes=notes, help=[codes.help_text(
                    "flip_comparison" if isinstance(mask.origin, nodes.BinOp) else "untranspose_mask")]))
        if not after and mask.fill is not None and mask.fill > LEAKS and \
                ("SC410", id(mask.node)) not in self._reported:
            self._reported.add(("SC410", id(mask.node)))
            self._report(codes.MASK_FILL.diag(mask.node.span, where=where,
                                              fill=number_text(mask.fill),
                                              help=[codes.help_text("fill_minus_inf")]))
        return inverted or transposed or selfless

    def _added_note(self, mask: Applied) -> list[Note]:
        """Where an additive mask built on another line is added to the scores (where a
        transpose or a new axis written there takes effect)."""
        if mask.added is None or mask.added.span.line == mask.node.span.line:
            return []
        return [codes.note("mask_added", mask.added.span, mask=self._text(mask.added))]

    def _condition_defined(self, mask: Applied) -> list[Note]:
        """Where the tensor a mask's condition reads got its layout, on another line than
        the mask (a padding mask repeated as `(b h) j ()` before its `masked_fill`): where
        its axes are put on the queries."""
        names = set(nodes.names_in(mask.condition))
        for statement in self.program.statements:
            if isinstance(statement, nodes.Define) and statement.value is not None \
                    and statement.name.name in names \
                    and statement.span.line != mask.node.span.line:
                value = self.program.tensors.get(statement.name.name)
                if value is not None and value.value.known:
                    return [codes.note("defined", statement.span, name=statement.name.name,
                                       shape=value.value.text())]
        return []

    def _in_function(self, node: nodes.Expr | None) -> bool:
        """Whether ``node`` is written in a `def` (a mask function: masks/ checks its rows)."""
        functions = self.program.functions
        return node is not None and functions is not None and any(
            d.span.line <= node.span.line <= d.span.end_line
            for d in functions.definitions.values())

    def _top_left(self, contraction: Contraction, mask: Applied, key: Axis) -> bool:
        """SC417: a triangle with its edge at the top-left corner on scores with more keys
        than queries, provably (`N_k = P + N_q`): the keys hold a cache before the new ones,
        whose queries stand at the end. The fix moves the diagonal by the cache's length.
        A mask that keeps where query - key >= 0 (`tril(x)`, `i >= j`) or hides where
        key - query >= 1 (`triu(x * -inf, 1)`, `where(j > i, -inf, S)`) is top-left."""
        queries = mask.seer if mask.keeps else mask.seen
        if mask.edge != (0 if mask.keeps else 1) or queries is None or mask.origin is None:
            return False
        gap = key.size - queries.size
        if self.system.positive(gap) is not Verdict.PROVED:
            return False
        report = ("SC417", id(mask.origin))
        if report in self._reported:
            return True
        self._reported.add(report)
        gap_text = to_text(gap)
        fixes = self._diagonal_fix(mask.origin, gap_text)
        self._report(codes.CAUSAL_ALIGNMENT.diag(
            mask.node.span, where=self._text(mask.node), mask=self._text(mask.origin),
            gap=gap_text, keys=to_text(key.size), queries=to_text(queries.size),
            notes=[codes.note("mask_built", mask.origin.span, mask=self._text(mask.origin)),
                   codes.note("weights_summed", contraction.node.span,
                              contraction=self._text(contraction.node))],
            help=[f.help for f in fixes], fixes=fixes))
        return True

    def _diagonal_fix(self, origin: nodes.Expr, gap: str) -> list[Fix]:
        """`tril(x)` -> `tril(x, gap)`, `triu(x, 1)` -> `triu(x, 1 + gap)`: the edit,
        checked by fixcheck before it is shown."""
        call = nodes.strip_parens(origin)
        if not (isinstance(call, nodes.Call) and call.func.name in ("tril", "triu")
                and len(call.args) in (1, 2) and not call.keywords):
            return []
        diagonal = f"{self._text(call.args[1])} + {gap}" if len(call.args) == 2 else gap
        fixed = f"{call.func.name}({self._text(call.args[0])}, {diagonal})"
        return [Fix(codes.help_text("align_bottom_right", fixed=fixed),
                    (Edit(call.span, fixed),), safe=False)]

    def _misplaced_block(self, node: nodes.Expr, parts: Sequence[nodes.Expr], block: int) -> None:
        """SC416: a KV-cache mask whose causal block comes before keys every query sees;
        the candidate fix moves the block to the end (verified by :mod:`fixcheck`)."""
        report = ("SC416", id(node))
        if report in self._reported:
            return
        self._reported.add(report)
        order = [p for i, p in enumerate(parts) if i != block] + [parts[block]]
        fixes = [reordered(parts, order, self._text)]
        self._report(codes.CACHE_MASK_ORDER.diag(
            node.span, concat=self._text(node), block=self._text(parts[block]),
            visible=self._text(parts[block + 1]),
            help=[codes.help_text("causal_block_last"), fixes[0].help], fixes=fixes))


def reordered(parts: Sequence[nodes.Expr], order: Sequence[nodes.Expr], text: Any) -> Fix:
    """The edit that writes ``parts`` (a list's items, in place) in ``order``."""
    written = ", ".join(text(p) for p in order)
    return Fix(codes.help_text("reorder_parts", parts=written),
               (Edit(parts[0].span.to(parts[-1].span), written),), safe=False)
