"""The attention layers of a whole model, found and captured in runs of the model.

:func:`find` runs the model on its example inputs twice. The first run watches every torch
function the model calls (a ``TorchFunctionMode``) with a stack of the modules being run:
a module is an **attention layer** when, inside it and in none of its parameter-holding
submodules, it calls ``scaled_dot_product_attention`` (or ``multi_head_attention_forward``,
``flex_attention``), or both a ``softmax`` and a product of two tensors that are not
parameters (``q @ k.transpose(-2, -1)``). A parameter-free helper module (an ``Attend``
given ``q, k, v``, an ``nn.Softmax``) counts for the module that holds it. The second run
captures each layer's first call with a forward pre-hook, exactly as the model makes it
(its masks, caches, positions), and the Python line that made each tensor it is passed.

:func:`group` puts together the layers that would be traced alike: the same code (the
classes and ``forward`` of the layer and of its submodules), the same settings (their int,
float, bool and str attributes, layer numbers aside), the same parameter shapes, and calls
of the same form (shapes, dtypes, the contents of masks and flags).
"""

from __future__ import annotations

import copy
import inspect
import re
import sys
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import Location

#: torch functions that compute attention whole
ATTENTION_CALLS = frozenset({"scaled_dot_product_attention", "multi_head_attention_forward",
                             "flex_attention"})
_SOFTMAX = frozenset({"softmax", "_softmax", "softmax_"})
_PRODUCTS = frozenset({"matmul", "__matmul__", "__rmatmul__", "bmm", "einsum", "baddbmm"})
#: attributes that number a layer rather than set it up
_INDEX = re.compile(r"(^|_)(layer_?idx|layer_?id|layer_?index|layer_?number|layer_?num|"
                    r"block_?idx|block_?id|idx|index|layer)$")
_PRIMITIVE = (bool, int, float, str, type(None))
#: masks and tables up to this many entries are compared by their contents
_DIGEST_LIMIT = 1 << 16


@dataclass
class Layer:
    """One attention layer: its name in the model, the module, and its first call."""

    name: str
    module: Any
    call: dict[str, Any]                       # forward's arguments by name, as passed
    made_at: dict[str, Location] = field(default_factory=dict)  # argument -> its line
    #: argument -> the lines of the `arange` calls its values were computed from (the
    #: positions a model numbers its tokens with; a tuple's: those of all its tensors)
    positions_from: dict[str, tuple[Location, ...]] = field(default_factory=dict)


@dataclass
class Group:
    """Layers traced alike: the first is checked, the diagnostics cover them all."""

    layers: list[Layer]

    @property
    def first(self) -> Layer:
        return self.layers[0]

    @property
    def label(self) -> str:
        return span_of_names([layer.name for layer in self.layers])


def find(model: Any, inputs: dict[str, Any]) -> list[Layer] | None:
    """The attention layers below ``model``, each with its first call; None when the model
    does not run on its inputs or holds no attention layer below itself (it is one, or
    has none)."""
    model.eval()  # as it is traced: dropout off, the masks and branches of inference
    owners = _attention_owners(model, inputs)
    if owners is None or not owners or any(m is model for m in owners):
        return None
    return _captured(model, inputs, owners)


def group(layers: list[Layer]) -> list[Group]:
    """Layers by what their trace depends on, in the model's order."""
    groups: dict[Any, Group] = {}
    for layer in layers:
        key = (_code_key(layer.module), _signature(layer.call))
        if key in groups:
            groups[key].layers.append(layer)
        else:
            groups[key] = Group([layer])
    return list(groups.values())


def span_of_names(names: list[str]) -> str:
    """``model.layers.0–3.self_attn`` for names that differ in one number only (in a row),
    ``model.h.{0,2}.attn`` for numbers not in a row; else the names, comma-separated."""
    if len(names) == 1:
        return names[0]
    split = [name.split(".") for name in names]
    if len({len(parts) for parts in split}) == 1:
        differing = [i for i in range(len(split[0])) if len({p[i] for p in split}) > 1]
        if len(differing) == 1 and all(p[differing[0]].isdigit() for p in split):
            at = differing[0]
            numbers = [int(p[at]) for p in split]
            run = numbers == list(range(numbers[0], numbers[0] + len(numbers)))
            middle = f"{numbers[0]}–{numbers[-1]}" if run else \
                "{" + ",".join(str(n) for n in numbers) + "}"
            return ".".join([*split[0][:at], middle, *split[0][at + 1:]])
    return ", ".join(names)


# --- the runs ------------------------------------------------------------------------------


