"""Symbolic cost: floating-point operations per operation and statement, bytes per result.

Conventions (stated in the report): a matmul ``[a, b] @ [b, c]`` costs ``2·a·b·c`` and
batch axes multiply; elementwise operations and functions cost 1 per element of the
result (comparisons and `& | ~` too); softmax 5 per element (max, subtract, exp, sum,
divide); layernorm 5 and rmsnorm 3; a reduction 1 per input element; einsum 2 per term of
its sum (one multiply, one add); data movement (reshape, transposes, heads, repeat, concat,
stack, indexing and slicing, where, masks, tril/triu, arange, constants) 0.
Operations whose result is a scalar are not counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import field

from ..records import Record
from ..syntax import nodes
from ..check.builtins import BUILTINS
from ..check.program import Value
from ..symbolic import Dim, integer, product, total
from .context import ITEM_SIZES, Spec, einsum_terms, postorder

# Operations per element of the result: a fact of each builtin's row (`Builtin.cost`).
PER_ELEMENT = {name: row.cost for name, row in BUILTINS.items() if row.cost}
REDUCTIONS = frozenset({"sum", "mean", "max", "min", "amax", "amin", "all", "any"})


class StatementCost(Record):
    flops: Dim | None  # None: an operation in it has an unknown shape
    ops: Counter[str] = field(default_factory=Counter)


def numel(value: Value) -> Dim:
    assert value.shape is not None
    return product(value.shape)


def result_bytes(spec: Spec, value: Value) -> Dim | None:
    if value.shape is None:
        return None
    size = 1 if value.is_bool else ITEM_SIZES[spec.dtype]
    return integer(size) * numel(value)


def operation_cost(spec: Spec, node: nodes.Expr) -> tuple[str, Dim | None] | None:
    """(kind of operation, FLOPs) for a node that computes something; None otherwise."""
    if id(node) not in spec.program.types:
        return None  # not a value: a shape, an axis, a dim expression in an argument
    result = spec.value(node)
    if isinstance(node, nodes.BinOp):
        kind = "matmul" if node.op == "@" else "elementwise"
    elif isinstance(node, nodes.Unary):
        kind = "elementwise"
    elif isinstance(node, (nodes.Transpose, nodes.Subscript, nodes.Update)):
        return ("move", integer(0))  # a slice write copies; it computes nothing
    elif isinstance(node, nodes.Call):
        info = spec.program.calls.get(id(node))
        if info is None:
            return (node.func.name, None)
        kind = info.builtin
    else:
        return None
    if not result.known:
        return (kind, None)
    if result.rank == 0:
        return None
    return (_label(kind), _flops(spec, node, kind, result))


def _label(kind: str) -> str:
    if kind in ("matmul", "elementwise", "einsum"):
        return kind
    if kind in PER_ELEMENT:
        return kind if kind in ("softmax", "layernorm", "rmsnorm") else "elementwise"
    if kind in REDUCTIONS:
        return "reduce"
    return "move"


def _flops(spec: Spec, node: nodes.Expr, kind: str, result: Value) -> Dim | None:
    if kind == "matmul":
        assert isinstance(node, nodes.BinOp)
        left = spec.value(node.left)
        if left.shape is None:
            return None
        return integer(2) * numel(result) * left.shape[-1]
    if kind == "elementwise":
        return numel(result)
    if kind in PER_ELEMENT:
        return integer(PER_ELEMENT[kind]) * numel(result)
    if kind in REDUCTIONS:
        assert isinstance(node, nodes.Call)
        source = spec.value(spec.program.calls[id(node)].args["x"])
        return numel(source) if source.known else None
    if kind == "einsum":
        return _einsum_flops(spec, node, result)
    return integer(0)


def _einsum_flops(spec: Spec, node: nodes.Expr, result: Value) -> Dim | None:
    info = spec.program.calls[id(node)]
    operands = [spec.value(item) for item in info.args["operands"].items]
    found = einsum_terms(info.args["subscripts"], operands)
    if found is None:
        return None
    terms, output = found
    sizes = {letter: dim for pairs in terms for letter, dim in pairs}
    summed = sorted(set(sizes) - set(output))
    count = len(operands) if summed else len(operands) - 1
    return integer(count) * numel(result) * product(sizes[letter] for letter in summed)


def statement_cost(spec: Spec, value: nodes.Expr) -> StatementCost:
    flops: list[Dim] = []
    ops: Counter[str] = Counter()
    known = True
    for node in postorder(value):
        found = operation_cost(spec, node)
        if found is None:
            continue
        kind, cost = found
        if cost is None:
            known = False
            continue
        ops[kind] += 1
        flops.append(cost)
    return StatementCost(total(flops) if known else None, ops)
