"""The notes' cheat card, filled in for each attention pattern of a spec.

A pattern is ``softmax(scores) @ values`` (or the same with ``einsum``): an `@` whose left
operand is, after following names back through their definitions (and through dropout),
a softmax; whose argument is, through scaling by a scalar, additive masks and ``where``,
the scores ``Q @ K.T`` (or a two-operand einsum). That gives the query, the key (index) and
the value (content) of the notes' database analogy.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import nodes
from ..program import Value
from ..symbolic import Dim, free_names, pretty, product, to_text
from ..builtins import axis_index
from ..nodes import strip_parens
from .context import Spec, einsum_terms, postorder
from .cost import operation_cost
from .reasoning import axis_words, index_letters
from .templates import Rich, code, join, mark, math, rich, shape, text

_MAX_DEPTH = 64


@dataclass(frozen=True)
class Pattern:
    statement: nodes.Define | nodes.Output  # where the output operation is
    output: nodes.Expr  # `P @ V` or einsum(P, V)
    weights: nodes.Expr  # the left operand as written
    softmax: nodes.Call
    scores: nodes.Expr  # `Q @ K.T` or einsum(Q, K)
    query: nodes.Expr
    key: nodes.Expr
    key_given_transposed: bool
    value: nodes.Expr


@dataclass(frozen=True)
class Axes:
    queries: Dim
    keys: Dim
    d: Dim
    dv: Dim
    batch: tuple[Dim, ...]
    keys_axis: int | None  # the axis of the weights that the output sums over


@dataclass(frozen=True)
class CardRow:
    role: str
    tensor: Rich
    shape: str
    concrete: str | None
    meaning: Rich


@dataclass(frozen=True)
class Card:
    number: int
    line: int
    title: Rich
    summary: Rich
    rows: tuple[CardRow, ...]
    identity: Rich  # the multi-head identity and its status, or empty
    identity_ok: bool | None
    core_flops: str | None
    core_value: int | None
    sequence: tuple[str, ...]  # the dims that count queries and keys (N, L)


# --- finding patterns ---------------------------------------------------------------------------


def find_patterns(spec: Spec) -> list[Pattern]:
    patterns = []
    for statement in spec.program.statements:
        if not isinstance(statement, (nodes.Define, nodes.Output)) or statement.value is None:
            continue
        for node in postorder(statement.value):
            operands = _two_operands(spec, node)
            if operands is None:
                continue
            softmax = _trace_softmax(spec, operands[0], 0)
            scores = None if softmax is None else \
                _trace_scores(spec, spec.program.calls[id(softmax)].args["x"], 0)
            if softmax is None or scores is None:
                continue
            query, key, given_transposed = _query_key(spec, scores)
            patterns.append(Pattern(statement, node, operands[0], softmax, scores, query, key,
                                    given_transposed, operands[1]))
    return patterns


def _two_operands(spec: Spec, node: nodes.Expr) -> tuple[nodes.Expr, nodes.Expr] | None:
    if isinstance(node, nodes.BinOp) and node.op == "@":
        return node.left, node.right
    info = spec.program.calls.get(id(node)) if isinstance(node, nodes.Call) else None
    if info is not None and info.builtin == "einsum" and len(info.args["operands"].items) == 2:
        first, second = info.args["operands"].items
        return first, second
    return None


def _trace_softmax(spec: Spec, node: nodes.Expr, depth: int) -> nodes.Call | None:
    node = spec.definition(node)
    info = spec.program.calls.get(id(node)) if isinstance(node, nodes.Call) else None
    if info is None or depth > _MAX_DEPTH:
        return None
    if info.builtin == "softmax":
        assert isinstance(node, nodes.Call)
        return node
    if info.builtin == "dropout":
        return _trace_softmax(spec, info.args["x"], depth + 1)
    return None


def _trace_scores(spec: Spec, node: nodes.Expr, depth: int) -> nodes.Expr | None:
    node = spec.definition(node)
    if depth > _MAX_DEPTH:
        return None
    if isinstance(node, nodes.BinOp):
        if node.op == "@":
            return node
        if node.op in "*/" and spec.value(node.right).rank == 0:
            return _trace_scores(spec, node.left, depth + 1)
        if node.op == "*" and spec.value(node.left).rank == 0:
            return _trace_scores(spec, node.right, depth + 1)
        if node.op in "+-":  # an additive mask or bias
            return _trace_scores(spec, node.left, depth + 1) or _trace_scores(spec, node.right, depth + 1)
        return None
    if isinstance(node, nodes.Unary):
        return _trace_scores(spec, node.operand, depth + 1)
    info = spec.program.calls.get(id(node)) if isinstance(node, nodes.Call) else None
    if info is None:
        return None
    if info.builtin == "where":
        return _trace_scores(spec, info.args["x"], depth + 1) or _trace_scores(spec, info.args["y"], depth + 1)
    if info.builtin == "dropout":
        return _trace_scores(spec, info.args["x"], depth + 1)
    return node if _two_operands(spec, node) is not None else None


def _query_key(spec: Spec, scores: nodes.Expr) -> tuple[nodes.Expr, nodes.Expr, bool]:
    """(query, key, whether the key is given already transposed: `Q @ KT`)."""
    operands = _two_operands(spec, scores)
    assert operands is not None
    query, right = operands
    if not isinstance(scores, nodes.BinOp):
        return query, right, False  # einsum: both as they are
    for candidate in (strip_parens(right), spec.definition(right)):
        if isinstance(candidate, nodes.Transpose):
            return query, candidate.operand, False
        info = spec.program.calls.get(id(candidate)) if isinstance(candidate, nodes.Call) else None
        if info is not None and info.builtin == "transpose" and info.args.get("perm") is None:
            return query, info.args["x"], False
    return query, right, True


# --- the card ------------------------------------------------------------------------------------


def cards(spec: Spec, patterns: list[Pattern]) -> list[Card]:
    out = []
    for number, pattern in enumerate(patterns, start=1):
        card = _card(spec, pattern, number)
        if card is not None:
            out.append(card)
    return out


def _axes(spec: Spec, p: Pattern) -> Axes | None:
    q, k, v, s = (spec.value(n) for n in (p.query, p.key, p.value, p.scores))
    if not all(x.shape for x in (q, k, v, s)) or min(x.rank for x in (q, k, v, s)) < 2:
        return None
    assert q.shape and k.shape and v.shape and s.shape
    if isinstance(p.scores, nodes.BinOp):
        keys = k.shape[-1] if p.key_given_transposed else k.shape[-2]
        keys_axis = -1 if isinstance(p.output, nodes.BinOp) else None
        return Axes(q.shape[-2], keys, q.shape[-1], v.shape[-1], s.shape[:-2],
                    _keys_axis(spec, p, keys_axis))
    return _einsum_axes(spec, p, v)


def _einsum_axes(spec: Spec, p: Pattern, v: Value) -> Axes | None:
    info = spec.program.calls[id(p.scores)]
    found = einsum_terms(info.args["subscripts"], [spec.value(n) for n in info.args["operands"].items])
    if found is None:
        return None
    (q_term, k_term), out = found
    sizes = dict(q_term + k_term)
    q_letters, k_letters = {c for c, _ in q_term}, {c for c, _ in k_term}

    def size(letters: set[str]) -> Dim:
        return product(sizes[c] for c in sorted(letters))

    batch = tuple(sizes[c] for c in out if c in q_letters and c in k_letters)
    return Axes(size((q_letters & set(out)) - k_letters), size((k_letters & set(out)) - q_letters),
                size((q_letters & k_letters) - set(out)), v.shape[-1] if v.shape else sizes[out[-1]],
                batch, _keys_axis(spec, p, None))


def _keys_axis(spec: Spec, p: Pattern, default: int | None) -> int | None:
    """The axis of the weights that the output sums over (the keys), non-negative."""
    weights = spec.value(p.weights)
    if weights.shape is None:
        return None
    if isinstance(p.output, nodes.BinOp):
        return len(weights.shape) - 1
    info = spec.program.calls[id(p.output)]
    found = einsum_terms(info.args["subscripts"], [spec.value(n) for n in info.args["operands"].items])
    if found is None:
        return default
    (w_term, v_term), out = found
    summed = [i for i, (c, _) in enumerate(w_term) if c not in out and c in {x for x, _ in v_term}]
    head, _, _ = info.args["subscripts"].partition(",")
    if "..." in head or len(summed) != 1:
        return default
    return summed[0]


def _card(spec: Spec, p: Pattern, number: int) -> Card | None:
    axes = _axes(spec, p)
    if axes is None:
        return None
    values = {role: spec.value(node) for role, node in
              (("q", p.query), ("k", p.key), ("v", p.value), ("s", p.scores), ("w", p.weights),
               ("o", p.output))}
    softmax_axis = spec.program.calls[id(p.softmax)].args["axis"]
    source = spec.value(spec.program.calls[id(p.softmax)].args["x"])
    normalised = axis_index(softmax_axis, source.rank)
    on_keys = axes.keys_axis is None or normalised == axes.keys_axis
    f = dict(queries=math(to_text(axes.queries)), keys=math(to_text(axes.keys)),
             d=math(to_text(axes.d)), dv=math(to_text(axes.dv)))
    per = rich("mean_scores_per", heads=math(", ".join(index_letters(axes.batch, {"i", "j", "k"})))) \
        if axes.batch else ""
    key_text: Rich = (code(spec.text(p.key)),)
    if p.key_given_transposed:
        key_text = rich("keys_given_transposed", text=code(spec.text(p.key)))
    weights_meaning = rich("mean_weights", axis=axis_words(softmax_axis), sums=rich(
        "mean_weights_keys", **f) if on_keys else rich("mean_weights_wrong"))
    output_meaning = rich("mean_output", **f)
    result = spec.shape_of(p.statement.name.name)
    if strip_parens(p.statement.value) is not p.output and result.known:  # type: ignore[arg-type]
        output_meaning = join(list(output_meaning), rich(
            "mean_output_then", statement=code(spec.text(p.statement.value)),  # type: ignore[arg-type]
            name=code(p.statement.name.name), shape=shape(result.text())))
    rows = [
        _row(spec, "role_query", (code(spec.text(p.query)),), values["q"], rich("mean_query", **f)),
        _row(spec, "role_key", key_text, values["k"], rich("mean_key", **f)),
        _row(spec, "role_value", (code(spec.text(p.value)),), values["v"], rich("mean_value", **f)),
        _row(spec, "role_scores", _named(spec, p.scores), values["s"],
             rich("mean_scores", **f, per=per)),
        _row(spec, "role_weights", _named(spec, p.softmax), values["w"], weights_meaning),
        _row(spec, "role_output", _named(spec, p.output, p.statement), values["o"], output_meaning),
    ]
    identity, identity_ok, identity_math = _identity(spec, p, axes)
    flops = [operation_cost(spec, p.scores), operation_cost(spec, p.output)]
    core = None if any(c is None or c[1] is None for c in flops) else flops[0][1] + flops[1][1]  # type: ignore[index,operator]
    qkv = [values[r].text() for r in "qkv"]
    summary = rich(
        "card_line",
        qkv=shape(qkv[0]) if len(set(qkv)) == 1 else rich(
            "card_qkv_differ", q=shape(qkv[0]), k=shape(qkv[1]), v=shape(qkv[2])),
        scores=shape(values["s"].text()), weights=shape(values["w"].text()),
        axis=text("by_row") if softmax_axis == "row" else text("by_axis", axis=softmax_axis),
        output=shape(values["o"].text()),
        identity=join([math(identity_math)], " ", mark(bool(identity_ok))) if identity_math
        else text("none"))
    return Card(
        number, p.output.span.line,
        rich("card_title", number=str(number), statement=code(spec.text(p.statement)),
             line=str(p.statement.span.line)),
        summary, tuple(rows), identity, identity_ok,
        pretty(core) if core is not None else None,
        spec.evaluate(core) if core is not None else None,
        tuple(sorted(free_names(axes.queries) | free_names(axes.keys))))


def _row(spec: Spec, role: str, tensor: Rich, value: Value, meaning: Rich) -> CardRow:
    return CardRow(text(role), tensor, value.text(), spec.concrete(value), meaning)


def _named(spec: Spec, node: nodes.Expr, statement: nodes.Stmt | None = None) -> Rich:
    """The operation's text, and the tensor that holds it when it has a name (`S`)."""
    holder = statement or _holder(spec, node)
    written = code(spec.text(node))
    if holder is None:
        return (written,)
    name = holder.name.name  # type: ignore[union-attr]
    if strip_parens(holder.value) is node:  # type: ignore[union-attr]
        return (code(name),)
    return (code(name), ("text", " ← "), written)


