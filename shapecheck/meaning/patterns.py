"""Attention patterns: a contraction whose operand is softmax weights, the roles of
every axis (query, key, feature, value, batch), and the checks on the weights
themselves (SC402: summed over an axis they do not normalise; SC406: changed before
they are summed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import codes
from ..syntax import nodes
from ..messages.diagnostics import Edit, Fix, Note
from ..symbolic import to_text
from .facts import Axis, Applied, Capped, Contraction, Factor, Info, Norm, UNKNOWN, index_of
from .results import Attention, Bias, Role, SoftCap


class Patterns:
    """Finding the attention of a contraction and the roles of its axes."""

    def _attention(self, contraction: Contraction, w: int) -> None:
        info = contraction.infos[w]
        norm = info.norm
        assert norm is not None and info.axes is not None
        weights_axes = info.axes
        summed = contraction.summed[w]
        kept = contraction.kept[w]
        v = 1 - w
        normalised = index_of(weights_axes, norm.axis)
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
        # weights summed over the wrong axis (SC402) make the product's query axis the keys:
        # a mask's orientation read from it would blame the mask for the product's bug
        masks, after, mask_verdicts = self._masks(contraction, w, norm,
                                                  None if guessed else query,
                                                  None if axis_ok is False else key, roles)
        if not guessed and axis_ok is not False:  # not blamed on the mask: SC402's axes
            self._mask_axes(contraction, norm, query, key)
        self._soft_capped(norm)
        self._rotated_values(contraction, v, self._keys_operand(scores, key))
        if scores is not None:
            self._heads(scores, contraction, v)
            self._parts(scores)
            self._one_side_rotated(scores)
            # the other products summed into the scores (a content and a rotary part)
            for term in norm.source.product.terms if norm.source.product is not None else ():
                self._one_side_rotated(term)
            if key is not None:
                self._kv_parts(scores, contraction, v, key)
        biases = {id(b): Bias(b[0], tuple(roles.get(id(a)) if a else None for a in b[1]), b[2])
                  for b in norm.source.biases}
        ops = None
        if product is not None and scale is not None:
            factors = {id(f.node): f for f in scale.factors}
            ops = tuple(factors[id(f.node)] for f in product.inner_scale) + tuple(
                factors[id(op.node)] if type(op) is Factor else
                SoftCap(op.node) if type(op) is Capped else
                masks[id(op)] if type(op) is Applied and not op.numeric else
                Bias(op.node, masks[id(op)].condition.axes, False) if type(op) is Applied else
                biases[id(op)]
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
            softmax_axis=index_of(norm.source.axes or (), norm.axis) or 0,
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

    def _mixed_maps(self, contraction: Contraction, w: int) -> Norm | None:
        """Talking heads (CaiT: `einsum('b h i j, h g -> b g i j', attn, mix)`): softmax
        weights times a param, the axis they were normalised over kept, are whole weight
        maps mixed by a learned matrix, not their sum with the values; the mixed maps are
        the weights the values are summed with later, normalised over the same axis."""
        info = contraction.infos[w]
        norm = info.norm
        if norm is None or info.axes is None or \
                not self._param(contraction.operands[1 - w]):
            return None
        normalised = index_of(info.axes, norm.axis)
        if normalised is None or normalised not in contraction.kept[w]:
            return None
        moved = [axis for axis in contraction.axes if (w, normalised) in axis.sources]
        if len(moved) != 1:
            return None
        return Norm(norm.call, moved[0], norm.source, norm.argument, norm.statement,
                    norm.changed, norm.after)

    def _mixed_scores(self, contraction: Contraction) -> Info | None:
        """Talking heads before the softmax (`einsum('b h i j, h g -> b g i j', dots, mix)`):
        scores times a param, summed over axes both of the scores' factors share (the
        heads) only, are the same scores mixed across heads: still `Q @ K.T`, with its
        scale, not a product over the heads."""
        for w, info in enumerate(contraction.infos):
            product = info.product
            if product is None or info.axes is None or not contraction.summed[w] or \
                    not self._param(contraction.operands[1 - w]):
                continue
            inner = product.contraction.node
            if all(info.axes[p].node is inner and len(info.axes[p].sources) > 1
                   for p in contraction.summed[w]):
                return Info(contraction.axes, product=product, scale=info.scale)
        return None

    @staticmethod
    def _keys_operand(scores: Contraction | None, key: Axis | None) -> nodes.Expr | None:
        """The operand of the scores that holds the key axis (K), if it is one."""
        if scores is None or key is None or key.node is not scores.node or len(key.sources) != 1:
            return None
        return scores.operands[key.sources[0][0]]

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

    def _scores(self, norm: Norm, query: Axis | None, key: Axis | None) -> Contraction | None:
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

    def _roles(self, contraction: Contraction, w: int, query: Axis | None, key: Axis | None
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

    def _output_roles(self, contraction: Contraction, w: int, roles: dict[int, str]
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

    def _operand_roles(self, scores: Contraction, operand: int, roles: dict[int, str]
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
        axes = self.infos.get(id(node), UNKNOWN).axes
        if axes is None:
            axes = self.infos.get(id(nodes.strip_parens(node)), UNKNOWN).axes or ()
        return Role(node, tuple(roles.get(id(a)) for a in axes))

    def _operand_role(self, scores: Contraction | None, axis: Axis | None,
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
                left = self.infos.get(id(node.left), UNKNOWN).axes
                right = self.infos.get(id(node.right), UNKNOWN).axes
                if right == () and left:
                    node = node.left
                    continue
                if left == () and right and node.op == "*":
                    node = node.right
                    continue
            return node

    def _wrong_axis(self, contraction: Contraction, w: int, norm: Norm,
                    scores: Contraction | None) -> None:
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
        fixes = self._untransposed(contraction, w)
        self._report(codes.SOFTMAX_AXIS.diag(
            contraction.node.span, contraction=self._text(contraction.node),
            summed=self._describe(summed_axis, source, argument, scores),
            normalised=self._describe(norm.axis, source, argument, scores),
            consequence=consequence,
            notes=[codes.note("softmax_here", norm.call.span,
                              axis=index_of(source, norm.axis), argument=argument)]
            + self._scores_note(scores),
            # the weights read transposed (`P.T @ V`): the repair drops that transpose, the
            # softmax is right; offered only if the edited spec re-checks clean (fixcheck)
            help=[f.help for f in fixes] or [codes.help_text("same_axis")], fixes=fixes))

    def _untransposed(self, contraction: Contraction, w: int) -> list[Fix]:
        """`P.T @ V`, `transpose(P) @ V`: the product with the weights as the softmax made
        them, if the weights operand is written transposed."""
        operand = nodes.strip_parens(contraction.operands[w])
        inner: nodes.Expr | None = None
        if isinstance(operand, nodes.Transpose):
            inner = operand.operand
        else:
            info = self.calls.get(id(operand)) if isinstance(operand, nodes.Call) else None
            if info is not None and info.builtin == "transpose" and len(operand.args) == 1 \
                    and not operand.keywords:
                inner = info.args["x"]
        if inner is None:
            return []
        text = self._text(inner)
        product = self._text(contraction.node).replace(self._text(contraction.operands[w]), text, 1)
        return [Fix(codes.help_text("drop_weights_transpose", product=product),
                    (Edit(contraction.operands[w].span, text),), safe=False)]

    def _consequence(self, summed: Axis, normalised: Axis, scores: Contraction | None,
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
                  scores: Contraction | None) -> str:
        index = index_of(layout, axis)
        size = to_text(axis.size)
        if index is None:
            return codes.detail("an_axis", size=size)
        if scores is not None and axis.node is scores.node and axis.sources:
            operand, _ = axis.sources[0]
            return codes.detail("axis_from", index=index, tensor=tensor, size=size,
                                origin=self._text(self._strip(scores.operands[operand])))
        return codes.detail("axis_of", index=index, tensor=tensor, size=size)

    def _scores_note(self, scores: Contraction | None) -> list[Note]:
        if scores is None:
            return []
        return [codes.note("scores_here", scores.node.span, scores=self._text(scores.node))]

    def _changed(self, contraction: Contraction, norm: Norm, change: nodes.Expr) -> None:
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
            help=self._change_help(norm, change)))

    def _change_help(self, norm: Norm, change: nodes.Expr) -> list[str]:
        """The repair of a change to the weights, where its form says which it is: a term
        added (a bias or an additive mask) belongs to the scores, before the softmax; a
        mask (`where`, or a product with a mask) hides scores there. Any other change (a
        scale, copies) is no opinion on what was meant: no help."""
        if isinstance(change, nodes.BinOp) and change.op in "+-":
            left = self.infos.get(id(change.left))
            op, term = (change.op, change.right) if left is not None and left.norm is not None \
                else ("+", change.left) if change.op == "+" else ("", None)
            if term is None:
                return []  # `B - P`: the weights negated, no bias of the scores
            scores = self._text(norm.argument)
            call = self._text(norm.call).replace(scores, f"{scores} {op} {self._text(term)}", 1)
            return [codes.help_text("add_before_softmax", term=self._text(term), call=call)]
        if isinstance(change, nodes.Call) and change.func.name in ("where", "masked_fill"):
            return [codes.help_text("mask_before_softmax")]
        if isinstance(change, nodes.BinOp) and change.op == "*":
            left, right = self.infos.get(id(change.left)), self.infos.get(id(change.right))
            other = right if left is not None and left.norm is not None else left
            if other is not None and (other.causal or other.masks or other.nonzero is not None):
                return [codes.help_text("mask_before_softmax")]
        return []

    def _check_alignment(self, node: nodes.Expr, operand_nodes: list[nodes.Expr],
                         operands: list[Info], lined_up: list[tuple[int, Axis]],
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
