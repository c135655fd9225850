"""Shape rules as data: one row per builtin, plus the operator rules.

A row names the builtin's parameters (with the kind of argument each takes),
a small shape function, and how the result's axes relate to the arguments'
axes (:class:`AxisMap`). The checker resolves the arguments by kind, then
calls the shape function with a :class:`Ctx` to report problems through; the
axis-meaning pass (:mod:`shapecheck.meaning`) reads the axis map. Adding a
builtin is adding a row.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from ..messages import codes
from ..records import EnumBody, NamedTuple, Record, simple_enum
from . import value_rules
from ..syntax import nodes
from .. import symbolic
from ..messages.diagnostics import Edit, Fix
from .program import SCALAR, Shape, Value
from .rules import (
    Ctx, axis_index, broadcast, constraint_help, counterexample, needed_fixes, needed_help,
    real_argument, relation, resolve_axis,
)
from ..symbolic import Claim, Decision, Dim, Verdict, shape_text, to_text


@simple_enum
class Kind(EnumBody):
    """The kind of argument a parameter takes; ``codes.DETAILS["kind_" + value]`` words it."""

    TENSOR = "tensor"
    TENSORS = "tensors"
    DIM = "dim"
    OFFSET = "offset"
    SHAPE = "shape"
    AXIS = "axis"
    AXES = "axes"  # one axis, or a tuple of them (`axis=(-1, -2)`)
    PERM = "perm"
    STRING = "string"
    NUMBER = "number"
    BOOL = "bool"

    @property
    def description(self) -> str:
        return codes.detail(f"kind_{self.value}")


class Param(Record, frozen=True):
    name: str
    kind: Kind
    default: Any = None
    required: bool = True


Rule = Callable[[Ctx, dict[str, Any]], "Value | None"]


def _deferred(module: str, name: str, *arguments: Any) -> Rule:
    """``module.name`` (or ``module.name(*arguments)``, a rule made by a factory), imported on
    its first call: the complex-value and gather rules, which a spec without them never
    loads (issue 36, the cold start)."""
    made: list[Rule] = []

    def rule(ctx: Ctx, args: dict[str, Any]) -> Value | None:
        if not made:
            found = getattr(import_module(f".{module}", __package__), name)
            made.append(found(*arguments) if arguments else found)
        return made[0](ctx, args)

    rule.__qualname__ = rule.__name__ = name
    return rule


@simple_enum
class AxisKind(EnumBody):
    """How a builtin's result axes come from its arguments' axes (see :class:`AxisMap`)."""

    ELEMENTWISE = "elementwise"  # the tensors' axes, broadcast together (NumPy rules)
    PERMUTE = "permute"  # x's axes permuted by `axis` (a permutation; None: swap the last two)
    RESHAPE = "reshape"  # x's axes regrouped into the shape `axis`, matched by size (C order)
    SPLIT_HEADS = "split_heads"  # [..., N, H*d] -> [..., H, N, d]: N kept, H and d split off
    MERGE_HEADS = "merge_heads"  # [..., H, N, d] -> [..., N, H*d]: N kept, H and d merged
    RESIZE = "resize"  # x's axes, the one named by `axis` resized (repeat: same index, copies)
    JOIN = "join"  # joined along `axis`: a new axis there (concat: in its place; stack: inserted)
    REDUCE = "reduce"  # x's axes without `axis` (None: all), or kept as 1 with `keepdims`
    CONTRACT = "contract"  # einsum: the subscripts name each axis
    CREATE = "create"  # new axes that come from no tensor argument (ones, causal_mask)
    OPAQUE = "opaque"  # new axes with no known relation to the arguments' (meaning stays silent)
    # x's axes with the one named by `axis` replaced by the index's axes (take, `E[ids]`);
    # with ``along`` (take_along_axis), the index has x's rank and only that axis is new.
    GATHER = "gather"
    # The last axis read as complex pairs or written back (view_as_complex drops it,
    # view_as_real adds one of 2, as_complex / as_real halve or double it): the other axes
    # keep their identity, so a rotary in complex form is followed as in real pairs.
    PAIRS = "pairs"


class AxisMap(NamedTuple):
    """How the result's axes map from the arguments' axes: data read by :mod:`meaning`.

    - ``kind``: one of :class:`AxisKind`.
    - ``tensors``: the parameters whose axes flow into the result, in order
      (`where`: condition, x, y; `concat`: its list parameter).
    - ``axis``: the parameter naming the axis (or permutation, or target shape)
      the builtin acts on; None when it has none.
    - ``keepdims``: the parameter that keeps a reduced axis as 1 (REDUCE).
    - ``keeps_values``: the result holds the argument's values, only moved
      (transpose, reshape, heads, repeat) or unchanged in expectation
      (dropout): softmax weights passed through it still sum to 1.
    - ``normalises``: the parameter naming the axis along which every slice of
      the result sums to 1 (softmax).
    - ``triangle``: the result is true (non-zero) only on one side of the diagonal
      of its last two axes: ``"lower"`` where the row index >= the column index
      (`causal_mask`, `tril`: a query row sees the keys up to itself), ``"upper"``
      where the column index >= the row index (`triu`). ``offset``: the parameter
      that moves the diagonal (`k`: 0 includes it; below it excludes it).
    - ``positions``: each value of the result is its index along its axis
      (`arange`): comparing two of them (`i >= j`) builds a triangle too.
    - ``fill``: the parameter whose number every entry of a created tensor holds
      (`full(shape, value)`): a triangle of it is a mask when it is `-inf`.

    Adding a builtin: pick the kind that says where each result axis comes from.
    An elementwise function is ``AxisMap(AxisKind.ELEMENTWISE)``; a builtin whose
    result axes cannot be matched with its arguments' is ``AxisMap(AxisKind.OPAQUE)``
    (the analysis then stays silent about them rather than guess).
    """

    kind: AxisKind
    tensors: tuple[str, ...] = ("x",)
    axis: str | None = None
    keepdims: str | None = None
    keeps_values: bool = False
    normalises: str | None = None
    triangle: str | None = None
    offset: str | None = None
    positions: bool = False
    fill: str | None = None
    index: str | None = None  # GATHER: the parameter holding the integer positions
    along: bool = False  # GATHER: take_along_axis (the index has x's rank)


class Builtin(Record, frozen=True):
    """Every fact of one builtin, in its row: a new builtin touches this row and the
    backends' op tables only."""

    name: str
    params: tuple[Param, ...]
    rule: Rule
    doc: str
    axes: AxisMap
    # the arguments that take each other's shape when one is an undeclared name, as the
    # operands of `+` do (shape inference, passes/infer.py)
    partners: tuple[str, ...] = ()
    # operations per element of the result in the report's cost (report/cost.py); 0: free
    # (a view, a constant) or counted by a rule of its own (reductions, einsum)
    cost: int = 0
    elementwise: bool = False  # a function of each element of x alone (`exp`, `gelu`)

    def param(self, name: str) -> Param | None:
        for param in self.params:
            if param.name == name:
                return param
        return None


