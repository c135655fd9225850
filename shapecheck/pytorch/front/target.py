"""Which module to trace, with which inputs: TARGET as `extract` and `verify` take it.

- a module class, or a factory taking its dims (``model.py:CausalSelfAttention``): built with
  sizes :mod:`.sizes` chooses (``--init n_head=4`` fixes one, ``--init n_head=H`` names its
  dim), called with a ``[B, T, width]`` tensor per required ``forward`` argument, or the
  shape its jaxtyping annotation gives;
- a factory without parameters (``model.py:make``): it returns ``(module, inputs)``, the
  inputs a dict with every ``forward`` argument by name, as ``torch.export`` takes them.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from . import sizes as sizing
from .errors import ExtractError


@dataclass
class Built:
    """A module ready to trace: its inputs by name, the sizes it was built with, the dims."""

    module: Any
    inputs: dict[str, Any]
    dims: sizing.Dims
    label: str
    #: input name -> {axis: dim name} for the axes traced as symbolic (batch, sequence)
    dynamic: dict[str, dict[int, str]] = field(default_factory=dict)
    #: traced at the example's sizes only (its symbolic axes could not be kept symbolic)
    static: bool = False


def parse_init(values: tuple[str, ...] | list[str]) -> tuple[dict[str, int], dict[str, str]]:
    """``--init n_head=4 --init n_embd=D`` -> ({"n_head": 4}, {"n_embd": "D"})."""
    given: dict[str, int] = {}
    rename: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name.isidentifier() or not text:
            raise ExtractError("init_syntax", value=value)
        if text.isdigit() and int(text) > 0:
            given[name] = int(text)
        elif text.isidentifier():
            rename[name] = text
        else:
            raise ExtractError("init_syntax", value=value)
    return given, rename


def load(target: str) -> Any:
    """The object TARGET names (conformance's loader: files, modules, attribute paths)."""
    from ..conform import UsageError, import_module_or_file

    module_name, separator, attribute = target.rpartition(":")
    if not separator or not module_name or not attribute:
        raise ExtractError("target_syntax", target=target)
    try:
        value: Any = import_module_or_file(module_name)
    except UsageError as error:
        raise ExtractError("cannot_load", target=target, reason=str(error)) from None
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ExtractError("no_attribute", target=target, name=part)
        value = getattr(value, part)
    return value


def build(target: str, init: tuple[str, ...] | list[str] = (), *, even_heads: bool = False) -> Built:
    """Load TARGET and build the module and its example inputs."""
    import torch

    given, rename = parse_init(init)
    value = load(target)
    if isinstance(value, torch.nn.Module):
        raise ExtractError("instance", target=target)
    if not callable(value):
        raise ExtractError("not_callable", target=target)
    parameters = _int_parameters(value)
    required = [p for p in parameters if p.default is inspect.Parameter.empty]
    config = _config_parameter(value)
    if config is not None:
        return _from_config(value, config, target, given, rename, even_heads)
    if not inspect.isclass(value) and not required and not given:
        return _from_factory(value, target, rename)
    names = [p.name for p in parameters]
    unknown = sorted(set(given) | set(rename) - set(names))
    unknown = [n for n in unknown if n not in names]
    if unknown:
        raise ExtractError("init_unknown", names=", ".join(unknown), parameters=", ".join(names))
    chosen_for = [p.name for p in parameters if p.default is inspect.Parameter.empty
                  or isinstance(p.default, int) and not isinstance(p.default, bool)]
    chosen = sizing.choose(chosen_for, given, even_heads=even_heads)
    dims = sizing.from_chosen(chosen, rename)
    for name, size in given.items():
        dims.atomic.setdefault(rename.get(name, name), size)
    try:
        module = value(**chosen.sizes)
    except Exception as error:
        raise ExtractError("build_failed", target=target, error=_error_text(error)) from None
    if not isinstance(module, torch.nn.Module):
        raise ExtractError("not_a_module", target=target, type=type(module).__name__)
    width = _width(module, chosen, dims)
    inputs, dynamic = _inputs(module, width, dims, chosen.sizes)
    return Built(module, inputs, dims, target, dynamic)


def _config_parameter(value: Any) -> tuple[str, type] | None:
    """A class whose constructor takes a config object (nanoGPT's
    ``CausalSelfAttention(config)``): the parameter, and the config class — its annotation,
    else the one class of the module named ``...Config`` — when it is a dataclass."""
    import dataclasses
    import sys

    if not inspect.isclass(value):
        return None
    try:
        parameters = list(inspect.signature(value).parameters.values())
    except (TypeError, ValueError):
        return None
    namespace = vars(sys.modules.get(value.__module__) or object)
    for parameter in parameters:
        if parameter.default is not inspect.Parameter.empty:
            continue
        annotation = parameter.annotation
        if isinstance(annotation, str):
            annotation = namespace.get(annotation.split(".")[-1])
        if annotation is inspect.Parameter.empty or annotation is None:
            found = [v for k, v in namespace.items() if k.endswith("Config")
                     and inspect.isclass(v) and dataclasses.is_dataclass(v)]
            annotation = found[0] if len(found) == 1 and "config" in parameter.name else None
        if inspect.isclass(annotation) and dataclasses.is_dataclass(annotation):
            return parameter.name, annotation
    return None


def _from_config(value: Any, config: tuple[str, type], target: str, given: dict[str, int],
                 rename: dict[str, str], even_heads: bool) -> Built:
    """Build the config class with the sizes the tool chooses for its int fields (the
    other fields keep their defaults), then the module from it."""
    import dataclasses

    import torch

    name, kind = config
    fields = [f for f in dataclasses.fields(kind) if f.type in (int, "int")]
    chosen = sizing.choose([f.name for f in fields], given, even_heads=even_heads)
    dims = sizing.from_chosen(chosen, rename)
    try:
        module = value(**{name: kind(**chosen.sizes)})
    except Exception as error:
        raise ExtractError("build_failed", target=target, error=_error_text(error)) from None
    if not isinstance(module, torch.nn.Module):
        raise ExtractError("not_a_module", target=target, type=type(module).__name__)
    inputs, dynamic = _inputs(module, _width(module, chosen, dims), dims, chosen.sizes)
    return Built(module, inputs, dims, target, dynamic)


def _from_factory(factory: Any, target: str, rename: dict[str, str]) -> Built:
    import torch

    try:
        made = factory()
    except Exception as error:
        raise ExtractError("build_failed", target=target, error=_error_text(error)) from None
    if isinstance(made, torch.nn.Module):
        raise ExtractError("factory_inputs", target=target)
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module)
            and isinstance(made[1], dict)):
        raise ExtractError("factory_returns", target=target, type=type(made).__name__)
    module, inputs = made
    return from_call(module, inputs, target, rename)


