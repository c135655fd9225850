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
from collections.abc import Callable
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
    #: the module built again at other sizes of the spec's dims (None: a factory whose sizes
    #: are its own)
    remake: Callable[[dict[str, int]], Any] | None = None
    #: the dims ``remake`` can change (None: every one)
    rebuilt: frozenset[str] | None = None
    #: a factory's module: its constructor call (:mod:`.factory`), and its named sizes
    call: Any = None
    named: dict[str, int] = field(default_factory=dict)


#: The conventions `--init` may state for a dim (docs/language.md §10.3), as words.
CONVENTIONS = frozenset({"window inclusive", "window exclusive"})


@dataclass
class Init:
    """What ``--init`` says: constructor sizes (``n_head=4``), dim names (``n_head=H``),
    argument shapes of a function or forward (``query=[B, H, T, d_k]``, ``mask=None``:
    the words of a shape as a jaxtyping annotation's), and the conventions stated for a dim
    (``window=W window inclusive``, by the dim's name in the spec)."""

    given: dict[str, int] = field(default_factory=dict)
    rename: dict[str, str] = field(default_factory=dict)
    shapes: dict[str, str | None] = field(default_factory=dict)
    stated: dict[str, str] = field(default_factory=dict)


def parse_init(values: tuple[str, ...] | list[str]) -> Init:
    """``--init n_head=4 --init n_embd=D --init query=[B, T, d] --init "window=W window
    inclusive"`` -> an :class:`Init`."""
    init = Init()
    for value in values:
        name, sep, text = value.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name.isidentifier():
            raise ExtractError("init_syntax", value=value)
        if text == "None":
            init.shapes[name] = None
            continue
        if text.startswith("[") and text.endswith("]") and _shape_words(text[1:-1]):
            init.shapes[name] = " ".join(_shape_words(text[1:-1]))
            continue
        first, *words = text.split() or [""]
        if words and " ".join(words) not in CONVENTIONS:
            raise ExtractError("init_syntax", value=value)
        if first.isdigit() and int(first) > 0:
            init.given[name] = int(first)
        elif first.isidentifier() and first != sizing.spec_name(name):
            init.rename[name] = first
        elif first.isidentifier():  # its own name: a convention stated, nothing renamed
            pass
        else:
            raise ExtractError("init_syntax", value=value)
        if words:
            init.stated[init.rename.get(name, sizing.spec_name(name))] = " ".join(words)
    return init


def _shape_words(text: str) -> list[str]:
    """``B, H, T, d_k`` -> its words; empty when one is neither a name nor a size."""
    words = [w.strip() for w in text.replace(",", " ").split()]
    return words if words and all(w.isidentifier() or w.isdigit() for w in words) else []


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
    """Load TARGET and build the module and its example inputs. A module that refuses the
    tool's odd head width (a config checking that rotary halves it) is built once more with
    even ones."""
    from .flex import combining

    parsed = parse_init(init)
    try:
        with combining():
            built = _build(target, parsed, even_heads)
    except ExtractError as refused:
        if even_heads or refused.key != "build_failed":
            raise
        try:
            built = _build(target, parsed, True)
        except ExtractError:
            raise refused from None
    built.dims.conventions.update(parsed.stated)
    return built


