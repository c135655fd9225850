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
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import MESSAGES, ExtractError, Location, traceback_locations
# Shared by the package's modules (what names a width parameter: sizing and the target).
from .sizes import WIDTH

if TYPE_CHECKING:  # the lowering loads only when a module is traced
    from .lower import Lowered

__all__ = ["WIDTH", "Extraction", "ExtractError", "Untraceable", "call_inputs", "extract",
           "extract_built", "is_python_target", "second_trace_needed", "traced_target"]


def torch_imported() -> bool:
    """``import torch``; whether it is installed (the command line then freezes what the
    import made: cli/collector.py)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


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
    #: what this trace could not name (see ``second_trace_needed``): traced at the example's
    #: sizes only, dims declared at their sizes, sizes written as numbers
    static: bool = False
    fixed: bool = False
    unnamed: frozenset[int] = frozenset()
    #: the module built again at other sizes of the dims (None: it can only be called at
    #: other sizes of its inputs' symbolic axes) -- how a diagnostic is confirmed
    remake: Callable[[dict[str, int]], Any] | None = None
    #: the dims ``remake`` can change (None: every one)
    rebuilt: frozenset[str] | None = None

    @property
    def unknown(self) -> list[tuple[str, Location | None, str]]:
        return self.lowered.unknown

    def function(self) -> Any:
        """A function of the spec's inputs and params by name that runs the module (with
        the params as its state): what `conform` checks the spec against."""
        return _conforming(self)


def extract(target: str, init: tuple[str, ...] | list[str] = (), built: Any = None
            ) -> Extraction:
    """Build TARGET (unless ``built``, :func:`.target.build`'s, is given), trace it, lower
    the graph. Raises :class:`ExtractError` (usage) or :class:`Untraceable`."""
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ExtractError("no_torch") from None
    from .target import build

    if built is None:
        built = build(target, init)
    separated = _apart(built)
    if separated is not None:
        again, program = separated
        written = _written(again, program)
        if _consistent(written):
            return written
        # the sizes apart coincide in a size the module derives (litgpt's qkv width
        # (heads + 2) * head_size is head_size**2 at heads=5, head_size=7): named wrong
        built.dims.notes.append(MESSAGES["coincide_note"].format(
            sizes=", ".join(f"{name}={size}" for name, size in built.named.items())))
    try:
        program = _trace(built)
    except Untraceable as first:
        try:  # rotary halves need an even head width: the tool's sizes try that once
            built = build(target, init, even_heads=True)
            program = _trace(built)
        except (Untraceable, ExtractError):
            raise first from None
    return _written(built, program)


def _consistent(extraction: Extraction) -> bool:
    """Whether a spec traced at sizes apart has no error of its own (SC401 aside: on a module
    an unread argument is its interface)."""
    from ...loader import check_text

    program = check_text(extraction.text, {}, warn_unknown_bindings=False,
                         ignore=frozenset({"SC401"}), infer=False)
    return not any(d.is_error for d in program.diagnostics)


def extract_built(built: Any) -> Extraction:
    """Trace a built module (:class:`.target.Built`, e.g. a layer a model called) and lower
    its graph."""
    return _written(built, _trace(built))


def _apart(built: Any) -> tuple[Any, Any] | None:
    """A factory whose sizes coincide (``num_heads = head_dim = 8``) traced again at sizes
    the tool chooses, each dim apart, when its module can be built and traced there: sizes
    read as one could hide a bug where two sizes only coincide. Else None, and the spec
    says so."""
    from .target import apart

    if not built.dims.fixed or built.static:
        return None
    sizes = ", ".join(f"{name}={size}" for name, size in built.named.items())
    # an even head width first: rotary halves it, and half of a prime width is no dim
    for even_heads in (True, False):
        again = apart(built, even_heads)
        if again is None:
            continue
        try:
            program = _trace(again)
        except Untraceable:
            continue
        if again.static:
            continue
        again.dims.notes.append(MESSAGES["apart_note"].format(sizes=sizes))
        return again, program
    built.dims.notes.append(MESSAGES["coincide_note"].format(sizes=sizes))
    return None


def _written(built: Any, program: Any) -> Extraction:
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
    from .flex import as_functions
    from .opaque import register_inputs
    from .tables import as_tables

    module = built.module
    module.eval()  # not its result: LeViT's `train` override returns None
    built.inputs = as_functions(built.inputs)  # a BlockMask argument (HF's flex path)
    built.inputs = as_tables(built.inputs)  # a table HF's masking_utils made (tables.py)
    register_inputs(built.inputs)  # a cache object the model passes is a traced input too
    _attributes_as_buffers(module)
    shapes = _dynamic_shapes(built)
    try:
        program = _export(module, built.inputs, shapes)
        if not _pinned(program):
            return program
        first: Exception = RuntimeError("a symbolic size is pinned by a guard")
    except Exception as error:  # torch's reason is the diagnostic
        first = error
    # symbolic axes tied by arithmetic torch cannot settle (a mask's key axis = cached + new)
    try:
        return _static(built)
    except Exception:
        raise Untraceable(_reason(first), _user_location(first, built.module)) from None


def _pinned(program: Any) -> bool:
    """Whether torch, tracing symbolically, assumed an equation between the sizes that it
    could neither solve nor keep (CLIP's attention pool: `H*W + 1 == 10`, the map's side
    tied to a positional table's length): the program then claims every size while the
    module runs at one, so it is traced at its example's sizes instead."""
    from ...symbolic import pins_sizes
    from .lower import shape_env

    env = shape_env(n for n in program.graph.nodes if n.op == "placeholder")
    if env is None:
        return False
    values = getattr(env, "backed_var_to_val", None)  # torch 2.13's name of var_to_val
    traced = {symbol: int(value) for symbol, value in (
        values if values is not None else getattr(env, "var_to_val", {})).items()}
    return any(pins_sizes(env.simplify(guard.expr), traced)
               for guard in getattr(env, "guards", ()))


def _attributes_as_buffers(module: Any) -> None:
    """A tensor kept in a plain attribute (Meta's Llama: `self.cache_k = torch.zeros(...)`,
    written in `forward`) is registered as a buffer, not saved with the state: torch.export
    traces a buffer's writes (as slice writes), never a constant's."""
    import torch

    for sub in module.modules():
        for name, value in list(vars(sub).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) \
                    and not name.startswith("__"):
                delattr(sub, name)
                sub.register_buffer(name, value, persistent=False)


def _static(built: Any) -> Any:
    """The module traced at its example's sizes, which it ran at: each dim declared at its
    size (there is no other size to check)."""
    program = _export(built.module.eval(), built.inputs, None)
    built.static = built.dims.fixed = True
    return program


def _export(module: Any, inputs: dict[str, Any], shapes: Any) -> Any:
    import torch

    from .flex import intercepted
    from .lower import lowers_as_traced
    from .tables import TableMask, built_in_forward

    # torch's deprecation notices are not the user's; FlexAttention's functions are kept
    # as functions (flex.py), and so are the functions HF's mask tables are made of (tables.py)
    tables = [name for name, value in inputs.items() if type(value) is TableMask]
    branched: set[str] = set()
    with warnings.catch_warnings(), _named_forward(module, list(inputs)), \
            built_in_forward(module, tables), _every_frame(), intercepted(), \
            _flags_settled(module), _torch_logs_quiet(), _branches_on_one(branched), \
            _data_detached(), _state_kept(module):
        warnings.simplefilter("ignore")
        exported = torch.export.export(module, (), dict(inputs), dynamic_shapes=shapes,
                                       strict=False)
        # One trace where its graph lowers as recorded; the functional form (a second pass
        # over the graph) only where it writes into a tensor or holds an operator without
        # a row (a composite that pass decomposes).
        if not lowers_as_traced(exported):
            exported = exported.run_decompositions({})
    exported.shapecheck_branched_on_one = frozenset(branched)
    return exported


@contextmanager
def _state_kept(module: Any) -> Iterator[None]:
    """The module's tensors as they were before it was traced: a `forward` that caches a
    tensor on its module (PaLM's `self.register_buffer("mask", mask)`, a plain attribute)
    stores a tracing tensor there, which a later call (confirmation, `conform`) would read
    back instead of computing its own."""
    import torch

    kept = [(sub, dict(sub._buffers), {name: value for name, value in vars(sub).items()
                                       if isinstance(value, torch.Tensor)})
            for sub in module.modules()]
    try:
        yield
    finally:
        for sub, buffers, tensors in kept:
            sub._buffers.clear()
            sub._buffers.update(buffers)
            for name in [n for n, v in vars(sub).items() if isinstance(v, torch.Tensor)]:
                if name not in tensors:
                    del sub.__dict__[name]
            sub.__dict__.update(tensors)


@contextmanager
def _data_detached() -> Iterator[None]:
    """`x.data` read in `forward` (the annotated transformer's `type_as(tgt_mask.data)`,
    older code's `attn.data.masked_fill_(...)`) is `x.detach()` while a module is traced: the
    same values and storage, without autograd; torch.export's own `.data` makes a tensor it
    then refuses as a constant of the program ("a fake tensor in the exported program
    constant's list"). Writing `x.data = y` keeps torch's meaning."""
    import torch

    base = torch._C.TensorBase.data
    torch.Tensor.data = property(lambda self: self.detach(), base.__set__)
    try:
        yield
    finally:
        del torch.Tensor.data


@contextmanager
def _branches_on_one(found: set[str]) -> Iterator[None]:
    """The traced sizes the module's own code compares with 1 (Mistral's and Meta's Llama's
    `if seqlen > 1:` prefill, else a decode step): torch decides such a test from its floor
    for a symbolic size (2) and records no guard, so the trace holds only from 2 on, and the
    spec must say so (`constraint T >= 2`) or size 1 is read as the traced branch's."""
    import torch

    torch_dir = os.path.dirname(torch.__file__)
    originals = {name: getattr(torch.SymInt, name)
                 for name in ("__gt__", "__ge__", "__lt__", "__le__", "__eq__", "__ne__")}

    def watched(name: str) -> Any:
        original = originals[name]

        def compare(self: Any, other: Any) -> Any:
            if isinstance(other, int) and other in (1, 2) and not \
                    sys._getframe(1).f_code.co_filename.startswith(torch_dir):
                found.add(str(self.node.expr))
            return original(self, other)
        return compare

    for name in originals:
        setattr(torch.SymInt, name, watched(name))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.SymInt, name, original)


@contextmanager
def _torch_logs_quiet() -> Iterator[None]:
    """torch logs each operator a failing trace could not run (`failed while attempting to
    run meta for aten.mm.default`, with its traceback) before it raises: a trace that fails
    is the tool's to report (SC601) or to try otherwise (sizes apart that the module cannot
    be built at), never pages of torch's log in the user's output. torch sets the levels of
    its own loggers one by one (a data-dependent guard prints the whole graph through
    `torch.fx.experimental.symbolic_shapes`), so each one below `torch` is quieted, not only
    the root of them."""
    import io
    import logging

    loggers = [logging.getLogger("torch")] + [
        logger for name, logger in list(logging.root.manager.loggerDict.items())
        if name.startswith("torch.") and isinstance(logger, logging.Logger)]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        # and a failed export prints the partial graph to sys.stderr itself (export/_trace.py)
        with redirect_stderr(io.StringIO()):
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


#: Builtins whose flag arguments torch's argument parser takes only as a `bool`.
_FLAGGED = ("scaled_dot_product_attention",)


@contextmanager
def _flags_settled(module: Any) -> Iterator[None]:
    """A flag computed from a traced size (Whisper's `is_causal=mask is not None and n_ctx >
    1`) is a `SymBool`, which the argument parser of a builtin refuses where PyTorch itself
    passes a bool. While tracing, each such builtin (as `F.name` and as the name a module of
    the model imported) settles it with `bool()`: torch then guards on it, and the guard is a
    range constraint of the spec (`T >= 2`), as for any size the module requires."""
    import sys

    import torch.nn.functional as F

    homes = {id(F): F}
    for sub in module.modules():
        home = sys.modules.get(type(sub).__module__)
        if home is not None:
            homes[id(home)] = home
    saved: list[tuple[Any, str, Any]] = []
    for name in _FLAGGED:
        original = getattr(F, name, None)
        if original is None:
            continue
        for home in homes.values():
            for key, value in list(vars(home).items()):
                if value is original:
                    saved.append((home, key, value))
                    setattr(home, key, _settling(original))
    try:
        yield
    finally:
        for home, key, value in reversed(saved):
            setattr(home, key, value)


def _settling(original: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    def settle(value: Any) -> Any:
        return bool(value) if isinstance(value, torch.SymBool) else value

    def call(*args: Any, **kwargs: Any) -> Any:
        return original(*(settle(a) for a in args),
                        **{k: settle(v) for k, v in kwargs.items()})
    return call


@contextmanager
def _every_frame() -> Iterator[None]:
    """Each node's stack with every frame, not only the modules' `forward`s (torch's
    default), so that a line inside a helper function or an attention-processor object is
    reported at its own line."""
    from torch.fx import proxy

    tracer = getattr(proxy, "TracerBase", None)
    original = getattr(tracer, "_filter_traceback_frames", None)
    if original is None:  # another torch: its own frames, the caller's line
        yield
        return

    def every(self: Any, summary: Any) -> Any:
        saved = getattr(self, "_record_forward_stack_traces_only", False)
        self._record_forward_stack_traces_only = False
        try:
            return original(self, summary)
        finally:
            self._record_forward_stack_traces_only = saved

    tracer._filter_traceback_frames = every  # type: ignore[union-attr]
    try:
        yield
    finally:
        tracer._filter_traceback_frames = original  # type: ignore[union-attr]


def _dynamic_shapes(built: Any) -> dict[str, Any]:
    """Every axis whose size is not a dim's is traced as symbolic (``Dim.AUTO``): torch keeps
    it symbolic unless the code ties it to a size."""
    import torch

    from .opaque import is_registered, leaves

    known = {built.dims.value(n) for n in (*built.dims.atomic, *built.dims.derived)
             if n not in built.dims.inferred}
    lengths = _sequence_lengths(built.inputs)
    tokens = _sequence_lengths(built.inputs, rank=3)
    batches = _batch_sizes(built.inputs)

    def spec(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            rank = value.dim()
            # The batch axis and the sequence axis ([B, T, C], [B, H, T, d], [B, T]) are
            # symbolic even when the example's size happens to equal a dim's.
            axes = {0, rank - 2 if rank >= 3 else rank - 1} if rank >= 2 else set()
            sequence = {int(value.shape[a]) for a in axes if a > 0}

            def symbolic(axis: int, size: int) -> bool:
                if rank == 1 and size in batches:
                    # a value per sample (NaViT's and wav2vec2's `lengths` [B]) beside a
                    # batched input: its axis is the batch, even where a dim has its size
                    return True
                if value.dtype == torch.bool:
                    # a mask holds no width: each axis is a length (fairseq's [B, S] beside
                    # a time-first [T, B, C] input; wenet's chunk mask [1, 1, S + T] over
                    # the cached keys and the chunk's), pinned by torch where the code ties it
                    return True
                if rank == 2 and axis == 1 and int(value.shape[0]) in tokens:
                    # [T, width] of a sequence's positions (x-transformers' rotary freqs,
                    # [T, rot_dim]): its width is the module's unless it is a length
                    # ([T, T] and [T, S] masks)
                    return size in tokens
                if axis in axes or size in sequence and axis == rank - 1:
                    return True
                if rank == 3 and axis == 2:  # [B, T, width]: a width (partial rotary's
                    return size in lengths   # cos, sin) is the module's, not the call's
                return size not in known
            return {axis: torch.export.Dim.AUTO for axis, size in enumerate(value.shape)
                    if size > 1 and symbolic(axis, int(size))}
        if isinstance(value, torch.Size):  # sizes given as numbers (BEiT's `resolution`,
            return None                     # the patch grid): no tensor, nothing dynamic
        if isinstance(value, (tuple, list)):
            return type(value)(spec(v) for v in value)
        if isinstance(value, dict):
            return {k: spec(v) for k, v in value.items()}
        if is_registered(value):  # a cache object: its tensors, in its flattening's order
            return [spec(leaf) for leaf in leaves(value)]
        return None

    return {name: spec(value) for name, value in built.inputs.items()}


def _batch_sizes(inputs: dict[str, Any]) -> set[int]:
    """The sizes of the batch axes (the first) of the inputs' tensors of rank 3 or more."""
    import torch

    return {int(value.shape[0]) for value in inputs.values()
            if isinstance(value, torch.Tensor) and value.dim() >= 3}


def _sequence_lengths(inputs: dict[str, Any], rank: int = 2) -> set[int]:
    """The sizes of the inputs' sequence axes (the second-to-last of a tensor of rank 3 or
    more, the last of a [B, T] one), of the tensors of at least ``rank`` axes."""
    import torch

    from .opaque import is_registered, leaves

    found: set[int] = set()
    pending = list(inputs.values())
    while pending:
        value = pending.pop()
        if isinstance(value, torch.Tensor) and value.dim() >= max(rank, 2):
            found.add(int(value.shape[-2] if value.dim() >= 3 else value.shape[-1]))
        elif isinstance(value, (tuple, list)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif is_registered(value):
            pending.extend(leaves(value))
    return found


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
    for location in traceback_locations(error):
        if location.path == own:
            found = location
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

    from .annotations import asserts
    from .flex import conventions
    from .lower import Lowering

    # what the API documents, then what the user states (`--init "W=W window inclusive"`)
    built.dims.conventions = {**conventions(built.module), **built.dims.conventions}
    torch_dir = str(Path(torch.__file__).resolve().parent)
    default = _forward_line(built.module)
    dynamic = {name: axes for name, axes in built.dynamic.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = Lowering(program, built.dims, torch_dir, default, dynamic).run()
    lowered.statements.extend(asserts(built.module, lowered, default))
    text, lines = render(lowered, built, default)
    main = default.path if default else None
    # float32 code (a softmax in float32, `finfo(float32).min` masks) is compared in float32
    float32 = any(torch.float32 in (*node.args, *node.kwargs.values())
                  for node in program.graph.nodes if node.op == "call_function") or \
        any(getattr(v, "dtype", None) == torch.float32 for v in built.inputs.values())
    return Extraction(built.label, text, lines, lowered, built.module, built.dims.bindings(),
                      built.dims.notes, main, dict(built.inputs), float32, built.static,
                      built.dims.fixed, frozenset(built.dims.unnamed),
                      remake=None if built.static else built.remake, rebuilt=built.rebuilt)


def second_trace_needed(extraction: Extraction) -> bool:
    """Whether confirming a diagnostic of this trace needs another trace (at other sizes):
    only where this one could not name a dim — its axes traced at the example's sizes
    (torch could not keep them symbolic), its dims declared at their sizes (numbers alone
    could not tell two apart), or a size written as a number. Elsewhere every size in the
    spec is a named dim, so what the checker proves or refutes holds at every size, and a
    second trace would only repeat the first (issue 36: nothing traced twice when once
    will do). `extract` itself traces once, and again only when the first trace fails."""
    return extraction.static or extraction.fixed or bool(extraction.unnamed)


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

    from .flex import running

    module = extraction.module
    lowered = extraction.lowered

    def run(**arguments: Any) -> Any:
        state = {key: arguments[name] for name, key in lowered.state.items()}
        dtype = next((v.dtype for v in arguments.values() if isinstance(v, torch.Tensor)
                      and v.dtype.is_floating_point), torch.float64)
        module.to(dtype)
        inputs = call_inputs(extraction, arguments)
        with torch.no_grad(), running(), _constants_set(lowered.constants, arguments):
            # (running: a traced BlockMask argument runs as one, flex.py)
            result = functional_call(module, state, args=(), kwargs=inputs, strict=False)
        flat = [leaf for leaf in torch.utils._pytree.tree_leaves(result)
                if isinstance(leaf, torch.Tensor)]
        chosen = [flat[i] for i in lowered.output_positions]
        return chosen[0] if len(chosen) == 1 else tuple(chosen)

    names = [*lowered.inputs, *lowered.state]
    run.__signature__ = _signature(names)  # type: ignore[attr-defined]
    run.__module__ = "torch"  # conformance passes torch tensors to it
    return run


@contextmanager
def _constants_set(constants: dict[str, Any], arguments: dict[str, Any]) -> Iterator[None]:
    """The module's constant tensors (kept outside its state: OLMo's rotary sin/cos in a
    dict, which `functional_call` cannot replace) hold the values conformance gives their
    params while the module runs, and their own after."""
    kept = {name: tensor.clone() for name, tensor in constants.items() if name in arguments
            and tuple(tensor.shape) == tuple(arguments[name].shape)}
    try:
        for name in kept:
            constants[name].copy_(arguments[name])
        yield
    finally:
        for name, value in kept.items():
            constants[name].copy_(value)


def call_inputs(extraction: Extraction, tensors: dict[str, Any]) -> dict[str, Any]:
    """The call as traced (its None masks, flags, cache objects), each tensor the spec
    reads replaced by ``tensors[its spec name]``."""
    from .tables import evaluated

    inputs = copy.deepcopy(extraction.example)  # the module writes into a cache object
    for name, (argument, path) in extraction.lowered.inputs.items():
        inputs[argument] = _replaced(inputs.get(argument), path, tensors[name])
    for names in _aliased(extraction):
        read = _read_of(extraction.lowered, names)
        for argument in names:
            inputs[argument] = inputs[read]
    return evaluated(inputs, tensors)  # a mask table traced as its function: the table (tables.py)


def _aliased(extraction: Extraction) -> list[list[str]]:
    """The spec inputs the traced call passed as one tensor (fairseq's and torch's
    self-attention: `query=x, key=x, value=x`): the trace cannot tell them apart, so the
    module runs with one tensor under each name."""
    groups: dict[int, list[str]] = {}
    for name, (argument, path) in extraction.lowered.inputs.items():
        value = extraction.example.get(argument)
        if not path and name == argument and value is not None:
            groups.setdefault(id(value), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def _read_of(lowered: Any, names: list[str]) -> str:
    """Which of the aliased ``names`` the spec's statements read (torch keeps one
    placeholder for a tensor passed twice); the first where none is."""
    texts = " ".join(statement.text for statement in lowered.statements)
    return next((n for n in reversed(names) if re.search(rf"\b{re.escape(n)}\b", texts)),
                names[0])


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
