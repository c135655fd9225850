"""The PyTorch front end: trace a module with `torch.export`, write it as a spec.

One entry point, :func:`extract` (TARGET -> :class:`Extraction`: the spec text and the
Python line of each of its statements); :func:`check` runs every pass on it and reports
each diagnostic at its Python line (:mod:`.sourcemap`). torch is imported only here, and
only when a Python target is checked (``verify`` of ``.attn`` files never loads this
package's heavy parts). See docs/torch.md.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import MESSAGES, ExtractError, Location
# Shared by the package's modules (what names a width parameter: sizing and the target).
from .sizes import WIDTH

if TYPE_CHECKING:  # the lowering loads only when a module is traced
    from .lower import Lowered

__all__ = ["WIDTH", "Extraction", "ExtractError", "Untraceable", "extract", "is_python_target",
           "traced_target"]


def is_python_target(path: str) -> bool:
    """``model.py``, ``model.py:Name`` or ``package.module:Name`` (not an ``.attn`` path)."""
    if path.endswith(".py"):
        return True
    head, sep, tail = path.rpartition(":")
    if not sep or not head or not all(part.isidentifier() for part in tail.split(".")):
        return False
    if head.endswith(".py"):
        return True
    return all(part.isidentifier() for part in head.split(".")) and not Path(path).exists()


@dataclass
class Untraceable(Exception):
    """torch.export could not trace the module: its reason, and the Python line."""

    reason: str
    location: Location | None


@dataclass
class Extraction:
    """A traced module written as a spec."""

    target: str
    text: str
    lines: dict[int, Location]       # spec line -> the Python line it comes from
    lowered: Lowered
    module: Any
    bindings: dict[str, int]         # the traced sizes of the dims (conformance fixes them)
    notes: list[str] = field(default_factory=list)
    main_file: str | None = None
    example: dict[str, Any] = field(default_factory=dict)  # the traced inputs
    #: the module computes in float32 (its inputs, a cast): the precision it is compared at
    float32: bool = False

    @property
    def unknown(self) -> list[tuple[str, Location | None, str]]:
        return self.lowered.unknown

    def function(self) -> Any:
        """A function of the spec's inputs and params by name that runs the module (with
        the params as its state): what `conform` checks the spec against."""
        return _conforming(self)


def extract(target: str, init: tuple[str, ...] | list[str] = ()) -> Extraction:
    """Build TARGET, trace it, lower the graph. Raises :class:`ExtractError` (usage) or
    :class:`Untraceable`."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ExtractError("no_torch") from None
    from .target import build

    built = build(target, init)
    try:
        program = _trace(built)
    except Untraceable as first:
        try:  # rotary halves need an even head width: the tool's sizes try that once
            built = build(target, init, even_heads=True)
            program = _trace(built)
        except (Untraceable, ExtractError):
            raise first from None
    from .lower import Unlowerable

    try:
        return _write(built, program)
    except Unlowerable:
        # A traced size the spec cannot say (`Max(1, s0)`, `s0 % 4`, a size from data)
        try:
            return _write(built, _static(built))
        except Exception as error:
            raise Untraceable(_reason(error), _user_location(error, built.module)) from None


def _trace(built: Any) -> Any:
    import torch

    from .opaque import register_inputs

    module = built.module.eval()
    register_inputs(built.inputs)  # a cache object the model passes is a traced input too
    shapes = _dynamic_shapes(built)
    try:
        return _export(module, built.inputs, shapes)
    except Exception as error:  # torch's reason is the diagnostic
        first = error
    # symbolic axes tied by arithmetic torch cannot settle (a mask's key axis = cached + new)
    try:
        return _static(built)
    except Exception:
        raise Untraceable(_reason(first), _user_location(first, built.module)) from None


def _static(built: Any) -> Any:
    """The module traced at its example's sizes, which it ran at: each dim declared at its
    size (there is no other size to check)."""
    program = _export(built.module.eval(), built.inputs, None)
    built.static = built.dims.fixed = True
    return program


def _export(module: Any, inputs: dict[str, Any], shapes: Any) -> Any:
    import torch

    _anchor_functions(module)
    # torch's deprecation notices are not the user's
    with warnings.catch_warnings(), _named_forward(module, list(inputs)):
        warnings.simplefilter("ignore")
        exported = torch.export.export(module, (), dict(inputs), dynamic_shapes=shapes,
                                       strict=False)
        return exported.run_decompositions({})