# --- operators and helpers shared by rules (the common ones are in rules.py) -----------------


def matmul(ctx: Ctx, left: Value, right: Value) -> Value | None:
    """``left @ right`` (the arguments ``left`` and ``right`` of the context)."""
    assert left.shape is not None and right.shape is not None
    for side, value in ((codes.detail("side_left"), left), (codes.detail("side_right"), right)):
        if not value.shape:
            ctx.report(codes.MATMUL_RANK, None, side=side)
            return None
    lshape = left.shape if len(left.shape) > 1 else (symbolic.ONE,) + left.shape
    rshape = right.shape if len(right.shape) > 1 else right.shape + (symbolic.ONE,)
    inner_left, inner_right = lshape[-1], rshape[-2]
    verdict = ctx.dims.equal(inner_left, inner_right)
    if not verdict:
        decision = ctx.dims.decide(Claim.equal(inner_left, inner_right))
        rewrites, last_resorts = _matmul_fixes(ctx, left, right) if len(left.shape) > 1 \
            else ([], [])
        # A relation that would make the sizes equal comes before declaring an operand anew.
        fixes = [*rewrites, *needed_fixes(decision, ctx.anchor), *last_resorts]
        ctx.report(
            codes.MATMUL_INNER, None, notes=ctx.notes("left", "right"),
            help=[fix.help for fix in fixes], fixes=fixes,
            counterexample=counterexample(decision),
            relation=relation(decision), lhs_inner=to_text(inner_left),
            rhs_inner=to_text(inner_right), lhs_shape=left.text(), rhs_shape=right.text(),
        )
        return None
    batch = broadcast(ctx, Value(lshape[:-2]), Value(rshape[:-2]), codes.detail("op_batch_axes"))
    if batch is None:
        return None
    rows = lshape[-2:-1] if len(left.shape) > 1 else ()
    cols = rshape[-1:] if len(right.shape) > 1 else ()
    return Value(batch + rows + cols, element=value_rules.combined_element(left, right))


def _matmul_fixes(ctx: Ctx, left: Value, right: Value) -> tuple[list[Fix], list[Fix]]:
    """The edits that could repair ``left @ right``, most likely first: rewrites of the
    expression, then the last resorts (an operand declared anew, the left one transposed).
    Each is offered only if the spec re-checks clean with it (:mod:`shapecheck.fixcheck`);
    of those that do, the first that makes the whole spec verify. Transposing the left
    operand comes after declaring the right one anew: it changes what the rows of the
    product are, which in attention are the queries (`P.T @ V` is rarely meant; a value
    tensor declared with the wrong length often is)."""
    assert left.shape is not None and right.shape is not None
    lshape, rshape = left.shape, right.shape if len(right.shape) > 1 else right.shape + (symbolic.ONE,)
    left_text, right_text = ctx.text("left"), ctx.text("right")

    def fits(a: Dim, b: Dim) -> bool:
        return bool(ctx.dims.equal(a, b))

    def rewrite(new_left: str, new_right: str, safe: bool) -> Fix:
        return _replace(ctx, None, f"{new_left} @ {new_right}",
                        codes.help_text("transpose", fix=f"{new_left} @ {new_right}"), safe)

    candidates: list[Fix | None] = [_scores_untransposed(ctx, ctx.argument("left"))]
    redeclarations: list[Fix | None] = []
    if isinstance(ctx.argument("left"), nodes.Transpose) and \
            not isinstance(ctx.argument("right"), nodes.Transpose) and fits(lshape[-2], rshape[-1]):
        candidates.append(rewrite(_transposed(left_text), _transposed(right_text), True))  # `Q.T @ K`
    declared_right = ctx.declaration("right")
    weight = declared_right is not None and declared_right.kind == "param" and len(right.shape) == 2
    if weight and fits(lshape[-1], rshape[-1]):
        # A weight is more often declared the other way round ([out, in], PyTorch's
        # layout) than used untransposed.
        candidates.append(_redeclare(ctx, "right", (rshape[-1], rshape[-2]), right.is_bool))
    if len(right.shape) >= 2 and fits(lshape[-1], rshape[-1]):
        candidates.append(rewrite(left_text, _transposed(right_text), True))  # `Q @ K.T`
    if len(right.shape) >= 2 and fits(rshape[-1], lshape[-2]):
        candidates.append(rewrite(_operand(ctx, "right"), _operand(ctx, "left"), False))  # `P @ V`
    if len(lshape) >= 3 and fits(lshape[-3] * lshape[-1], rshape[-2]):
        candidates.append(rewrite(f"merge_heads({left_text})", right_text, False))
    inner = ctx.argument("right")
    if isinstance(inner, nodes.Call) and inner.func.name == "transpose" and inner.args:
        # `Q @ transpose(K, [3, 1, 2, 0])`: the permutation may be what is wrong.
        base = ctx.source(inner.args[0])
        candidates += [rewrite(left_text, _transposed(base), True), rewrite(left_text, base, True)]
    if len(right.shape) == 2:
        redeclarations.append(_redeclare(ctx, "right", (lshape[-1], rshape[-1]), right.is_bool))
    if fits(lshape[-2], rshape[-2]):
        redeclarations.append(rewrite(_transposed(left_text), right_text, True))
    if len(left.shape) == 2:
        redeclarations.append(_redeclare(ctx, "left", (lshape[-2], rshape[-2]), left.is_bool))
    return ([f for f in candidates if f is not None], [f for f in redeclarations if f is not None])


