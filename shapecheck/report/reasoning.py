"""The reasoning, in words: one step per operation, the way the notes teach it.

For each `@`, the notes' 30-second self-check: the two operand shapes, the inner
dimensions that must agree and how that was proved, the result, and the index form of the
contraction. For each softmax, the axis and what sums to 1; for each reshape, the element
counts and what their equality needed; and so on. Every proof that relied on a constraint
is recorded in the :class:`Spec`, so the constraints table can say where it was used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..records import Record
from ..syntax import nodes
from ..check.program import Value
from ..symbolic import Dim, Proof, as_int, is_literal_one, pretty, product, to_text
from ..check.builtins import axis_index
from ..syntax.nodes import strip_parens
from .context import Spec, einsum_terms, merge, postorder
from .templates import Rich, code, join, listing, mark, math, plain, rich, shape, text


class ReasoningLine(Record, frozen=True):
    line: int
    ok: bool | None
    text: Rich
    index_form: Rich = ()


class StatementReasoning(Record, frozen=True):
    line: int
    source: str
    steps: tuple[ReasoningLine, ...]


def reasoning(spec: Spec, softmax_axes: Mapping[int, Any] | None = None) -> list[StatementReasoning]:
    """One entry per statement with something to reason about. ``softmax_axes`` holds, by
    softmax node, the card's axes check (whether the weights are summed over the axis the
    softmax normalises): the softmax's step says it."""
    out = []
    axes = dict(softmax_axes or {})
    for statement in spec.program.statements:
        steps = _statement_steps(spec, statement, axes)
        if steps:
            out.append(StatementReasoning(statement.span.line, spec.text(statement), tuple(steps)))
    return out


def _statement_steps(spec: Spec, statement: nodes.Stmt, axes: dict[int, Any]) -> list[ReasoningLine]:
    steps: list[ReasoningLine] = []
    value = getattr(statement, "value", None)
    if isinstance(statement, (nodes.Define, nodes.Output)) and value is not None:
        for node in postorder(value):
            if id(node) not in spec.program.types:
                continue  # not a value: a shape or a dim expression in an argument
            rule = _RULES.get(_kind(spec, node))
            step = rule(spec, node, statement) if rule is not None else None
            if step is not None and id(node) in axes and axes[id(node)].ok is not None:
                check = axes[id(node)]
                step = ReasoningLine(step.line, step.ok and check.ok, join(list(step.text), "; ", check.text),
                            step.index_form)
            if step is not None:
                steps.append(step)
    annotation = _annotation(spec, statement)
    if annotation is not None:
        steps.append(annotation)
    return steps


def _kind(spec: Spec, node: nodes.Expr) -> str:
    if isinstance(node, nodes.BinOp):
        return "matmul" if node.op == "@" else "broadcast"
    if isinstance(node, nodes.Call):
        info = spec.program.calls.get(id(node))
        return info.builtin if info is not None else ""
    return ""


# --- naming things in formulas -------------------------------------------------------------