def _holder(spec: Spec, node: nodes.Expr) -> nodes.Define | nodes.Output | None:
    for statement in spec.definitions.values():
        if statement.value is not None and any(n is node for n in postorder(statement.value)):
            return statement
    return None


# --- the multi-head identity ---------------------------------------------------------------------


def _identity(spec: Spec, p: Pattern, axes: Axes) -> tuple[Rich, bool | None, str]:
    """`D_model = H·d` for this block: (the sentence, whether it holds, the formula)."""
    source = _projection_source(spec, p.query, 0)
    query = spec.value(p.query)
    if source is None or source.shape is None or query.shape is None:
        return rich("identity_other", status=text("identity_none")), None, ""
    width = source.shape[-1]
    remaining = list(query.shape)
    for dim in [axes.queries, axes.d, *source.shape[:-2]]:
        match = next((i for i, r in enumerate(remaining) if spec.program.dims.equal(r, dim)), None)
        if match is not None:
            remaining.pop(match)
    if not remaining:
        return rich("identity_other", status=text("identity_single")), None, ""
    per_token = product(remaining) * axes.d
    formula = f"{to_text(width)} = {pretty(per_token)}"
    proof = spec.equal(width, per_token)
    left, right = spec.evaluate(width), spec.evaluate(per_token)
    if proof.verdict:
        if proof.method == "identical":
            status = rich("identity_identical", value=math(to_text(width)))
        elif proof.method == "bindings" and not proof.constraints:
            status = rich("identity_bindings", left=str(left), right=str(right))
        else:
            status = rich("identity_proved", how=spec.how(proof))
    elif left is not None and right is not None:
        status = rich("identity_violated", left=str(left), right=str(right))
    else:
        status = rich("identity_unproved")
    return (rich("identity_lead", identity=math(formula), status=join(list(status), " ", mark(bool(proof.verdict)))),
            bool(proof.verdict), formula)


def _projection_source(spec: Spec, node: nodes.Expr, depth: int) -> Value | None:
    """The tensor that the query was projected from (X in `split_heads(X @ W_Q, H)`)."""
    node = spec.definition(node)
    if depth > _MAX_DEPTH:
        return None
    if isinstance(node, nodes.BinOp):
        if node.op == "@":
            return spec.value(node.left)
        if node.op in "*/":
            tensor_side = node.left if spec.value(node.right).rank == 0 else node.right
            return _projection_source(spec, tensor_side, depth + 1)
        return None
    info = spec.program.calls.get(id(node)) if isinstance(node, nodes.Call) else None
    if info is not None and info.builtin in ("split_heads", "reshape", "transpose", "repeat", "dropout"):
        return _projection_source(spec, info.args["x"], depth + 1)
    if info is not None and info.builtin == "einsum" and len(info.args["operands"].items) == 2:
        return spec.value(info.args["operands"].items[0])
    return None
