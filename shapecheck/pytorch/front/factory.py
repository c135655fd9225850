"""A factory that fixes its sizes (``make()`` returning ``(module, inputs)``).

The module's constructor call is captured while the factory runs (:func:`captured`), so
that the dims are recovered from what the code says -- the constructor's parameters by
name, the fields of a config object it takes, the int attributes of the module, of its
config and of its submodules, the inputs' jaxtyping annotations -- and so that the module
can be built again at other sizes: by :mod:`.confirm` at a counterexample, and here at
sizes that do not coincide (:func:`apart`) when the factory's sizes are equal or divide
each other, where reading one size as another could hide a bug.
"""

from __future__ import annotations

import copy
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from . import sizes as sizing

#: int attributes that are not sizes
NOT_SIZES = re.compile(r"(layer_idx|layer_id|index|seed|padding_idx|vocab|max_position|"
                       r"n_positions|max_len|num_layers|n_layer|num_hidden_layers|id$)")


@dataclass
class Call:
    """A module's constructor call: its class and bound arguments."""

    kind: type
    arguments: inspect.BoundArguments
    #: the module the factory returned, whose settings after its constructor (timm's
    #: `attn.fused_attn = False`, fairseq's `prepare_for_onnx_export_()`) a module built
    #: again gets too
    made: Any = None
    _settings: dict[str, dict[str, Any]] | None = None
    #: the size arguments of the constructors of its parts, by name (ClassAttentionBlock(dim,
    #: num_heads) built inside a wrapper that takes no size): the first call's value of each
    inner: dict[str, int] = field(default_factory=dict)

    def sizes(self) -> dict[str, int]:
        """The int arguments that name a size, and the size fields of a config argument."""
        found: dict[str, int] = {}
        for name, value in self.arguments.arguments.items():
            if _is_size(name, value):
                found[name] = value
            elif _is_config(value):
                for field, size in vars(value).items():
                    if _is_size(field, size) and sizing.is_size_name(field):
                        found.setdefault(field, size)
        return found

    def build(self, sizes: dict[str, int]) -> Any:
        """The module built again with these sizes by name (a config argument's fields too);
        every other argument as the factory passed it."""
        arguments = copy.copy(self.arguments.arguments)
        for name, value in list(arguments.items()):
            if name in sizes and _is_size(name, value):
                arguments[name] = sizes[name]
            elif _is_config(value):
                changed = copy.deepcopy(value)
                for field in vars(value):
                    if field in sizes:
                        setattr(changed, field, sizes[field])
                arguments[name] = changed
        bound = inspect.BoundArguments(self.arguments.signature, arguments)
        module = self.kind(*bound.args, **bound.kwargs)
        for name, sub in module.named_modules():
            for attribute, value in self.settings().get(name, {}).items():
                setattr(sub, attribute, value)
        return module

    def settings(self) -> dict[str, dict[str, Any]]:
        """What the factory set on its module's parts after building it: each flag, word or
        number (never an int, which may be a size) that differs from the same module built
        again by the same call, by the part's name."""
        if self._settings is None:
            self._settings = {} if self.made is None else _set_after(
                self.made, self.kind(*self.arguments.args, **self.arguments.kwargs))
        return self._settings


def _set_after(made: Any, fresh: Any) -> dict[str, dict[str, Any]]:
    parts = dict(fresh.named_modules())
    found: dict[str, dict[str, Any]] = {}
    for name, sub in made.named_modules():
        built = vars(parts[name]) if name in parts else None
        if built is None:
            continue
        changed = {attribute: value for attribute, value in vars(sub).items()
                   if not attribute.startswith("_") and type(value) in _SETTINGS
                   and attribute in built and built[attribute] != value}
        if changed:
            found[name] = changed
    return found


#: the types of a setting (a flag, a mode's name, a rate): an int may be a size
_SETTINGS = (bool, str, float, type(None))