#: calls whose first argument the weights are made from (`softmax(S)`, `where(m, S, -inf)`)
_WEIGHTS_OF = frozenset({"softmax", "dropout", "where", "exp", "tanh", "sigmoid"})


def _scores_untransposed(ctx: Ctx, node: nodes.Expr | None, depth: int = 0) -> Fix | None:
    """`softmax(Q.T @ K) @ V` (or the scores defined before): the product the weights come
    from, its left factor transposed (`Q.T @ K`: [d, d] when Q and K are [N, d]), written
    `Q @ K.T` at its own statement. The error shows at the product with the values; the
    repair is where the scores are made (issue 31), offered, like every candidate, only
    where the spec then checks clean."""
    if node is None or depth > 6:
        return None
    node = nodes.strip_parens(node)
    if isinstance(node, nodes.Name):
        return _scores_untransposed(ctx, ctx.defined_as(node.name), depth + 1)
    if isinstance(node, nodes.BinOp) and node.op == "@":
        left, right = ctx.source(node.left), ctx.source(node.right)
        if isinstance(nodes.strip_parens(node.left), nodes.Transpose) and \
                not isinstance(nodes.strip_parens(node.right), nodes.Transpose):
            text = f"{_transposed(left)} @ {_transposed(right)}"
            help = codes.help_text("transpose_scores", fix=text, scores=ctx.source(node),
                                   line=node.span.line)
            return Fix(help, (Edit(node.span, text),), False)
        return None
    if isinstance(node, nodes.BinOp) and node.op in ("*", "/", "+", "-"):
        return _scores_untransposed(ctx, node.left, depth + 1) or \
            _scores_untransposed(ctx, node.right, depth + 1)
    if isinstance(node, nodes.Call) and node.func.name in _WEIGHTS_OF and node.args:
        made_from = node.args[1:] if node.func.name == "where" else node.args[:1]
        return next((fix for fix in (_scores_untransposed(ctx, arg, depth + 1)
                                     for arg in made_from) if fix is not None), None)
    return None


def _replace(ctx: Ctx, param: str | None, text: str, help: str, safe: bool) -> Fix:
    """Replace the argument ``param`` (``None``: the whole expression) with ``text``."""
    span = ctx.span(param)
    assert span is not None
    return Fix(help, (Edit(span, text),), safe)


def _redeclare(ctx: Ctx, param: str, shape: Shape, is_bool: bool) -> Fix | None:
    """Declare the operand ``param`` (an `input` or `param`) with ``shape`` instead."""
    declaration = ctx.declaration(param)
    if declaration is None:
        return None
    written = Value(shape, is_bool).text()
    help = codes.help_text("redeclare", name=declaration.name.name, kind=declaration.kind,
                           shape=written)
    return Fix(help, (Edit(declaration.shape.span, written),), safe=False)


def _operand(ctx: Ctx, param: str) -> str:
    """The argument's text, in parentheses where moving it could regroup it (`A @ B`)."""
    node = ctx.argument(param)
    text = ctx.text(param)
    return f"({text})" if isinstance(node, (nodes.BinOp, nodes.Unary)) else text


def _transposed(text: str) -> str:
    """The operand's text with its last two axes swapped: `K` -> `K.T`, `K.T` -> `K`."""
    for suffix in (".T", "^T"):
        if text.endswith(suffix) and _postfix(text[: -len(suffix)]) == text[: -len(suffix)]:
            return text[: -len(suffix)]
    return f"{_postfix(text)}.T"


def _postfix(text: str) -> str:
    simple = text.replace("_", "").isalnum() or text.endswith(")") or (
        text.endswith((".T", "^T")) and _postfix(text[:-2]) == text[:-2])
    return text if simple else f"({text})"


def has_rank(ctx: Ctx, value: Value, minimum: int, operation: str, operand: str) -> bool:
    """Report SC306 unless ``value`` (the argument ``x``) has at least ``minimum`` axes."""
    if value.rank >= minimum:
        return True
    ctx.report(codes.RANK, "x", operation=operation,
               requirement=codes.detail("at_least_axes", count=minimum),
               operand=operand, shape=value.text())
    return False


def transpose_last_two(ctx: Ctx, value: Value, operation: str, operand: str) -> Value | None:
    if not has_rank(ctx, value, 2, operation, operand):
        return None
    assert value.shape is not None
    return Value(value.shape[:-2] + (value.shape[-1], value.shape[-2]), value.is_bool,
                 element=value.element)


def _count(shape: Shape) -> Dim:
    return symbolic.product(shape)


# --- the rules --------------------------------------------------------------------------------


def _same_shape(ctx: Ctx, a: dict[str, Any], name: str = "") -> Value | None:
    x: Value = a["x"]
    if x.is_bool:
        text = ctx.text("x")
        ctx.report(codes.BOOL_ARITHMETIC, "x", operand=text,
                   operation=codes.detail("bool_in_builtin"),
                   help=[codes.help_text("apply_mask", mask=text)])
    if x.element == "complex":
        # exp, log, sqrt, cos, ... of complex numbers are complex; `abs` is real; the rest
        # (relu, the norms, softmax) take real numbers.
        if name in COMPLEX_FUNCTIONS:
            return Value(x.shape, element="complex")
        if name != "abs" and not real_argument(
                ctx, name or codes.detail("bool_in_builtin"), "x", x):
            return None
    if name in ("abs", "square") and x.element == "int":
        return Value(x.shape, element="int")  # T5's `abs(relative_position)` stays an integer
    return Value(x.shape)


def _elementwise(name: str) -> Rule:
    """The rule of one elementwise function: x's shape, its element type as `name` gives."""
    def rule(ctx: Ctx, a: dict[str, Any]) -> Value | None:
        return _same_shape(ctx, a, name)

    return rule


