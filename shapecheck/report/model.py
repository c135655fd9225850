"""The report as data: everything the HTML and Markdown renderers show, already worded.

:func:`build_report` reads a checked :class:`Program` once and produces a :class:`Report`
of plain strings and styled text (:mod:`.templates`). Nothing here depends on the output
format, and nothing depends on time or on the order of a hash: the same program gives
the same report.
"""

from __future__ import annotations

from collections import Counter

from .. import depth
from ..records import Record
from ..syntax import nodes
from .._version import __version__
from ..messages.diagnostics import Diagnostic, Severity, Span, shown
from ..formats.common import plural
from ..formats.source import printable_line
from ..formats.text import render_diagnostic
from ..check.program import Program, Value
from ..symbolic import Dim, DimSystem, TooComplex, free_names, product, to_text, total
from .cards import Card, cards, find_patterns
from .masks import MaskCard, mask_cards
from .context import ITEM_SIZES, Spec, inside, postorder
from .cost import result_bytes, statement_cost
from .reasoning import StatementReasoning, reasoning
from .templates import Rich, code, inline, join, listing, math, rich, text


class Problem(Record, frozen=True):
    severity: str
    code: str
    line: int
    column: int
    message: str
    frame: str  # exactly as `shapecheck verify` prints it (without colour)
    anchor: str = ""  # the frame's id in the page (`problem-1`)
    node: str | None = None  # the tensor whose statement it is in: its node in the picture
    card: int | None = None  # the card of the attention pattern it breaks


class Annotation(Record, frozen=True):
    label: str
    shape: str | None
    concrete: str | None
    status: str  # "ok", "error", "warning"
    note: str | None = None  # a word instead of a shape: "free", "failed"
    unbound: str | None = None  # with bindings: why there is no concrete shape ("d unbound")


class SourceLine(Record, frozen=True):
    number: int
    text: str
    annotations: tuple[Annotation, ...]
    problems: tuple[Problem, ...]


class DimRow(Record, frozen=True):
    name: str
    kind: str
    definition: Rich
    value: int | None
    line: int
    unbound: str | None = None  # with bindings, a dim with no value says so


class ConstraintRow(Record, frozen=True):
    text: str
    line: int
    ok: bool | None
    status: Rich
    uses: Rich


class CostRow(Record, frozen=True):
    line: int
    name: str
    flops: str | None
    flops_value: int | None
    bytes: str | None
    bytes_value: int | None
    ops: str
    blank: str | None = None  # why a value cell is empty: "failed", "d unbound"


class Cost(Record, frozen=True):
    rows: tuple[CostRow, ...]
    total: str | None
    total_value: int | None
    partial: bool
    largest: Rich


class GraphNode(Record, frozen=True):
    name: str
    kind: str  # "input", "param", "defined"
    shape: str
    concrete: str | None
    output: bool
    failed: bool  # its shape is unknown, or its statement has an error
    line: int
    anchor: str = ""  # its id in the page (`node-3`), for links from the problems
    problem: str | None = None  # the anchor of the first error in its statement


class GraphEdge(Record, frozen=True):
    source: str
    target: str
    label: str
    failed: bool = False  # it flows into a statement with an error


class Report(Record, frozen=True):
    title: str
    path: str
    ok: bool
    verdict: str
    errors: int
    warnings: int
    bindings: str | None
    dtype: str
    version: str
    lines: tuple[SourceLine, ...]
    problems: tuple[Problem, ...]
    dims: tuple[DimRow, ...]
    constraints: tuple[ConstraintRow, ...]
    identities: tuple[Rich, ...]
    cards: tuple[Card, ...]
    unfilled_cards: tuple[int, ...]  # lines of attention patterns whose shapes are unknown
    cost: Cost
    reasoning: tuple[StatementReasoning, ...]
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    masks: tuple[MaskCard, ...] = ()  # functions of positions, drawn (docs/language.md §10)