def run_capturing(factory: Callable[[], Any]) -> tuple[Any, Call | None]:
    """Run the factory, and again with its module's class recording each constructor call
    (the class is known only from the first run): what the second run made, and the call
    that made its module (None when the factory makes no module, or builds it otherwise)."""
    made = factory()
    module = _module_of(made)
    if module is None:
        return made, None
    kind = type(module)
    own = kind.__dict__.get("__init__")
    inherited = kind.__init__
    calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        calls.append((self, args, kwargs))
        inherited(self, *args, **kwargs)

    kind.__init__ = init  # type: ignore[misc]
    inner: dict[str, int] = {}
    try:
        with _recording_parts(inner):
            again = factory()
    except Exception:
        return made, None
    finally:
        if own is None:
            del kind.__init__
        else:
            kind.__init__ = own  # type: ignore[misc]
    if _module_of(again) is None:
        return made, None
    found = next(((args, kwargs) for instance, args, kwargs in calls
                  if instance is _module_of(again)), None)
    if found is None:
        return again, None
    try:
        bound = inspect.signature(kind).bind(*found[0], **found[1])
    except (TypeError, ValueError):
        return again, None
    bound.apply_defaults()
    return again, Call(kind, bound, _module_of(again), inner=inner)


@contextmanager
def _recording_parts(found: dict[str, int]) -> Iterator[None]:
    """While the factory runs: the size arguments (by their names) of each constructor
    written outside torch, read from its frame when it calls ``nn.Module.__init__``
    (``super().__init__()``, first in a constructor: its locals are its arguments then)."""
    import torch

    base = torch.nn.Module.__init__
    torch_files = os.path.dirname(torch.__file__) + os.sep

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name == "__init__" \
                and frame.f_code.co_argcount and frame.f_locals.get(
                    frame.f_code.co_varnames[0]) is self:
            # a constructor of torch's own (`nn.Linear`, or the one a user's subclass of
            # `nn.MultiheadAttention` calls) names torch's arguments, not the code's
            if not frame.f_code.co_filename.startswith(torch_files):
                _record_arguments(frame, found)
            frame = frame.f_back
        base(self, *args, **kwargs)

    torch.nn.Module.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.__init__ = base  # type: ignore[method-assign]


def _record_arguments(frame: Any, found: dict[str, int]) -> None:
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    for name in code.co_varnames[1:count]:
        value = frame.f_locals.get(name)
        if _is_size(name, value) and sizing.is_size_name(name):
            found.setdefault(name, value)


def _module_of(made: Any) -> Any:
    """The module a factory made: what it returned, or the first of a tuple; else None."""
    import torch

    module = made[0] if isinstance(made, tuple) and made else made
    return module if isinstance(module, torch.nn.Module) else None


def recovered(module: Any, call: Call | None, inputs: dict[str, Any]) -> dict[str, int]:
    """The named sizes of a factory's module: its constructor's (first: the names the code
    passes), its and its config's int attributes, its submodules' size attributes, and the
    inputs' jaxtyping annotations."""
    found: dict[str, int] = dict(call.sizes()) if call is not None else {}
    sources = [vars(module)]
    config = getattr(module, "config", None)
    if config is not None:
        sources.append(getattr(config, "__dict__", {}))
    for source in sources:
        for name, value in list(source.items()):
            if _is_size(name, value):
                found.setdefault(name, value)
    for sub in module.modules():
        if sub is not module:
            for name, value in list(vars(sub).items()):
                if _is_size(name, value) and sizing.is_size_name(name):
                    found.setdefault(name, value)
    for name, value in (call.inner if call is not None else {}).items():
        found.setdefault(name, value)
    found.update({k: v for k, v in _annotated_sizes(module, inputs).items() if k not in found})
    return found


def _annotated_sizes(module: Any, inputs: dict[str, Any]) -> dict[str, int]:
    """``x: Float[Tensor, "b t d"]`` with ``x`` of shape ``[2, 16, 64]``: ``d = 64`` (the
    batch and sequence axes are symbolic, never a dim)."""
    try:
        parameters = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return {}
    found: dict[str, int] = {}
    for name, value in inputs.items():
        text = getattr(getattr(parameters.get(name), "annotation", None), "dim_str", None)
        shape = getattr(value, "shape", None)
        if not isinstance(text, str) or shape is None:
            continue
        words = sizing.annotation_words(text)
        if len(words) != len(shape):
            continue
        symbolic = {0, len(shape) - 2 if len(shape) >= 3 else len(shape) - 1}
        for axis, word in enumerate(words):
            if axis not in symbolic and word.isidentifier() and int(shape[axis]) >= 2:
                found.setdefault(word, int(shape[axis]))
    return found


