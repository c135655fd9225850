"""The notes' cheat card, filled in for each attention pattern of a spec — broken ones too.

The patterns come from the axis-meaning analysis (:mod:`shapecheck.meaning`, which the
checker's API runs on every program: ``Program.meaning``): which statements are the scores,
the scale, the masks, the softmax and the contraction, and which axis of each tensor is the
query axis, the key axis, the feature axis. The card names them and marks each check ✓ or ✗
from that analysis' verdicts — the report has no second idea of what attention is.

Only where the analysis cannot look — a pattern whose shapes are unknown because the spec
has errors — are its statements named from the syntax (:func:`_broken_patterns`): an `@`
or two-operand einsum whose left operand is, through names and dropout, a softmax, whose
argument is, through scalar factors, additive terms and ``where``, a product. Such a card
marks the step that failed ✗ with the problem that broke it, and the notes' 30-second
self-check says which line fails and what the fix is; the checks that need axes say they
cannot be checked.
"""

from __future__ import annotations


from ..records import Record
from ..syntax import nodes
from ..messages.diagnostics import Diagnostic, Span
from ..syntax.nodes import strip_parens
from ..check.program import Value
from ..symbolic import Dim, free_names, pretty, product, to_text
from .context import Spec, inside, postorder
from ..meaning import Attention, Role
from .cost import operation_cost
from .reasoning import axis_words, index_letters
from .templates import Rich, code, inline, join, mark, math, rich, shape, text

_MAX_DEPTH = 64


class Pattern(Record, frozen=True):
    """One attention pattern, as a card needs it: meaning's analysis of it, or — for a broken
    pattern the analysis cannot see — its statements named from the syntax."""

    statement: nodes.Define | nodes.Output  # where the output operation is
    output: nodes.Expr  # `P @ V` or einsum(P, V)
    weights: nodes.Expr  # the softmax operand as written
    softmax: nodes.Expr  # the softmax call (or a softmax written out)
    scores: nodes.Expr | None  # `Q @ K.T` or einsum(Q, K); None: not found
    query: nodes.Expr | None
    key: nodes.Expr | None
    key_given_transposed: bool
    value: nodes.Expr
    masks: tuple[nodes.Expr, ...] = ()  # `where(...)` calls found on the scores (broken patterns)
    missing: nodes.Expr | None = None  # what the scores trace ended on, when it found no product
    attention: Attention | None = None  # the analysis (None: a broken pattern)


class Axes(Record, frozen=True):
    queries: Dim | None
    keys: Dim | None
    d: Dim | None
    dv: Dim | None
    batch: tuple[Dim, ...]
    keys_axis: int | None  # the axis of the weights that the output sums over


class CardRow(Record, frozen=True):
    role: str
    tensor: Rich
    shape: str | None  # None: unknown (a failed step)
    concrete: str | None
    meaning: Rich
    ok: bool = True  # False: the step failed (its shape is unknown or its statement has an error)


class Check(Record, frozen=True):
    """A line of the card's checks: the 30-second self-check, the axes, the scale."""

    label: str
    text: Rich
    ok: bool | None  # None: nothing to tick (no opinion, or it cannot be checked)


class Card(Record, frozen=True):
    number: int
    line: int
    title: Rich
    summary: Rich
    rows: tuple[CardRow, ...]
    checks: tuple[Check, ...]
    identity: Rich  # the multi-head identity and its status, or empty
    identity_ok: bool | None
    core_flops: str | None
    core_value: int | None
    sequence: tuple[str, ...]  # the dims that count queries and keys (N, L)
    queries: Dim | None = None
    keys: Dim | None = None
    spans: tuple[Span, ...] = ()  # the statements of the pattern: problems in them link here
    ok: bool = True  # every step and check holds


# --- finding patterns ---------------------------------------------------------------------------


def find_patterns(spec: Spec) -> list[Pattern]:
    """The analysis' patterns, and the broken ones it cannot see, in source order."""
    meaning = spec.program.meaning
    patterns = [_from_attention(spec, attention) for attention in (meaning.patterns if meaning else ())]
    seen = {id(p.output) for p in patterns}
    patterns += [p for p in _broken_patterns(spec) if id(p.output) not in seen]
    return sorted(patterns, key=lambda p: (p.output.span.line, p.output.span.column))


