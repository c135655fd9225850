"""Views (SC411): a reshape that would move an axis, or group whole axes out of their
order.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ..messages import codes
from ..messages.diagnostics import Note
from ..syntax import nodes
from .. import symbolic
from ..symbolic import Dim, to_text
from .facts import Axis, MAX_VIEW_AXES, monomial_text


class ViewChecks:
    """SC411: reshapes that would move or regroup axes."""

    def _check_mixing(self, node: nodes.Call, x_node: nodes.Expr, source: Sequence[Axis],
                      target: Sequence[Dim]) -> None:
        """SC411: a reshape that would have to move an axis (`[H, N, d]` -> `[N, H*d]`),
        or one that groups the source's axes out of their order (ViT's patches cut with a
        view and no permute: `[C, h, P, w, P]` -> `[h*w, P*P*C]`)."""
        if self._relative_shift(node, x_node, source, target) or self._learned_layout(x_node):
            return
        for position, size in enumerate(target):
            for index, axis in enumerate(source):
                if index != position and self.system.equal(axis.size, size):
                    self._report_mixing(node, x_node, size)
                    return
        sizes = [axis.size for axis in source]
        if len(sizes) > MAX_VIEW_AXES or len(target) > MAX_VIEW_AXES:
            return
        if not all(monomial_text(to_text(size)) for size in (*sizes, *target)):
            return  # sums, differences, quotients: no opinion on their factors
        failed = self._view_failure(sizes, list(target))
        if failed is None:
            return
        for order in itertools.permutations(sizes):
            # whole axes only: each target axis is a product of some of the source's axes
            if self._view_failure(list(order), list(target), splits=False) is None:
                self._report_mixing(node, x_node, failed)  # a moved order would group them
                return

    def _check_split(self, node: nodes.Call, x_node: nodes.Expr, merged: Axis,
                     target: Sequence[Dim]) -> None:
        """SC411: an axis that a reshape merged from axes (`[N, H, d]` -> `[N*H, d]`) split
        again into their sizes in another order (`[H, N, d]`): a split keeps the element
        order, so the merged axis's outer part is still the outer one. `view(B, T, H, d)`
        read as `[B, H, T, d]` without the transpose: the "heads" axis runs over tokens."""
        parts = merged.parts
        equal = self.system.equal
        if len(parts) != len(target) or all(equal(p.size, s) for p, s in zip(parts, target)):
            return
        order: list[int] = []
        for size in target:  # each target size is one part's, each part used once
            match = [i for i, part in enumerate(parts) if i not in order and equal(part.size, size)]
            if len(match) != 1:
                return  # not a reordering of the parts (or an ambiguous one): no opinion
            order.append(match[0])
        moved = next(size for position, size in enumerate(target) if order[position] != position)
        report = ("SC411", id(node))
        if report in self._reported or merged.node is None:
            return
        self._reported.add(report)
        self._report(codes.RESHAPE_MIXES.diag(
            node.span, source=self.types[id(x_node)].text(), target=self.types[id(node)].text(),
            size=to_text(moved),
            notes=[codes.note("merged_here", merged.node.span, reshape=self._text(merged.node),
                              parts=", ".join(to_text(p.size) for p in parts))],
            help=[codes.help_text("split_in_merge_order",
                                  parts=", ".join(to_text(p.size) for p in parts))]))

    def _relative_shift(self, node: nodes.Call, x_node: nodes.Expr, source: Sequence[Axis],
                        target: Sequence[Dim]) -> bool:
        """Transformer-XL's relative shift (labml's `shift_right`, espnet's `rel_shift`):
        scores [i, j] padded by one column, viewed as [j + 1, i], a row dropped, viewed back
        as [i, j]; each row comes out shifted by its index. The swapped view is the point of
        it, not a transpose left out: it reads a value padded by one along the axis it moves,
        or a row cut of such a view, which no layout a transpose makes is. XLNet's
        `rel_shift_bnij` has no pad: scores [i, r] viewed as [r, i], the first row dropped,
        viewed back as [i, r - 1]: row i comes out shifted by i as well (its first `klen`
        columns kept). Both of its views are the shift: the first, whose result loses its
        first row before it is viewed back, and the second, of that cut."""
        equal = self.system.equal
        if len(source) != 2 or len(target) != 2 or not (
                equal(source[0].size, target[1]) and equal(source[1].size, target[0])):
            return False
        return self._padded_by_one(x_node, 2) or self._first_row_cut(x_node) or \
            self._cut_and_viewed_back(node)

    def _first_row_cut(self, x_node: nodes.Expr) -> bool:
        """Whether ``x_node`` is a swapped view with its first row dropped (`x[:, :, 1:]` of
        `reshape(s, [b, n, r, i])` where `s` is [b, n, i, r]): the cut axis is the first of
        the two the view swapped."""
        value = self._defined(nodes.strip_parens(x_node))
        if not isinstance(value, nodes.Subscript):
            return False
        inner = self._defined(nodes.strip_parens(value.operand))
        if not isinstance(inner, nodes.Call) or inner.func.name != "reshape" or not inner.args:
            return False
        swapped = self._swapped_axes(inner)
        return swapped is not None and self._cut_axis(value) == swapped[0]

    def _cut_and_viewed_back(self, node: nodes.Call) -> bool:
        """Whether the view ``node`` swaps two axes and its result is read only with its
        first row (of the first swapped axis) dropped, that cut viewed back swapped: XLNet's
        first view, the shift's."""
        swapped = self._swapped_axes(node)
        name = self._name_of(node)
        if swapped is None or name is None:
            return False
        expressions = self._expressions()
        uses = [e for e in expressions if isinstance(e, nodes.Name) and e.name == name]
        cuts = [e for e in expressions if isinstance(e, nodes.Subscript)
                and isinstance(nodes.strip_parens(e.operand), nodes.Name)
                and nodes.strip_parens(e.operand).name == name]
        if not cuts or len(cuts) != len(uses) or \
                any(self._cut_axis(cut) != swapped[0] for cut in cuts):
            return False  # read whole somewhere, or cut otherwise: no shift
        cut_ids = {id(cut) for cut in cuts}
        return any(isinstance(e, nodes.Call) and e.func.name == "reshape" and e.args
                   and id(self._defined(nodes.strip_parens(e.args[0]))) in cut_ids
                   and self._swapped_axes(e) is not None for e in expressions)

    def _swapped_axes(self, call: nodes.Call) -> tuple[int, int] | None:
        """The two adjacent axes a reshape swaps (`[b, n, i, r]` -> `[b, n, r, i]`), every
        other axis kept; None for any other reshape."""
        source = getattr(self.types.get(id(call.args[0])), "shape", None) if call.args else None
        target = getattr(self.types.get(id(call)), "shape", None)
        if source is None or target is None or len(source) != len(target):
            return None
        equal = self.system.equal
        moved = [i for i, (a, b) in enumerate(zip(source, target)) if not equal(a, b)]
        if len(moved) != 2 or moved[1] != moved[0] + 1:
            return None
        first, second = moved
        if not (equal(source[first], target[second]) and equal(source[second], target[first])):
            return None
        return first, second

    def _cut_axis(self, cut: nodes.Subscript) -> int | None:
        """The axis a subscript drops the first entry of (`x[:, :, 1:]`: 2), every other
        axis whole; None for any other subscript."""
        shape = getattr(self.types.get(id(cut.operand)), "shape", None)
        if shape is None:
            return None
        indices = list(cut.indices)
        ellipses = [i for i, index in enumerate(indices) if isinstance(index, nodes.EllipsisIndex)]
        if len(ellipses) > 1:
            return None
        if ellipses:
            at = ellipses[0]
            indices[at:at + 1] = [None] * (len(shape) - len(indices) + 1)
        indices += [None] * (len(shape) - len(indices))
        if len(indices) != len(shape):
            return None
        found = None
        for axis, index in enumerate(indices):
            if index is None or isinstance(index, nodes.Slice) and index.start is None \
                    and index.stop is None and index.step is None:
                continue
            if not (isinstance(index, nodes.Slice) and _literal(index.start) == 1
                    and index.stop is None and index.step is None) or found is not None:
                return None
            found = axis
        return found

    def _name_of(self, value: nodes.Expr) -> str | None:
        """The name a statement gives ``value`` (the whole of its right-hand side)."""
        for statement in self.program.statements:
            if isinstance(statement, nodes.Define) and statement.value is not None \
                    and nodes.strip_parens(statement.value) is value:
                return statement.name.name
        return None

    def _expressions(self) -> list[nodes.Expr]:
        """Every expression of the program's statements, in order."""
        found: list[nodes.Expr] = []
        for statement in self.program.statements:
            value = getattr(statement, "value", None)
            stack = [value] if value is not None else []
            while stack:
                expr = stack.pop()
                found.append(expr)
                stack.extend(nodes.children(expr))
        return found

    def _learned_layout(self, x_node: nodes.Expr) -> bool:
        """A parameter read only through reshapes to one shape (SpeechBrain's `pos_bias_u`,
        declared `[head_dim, heads]`, read as `[1, 1, heads, head_dim]`): it is learned in
        the layout the code reads, so its declared axes name nothing a reshape could mix.
        A parameter read another way too (a weight also used in a matmul) keeps its axes."""
        name = nodes.strip_parens(x_node)
        if not isinstance(name, nodes.Name) or not any(
                isinstance(s, nodes.TensorDecl) and s.kind == "param" and s.name.name == name.name
                for s in self.program.statements):
            return False
        uses = 0
        shapes: set[str] = set()
        for statement in self.program.statements:
            if isinstance(statement, nodes.TensorDecl):
                continue
            uses += sum(1 for used in nodes.names_in(statement) if used == name.name)
            stack: list[nodes.Expr] = [getattr(statement, "value", None)] \
                if getattr(statement, "value", None) is not None else []
            while stack:
                current = stack.pop()
                if isinstance(current, nodes.Call) and current.func.name == "reshape" and \
                        len(current.args) == 2 and isinstance(
                            nodes.strip_parens(current.args[0]), nodes.Name) and \
                        nodes.strip_parens(current.args[0]).name == name.name:
                    shapes.add(self._text(current.args[1]))
                    uses -= 1
                stack.extend(nodes.children(current))
        return uses == 0 and len(shapes) == 1

    def _padded_by_one(self, x_node: nodes.Expr, depth: int) -> bool:
        """Whether ``x_node`` is a concat with a part one wide along its axis (the pad), or
        (``depth`` > 1) rows cut from a reshape of one."""
        value = self._defined(nodes.strip_parens(x_node))
        if isinstance(value, nodes.Call) and value.func.name == "concat" and value.args and \
                isinstance(value.args[0], nodes.ListExpr):
            axis = _literal(next((k.value for k in value.keywords if k.name.name == "axis"),
                                 None))
            if axis is None:
                return False
            for part in value.args[0].items:
                shape = getattr(self.types.get(id(part)), "shape", None)
                if shape is not None and -len(shape) <= axis < len(shape) and \
                        symbolic.is_literal_one(shape[axis]):
                    return True
            return False
        if depth > 1 and isinstance(value, nodes.Subscript):
            inner = self._defined(nodes.strip_parens(value.operand))
            if isinstance(inner, nodes.Call) and inner.func.name == "reshape" and inner.args:
                return self._padded_by_one(inner.args[0], depth - 1)
        return False

    def _defined(self, expr: nodes.Expr) -> nodes.Expr:
        """A name's value as its statement wrote it; any other expression itself."""
        if not isinstance(expr, nodes.Name):
            return expr
        for statement in self.program.statements:
            if isinstance(statement, nodes.Define) and statement.value is not None \
                    and statement.name.name == expr.name:
                return nodes.strip_parens(statement.value)
        return expr

    def _report_mixing(self, node: nodes.Call, x_node: nodes.Expr, size: Dim) -> None:
        x_value = self.types[id(x_node)]
        result = self.types[id(node)]
        self._report(codes.RESHAPE_MIXES.diag(
            node.span, source=x_value.text(), target=result.text(), size=to_text(size),
            notes=self._origin_notes(x_node) + self._definition_note(x_node),
            help=[codes.help_text("move_axes_first")]))

    def _definition_note(self, x_node: nodes.Expr) -> list[Note]:
        """Where a named operand got the layout the reshape would have to move (BERT's
        `context = transpose(probs @ v, ...)` on the line before the merge): where the
        missing or wrong transpose goes."""
        name = nodes.strip_parens(x_node)
        if not isinstance(name, nodes.Name):
            return []
        value = self.types.get(id(name))
        for statement in self.program.statements:
            if isinstance(statement, (nodes.Define, nodes.Output)) and statement.value is not None \
                    and statement.name.name == name.name and value is not None:
                return [codes.note("defined", statement.span, name=name.name, shape=value.text())]
        return []

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


def _literal(expr: nodes.Expr | None) -> int | None:
    """An axis written as a number (`axis=1`, `axis=-1`), else None."""
    if isinstance(expr, nodes.Unary) and expr.op == "-" and isinstance(expr.operand, nodes.Integer):
        return -expr.operand.value
    return expr.value if isinstance(expr, nodes.Integer) else None