def _softmax(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    x: Value = a["x"]
    if resolve_axis(ctx, a["axis"], x) is None:
        return None
    return _same_shape(ctx, a, "softmax")


def _transpose(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    x: Value = a["x"]
    perm: tuple[int, ...] | None = a["perm"]
    if perm is None:
        return transpose_last_two(ctx, x, "`transpose`", ctx.text("x"))
    assert x.shape is not None
    if sorted(perm) != list(range(len(x.shape))):
        ctx.report(codes.PERMUTATION, "perm", perm=list(perm), last=len(x.shape) - 1)
        return None
    return Value(tuple(x.shape[p] for p in perm), x.is_bool, element=x.element)


def _reshape(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    x: Value = a["x"]
    target: Shape = a["shape"]
    assert x.shape is not None
    inferred = [i for i, d in enumerate(target) if symbolic.as_int(d) == -1]
    if len(inferred) > 1:
        ctx.report(codes.RESHAPE, "shape", source=x.text(), target=shape_text(target),
                   relation=codes.detail("reshape_ambiguous"),
                   source_count=to_text(_count(x.shape)),
                   target_count=codes.detail("reshape_many_inferred"))
        return None
    source_count = _count(x.shape)
    if inferred:
        known = _count(tuple(d for d in target if symbolic.as_int(d) != -1))
        verdict = ctx.dims.divides(source_count, known)
        if not verdict:
            decision = ctx.dims.decide(Claim.divides(source_count, known))
            ctx.report(codes.NOT_DIVISIBLE, "shape",
                       claim=ctx.dims.divisibility_claim(source_count, known, decision),
                       counterexample=counterexample(decision),
                       needed=_reshape_needed(ctx, x.shape, target, inferred[0], decision))
            return None
        filled = ctx.dims.quotient(source_count, known)
        target = target[: inferred[0]] + (filled,) + target[inferred[0] + 1:]
        return Value(target, x.is_bool, element=x.element)
    verdict = ctx.dims.equal(source_count, _count(target))
    if not verdict:
        decision = ctx.dims.decide(Claim.equal(source_count, _count(target)))
        ctx.report(codes.RESHAPE, "shape", notes=ctx.notes("x"),
                   needed=_reshape_needed(ctx, x.shape, target, None, decision),
                   counterexample=counterexample(decision),
                   source=x.text(), target=shape_text(target), relation=relation(decision),
                   source_count=to_text(source_count), target_count=to_text(_count(target)))
        return None
    return Value(target, x.is_bool, element=x.element)


def _reshape_needed(ctx: Ctx, source: Shape, target: Shape, inferred: int | None,
                    decision: Decision) -> Decision | None:
    """The relation a reshape needs, as a constraint: the element counts with the
    entries both shapes share cancelled (`D == H * d` rather than `N*D == N*H*d`)."""
    if decision.verdict is Verdict.DIFFERENT:
        return None  # no constraint can help counts that provably differ
    source_rest = [d for d in source if not any(ctx.dims.equal(d, t) for t in target)]
    target_rest = [d for i, d in enumerate(target)
                   if i != inferred and not any(ctx.dims.equal(d, s) for s in source)]
    if len(source_rest) == 1 and target_rest:
        product = symbolic.product(target_rest)
        claim = (Claim.divides if inferred is not None else Claim.equal)(source_rest[0], product)
        return ctx.dims.decide(claim)
    return decision


def _split_heads(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    x: Value = a["x"]
    heads: Dim = a["heads"]
    if not has_rank(ctx, x, 2, "`split_heads`", ctx.text("x")):
        return None
    assert x.shape is not None
    *batch, n, last = x.shape
    verdict = ctx.dims.divides(last, heads)
    if not verdict:
        decision = ctx.dims.decide(Claim.divides(last, heads))
        ctx.report(codes.SPLIT_HEADS, "x", notes=ctx.notes("x"), needed=decision,
                   counterexample=counterexample(decision),
                   last=to_text(last), shape=x.text(), heads=to_text(heads),
                   reason=ctx.dims.divisibility_claim(last, heads, decision))
        return None
    return Value((*batch, heads, n, ctx.dims.quotient(last, heads)), x.is_bool, element=x.element)


def _swapaxes(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """PyTorch's `x.transpose(a, b)`: two axes swapped. The permutation it makes is the
    call's `perm` for every later pass (as `transpose(x, [perm])`'s)."""
    x: Value = a["x"]
    first = resolve_axis(ctx, a["axis1"], x, "axis1")
    second = resolve_axis(ctx, a["axis2"], x, "axis2")
    if first is None or second is None:
        return None
    assert x.shape is not None
    perm = list(range(len(x.shape)))
    perm[first], perm[second] = second, first
    ctx.normalise("perm", tuple(perm))
    return Value(tuple(x.shape[p] for p in perm), x.is_bool)


def _transpose_2d(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """PyTorch's `x.t()`: a 2-D tensor transposed, a tensor of fewer axes as it is; more
    than 2 axes is SC306, as PyTorch refuses them. The permutation is the call's `perm`
    for every later pass (as `transpose(x, [perm])`'s)."""
    x: Value = a["x"]
    assert x.shape is not None
    if x.rank > 2:
        ctx.report(codes.RANK, "x", operation="`.t()`",
                   requirement=codes.detail("at_most_axes", count=2),
                   operand=ctx.text("x"), shape=x.text())
        return None
    perm = tuple(reversed(range(x.rank)))
    ctx.normalise("perm", perm)
    return Value(tuple(x.shape[p] for p in perm), x.is_bool, element=x.element)


def _section(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """Part `index` of `x` split into `sections` equal parts along `axis` (NumPy's
    `split(x, n)[i]`); with `size`, each part must have that size (PyTorch's
    `x.split(size)`, `unbind`: size 1)."""
    x: Value = a["x"]
    axis = resolve_axis(ctx, a["axis"], x)
    if axis is None:
        return None
    assert x.shape is not None
    length, sections, size = x.shape[axis], a["sections"], a["size"]
    index: Dim = a["index"]
    if not (ctx.dims.positive(index + 1) and ctx.dims.positive(sections - index)):
        ctx.report(codes.SPLIT_PARTS, "index", axis=to_text(length), shape=x.text(),
                   parts=codes.detail("equal_parts", count=to_text(sections)),
                   reason=codes.detail("no_such_part", index=to_text(index),
                                       count=to_text(sections)))
        return None
    if size is not None:
        verdict = ctx.dims.equal(length, sections * size)
        if not verdict:
            decision = ctx.dims.decide(Claim.equal(length, sections * size))
            ctx.report(codes.SPLIT_PARTS, "x", notes=ctx.notes("x"), needed=decision,
                       counterexample=counterexample(decision), axis=to_text(length),
                       shape=x.text(), parts=codes.detail("parts_of_size", count=to_text(sections),
                                                          size=to_text(size)),
                       reason=codes.detail("sizes_relation", left=to_text(length),
                                           right=to_text(sections * size),
                                           relation=relation(decision)))
            return None
        part = size
    else:
        verdict = ctx.dims.divides(length, sections)
        if not verdict:
            decision = ctx.dims.decide(Claim.divides(length, sections))
            ctx.report(codes.SPLIT_PARTS, "x", notes=ctx.notes("x"), needed=decision,
                       counterexample=counterexample(decision), axis=to_text(length),
                       shape=x.text(), parts=codes.detail("equal_parts", count=to_text(sections)),
                       reason=ctx.dims.divisibility_claim(length, sections, decision))
            return None
        part = ctx.dims.quotient(length, sections)
    ctx.normalise("axis", axis)
    shape = list(x.shape)
    shape[axis] = part
    return Value(tuple(shape), x.is_bool)


def _merge_heads(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    x: Value = a["x"]
    if not has_rank(ctx, x, 3, "`merge_heads`", ctx.text("x")):
        return None
    assert x.shape is not None
    *batch, heads, n, d = x.shape
    return Value((*batch, n, heads * d), x.is_bool, element=x.element)


def _repeat(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    x: Value = a["x"]
    axis = resolve_axis(ctx, a["axis"], x)
    if axis is None:
        return None
    assert x.shape is not None
    shape = list(x.shape)
    shape[axis] = shape[axis] * a["repeats"]
    return Value(tuple(shape), x.is_bool, element=x.element)


def _concat(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    parts: list[Value] = a["tensors"]
    if not parts:
        ctx.report(codes.CONCAT, "tensors", detail=codes.detail("concat_empty", builtin="concat"))
        return None
    first = parts[0]
    assert first.shape is not None
    axis = resolve_axis(ctx, a["axis"], first)
    if axis is None:
        return None
    for index, part in enumerate(parts[1:], start=2):
        assert part.shape is not None
        if len(part.shape) != len(first.shape):
            ctx.report(codes.CONCAT, "tensors", item=index - 1, detail=codes.detail(
                "concat_rank", index=index, shape=part.text(), rank=len(part.shape),
                first_shape=first.text(), first_rank=len(first.shape)))
            return None
        for i, (d1, d2) in enumerate(zip(first.shape, part.shape)):
            verdict = ctx.dims.equal(d1, d2) if i != axis else Verdict.PROVED
            if not verdict:
                decision = ctx.dims.decide(Claim.equal(d2, d1))
                ctx.report(codes.CONCAT, "tensors", counterexample=counterexample(decision),
                           needed=decision, detail=codes.detail(
                    "concat_axis", index=index, shape=part.text(), relation=relation(decision, to=True),
                    first_shape=first.text(), axis=i, size=to_text(d2), first_size=to_text(d1),
                    free_axis=axis))
                return None
    shape = list(first.shape)
    shape[axis] = symbolic.total(p.shape[axis] for p in parts)  # type: ignore[index]
    return Value(tuple(shape), all(p.is_bool for p in parts), element=_joined_element(parts))


def _where(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    cond: Value = a["condition"]
    if not cond.is_bool:
        declaration = ctx.declaration("condition")
        fixes = []
        if declaration is not None:  # declared, so it can be declared a mask
            written = Value(cond.shape, True).text()
            fixes = [Fix(codes.help_text("redeclare_bool", kind=declaration.kind,
                                         name=declaration.name.name, shape=written),
                         (Edit(declaration.shape.span, written),), safe=False)]
        ctx.report(codes.ELEMENT_TYPE, "condition", notes=ctx.notes("condition"),
                   help=[f.help for f in fixes] or [codes.help_text("use_where")], fixes=fixes,
                   detail=codes.detail("where_not_bool", text=ctx.text("condition"),
                                       shape=cond.text()))
        return None
    both = broadcast(ctx, a["x"], a["y"], "where", "y", ("x", "y"))
    if both is None:
        return None
    shape = broadcast(ctx, cond, Value(both), "where", "condition", ("condition", "x"))
    if shape is None:
        return None
    return Value(shape, a["x"].is_bool and a["y"].is_bool,
                 element=value_rules.combined_element(a["x"], a["y"]))


def _causal_mask(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    n: Dim = a["n"]
    keys: Dim = a["n_k"] if a["n_k"] is not None else n
    return Value((n, keys), is_bool=True)


def _triangle(name: str) -> Rule:
    """`tril` / `triu`: the shape and element type of x (data movement, no SC403)."""
    def rule(ctx: Ctx, a: dict[str, Any]) -> Value | None:
        x: Value = a["x"]
        return x if has_rank(ctx, x, 2, f"`{name}`", ctx.text("x")) else None

    return rule


def _stack(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    parts: list[Value] = a["tensors"]
    if not parts:
        ctx.report(codes.CONCAT, "tensors", detail=codes.detail("concat_empty", builtin="stack"))
        return None
    first = parts[0]
    assert first.shape is not None
    axis = resolve_axis(ctx, a["axis"], first, rank=first.rank + 1)  # an axis of the result
    if axis is None:
        return None
    for index, part in enumerate(parts[1:], start=2):
        assert part.shape is not None
        unequal = [(d1, d2) for d1, d2 in zip(first.shape, part.shape) if not ctx.dims.equal(d1, d2)]
        if part.rank != first.rank or unequal:
            decision = ctx.dims.decide(Claim.equal(*unequal[0])) if unequal else Decision(
                Verdict.DIFFERENT)
            ctx.report(codes.CONCAT, "tensors", notes=ctx.notes("tensors"),
                       counterexample=counterexample(decision), needed=decision,
                       detail=codes.detail("stack_shape", index=index, shape=part.text(),
                                           relation=relation(decision, to=True),
                                           first_shape=first.text()))
            return None
    shape = first.shape[:axis] + (symbolic.integer(len(parts)),) + first.shape[axis:]
    return Value(shape, all(p.is_bool for p in parts), element=_joined_element(parts))


def _joined_element(parts: list[Value]) -> str:
    """The element type of parts joined (`concat`, `stack`): as arithmetic combines them."""
    element = parts[0]
    for part in parts[1:]:
        element = Value((), element.is_bool and part.is_bool,
                        element=value_rules.combined_element(element, part))
    return element.element


def _constant(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    shape: Shape = a["shape"]
    if any(symbolic.as_int(d) == -1 for d in shape):
        ctx.report(codes.CALL_ARGS, "shape", detail=codes.detail("minus_one_outside_reshape"))
        return None
    return Value(shape)


def _normalise(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    x: Value = a["x"]
    if x.shape is not None and resolve_axis(ctx, -1, x, "x") is None:
        return None  # a scalar has no last axis to normalise over (SC305, as for softmax)
    if a["eps"] <= 0:
        ctx.report(codes.CALL_ARGS, "eps", detail=codes.detail("eps_not_positive", eps=a["eps"]))
        return None
    return _same_shape(ctx, a)


def _dropout(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    if not 0 <= a["p"] < 1:
        ctx.report(codes.CALL_ARGS, "p", detail=codes.detail("dropout_range", p=a["p"]))
        return None
    return _same_shape(ctx, a, "dropout")



X = Param("x", Kind.TENSOR)
OFFSET = Param("k", Kind.OFFSET, symbolic.integer(0), required=False)
# Elementwise functions of x alone (`elu` also takes `alpha`); in this order in the table.
_ELEMENTWISE_ORDER = ("exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu", "abs",
                      "cos", "sin", "silu", "softplus", "erf", "square", "rsqrt", "acos")
# The elementwise functions of complex numbers whose result is complex.
COMPLEX_FUNCTIONS = frozenset({"exp", "log", "sqrt", "tanh", "sigmoid", "cos", "sin", "square",
                               "rsqrt"})
AXIS_ROW = Param("axis", Kind.AXIS, "row", required=False)
EPS = Param("eps", Kind.NUMBER, 1e-5, required=False)


def _table() -> dict[str, Builtin]:
    same = AxisMap(AxisKind.ELEMENTWISE)
    rows = [
        Builtin("softmax", (X, AXIS_ROW), _softmax, "shape of x; each slice along `axis` sums to 1",
                AxisMap(AxisKind.ELEMENTWISE, normalises="axis"), cost=5),
        Builtin("transpose", (X, Param("perm", Kind.PERM, None, required=False)), _transpose,
                "without perm: swap the last two axes; with perm: permute the axes",
                AxisMap(AxisKind.PERMUTE, axis="perm", keeps_values=True)),
        Builtin("reshape", (X, Param("shape", Kind.SHAPE)), _reshape,
                "the given shape; element counts must be provably equal; one `-1` is inferred",
                AxisMap(AxisKind.RESHAPE, axis="shape", keeps_values=True)),
        Builtin("split_heads", (X, Param("heads", Kind.DIM)), _split_heads,
                "[..., N, H*d] -> [..., H, N, d], head-major",
                AxisMap(AxisKind.SPLIT_HEADS, keeps_values=True)),
        Builtin("swapaxes", (X, Param("axis1", Kind.AXIS), Param("axis2", Kind.AXIS),
                             Param("perm", Kind.PERM, None, required=False)), _swapaxes,
                "two axes swapped (np.swapaxes; PyTorch's x.transpose(a, b))",
                AxisMap(AxisKind.PERMUTE, axis="perm", keeps_values=True)),
        Builtin("transpose_2d", (X, Param("perm", Kind.PERM, None, required=False)), _transpose_2d,
                "PyTorch's x.t(): a 2-D tensor transposed, 0 or 1 axes unchanged",
                AxisMap(AxisKind.PERMUTE, axis="perm", keeps_values=True)),
        Builtin("section", (X, Param("index", Kind.OFFSET), Param("sections", Kind.DIM),
                            Param("axis", Kind.AXIS, 0, required=False),
                            Param("size", Kind.DIM, None, required=False)), _section,
                "part index of x split into equal sections along axis (np.split(x, n)[i])",
                AxisMap(AxisKind.RESIZE, axis="axis", keeps_values=True)),
        Builtin("merge_heads", (X,), _merge_heads, "[..., H, N, d] -> [..., N, H*d]",
                AxisMap(AxisKind.MERGE_HEADS, keeps_values=True)),
        Builtin("repeat", (X, Param("repeats", Kind.DIM), Param("axis", Kind.AXIS)), _repeat,
                "axis multiplied by repeats (NumPy repeat)",
                AxisMap(AxisKind.RESIZE, axis="axis", keeps_values=True)),
        Builtin("concat", (Param("tensors", Kind.TENSORS), Param("axis", Kind.AXIS, 0, required=False)),
                _concat, "sizes on axis add up; other axes equal",
                AxisMap(AxisKind.JOIN, tensors=("tensors",), axis="axis")),
        Builtin("layernorm", (X, EPS), _normalise, "shape of x; normalised over the last axis", same,
                cost=5),
        Builtin("rmsnorm", (X, EPS), _normalise, "shape of x; normalised over the last axis", same,
                cost=3),
        Builtin("where", (Param("condition", Kind.TENSOR), Param("x", Kind.TENSOR),
                          Param("y", Kind.TENSOR)), _where, "c is bool; the three broadcast",
                AxisMap(AxisKind.ELEMENTWISE, tensors=("condition", "x", "y")),
                partners=("condition", "x", "y")),
        Builtin("causal_mask", (Param("n", Kind.DIM), Param("n_k", Kind.DIM, None, required=False),
                                Param("window", Kind.DIM, None, required=False)), _causal_mask,
                "bool[N_q, N_k]: query i sees key j <= i + N_k - N_q (aligned bottom right); "
                "with window W, only the W most recent of them, its own included (Hugging Face's "
                "sliding_window; Mistral's reference is window=W+1)",
                AxisMap(AxisKind.CREATE, tensors=(), triangle="lower")),
        Builtin("tril", (X, OFFSET), _triangle("tril"), "shape of x; zero above diagonal k (np.tril)",
                AxisMap(AxisKind.ELEMENTWISE, triangle="lower", offset="k")),
        Builtin("triu", (X, OFFSET), _triangle("triu"), "shape of x; zero below diagonal k (np.triu)",
                AxisMap(AxisKind.ELEMENTWISE, triangle="upper", offset="k")),
        Builtin("arange", (Param("n", Kind.OFFSET), Param("stop", Kind.OFFSET, None, required=False),
                           Param("step", Kind.OFFSET, None, required=False)), value_rules.arange,
                "int[n]: 0, 1, ..., n - 1; arange(start, stop, step) as Python's range",
                AxisMap(AxisKind.CREATE, tensors=(), positions=True)),
        Builtin("stack", (Param("tensors", Kind.TENSORS), Param("axis", Kind.AXIS, 0, required=False)),
                _stack, "equal shapes; a new axis of size len(tensors) at axis",
                AxisMap(AxisKind.JOIN, tensors=("tensors",), axis="axis")),
        Builtin("elu", (X, Param("alpha", Kind.NUMBER, 1.0, required=False)), _same_shape,
                "elementwise; shape of x", same, cost=1, elementwise=True),
        Builtin("ones", (Param("shape", Kind.SHAPE),), _constant, "a constant of ones",
                AxisMap(AxisKind.CREATE, tensors=())),
        Builtin("zeros", (Param("shape", Kind.SHAPE),), _constant, "a constant of zeros",
                AxisMap(AxisKind.CREATE, tensors=())),
        Builtin("einsum", (Param("subscripts", Kind.STRING), Param("operands", Kind.TENSORS)),
                _deferred("einsum", "rule"), "NumPy einsum; `...` allowed",
                AxisMap(AxisKind.CONTRACT, tensors=("operands",), axis="subscripts")),
        Builtin("dropout", (X, Param("p", Kind.NUMBER, 0.0, required=False)), _dropout,
                "shape of x (identity when executed)",
                AxisMap(AxisKind.ELEMENTWISE, keeps_values=True)),
    ]
    for name in _ELEMENTWISE_ORDER:
        rows.append(Builtin(name, (X,), _elementwise(name), "elementwise; shape of x", same,
                            cost=1, elementwise=True))
    reductions = {"sum": value_rules.reduce, "mean": value_rules.reduce,
                  "max": value_rules.extreme, "min": value_rules.extreme}
    for name, rule in reductions.items():
        rows.append(Builtin(
            name,
            (X, Param("axis", Kind.AXES, None, required=False),
             Param("keepdims", Kind.BOOL, False, required=False)),
            rule, "the axes removed (kept as 1 with keepdims=true); all axes without axis",
            AxisMap(AxisKind.REDUCE, axis="axis", keepdims="keepdims"),
        ))
    rows.extend(_real_code_rows())
    return {row.name: row for row in rows}


def _real_code_rows() -> list[Builtin]:
    """The builtins real attention code uses beyond the contract's: cumulative and pairwise
    values, clamps, constants, logical and extreme reductions, complex values, gathers."""
    same = AxisMap(AxisKind.ELEMENTWISE)
    keep = Param("keepdims", Kind.BOOL, False, required=False)
    axes = Param("axis", Kind.AXES, None, required=False)
    descending = Param("descending", Kind.BOOL, False, required=False)
    rows = [
        Builtin("cumsum", (X, Param("axis", Kind.AXIS)), value_rules.cumulative,
                "shape of x; running sums along axis", same, cost=1),
        Builtin("cumprod", (X, Param("axis", Kind.AXIS)), value_rules.cumulative,
                "shape of x; running products along axis", same, cost=1),
        # x and y of `minimum`/`maximum` broadcast together, as the operands of `+`
        Builtin("minimum", (X, Param("y", Kind.TENSOR)), value_rules.pairwise("minimum"),
                "elementwise smaller of x and y; the two broadcast",
                AxisMap(AxisKind.ELEMENTWISE, tensors=("x", "y")), partners=("x", "y"), cost=1),
        Builtin("maximum", (X, Param("y", Kind.TENSOR)), value_rules.pairwise("maximum"),
                "elementwise larger of x and y; the two broadcast",
                AxisMap(AxisKind.ELEMENTWISE, tensors=("x", "y")), partners=("x", "y"), cost=1),
        Builtin("clamp", (X, Param("min", Kind.TENSOR, None, required=False),
                          Param("max", Kind.TENSOR, None, required=False)), value_rules.clamp,
                "shape of x; each value held within [min, max] (numbers, dims or tensors)",
                same, cost=2),  # two comparisons
        Builtin("full", (Param("shape", Kind.SHAPE), Param("value", Kind.TENSOR)),
                value_rules.full, "a constant of the given shape, every entry the value",
                AxisMap(AxisKind.CREATE, tensors=())),
        Builtin("tile", (X, Param("reps", Kind.SHAPE)), value_rules.tile,
                "x repeated reps times along each axis (NumPy tile, PyTorch's x.repeat)",
                AxisMap(AxisKind.OPAQUE)),
        Builtin("flatten", (X, Param("start", Kind.AXIS, 0, required=False),
                            Param("end", Kind.AXIS, -1, required=False)), value_rules.flatten,
                "the axes start..end (both included) merged into one (PyTorch's x.flatten)",
                AxisMap(AxisKind.RESHAPE, keeps_values=True)),
        Builtin("expand", (X, Param("shape", Kind.SHAPE)), value_rules.expand,
                "x broadcast to the shape (PyTorch's x.expand): -1 keeps a size, only size-1 "
                "axes grow, new axes only in front",
                AxisMap(AxisKind.ELEMENTWISE, tensors=("x",), keeps_values=True)),
        Builtin("all", (X, axes, keep), value_rules.logical_reduce,
                "bool: every value true (non-zero) along the axes",
                AxisMap(AxisKind.REDUCE, axis="axis", keepdims="keepdims")),
        Builtin("any", (X, axes, keep), value_rules.logical_reduce,
                "bool: some value true (non-zero) along the axes",
                AxisMap(AxisKind.REDUCE, axis="axis", keepdims="keepdims")),
        Builtin("amax", (X, axes, keep), value_rules.extreme,
                "the largest value along the axes (PyTorch's amax)",
                AxisMap(AxisKind.REDUCE, axis="axis", keepdims="keepdims")),
        Builtin("amin", (X, axes, keep), value_rules.extreme,
                "the smallest value along the axes (PyTorch's amin)",
                AxisMap(AxisKind.REDUCE, axis="axis", keepdims="keepdims")),
        Builtin("argmax", (X, Param("axis", Kind.AXIS, None, required=False), keep),
                value_rules.arg_extreme("argmax"), "int: where the largest value lies along the axis "
                "(without one, in x flattened)",
                AxisMap(AxisKind.REDUCE, axis="axis", keepdims="keepdims")),
        Builtin("argmin", (X, Param("axis", Kind.AXIS, None, required=False), keep),
                value_rules.arg_extreme("argmin"), "int: where the smallest value lies along the axis "
                "(without one, in x flattened)",
                AxisMap(AxisKind.REDUCE, axis="axis", keepdims="keepdims")),
        # Order along an axis: positions move, so the meaning pass follows none of them.
        Builtin("sort", (X, Param("axis", Kind.AXIS, -1, required=False), descending),
                value_rules.ordered(False), "shape of x; the values in order along the axis",
                AxisMap(AxisKind.OPAQUE)),
        Builtin("argsort", (X, Param("axis", Kind.AXIS, -1, required=False), descending),
                value_rules.ordered(True),
                "int, shape of x: the positions that put x in order along the axis",
                AxisMap(AxisKind.OPAQUE)),
        Builtin("flip", (X, axes), value_rules.flip,
                "shape of x; the order along the axes reversed (every axis without one)",
                AxisMap(AxisKind.OPAQUE)),
        Builtin("outer", (X, Param("y", Kind.TENSOR)), value_rules.outer,
                "[n] and [m] -> [n, m]: every product x[i] * y[j]",
                AxisMap(AxisKind.OPAQUE)),
        Builtin("ones_like", (X,), value_rules.like, "ones of x's shape and element type",
                AxisMap(AxisKind.ELEMENTWISE)),
        Builtin("zeros_like", (X,), value_rules.like, "zeros of x's shape and element type",
                AxisMap(AxisKind.ELEMENTWISE)),
        Builtin("full_like", (X, Param("value", Kind.TENSOR)), value_rules.full_like,
                "the value in x's shape and element type", AxisMap(AxisKind.ELEMENTWISE)),
        Builtin("long", (X,), value_rules.to_int,
                "int: x rounded toward zero (PyTorch's .long()); a mask gives 0 and 1",
                AxisMap(AxisKind.ELEMENTWISE)),
        # complex values
        Builtin("view_as_complex", (X,), _deferred("complex_values", "view_as_complex"),
                "[..., 2] -> complex[...]: the last axis as (real, imaginary)",
                AxisMap(AxisKind.PAIRS)),
        Builtin("view_as_real", (X,), _deferred("complex_values", "view_as_real"),
                "complex[...] -> [..., 2]: (real, imaginary) on a new last axis",
                AxisMap(AxisKind.PAIRS)),
        Builtin("as_complex", (X,), _deferred("complex_values", "as_complex"),
                "[..., 2*h] -> complex[..., h]: neighbours (2i, 2i+1) paired; even width",
                AxisMap(AxisKind.PAIRS)),
        Builtin("as_real", (X,), _deferred("complex_values", "as_real"),
                "complex[..., h] -> [..., 2*h]: the inverse of as_complex",
                AxisMap(AxisKind.PAIRS)),
        Builtin("polar", (Param("abs", Kind.TENSOR), Param("angle", Kind.TENSOR)),
                _deferred("complex_values", "polar"),
                "complex: abs * (cos(angle) + i sin(angle)); the two broadcast",
                AxisMap(AxisKind.ELEMENTWISE, tensors=("abs", "angle")), partners=("abs", "angle")),
        Builtin("real", (X,), _deferred("complex_values", "part", "real", False),
                "the real parts; shape of x",
                AxisMap(AxisKind.ELEMENTWISE)),
        Builtin("imag", (X,), _deferred("complex_values", "part", "imag", True),
                "the imaginary parts; shape of x",
                AxisMap(AxisKind.ELEMENTWISE)),
        Builtin("conj", (X,), _deferred("complex_values", "part", "conj", True),
                "the complex conjugates",
                AxisMap(AxisKind.ELEMENTWISE)),
        # integer tensors as positions
        Builtin("take", (X, Param("indices", Kind.TENSOR), Param("axis", Kind.AXIS)),
                _deferred("gathers", "take"), "x's axis replaced by the indices' axes (NumPy take)",
                AxisMap(AxisKind.GATHER, tensors=("x", "indices"), axis="axis", index="indices")),
        Builtin("index_select", (X, Param("axis", Kind.AXIS), Param("index", Kind.TENSOR)),
                _deferred("gathers", "index_select"),
                "x's axis replaced by the index vector's (PyTorch)",
                AxisMap(AxisKind.GATHER, tensors=("x", "index"), axis="axis", index="index")),
        Builtin("take_along_axis", (X, Param("indices", Kind.TENSOR), Param("axis", Kind.AXIS)),
                _deferred("gathers", "take_along_axis"),
                "indices of x's rank pick entries along axis (NumPy take_along_axis, torch.gather)",
                AxisMap(AxisKind.GATHER, tensors=("x", "indices"), axis="axis",
                        index="indices", along=True)),
        Builtin("index_copy", (X, Param("axis", Kind.AXIS), Param("index", Kind.TENSOR),
                               Param("source", Kind.TENSOR)), _deferred("gathers", "index_copy"),
                "x with the entries at index along axis replaced by source (a rolling cache)",
                AxisMap(AxisKind.ELEMENTWISE)),
        Builtin("scatter", (X, Param("axis", Kind.AXIS), Param("index", Kind.TENSOR),
                            Param("src", Kind.TENSOR)), _deferred("gathers", "scatter"),
                "x with src written at index along axis (torch.scatter)",
                AxisMap(AxisKind.ELEMENTWISE)),
    ]
    return rows


BUILTINS: dict[str, Builtin] = _table()
# The elementwise functions of x alone, read from their rows.
ELEMENTWISE = frozenset(name for name, row in BUILTINS.items() if row.elementwise)
# `einsum` takes its operands variadically after the subscripts.
VARIADIC = {"einsum": "operands"}
# Keywords accepted for another parameter: PyTorch's words (`softmax(S, dim=-1)`).
KEYWORD_SYNONYMS = {"dim": "axis", "keepdim": "keepdims"}

__all__ = ["BUILTINS", "AxisKind", "AxisMap", "Builtin", "Ctx", "Kind", "Param", "SCALAR",
           "axis_index", "broadcast", "constraint_help", "matmul", "needed_help"]