def _from_attention(spec: Spec, a: Attention) -> Pattern:
    key_given_transposed = False
    if a.key is not None:
        key_axis = a.key.axis("key")
        key_given_transposed = key_axis is not None and key_axis == len(a.key.axes) - 1 \
            and len(a.key.axes) >= 2
    return Pattern(a.statement, a.output, a.weights, a.softmax, a.scores,  # type: ignore[arg-type]
                   a.query.node if a.query is not None else None,
                   a.key.node if a.key is not None else None, key_given_transposed,
                   a.value.node, attention=a)


def _broken_patterns(spec: Spec) -> list[Pattern]:
    """Patterns whose shapes are unknown (the spec has errors), named from the syntax."""
    patterns = []
    for statement in spec.program.statements:
        if not isinstance(statement, (nodes.Define, nodes.Output)) or statement.value is None:
            continue
        for node in postorder(statement.value):
            operands = _two_operands(spec, node)
            if operands is None or (spec.value(node).known and spec.value(operands[0]).known):
                continue  # typed: the analysis speaks for it, or it is no attention
            softmax = _trace_softmax(spec, operands[0], 0)
            if softmax is None:
                continue
            trace = _ScoresTrace(spec)
            scores = trace.follow(_argument(spec, softmax, "x", 0), 0)
            query, key, given_transposed = _query_key(spec, scores) if scores is not None \
                else (None, None, False)
            patterns.append(Pattern(statement, node, operands[0], softmax, scores, query, key,
                                    given_transposed, operands[1], tuple(trace.masks),
                                    trace.end if scores is None else None))
    return patterns


def _builtin(spec: Spec, node: nodes.Expr) -> str | None:
    """The builtin a call is: as the checker resolved it, or by name when it could not."""
    if not isinstance(node, nodes.Call):
        return None
    info = spec.program.calls.get(id(node))
    return info.builtin if info is not None else node.func.name


def _argument(spec: Spec, call: nodes.Call, name: str, position: int) -> nodes.Expr | None:
    """A tensor argument of a call: resolved by the checker, or read from the syntax."""
    info = spec.program.calls.get(id(call))
    if info is not None and isinstance(info.args.get(name), (nodes.Name, nodes.BinOp, nodes.Call,
                                                             nodes.Unary, nodes.Transpose, nodes.Paren)):
        return info.args[name]
    for keyword in call.keywords:
        if keyword.name.name == name:
            return keyword.value
    return call.args[position] if len(call.args) > position else None


def _two_operands(spec: Spec, node: nodes.Expr) -> tuple[nodes.Expr, nodes.Expr] | None:
    if isinstance(node, nodes.BinOp) and node.op == "@":
        return node.left, node.right
    if _builtin(spec, node) != "einsum":
        return None
    assert isinstance(node, nodes.Call)
    info = spec.program.calls.get(id(node))
    operands = info.args["operands"].items if info is not None else node.args[1:]
    if len(operands) == 2:
        return operands[0], operands[1]
    return None


def _trace_softmax(spec: Spec, node: nodes.Expr | None, depth: int) -> nodes.Call | None:
    if node is None or depth > _MAX_DEPTH:
        return None
    node = spec.definition(node)
    builtin = _builtin(spec, node)
    if builtin == "softmax":
        assert isinstance(node, nodes.Call)
        return node
    if builtin == "dropout":
        assert isinstance(node, nodes.Call)
        return _trace_softmax(spec, _argument(spec, node, "x", 0), depth + 1)
    return None


