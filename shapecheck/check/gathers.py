"""Integer tensors as indices (issue 21, item 3): the shape rules of the gathers (`take`,
`index_select`, `take_along_axis`, `x[ids]`) and of the writes at computed positions
(`index_copy`, `scatter`), and :func:`index_ranges`, the range each integer input admits.

A gather's shape never depends on the index's values, only on its shape: `E[ids]` of a
`[V, D]` table by `int[B, N]` ids is `[B, N, D]`. What the checker cannot prove, that
every index lies within its axis, the backends check at run time (an input error, with
the axis, its size and the offending value).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from ..messages import codes
from ..syntax import nodes
from .program import Program, Value
from .rules import Ctx, axis_index, broadcast, counterexample, resolve_axis
from ..symbolic import Claim, Dim, to_text

GATHERS = frozenset({"take", "index_select", "take_along_axis"})
WRITES = frozenset({"index_copy", "scatter"})


def _integer_index(ctx: Ctx, builtin: str, param: str, index: Value) -> bool:
    """The index of a gather holds integers (SC322 otherwise: a float or a mask)."""
    if index.element == "int":
        return True
    ctx.report(codes.WRONG_ELEMENT, param, notes=ctx.notes(param), detail=codes.detail(
        "index_not_int", builtin=builtin, text=ctx.text(param), shape=index.text()))
    return False


def take(ctx: Ctx, a: dict[str, Any], builtin: str = "take", param: str = "indices") -> Value | None:
    """`take(x, indices, axis)`: the axis replaced by the indices' axes (NumPy's take)."""
    x: Value = a["x"]
    index: Value = a[param]
    axis = resolve_axis(ctx, a["axis"], x)
    if axis is None or not _integer_index(ctx, builtin, param, index):
        return None
    assert x.shape is not None and index.shape is not None
    return Value(x.shape[:axis] + index.shape + x.shape[axis + 1:], x.is_bool, element=x.element)


def index_select(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`index_select(x, axis, index)` (PyTorch's order): a vector of indices."""
    index: Value = a["index"]
    if index.rank != 1:
        ctx.report(codes.RANK, "index", operation="`index_select`",
                   requirement=codes.detail("vector_only"),
                   operand=ctx.text("index"), shape=index.text())
        return None
    return take(ctx, a, "index_select", "index")


