"""The syntax tree: small dataclasses, each with the span it came from.

Nodes are treated as immutable; they are not declared ``frozen`` only because
frozen dataclasses are several times slower to build, and a 10,000-statement
spec builds hundreds of thousands of them. Side tables key them by ``id``.

One expression language serves values, shapes, dim definitions and
constraints; the checker decides what each position may hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import field, fields, is_dataclass

from ..messages.diagnostics import Span
from ..records import Record


class Ident(Record, slots=True):
    """A name as written, with its span."""

    name: str
    span: Span


# --- expressions -------------------------------------------------------------


class Name(Record, slots=True):
    name: str
    span: Span
    depth: int = 1


class Integer(Record, slots=True):
    value: int
    text: str
    span: Span
    depth: int = 1


class Decimal(Record, slots=True):
    value: float
    text: str
    span: Span
    depth: int = 1


class Inf(Record, slots=True):
    span: Span
    depth: int = 1


class Boolean(Record, slots=True):
    value: bool
    span: Span
    depth: int = 1


class String(Record, slots=True):
    value: str
    span: Span
    depth: int = 1


class AxisName(Record, slots=True):
    """`row` or `col`."""

    name: str
    span: Span
    depth: int = 1


class BinOp(Record, slots=True):
    op: str
    left: Expr
    right: Expr
    span: Span
    op_span: Span
    depth: int = 1


class Unary(Record, slots=True):
    op: str
    operand: Expr
    span: Span
    depth: int = 1


class Transpose(Record, slots=True):
    operand: Expr
    span: Span
    depth: int = 1


class Paren(Record, slots=True):
    inner: Expr
    span: Span
    depth: int = 1


class ListExpr(Record, slots=True):
    items: tuple[Expr, ...]
    span: Span
    depth: int = 1


class Slice(Record, slots=True):
    """`start:stop:step` inside `x[...]`; an omitted part is None."""

    start: Expr | None
    stop: Expr | None
    step: Expr | None
    span: Span
    depth: int = 1


class EllipsisIndex(Record, slots=True):
    """`...` inside `x[...]`: as many whole axes as the other entries leave."""

    span: Span
    depth: int = 1


class NewAxis(Record, slots=True):
    """`None` inside `x[...]`: a new axis of size 1."""

    span: Span
    depth: int = 1


class Subscript(Record, slots=True):
    """`x[i, a:b, ..., None]`: indexing and slicing with NumPy's meaning."""

    operand: Expr
    indices: tuple[Index, ...]
    span: Span
    bracket: Span  # from `[` to `]`
    depth: int = 1


class Keyword(Record, slots=True):
    name: Ident
    value: Expr
    span: Span
    depth: int = 1


class Call(Record, slots=True):
    func: Ident
    args: tuple[Expr, ...]
    keywords: tuple[Keyword, ...]
    span: Span
    depth: int = 1


class Method(Record, slots=True):
    """`x.transpose(1, 2)`, `torch.cat([a, b], dim=1)`: a PyTorch spelling, as parsed.
    :mod:`shapecheck.spellings` turns it into the builtin it names before checking."""

    receiver: Expr
    name: Ident
    args: tuple[Expr, ...]
    keywords: tuple[Keyword, ...]
    span: Span
    depth: int = 1


class Attribute(Record, slots=True):
    """`x.shape`, `torch.float32`, `F.softmax` (before a call): resolved by
    :mod:`shapecheck.spellings`, as :class:`Method` is."""

    receiver: Expr
    name: Ident
    span: Span
    depth: int = 1


class ShapeOf(Name, slots=True):
    """`x.shape[i]` or `x.size(i)`: the size of axis ``axis`` of the tensor ``tensor``,
    a dim. A :class:`Name` (``name`` is the text as written), so that it stands wherever
    a dim name may; the checker resolves it from the tensor's shape. ``rank``: from
    `B, T, C = x.shape`, the rank the tensor must have (the number of names)."""

    tensor: Name | None = None
    axis: int = 0
    rank: int | None = None


class Update(Record, slots=True):
    """`cache[:, P:P + S] = xk` after :mod:`shapecheck.versions`: the value of ``operand``
    with the part that ``indices`` select replaced by ``value`` (a new version of it)."""

    operand: Expr
    indices: tuple[Index, ...]
    value: Expr
    span: Span
    bracket: Span
    depth: int = 1