def build_report(program: Program, path: str, bindings: dict[str, int] | None = None,
                 dtype: str = "float64") -> Report:
    with depth.room():  # the report walks the tree as deep as the spec nests
        return _build_report(program, path, bindings, dtype)


def _build_report(program: Program, path: str, bindings: dict[str, int] | None,
                  dtype: str) -> Report:
    spec = Spec(program, path, dict(bindings or {}), dtype)
    patterns = find_patterns(spec)
    card_list = cards(spec, patterns)
    # The reasoning says plainly what each softmax normalises, in the cards' words; it also
    # records which constraint served as a proof where (for the constraints table).
    steps = reasoning(spec, {id(p.softmax): card.checks[2] for p, card in zip(patterns, card_list)
                             if p.attention is not None})
    filled = {card.line for card in card_list}
    nodes_by_name = _node_anchors(spec)
    problems = [_problem(spec, d, index, nodes_by_name, card_list)
                for index, d in enumerate(program.diagnostics, start=1)]
    errors = sum(1 for d in program.diagnostics if d.severity is Severity.ERROR)
    warnings = sum(1 for d in program.diagnostics if d.severity is Severity.WARNING)
    graph_nodes = _graph_nodes(spec, nodes_by_name, problems)
    return Report(
        title=text("title", path=printable_line(path)),
        path=printable_line(path),
        ok=program.ok,
        verdict=_verdict(errors, warnings),
        errors=errors,
        warnings=warnings,
        bindings=_bindings(spec),
        dtype=text("dtype", dtype=dtype, size=ITEM_SIZES[dtype]),
        version=__version__,
        lines=tuple(_source_lines(spec, problems)),
        problems=tuple(problems),
        dims=tuple(_dims(spec)),
        constraints=tuple(_constraints(spec)),
        identities=tuple(_identities(card_list)),
        cards=tuple(card_list),
        unfilled_cards=tuple(sorted({p.output.span.line for p in patterns} - filled)),
        cost=_cost(spec, card_list),
        reasoning=tuple(steps),
        nodes=tuple(graph_nodes),
        edges=tuple(_graph_edges(spec, {n.name for n in graph_nodes if n.failed})),
        masks=tuple(mask_cards(program, dict(bindings or {}))),
    )


def _verdict(errors: int, warnings: int) -> str:
    if errors:
        return text("verdict_errors", errors=plural(errors, "error"), warnings=plural(warnings, "warning"))
    if warnings:
        return text("verdict_ok_warnings", warnings=plural(warnings, "warning"))
    return text("verdict_ok")


def _bindings(spec: Spec) -> str | None:
    if not spec.bindings:
        return None
    declared = list(spec.program.dims.dims)
    order = sorted(spec.bindings, key=lambda n: (n not in declared, declared.index(n) if n in declared else 0, n))
    return text("bindings", bindings=", ".join(f"{n}={spec.bindings[n]}" for n in order))


def _problem(spec: Spec, diagnostic: Diagnostic, index: int, anchors: dict[str, str],
             card_list: list[Card]) -> Problem:
    frame = render_diagnostic(diagnostic, printable_line(spec.path), spec.lines)
    holder = _holder_of(spec, diagnostic.span)
    card = next((c.number for c in card_list if any(inside(diagnostic.span, span) for span in c.spans)),
                None)
    return Problem(diagnostic.severity.value, diagnostic.code, diagnostic.span.line,
                   diagnostic.span.column, printable_line(diagnostic.message), frame,
                   f"problem-{index}", anchors.get(holder) if holder is not None else None, card)


def _holder_of(spec: Spec, span: Span) -> str | None:
    """The tensor whose statement (or declaration) holds ``span``."""
    for name, tensor in spec.program.tensors.items():
        statement = spec.definitions.get(name)
        where = statement.span if statement is not None else tensor.span
        if inside(span, where):
            return name
    return None


# --- annotated source --------------------------------------------------------------------------