def _run(model: Any, inputs: dict[str, Any]) -> bool:
    import torch

    from .tables import recorded

    try:
        # the mask tables HF's masking_utils makes carry their functions (tables.py)
        with torch.no_grad(), warnings.catch_warnings(), recorded():
            warnings.simplefilter("ignore")
            model(**inputs)
    except Exception:  # the model does not run as given: the single-module path says why
        return False
    return True


def _attention_owners(model: Any, inputs: dict[str, Any]) -> list[Any] | None:
    """The modules that compute attention themselves, in the model's order."""
    watch = _Watch(model, lines=False)
    with watch:
        ran = _run(model, copy.deepcopy(inputs))
    if not ran:
        return None
    found = {id(m) for m, kinds in watch.kinds.values()
             if kinds & ATTENTION_CALLS or kinds >= {"softmax", "product"}}
    return [m for m in model.modules() if id(m) in found]


def _captured(model: Any, inputs: dict[str, Any], owners: list[Any]) -> list[Layer] | None:
    names = {id(m): name for name, m in model.named_modules()}
    layers: dict[int, Layer] = {}
    watch = _Watch(model, lines=True)

    def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if id(module) in layers:
            return  # a layer the model calls again (shared weights) is checked at its first call
        call = _named_call(module, args, kwargs)
        made = {name: watch.made_at(value) for name, value in call.items()}
        positions = {name: lines for name, value in call.items()
                     if (lines := watch.positions_of(value))}
        # A copy: the layer then writes this call's keys into the cache object it was given.
        layers[id(module)] = Layer(names[id(module)], module, copy.deepcopy(call),
                                   {n: where for n, where in made.items() if where is not None},
                                   positions)

    handles = [m.register_forward_pre_hook(hook, with_kwargs=True) for m in owners]
    try:
        with watch:
            ran = _run(model, copy.deepcopy(inputs))
    finally:
        for handle in handles:
            handle.remove()
    if not ran:
        return None
    return [layers[id(m)] for m in owners if id(m) in layers]