def _anchor_functions(module: Any) -> None:
    """torch.export keeps only the ``forward`` frames of a node's stack: the functions of
    the module's own source files (``eager_attention_forward``, ``repeat_kv``, a rotary
    helper, a method it calls) are anchored too, so that a statement names its innermost
    Python line, the line a diagnostic must point at."""
    import inspect
    import sys

    from torch.fx.proxy import _register_stack_trace_anchor

    homes = {type(m).__module__ for m in module.modules()}
    for home in homes:
        if home.startswith("torch.") or home not in sys.modules:
            continue
        for value in list(vars(sys.modules[home]).values()):
            members = vars(value).values() if inspect.isclass(value) else (value,)
            for member in members:
                function = inspect.unwrap(member) if callable(member) else member
                if inspect.isfunction(function) and function.__module__ == home:
                    _register_stack_trace_anchor(function)


def _dynamic_shapes(built: Any) -> dict[str, Any]:
    """Every axis whose size is not a dim's is traced as symbolic (``Dim.AUTO``): torch keeps
    it symbolic unless the code ties it to a size."""
    import torch

    from .opaque import is_registered, leaves

    known = {built.dims.value(n) for n in (*built.dims.atomic, *built.dims.derived)}

    def spec(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            rank = value.dim()
            # The batch axis and the sequence axis ([B, T, C], [B, H, T, d], [B, T]) are
            # symbolic even when the example's size happens to equal a dim's.
            axes = {0, rank - 2 if rank >= 3 else rank - 1} if rank >= 2 else set()
            sequence = {int(value.shape[a]) for a in axes if a > 0}
            return {axis: torch.export.Dim.AUTO for axis, size in enumerate(value.shape)
                    if size > 1 and (size not in known or axis in axes
                                     or size in sequence and axis == rank - 1)}
        if isinstance(value, (tuple, list)):
            return type(value)(spec(v) for v in value)
        if isinstance(value, dict):
            return {k: spec(v) for k, v in value.items()}
        if is_registered(value):  # a cache object: its tensors, in its flattening's order
            return [spec(leaf) for leaf in leaves(value)]
        return None

    return {name: spec(value) for name, value in built.inputs.items()}


@contextmanager
def _named_forward(module: Any, names: list[str]) -> Iterator[None]:
    """A forward that takes ``**kwargs`` (``position_ids``, ``use_cache`` as a model passes
    them) is traced through a forward naming each argument of the call: torch 2.13 checks
    dynamic shapes grouped by parameter, then flattens the call ungrouped (a mismatch)."""
    import inspect

    try:
        parameters = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        parameters = {}
    named = [n for n in names if n in parameters and parameters[n].kind not in (
        inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)]
    if len(named) == len(names):
        yield
        return
    original = module.forward

    def forward(**arguments: Any) -> Any:
        return original(**arguments)

    forward.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names])
    module.forward = forward
    try:
        yield
    finally:
        del module.forward