class _ScoresTrace:
    """Follows a broken softmax's argument back to the scores, collecting the masks on the way."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.masks: list[nodes.Expr] = []
        self.end: nodes.Expr | None = None

    def follow(self, node: nodes.Expr | None, depth: int) -> nodes.Expr | None:
        if node is None or depth > _MAX_DEPTH:
            return None
        spec = self.spec
        self.end = strip_parens(node)
        node = spec.definition(node)
        if isinstance(node, nodes.BinOp):
            if node.op == "@":
                return node
            if node.op in "*/" and _is_scalar(spec, node.right):
                return self.follow(node.left, depth + 1)
            if node.op == "*" and _is_scalar(spec, node.left):
                return self.follow(node.right, depth + 1)
            if node.op in "+-":  # an additive mask or bias
                return self.follow(node.left, depth + 1) or self.follow(node.right, depth + 1)
            return None
        if isinstance(node, nodes.Unary):
            return self.follow(node.operand, depth + 1)
        builtin = _builtin(spec, node)
        if builtin is None:
            return None
        assert isinstance(node, nodes.Call)
        if builtin == "where":
            self.masks.append(node)
            return self.follow(_argument(spec, node, "x", 1), depth + 1) \
                or self.follow(_argument(spec, node, "y", 2), depth + 1)
        if builtin == "dropout":
            return self.follow(_argument(spec, node, "x", 0), depth + 1)
        return node if _two_operands(spec, node) is not None else None


def _is_scalar(spec: Spec, node: nodes.Expr) -> bool:
    """A scale factor: a number, a dim, or a call on them (`sqrt(d)`, `d ** -0.5`); read from
    the syntax when its type is unknown (no tensor in it)."""
    value = spec.value(node)
    if value.known:
        return value.rank == 0
    return all(isinstance(n, (nodes.Integer, nodes.Decimal, nodes.Name, nodes.Call, nodes.BinOp,
                              nodes.Paren, nodes.Unary))
               and (not isinstance(n, nodes.Name) or n.name not in spec.program.tensors)
               for n in postorder(node))


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
        if _builtin(spec, candidate) == "transpose":
            assert isinstance(candidate, nodes.Call)
            info = spec.program.calls.get(id(candidate))
            if (info is None and len(candidate.args) == 1) or (info is not None and info.args.get("perm") is None):
                argument = _argument(spec, candidate, "x", 0)
                if argument is not None:
                    return query, argument, False
    if _unwritten_transpose(spec, scores):
        return query, right, False  # `Q @ K`: the key as written, not transposed (an error)
    return query, right, True


def _unwritten_transpose(spec: Spec, scores: nodes.BinOp) -> bool:
    """`Q @ K` whose inner dims fail where `Q @ K.T` would not: K is the key, untransposed."""
    left, right = spec.value(scores.left), spec.value(scores.right)
    return bool(left.shape and right.shape and len(right.shape) >= 2 and not spec.value(scores).known
                and spec.program.dims.equal(left.shape[-1], right.shape[-1]))


# --- the card ------------------------------------------------------------------------------------


def cards(spec: Spec, patterns: list[Pattern]) -> list[Card]:
    return [_card(spec, pattern, number) for number, pattern in enumerate(patterns, start=1)]


def _axes(spec: Spec, p: Pattern) -> Axes:
    """The sizes the card speaks of: queries, keys, d, dv, batch — from the analysis' roles."""
    a = p.attention
    if a is not None:
        return Axes(_size(spec, a.weights_roles, "query"), _size(spec, a.weights_roles, "key"),
                    _size(spec, a.query, "feature"), _size(spec, a.value, "value"), a.batch,
                    a.summed_axes[0] if len(a.summed_axes) == 1 else None)
    # A broken pattern: what the known shapes say, read as `Q @ K.T` and `P @ V` are written.
    q, k, v = (spec.value(n) if n is not None else Value(None) for n in (p.query, p.key, p.value))
    keys = None
    if k.shape is not None and len(k.shape) >= 2:
        keys = k.shape[-1] if p.key_given_transposed else k.shape[-2]
    return Axes(q.shape[-2] if q.shape is not None and len(q.shape) >= 2 else None, keys,
                q.shape[-1] if q.shape else None, v.shape[-1] if v.shape else None, (), None)


def _size(spec: Spec, role: Role | None, name: str) -> Dim | None:
    """The size of the axis with role ``name`` of a tensor of the attention."""
    if role is None:
        return None
    index, value = role.axis(name), spec.value(role.node)
    if index is None or value.shape is None or index >= len(value.shape):
        return None
    return value.shape[index]