def _named_call(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call as forward's arguments by name: positional arguments get their parameter's
    name, ``**kwargs`` are spread as the model passed them."""
    signature = inspect.signature(module.forward)
    bound = signature.bind_partial(*args, **kwargs)
    named: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        else:
            named[name] = value
    return named


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


class _Watch:
    """A module stack (hooks on every module) and a torch function mode that notes, for the
    module computing each call, which attention operations it makes; with ``lines``, the
    Python line that made each tensor."""

    def __init__(self, model: Any, *, lines: bool) -> None:
        import torch

        self.model = model
        self.lines = lines
        self.stack: list[Any] = []
        self.kinds: dict[int, tuple[Any, set[str]]] = {}
        self.made: dict[int, tuple[Any, Location]] = {}
        # tensor -> the `arange` lines it was computed from (with ``lines``)
        self.positions: dict[int, tuple[Any, frozenset[Location]]] = {}
        self.holds: dict[int, bool] = {}
        self.skip = (str(Path(torch.__file__).resolve().parent),
                     str(Path(__file__).resolve().parents[2]))
        self.handles: list[Any] = []
        self.mode: Any = None

    def __enter__(self) -> _Watch:
        from torch.overrides import TorchFunctionMode

        watch = self

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: Any = (),
                                   kwargs: Any = None) -> Any:
                result = func(*args, **(kwargs or {}))
                watch.note(func, args, kwargs or {}, result)
                return result

        for module in self.model.modules():
            self.handles.append(module.register_forward_pre_hook(self._enter))
            self.handles.append(module.register_forward_hook(self._leave, always_call=True))
        self.mode = Mode()
        self.mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.mode.__exit__(*exc)
        for handle in self.handles:
            handle.remove()

    def _enter(self, module: Any, args: Any) -> None:
        self.stack.append(module)

    def _leave(self, module: Any, args: Any, output: Any) -> None:
        if self.stack and self.stack[-1] is module:
            self.stack.pop()

    def _owner(self) -> Any:
        """The innermost running module that holds parameters (its own or its submodules')."""
        for module in reversed(self.stack):
            if id(module) not in self.holds:
                self.holds[id(module)] = any(True for _ in module.parameters())
            if self.holds[id(module)]:
                return module
        return None

    def note(self, func: Any, args: Any, kwargs: dict[str, Any], result: Any) -> None:
        name = getattr(func, "__name__", "")
        kind = name if name in ATTENTION_CALLS else "softmax" if name in _SOFTMAX else \
            "product" if name in _PRODUCTS and _activations(args) else None
        if kind is not None:
            owner = self._owner()
            if owner is not None:
                self.kinds.setdefault(id(owner), (owner, set()))[1].add(kind)
        if self.lines and _is_tensor(result) and result.dim() >= 2:
            where = self._line()
            if where is not None:
                self.made[id(result)] = (weakref.ref(result), where)
        if self.lines:
            self._follow_positions(name, args, kwargs, result)

    def _follow_positions(self, name: str, args: Any, kwargs: dict[str, Any], result: Any) -> None:
        """Which `arange` calls each tensor is computed from: the positions made there,
        through every operation on them (angles, cos and sin, an index, a shift)."""
        if name == "arange":
            where = self._line()
            found = frozenset((where,)) if where is not None else frozenset()
        elif self.positions:
            found = frozenset(line for value in [*_flat(list(args)), *_flat(list(kwargs.values()))]
                              for line in self._positions(value))
        else:
            return
        if found:
            for value in _flat(result):
                if _is_tensor(value):
                    self.positions[id(value)] = (weakref.ref(value), found)

    def _positions(self, value: Any) -> frozenset[Location]:
        found = self.positions.get(id(value)) if _is_tensor(value) else None
        return found[1] if found is not None and found[0]() is value else frozenset()

    def positions_of(self, value: Any) -> tuple[Location, ...]:
        """The `arange` lines a call argument (or any tensor of a tuple) comes from."""
        found = {line for leaf in _flat(value) for line in self._positions(leaf)}
        return tuple(sorted(found, key=lambda where: (where.path, where.line)))

    def _line(self) -> Location | None:
        """The innermost frame outside torch and shapecheck: the line that made a value."""
        frame = sys._getframe(2)
        while frame is not None:
            path = frame.f_code.co_filename
            if not path.startswith(self.skip) and not path.startswith("<"):
                return Location(str(Path(path).resolve()), frame.f_lineno)
            frame = frame.f_back  # type: ignore[assignment]
        return None

    def made_at(self, value: Any) -> Location | None:
        found = self.made.get(id(value)) if _is_tensor(value) else None
        if found is None or found[0]() is not value:
            return None
        return found[1]


def _activations(args: Any) -> bool:
    """A product of two tensors neither of which is a parameter (``q @ k.transpose``)."""
    import torch

    tensors = [a for a in _flat(args) if isinstance(a, torch.Tensor)]
    return len(tensors) >= 2 and all(
        not isinstance(t, torch.nn.Parameter) and t.dim() >= 2 for t in tensors[:2])


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


# --- what a trace depends on ------------------------------------------------------------------


def _code_key(module: Any) -> tuple[Any, ...]:
    """The code, settings and parameter shapes of a layer and its submodules."""
    parts = []
    for name, sub in module.named_modules():
        forward = vars(sub).get("forward") or type(sub).forward
        code = getattr(getattr(forward, "__func__", forward), "__code__", forward)
        settings = tuple(sorted((k, _settled(v)) for k, v in vars(sub).items()
                                if not k.startswith("_") and k != "training"
                                and not _INDEX.search(k) and _is_setting(v)))
        tensors = tuple((n, _tensor_key(t)) for n, t in (*sub.named_parameters(recurse=False),
                                                         *sub.named_buffers(recurse=False)))
        parts.append((name, type(sub), code, settings, tensors))
    return tuple(parts)


def _is_setting(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(isinstance(v, _PRIMITIVE) for v in value)
    return isinstance(value, _PRIMITIVE)


def _settled(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _signature(value: Any, depth: int = 0) -> Any:
    """A call's form: tensors by shape, dtype and (masks, flags) contents; values as they are;
    other objects by their type."""
    if _is_tensor(value):
        return _tensor_key(value)
    if isinstance(value, _PRIMITIVE) or depth > 4:
        return value if isinstance(value, _PRIMITIVE) else type(value)
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_signature(v, depth + 1) for v in value))
    if isinstance(value, dict):
        return (dict, tuple(sorted((str(k), _signature(v, depth + 1)) for k, v in value.items())))
    return type(value)


def _tensor_key(tensor: Any) -> tuple[Any, ...]:
    """Shape and dtype; and the contents of a tensor of few distinct values (a mask, a
    table of positions), which a layer may be traced differently for."""
    import torch

    shape = (tuple(tensor.shape), str(tensor.dtype))
    if tensor.numel() > _DIGEST_LIMIT:
        return shape
    data = tensor.detach()
    if data.is_floating_point() and torch.unique(data).numel() > 2:
        return shape
    return (*shape, hash(tuple(data.flatten().tolist())))