def _source_lines(spec: Spec, problems: list[Problem]) -> list[SourceLine]:
    source = spec.program.source.split("\n")
    if source and source[-1] == "":
        source.pop()
    count = max(len(source), 1)
    annotations: dict[int, list[Annotation]] = {}
    for statement in spec.program.statements:
        annotations.setdefault(statement.span.line, []).extend(_annotate(spec, statement))
    by_line: dict[int, list[Problem]] = {}
    for problem in problems:
        by_line.setdefault(min(max(problem.line, 1), count), []).append(problem)
    return [
        SourceLine(number, printable_line((source[number - 1] if number <= len(source) else "")
                                          .removesuffix("\r")),
                   tuple(annotations.get(number, ())), tuple(by_line.get(number, ())))
        for number in range(1, count + 1)
    ]


def _status(spec: Spec, statement: nodes.Stmt) -> str:
    found = spec.problems_in(statement.span)
    if any(d.is_error for d in found):
        return "error"
    return "warning" if found else "ok"


def _annotate(spec: Spec, statement: nodes.Stmt) -> list[Annotation]:
    status = _status(spec, statement)
    dims = spec.program.dims
    if isinstance(statement, nodes.DimFree):
        names = [i.name for i in statement.names]
        bound = [text("ann_dim_bound", name=printable_line(n), value=dims.value_of(n)) for n in names
                 if spec.bindings and dims.value_of(n) is not None]
        unbound = [printable_line(n) for n in names if spec.bindings and dims.value_of(n) is None]
        return [Annotation(printable_line(", ".join(names)), None, ", ".join(bound) or None, status,
                           text("ann_dim_free"),
                           text("unbound", names=", ".join(unbound)) if unbound else None)]
    if isinstance(statement, nodes.DimDef):
        info = dims.dims.get(statement.name.name)
        definition = f"= {to_text(info.definition)}" if info is not None and info.definition is not None else None
        value = dims.value_of(statement.name.name) if spec.bindings else None
        unbound_names = spec.unbound([info.definition]) if info is not None and info.definition is not None \
            and value is None else []
        return [Annotation(printable_line(shown(statement.name.name)), None, None if value is None else str(value),
                           status, definition,
                           text("unbound", names=", ".join(unbound_names)) if unbound_names else None)]
    if isinstance(statement, nodes.Constraint):
        return [Annotation(text("ann_constraint"), None, None, status)]
    if isinstance(statement, nodes.Broken):
        return [Annotation(text("ann_broken"), None, None, "error")]
    if isinstance(statement, nodes.Assert):
        value = spec.shape_of(statement.name.name)
        return [Annotation(f"{text('ann_assert')} {printable_line(shown(statement.name.name))}",
                           spec.text(statement.shape), spec.concrete(value), status,
                           unbound=_unbound_note(spec, value))]
    assert isinstance(statement, (nodes.TensorDecl, nodes.Define, nodes.Output))
    value = _statement_value(spec, statement)
    label = printable_line(shown(statement.name.name))
    if isinstance(statement, nodes.Output):
        label = f"{text('ann_output')} {label}"
    if not value.known:
        return [Annotation(label, None, None, status, text("ann_failed"))]
    return [Annotation(label, value.text(), spec.concrete(value), status,
                       unbound=_unbound_note(spec, value))]


def _unbound_note(spec: Spec, value: Value) -> str | None:
    """With bindings, why a known shape has no concrete form: the dims left unbound."""
    if value.shape is None or spec.concrete(value) is not None:
        return None
    names = spec.unbound(value.shape)
    return text("unbound", names=", ".join(names)) if names else None


def _statement_value(spec: Spec, statement: nodes.TensorDecl | nodes.Define | nodes.Output) -> Value:
    tensor = spec.program.tensors.get(statement.name.name)
    if tensor is not None and (tensor.span == statement.span or isinstance(statement, nodes.Output)
                               and statement.value is None):
        return tensor.value
    value = getattr(statement, "value", None)
    return spec.value(value) if value is not None else spec.shape_of(statement.name.name)


# --- dims and constraints ---------------------------------------------------------------------------