def _card(spec: Spec, p: Pattern, number: int) -> Card:
    axes = _axes(spec, p)
    steps = _Steps(spec, p)
    f = dict(queries=_dim(axes.queries), keys=_dim(axes.keys), d=_dim(axes.d), dv=_dim(axes.dv))
    per = rich("mean_scores_per", heads=math(", ".join(index_letters(axes.batch, {"i", "j", "k"})))) \
        if axes.batch else ""
    key_text: Rich = (code(spec.text(p.key)),) if p.key is not None else ()
    if p.key is not None and p.key_given_transposed:
        key_text = rich("keys_given_transposed", text=code(spec.text(p.key)))
    softmax_axis = _softmax_axis(spec, p)
    on_keys = p.attention.axis_ok if p.attention is not None else None
    if on_keys is False:
        warned = any(d.code == "SC402" and inside(d.span, p.statement.span) for d in spec.program.diagnostics) \
            or any(d.code == "SC402" for d in spec.problems_in(p.softmax.span))
        sums = rich("mean_weights_wrong_warned" if warned else "mean_weights_wrong")
    else:
        sums = rich("mean_weights_keys", **f)
    weights_meaning = rich("mean_weights", axis=_axis_text(softmax_axis), sums=sums)
    output_meaning = rich("mean_output", **f)
    result = spec.shape_of(p.statement.name.name)
    if strip_parens(p.statement.value) is not p.output and result.known:  # type: ignore[arg-type]
        output_meaning = join(list(output_meaning), rich(
            "mean_output_then", statement=code(spec.text(p.statement.value)),  # type: ignore[arg-type]
            name=code(p.statement.name.name), shape=shape(result.text())))
    scores_text = _named(spec, p.scores) if p.scores is not None else \
        ((code(spec.text(p.missing)),) if p.missing is not None else ())
    rows = [
        steps.row("role_query", (code(spec.text(p.query)),) if p.query is not None else (), p.query,
                  rich("mean_query", **f)),
        steps.row("role_key", key_text, p.key, rich("mean_key", **f)),
        steps.row("role_value", (code(spec.text(p.value)),), p.value, rich("mean_value", **f)),
        steps.row("role_scores", scores_text, p.scores if p.scores is not None else p.missing,
                  rich("mean_scores", **f, per=per)),
        steps.row("role_weights", _named(spec, p.softmax), p.softmax, weights_meaning),
        steps.row("role_output", _named(spec, p.output, p.statement), p.output, output_meaning),
    ]
    checks = [steps.inner(axes), steps.output(axes), steps.axes(axes, softmax_axis),
              steps.scale(axes)] + steps.masks() + steps.changes()
    identity, identity_ok, identity_math = _identity(spec, p, axes)
    flops = [operation_cost(spec, n) if n is not None else None for n in (p.scores, p.output)]
    core = None if any(c is None or c[1] is None for c in flops) else flops[0][1] + flops[1][1]  # type: ignore[index,operator]
    shapes = [row.shape for row in rows]
    qkv = shapes[:3]
    summary = rich(
        "card_line",
        qkv=_shape_or_unknown(qkv[0]) if len(set(qkv)) == 1 else rich(
            "card_qkv_differ", q=_shape_or_unknown(qkv[0]), k=_shape_or_unknown(qkv[1]),
            v=_shape_or_unknown(qkv[2])),
        scores=_shape_or_unknown(shapes[3]), weights=_shape_or_unknown(shapes[4]),
        axis=text("by_row") if softmax_axis == "row" else text("by_axis", axis=_axis_text(softmax_axis)),
        output=_shape_or_unknown(shapes[5]),
        identity=join([math(identity_math)], " ", mark(bool(identity_ok)) if identity_ok is not None
                      else "") if identity_math else text("none"))
    card_ok = all(row.ok for row in rows) and all(check.ok is not False for check in checks)
    return Card(
        number, p.output.span.line,
        rich("card_title", number=str(number), statement=code(spec.text(p.statement)),
             line=str(p.statement.span.line)),
        summary, tuple(rows), tuple(checks), identity, identity_ok,
        pretty(core) if core is not None else None,
        spec.evaluate(core) if core is not None else None,
        tuple(sorted((free_names(axes.queries) if axes.queries is not None else set())
                     | (free_names(axes.keys) if axes.keys is not None else set()))),
        axes.queries, axes.keys, steps.spans(), card_ok)


def _dim(dim: Dim | None) -> Rich:
    return (math(to_text(dim)),) if dim is not None else (("text", "?"),)


def _shape_or_unknown(value: str | None) -> Rich:
    return (shape(value),) if value is not None else (("bad", "?"),)


