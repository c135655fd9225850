"""Reads past an axis in a traced `mask_mod` or `score_mod` (issue 33; docs/torch.md,
"Reads out of range").

FlexAttention calls a mask function at every query and key of every head of every sample,
and a score function at every one of them too (eager, it builds the whole table; compiled,
every pair of a block it does not skip). A tensor the function reads, indexed by an
expression of the positions alone (`document_ids[h, q_idx]`, `bias[q_idx - kv_idx + 31]`),
is read at every value that expression takes over those ranges: where one lies past the
axis, the call reads out of range (eager: an index error; compiled: memory outside the
tensor, with no check).

The check evaluates the traced graph exactly, at the call's own sizes (the lengths of the
query, the keys, the heads and the samples the call was traced with), on the positions
alone: an index that depends on a value read from a tensor (`offsets[document_id[q_idx]]`)
depends on data the code does not state, and is not judged. Only reads past the end are
reported, and before the start only where PyTorch would not wrap the index either (below
`-size`): a negative index of `-size` to `-1` reads from the end in eager PyTorch, which
some code means. What is said is therefore true of the code at the sizes it was called at.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

#: an index table of more entries than this is not built (its sizes are a model's, not a test's)
_LARGEST = 1 << 24


@dataclass(frozen=True)
class Read:
    """One read past an axis: the fx node that reads, the tensor (a get_attr target), the
    axis, the offending index and the axis's size, and the positions it is read at."""

    node: Any
    target: str
    axis: int
    index: int
    size: int
    at: tuple[tuple[str, int], ...]


@dataclass
class _Ref:
    """A tensor the function reads (or part of it: `x[b]` of `x[b][q]`), as the get_attr
    target and the axes already indexed; None where an earlier entry was not one position."""

    target: str
    consumed: int | None


def out_of_range(graph: Any, params: tuple[str, ...], sizes: dict[str, int],
                 shapes: dict[str, tuple[int, ...]]) -> list[Read]:
    """The reads of ``graph`` (a traced mask or score function, ``params`` its parameters)
    past an axis, with ``sizes`` the ranges of the positions (`b`, `h`, `q_idx`, `kv_idx`)
    and ``shapes`` the sizes of each tensor it reads, by get_attr target."""
    import torch

    counts = [sizes[p] for p in ("b", "h", "q_idx", "kv_idx")]
    total = 1
    for count in counts:
        total *= count
    if total > _LARGEST or any(count <= 0 for count in counts):
        return []
    positions = {}
    for axis, (name, count) in enumerate(zip(("b", "h", "q_idx", "kv_idx"), counts)):
        view = [1, 1, 1, 1]
        view[axis] = count
        positions[name] = torch.arange(count).view(view)
    values: dict[Any, Any] = {}  # node -> a tensor or number of the positions alone, or a _Ref
    found: list[Read] = []
    roles = params[-4:]
    for node in graph.nodes:
        if node.op == "placeholder":
            role = ("b", "h", "q_idx", "kv_idx")[roles.index(node.target)] \
                if node.target in roles else None
            if role is not None:
                values[node] = positions[role]
        elif node.op == "get_attr":
            values[node] = _Ref(node.target, 0)
        elif node.op in ("call_function", "call_method"):
            value = _evaluate(node, values, shapes, counts, found)
            if value is not None:
                values[node] = value
    return found


def literals(graph: Any) -> set[int]:
    """The integers ``graph`` holds as numbers (arguments of its operations): a size the
    function was traced with may be among them, standing for a dim."""
    import torch.fx as fx

    found: set[int] = set()

    def note(item: Any) -> Any:
        if isinstance(item, int) and not isinstance(item, bool):
            found.add(abs(item))
        return item

    for node in graph.nodes:
        if node.op in ("call_function", "call_method"):
            fx.node.map_aggregate((node.args, node.kwargs), note)
    return found


def _evaluate(node: Any, values: dict[Any, Any], shapes: dict[str, tuple[int, ...]],
              counts: list[int], found: list[Read]) -> Any:
    import torch
    import torch.fx as fx

    if (node.target is operator.getitem or node.target == "__getitem__") \
            and isinstance(values.get(node.args[0]), _Ref):
        return _read(node, values[node.args[0]], values, shapes, counts, found)
    known = True

    def value_of(item: Any) -> Any:
        nonlocal known
        if isinstance(item, fx.Node):
            if item not in values or isinstance(values[item], _Ref):
                known = False
                return None
            return values[item]
        return item

    args = fx.node.map_aggregate(node.args, value_of)
    kwargs = fx.node.map_aggregate(node.kwargs, value_of)
    if not known:
        return None
    try:
        with torch.no_grad():
            if node.op == "call_method":
                result = getattr(args[0], node.target)(*args[1:], **kwargs)
            else:
                result = node.target(*args, **kwargs)
    except Exception:  # an operation the positions alone do not run: not judged
        return None
    return result if isinstance(result, (torch.Tensor, int, bool)) else None


def _read(node: Any, ref: _Ref, values: dict[Any, Any], shapes: dict[str, tuple[int, ...]],
          counts: list[int], found: list[Read]) -> _Ref | None:
    """`x[i, j]` or `x[i][j]`: each entry that is a position expression checked against its
    axis; the part read, for the next `[...]`."""
    import torch
    import torch.fx as fx

    shape = shapes.get(ref.target)
    if shape is None or ref.consumed is None:
        return None
    given = node.args[1] if isinstance(node.args[1], tuple) else (node.args[1],)
    axis = ref.consumed
    for item in given:
        if item is None or item is Ellipsis or isinstance(item, slice) or axis >= len(shape):
            return _Ref(ref.target, None)  # a new axis, a slice: later entries not placed
        index = values.get(item) if isinstance(item, fx.Node) else item
        if isinstance(index, (bool, torch.Tensor)) and getattr(index, "dtype", None) is torch.bool:
            return _Ref(ref.target, None)  # a boolean mask, not a position
        if isinstance(index, (int, torch.Tensor)) and not isinstance(index, _Ref):
            _check(node, ref.target, axis, torch.as_tensor(index), shape[axis], counts, found)
        axis += 1
    return _Ref(ref.target, axis)


def _check(node: Any, target: str, axis: int, index: Any, size: int, counts: list[int],
           found: list[Read]) -> None:
    import torch

    past = (index >= size) | (index < -size)
    if not bool(past.any()):
        return
    wide = torch.broadcast_to(past, torch.broadcast_shapes(past.shape, (1, 1, 1, 1)))
    first = [int(i) for i in torch.nonzero(wide)[0].tolist()]
    full = torch.broadcast_to(index, wide.shape)[tuple(first)]
    at = tuple((name, value) for name, value, count, width in zip(
        ("b", "h", "q_idx", "kv_idx"), first, counts, wide.shape) if width > 1)
    found.append(Read(node, target, axis, int(full), size, at))


__all__ = ["Read", "literals", "out_of_range"]