def _target(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> tuple[str, str]:
    """How the result of ``node`` is named in its index form, and a scalar factor after it."""
    value = strip_parens(statement.value) if statement.value is not None else None
    if value is node:
        return statement.name.name, ""
    if isinstance(value, nodes.BinOp) and value.op in "*/" and strip_parens(value.left) is node \
            and spec.value(value.right).rank == 0:
        return statement.name.name, f" {value.op} {spec.text(value.right)}"
    return f"({spec.text(node)})", ""


def index_letters(dims: tuple[Dim, ...], taken: set[str]) -> list[str]:
    """Index letters for batch axes: the first letter of a dim's name when free (h for H)."""
    letters = []
    for dim in dims:
        name = to_text(dim)
        candidate = name[0].lower() if name.isidentifier() else ""
        if not candidate or candidate in taken:
            candidate = next(c for c in "abcdefghlmnopqrstuvwxyz" if c not in taken)
        taken.add(candidate)
        letters.append(candidate)
    return letters


def _aligned(batch: list[str], operand: tuple[Dim, ...], result: tuple[Dim, ...]) -> list[str]:
    """The result's batch letters for an operand's batch axes (aligned right; a broadcast 1 is 0)."""
    offset = len(result) - len(operand)
    return [
        "0" if is_literal_one(dim) and not is_literal_one(result[offset + i]) else batch[offset + i]
        for i, dim in enumerate(operand)
    ]


def _indexed(spec: Spec, node: nodes.Expr, indices: list[str]) -> str:
    """``K[h,j,k]`` for ``K.T`` indexed by [h,k,j]: read through a transpose."""
    node = strip_parens(node)
    if isinstance(node, nodes.Transpose) and len(indices) >= 2:
        indices = indices[:-2] + [indices[-1], indices[-2]]
        return f"{spec.operand(node.operand)}[{','.join(indices)}]"
    return f"{spec.operand(node)}[{','.join(indices)}]"


def _tensor_letters(value: Value) -> list[str]:
    assert value.shape is not None
    last = ["i", "j"][-min(2, len(value.shape)):] if value.shape else []
    return index_letters(value.shape[: len(value.shape) - len(last)], {"i", "j", "k"}) + last


# --- the rules ---------------------------------------------------------------------------------


def _matmul(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    assert isinstance(node, nodes.BinOp)
    left, right, result = spec.value(node.left), spec.value(node.right), spec.value(node)
    if not (left.known and right.known):
        return None
    assert left.shape is not None and right.shape is not None
    fields = dict(left=code(spec.text(node.left)), lshape=shape(left.text()),
                  right=code(spec.text(node.right)), rshape=shape(right.text()))
    if not left.shape or not right.shape:
        return ReasoningLine(node.span.line, False, rich("step_failed", what=code(spec.text(node)),
                                                mark=mark(False), problem=spec.problem_ref(node.span)))
    inner_left = left.shape[-1]
    inner_right = right.shape[-2] if len(right.shape) > 1 else right.shape[-1]
    inner = spec.equal(inner_left, inner_right)
    fields.update(inner_left=math(to_text(inner_left)), inner_right=math(to_text(inner_right)))
    if not result.known:
        return ReasoningLine(node.span.line, False, rich("step_matmul_failed", **fields, mark=mark(False),
                                                problem=spec.problem_ref(node.span)))
    assert result.shape is not None
    spec.record(inner, node.span.line, "@")
    how = spec.how(inner)
    line = rich("step_matmul", **fields, mark=mark(True), how=join(list(how), " " if how else ""),
                result=shape(result.text()))
    lbatch, rbatch = left.shape[:-2], right.shape[:-2]
    batch = result.shape[: len(result.shape) - (len(left.shape) > 1) - (len(right.shape) > 1)]
    if lbatch or rbatch:
        proof = merge(_broadcast_proofs(spec, [lbatch, rbatch]))
        spec.record(proof, node.span.line, "@")
        line = join(list(line), rich("step_matmul_batch", lbatch=shape(Value(lbatch).text()),
                                     rbatch=shape(Value(rbatch).text()),
                                     batch=shape(Value(batch).text()), mark=mark(True),
                                     how=spec.how(proof)))
    return ReasoningLine(node.span.line, True, line, _matmul_index_form(spec, node, statement, batch))


def _matmul_index_form(spec: Spec, node: nodes.BinOp, statement: nodes.Define | nodes.Output,
                       batch: tuple[Dim, ...]) -> Rich:
    left, right = spec.value(node.left), spec.value(node.right)
    assert left.shape is not None and right.shape is not None
    letters = index_letters(batch, {"i", "j", "k"})
    rows = ["i"] if len(left.shape) > 1 else []
    cols = ["j"] if len(right.shape) > 1 else []
    left_idx = _aligned(letters, left.shape[:-2], batch) + rows + ["k"]
    right_idx = _aligned(letters, right.shape[:-2], batch) + ["k"] + cols
    name, factor = _target(spec, node, statement)
    result_idx = letters + rows + cols
    lhs = f"{name}[{','.join(result_idx)}]" if result_idx else name
    total = f"Σ_k {_indexed(spec, node.left, left_idx)}·{_indexed(spec, node.right, right_idx)}"
    formula = f"{lhs} = ({total}){factor}" if factor else f"{lhs} = {total}"
    return rich("index_form", formula=math(formula))


def _broadcast_proofs(spec: Spec, shapes: list[tuple[Dim, ...]]) -> list[Proof]:
    """Proofs that the non-1 sizes on each (right-aligned) axis agree."""
    rank = max((len(s) for s in shapes), default=0)  # all scalars: nothing to prove
    proofs = []
    for axis in range(1, rank + 1):
        sizes = [s[-axis] for s in shapes if len(s) >= axis and not is_literal_one(s[-axis])]
        proofs.extend(spec.equal(sizes[0], other) for other in sizes[1:])
    return proofs


def _softmax(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    info = spec.program.calls[id(node)]
    source = spec.value(info.args["x"])
    if source.shape is None or not source.shape:
        return None
    axis = info.args["axis"]
    index = axis_index(axis, len(source.shape))
    letters = _tensor_letters(source)
    name, _ = _target(spec, node, statement)
    others = [letter for i, letter in enumerate(letters) if i != index]
    key = "step_softmax_sums" if others else "step_softmax_sums_all"
    sums = rich(key, index=letters[index], name=name, indices=",".join(letters),
                others=", ".join(others))
    return ReasoningLine(node.span.line, True, rich(
        "step_softmax", x=code(spec.text(info.args["x"])), axis=axis_words(axis),
        shape=shape(source.text()), size=math(to_text(source.shape[index])), sums=(math(plain(sums)),)))


def axis_words(axis: int | str) -> str:
    if axis == "row":
        return text("axis_row")
    if axis == "col":
        return text("axis_col")
    return text("axis_int", axis=axis)


def _reshape(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    info = spec.program.calls[id(node)]
    source, result = spec.value(info.args["x"]), spec.value(node)
    if source.shape is None:
        return None
    target: tuple[Dim, ...] = info.args["shape"]
    fields = dict(x=code(spec.text(info.args["x"])), source=shape(source.text()),
                  target=shape(Value(target).text().replace("-1", "−1")))
    inferred = [i for i, d in enumerate(target) if as_int(d) == -1]
    count = product(source.shape)
    if inferred:
        known = product(d for d in target if as_int(d) != -1)
        proof = spec.divides(count, known)
        filled = result.shape[inferred[0]] if result.shape is not None else None
        fields.update(inferred=math(to_text(filled)) if filled is not None else "?",
                      numerator=math(pretty(count)), denominator=math(pretty(known)))
        key = "step_reshape_inferred"
    else:
        proof = spec.equal(count, product(target))
        fields.update(source_count=math(pretty(count)), target_count=math(pretty(product(target))))
        key = "step_reshape"
    return _checked(spec, node, key, fields, proof, result.known, "reshape")


def _checked(spec: Spec, node: nodes.Expr, key: str, fields: dict, proof: Proof, ok: bool,
             what: str) -> ReasoningLine:
    if ok and proof.verdict:
        spec.record(proof, node.span.line, what)
        return ReasoningLine(node.span.line, True, rich(key, **fields, mark=mark(True), how=spec.how(proof)))
    return ReasoningLine(node.span.line, False, rich(key, **fields, mark=mark(False),
                                            how=spec.problem_ref(node.span)))


def _split_heads(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    info = spec.program.calls[id(node)]
    source, result = spec.value(info.args["x"]), spec.value(node)
    if source.shape is None or len(source.shape) < 2:
        return None
    heads: Dim = info.args["heads"]
    last = source.shape[-1]
    per_head = result.shape[-1] if result.shape is not None else None
    fields = dict(x=code(spec.text(info.args["x"])), source=shape(source.text()),
                  result=shape(result.text()), last=math(to_text(last)), heads=math(to_text(heads)),
                  per_head=math(to_text(per_head)) if per_head is not None else "?")
    return _checked(spec, node, "step_split", fields, spec.divides(last, heads), result.known,
                    "split_heads")


def _merge_heads(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    info = spec.program.calls[id(node)]
    source, result = spec.value(info.args["x"]), spec.value(node)
    if source.shape is None or result.shape is None:
        return None
    return ReasoningLine(node.span.line, True, rich(
        "step_merge", x=code(spec.text(info.args["x"])), source=shape(source.text()),
        result=shape(result.text()), heads=math(to_text(source.shape[-3])),
        per_head=math(to_text(source.shape[-1])), width=math(to_text(result.shape[-1]))))


def _einsum(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    info = spec.program.calls[id(node)]
    items = info.args["operands"].items
    values = [spec.value(item) for item in items]
    found = einsum_terms(info.args["subscripts"], values)
    result = spec.value(node)
    if found is None or not result.known:
        return None
    terms, output = found
    checks: list[Rich] = []
    proofs: list[Proof] = []
    seen: dict[str, list[Dim]] = {}
    for pairs in terms:
        for letter, dim in pairs:
            seen.setdefault(letter, []).append(dim)
    for letter, sizes in seen.items():
        if len(sizes) < 2:
            continue
        proof = merge([spec.equal(sizes[0], other) for other in sizes[1:]])
        proofs.append(proof)
        checks.append(rich("step_einsum_letter", letter=code(letter),
                           sizes=math(" = ".join(to_text(s) for s in sizes)), mark=mark(True),
                           how=spec.how(proof)))
    spec.record(merge(proofs), node.span.line, "einsum")
    operands = listing([join([code(spec.text(item)), ("text", " "), shape(v.text())]) for item, v in zip(items, values)])
    letters = rich("step_einsum_letters", checks=listing(checks, "; ")) if checks else ()
    line = rich("step_einsum", subscripts=code(f'"{info.args["subscripts"]}"'), operands=operands,
                result=shape(result.text()), letters=letters)
    name, factor = _target(spec, node, statement)
    summed = sorted({letter for pairs in terms for letter, _ in pairs} - set(output))
    factors = "·".join(
        f"{spec.operand(item)}[{','.join(letter for letter, _ in pairs)}]"
        for item, pairs in zip(items, terms))
    total = f"Σ_{''.join(summed)} {factors}" if summed else factors
    out_letters = output.replace("...", "…")
    lhs = f"{name}[{','.join(out_letters)}]" if out_letters else name
    formula = f"{lhs} = ({total}){factor}" if factor else f"{lhs} = {total}"
    return ReasoningLine(node.span.line, True, line, rich("index_form", formula=math(formula)))


def _where(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    info = spec.program.calls[id(node)]
    parts = [info.args["condition"], info.args["x"], info.args["y"]]
    values = [spec.value(p) for p in parts]
    result = spec.value(node)
    if any(v.shape is None for v in values):
        return None
    proof = merge(_broadcast_proofs(spec, [v.shape for v in values if v.shape]))  # type: ignore[misc]
    fields = dict(condition=code(spec.text(parts[0])), x=code(spec.text(parts[1])),
                  y=code(spec.text(parts[2])), cshape=shape(values[0].text()),
                  xshape=shape(values[1].text()), yshape=shape(values[2].text()),
                  result=shape(result.text()))
    return _checked(spec, node, "step_where", fields, proof, result.known, "where")


def _broadcast(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    assert isinstance(node, nodes.BinOp)
    left, right, result = spec.value(node.left), spec.value(node.right), spec.value(node)
    if left.shape is None or right.shape is None or not left.shape or not right.shape:
        return None  # a scalar operand broadcasts trivially
    proof = merge(_broadcast_proofs(spec, [left.shape, right.shape]))
    if left.text() == right.text() and proof.method in ("identical", "algebra") and result.known:
        return None  # same shapes: nothing to reason about
    fields = dict(left=code(spec.text(node.left)), lshape=shape(left.text()), op=code(node.op),
                  right=code(spec.text(node.right)), rshape=shape(right.text()),
                  result=shape(result.text()))
    return _checked(spec, node, "step_broadcast", fields, proof, result.known, node.op)


def _repeat(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    info = spec.program.calls[id(node)]
    source, result = spec.value(info.args["x"]), spec.value(node)
    if not (source.known and result.known):
        return None
    return ReasoningLine(node.span.line, True, rich(
        "step_repeat", x=code(spec.text(info.args["x"])), source=shape(source.text()),
        times=math(f"×{to_text(info.args['repeats'])}"), axis=str(info.args["axis"]),
        result=shape(result.text())))


def _transpose(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    info = spec.program.calls[id(node)]
    source, result = spec.value(info.args["x"]), spec.value(node)
    if not (source.known and result.known) or info.args.get("perm") is None:
        return None
    perm = "[" + ", ".join(str(p) for p in info.args["perm"]) + "]"
    return ReasoningLine(node.span.line, True, rich(
        "step_transpose", x=code(spec.text(info.args["x"])), source=shape(source.text()),
        perm=code(perm), result=shape(result.text())))


def _concat(spec: Spec, node: nodes.Expr, statement: nodes.Define | nodes.Output) -> ReasoningLine | None:
    info = spec.program.calls[id(node)]
    items = info.args["tensors"].items
    values = [spec.value(item) for item in items]
    result = spec.value(node)
    if not result.known or not all(v.known for v in values):
        return None
    parts = listing([join([code(spec.text(item)), ("text", " "), shape(v.text())]) for item, v in zip(items, values)])
    return ReasoningLine(node.span.line, True, rich("step_concat", axis=str(info.args["axis"]), parts=parts,
                                           result=shape(result.text())))


Rule = Callable[[Spec, nodes.Expr, "nodes.Define | nodes.Output"], "ReasoningLine | None"]

_RULES: dict[str, Rule] = {
    "matmul": _matmul, "broadcast": _broadcast, "softmax": _softmax, "reshape": _reshape,
    "split_heads": _split_heads, "merge_heads": _merge_heads, "einsum": _einsum,
    "where": _where, "repeat": _repeat, "transpose": _transpose, "concat": _concat,
}


# --- annotations ---------------------------------------------------------------------------------


def _annotation(spec: Spec, statement: nodes.Stmt) -> ReasoningLine | None:
    if isinstance(statement, nodes.Define) and statement.annotation is not None:
        declared_node, actual, what = statement.annotation, spec.value(statement.value), "what_annotation"
    elif isinstance(statement, nodes.Output) and statement.annotation is not None:
        declared_node, what = statement.annotation, "what_output"
        actual = spec.value(statement.value) if statement.value is not None \
            else spec.shape_of(statement.name.name)
    elif isinstance(statement, nodes.Assert):
        declared_node, actual, what = statement.shape, spec.shape_of(statement.name.name), "what_assert"
    else:
        return None
    declared = spec.shape_dims(declared_node)
    if declared is None or actual.shape is None:
        return None
    fields = dict(what=text(what), name=code(statement.name.name),
                  declared=shape(spec.text(declared_node)), actual=shape(actual.text()))
    problems = [d for d in spec.problems_in(declared_node.span) if d.is_error]
    proofs = [spec.equal(a, b) for a, b in zip(actual.shape, declared)]
    proof = merge(proofs)
    if problems or len(actual.shape) != len(declared) or not proof.verdict:
        return ReasoningLine(statement.span.line, False, rich(
            "step_annotation_failed", **fields, mark=mark(False),
            problem=spec.problem_ref(declared_node.span) or spec.problem_ref(statement.span)))
    spec.record(proof, statement.span.line, text(what))
    return ReasoningLine(statement.span.line, True, rich("step_annotation", **fields, mark=mark(True),
                                                how=spec.how(proof)))