def _softmax_axis(spec: Spec, p: Pattern) -> int | str:
    """The softmax's axis as written (`row`, `col`, `-2`), or its index when written out by hand."""
    info = spec.program.calls.get(id(p.softmax))
    if info is not None and info.builtin == "softmax":
        return info.args["axis"]
    if p.attention is not None:
        return p.attention.softmax_axis
    assert isinstance(p.softmax, nodes.Call)
    for keyword in p.softmax.keywords:
        if keyword.name.name == "axis":
            value = keyword.value
            if isinstance(value, nodes.AxisName):
                return value.name
            return spec.text(value)
    return "row"


def _axis_text(axis: int | str) -> str:
    return axis_words(axis) if isinstance(axis, int) or axis in ("row", "col") else text("axis_int", axis=axis)


class _Steps:
    """The steps of one pattern: which failed, why, and the checks of the self-check."""

    def __init__(self, spec: Spec, pattern: Pattern) -> None:
        self.spec = spec
        self.p = pattern
        self.extra: list[Span] = []  # statements past the pattern that a check points at
        self.causes: list[Diagnostic] = []  # the problems the ✗ marks name

    def cause(self, node: nodes.Expr | None) -> Diagnostic | None:
        """The first error that keeps ``node`` from a shape: in it, or where what it reads failed."""
        if node is None:
            return None
        found = self.spec.cause(node)
        if found is not None:
            self.causes.append(found)
        return found

    def row(self, role: str, tensor: Rich, node: nodes.Expr | None, meaning: Rich) -> CardRow:
        spec = self.spec
        value = spec.value(node) if node is not None else Value(None)
        # Q and K are not found when the scores are not: what broke the scores says why.
        cause = self.cause(node) if node is not None else self.cause(self.p.missing)
        if node is not None and isinstance(strip_parens(node), nodes.Name):
            statement = spec.definitions.get(strip_parens(node).name)  # type: ignore[union-attr]
            if statement is not None:
                cause = cause or next((d for d in spec.problems_in(statement.span) if d.is_error), None)
        if not value.known or cause is not None:
            failed = rich("step_failed_because", problem=_reference(cause)) if cause is not None \
                else rich("step_unknown")
            return CardRow(text(role), tensor, value.text() if value.known else None,
                           spec.concrete(value), join(list(failed), " ", mark(False)), False)
        return CardRow(text(role), tensor, value.text(), spec.concrete(value), meaning)

    def inner(self, axes: Axes) -> Check:
        """Self-check 1: the inner dims of QKᵀ agree (both d)."""
        spec, scores = self.spec, self.p.scores
        label = text("check_inner")
        operands = _two_operands(spec, scores) if scores is not None else None
        if operands is None:
            cause = self.cause(self.p.missing)
            if cause is None:
                return Check(label, rich("check_no_scores_found"), None)
            return Check(label, join(list(rich("check_no_scores", problem=_reference(cause))), " ",
                                     mark(False)), False)
        left, right = spec.value(operands[0]), spec.value(operands[1])
        problem = next((d for d in spec.problems_in(scores.span) if d.is_error), None)
        if isinstance(scores, nodes.BinOp) and left.shape and right.shape and len(right.shape) >= 2:
            inner_left, inner_right = left.shape[-1], right.shape[-2]
            fields = dict(left=math(to_text(inner_left)), right=math(to_text(inner_right)))
            if problem is None and spec.equal(inner_left, inner_right).verdict:
                return Check(label, join(list(rich("check_inner_ok", **fields)), " ", mark(True)), True)
            fix = problem.help[0] if problem is not None and problem.help else ""
            return Check(label, join(list(rich("check_inner_bad", **fields)), " ", mark(False),
                                     rich("check_fix", fix=inline(fix)) if fix else "", " ",
                                     _reference(problem)), False)
        if problem is not None or not spec.value(scores).known:
            cause = problem or self.cause(scores)
            return Check(label, join(list(rich("check_cannot", problem=_reference(cause))), " ",
                                     mark(False)), False)
        d = axes.d
        return Check(label, join(list(rich("check_inner_einsum", d=_dim(d))), " ", mark(True)), True)

    def output(self, axes: Axes) -> Check:
        """Self-check 2: the output is N×d (one d-vector per query)."""
        spec, p = self.spec, self.p
        label = text("check_output")
        value = spec.value(p.output)
        annotation = next((d for d in spec.problems_in(p.statement.span) if d.code == "SC304"), None)
        if annotation is not None:
            return Check(label, join(list(rich("check_output_annotation", message=inline(annotation.message))),
                                     " ", mark(False), " ", _reference(annotation)), False)
        if value.shape is None or len(value.shape) < 2:
            cause = self.cause(p.output)
            return Check(label, join(list(rich("check_cannot", problem=_reference(cause))), " ",
                                     mark(False)) if cause is not None else rich("check_unknown"),
                         False if cause is not None else None)
        rows, width = value.shape[-2], value.shape[-1]
        if p.attention is not None:  # in any layout: the axes the analysis calls query and value
            rows = _size(spec, p.attention.output_roles, "query") or rows
            width = _size(spec, p.attention.output_roles, "value") or width
        fields = dict(output=shape(value.text()), rows=math(to_text(rows)), width=math(to_text(width)))
        after = self.downstream()
        broken = next(((statement, d) for statement in after for d in spec.problems_in(statement.span)
                       if d.is_error), None)
        if broken is not None:  # "or N×D_model after concatenating heads": what follows fails
            statement, problem = broken
            self.extra.append(statement.span)
            return Check(label, join(list(rich("check_output_after", **fields,
                                               statement=code(spec.text(statement)))),
                                     " ", mark(False), " ", _reference(problem)), False)
        if axes.queries is not None and axes.dv is not None and spec.equal(rows, axes.queries).verdict \
                and spec.equal(width, axes.dv).verdict:
            final = next((s for s in reversed(after) if s.name.name in spec.program.outputs), None)
            then = rich("check_output_final", name=code(final.name.name),
                        shape=shape(spec.shape_of(final.name.name).text())) \
                if final is not None and spec.shape_of(final.name.name).known else ()
            return Check(label, join(list(rich("check_output_ok", **fields)), then, " ", mark(True)), True)
        return Check(label, rich("check_output_shape", **fields), None)

    def downstream(self) -> list[nodes.Define | nodes.Output]:
        """The statements that read the attention's output, directly or not (to the outputs)."""
        spec = self.spec
        reached = {self.p.statement.name.name}
        found: list[nodes.Define | nodes.Output] = []
        for name, statement in spec.definitions.items():
            if statement is self.p.statement or statement.value is None:
                continue
            if any(isinstance(n, nodes.Name) and n.name in reached for n in postorder(statement.value)):
                reached.add(name)
                found.append(statement)
        return found

    def axes(self, axes: Axes, softmax_axis: int | str) -> Check:
        """The softmax normalises the axis the output sums over: the keys (the analysis' verdict)."""
        label, a = text("check_axes"), self.p.attention
        weights = self.spec.value(self.p.weights)
        if a is None or a.axis_ok is None or weights.shape is None or axes.keys_axis is None:
            return Check(label, rich("check_axes_unknown"), None)
        roles = a.weights_roles
        query_axis = roles.axis("query")
        fields = dict(axis=math(_negative(axes.keys_axis, len(weights.shape))), keys=_dim(axes.keys),
                      queries=_dim(axes.queries), output=code(self.spec.text(self.p.output)),
                      query_axis=math(_negative(query_axis, len(roles.axes))) if query_axis is not None
                      else "?")
        if a.axis_ok:
            return Check(label, join(list(rich("check_axes_ok", **fields)), " ", mark(True)), True)
        # Said in the softmax argument's own axes: the roles name the summed axis "key".
        summed = a.softmax_roles.axis("key") if a.softmax_roles is not None else None
        rank = len(a.softmax_roles.axes) if a.softmax_roles is not None else 0
        if summed is None:
            return Check(label, join(list(rich("check_axes_bad_unknown", output=fields["output"])), " ",
                                     mark(False), " ", self.warning(("SC402",))), False)
        return Check(label, join(list(rich(
            "check_axes_bad", output=fields["output"], normalised=math(_negative(a.softmax_axis, rank)),
            summed=math(_negative(summed, rank)))), " ", mark(False), " ", self.warning(("SC402",))), False)

    def scale(self, axes: Axes) -> Check:
        """The scores are scaled by 1/sqrt(d), d the width they sum over (the analysis' verdict),
        named as the card names Q's feature axis when they are the same size (`d`, not the
        `2*h` of its definition)."""
        spec, label, a = self.spec, text("check_scale"), self.p.attention
        if a is None or a.scale is None:
            return Check(label, rich("check_cannot_axes") if a is None else rich("check_unknown"), None)
        scale = a.scale
        if scale.verdict == "none":
            return Check(label, join(list(rich("check_scale_none")), " ", self.warning(("SC405",))), None)
        written = " ".join(("/ " if f.divides else "* ") + spec.text(f.node)
                           + (text("scale_on", operand=spec.text(f.operand)) if f.operand is not None else "")
                           for f in scale.factors)
        width = scale.expected
        if width is not None and axes.d is not None and spec.program.dims.equal(axes.d, width):
            width = axes.d
        fields = dict(scale=code(written), size=math(to_text(scale.radicand)) if scale.radicand is not None
                      else "?", d=_dim(width))
        if scale.verdict == "ok":
            return Check(label, join(list(rich("check_scale_ok", **fields)), " ", mark(True)), True)
        if scale.verdict == "wrong":
            return Check(label, join(list(rich("check_scale_bad", **fields)), " ", mark(False), " ",
                                     self.warning(("SC404",))), False)
        if scale.verdict == "inverted":
            return Check(label, join(list(rich("check_scale_inverted", **fields)), " ", mark(False), " ",
                                     self.warning(("SC404",))), False)
        if scale.verdict == "one_side":  # d ** -0.25 on Q or K alone: SC404 says so
            return Check(label, join(list(rich("check_scale_other", scale=code(written))), " ",
                                     mark(False), " ", self.warning(("SC404",))), False)
        return Check(label, rich("check_scale_other", scale=code(written)), None)

    def masks(self) -> list[Check]:
        spec, out, label = self.spec, [], text("check_mask")
        if self.p.attention is None:  # a broken pattern: only whether the mask itself failed
            for node in self.p.masks:
                problem = next((d for d in spec.problems_in(node.span) if d.is_error), None)
                if problem is not None:
                    out.append(Check(label, join(list(rich("check_mask_bad", mask=code(spec.text(node)))),
                                                 " ", mark(False), " ", _reference(problem)), False))
            return out
        for mask in self.p.attention.masks:
            fields = dict(mask=code(spec.text(mask.node)))
            if mask.after_softmax:
                out.append(Check(label, join(list(rich("check_mask_after", **fields)), " ", mark(False), " ",
                                             self.warning(("SC406",))), False))
            elif mask.alignment == "aligned":
                keys = _visible_keys(spec, mask.condition.node)
                said = rich("check_mask_causal", **fields, keys=math(keys)) if keys is not None \
                    else rich("check_mask_aligned", **fields)
                out.append(Check(label, join(list(said), " ", mark(True)), True))
            elif mask.alignment == "transposed":
                out.append(Check(label, join(list(rich("check_mask_transposed", **fields)), " ", mark(False),
                                             " ", self.warning(("SC407", "SC408"))), False))
            else:
                out.append(Check(label, rich("check_mask_ok", **fields), None))
        return out

    def changes(self) -> list[Check]:
        """What changed the weights between the softmax and the sum (other than dropout)."""
        a = self.p.attention
        if a is None:
            return []
        masked = {id(m.node) for m in a.masks if m.after_softmax}
        return [Check(text("check_weights"), join(list(rich("check_changed", change=code(self.spec.text(node)))),
                                                  " ", mark(False), " ", self.warning(("SC406",))), False)
                for node in a.changes if id(node) not in masked]

    def warning(self, codes: tuple[str, ...]) -> Rich:
        """The analysis' warning of one of ``codes`` for this pattern, if it gave one."""
        for diagnostic in self.spec.program.diagnostics:
            if diagnostic.code in codes \
                    and any(inside(diagnostic.span, span) for span in self.spans()):
                self.causes.append(diagnostic)
                return _reference(diagnostic)
        return ()

    def spans(self) -> tuple[Span, ...]:
        spec, p = self.spec, self.p
        found = [p.statement.span]
        for node in (p.weights, p.scores, p.missing, p.query, p.key, p.value, p.softmax, *p.masks):
            if node is None:
                continue
            name = strip_parens(node)
            if isinstance(name, nodes.Name) and name.name in spec.definitions:
                found.append(spec.definitions[name.name].span)
            holder = _holder(spec, node)
            if holder is not None:
                found.append(holder.span)
        found.extend(self.extra)
        found.extend(d.span for d in self.causes)
        return tuple(dict.fromkeys(found))