def _dims(spec: Spec) -> list[DimRow]:
    system = spec.program.dims
    eliminated = {use.eliminates: use for use in system.constraints if use.eliminates}
    found = spec.program.inferred
    inferred = {name for name, _ in found.dims} if found is not None else set()
    rows = []
    for name, info in system.dims.items():
        value = system.value_of(name)
        if info.kind == "derived":
            assert info.definition is not None
            definition = rich("dim_derived", name=code(name), definition=math(to_text(info.definition)))
        elif info.kind == "fixed":
            definition = rich("dim_fixed", name=code(name), value=math(str(value)))
        elif name in eliminated:
            use = eliminated[name]
            symbol = system.symbol_of(name)
            assert symbol is not None
            definition = rich("dim_eliminated", constraint=code(f"constraint {use.text}"),
                              line=str(use.span.line), name=code(name),
                              value=math(_canonical_text(system, symbol)))
        elif name in spec.bindings:
            definition = rich("dim_bound", binding=code(f"--dim {name}={spec.bindings[name]}"))
        elif name in inferred:
            definition = rich("dim_inferred")
        else:
            definition = rich("dim_free")
        # A free dim that a constraint determines is not free: it is determined (by that
        # constraint), and the kind says so.
        kind = "determined" if info.kind == "free" and name in eliminated else info.kind
        unbound = text("unbound_dim") if spec.bindings and value is None else None
        rows.append(DimRow(printable_line(name), text(f"kind_{kind}"), definition, value,
                           info.span.line, unbound))
    return rows


def _constraints(spec: Spec) -> list[ConstraintRow]:
    uses = {use.span: index for index, use in enumerate(spec.program.dims.constraints)}
    rows = []
    for statement in spec.program.statements:
        if not isinstance(statement, nodes.Constraint):
            continue
        index = uses.get(statement.span)
        ok, status = _constraint_status(spec, statement, index)
        used = spec.uses.get(index, []) if index is not None else []
        uses_text = listing([rich("used_at", line=str(u.line), what=(code(u.what),)) for u in used]) \
            if used else rich("never_used")
        rows.append(ConstraintRow(spec.text(statement).removeprefix("constraint").strip(),
                                  statement.span.line, ok, status, uses_text))
    return rows


def _constraint_status(spec: Spec, statement: nodes.Constraint, index: int | None) -> tuple[bool | None, Rich]:
    problems = spec.problems_in(statement.span)
    for problem in problems:
        if problem.code == "SC203":
            return False, rich("status_violated", message=inline(problem.message))
        if problem.code == "SC205":
            return True, rich("status_trivial")
    if index is None or any(p.is_error for p in problems):
        return False, rich("status_failed")
    left, right = spec.dims_of(statement.left), spec.dims_of(statement.right)
    values = [spec.evaluate(side) if side is not None else None for side in (left, right)]
    if values[0] is not None and values[1] is not None:
        if statement.op == "==":
            return True, rich("status_holds", left=math(str(values[0])), right=math(str(values[1])))
        return True, rich("status_holds_ineq")
    if statement.op != "==":
        return None, rich("status_bound")
    use = spec.program.dims.constraints[index]
    if use.eliminates:
        return None, rich("status_assumed", name=code(use.eliminates))
    return None, rich("status_relation")


def _identities(card_list: list[Card]) -> list[Rich]:
    seen: dict[str, Rich] = {}
    for card in card_list:
        if card.identity_ok is not None:
            seen.setdefault("".join(s[1] for s in card.identity), card.identity)
    return list(seen.values())


# --- cost ---------------------------------------------------------------------------------------------


_OPS_ORDER = ("matmul", "einsum", "softmax", "layernorm", "rmsnorm", "elementwise", "reduce", "move")


def _ops_text(ops: Counter[str]) -> str:
    parts = []
    for kind in _OPS_ORDER:
        count = ops.get(kind, 0)
        label = text(f"op_{kind}")
        if count == 1:
            parts.append(label)
        elif count > 1:
            parts.append(text("op_count", count=count, op=label))
    return ", ".join(parts)