# Unions made with `|` (types.UnionType, made in C): typing's `Union[...]` costs ~0.2M
# instructions of every start each (issue 36); `isinstance` and annotations read both alike.
Expr = (Name | Integer | Decimal | Inf | Boolean | String | AxisName | BinOp | Unary | Transpose
        | Paren | ListExpr | Call | Subscript | Method | Attribute | Update)
Index = Expr | Slice | EllipsisIndex | NewAxis

# `BinOp.op` values: arithmetic (the operators a dim expression may use, and `@`),
# comparisons (elementwise, giving bool) and logic (on bool).
DIM_OPERATORS = frozenset({"+", "-", "*", "/", "//", "**"})
COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
LOGICAL = frozenset({"&", "|"})


class Shape(Record, slots=True):
    """`[N, H * d]`, optionally `bool[...]`, `int[...]` or `complex[...]`."""

    dims: tuple[Expr, ...]
    is_bool: bool
    span: Span
    element: str = ""  # "int" or "complex" (Value.element); bool is is_bool


# --- statements ----------------------------------------------------------------


class DimFree(Record, slots=True):
    names: tuple[Ident, ...]
    span: Span
    # `dim W window exclusive`: the words after a single dim (docs/language.md §10.3)
    conventions: tuple[Ident, ...] = ()


class DimDef(Record, slots=True):
    name: Ident
    value: Expr
    span: Span


class Constraint(Record, slots=True):
    left: Expr
    op: str
    right: Expr
    span: Span


class TensorDecl(Record, slots=True):
    kind: str  # "input" or "param"
    name: Ident
    shape: Shape
    span: Span
    conventions: tuple[Ident, ...] = ()  # `input pad: bool[B, N] keep` (§10.3)


class Define(Record, slots=True):
    name: Ident
    annotation: Shape | None
    value: Expr
    span: Span
    conventions: tuple[Ident, ...] = ()  # `rel: int[N, N] key_minus_query = ...` (§10.3)


class Assert(Record, slots=True):
    name: Ident
    shape: Shape
    span: Span


class Output(Record, slots=True):
    name: Ident
    annotation: Shape | None
    value: Expr | None
    span: Span


class Broken(Record, slots=True):
    """A statement that did not parse; its syntax error is already reported.

    ``defines`` holds the names it seemed to define (``S`` in ``S = Q @``,
    ``N`` and ``d`` in ``dim N d``), so later uses of them are not reported
    again as undefined.
    """

    defines: tuple[str, ...]
    is_dim: bool
    span: Span
    mentions: tuple[str, ...] = ()  # every name in it: they count as used


class Unpack(Record, slots=True):
    """`q, k, v = split(qkv, 3, axis=-1)`: one definition per target
    (:mod:`shapecheck.versions` turns it into them)."""

    targets: tuple[Ident, ...]
    value: Expr
    span: Span


class Write(Record, slots=True):
    """`cache[:, P:P + S] = xk`: a new version of ``target`` (:mod:`shapecheck.versions`
    turns it into a definition whose value is an :class:`Update`)."""

    target: Ident
    indices: tuple[Index, ...]
    value: Expr
    span: Span
    bracket: Span


class FunctionDef(Record, slots=True):
    """`def causal(q, k) = k <= q`: a mask (bool body) or a score change of positions.
    :mod:`shapecheck.syntax.functions` inlines its calls and takes it out of the statements
    the checker reads; the mask model (:mod:`shapecheck.masks`) reads it."""

    name: Ident
    params: tuple[Ident, ...]
    body: Expr
    span: Span


class ClaimItem(Record, slots=True):
    """One property in a claim: `causal`, `window(W)`, `reads_keys(pad)`."""

    word: Ident
    args: tuple[Expr, ...]
    span: Span


class Claim(Record, slots=True):
    """`assert sw: causal, window(W)`: properties of a function, proved by the mask model."""

    name: Ident
    items: tuple[ClaimItem, ...]
    span: Span
    lengths: tuple[Expr, ...] = ()  # `assert f(N, M): ...`: the query and key lengths


Stmt = (DimFree | DimDef | Constraint | TensorDecl | Define | Assert | Output | Broken | Unpack
        | Write | FunctionDef | Claim)


