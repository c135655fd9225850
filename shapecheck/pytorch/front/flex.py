"""FlexAttention in a traced module, written as the language's functions of positions.

A module calls ``flex_attention(q, k, v, score_mod=g, block_mask=create_block_mask(f, ...))``
with Python functions of positions. ``torch.export`` would trace them into subgraphs with
no user source line, and ``create_block_mask`` into block-index arithmetic that pins the
traced length. Instead, while a module is traced (:func:`intercepted`), the two functions
run as stand-ins (their code swapped, so that every reference sees them: an import, HF's
compiled wrapper): ``create_block_mask`` keeps its ``mask_mod`` and nothing else, and
``flex_attention`` traces its mask and score functions with :mod:`torch.fx` (each call of a
Python function recorded, with its `return` line, by a profile hook) and leaves
one operator in the graph, ``shapecheck::flex_attention(q, k, v, captured, call)``, whose
inputs are the query, key, value and every tensor the functions read (document ids,
padding, slopes: graph values like any other). :func:`lower` writes that operator as
`def` statements, one per Python function at its ``return`` line, and
`flex_attention(q, k, v, mask=f, score=g, scale=c)` (docs/language.md §10, docs/torch.md).
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import Location

OPERATOR = "shapecheck::flex_attention"
#: The mask and score signatures of FlexAttention, by their number of parameters.
_MASK_PARAMS = ("b", "h", "q_idx", "kv_idx")
_SCORE_PARAMS = ("score", "b", "h", "q_idx", "kv_idx")
_HERE = str(Path(__file__).resolve())


@dataclass
class Call:
    """One call of a Python function while a mask or score function is traced."""

    name: str
    params: tuple[str, ...]
    args: list[Any]               # the values passed (fx proxies, numbers)
    frame: Any
    parent: Call | None
    children: list[Call] = field(default_factory=list)
    result: Any = None
    location: Location | None = None  # its `return` line
    made_at: Location | None = None  # torch's and_masks/or_masks: the line that called it
    first: int = 0                # the first line of its `def` (a read inside it, SC613)

    def traced(self) -> list[tuple[str, Any]]:
        """Its parameters given a traced value, with those values. A parameter given a
        tensor or a number (torchtune's `_flex_block_causal_mask_mod(document_ids, b, h,
        q_idx, kv_idx)`) is bound at the call: the body reads that tensor or number itself,
        so it is no parameter of the function of positions."""
        return [(p, a) for p, a in zip(self.params, self.args) if _node(a) is not None]


@dataclass
class Function:
    """A mask_mod or score_mod traced: its graph, the calls inside it, the tensors it reads."""

    kind: str                     # "mask" or "score"
    graph: Any                    # torch.fx.Graph
    calls: list[Call]             # the top-level calls (normally one: the function itself)
    constants: dict[str, Any]     # get_attr target -> the tensor it reads


@dataclass
class FlexCall:
    """What one `flex_attention` call was given."""

    mask: Function | None
    score: Function | None
    #: the tensors the functions read, in the operator's order: (identity as the functions
    #: hold it, the tensor passed to the operator)
    captured: list[tuple[int, Any]]
    scale: float | None
    enable_gqa: bool
    problem: str | None = None    # why it cannot be written (a function fx cannot trace)
    #: as the call was written: the query, the keys (grouped), the mask's and the score's
    #: names and the scale (for its log-sum-exp, lowered after it)
    written: tuple[str, str, str | None, str | None, str] | None = None


#: The intercepted calls of the latest trace, by the number the operator carries (the
#: graph reaches the lowering, the Python functions stay here).
CALLS: dict[int, FlexCall] = {}
_COUNTER = itertools.count()
_OPERATOR: list[Any] = []


class FunctionMask:
    """What `create_block_mask` returns while tracing, and what a `BlockMask` argument is
    traced as: the mask function and the lengths it was made for (no block arithmetic, so
    the traced lengths stay symbolic). ``tensors`` are the tensors the function reads, as
    this object carries them into the trace (its pytree leaves: a padding mask becomes an
    input), ``keys`` their identities as the function holds them."""

    def __init__(self, mask_mod: Callable[..., Any], seq_lengths: tuple[Any, Any],
                 tensors: list[Any] | None = None, keys: list[int] | None = None) -> None:
        self.mask_mod = mask_mod
        self.seq_lengths = seq_lengths
        self.tensors = tensors or []
        self.keys = keys or []

    def to(self, *args: Any, **kwargs: Any) -> FunctionMask:
        """`block_mask.to(device)`: the same function."""
        return self

    def _adjust(self, q_len: Any, kv_len: Any) -> FunctionMask:
        """`block_mask._adjust(q, kv)` (a decode step's crop): the function at those lengths."""
        return FunctionMask(self.mask_mod, (q_len, kv_len), self.tensors, self.keys)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        """A `BlockMask` to the code that asks (HF's `isinstance(attention_mask, BlockMask)`)."""
        from torch.nn.attention.flex_attention import BlockMask

        return BlockMask


def as_functions(inputs: dict[str, Any]) -> dict[str, Any]:
    """The call with every `BlockMask` argument (HF's flex path) as a :class:`FunctionMask`
    of its `mask_mod`: torch.export refuses a BlockMask input."""
    try:
        from torch.nn.attention.flex_attention import BlockMask
    except ImportError:
        return inputs
    out = dict(inputs)
    for name, value in inputs.items():
        if type(value) is BlockMask and value.mask_mod is not None:
            try:
                captured = read_tensors(value.mask_mod)
            except Exception:  # not traceable: the call says so when it is lowered
                captured = {}
            out[name] = FunctionMask(value.mask_mod, value.seq_lengths, list(captured.values()),
                                     list(captured))
    return out


def read_tensors(mask_mod: Any) -> dict[int, Any]:
    """The tensors a mask function reads (by identity, in order), which become inputs of the
    trace: those of two traces. A tensor the function makes afresh at each call (Gemma 3's
    full layers, `lambda *args: torch.tensor(True)`) is part of the function, a constant of
    the graph, and no input: as one, it was an input of the spec that nothing reads."""
    first: dict[int, Any] = {}
    second: dict[int, Any] = {}
    traced_function(mask_mod, "mask", first, {})
    traced_function(mask_mod, "mask", second, {})
    return {key: tensor for key, tensor in first.items() if key in second}


# --- the stand-ins (their code replaces the originals' while tracing: no free variables) --


def _flex_standin(query, key, value, score_mod=None, block_mask=None, scale=None,  # type: ignore[no-untyped-def]
                  enable_gqa=False, return_lse=False, kernel_options=None, *, return_aux=None):
    from shapecheck.pytorch.front import flex as _flex

    return _flex.flex_called(query, key, value, score_mod, block_mask, scale, enable_gqa,
                             return_lse, return_aux)


def _block_mask_standin(mask_mod, B=None, H=None, Q_LEN=None, KV_LEN=None, device=None,  # type: ignore[no-untyped-def]
                        BLOCK_SIZE=128, _compile=False, separate_full_blocks=True,
                        compute_dq_write_order=False, dq_kv_order=True):
    from shapecheck.pytorch.front import flex as _flex

    return _flex.FunctionMask(mask_mod, (Q_LEN, KV_LEN))


def _and_standin(*mask_mods):  # type: ignore[no-untyped-def]
    from shapecheck.pytorch.front import flex as _flex

    return _flex.combined("and", mask_mods)


def _or_standin(*mask_mods):  # type: ignore[no-untyped-def]
    from shapecheck.pytorch.front import flex as _flex

    return _flex.combined("or", mask_mods)


#: torch's and_masks/or_masks as they are (copies kept while their code is swapped)
_COMBINERS: dict[str, Any] = {}
#: the combinations made meanwhile: identity of the masks a combination holds -> (those
#: masks, kept alive so that the identity is not reused; the line that combined them)
COMBINED: dict[int, tuple[Any, Location]] = {}


def combined(kind: str, mask_mods: tuple[Any, ...]) -> Any:
    """torch's `and_masks`/`or_masks` as they are, the caller's line recorded: the function
    it makes is written at that line (`and_masks(sliding_window, causal_mask)` where the
    user combined them, not where the call that applies them is)."""
    result = _COMBINERS[kind](*mask_mods)
    caller = sys._getframe(2)
    held = next((c.cell_contents for c in result.__closure__ or ()
                 if isinstance(c.cell_contents, tuple)), None)
    if held is not None:
        path = str(Path(caller.f_code.co_filename).resolve())
        COMBINED[id(held)] = (held, Location(path, caller.f_lineno))
    return result


@contextmanager
def combining() -> Iterator[None]:
    """Meanwhile (a module's file loaded, its factory run, its trace), torch's `and_masks`
    and `or_masks` record the line that calls them."""
    try:
        import torch.nn.attention.flex_attention as api
    except ImportError:
        yield
        return
    if _COMBINERS:  # already (a trace inside a build)
        yield
        return
    _COMBINERS.update({"and": copied(api.and_masks), "or": copied(api.or_masks)})
    try:
        with swapped([(api.and_masks, _and_standin), (api.or_masks, _or_standin)]):
            yield
    finally:
        _COMBINERS.clear()


@contextmanager
def intercepted() -> Iterator[None]:
    """While tracing, `flex_attention` and `create_block_mask` are the stand-ins above."""
    try:
        import torch.nn.attention.flex_attention as api
    except ImportError:
        yield
        return
    CALLS.clear()  # a trace's calls are lowered before the next trace starts
    with swapped([(api.flex_attention, _flex_standin),
                   (api.create_block_mask, _block_mask_standin)]), combining():
        yield


@contextmanager
def running() -> Iterator[None]:
    """While conformance runs the module for real: a `FunctionMask` it is given (a BlockMask
    argument traced as its functions) becomes a real BlockMask again, its function reading
    the tensors conformance passes, at the lengths of each call; nothing is compiled."""
    try:
        import torch
        import torch.nn.attention.flex_attention as api
    except ImportError:
        yield
        return
    _ORIGINALS[:] = [copied(api.flex_attention), copied(api.create_block_mask)]
    debug = api._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG
    try:
        # HF's compiled wrapper runs eagerly, and FlexAttention's own eager path with it
        api._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = True
        with swapped([(api.flex_attention, _flex_runtime)]), \
                torch.compiler.set_stance("force_eager"):
            yield
    finally:
        api._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = debug


@contextmanager
def swapped(pairs: list[tuple[Any, Any]]) -> Iterator[None]:
    """Each function runs its stand-in's code (with its defaults) meanwhile: every reference
    to it sees the stand-in."""
    saved = [(f, f.__code__, f.__defaults__, f.__kwdefaults__) for f, _ in pairs]
    try:
        for original, standin in pairs:
            original.__code__ = standin.__code__
            original.__defaults__ = standin.__defaults__
            original.__kwdefaults__ = standin.__kwdefaults__
        yield
    finally:
        for original, code, defaults, kwdefaults in saved:
            original.__code__, original.__defaults__ = code, defaults
            original.__kwdefaults__ = kwdefaults


_ORIGINALS: list[Any] = []


def copied(function: Any) -> Any:
    """A new function of ``function``'s code (the original's, kept while its code is swapped)."""
    import types

    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    return copy


def _flex_runtime(query, key, value, score_mod=None, block_mask=None, scale=None,  # type: ignore[no-untyped-def]
                  enable_gqa=False, return_lse=False, kernel_options=None, *, return_aux=None):
    from shapecheck.pytorch.front import flex as _flex

    return _flex.run_flex(query, key, value, score_mod, block_mask, scale, enable_gqa,
                          return_lse, kernel_options, return_aux)


def run_flex(query: Any, key: Any, value: Any, score_mod: Any, block_mask: Any, scale: Any,
             enable_gqa: bool, return_lse: bool, kernel_options: Any, return_aux: Any) -> Any:
    """FlexAttention itself, a `FunctionMask` made a BlockMask first."""
    flex, create = _ORIGINALS
    if type(block_mask) is FunctionMask:
        mask_mod = rebound(block_mask.mask_mod, dict(zip(block_mask.keys, block_mask.tensors)))
        block_mask = create(mask_mod, None, None, query.shape[-2], key.shape[-2],
                            device=query.device)
    return flex(query, key, value, score_mod=score_mod, block_mask=block_mask, scale=scale,
                enable_gqa=enable_gqa, return_lse=return_lse, kernel_options=kernel_options,
                return_aux=return_aux)


def rebound(value: Any, tensors: dict[int, Any], depth: int = 0) -> Any:
    """A function (and the functions its closure holds: and_masks' list) reading ``tensors``
    in place of the ones it holds (by identity)."""
    import types

    if id(value) in tensors:
        return tensors[id(value)]
    if depth > 8:
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(rebound(v, tensors, depth + 1) for v in value)
    if not isinstance(value, types.FunctionType) or not value.__closure__:
        return value
    cells = []
    for cell in value.__closure__:
        try:
            cells.append(types.CellType(rebound(cell.cell_contents, tensors, depth + 1)))
        except ValueError:  # an empty cell
            cells.append(cell)
    rebuilt = types.FunctionType(value.__code__, value.__globals__, value.__name__,
                                 value.__defaults__, tuple(cells))
    rebuilt.__kwdefaults__ = value.__kwdefaults__
    return rebuilt


def flex_called(query: Any, key: Any, value: Any, score_mod: Any, block_mask: Any,
                scale: Any, enable_gqa: bool, return_lse: bool, return_aux: Any) -> Any:
    """The stand-in's body: trace the functions, record the call, leave the operator."""
    mask_mod = getattr(block_mask, "mask_mod", None) if block_mask is not None else None
    if mask_mod is not None and _is_noop(mask_mod):
        mask_mod = None
    number = next(_COUNTER)
    captured: dict[int, Any] = {}
    # the tensors a mask passed in reads, as traced (its leaves)
    replaced = dict(zip(block_mask.keys, block_mask.tensors)) \
        if type(block_mask) is FunctionMask else {}
    problem = None
    mask = score = None
    try:
        mask = traced_function(mask_mod, "mask", captured, replaced) if mask_mod is not None else None
        score = traced_function(score_mod, "score", captured, {}) if score_mod is not None else None
    except Exception as error:  # fx cannot trace it (control flow on a position)
        problem = f"{type(error).__name__}: {error}"[:300]
    if block_mask is not None and mask_mod is None and type(block_mask) is not FunctionMask:
        problem = problem or "a BlockMask without a mask_mod"
    if getattr(return_aux, "max_scores", False):
        problem = problem or "flex_attention's max_scores"
    CALLS[number] = FlexCall(mask, score, list(captured.items()),
                             None if scale is None else float(scale), bool(enable_gqa), problem)
    out = _operator()(query, key, value, [t for _, t in CALLS[number].captured], number)
    wanted = return_lse or getattr(return_aux, "lse", False)
    # the log-sum-exp: a stand-in of shape [..., Q, 1], written from the call's parts
    lse = _operator()(query, key, value.narrow(-1, 0, 1), [], -1 - number)[..., 0] \
        if wanted else None
    if return_aux is not None:  # `return_aux=AuxRequest(lse=True)`: torch's AuxOutput
        from torch.nn.attention.flex_attention import AuxOutput

        return out, AuxOutput(lse=lse)
    return (out, lse) if return_lse else out


def conventions(module: Any) -> dict[str, str]:
    """What an API documents about a module's sizes, as the words a spec states them with:
    Hugging Face's `sliding_window` (an attribute of a transformers config) is the number of
    keys a query sees, its own included (`masking_utils.sliding_window_overlay`:
    `kv_idx > q_idx - sliding_window`), so a mask reading it is a `window exclusive`."""
    config = getattr(module, "config", None)
    if config is None or not any(c.__module__.startswith("transformers.")
                                 for c in type(config).__mro__):
        return {}
    return {"sliding_window": "window exclusive"}


def _is_noop(mask_mod: Any) -> bool:
    from torch.nn.attention.flex_attention import noop_mask

    return mask_mod is noop_mask


def _operator() -> Any:
    """``shapecheck::flex_attention``, defined once: an opaque operator of the output's
    shape, which export keeps as one node."""
    if _OPERATOR:
        return _OPERATOR[0]
    import torch

    @torch.library.custom_op(OPERATOR, mutates_args=(), schema="(Tensor query, Tensor key, "
                             "Tensor value, Tensor[] captured, int call) -> Tensor")
    def flex(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             captured: list[torch.Tensor], call: int) -> torch.Tensor:
        raise RuntimeError("shapecheck's FlexAttention stand-in is traced, never run")

    @flex.register_fake
    def _(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
          captured: list[torch.Tensor], call: int) -> torch.Tensor:
        return query.new_empty((*query.shape[:-1], value.shape[-1]))

    _OPERATOR.append(flex)
    return flex


# --- tracing a function of positions --------------------------------------------------------


def traced_function(function: Any, kind: str, captured: dict[int, Any],
            replaced: dict[int, Any]) -> Function:
    """``function`` traced with torch.fx; its calls recorded; the tensors it reads added
    to ``captured`` (by identity, in order of first read; as ``replaced`` says, for a mask
    passed in)."""
    import torch
    import torch.fx as fx

    params = _MASK_PARAMS if kind == "mask" else _SCORE_PARAMS
    torch_dir = str(Path(fx.__file__).resolve().parent.parent)
    recorder = _Recorder(torch_dir)

    class Tracer(fx.Tracer):
        def create_arg(self, a: Any) -> Any:
            # a module's parameter the function reads (a relative bias table): read like any
            # tensor it holds (fx looks parameters up in the traced module, which is none)
            if isinstance(a, torch.nn.Parameter):
                name = next((n for n, p in self.root.named_parameters() if p is a), None)
                if name is None:
                    name = f"_parameter{len(list(self.root.parameters()))}"
                    self.root.register_parameter(name, a)
                return self.create_node("get_attr", name, (), {})
            return super().create_arg(a)

    # A fixed signature (a partial or a callable object traces too); its frame is ours.
    entry = _entry(function, params)
    tracer = Tracer()
    tracer.record_stack_traces = True  # each read's own line (a read past an axis, SC613)
    previous = sys.getprofile()
    sys.setprofile(recorder.profile)
    try:
        graph = tracer.trace(entry)
    finally:
        sys.setprofile(previous)
    constants = {}
    for node in graph.nodes:
        if node.op == "get_attr":
            tensor = getattr(tracer.root, node.target)
            constants[node.target] = tensor
            captured.setdefault(id(tensor), replaced.get(id(tensor), tensor))
    return Function(kind, graph, recorder.top, constants)


def _entry(function: Any, params: tuple[str, ...]) -> Callable[..., Any]:
    if len(params) == 4:
        def mask(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return function(b, h, q_idx, kv_idx)
        return mask

    def score(score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return function(score, b, h, q_idx, kv_idx)
    return score


class _Recorder:
    """A profile hook: the calls of Python functions given a traced value, as a tree."""

    def __init__(self, torch_dir: str) -> None:
        self.torch_dir = torch_dir
        self.top: list[Call] = []
        self.stack: list[Call] = []
        self.known: dict[Any, bool] = {}  # code object -> whether its calls are recorded
        from torch.fx import Proxy

        self.proxy = Proxy

    def _ours(self, code: Any) -> bool:
        if code not in self.known:
            self.known[code] = self._user(str(Path(code.co_filename).resolve()))
        return self.known[code]

    def _user(self, path: str) -> bool:
        """A function of the user's (or FlexAttention's and_masks/or_masks)."""
        if path == _HERE or path.startswith("<"):
            return False
        if path.startswith(self.torch_dir):
            return path.endswith(str(Path("nn", "attention", "flex_attention.py")))
        return True

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if not self._ours(code):
                return
            names = code.co_varnames[:code.co_argcount]
            args = [frame.f_locals.get(n) for n in names]
            if not any(isinstance(a, self.proxy) for a in args):
                return
            parent = self.stack[-1] if self.stack else None
            call = Call(code.co_name, tuple(names), args, frame, parent,
                        first=code.co_firstlineno)
            if str(Path(code.co_filename).resolve()).startswith(self.torch_dir):
                held = COMBINED.get(id(frame.f_locals.get("mask_mods")))
                call.made_at = held[1] if held is not None else None
            (parent.children if parent else self.top).append(call)
            self.stack.append(call)
        elif event == "return" and self.stack and self.stack[-1].frame is frame:
            call = self.stack.pop()
            call.result = arg
            call.location = Location(str(Path(frame.f_code.co_filename).resolve()),
                                     frame.f_lineno)
            call.frame = None  # no frame kept alive


# --- writing the operator as the language's functions ---------------------------------------


def lower(low: Any, node: Any, args: list[Any], kw: dict[str, Any]) -> Any:
    """The rule for ``shapecheck::flex_attention``: the functions as `def` statements at
    their Python lines, the call as `flex_attention(q, k, v, mask=f, score=g, scale=c)`."""
    from .lower import Unlowerable, Val

    number = node.args[4]
    if number < 0:  # the log-sum-exp stand-in (`[..., 0]` of it)
        return _log_sum_exp(low, node, CALLS.get(-1 - number))
    call = CALLS.get(number)
    if call is None or call.problem is not None:
        raise Unlowerable(call.problem if call is not None else "flex_attention")
    captured = {key: operand_name(low, item, value) for (key, _), item, value in
                zip(call.captured, node.args[3], args[3].items)}
    q, k, v = (operand_name(low, item, value) for item, value in zip(node.args[:3], args[:3]))
    k, v = _grouped(low, node, call, k, v)
    traced = {key: item.meta.get("val") for (key, _), item in zip(call.captured, node.args[3])}
    written = Writer(low, captured, traced, low.location(node), _cached(low, node))
    mask = written.function(call.mask) if call.mask is not None else None
    score = written.function(call.score) if call.score is not None else None
    for function in (call.mask, call.score):
        if function is not None:
            for found in _reads_past(low, node, function, traced, captured):
                if found not in low.out.findings:
                    low.out.findings.append(found)
    width = low.size(node.args[0].meta["val"].shape[-1])
    scale = f"1 / sqrt({width})"
    if call.scale is not None:
        root = low.dims.scale(call.scale, width)
        scale = f"1 / {root}" if root else literal(low, call.scale)
    call.written = (q, k, mask, score, scale)
    parts = [q, k, v, *(f"{key}={text}" for key, text in (
        ("mask", mask), ("score", score),
        ("scale", scale if call.scale is not None else None)) if text is not None)]
    return Val(f"flex_attention({', '.join(parts)})")


def _reads_past(low: Any, node: Any, function: Function, traced: dict[int, Any],
                captured: dict[int, str]) -> list[tuple[Location, Any]]:
    """SC613 for each read of ``function`` past an axis at the call's sizes (:mod:`.bounds`),
    at the `return` line of the Python function holding it, a note at the read's line."""
    from ...messages import codes
    from ...messages.diagnostics import Note, Span
    from .bounds import out_of_range

    query, key = node.args[0].meta["val"], node.args[1].meta["val"]
    raw = {"b": query.shape[0], "h": query.shape[1], "q_idx": query.shape[-2],
           "kv_idx": key.shape[-2]}
    sizes = {role: _hint(size) for role, size in raw.items()}
    shapes, names, axes = {}, {}, {}
    for target, tensor in function.constants.items():
        value = traced.get(id(tensor))
        shape = tuple(_hint(s) for s in value.shape) if value is not None else ()
        if value is not None and None not in shape:
            shapes[target] = shape
            names[target] = captured.get(id(tensor), target)
            axes[target] = tuple(low.size(s) for s in value.shape)
    if None in sizes.values():
        return []
    params = _MASK_PARAMS if function.kind == "mask" else _SCORE_PARAMS
    reads = [(read, sizes, None) for read in
             out_of_range(function.graph, params, sizes, shapes)]  # type: ignore[arg-type]
    counts = {role: low.size(size) for role, size in raw.items()}
    reads += _past_at_other_sizes(low, function, params, (sizes, counts), (shapes, axes),
                                  {(r.target, r.axis) for r, _s, _g in reads})
    found = []
    for read, at_sizes, grown in reads:
        at = low.location(read.node)
        holder = _holder(function.calls, at)
        where = holder.location if holder is not None and holder.location is not None else at
        if where is None:
            continue
        notes = (Note(codes.TORCH_HELPS["read_here"], Span(at.line, 1, at.line, 1)),) \
            if at is not None and at.line != where.line else ()
        if grown is not None:
            notes += (Note(codes.TORCH_HELPS["past_at_other_sizes"].format(
                dim=grown[0], value=grown[1], traced=grown[2]), None),)
        diagnostic = codes.FLEX_READ_OUT_OF_RANGE.diag(
            Span(where.line, 1, where.line, 1),
            function=holder.name if holder is not None else function.kind,
            tensor=names[read.target], index=read.index, axis=read.axis, size=read.size,
            last=read.size - 1, at=_at(read.at, at_sizes))
        found.append((Location(where.path, where.line), replace(diagnostic, notes=notes)))
    return found


def _past_at_other_sizes(low: Any, function: Function, params: tuple[str, ...],
                         call: tuple[dict[str, int], dict[str, str]],
                         tensors: tuple[dict[str, tuple[int, ...]], dict[str, tuple[str, ...]]],
                         seen: set[tuple[str, int]]) -> list[tuple[Any, dict[str, int],
                                                                  tuple[str, int, int]]]:
    """Reads in range at the traced sizes that are past an axis once one dim of the call
    takes another size (docs/torch.md, "Reads out of range": `spatial_bias[b, ...]`, a
    table of `n_heads` rows read by sample, is in range while the samples are fewer). A
    size the export left free (a position's count written as one dim name: `B`, `T`) is
    given one more than each axis of another dim the function reads (the least size past
    it), and every count and axis written as that name takes it; a read past an axis is
    kept only where the axis is a dim of its own (a table of a fixed length, `rel_bias:
    [136]`, is the module's limit, not a mistake). Not
    tried: a size the module was built with (`n_heads`: another module), a dim a size
    writes in an expression (`T + S`), one bounded from above (by the export, or a
    constraint) below the size needed, one whose traced value the function holds as a
    number (it may stand for it)."""
    from .bounds import literals, out_of_range

    sizes, counts = call
    shapes, axes = tensors
    texts = [*counts.values(), *(t for shape in axes.values() for t in shape)]
    numbers = literals(function.graph)
    found: list[tuple[Any, dict[str, int], tuple[str, int, int]]] = []
    dynamic = set(low.dims.symbolic.values())  # the sizes the export left free
    for dim in dict.fromkeys(t for t in counts.values() if t in dynamic):
        traced = next(sizes[r] for r, t in counts.items() if t == dim)
        most = _upper(low, dim)
        named = re.compile(rf"\b{re.escape(dim)}\b")
        if traced in numbers or any(t != dim and named.search(t) for t in texts) \
                or any("<" in c and named.search(c) for c in low.out.constraints):
            continue
        others = {n for shape, names in zip(shapes.values(), axes.values())
                  for n, text in zip(shape, names) if text.isidentifier() and text != dim}
        for value in sorted(n + 1 for n in others if traced < n + 1 <= most):  # least past each
            grown = {r: value if counts[r] == dim else n for r, n in sizes.items()}
            grown_shapes = {target: tuple(value if text == dim else n for n, text in
                                          zip(shape, axes[target]))
                            for target, shape in shapes.items()}
            for read in out_of_range(function.graph, params, grown, grown_shapes):  # type: ignore[arg-type]
                text = axes[read.target][read.axis]
                if (read.target, read.axis) not in seen and text.isidentifier() and text != dim:
                    seen.add((read.target, read.axis))
                    found.append((read, grown, (dim, value, traced)))
    return found


def _upper(low: Any, dim: str) -> int | float:
    """The most the export lets the dynamic size ``dim`` be (infinity when unbounded)."""
    most: int | float = float("inf")
    for symbol, bounds in getattr(low.program, "range_constraints", {}).items():
        if low.dims.symbolic.get(str(symbol)) == dim and str(bounds.upper).isdigit():
            most = min(most, int(bounds.upper))
    return most


def _at(at: tuple[tuple[str, int], ...], sizes: dict[str, int | None]) -> str:
    """`h = 2 (a call of 2 samples, 5 heads, 24 queries and 24 keys)`."""
    where = ", ".join(f"{p} = {v}" for p, v in at) or "every position"
    return f"{where} (a call of {sizes['b']} samples, {sizes['h']} heads, " \
        f"{sizes['q_idx']} queries and {sizes['kv_idx']} keys)"


def _hint(size: Any) -> int | None:
    """A traced size as the number it was traced at."""
    if isinstance(size, int):
        return size
    hint = getattr(getattr(size, "node", None), "hint", None)
    return int(hint) if hint is not None else None


def _holder(calls: list[Call], at: Location | None) -> Call | None:
    """The innermost recorded Python function whose body holds the line ``at``."""
    if at is None:
        return None
    for call in calls:
        location = call.location
        if location is not None and location.path == at.path \
                and call.first <= at.line <= location.line:
            return _holder(call.children, at) or call
        inner = _holder(call.children, at)
        if inner is not None:
            return inner
    return None


def _log_sum_exp(low: Any, node: Any, call: FlexCall | None) -> Any:
    """`return_lse=True`'s second result, each row's log-sum-exp of the scores the call
    attends over (score change first, then the mask: -inf where it hides a key), as
    `[..., Q, 1]` (the stand-in's shape; `[..., 0]` of it is read): written from the call's
    own parts, its functions applied at every position."""
    from .lower import Unlowerable, Val

    if call is None or call.written is None:
        raise Unlowerable("flex_attention's log-sum-exp")
    q, k, mask, score, scale = call.written
    sizes = [low.size(s) for s in node.args[0].meta["val"].shape[:-1]]
    sizes.append(low.size(node.args[1].meta["val"].shape[-2]))
    if len(sizes) != 4:
        raise Unlowerable("flex_attention's log-sum-exp")
    at = ["[:, None, None, None]", "[None, :, None, None]", "[None, None, :, None]",
          "[None, None, None, :]"]
    positions = ", ".join(f"arange({size}){index}" for size, index in zip(sizes, at))
    scores = f"(({q} @ {k}.T) * ({scale}))"
    if score is not None:
        scores = f"{score}({scores}, {positions})"
    if mask is not None:
        scores = f"where({mask}({positions}), {scores}, -inf)"
    return Val(f"log(sum(exp({scores}), axis=-1, keepdims=True))")


def _cached(low: Any, node: Any) -> dict[int, str]:
    """A decode step's cache: where the call has more keys than queries (traced symbolic),
    the traced number of cached keys -> the keys less the queries, written with the dims.
    A mask that offsets its query positions by that number (Hugging Face's decode step:
    `q_idx + cache_position[0]`) reads the cache's length, true at every size; as the
    literal it was traced as, the proofs varied the cache and kept the offset."""
    queries, keys = (node.args[i].meta["val"].shape[-2] for i in (0, 1))
    number = tuple(size if isinstance(size, int) else
                   getattr(getattr(size, "node", None), "hint", None) for size in (keys, queries))
    if None in number or number[0] <= number[1] or isinstance(keys, int):
        return {}
    return {number[0] - number[1]: str(low.size(keys - queries))}


def operand_name(low: Any, item: Any, value: Any) -> str:
    """A value the call reads by name (Q, K, V and the captured tensors must be names)."""
    from .lower import ATOM, Unlowerable

    if value.kind not in ("tensor", "bool") or value.causal01:
        raise Unlowerable("flex_attention's operand")
    if value.kind == "bool" and value.text in ("true", "false"):
        return str(value.text)  # a truth value the function made a tensor: written as it is
    if value.prec == ATOM and value.text in low.names:
        return str(value.text)
    return str(low._statement(item, value))


def _grouped(low: Any, node: Any, call: FlexCall, k: str, v: str) -> tuple[str, str]:
    """With ``enable_gqa``, each key/value head serves a group of query heads, in order."""
    from .lower import Statement

    q_heads, k_heads = (node.args[i].meta["val"].shape[-3] for i in (0, 1))
    if not call.enable_gqa or str(q_heads) == str(k_heads):
        return k, v
    group = low.size(q_heads // k_heads)
    out = []
    for name in (k, v):
        fresh = low._fresh(f"{name}_grouped")
        low.out.statements.append(Statement(f"{fresh} = repeat({name}, {group}, axis=-3)",
                                            low.location(node), fresh))
        out.append(fresh)
    return out[0], out[1]


def literal(low: Any, value: float | int | bool, in_mask: bool = False) -> str:
    """A literal of a function's body. An integer that is the size of exactly one dim is
    that dim (a window width the module holds: `q_idx - kv_idx < window`; ALiBi's head
    count); in a mask, only a dim that is no head count or width (an offset or a prefix
    length equal to the head width by chance must stay a number: the proofs vary dims)."""
    from .lower import number
    from .sizes import WIDTH, is_structural

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value >= 5:
        names = [n for n in (*low.dims.derived, *low.dims.atomic) if low.dims.value(n) == value]
        if len(names) == 1 and not (in_mask and (is_structural(names[0])
                                                 or WIDTH.search(names[0]))):
            return str(low.dims.size(value))
    return str(number(float(value)).text) if isinstance(value, float) else str(value)


def _node(value: Any) -> Any:
    """The fx node of a traced value (a proxy), the node itself, else None."""
    inner = getattr(value, "node", None)
    if inner is not None and hasattr(inner, "op"):
        return inner
    return value if hasattr(value, "op") and hasattr(value, "users") else None


@dataclass
class _Scope:
    params: dict[Any, str]        # node -> the parameter it is
    children: dict[Any, Call]     # node -> the call of a function of positions it results from


class Writer:
    """Writes a traced function as `def` statements: one per Python function of positions
    (FlexAttention's signatures) it calls, the rest written into their bodies."""

    def __init__(self, low: Any, captured: dict[int, str], traced: dict[int, Any],
                 at: Location | None, cached: dict[int, str] | None = None) -> None:
        self.low = low
        self.cached = cached or {}  # a decode step's cached keys: traced number -> its dims
        self.traced = traced  # identity -> the traced value of each tensor read
        self.at = at  # the call's line: where a function of torch's own (and_masks) is
        self.captured = captured
        self.function_: Function | None = None
        self.written: dict[tuple[str, str], str] = {}  # (python name, def text) -> spec name

    def function(self, function: Function) -> str:
        self.function_ = function
        output = next(n for n in function.graph.nodes if n.op == "output")
        result = _node(output.args[0])
        top = next((c for c in function.calls if _node(c.result) is result), None)
        if top is None or not self._definable(top):
            placeholders = [n for n in function.graph.nodes if n.op == "placeholder"]
            top = Call(f"{function.kind}_mod", tuple(n.target for n in placeholders),
                       placeholders, None, None, function.calls, result)
        return self._define(top)

    def _definable(self, call: Call) -> bool:
        """A function of positions by FlexAttention's signature: (b, h, q, kv) giving a
        mask, (score, b, h, q, kv) giving a score."""
        result = _node(call.result)
        if result is None:
            return False
        traced = call.traced()
        if len(traced) == 5:
            return True
        return len(traced) == 4 and self._boolean(result)

    def _boolean(self, node: Any) -> bool:
        import torch

        key = _key(node)
        if key in _COMPARISONS or key in ("and_", "or_", "invert", "logical_not"):
            return True
        if key == "getitem" and self.function_ is not None:
            source = _node(node.args[0])
            while source is not None and _key(source) == "getitem":
                source = _node(source.args[0])
            if source is not None and source.op == "get_attr":
                return bool(self.function_.constants[source.target].dtype == torch.bool)
        if key == "where":
            return self._boolean_value(node.args[1]) and self._boolean_value(node.args[2])
        if key in _CASTS:  # `.to(device)` keeps it a mask, `.to(torch.bool)` makes one
            return key == "bool" or torch.bool in (*node.args[1:], *node.kwargs.values()) \
                or self._boolean_value(node.args[0])
        return False

    def _boolean_value(self, value: Any) -> bool:
        inner = _node(value)
        return isinstance(value, bool) if inner is None else self._boolean(inner)

    def _define(self, call: Call) -> str:
        from .lower import RESERVED, Statement

        traced = call.traced()
        params = tuple(p if p not in RESERVED else f"{p}_" for p, _ in traced)
        scope = _Scope({_node(a): p for (_, a), p in zip(traced, params)},
                       {_node(c.result): c for c in call.children
                        if _node(c.result) is not None and self._definable(c)})
        body = self.expr(_node(call.result), scope).text
        wanted = call.name if call.name.isidentifier() else "mask_mod" \
            if len(params) == 4 else "score_mod"
        key = (wanted, f"({', '.join(params)}) = {body}")
        if key in self.written:
            return self.written[key]
        name = self.low._fresh(wanted)
        self.written[key] = name
        location = call.location
        if location is None or location.path.startswith(self.low.torch_dir):
            location = call.made_at or self.at
        self.low.out.statements.append(Statement(f"def {name}{key[1]}", location, None))
        return str(name)

    # --- expressions ----------------------------------------------------------------------

    def expr(self, node: Any, scope: _Scope) -> Any:
        from .lower import Unlowerable, Val

        if node in scope.params:
            return Val(scope.params[node])
        if node in scope.children:
            child = scope.children[node]
            name = self._define(child)
            arguments = ", ".join(self.value(a, scope).text for _, a in child.traced())
            return Val(f"{name}({arguments})")
        if node.op == "placeholder":
            return Val(str(node.target))
        if node.op == "get_attr":
            assert self.function_ is not None
            tensor = self.function_.constants[node.target]
            if id(tensor) not in self.captured:
                raise Unlowerable("a tensor the function reads")
            return Val(self.captured[id(tensor)])
        writer = _OPERATIONS.get(_key(node))
        if writer is None:
            raise Unlowerable(f"`{_key(node)}` in a mask or score function")
        return writer(self, node, scope)

    def value(self, value: Any, scope: _Scope) -> Any:
        from .lower import ATOM, SUM, UNARY, Unlowerable, Val

        inner = _node(value)
        if inner is not None:
            return self.expr(inner, scope)
        if _is_symbolic(value):  # a traced length the function reads (`T - 1`)
            return Val(str(self.low.size(value)), 50)
        if isinstance(value, (bool, int, float)):
            kind = self.function_.kind if self.function_ is not None else "mask"
            if kind == "mask" and type(value) is int and value in self.cached:
                cached = self.cached[value]
                return Val(cached, ATOM if cached.isidentifier() else SUM)
            text = literal(self.low, value, in_mask=kind == "mask")
            return Val(text, UNARY if text.startswith("-") else 90)
        raise Unlowerable(f"a {type(value).__name__} in a mask or score function")

    def index(self, node: Any, scope: _Scope) -> Any:
        """`x[i][j]` and `x[i, j]` of a tensor the function reads, as one read `x[i, j]`:
        with FlexAttention every index is one position (a number), so they compose. The
        language gathers by one integer tensor at a time: a read by several positions
        (HF's `padding_mask[batch_idx, kv_idx]`) is written as the read of the flattened
        tensor at the flat position, `reshape(x, [B * M])[batch_idx * M + kv_idx]`."""
        from .lower import POSTFIX, Unlowerable, Val

        items: list[Any] = []
        current = node
        while _key(current) == "getitem" and _node(current.args[0]) is not None:
            given = current.args[1] if isinstance(current.args[1], tuple) else (current.args[1],)
            items[:0] = list(given)
            current = _node(current.args[0])
            if current.op == "get_attr":
                break
        operand = self.expr(current, scope)
        positions = [item for item in items if _node(item) is not None]
        if len(positions) == 1 and any(type(item) is int for item in items) and all(
                _node(i) is not None or type(i) is int or i == slice(None) for i in items):
            # one position beside fixed entries (Flamingo's `intervals[image_idx][0]`): the
            # fixed entries taken first, then the gather on the axis left, whole axes around
            # it, as the language gathers
            at = items.index(positions[0])
            self._holds(current, items)
            fixed = ", ".join(":" if i is positions[0] else self._entry(i, scope) for i in items)
            kept = sum(1 for i in items[:at] if type(i) is not int)
            gather = ", ".join([":"] * kept + [self._entry(positions[0], scope)])
            return Val(f"{operand.at(POSTFIX)}[{fixed}][{gather}]", POSTFIX)
        if len(positions) < 2:
            entries = ", ".join(self._entry(item, scope) for item in items)
            return Val(f"{operand.at(POSTFIX)}[{entries}]", POSTFIX)
        shape = self._shape(current)
        if shape is None or len(items) != len(shape) or not all(
                _node(i) is not None or isinstance(i, int) for i in items):
            raise Unlowerable("a read by several positions of part of a tensor")
        terms, stride = [], ""
        for item, size in zip(reversed(items), reversed(shape)):
            text = self.value(item, scope).at(50)
            if text != "0":
                terms.append(f"{text} * {stride}" if stride else text)
            # a size that is a sum (a decode step's keys, `T + 1`) is one factor
            size = size if size.isidentifier() or size.isdigit() else f"({size})"
            stride = f"{size} * {stride}" if stride else size
        flat = " + ".join(reversed(terms)) or "0"
        return Val(f"reshape({operand.text}, [{stride}])[{flat}]", POSTFIX)

    def _holds(self, node: Any, items: list[Any]) -> None:
        """A fixed entry the code reads (`interval[1]`) says its axis holds that entry: a
        symbolic size is constrained to it (as lower.py's `_selected`), or size 1 would read
        out of range where the code's input never has it."""
        shape = self._shape(node) or []
        for item, size in zip(items, shape):
            least = item + 1 if type(item) is int and item >= 0 else \
                -item if type(item) is int else 0
            if least >= 2 and size.isidentifier():
                text = f"constraint {size} >= {least}"
                if text not in self.low.out.constraints:
                    self.low.out.constraints.append(text)

    def _shape(self, node: Any) -> list[str] | None:
        """The sizes of a tensor the function reads (as dims), from its traced value."""
        if node.op != "get_attr" or self.function_ is None:
            return None
        tensor = self.function_.constants[node.target]
        traced = self.traced.get(id(tensor))
        return None if traced is None else [str(self.low.size(s)) for s in traced.shape]

    def _entry(self, item: Any, scope: _Scope) -> str:
        if item is None:
            return "None"
        if item is Ellipsis:
            return "..."
        if isinstance(item, slice) and item == slice(None):
            return ":"
        return str(self.value(item, scope).text)


def _is_symbolic(value: Any) -> bool:
    import torch

    return isinstance(value, (torch.SymInt, torch.SymFloat))


def _key(node: Any) -> str:
    """An fx node's operation by name: `ge` for `operator.ge`, `q.ge(k)` and `torch.ge`."""
    if node is None or node.op not in ("call_function", "call_method"):
        return ""
    target = node.target
    name = target if isinstance(target, str) else getattr(target, "__name__", str(target))
    return _ALIASES.get(name, name)


_ALIASES = {"__getitem__": "getitem", "__and__": "and_", "__or__": "or_", "logical_and": "and_",
            "logical_or": "or_", "bitwise_and": "and_", "bitwise_or": "or_", "__invert__": "invert",
            "bitwise_not": "invert", "logical_not": "invert", "div": "truediv",
            "divide": "truediv", "true_divide": "truediv", "floor_divide": "floordiv",
            "remainder": "mod", "__add__": "add", "__sub__": "sub", "__mul__": "mul",
            "__truediv__": "truediv", "__floordiv__": "floordiv", "__mod__": "mod",
            "multiply": "mul", "subtract": "sub", "negative": "neg", "__neg__": "neg",
            "absolute": "abs", "__abs__": "abs", "clip": "clamp", "eq": "eq", "ne": "ne",
            "greater_equal": "ge", "greater": "gt", "less_equal": "le", "less": "lt",
            "not_equal": "ne", "__eq__": "eq", "__ne__": "ne", "__ge__": "ge", "__gt__": "gt",
            "__le__": "le", "__lt__": "lt", "__pow__": "pow"}
_CASTS = ("to", "float", "long", "int", "bool", "type_as", "clone", "contiguous", "detach",
          "half", "double")
_COMPARISONS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "eq": "==", "ne": "!="}


def _binary(symbol: str, prec: int) -> Callable[[Writer, Any, _Scope], Any]:
    def write(writer: Writer, node: Any, scope: _Scope) -> Any:
        from .lower import Val

        left, right = (writer.value(a, scope) for a in node.args[:2])
        if symbol in ("&", "|"):  # and_masks/or_masks start from a constant true/false
            neutral = "true" if symbol == "&" else "false"
            if left.text == neutral:
                return right
            if right.text == neutral:
                return left
        return Val(f"{left.at(prec + (prec == 10))} {symbol} {right.at(prec + 1)}", prec)
    return write


def _function(name: str) -> Callable[[Writer, Any, _Scope], Any]:
    def write(writer: Writer, node: Any, scope: _Scope) -> Any:
        from .lower import Val

        return Val(f"{name}({writer.value(node.args[0], scope).text})")
    return write


def _unary(symbol: str) -> Callable[[Writer, Any, _Scope], Any]:
    def write(writer: Writer, node: Any, scope: _Scope) -> Any:
        from .lower import UNARY, Val

        return Val(f"{symbol}{writer.value(node.args[0], scope).at(UNARY)}", UNARY)
    return write


def _exp2(writer: Writer, node: Any, scope: _Scope) -> Any:
    from .lower import POWER, UNARY, Val

    return Val(f"2 ** {writer.value(node.args[0], scope).at(UNARY)}", POWER)


def _clamp(writer: Writer, node: Any, scope: _Scope) -> Any:
    """`x.clamp(lo, hi)` as `minimum(maximum(x, lo), hi)` (which the proofs read)."""
    from .lower import Val

    bounds = dict(zip(("min", "max"), node.args[1:3]))
    bounds.update({k: v for k, v in node.kwargs.items() if k in ("min", "max")})
    text = writer.value(node.args[0], scope).text
    if bounds.get("min") is not None:
        text = f"maximum({text}, {writer.value(bounds['min'], scope).text})"
    if bounds.get("max") is not None:
        text = f"minimum({text}, {writer.value(bounds['max'], scope).text})"
    return Val(text)


def _pairwise(name: str) -> Callable[[Writer, Any, _Scope], Any]:
    def write(writer: Writer, node: Any, scope: _Scope) -> Any:
        from .lower import Val

        a, b = (writer.value(x, scope).text for x in node.args[:2])
        return Val(f"{name}({a}, {b})")
    return write


def _where(writer: Writer, node: Any, scope: _Scope) -> Any:
    from .lower import Val

    c, a, b = (writer.value(x, scope).text for x in node.args[:3])
    return Val(f"where({c}, {a}, {b})")


def _constant(writer: Writer, node: Any, scope: _Scope) -> Any:
    """`b.new_ones((), dtype=torch.bool)` (and_masks' start), `new_zeros`, `ones_like`."""
    import torch

    from .lower import Unlowerable, Val

    dtype = node.kwargs.get("dtype")
    shape = node.args[1] if len(node.args) > 1 and _key(node).startswith("new_") else ()
    if shape not in ((), [], None):
        raise Unlowerable("a tensor made in a mask or score function")
    one = "ones" in _key(node)
    if dtype == torch.bool:
        return Val("true" if one else "false")
    return Val("1" if one else "0")


def _same(writer: Writer, node: Any, scope: _Scope) -> Any:
    """A cast (`.to(torch.int32)`, `.float()`, `.to(device)`): the same number; numbers
    made bool, `!= 0`."""
    import torch

    from .lower import COMPARE, SUM, Val

    value = writer.value(node.args[0], scope)
    dtype = node.kwargs.get("dtype") or next((a for a in node.args[1:]
                                              if isinstance(a, torch.dtype)), None)
    to_bool = dtype == torch.bool or _key(node) == "bool"
    if to_bool and not writer._boolean_value(node.args[0]):
        return Val(f"{value.at(SUM)} != 0", COMPARE)
    return value


_OPERATIONS: dict[str, Callable[[Writer, Any, _Scope], Any]] = {
    "add": _binary("+", 40), "sub": _binary("-", 40), "mul": _binary("*", 50),
    "truediv": _binary("/", 50), "floordiv": _binary("//", 50), "mod": _binary("%", 50),
    "pow": _binary("**", 70), "and_": _binary("&", 30), "or_": _binary("|", 20),
    **{name: _binary(symbol, 10) for name, symbol in _COMPARISONS.items()},
    "neg": _unary("-"), "invert": _unary("~"), "exp2": _exp2, "clamp": _clamp,
    "clamp_min": _clamp, "minimum": _pairwise("minimum"), "maximum": _pairwise("maximum"),
    "where": _where, "getitem": lambda w, n, s: w.index(n, s),
    "new_ones": _constant, "new_zeros": _constant, "ones_like": _constant,
    "zeros_like": _constant,
    **{name: _function(name) for name in ("abs", "exp", "tanh", "log", "sqrt", "sigmoid",
                                          "sin", "cos")},
    **{name: _same for name in _CASTS},
}