def _build(target: str, parsed: Init, even_heads: bool) -> Built:
    import torch

    given, rename = parsed.given, parsed.rename
    value = load(target)
    if isinstance(value, torch.nn.Module):
        raise ExtractError("instance", target=target)
    if not callable(value):
        raise ExtractError("not_callable", target=target)
    if _takes_tensors(value):
        return _from_function(value, target, parsed, even_heads)
    parameters = _int_parameters(value)
    required = [p for p in parameters if p.default is inspect.Parameter.empty]
    config = _config_parameter(value)
    if config is not None:
        return _from_config(value, config, target, parsed, even_heads)
    if not inspect.isclass(value) and not required and not given:
        return _from_factory(value, target, rename)
    names = [p.name for p in parameters]
    unknown = sorted(set(given) | set(rename) - set(names))
    unknown = [n for n in unknown if n not in names]
    if unknown:
        raise ExtractError("init_unknown", names=", ".join(unknown), parameters=", ".join(names))
    chosen_for = [p.name for p in parameters if p.name not in _RUN_PARAMETERS and (
        p.default is inspect.Parameter.empty
        or isinstance(p.default, int) and not isinstance(p.default, bool))]
    chosen = sizing.choose(chosen_for, given, even_heads=even_heads)
    dims = sizing.from_chosen(chosen, rename)
    for name, size in given.items():
        dims.atomic.setdefault(rename.get(name, name), size)
    extra = _optional_configs(value)
    # a factory's `dtype` and `device`, as conformance fills them (docs/conform.md)
    run = {name: made() for name, made in _RUN_PARAMETERS.items()
           if name in names and name not in given}

    def remake(bindings: dict[str, int]) -> Any:
        sizes = sizing.parameter_sizes(chosen, rename, bindings)
        return value(**sizes, **run,
                     **{name: _config_object(kind, {}) for name, kind in extra.items()})

    module = _built(remake, {}, target)
    width = _width(module, chosen, dims)
    inputs, dynamic = _inputs(module, width, dims, chosen.sizes, parsed.shapes)
    return Built(module, inputs, dims, target, dynamic, remake=remake)


#: a function parameter that holds a tensor (the Annotated Transformer's
#: `attention(query, key, value, mask=None, dropout=None)`)
_TENSOR_NAME = re.compile(r"^(q|k|v|x|y|query|key|value|queries|keys|values|hidden_states|"
                          r"inputs?|states|scores|logits|attn|weights|context|memory|"
                          r"(q|k|v|x)_\w+|\w+_(states|tensor|embeds|layer))$")