def _reason(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    keep: list[str] = []
    for line in lines:
        if line.startswith(("For more information", "The error above", "For C++ stack",
                            "from user code", "Set TORCH_LOGS", "To fix the error")):
            break
        keep.append(line.strip())
        if len(keep) >= 3:
            break
    return " ".join(keep)[:600]


def _user_location(error: BaseException, module: Any) -> Location | None:
    """The innermost frame of the error's traceback in the module's own file."""
    import inspect

    try:
        own = str(Path(inspect.getfile(type(module))).resolve())
    except (TypeError, OSError):
        own = None
    found: Location | None = None
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            path = str(Path(tb.tb_frame.f_code.co_filename).resolve())
            if path == own:
                found = Location(path, tb.tb_lineno)
            tb = tb.tb_next
        current = current.__cause__ or current.__context__
    if found is None and own is not None:
        found = _forward_line(module)
    return found


def _forward_line(module: Any) -> Location | None:
    import inspect

    try:
        forward = inspect.unwrap(type(module).forward)  # past decorators (deprecation shims)
        lines, start = inspect.getsourcelines(forward)
        return Location(str(Path(inspect.getfile(forward)).resolve()), start)
    except (TypeError, OSError):
        return None


def _write(built: Any, program: Any) -> Extraction:
    import torch

    from .lower import Lowering

    torch_dir = str(Path(torch.__file__).resolve().parent)
    default = _forward_line(built.module)
    dynamic = {name: axes for name, axes in built.dynamic.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = Lowering(program, built.dims, torch_dir, default, dynamic).run()
    text, lines = render(lowered, built, default)
    main = default.path if default else None
    # float32 code (a softmax in float32, `finfo(float32).min` masks) is compared in float32
    float32 = any(torch.float32 in (*node.args, *node.kwargs.values())
                  for node in program.graph.nodes if node.op == "call_function") or \
        any(getattr(v, "dtype", None) == torch.float32 for v in built.inputs.values())
    return Extraction(built.label, text, lines, lowered, built.module, built.dims.bindings(),
                      built.dims.notes, main, dict(built.inputs), float32)


def display(path: str) -> str:
    """A Python file as a comment names it: relative to the current folder, or from its
    package (``transformers/models/gpt2/modeling_gpt2.py``)."""
    try:
        return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else \
            _from_package(path)
    except ValueError:
        return _from_package(path)


def _from_package(path: str) -> str:
    parts = Path(path).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[parts.index(marker) + 1:])
    return path


def render(lowered: Lowered, built: Any, default: Location | None) -> tuple[str, dict[int, Location]]:
    """The spec text, and the Python line of each of its lines."""
    out: list[str] = [f"# {MESSAGES['traced_from'].format(target=built.label)}"]
    lines: dict[int, Location] = {}
    for note in built.dims.notes:
        out.append(f"# note: {note}")

    def add(text: str, location: Location | None, state: str | None = None) -> None:
        comment = f"  # {display(location.path)}:{location.line}" if location else ""
        if state is not None:  # the module's own name for a param (`c_attn.weight`)
            comment = f"{comment} ({state})" if comment else f"  # {state}"
        out.append(text + comment)
        if location is not None:
            lines[len(out)] = location

    for declaration in built.dims.declarations():
        add(declaration, default)
    for constraint in lowered.constraints:
        add(constraint, default)
    for declaration in lowered.declarations:
        add(declaration.text, declaration.location, lowered.state.get(declaration.name or ""))
    for statement in lowered.statements:
        add(statement.text, statement.location)
    for name in lowered.outputs:
        add(f"output {name}", default)
    return "\n".join(out) + "\n", lines


def _conforming(extraction: Extraction) -> Any:
    import torch
    from torch.func import functional_call

    module = extraction.module
    lowered = extraction.lowered

    def run(**arguments: Any) -> Any:
        state = {key: arguments[name] for name, key in lowered.state.items()}
        dtype = next((v.dtype for v in arguments.values() if isinstance(v, torch.Tensor)
                      and v.dtype.is_floating_point), torch.float64)
        module.to(dtype)
        # The call as traced (its None masks, flags, cache objects), each tensor the spec
        # reads replaced by the spec's value for it.
        inputs = copy.deepcopy(extraction.example)  # the module writes into a cache object
        for name, (argument, path) in lowered.inputs.items():
            inputs[argument] = _replaced(inputs.get(argument), path, arguments[name])
        with torch.no_grad():
            result = functional_call(module, state, args=(), kwargs=inputs, strict=False)
        flat = [leaf for leaf in torch.utils._pytree.tree_leaves(result)
                if isinstance(leaf, torch.Tensor)]
        chosen = [flat[i] for i in lowered.output_positions]
        return chosen[0] if len(chosen) == 1 else tuple(chosen)

    names = [*lowered.inputs, *lowered.state]
    run.__signature__ = _signature(names)  # type: ignore[attr-defined]
    run.__module__ = "torch"  # conformance passes torch tensors to it
    return run


def _replaced(value: Any, path: tuple[int, ...], new: Any) -> Any:
    """``value`` with its leaf at ``path`` (child positions, as the trace's input spec
    numbers them) replaced by ``new``; tuples, lists, dicts and cache objects rebuilt."""
    import torch.utils._pytree as pytree

    if not path or value is None:
        return new
    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is None:
        return new
    children, context = node.flatten_fn(value)
    children = list(children)
    children[path[0]] = _replaced(children[path[0]], path[1:], new)
    return node.unflatten_fn(children, context)


def traced_target(text: str) -> str | None:
    """The target a spec ``extract`` wrote was traced from (its first line says), or None."""
    first = text.split("\n", 1)[0]
    prefix, _, rest = MESSAGES["traced_from"].partition("{target}")
    if not first.startswith(f"# {prefix}") or not rest or rest not in first:
        return None
    return first[len(prefix) + 2:first.rindex(rest)]


def _signature(names: list[str]) -> Any:
    import inspect

    return inspect.Signature([inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names])