def _cost(spec: Spec, card_list: list[Card]) -> Cost:
    rows: list[CostRow] = []
    flops: list[Dim] = []
    partial = False
    candidates: list[tuple[str, Value, Dim]] = []
    outputs = set(spec.program.outputs)
    for name, statement in spec.definitions.items():
        assert statement.value is not None
        value = spec.shape_of(name)
        cost = statement_cost(spec, statement.value)
        size = result_bytes(spec, value)
        if cost.flops is None:
            partial = True
        else:
            flops.append(cost.flops)
        if value.shape is not None and name not in outputs:  # an output is not an intermediate
            candidates.append((name, value, size))  # type: ignore[arg-type]
        rows.append(CostRow(
            statement.span.line, printable_line(shown(name)),
            spec.pretty(cost.flops) if cost.flops is not None else None,
            spec.evaluate(cost.flops) if cost.flops is not None else None,
            spec.pretty(size) if size is not None else None,
            spec.evaluate(size) if size is not None else None,
            _ops_text(cost.ops), _blank(spec, value, cost.flops)))
    total_flops = total(flops) if flops else None
    return Cost(tuple(rows), spec.pretty(total_flops) if total_flops is not None else None,
                spec.evaluate(total_flops) if total_flops is not None else None, partial,
                _largest(spec, candidates, card_list))


def _blank(spec: Spec, value: Value, flops: Dim | None) -> str | None:
    """Why the value cells of a cost row are empty at the bindings (None: they are not)."""
    if not spec.bindings:
        return None
    if flops is None or value.shape is None:
        return text("blank_failed")
    names = spec.unbound([flops, *value.shape])
    return text("unbound", names=", ".join(names)) if names else None


def _largest(spec: Spec, candidates: list[tuple[str, Value, Dim]], card_list: list[Card]) -> Rich:
    if not candidates:
        return rich("no_largest")
    sequence = frozenset(n for card in card_list for n in card.sequence)
    counts = [(name, value, size, _count(value)) for name, value, size in candidates]
    values = [spec.evaluate(count) for _, _, _, count in counts]
    if all(v is not None for v in values):
        ranked = max(range(len(counts)), key=lambda i: (values[i], -i))
    else:
        ranked = max(range(len(counts)), key=lambda i: (spec.growth(counts[i][3], sequence), -i))
    name, value, size, count = counts[ranked]
    at = ""
    if values[ranked] is not None and spec.evaluate(size) is not None:
        at = text("largest_at", value=f"{spec.evaluate(size):,}")
    sentence = rich("largest", name=code(name), shape=("shape", value.text()),
                    elements=math(spec.pretty(count)), bytes=math(spec.pretty(size)), at=at)
    growth = _growth(spec, value, card_list)
    return join(list(sentence), " ", growth) if growth else sentence


def _growth(spec: Spec, value: Value, card_list: list[Card]) -> Rich:
    """How the tensor grows with the sequence lengths, per axis (`N²`, `N·L`), and, when its
    last two axes are a card's queries × keys, that it is the notes' score table."""
    assert value.shape is not None
    sequence = {n for card in card_list for n in card.sequence}
    axes = [dim for dim in value.shape if free_names(dim) and free_names(dim) <= sequence]
    if len(axes) < 2:
        return ()
    growth = math(spec.pretty(product(axes)))
    table = next((card for card in card_list if len(value.shape) >= 2 and card.queries is not None
                  and card.keys is not None and spec.program.dims.equal(value.shape[-2], card.queries)
                  and spec.program.dims.equal(value.shape[-1], card.keys)), None)
    square = len({to_text(dim) for dim in axes}) == 1
    key = "largest_growth_square" if square else "largest_growth"
    if table is None:
        return rich(key, growth=growth)
    return join(list(rich(key, growth=growth)), " ", rich(
        "largest_table", rows=math(to_text(value.shape[-2])), cols=math(to_text(value.shape[-1]))))