def _takes_tensors(value: Any) -> bool:
    """A plain function of tensors (not a class, not a factory of sizes): a required
    parameter annotated as a tensor (jaxtyping, ``Tensor``), or named like one."""
    if inspect.isclass(value):
        return False
    try:
        parameters = inspect.signature(value).parameters.values()
    except (TypeError, ValueError):
        return False
    required = [p for p in parameters if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return any("Tensor" in str(p.annotation) or hasattr(p.annotation, "dim_str")
               or p.annotation is inspect.Parameter.empty and _TENSOR_NAME.match(p.name)
               for p in required)


def _as_module(function: Any) -> Any:
    """A plain function as a module whose forward calls it: traced as a module is, its
    lines the function's own (the class claims the function's file and source)."""
    import torch

    class Function(torch.nn.Module):
        def forward(self, **arguments: Any) -> Any:
            return function(**arguments)

    # torch records the frames of `forward`s and of its anchors: the function's own lines
    anchor = getattr(torch.fx.proxy, "_register_stack_trace_anchor", None)
    if anchor is not None:
        anchor(function)
    Function.__module__ = function.__module__
    Function.__name__ = Function.__qualname__ = getattr(function, "__name__", "function")
    Function.forward.__wrapped__ = function  # type: ignore[attr-defined]
    return Function()


def _from_function(function: Any, target: str, init: Init, even_heads: bool) -> Built:
    """A plain function traced with tensors of the shapes its parameters' jaxtyping
    annotations or ``--init NAME=[...]`` give, else ``[B, T, d]``: the last axis of each is
    a dim (a prime the tool chooses), the others symbolic (a size of their own per name)."""
    import torch

    words: dict[str, list[str] | None] = {}
    for parameter in inspect.signature(function).parameters.values():
        name = parameter.name
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name in init.shapes:
            text = init.shapes[name]
            words[name] = None if text is None else text.split()
        elif parameter.default is inspect.Parameter.empty:
            text = getattr(parameter.annotation, "dim_str", None)
            words[name] = sizing.annotation_words(text) if isinstance(text, str) else \
                ["B", "T", "d"]
    unknown = sorted(set(init.shapes) - set(words))
    if unknown:
        raise ExtractError("init_unknown", names=", ".join(unknown), parameters=", ".join(words))
    if any(shape == [] for shape in words.values()):
        raise ExtractError("no_width")
    widths = [w[-1] for w in words.values() if w and w[-1].isidentifier()]
    chosen = sizing.choose(list(dict.fromkeys(widths)), init.given, even_heads=even_heads)
    dims = sizing.from_chosen(chosen, init.rename)
    symbolic = iter(sizing.SYMBOLIC_SIZES)
    sizes: dict[str, int] = dict(chosen.sizes)
    inputs: dict[str, Any] = {}
    dynamic: dict[str, dict[int, str]] = {}
    for name, shape in words.items():
        if shape is None:
            inputs[name] = None
            continue
        for word in shape:
            if not word.isdigit() and word not in sizes:
                sizes[word] = next(symbolic)
        inputs[name] = torch.randn(*[int(w) if w.isdigit() else sizes[w] for w in shape])
        dynamic[name] = {axis: w for axis, w in enumerate(shape)
                         if not w.isdigit() and w not in chosen.sizes}
    module = _as_module(function)
    return Built(module, inputs, dims, target, dynamic, remake=lambda bindings: module)


def _built(remake: Callable[[dict[str, int]], Any], bindings: dict[str, int],
           target: str) -> Any:
    """The module at the chosen sizes (``bindings`` empty), a usage error if it fails."""
    import torch

    try:
        module = remake(bindings)
    except Exception as error:
        raise ExtractError("build_failed", target=target, error=_error_text(error)) from None
    if not isinstance(module, torch.nn.Module):
        raise ExtractError("not_a_module", target=target, type=type(module).__name__)
    return module


#: a constructor parameter that holds a config object (`config`, `cfg`, `args`, `hparams`)
_CONFIG_NAME = re.compile(r"^(config|cfg|conf|args|hparams|params|opt|options|model_args)$|config$")


def _dtype() -> Any:
    import torch

    return torch.float32


#: A factory's parameters that are the run's, not sizes: how each is filled.
_RUN_PARAMETERS = {"dtype": _dtype, "device": lambda: "cpu"}


def _config_parameter(value: Any) -> tuple[str, type] | None:
    """A class whose constructor takes a config object (nanoGPT's
    ``CausalSelfAttention(config)``, every Hugging Face module): the parameter, and the
    config class -- its annotation, else the one class of the module named ``...Config`` --
    when it is a dataclass or a ``PretrainedConfig``. A parameter named like a config whose
    class cannot be told is a usage error that says what to write."""
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
                     and _is_config_class(v)]
            annotation = found[0] if len(found) == 1 and _CONFIG_NAME.search(parameter.name) \
                else None
        if _is_config_class(annotation):
            return parameter.name, annotation
        if _CONFIG_NAME.search(parameter.name) and annotation not in (int, "int"):
            raise ExtractError("config_unknown", target=value.__name__, name=parameter.name)
    return None


def _is_config_class(value: Any) -> bool:
    """A dataclass, or a Hugging Face ``PretrainedConfig`` (known by its bases' names, so
    that transformers is not imported for it)."""
    import dataclasses

    return inspect.isclass(value) and (dataclasses.is_dataclass(value) or any(
        base.__name__ in ("PretrainedConfig", "PreTrainedConfig") for base in value.__mro__))


def _config_sizes(kind: type) -> list[str]:
    """The size fields of a config class the tool chooses: every int field of a dataclass
    (``int | None`` too: Llama's ``head_dim``); of a ``PretrainedConfig``, only those that
    name a size (heads, head widths, widths) -- the others keep their defaults."""
    import dataclasses

    if dataclasses.is_dataclass(kind):
        names = [f.name for f in dataclasses.fields(kind) if _INT_TYPE.match(str(f.type))]
    else:
        try:
            default = vars(kind())
        except Exception:
            return []
        names = [name for name, value in default.items() if isinstance(value, int)
                 and not isinstance(value, bool) and not name.startswith("_")]
    if any(base.__name__ in ("PretrainedConfig", "PreTrainedConfig") for base in kind.__mro__):
        names = [name for name in names if sizing.is_size_name(name)]
    return names