def take_along_axis(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`take_along_axis(x, indices, axis)`: indices of x's rank; on the other axes the
    two broadcast (NumPy's rule); the result has the indices' size on the axis."""
    x: Value = a["x"]
    index: Value = a["indices"]
    axis = resolve_axis(ctx, a["axis"], x)
    if axis is None or not _integer_index(ctx, "take_along_axis", "indices", index):
        return None
    assert x.shape is not None and index.shape is not None
    if index.rank != x.rank:
        ctx.report(codes.CALL_ARGS, "indices", detail=codes.detail(
            "take_along_rank", shape=x.text(), rank=x.rank, index_shape=index.text(),
            index_rank=index.rank))
        return None
    others = broadcast(ctx, Value(x.shape[:axis] + x.shape[axis + 1:]),
                       Value(index.shape[:axis] + index.shape[axis + 1:]),
                       "`take_along_axis`", "indices", ("x", "indices"))
    if others is None:
        return None
    shape = others[:axis] + (index.shape[axis],) + others[axis:]
    return Value(shape, x.is_bool, element=x.element)


def index_copy(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`index_copy(x, axis, index, source)`: x with the entries at ``index`` along the axis
    replaced by ``source`` (a rolling cache: `index_copy(cache, 1, positions % W, xk)`);
    source has x's shape with the axis of the index's length."""
    x: Value = a["x"]
    index: Value = a["index"]
    source: Value = a["source"]
    axis = resolve_axis(ctx, a["axis"], x)
    if axis is None or not _integer_index(ctx, "index_copy", "index", index):
        return None
    assert x.shape is not None and index.shape is not None and source.shape is not None
    if index.rank != 1:
        ctx.report(codes.RANK, "index", operation="`index_copy`",
                   requirement=codes.detail("vector_only"),
                   operand=ctx.text("index"), shape=index.text())
        return None
    expected = x.shape[:axis] + index.shape + x.shape[axis + 1:]
    if not _fits(ctx, source, expected, index, x, axis):
        return None
    return Value(x.shape, x.is_bool, element=x.element)


def scatter(ctx: Ctx, a: dict[str, Any]) -> Value | None:
    """`scatter(x, axis, index, src)` (PyTorch's): index of x's rank, src of the index's
    shape; ``x[..., index[i, j], ...] = src[i, j]`` along the axis."""
    x: Value = a["x"]
    index: Value = a["index"]
    source: Value = a["src"]
    axis = resolve_axis(ctx, a["axis"], x)
    if axis is None or not _integer_index(ctx, "scatter", "index", index):
        return None
    assert x.shape is not None and index.shape is not None and source.shape is not None
    if index.rank != x.rank:
        ctx.report(codes.CALL_ARGS, "index", detail=codes.detail(
            "take_along_rank", shape=x.text(), rank=x.rank, index_shape=index.text(),
            index_rank=index.rank))
        return None
    for i, (size, wanted) in enumerate(zip(index.shape, x.shape)):
        if i != axis and not ctx.dims.equal(size, wanted):
            decision = ctx.dims.decide(Claim.equal(size, wanted))
            ctx.report(codes.CALL_ARGS, "index", counterexample=counterexample(decision),
                       needed=decision, detail=codes.detail(
                           "scatter_size", index_shape=index.text(), shape=x.text(), axis=i,
                           index_size=to_text(size), size=to_text(wanted), free_axis=axis))
            return None
    if not _fits(ctx, source, index.shape, index, x, axis, param="src"):
        return None
    return Value(x.shape, x.is_bool, element=x.element)


def _fits(ctx: Ctx, source: Value, expected: tuple[Dim, ...], index: Value, x: Value,
          axis: int, param: str = "source") -> bool:
    """The values written have the shape the positions give (broadcasting as NumPy's
    assignment does: a scalar, or a size 1, fills its axis)."""
    assert source.shape is not None
    wanted = Value(expected)
    widened = broadcast(ctx, wanted, source, "`=`", param, ("x", param)) \
        if source.rank <= len(expected) else None
    if widened is not None and len(widened) == len(expected) and all(
            ctx.dims.equal(w, e) for w, e in zip(widened, expected)):
        return True
    if widened is None and source.rank <= len(expected):
        return False  # broadcast reported the axis that differs
    ctx.report(codes.CALL_ARGS, param, detail=codes.detail(
        "scatter_value", value=source.text(), index=index.text(), shape=x.text(), axis=axis,
        expected=wanted.text()))
    return False


def index_ranges(program: Program) -> dict[str, list[Dim]]:
    """Each integer input or param used directly as the index of a gather or a write, with
    the sizes of the axes it indexes: a generated one is drawn from 0 to the smallest."""
    found: dict[str, list[Dim]] = {}
    for info in program.calls.values():
        param = {"take": "indices", "take_along_axis": "indices"}.get(info.builtin, "index")
        if info.builtin not in GATHERS | WRITES:
            continue
        index, operand = info.args.get(param), info.args.get("x")
        if not isinstance(index, nodes.Name) or operand is None:
            continue
        tensor = program.tensors.get(index.name)
        shape = program.type_of(operand).shape
        if tensor is None or tensor.kind not in ("input", "param") or shape is None:
            continue
        rank = len(shape)
        found.setdefault(index.name, []).append(shape[axis_index(info.args["axis"], rank)])
    for read in _subscripts(program.statements):
        _subscript_ranges(program, read, found)
    return found


def _subscripts(roots: Any) -> list[nodes.Subscript]:
    """Every `x[...]` in the statements (a function of positions' body inlined there)."""
    found: list[nodes.Subscript] = []
    stack: list[Any] = [roots]
    while stack:
        current = stack.pop()
        if isinstance(current, (list, tuple)):
            stack.extend(current)
        elif is_dataclass(current) and not isinstance(current, type):
            if isinstance(current, nodes.Subscript):
                found.append(current)
            stack.extend(getattr(current, f.name) for f in fields(current))
    return found


def _subscript_ranges(program: Program, read: nodes.Subscript,
                      found: dict[str, list[Dim]]) -> None:
    """`x[ids[q_idx]]` (attention-gym's `offsets[document_id[q_idx]]`): an integer input
    read as the entry of `x` on an axis holds positions of that axis."""
    shape = program.type_of(read.operand).shape
    if shape is None or any(isinstance(i, (nodes.EllipsisIndex, nodes.NewAxis))
                            for i in read.indices):
        return
    for axis, item in enumerate(read.indices[:len(shape)]):
        shift = 0
        if isinstance(item, nodes.BinOp) and item.op == "+" and \
                isinstance(item.right, nodes.Integer):
            # `offsets[prefix_document_id[q_document] + 1]`: the ids end one short of it
            item, shift = item.left, int(item.right.value)
        source = item.operand if isinstance(item, nodes.Subscript) else item
        if not isinstance(source, nodes.Name):
            continue
        tensor = program.tensors.get(source.name)
        if tensor is not None and tensor.kind in ("input", "param") and \
                tensor.value.element == "int":
            found.setdefault(source.name, []).append(shape[axis] - shift)


__all__ = ["GATHERS", "WRITES", "index_copy", "index_ranges", "index_select",
           "scatter", "take", "take_along_axis"]