class Functions(Record):
    """The functions a spec defines and the claims it makes about them
    (:func:`shapecheck.syntax.functions.inline` fills it; the mask model reads it)."""

    definitions: dict[str, FunctionDef] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    # flex_attention calls: (mask function or None, score function or None, Q, K, span)
    applications: list[tuple[str | None, str | None, str, str, Span]] = field(default_factory=list)
    # Mask functions a statement calls at every position (a Hugging Face table:
    # `f(arange(B)[:, None, None, None], ..., arange(T)[None, None, None, :])`): the function,
    # the length each role's `arange` spans, the call.
    tables: list[tuple[str, dict[str, Expr], Span]] = field(default_factory=list)
    # The functions each function's body calls: they share its query and key lengths,
    # unless they are called with moved positions (`f(b, h, q_idx + P, kv_idx)`, a decode
    # step's offset): those read positions of their own, and are in `moved`.
    calls: dict[str, set[str]] = field(default_factory=dict)
    moved: dict[str, set[str]] = field(default_factory=dict)
    # Every name the definitions and claims read (dims, inputs): they count as used.
    mentions: set[str] = field(default_factory=set)


def defines_functions(statements: Iterable[Stmt], source: str) -> bool:
    """Has :func:`shapecheck.syntax.functions.inline` work here: a function defined, a claim
    stated, or `flex_attention` named? A spec without (every spec before functions of
    positions) is not walked, and a plain `verify` never loads that module (issue 36)."""
    return any(isinstance(s, (FunctionDef, Claim)) for s in statements) \
        or "flex_attention" in source


def declared_dims(statements: Iterable[Stmt]) -> set[str]:
    """The dims these statements declare (`dim N, d` and `dim D = H * d`)."""
    names: set[str] = set()
    for statement in statements:
        if isinstance(statement, DimFree):
            names.update(ident.name for ident in statement.names)
        elif isinstance(statement, DimDef):
            names.add(statement.name.name)
    return names


def strip_parens(node: Expr) -> Expr:
    """The expression inside any parentheses: `((Q))` is `Q`."""
    while isinstance(node, Paren):
        node = node.inner
    return node


def children(node: Expr | Index) -> Iterator[Expr]:
    """The sub-expressions of a node, in source order (index parts included)."""
    if isinstance(node, BinOp):
        yield node.left
        yield node.right
    elif isinstance(node, (Unary, Transpose)):
        yield node.operand
    elif isinstance(node, Paren):
        yield node.inner
    elif isinstance(node, ListExpr):
        yield from node.items
    elif isinstance(node, Call):
        yield from node.args
        for keyword in node.keywords:
            yield keyword.value
    elif isinstance(node, (Method, Attribute)):
        yield node.receiver
        if isinstance(node, Method):
            yield from node.args
            for keyword in node.keywords:
                yield keyword.value
    elif isinstance(node, (Subscript, Update)):
        yield node.operand
        for index in node.indices:
            if isinstance(index, Slice):
                yield from (part for part in (index.start, index.stop, index.step) if part is not None)
            elif not isinstance(index, (EllipsisIndex, NewAxis)):
                yield index
        if isinstance(node, Update):
            yield node.value


def depth_of(expr: Expr | None) -> int:
    return 0 if expr is None else expr.depth


def field_names(kind: type) -> tuple[str, ...]:
    """The fields of a dataclass (a node class), worked out once per class; () for any other
    type. The walks over every node of every statement on each check of an editor's
    document read it (``fields`` and ``is_dataclass`` per node cost more than the walk)."""
    found = _FIELD_NAMES.get(kind)
    if found is None:
        found = _FIELD_NAMES[kind] = tuple(f.name for f in fields(kind)) \
            if is_dataclass(kind) else ()
    return found


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def names_in(node: object) -> Iterator[str]:
    """Every name an expression, shape or statement uses (``Name`` nodes, not the names it
    defines). Generic over the node classes, so a new kind of node needs nothing here."""
    stack: list[object] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Name):
            yield current.name
        elif isinstance(current, tuple) and not isinstance(current, Span):
            stack.extend(current)
        else:  # a class (a type) has no fields to follow: field_names says ()
            stack.extend(getattr(current, name) for name in field_names(type(current)))