#: a field's type that holds a size: `int`, or `int` or None
_INT_TYPE = re.compile(r"^(<class 'int'>|int|int \| None|None \| int|(typing\.)?Optional\[int\])$")


def _optional_configs(value: Any) -> dict[str, type]:
    """A constructor's config parameters that default to None (Whisper's `config:
    WhisperConfig | None = None`, read for its attention implementation): a default config
    of that class each."""
    import typing

    try:
        parameters = inspect.signature(value).parameters.values()
        hints = typing.get_type_hints(value.__init__) if inspect.isclass(value) else {}
    except Exception:
        return {}
    found: dict[str, type] = {}
    for parameter in parameters:
        if parameter.default is not None or parameter.name not in hints:
            continue
        kinds = [k for k in typing.get_args(hints[parameter.name]) if _is_config_class(k)]
        if len(kinds) == 1:
            found[parameter.name] = kinds[0]
    return found


def _config_object(kind: type, sizes: dict[str, int]) -> Any:
    config = kind(**sizes)
    if getattr(config, "_attn_implementation", "eager") is None:
        config._attn_implementation = "eager"  # a bare Hugging Face config: the eager path
    return config


def _from_config(value: Any, config: tuple[str, type], target: str, init: Init,
                 even_heads: bool) -> Built:
    """Build the config class with the sizes the tool chooses for its size fields (the
    other fields keep their defaults), then the module from it."""
    name, kind = config
    rename = init.rename
    chosen = sizing.choose(_config_sizes(kind), init.given, even_heads=even_heads)
    dims = sizing.from_chosen(chosen, rename)
    # the constructor's other required parameters: an index (`layer_idx`) is 0
    extra = {p.name: 0 for p in _int_parameters(value)
             if p.default is inspect.Parameter.empty and p.name != name}

    def remake(bindings: dict[str, int]) -> Any:
        sizes = sizing.parameter_sizes(chosen, rename, bindings)
        return value(**{name: _config_object(kind, sizes)}, **extra)

    module = _built(remake, {}, target)
    inputs, dynamic = _inputs(module, _width(module, chosen, dims), dims, chosen.sizes,
                              init.shapes)
    return Built(module, inputs, dims, target, dynamic, remake=remake)


def _from_factory(factory: Any, target: str, rename: dict[str, str]) -> Built:
    import torch

    from . import factory as made_by
    from .tables import recorded

    try:
        # the mask tables HF's masking_utils makes carry their functions
        with recorded(getattr(factory, "__code__", None)):
            made, call = made_by.run_capturing(factory)
    except Exception as error:
        raise ExtractError("build_failed", target=target, error=_error_text(error)) from None
    if isinstance(made, torch.nn.Module):
        return _called_as_a_class(made, target, rename, call)
    if isinstance(made, tuple) and len(made) == 2 and _takes_tensors(made[0]):
        made = (_as_module(made[0]), made[1])  # a function and its inputs
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module)
            and isinstance(made[1], dict)):
        raise ExtractError("factory_returns", target=target, type=type(made).__name__)
    module, inputs = made
    return from_call(module, inputs, target, rename, call=call)


def _called_as_a_class(module: Any, target: str, rename: dict[str, str], call: Any) -> Built:
    """A factory that returns a module alone: its forward's inputs made as for a class (a
    `[B, T, width]` tensor per required argument, jaxtyping shapes, Llama's rotary tables),
    the width the one its first linear layer reads."""
    from . import factory as made_by

    width = _layer_width(module)
    if width is None:
        raise ExtractError("factory_inputs", target=target)
    named = made_by.recovered(module, call, {})
    inputs, _ = _inputs(module, width, sizing.from_given(named), named, {})
    return from_call(module, inputs, target, rename, call=call)


