"""Objects a module is called with that torch.export does not know (a KV cache object, a
config-like holder of tensors): made pytree nodes so that they can be traced inputs.

A model passes its attention module a cache object (``past_key_values``) on every call;
``torch.export`` refuses any input type it cannot flatten. Registering the type with a
flattening that keeps every tensor reachable through its attributes (and lists, tuples,
dicts of them) as a leaf, and everything else as context, lets the module be traced as
its model calls it, with no knowledge of the library that made the object.
"""

from __future__ import annotations

import functools
import types
from typing import Any

_PRIMITIVE = (type(None), bool, int, float, str, bytes, complex)
_CODE = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)


def register_inputs(values: Any) -> None:
    """Make every object type among ``values`` (nested) a pytree node torch can flatten."""
    import torch.utils._pytree as pytree

    def visit(value: Any, depth: int) -> None:
        if depth > 6 or isinstance(value, _PRIMITIVE) or _is_tensor(value):
            return
        if isinstance(value, (list, tuple)):
            for item in value:
                visit(item, depth + 1)
            return
        if isinstance(value, dict):
            for item in value.values():
                visit(item, depth + 1)
            return
        kind = type(value)
        if kind in pytree.SUPPORTED_NODES or not hasattr(value, "__dict__"):
            return
        try:
            pytree.register_pytree_node(kind, _flatten, _unflatten,
                                        serialized_type_name=f"{kind.__module__}.{kind.__qualname__}",
                                        flatten_with_keys_fn=_flatten_with_keys)
        except ValueError:  # registered meanwhile
            pass

    visit(values, 0)


def is_registered(value: Any) -> bool:
    """Whether ``value``'s type is flattened here (its dynamic shapes are its leaves')."""
    import torch.utils._pytree as pytree

    node = pytree.SUPPORTED_NODES.get(type(value))
    return node is not None and node.flatten_fn is _flatten


def leaves(value: Any) -> list[Any]:
    """The tensors of an object this module flattens, in order."""
    return _flatten(value)[0]


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _flatten(value: Any) -> tuple[list[Any], Any]:
    leaves: list[Any] = []
    return leaves, _context(value, leaves, 0)


def _flatten_with_keys(value: Any) -> tuple[list[Any], Any]:
    import torch.utils._pytree as pytree

    leaves, context = _flatten(value)
    return [(pytree.SequenceKey(i), leaf) for i, leaf in enumerate(leaves)], context


def _context(value: Any, leaves: list[Any], depth: int) -> Any:
    """``value`` with its tensors replaced by their index among ``leaves``."""
    if _is_tensor(value):
        leaves.append(value)
        return ("leaf", len(leaves) - 1)
    if depth > 6 or isinstance(value, _PRIMITIVE) or isinstance(value, _CODE):
        return ("value", value)  # a function (a mask_mod) is kept, never rebuilt
    if isinstance(value, (list, tuple)):
        return ("seq", type(value), [_context(v, leaves, depth + 1) for v in value])
    if isinstance(value, dict):
        return ("map", type(value), {k: _context(v, leaves, depth + 1) for k, v in value.items()})
    if hasattr(value, "__dict__"):
        state = {k: _context(v, leaves, depth + 1) for k, v in vars(value).items()}
        return ("object", type(value), state)
    return ("value", value)


def _unflatten(leaves: Any, context: Any) -> Any:
    return _rebuild(context, list(leaves))


def _rebuild(context: Any, leaves: list[Any]) -> Any:
    tag = context[0]
    if tag == "leaf":
        return leaves[context[1]]
    if tag == "value":
        return context[1]
    if tag == "seq":
        items = [_rebuild(c, leaves) for c in context[2]]
        try:
            return context[1](items)
        except TypeError:  # a named tuple takes its items positionally
            return context[1](*items)
    if tag == "map":
        return context[1]({k: _rebuild(c, leaves) for k, c in context[2].items()})
    instance = context[1].__new__(context[1])
    instance.__dict__.update({k: _rebuild(c, leaves) for k, c in context[2].items()})
    return instance
