"""A mask written as tensors (`(j <= i) & (i - j < W)` with `i = arange(N)[:, None]`), read
as a function of the query and key positions, so that the mask model can prove of it what it
proves of a `def`: each position tensor (`arange` along an axis) becomes `q` or `k` by the
role of its axis in the attention (the meaning pass's axis identities)."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from ..check.program import Program
from ..syntax import nodes
from .polarity import tested

QUERY, KEY = "q", "k"
# `causal_mask(n, n_k, window)` as the function it is (docs/language.md §10.1).
_CAUSAL = "({k} <= {q} + ({nk}) - ({n}))"
_WINDOW = " & ({q} + ({nk}) - ({n}) - {k} < ({w}))"


class NotLifted(Exception):
    """A part the lift does not read: the mask stays out of the model."""


def lift(program: Program, condition: nodes.Expr, roles: tuple[str | None, ...]
         ) -> nodes.Expr | None:
    """``condition`` (of the attention's mask) as a body over `q` and `k`, or None."""
    meaning = program.meaning
    axes = meaning.axes(condition) if meaning is not None else None
    if axes is None or "query" not in roles or "key" not in roles:
        return None
    by_axis = {id(axis): {"query": QUERY, "key": KEY}.get(role or "")
               for axis, role in zip(axes, roles)}
    return lift_along(program, condition, by_axis)


def lift_along(program: Program, node: nodes.Expr, by_axis: dict[int, str | None]
               ) -> nodes.Expr | None:
    """``node`` as a body over `q` and `k`, its positions found by ``by_axis`` (the id of an
    axis -> `q`, `k` or None), or None when a part is not read."""
    definitions = {s.name.name: s.value for s in program.statements
                   if isinstance(s, nodes.Define)}
    try:
        return _Lift(program, by_axis, definitions).expr(node, 0)
    except NotLifted:
        return None


class _Lift:
    def __init__(self, program: Program, by_axis: dict[int, str | None],
                 definitions: dict[str, nodes.Expr]) -> None:
        self.program, self.by_axis, self.definitions = program, by_axis, definitions

    def expr(self, node: nodes.Expr, depth: int) -> nodes.Expr:
        if depth > 64:
            raise NotLifted
        position = self._position(node)
        if position is not None:
            return nodes.Name(position, node.span)
        bare = nodes.strip_parens(node)
        if isinstance(bare, nodes.Name):
            if bare.name in self.definitions:
                return self.expr(self.definitions[bare.name], depth + 1)
            if bare.name in self.program.tensors:
                raise NotLifted  # an input or param table: not a function of positions here
            return bare  # a dim
        if isinstance(bare, (nodes.Integer, nodes.Decimal, nodes.Boolean)):
            return bare
        if isinstance(bare, nodes.Subscript) and all(
                isinstance(i, (nodes.NewAxis, nodes.Slice, nodes.EllipsisIndex))
                and (not isinstance(i, nodes.Slice) or (i.start, i.stop, i.step) == (None,) * 3)
                for i in bare.indices):
            return self.expr(bare.operand, depth + 1)  # new axes and whole axes move nothing
        if isinstance(bare, nodes.Transpose):  # positions are found by their axes, not places
            return self.expr(bare.operand, depth + 1)
        if isinstance(bare, nodes.Call) and bare.func.name == "causal_mask":
            return self._causal_mask(bare)
        if isinstance(bare, nodes.Call) and bare.func.name in ("tril", "triu"):
            return self._triangle(bare, depth)
        if isinstance(bare, nodes.Call) and bare.func.name in ("ones", "ones_like"):
            return nodes.Boolean(True, bare.span)
        if isinstance(bare, nodes.BinOp) and bare.op in nodes.COMPARISONS:
            tested = self._tested(bare, depth)
            if tested is not None:
                return tested
        if isinstance(bare, (nodes.BinOp, nodes.Unary)):
            changes: dict[str, Any] = {}
            for f in fields(bare):
                value = getattr(bare, f.name)
                if f.name in ("left", "right", "operand"):
                    changes[f.name] = nodes.Paren(self.expr(value, depth + 1), value.span)
            return replace(bare, **changes)
        raise NotLifted

    def _position(self, node: nodes.Expr) -> str | None:
        """`q` or `k` when ``node`` is `arange(X)` (under new axes) along a query or key axis."""
        bare = nodes.strip_parens(node)
        while isinstance(bare, nodes.Name) and bare.name in self.definitions:
            bare = nodes.strip_parens(self.definitions[bare.name])
        inner = bare.operand if isinstance(bare, nodes.Subscript) else bare
        inner = nodes.strip_parens(inner)
        if not (isinstance(inner, nodes.Call) and inner.func.name == "arange"
                and len(inner.args) == 1 and not inner.keywords):
            return None
        axes = self.program.meaning.axes(inner)
        if not axes:
            return None
        role = self.by_axis.get(id(axes[0]))
        if role is None:
            raise NotLifted  # positions along another axis
        return role

    def _tested(self, node: nodes.BinOp, depth: int) -> nodes.Expr | None:
        """`m == 0`, `m > 0`, `m == 1` of a 0/1 (or bool) mask: `~m` or `m`; None when
        neither side is a number (a comparison of positions, lifted as it is)."""
        found = tested(node)
        if found is None or self.program.type_of(nodes.strip_parens(found[0])).element == "int":
            return None  # positions compared with a number (`i - j < 3`): a comparison
        side, at_one = found
        if at_one is None:
            raise NotLifted
        inner = nodes.Paren(self.expr(side, depth + 1), side.span)
        return inner if at_one else nodes.Unary("~", inner, node.span)

    def _triangle(self, call: nodes.Call, depth: int) -> nodes.Expr:
        """`tril(x, k=o)`: x where the column is at most the row + o; `triu` at least."""
        axes = self.program.meaning.axes(call)
        if not axes or len(axes) < 2 or not call.args:
            raise NotLifted
        rows, cols = self.by_axis.get(id(axes[-2])), self.by_axis.get(id(axes[-1]))
        if {rows, cols} != {QUERY, KEY}:
            raise NotLifted
        offsets = [k.value for k in call.keywords if k.name.name in ("k", "diagonal")]
        offsets += list(call.args[1:2])
        offset = f"({_text(self.program.source, offsets[0])})" if offsets else "0"
        op = "<=" if call.func.name == "tril" else ">="
        band = _parse(f"{cols} {op} {rows} + {offset}")
        inner = self.expr(call.args[0], depth + 1)
        return nodes.BinOp("&", nodes.Paren(inner, inner.span), nodes.Paren(band, band.span),
                           call.span, call.span)

    def _causal_mask(self, call: nodes.Call) -> nodes.Expr:
        axes = self.program.meaning.axes(call)
        roles = tuple(self.by_axis.get(id(a)) for a in axes or ())
        if roles not in ((QUERY, KEY), (KEY, QUERY)):
            raise NotLifted
        q, k = (QUERY, KEY) if roles == (QUERY, KEY) else (KEY, QUERY)  # a transposed table
        args = {p: a for p, a in zip(("n", "n_k", "window"), call.args)}
        args.update({k.name.name: k.value for k in call.keywords})
        if "n" not in args:
            raise NotLifted
        source = self.program.source
        text = {p: _text(source, a) for p, a in args.items()}
        body = _CAUSAL.format(q=q, k=k, n=text["n"], nk=text.get("n_k", text["n"]))
        if "window" in text:
            body += _WINDOW.format(q=q, k=k, n=text["n"], nk=text.get("n_k", text["n"]),
                                   w=text["window"])
        return _parse(body)


def _parse(text: str) -> nodes.Expr:
    from ..syntax.parser import parse

    statement = parse(f"__mask = {text}\n").statements[0]
    if not isinstance(statement, nodes.Define):
        raise NotLifted
    return statement.value


def _text(source: str, node: nodes.Expr) -> str:
    from ..messages.diagnostics import line_starts, span_text

    return span_text(source, line_starts(source), node.span)