def from_call(module: Any, inputs: dict[str, Any], label: str,
              rename: dict[str, str] | None = None, *, fixed: bool = False,
              call: Any = None) -> Built:
    """A module and the call it is traced with (a factory's, or one a model made): its dims
    are its constructor's sizes (``call``, a factory's captured constructor call), its own,
    its config's and its submodules' int attributes; ``fixed`` declares them at their sizes.
    A factory's module can be built again at other sizes (confirmation, sizes apart)."""
    from . import factory as made_by

    rename = rename or {}
    named = {rename.get(k, k): v for k, v in made_by.recovered(module, call, dict(inputs)).items()}
    dims = sizing.from_given(named)
    dims.fixed = dims.fixed or fixed
    remake, rebuilt = made_by.remaker(call, dims) if call is not None and not rename else \
        (None, frozenset())
    return Built(module, dict(inputs), dims, label, {}, remake=remake, rebuilt=rebuilt,
                 call=call if not rename else None, named=named)


def apart(built: Built, even_heads: bool = False) -> Built | None:
    """A factory's module built again where its sizes coincide (two dims of one size, one
    dividing another): at sizes the tool chooses, each dim apart (:func:`factory.apart`).
    None when it cannot be."""
    from . import factory as made_by

    if not built.dims.fixed or built.call is None or built.static:
        return None
    found = made_by.apart(built.call, built.named, built.inputs, even_heads=even_heads)
    if found is None:
        return None
    chosen, module, inputs = found
    dims = sizing.from_chosen(chosen, {})
    _keep_other_sizes(dims, made_by.recovered(module, None, inputs))
    # the conventions stated for a dim under its own name (`setting=setting window
    # inclusive`) hold at any size of it
    dims.conventions.update({n: c for n, c in built.dims.conventions.items()
                             if n in dims.atomic or n in dims.derived})
    call = built.call

    def remake(bindings: dict[str, int]) -> Any:
        return call.build(sizing.parameter_sizes(chosen, {}, bindings))

    return Built(module, inputs, dims, built.label, {}, remake=remake)


def _keep_other_sizes(dims: sizing.Dims, named: dict[str, int]) -> None:
    """The module's sizes that the sizes apart did not choose (a config's `sliding_window`,
    read by a mask), as free dims of the sizes the rebuilt module has, where no chosen dim
    writes that size (else it is written with them, or stays a number)."""
    for name, size in named.items():
        spec = sizing.spec_name(name)
        if not (spec in dims.atomic or spec in dims.derived or sizing.is_structural(name)
                or dims.writes(size)):
            dims.atomic[spec] = size


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
    # the width the heads make (heads × head width) before any other size named like one
    # (OPT's `word_embed_proj_dim`)
    widths = sorted((name for name in chosen.sizes if sizing.is_width(name)),
                    key=lambda name: name not in chosen.derived)
    if widths:
        return chosen.sizes[widths[0]]
    width = _layer_width(module)
    if width is None:
        raise ExtractError("no_width")
    return width


def _layer_width(module: Any) -> int | None:
    """The width the module's first linear layer or layer norm reads (its input's)."""
    import torch

    for sub in module.modules():
        if isinstance(sub, torch.nn.Linear):
            return int(sub.in_features)
        if isinstance(sub, torch.nn.LayerNorm):
            return int(sub.normalized_shape[-1])
    return None


