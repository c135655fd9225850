"""Functions of positions (`def causal(q, k) = k <= q`) as the checker reads them.

A call of a defined function is its body with the arguments put in place of the
parameters, so `where(causal(i, j), S, -inf)` is checked, given its meaning and run as if
the comparison were written there: the checker, the meaning pass and both backends need
nothing new. `flex_attention(Q, K, V, mask=f, score=g)` is PyTorch's FlexAttention written
the same way: the scores, `g` applied to them, then `f` as a `-inf` fill, then the softmax.

The definitions and the claims (`assert sw: causal`) leave the statements here; the mask
model (:mod:`shapecheck.masks`) reads them from :class:`Functions`.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any

from ..messages import codes
from ..messages.diagnostics import Diagnostic, Span
from . import nodes
from .nodes import Functions  # declared with the nodes: a spec without functions gets one

# FlexAttention's keywords and this language's short ones, as one role each.
_FLEX_KEYWORDS = {"mask": "mask", "mask_mod": "mask", "block_mask": "mask",
                  "score": "score", "score_mod": "score", "scale": "scale"}
# The position each parameter of a mask or score function reads, by the number of
# parameters (FlexAttention's `mask_mod(b, h, q_idx, kv_idx)`, `score_mod(score, b, h, q_idx,
# kv_idx)`, and the short forms of two positions): index expressions over the scores
# `[..., B, H, N_q, N_k]`, in the text of the language (`{q}`/`{k}` name Q and K).
_POSITIONS = {
    "q": "arange({q}.shape[-2])[:, None]",
    "k": "arange({k}.shape[-2])[None, :]",
    "h": "arange({q}.shape[-3])[:, None, None]",
    "b": "arange({q}.shape[-4])[:, None, None, None]",
}
_MASK_ROLES = {2: ("q", "k"), 4: ("b", "h", "q", "k")}
_SCALE = "__scale"  # where the `scale=` argument goes in the written-out attention
_SCORE_ROLES = {3: ("s", "q", "k"), 5: ("s", "b", "h", "q", "k")}


def mask_roles(count: int) -> tuple[str, ...] | None:
    """What each parameter of a mask function of ``count`` parameters is."""
    return _MASK_ROLES.get(count)


def score_roles(count: int) -> tuple[str, ...] | None:
    """What each parameter of a score function of ``count`` parameters is."""
    return _SCORE_ROLES.get(count)


def inline(statements: list[nodes.Stmt], source: str
           ) -> tuple[list[nodes.Stmt], Functions, list[Diagnostic]]:
    """The statements without definitions and claims, every call of a defined function
    replaced by its body; the functions; the mistakes (a wrong number of arguments).
    Unchanged (the same list, no walk) for a spec that defines no function and whose text
    never names `flex_attention` — every spec before this extension."""
    if not nodes.defines_functions(statements, source):
        return statements, Functions(), []
    inliner = _Inliner()
    kept: list[nodes.Stmt] = []
    for statement in statements:
        if isinstance(statement, (nodes.FunctionDef, nodes.Claim)):
            inliner.functions.mentions.update(nodes.names_in(statement))
        if isinstance(statement, nodes.FunctionDef):
            # A function may call the ones defined above it (never itself).
            called = [n for n in _walk(statement.body) if isinstance(n, nodes.Call)
                      and n.func.name in inliner.functions.definitions]
            inliner.functions.calls[statement.name.name] = {n.func.name for n in called}
            inliner.functions.moved[statement.name.name] = {
                n.func.name for n in called
                if not all(isinstance(nodes.strip_parens(a), nodes.Name) for a in n.args)}
            body = inliner.expr(statement.body)
            inliner.functions.definitions[statement.name.name] = replace(statement, body=body)
        elif isinstance(statement, nodes.Claim):
            inliner.functions.claims.append(statement)
        elif any(isinstance(n, nodes.Call) and (n.func.name in inliner.functions.definitions
                                                 or n.func.name == "flex_attention")
                 for n in _walk(statement)):
            inliner.in_statement = True
            kept.append(inliner.statement(statement))
            inliner.in_statement = False
        else:  # the same object: the editor's memo (passes/incremental) reuses its check
            kept.append(statement)
    return kept, inliner.functions, inliner.diagnostics


def _walk(node: object) -> Any:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, tuple) and not isinstance(current, Span):
            stack.extend(current)
        elif is_dataclass(current) and not isinstance(current, (type, Span)):
            yield current
            stack.extend(getattr(current, f.name) for f in fields(current))


class _Inliner:
    def __init__(self) -> None:
        self.functions = Functions()
        self.diagnostics: list[Diagnostic] = []
        self.in_statement = False  # inlining a statement's call, not a definition's

    def statement(self, statement: nodes.Stmt) -> nodes.Stmt:
        return self._rebuild(statement, {})

    def expr(self, node: nodes.Expr, bound: dict[str, nodes.Expr] | None = None) -> nodes.Expr:
        return self._rebuild(node, bound or {})

    def _rebuild(self, node: Any, bound: dict[str, nodes.Expr]) -> Any:
        """A copy of ``node`` (fresh objects: the checker's side tables key nodes by id, and
        each inlined copy has shapes of its own) with calls inlined and ``bound`` names
        replaced."""
        if isinstance(node, tuple) and not isinstance(node, Span):
            return tuple(self._rebuild(item, bound) for item in node)
        if isinstance(node, nodes.Name) and type(node) is nodes.Name and node.name in bound:
            return nodes.Paren(self._rebuild(bound[node.name], {}), node.span, node.depth + 1)
        if isinstance(node, nodes.Call):
            if node.func.name in self.functions.definitions:
                return self._call(node, bound)
            if node.func.name == "flex_attention" and "flex_attention" not in bound:
                return self._flex(node, bound)
        if not is_dataclass(node) or isinstance(node, (type, Span)):
            return node
        changes = {f.name: self._rebuild(getattr(node, f.name), bound) for f in fields(node)
                   if f.name != "span"}
        return replace(node, **changes)

    def _call(self, call: nodes.Call, bound: dict[str, nodes.Expr]) -> nodes.Expr:
        definition = self.functions.definitions[call.func.name]
        if call.keywords or len(call.args) != len(definition.params):
            self.diagnostics.append(codes.FUNCTION_ARGUMENTS.diag(
                call.span, name=call.func.name, count=len(definition.params),
                given=len(call.args) + len(call.keywords)))
            return replace(call, args=self._rebuild(call.args, bound),
                           keywords=self._rebuild(call.keywords, bound))
        if self.in_statement and not bound:
            self._table(call, definition)
        arguments = {p.name: self._rebuild(a, bound) for p, a in zip(definition.params, call.args)}
        return nodes.Paren(self._rebuild(definition.body, arguments), call.span,
                           definition.body.depth + 1)

    def _table(self, call: nodes.Call, definition: nodes.FunctionDef) -> None:
        """Record a mask function called at every position, each argument `arange(X)`
        under new axes (its length X), as a table of it."""
        roles = _MASK_ROLES.get(len(call.args))
        lengths: dict[str, nodes.Expr] = {}
        for role, argument in zip(roles or (), call.args):
            inner = nodes.strip_parens(argument)
            inner = nodes.strip_parens(inner.operand) if isinstance(inner, nodes.Subscript) \
                else inner
            if not (isinstance(inner, nodes.Call) and inner.func.name == "arange"
                    and len(inner.args) == 1 and not inner.keywords):
                return
            lengths[role] = inner.args[0]
        if roles is not None:
            self.functions.tables.append((definition.name.name, lengths, call.span))

    def _flex(self, call: nodes.Call, bound: dict[str, nodes.Expr]) -> nodes.Expr:
        """`flex_attention(Q, K, V, mask=f, score=g, scale=c)` as the attention it computes:
        `softmax(where(f(...), g(S, ...), -inf), axis=-1) @ V`, S = Q @ K.T times the scale
        (1/sqrt of Q's last size by default, as FlexAttention)."""
        roles = {_FLEX_KEYWORDS.get(k.name.name): k for k in call.keywords}
        names = [a for a in call.args[:3] if isinstance(a, nodes.Name)]
        functions = {role: roles[role].value for role in ("mask", "score") if role in roles}
        wrong = [value for value in functions.values()
                 if not (isinstance(value, nodes.Name) and value.name in self.functions.definitions)]
        if len(call.args) != 3 or len(names) != 3 or None in roles or wrong:
            self.diagnostics.append(codes.FLEX_ARGUMENTS.diag(call.span))
            return replace(call, args=self._rebuild(call.args, bound),
                           keywords=self._rebuild(call.keywords, bound))
        q, k, v = (n.name for n in names)
        scale = f"({_SCALE})" if "scale" in roles else f"(1 / sqrt({q}.shape[-1]))"
        scores = f"({q} @ {k}.T) * {scale}"
        mask_name = functions["mask"].name if "mask" in functions else None  # type: ignore[union-attr]
        score_name = functions["score"].name if "score" in functions else None  # type: ignore[union-attr]
        if score_name is not None:
            scores = self._apply_text(score_name, _SCORE_ROLES, q, k, scores)
        if mask_name is not None:
            scores = f"where({self._apply_text(mask_name, _MASK_ROLES, q, k)}, {scores}, -inf)"
        text = f"softmax({scores}, axis=-1) @ {v}"
        self.functions.applications.append((mask_name, score_name, q, k, call.span))
        parsed = _parse_expression(text, call.span)
        placeholders = {_SCALE: roles["scale"].value} if "scale" in roles else {}
        return self._rebuild(parsed, {**bound, **placeholders})

    def _apply_text(self, name: str, table: dict[int, tuple[str, ...]], q: str, k: str,
                    score: str | None = None) -> str:
        roles = table.get(len(self.functions.definitions[name].params))
        if roles is None:  # reported by the mask model, which names the arities
            roles = table[min(table)]
        arguments = [score if role == "s" else _POSITIONS[role].format(q=q, k=k)
                     for role in roles]
        return f"{name}({', '.join(arguments)})"


def _parse_expression(text: str, span: Span) -> nodes.Expr:
    """``text`` as an expression whose every node has ``span`` (the call it replaces)."""
    from .parser import parse

    parsed = parse(f"__flex = {text}\n")
    statement = parsed.statements[0]
    assert isinstance(statement, nodes.Define), text  # the text is ours, always a definition
    return _respan(statement.value, span)


def _respan(node: Any, span: Span) -> Any:
    if isinstance(node, tuple) and not isinstance(node, Span):
        return tuple(_respan(item, span) for item in node)
    if isinstance(node, Span):
        return span
    if not is_dataclass(node) or isinstance(node, type):
        return node
    return replace(node, **{f.name: _respan(getattr(node, f.name), span) for f in fields(node)})