def _visible_keys(spec: Spec, condition: nodes.Expr) -> str | None:
    """The keys query i sees under a `causal_mask(n, n_k, window)` condition, as its
    arguments make them (`j ≤ i`, `j ≤ i + T_past` for a cache, `i - W < j ≤ i` for a
    window); None when the condition is not that call itself (a combination of masks)."""
    call = spec.definition(condition)
    info = spec.program.calls.get(id(call))
    if info is None or info.builtin != "causal_mask":
        return None
    dims = spec.program.dims
    offset = dims.simplest(info.args["n_k"] - info.args["n"]) if info.args.get("n_k") is not None else 0

    def shifted(by: Dim | int) -> str:
        written = to_text(by) if by != 0 else ""
        return "i" if not written else f"i - {written[1:]}" if written.startswith("-") else f"i + {written}"

    seen = f"j ≤ {shifted(offset)}"
    window = info.args.get("window")
    return seen if window is None else f"{shifted(dims.simplest(offset - window))} < {seen}"


def _negative(index: int, rank: int) -> str:
    """An axis as a negative index, as the notes count from the last: `−1`."""
    return str(index - rank).replace("-", "−")


def _reference(diagnostic: Diagnostic | None) -> Rich:
    if diagnostic is None:
        return ()
    return rich("see_problem", code=diagnostic.code, line=str(diagnostic.span.line))


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
    if p.query is None or axes.d is None or axes.queries is None:
        return rich("identity_other", status=text("identity_unknown")), None, ""
    kind, source = _projection_source(spec, p.query, 0)
    query = spec.value(p.query)
    if kind == "input":
        return rich("identity_other", status=text("identity_given")), None, ""
    if source is None or source.shape is None or query.shape is None:
        return rich("identity_other", status=text("identity_untraced")), None, ""
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
    if proof.verdict and proof.method == "identical":
        # Nothing was learned: the spec writes the width as H·d itself.
        return (rich("identity_lead", identity=math(formula),
                     status=rich("identity_trivial", value=math(to_text(width)))), None, formula)
    if proof.verdict:
        if proof.method == "bindings" and not proof.constraints:
            status = rich("identity_bindings", left=str(left), right=str(right))
        else:
            status = rich("identity_proved", how=spec.how(proof))
    elif left is not None and right is not None:
        status = rich("identity_violated", left=str(left), right=str(right))
    else:
        status = rich("identity_unproved")
    return (rich("identity_lead", identity=math(formula), status=join(list(status), " ", mark(bool(proof.verdict)))),
            bool(proof.verdict), formula)