def _inputs(module: Any, width: int, dims: sizing.Dims, sizes: dict[str, int],
            shapes: dict[str, str | None]) -> tuple[dict[str, Any], dict[str, dict[int, str]]]:
    """forward's inputs: ``shapes`` (``--init mask=[B, 1, T, T]``, ``mask=None``) first,
    then Llama's rotary tables, then a tensor per required argument."""
    import torch

    signature = inspect.signature(module.forward)
    inputs: dict[str, Any] = {}
    dynamic: dict[str, dict[int, str]] = {}
    unknown = sorted(set(shapes) - set(signature.parameters))
    if unknown:
        raise ExtractError("init_unknown", names=", ".join(unknown),
                           parameters=", ".join(signature.parameters))
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.name in shapes:
            words = shapes[parameter.name]
            if words is None:
                inputs[parameter.name] = None
                continue
            shape, axes = _annotated(_Annotation(words), sizes, width)
            if shape is None:
                raise ExtractError("no_width")
            inputs[parameter.name] = torch.randn(*shape)
            dynamic[parameter.name] = axes
            continue
        if _ROTARY.search(parameter.name) and _tensor_pair(parameter.annotation):
            # Llama's `position_embeddings`: the (cos, sin) tables of the positions
            tables = _model_rotary(module, width) or _rotary(sizing.head_width(dims))
            if tables is not None:
                inputs[parameter.name] = tables
                dynamic[parameter.name] = {0: "B", 1: "T"}
            continue
        if parameter.default is not inspect.Parameter.empty:
            continue
        if _optional(parameter.annotation):  # Mistral's `attention_mask: Tensor | None`
            inputs[parameter.name] = None
            continue
        shape, axes = _annotated(parameter.annotation, sizes, width)
        if shape is None:
            shape, axes = [sizing.BATCH_SIZE, sizing.SEQUENCE_SIZE, width], {0: "B", 1: "T"}
        inputs[parameter.name] = torch.randn(*shape)
        dynamic[parameter.name] = axes
    return inputs, dynamic


@dataclass(frozen=True)
class _Annotation:
    """An argument's shape given as ``--init NAME=[...]``, read as a jaxtyping annotation."""

    dim_str: str


#: a forward argument that carries rotary tables (Llama's `position_embeddings`)
_ROTARY = re.compile(r"position_embeddings|rotary|freqs|cos_sin|pos_emb")


def _optional(annotation: Any) -> bool:
    """``Tensor | None``, ``Optional[Tensor]``: a required argument the caller may pass as
    None (what the tool passes; a jaxtyping annotation is a shape)."""
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return not hasattr(annotation, "dim_str") and ("None" in text or "Optional" in text)


def _tensor_pair(annotation: Any) -> bool:
    """``tuple[Tensor, Tensor]`` (or that or None), as Hugging Face annotates it."""
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return "tuple[" in text.lower() and text.count("Tensor") >= 2


def _model_rotary(module: Any, width: int) -> tuple[Any, Any] | None:
    """The (cos, sin) tables the module's model passes: its file's one rotary embedding
    class (Hugging Face's ``PhiRotaryEmbedding(config)``, partial rotary included) built
    from the module's config and called at positions 0..T-1. None when there is none."""
    import sys

    import torch

    config = getattr(module, "config", None)
    namespace = vars(sys.modules.get(type(module).__module__) or object)
    found = [v for k, v in namespace.items() if k.endswith("RotaryEmbedding")
             and inspect.isclass(v) and issubclass(v, torch.nn.Module)]
    if config is None or len(found) != 1:
        return None
    try:
        rotary = found[0](config=config)
        x = torch.randn(sizing.BATCH_SIZE, sizing.SEQUENCE_SIZE, width)
        positions = torch.arange(sizing.SEQUENCE_SIZE)[None].expand(sizing.BATCH_SIZE, -1)
        with torch.no_grad():
            cos, sin = rotary(x, positions)
    except Exception:
        return None
    return cos.contiguous(), sin.contiguous()


def _rotary(head_width: int | None) -> tuple[Any, Any] | None:
    """The (cos, sin) tables of positions 0..T-1 at the head width, ``[B, T, head_dim]``
    each, as a model's rotary embedding passes them (None without a head width)."""
    import torch

    if head_width is None:
        return None

    half = torch.arange(0, head_width, 2, dtype=torch.float32)[: (head_width + 1) // 2]
    frequencies = 1.0 / (10000 ** (half / head_width))
    angles = torch.arange(sizing.SEQUENCE_SIZE, dtype=torch.float32)[:, None] * frequencies
    table = torch.cat([angles, angles], dim=-1)[:, :head_width]
    table = table[None].expand(sizing.BATCH_SIZE, -1, -1).contiguous()
    return table.cos(), table.sin()


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
