"""A view of a tensor written in place through that view, read back as what was written.

``y = x.view(...)[..., :n]; y *= m`` (Funnel's ``positional_attn *= cls_mask`` on the view
its relative shift returns) is, in the functional graph torch.export records, the product,
then the base rebuilt around it (the view's inverse: one ``slice_scatter`` per slice, one
``view`` per reshape), then ``y`` viewed again from the rebuilt base by the same chain. Read
so, the spec would say the product, the base's other entries concatenated around it, and
the view taken again: a nest the meaning pass cannot see through (a shift's rows written
back into the base read as a reshape that moves an axis). The chain undoes itself by three
identities, each exact whatever the sizes:

- ``x[a:b]`` of ``slice_scatter(base, src, a, b)`` along the same axis is ``src``;
- ``reshape(reshape(y, s), shape(y))`` is ``y`` (a reshape keeps the element order);
- a slice of a whole axis, and a ``slice_scatter`` of a whole axis (``src`` as large as
  ``base``), are their operand.

:func:`read_back` follows them from a slice or a view to the node whose value it is, or says
there is none (the slice reads another part than was written: the spec keeps the nest).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: a slice's open end as torch records it (`x[1:]`: 2**63 - 1)
_OPEN = 2 ** 62
_VIEWS = ("view.default", "reshape.default", "_unsafe_view.default")


def read_back(node: Any) -> Any | None:
    """The node a slice or a view of a written-back tensor is (its write's source, or the
    tensor a reshape back undoes), or None where the identities above reach none."""
    if _name(node) not in ("slice.Tensor", *_VIEWS):
        return None
    found = _through(node)
    return found if found is not node else None


def unread(graph: Any, operands: Callable[[Any], list[Any]]) -> set[Any]:
    """The nodes the spec does not read, where a node's lowering reads ``operands(node)``
    (a read-back view reads what was written, not the base rebuilt around it): the base's
    other entries, re-viewed to be written around the update; a part of a several-output
    operator that nothing reads (an adaptive max pooling's indices). Torch's graph holds no
    other unread node but those kept for their effect (asserts), kept."""
    needed: set[Any] = set()
    pending = [node for node in graph.nodes if node.op == "output" or not node.users
               and getattr(node.target, "__name__", "") != "getitem"]
    while pending:
        node = pending.pop()
        if node not in needed:
            needed.add(node)
            pending.extend(operands(node))
    return {node for node in graph.nodes if node.op == "call_function" and node not in needed}


def _through(node: Any) -> Any:
    """``node`` with the identities above undone, as far as they reach."""
    while True:
        following = _identity_of(node)
        if following is None:
            return node
        node = following


def _identity_of(node: Any) -> Any | None:
    name = _name(node)
    if name == "slice.Tensor" and _step(node, 4) == 1:
        return node.args[0] if _whole(node, *_bounds(node)) else _slice_of_write(node)
    if name == "slice_scatter.default" and _step(node, 5) == 1 and _whole(node, *_bounds(node)):
        return node.args[1]
    if name in _VIEWS:
        return _view_of_view(node)
    return None


def _slice_of_write(node: Any) -> Any | None:
    """``slice(slice_scatter(base, src, axis, a, b), axis, a, b)`` -> ``src``."""
    operand = _through(node.args[0])
    if _name(operand) != "slice_scatter.default" or _step(operand, 5) != 1:
        return None
    rank = len(_shape(node))
    axis, start, end = _bounds(node)
    written_axis, written_start, written_end = _bounds(operand)
    if axis % rank != written_axis % rank:
        return None
    size = _shape(operand)[axis % rank]
    same = _normal_start(start) == _normal_start(written_start) and \
        _normal_end(end, size) == _normal_end(written_end, size)
    return operand.args[1] if same else None


def _view_of_view(node: Any) -> Any | None:
    """``reshape(reshape(y, s), shape(y))`` -> ``y``."""
    inner = _through(node.args[0])
    if _name(inner) not in _VIEWS or not _same_count_shape(_shape(inner.args[0]), _shape(node)):
        return None
    return inner.args[0]


def _same_count_shape(one: tuple[str, ...] | None, other: tuple[str, ...] | None) -> bool:
    """Two shapes of as many elements (a view's and its base's) that are one: of one rank,
    every axis but at most one written alike (the other then holds the same count; torch
    writes one size in forms it cannot always prove equal, `s32*(s0//s32)` and
    `(s32**2*(s0//s32))//s0` where `s0` is a multiple of `s32`)."""
    if one is None or other is None or len(one) != len(other):
        return False
    return sum(a != b for a, b in zip(one, other)) <= 1


def _bounds(node: Any) -> tuple[int, Any, Any]:
    args = node.args
    axis = args[1] if len(args) > 1 else node.kwargs.get("dim", 0)
    if _name(node) == "slice_scatter.default":
        axis = args[2] if len(args) > 2 else node.kwargs.get("dim", 0)
        return axis, (args[3] if len(args) > 3 else node.kwargs.get("start")), \
            (args[4] if len(args) > 4 else node.kwargs.get("end"))
    return axis, (args[2] if len(args) > 2 else node.kwargs.get("start")), \
        (args[3] if len(args) > 3 else node.kwargs.get("end"))


def _step(node: Any, position: int) -> Any:
    return node.args[position] if len(node.args) > position else node.kwargs.get("step", 1)


def _whole(node: Any, axis: int, start: Any, end: Any) -> bool:
    """Whether a slice (or a slice write) spans its operand's whole axis."""
    shape = _shape(node.args[0]) or ()
    if not shape:
        return False
    size = shape[axis % len(shape)]
    return _normal_start(start) == "0" and \
        _normal_end(end, size) == str(size)


def _normal_start(start: Any) -> str:
    return "0" if start is None else _text(start)


def _normal_end(end: Any, size: Any) -> str:
    if end is None or isinstance(end, int) and end >= _OPEN:
        return str(size)
    return _text(end)


def _text(value: Any) -> str:
    """A bound as traced (an FX node of a size stands for its SymInt), as text."""
    if hasattr(value, "op"):
        value = value.meta.get("val")
    return str(value)


def _shape(node: Any) -> tuple[str, ...] | None:
    value = node.meta.get("val") if hasattr(node, "meta") else None
    shape = getattr(value, "shape", None)
    return tuple(str(size) for size in shape) if shape is not None else None


def _name(node: Any) -> str:
    if getattr(node, "op", None) != "call_function":
        return ""
    text = str(node.target)
    return text[len("aten."):] if text.startswith("aten.") else text
