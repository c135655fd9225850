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
        if self._relative_shift(x_node, source, target) or self._learned_layout(x_node):
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

    def _relative_shift(self, x_node: nodes.Expr, source: Sequence[Axis],
                        target: Sequence[Dim]) -> bool:
        """Transformer-XL's relative shift (labml's `shift_right`, espnet's `rel_shift`):
        scores [i, j] padded by one column, viewed as [j + 1, i], a row dropped, viewed back
        as [i, j]; each row comes out shifted by its index. The swapped view is the point of
        it, not a transpose left out: it reads a value padded by one along the axis it moves,
        or a row cut of such a view, which no layout a transpose makes is."""
        equal = self.system.equal
        if len(source) != 2 or len(target) != 2 or not (
                equal(source[0].size, target[1]) and equal(source[1].size, target[0])):
            return False
        return self._padded_by_one(x_node, 2)

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