def _count(value: Value) -> Dim:
    assert value.shape is not None
    return product(value.shape)


# --- dataflow ---------------------------------------------------------------------------------------


def _node_anchors(spec: Spec) -> dict[str, str]:
    return {name: f"node-{index}" for index, name in enumerate(spec.program.tensors)}


def _graph_nodes(spec: Spec, anchors: dict[str, str], problems: list[Problem]) -> list[GraphNode]:
    outputs = set(spec.program.outputs)
    first_error = {}
    for problem in problems:
        if problem.node is not None and problem.severity == "error":
            first_error.setdefault(problem.node, problem.anchor)
    return [
        GraphNode(printable_line(name), tensor.kind, tensor.value.text() if tensor.value.known else "?",
                  spec.concrete(tensor.value), name in outputs,
                  not tensor.value.known or anchors[name] in first_error, tensor.span.line,
                  anchors[name], first_error.get(anchors[name]))
        for name, tensor in spec.program.tensors.items()
    ]


def _graph_edges(spec: Spec, failed: set[str]) -> list[GraphEdge]:
    edges = []
    for name, statement in spec.definitions.items():
        assert statement.value is not None
        seen: list[str] = []
        for node in postorder(statement.value):
            if isinstance(node, nodes.Name) and node.name in spec.program.tensors \
                    and node.name != name and node.name not in seen:
                seen.append(node.name)
        for source in seen:
            value = spec.shape_of(source)
            edges.append(GraphEdge(printable_line(source), printable_line(name),
                                   value.text() if value.known else "?",
                                   printable_line(name) in failed))
    return edges


__all__ = ["Report", "build_report"]


def _canonical_text(system: DimSystem, symbol: Dim) -> str:
    """What an eliminated dim equals, in the spec's notation; past the algebra budget
    (a chain of constraints such as `c0 == c1 * c1 + 1`, ...), its name as written."""
    try:
        return to_text(system.canonical(symbol))
    except TooComplex:
        return to_text(symbol)


# --- a whole model (docs/torch.md, "Whole models") -------------------------------------------


class LayerSection(Record, frozen=True):
    """Layers traced alike, on a whole model's page: who they are, where their code is, and
    the report of their traced spec (its cards)."""

    label: str           # "model.layers.0–3.self_attn"
    detail: str          # "LlamaAttention, 4 layers, modeling_llama.py:232–270"
    report: Report


class ModelReport(Record, frozen=True):
    """One page for a whole model: its dims once, each group of attention layers with its
    cards, the rest of the model by kind, the problems at their Python lines."""

    title: str
    ok: bool
    verdict: str
    dims: tuple[DimRow, ...]
    layers: tuple[LayerSection, ...]
    others: tuple[tuple[str, str], ...]   # (kind, the modules)
    problems: tuple[str, ...]             # "file.py:12: error[SC402]: ..."
    version: str


def build_model_report(target: str, sections: list[tuple[str, str, int, str, Program]],
                       others: list[tuple[str, str]], problems: list[Diagnostic],
                       framed: list[str], dtype: str = "float64") -> ModelReport:
    """The page of a whole model. Each section is a group of layers: (their names, the
    class, how many, the Python lines of their code, the checked program of their traced
    spec); ``problems`` are the model's diagnostics at their Python lines, ``framed`` the
    same as one line each."""
    layers = tuple(LayerSection(label, text("layer_detail", kind=kind, count=count, where=where),
                                build_report(program, label, dict(program.dims.bindings), dtype))
                   for label, kind, count, where, program in sections)
    dims: dict[str, DimRow] = {}
    for layer in layers:
        for row in layer.report.dims:
            dims.setdefault(row.name, row)
    errors = sum(d.severity is Severity.ERROR for d in problems)
    warnings = sum(d.severity is Severity.WARNING for d in problems)
    return ModelReport(text("model_title", target=target), errors == 0,
                       _verdict(errors, warnings), tuple(dims.values()), layers, tuple(others),
                       tuple(framed), __version__)