def _projection_source(spec: Spec, node: nodes.Expr, depth: int) -> tuple[str, Value | None]:
    """Where the query comes from: ("projected", X) for `split_heads(X @ W_Q, H)`, ("input",
    None) when it is a declared input or param, ("untraced", None) otherwise."""
    stripped = strip_parens(node)
    if isinstance(stripped, nodes.Name) and stripped.name in spec.program.tensors \
            and spec.program.tensors[stripped.name].kind in ("input", "param"):
        return "input", None
    node = spec.definition(node)
    if depth > _MAX_DEPTH:
        return "untraced", None
    if isinstance(node, nodes.BinOp):
        if node.op == "@":
            return "projected", spec.value(node.left)
        if node.op in "*/":
            tensor_side = node.left if spec.value(node.right).rank == 0 else node.right
            return _projection_source(spec, tensor_side, depth + 1)
        return "untraced", None
    builtin = _builtin(spec, node)
    if builtin in ("split_heads", "reshape", "transpose", "repeat", "dropout"):
        assert isinstance(node, nodes.Call)
        argument = _argument(spec, node, "x", 0)
        return _projection_source(spec, argument, depth + 1) if argument is not None else ("untraced", None)
    if builtin == "einsum":
        operands = _two_operands(spec, node)
        if operands is not None:
            return "projected", spec.value(operands[0])
    return "untraced", None