def from_call(module: Any, inputs: dict[str, Any], label: str,
              rename: dict[str, str] | None = None, *, fixed: bool = False) -> Built:
    """A module and the call it is traced with (a factory's, or one a model made): its dims
    are its own and its config's int attributes; ``fixed`` declares them at their sizes."""
    named = {(rename or {}).get(k, k): v for k, v in _module_sizes(module).items()}
    dims = sizing.from_given(named)
    dims.fixed = dims.fixed or fixed
    return Built(module, dict(inputs), dims, label, {})


#: int attributes that are not sizes
_NOT_SIZES = re.compile(r"(layer_idx|layer_id|index|seed|padding_idx|vocab|max_position|"
                        r"n_positions|max_len|num_layers|n_layer|num_hidden_layers|id$)")


def _module_sizes(module: Any) -> dict[str, int]:
    """The int attributes that name a size, on the module and its config (``num_heads``,
    ``head_dim``, ``config.hidden_size``): the names a factory's sizes are recovered with."""
    found: dict[str, int] = {}
    sources = [vars(module)]
    config = getattr(module, "config", None)
    if config is not None:
        sources.append(getattr(config, "__dict__", {}))
    for source in sources:
        for name, value in list(source.items()):
            if (isinstance(value, int) and not isinstance(value, bool) and value >= 2
                    and not name.startswith("_") and not _NOT_SIZES.search(name)
                    and name not in found):
                found[name] = value
    return found


def _int_parameters(value: Any) -> list[inspect.Parameter]:
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return []
    return [p for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and (p.default is inspect.Parameter.empty
                 or isinstance(p.default, int) and not isinstance(p.default, bool))]


def _width(module: Any, chosen: sizing.Chosen, dims: sizing.Dims) -> int:
    import torch

    for name in chosen.sizes:
        if sizing.WIDTH.search(name):
            return chosen.sizes[name]
    for sub in module.modules():
        if isinstance(sub, torch.nn.Linear):
            return int(sub.in_features)
        if isinstance(sub, torch.nn.LayerNorm):
            return int(sub.normalized_shape[-1])
    raise ExtractError("no_width")


def _inputs(module: Any, width: int, dims: sizing.Dims,
            sizes: dict[str, int]) -> tuple[dict[str, Any], dict[str, dict[int, str]]]:
    import torch

    signature = inspect.signature(module.forward)
    inputs: dict[str, Any] = {}
    dynamic: dict[str, dict[int, str]] = {}
    for parameter in signature.parameters.values():
        if parameter.default is not inspect.Parameter.empty or parameter.kind in (
                parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        shape, axes = _annotated(parameter.annotation, sizes, width)
        if shape is None:
            shape, axes = [sizing.BATCH_SIZE, sizing.SEQUENCE_SIZE, width], {0: "B", 1: "T"}
        inputs[parameter.name] = torch.randn(*shape)
        dynamic[parameter.name] = axes
    return inputs, dynamic


def _annotated(annotation: Any, sizes: dict[str, int],
               width: int) -> tuple[list[int] | None, dict[int, str]]:
    """A jaxtyping annotation (``Float[Tensor, "b t d"]``): its names give the dims, a
    factory parameter's name its size, the last axis is the width unless it names one;
    the others are symbolic (their names are the spec's)."""
    text = getattr(annotation, "dim_str", None)
    if not isinstance(text, str):
        return None, {}
    shape: list[int] = []
    axes: dict[int, str] = {}
    symbolic = iter((sizing.BATCH_SIZE, sizing.SEQUENCE_SIZE, 17, 19))
    words = text.split()
    for axis, word in enumerate(words):
        word = word.lstrip("*#").split("=")[0]
        if word in ("...", "") or not (word.isdigit() or word.isidentifier()):
            return None, {}
        if word.isdigit():
            shape.append(int(word))
        elif word in sizes:
            shape.append(sizes[word])
        elif axis == len(words) - 1 and axis > 0:
            shape.append(width)
        else:
            try:
                shape.append(next(symbolic))
            except StopIteration:
                return None, {}
            axes[axis] = word
    return shape, axes


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