def apart(call: Call, named: dict[str, int], inputs: dict[str, Any], *,
          even_heads: bool = False) -> tuple[sizing.Chosen, Any, dict[str, Any]] | None:
    """The module and its inputs at sizes the tool chooses, each dim a prime of its own
    (heads = kv heads × group, a width = heads × head width), where the factory's sizes
    coincide: the constructor's size arguments and config fields get the chosen sizes, each
    input axis of a size that was one of theirs the size chosen for it (the batch and
    sequence axes keep theirs). None when an axis's size was several dims' with different
    new sizes, or an input is not tensors."""
    if not call.sizes():
        return None  # nothing the constructor takes can be chosen (a wrapper's parts' sizes)
    fixed = _fixed_sizes(inputs, set(named.values())) | _fixed_sizes(
        dict(call.arguments.arguments), set())
    chosen = sizing.choose(list(call.sizes()), {}, even_heads=even_heads, avoid=fixed)
    new_of: dict[int, set[int]] = {}
    for name, size in chosen.sizes.items():
        if name in named:
            new_of.setdefault(named[name], set()).add(size)
    try:
        moved = {name: _moved(value, new_of) for name, value in inputs.items()}
    except _Ambiguous:
        return None
    try:
        module = call.build(chosen.sizes)
    except Exception:
        return None
    return chosen, module, moved


def _fixed_sizes(values: dict[str, Any], dims: set[int]) -> frozenset[int]:
    """The sizes that stay as they are when the module is built again: each input axis of a
    size that is no dim's (SAM's [B, 5, 7, C] image), and the ints of a tuple argument
    (`input_size=(5, 7)`). A size chosen equal to one would be read as that dim."""
    import torch

    found: set[int] = set()
    for value in values.values():
        if isinstance(value, torch.Tensor):
            found.update(int(size) for size in value.shape if int(size) not in dims)
        elif isinstance(value, (tuple, list)):
            found.update(v for v in value if isinstance(v, int) and not isinstance(v, bool))
    return frozenset(found)


class _Ambiguous(Exception):
    """An input axis whose size cannot be carried to the chosen sizes."""


def _moved(value: Any, new_of: dict[int, set[int]]) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        rank = value.dim()
        kept = {0, rank - 2 if rank >= 3 else rank - 1} if rank >= 2 else set()
        shape = []
        for axis, size in enumerate(value.shape):
            targets = new_of.get(int(size), set())
            if axis in kept or not targets:
                shape.append(int(size))
            elif len(targets) == 1:
                shape.append(next(iter(targets)))
            else:
                raise _Ambiguous
        if list(shape) == list(value.shape):
            return value
        if value.dtype.is_floating_point:
            return torch.randn(shape, dtype=value.dtype)
        if value.dtype == torch.bool:
            return torch.ones(shape, dtype=torch.bool)
        raise _Ambiguous  # integers (positions, ids) of a new size: their values unknown
    if isinstance(value, (tuple, list)):
        return type(value)(_moved(v, new_of) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise _Ambiguous


def remaker(call: Call, dims: sizing.Dims) -> tuple[Callable[[dict[str, int]], Any],
                                                     frozenset[str]]:
    """The factory's module built at other sizes of the spec's dims (confirmation), and
    the atomic dims that can change so: those of the constructor's sizes, and their parts."""
    names = {sizing.spec_name(name): name for name in call.sizes()}
    names = {spec: python for spec, python in names.items()
             if spec in dims.atomic or spec in dims.derived}

    def remake(bindings: dict[str, int]) -> Any:
        return call.build({python: dims.value_at(spec, bindings)
                           for spec, python in names.items()})

    return remake, frozenset(part for spec in names for part in dims.parts(spec))


def _is_size(name: str, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 2 \
        and not name.startswith("_") and not NOT_SIZES.search(name)


def _is_config(value: Any) -> bool:
    import dataclasses

    return (dataclasses.is_dataclass(value) and not isinstance(value, type)) or any(
        base.__name__ in ("PretrainedConfig", "PreTrainedConfig") for base in type(value).__mro__
    ) or _is_attribute_bag(value)


def _is_attribute_bag(value: Any) -> bool:
    """A plain object of attributes passed as a config (minGPT's `CfgNode(n_embd=...)`, an
    `argparse.Namespace`, a `SimpleNamespace`): not a module, tensor or class, and at least
    one of its attributes an int that names a size."""
    import torch

    if isinstance(value, (type, torch.nn.Module, torch.Tensor)) or callable(value):
        return False
    fields = getattr(value, "__dict__", None)
    return isinstance(fields, dict) and any(
        isinstance(name, str) and _is_size(name, size) and sizing.is_size_name(name)
        for name, size in fields.items())
