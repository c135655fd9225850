"""Hugging Face's eager and SDPA masks, followed as the functions of positions they are made of.

A Hugging Face model builds the mask of its eager and SDPA layers with
``masking_utils.sdpa_mask`` / ``eager_mask``: a mask function (``causal_mask_function``,
``sliding_window_overlay``, ``padding_mask_function``, combined with ``and_masks``) evaluated
at every position into a table ``bool[B, 1, Q, KV]`` (eager: ``0`` where true, the dtype's
least value elsewhere), which the layer receives as a tensor. Traced as a tensor, the
function is lost: nothing says the table is causal or a window.

So, while a factory or a model runs (:func:`recorded`), each table those two return carries
its function, lengths and offsets (an attribute of the tensor, which the copies of a
layer's captured call keep); when the layer is traced (:func:`as_tables`), such an argument
is a :class:`TableMask` whose leaves are the tensors the function reads (a padding mask
becomes an input, as on the flex path), and the traced forward builds the table from the
function with one operator, ``shapecheck::mask_table(carrier, captured, call)``, which
:func:`lower` writes as flex.py writes a ``mask_mod``: one ``def`` per Python function at
its line, applied at every position, ``expand(f(b, h, q, kv), [B, 1, Q, KV])``. Run for
real (conformance, confirmation), the table is evaluated from the function at the lengths
it was made for, reading the tensors the run passes. A table made with ``use_vmap=True``
is followed the same way where its function broadcasts too and gives that very table; a
function torch.fx cannot trace, or one that works under ``vmap`` only, leaves the table a
tensor, as before.
"""

from __future__ import annotations

import inspect
import itertools
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from . import flex

OPERATOR = "shapecheck::mask_table"
#: The attribute a recorded table carries (a tensor's ``__dict__``: deep copies keep it).
ATTRIBUTE = "_shapecheck_mask_function"


@dataclass(frozen=True)
class Recorded:
    """How `sdpa_mask`/`eager_mask` made a table."""

    mask_mod: Any                 # the function, the padding mask and-ed in as HF does
    q_offset: int
    kv_offset: int
    dtype: Any                    # eager's float dtype (0 / least value); None: bool


class TableMask:
    """A recorded table as a traced argument: its function, the tensors it reads (the
    pytree leaves: inputs of the trace) and an empty ``carrier`` ``[B, 0, Q, KV]`` whose
    symbolic sizes are the table's (an axis of size 0 is never an input of the spec)."""

    def __init__(self, recorded: Recorded, carrier: Any, tensors: list[Any],
                 keys: list[int]) -> None:
        self.mask_mod = recorded.mask_mod
        self.q_offset, self.kv_offset = recorded.q_offset, recorded.kv_offset
        self.dtype = recorded.dtype
        self.carrier = carrier
        self.lengths = (int(carrier.shape[2]), int(carrier.shape[3]))  # as made
        self.batch = int(carrier.shape[0])
        self.shapes = [tuple(int(s) for s in t.shape) for t in tensors]
        self.key = next(_KEYS)  # its sizes as the spec writes them, once lowered: SIZES
        # a decode step's queries after the cache: their offset is the keys less the
        # queries at every size (how the spec writes it, and how a run evaluates it)
        self.after_cache = self.kv_offset == 0 and self.q_offset != 0 and \
            self.q_offset == self.lengths[1] - self.lengths[0]
        self.tensors = tensors
        self.keys = keys

    def traced(self, argument: str) -> Any:
        """The table inside a traced forward (the module's ``argument``): the operator,
        then eager's 0 / least value."""
        self._tied()
        number = next(_COUNTER)
        captured: dict[int, Any] = {}
        try:
            function = flex.traced_function(self.mask_mod, "mask", captured,
                                    dict(zip(self.keys, self.tensors)))
            problem = None
        except Exception as error:  # not traceable: the call says so when it is lowered
            function, problem = None, f"{type(error).__name__}: {error}"[:300]
        TABLES[number] = Table(function, list(captured.items()), self.q_offset,
                               self.kv_offset, self.after_cache, self.key, argument, problem)
        table = _operator()(self.carrier, [t for _, t in TABLES[number].captured], number)
        return table if self.dtype is None else _eager(table, self.dtype)

    def _tied(self) -> None:
        """A tensor the function reads by batch and key (HF's padding mask, padded to the
        keys: `[B, KV + kv_offset]`) has the table's sizes: said to torch, which traced the
        two apart (the read is inside the operator), so that the spec says it too."""
        import torch

        keys = self.carrier.shape[3] + self.kv_offset
        for tensor, shape in zip(self.tensors, self.shapes):
            if len(shape) >= 2 and shape[0] == self.batch:
                torch._check(tensor.shape[0] == self.carrier.shape[0])
            if len(shape) >= 2 and shape[-1] == self.lengths[1] + self.kv_offset:
                torch._check(tensor.shape[-1] == keys)

    def evaluated(self, tensors: dict[str, Any]) -> Any:
        """The table itself, from the function reading this object's tensors, at the sizes
        the spec's inputs ``tensors`` have (conformance and confirmation choose them)."""
        import torch

        mask_mod = flex.rebound(self.mask_mod, dict(zip(self.keys, self.tensors)))
        batch, q_length, kv_length = _run_sizes(self, tensors)
        q_offset = kv_length - q_length if self.after_cache else self.q_offset
        device = self.carrier.device
        table = mask_mod(torch.arange(batch, device=device)[:, None, None, None],
                         torch.arange(1, device=device)[None, :, None, None],
                         (torch.arange(q_length, device=device) + q_offset)[None, None, :, None],
                         (torch.arange(kv_length, device=device) + self.kv_offset)[None, None, None, :])
        table = table.expand(batch, 1, q_length, kv_length)
        return table if self.dtype is None else _eager(table, self.dtype)


def _eager(table: Any, dtype: Any) -> Any:
    """`masking_utils.eager_mask`'s conversion: 0 where the mask keeps, the least value."""
    import torch

    return torch.where(table, torch.zeros((), device=table.device, dtype=dtype),
                       torch.finfo(dtype).min)


@dataclass
class Table:
    """One table built in a trace: its function traced, the tensors it reads."""

    function: Any                 # flex.Function, or None
    captured: list[tuple[int, Any]]
    q_offset: int
    kv_offset: int
    after_cache: bool             # q_offset is the keys less the queries (a decode step)
    key: int                      # its TableMask's
    argument: str                 # the module's argument it is
    problem: str | None


#: The tables of the latest trace, by the number the operator carries.
TABLES: dict[int, Table] = {}
_COUNTER = itertools.count()
#: Each TableMask's sizes as the spec writes them (`B`, `T`, `P + T`), and where an input of
#: the spec holds each dim (its name, the axis), by the TableMask's key: a run evaluates them.
SIZES: dict[int, tuple[list[str], dict[str, tuple[str, int]]]] = {}
_KEYS = itertools.count()
_OPERATOR: list[Any] = []


# --- recording the tables a model builds ---------------------------------------------------


@contextmanager
def recorded(code: Any = None) -> Iterator[None]:
    """While a factory or a model runs, each table `masking_utils.sdpa_mask` or `eager_mask`
    returns carries its function (their code swapped: the model's references see it).
    Only where transformers is in use — imported already, or named by ``code``, a factory
    that imports it in its body —: importing it for a module that does not use it costs
    seconds (issue 36: a Python target within 1.1x of its export)."""
    if "transformers" not in sys.modules and not _names(code, "transformers"):
        yield
        return
    try:
        import transformers.masking_utils as utils
    except ImportError:
        yield
        return
    if _ORIGINALS:  # already recording (a factory that runs a model)
        yield
        return
    _ORIGINALS.update(sdpa=flex.copied(utils.sdpa_mask), eager=flex.copied(utils.eager_mask),
                      signature=inspect.signature(utils.sdpa_mask),
                      eager_signature=inspect.signature(utils.eager_mask))
    try:
        with flex.swapped([(utils.sdpa_mask, _sdpa_standin),
                            (utils.eager_mask, _eager_standin)]):
            yield
    finally:
        _ORIGINALS.clear()


_ORIGINALS: dict[str, Any] = {}


def _names(code: Any, name: str) -> bool:
    """Whether ``code`` (a function's code object) or a function defined in it names
    ``name`` (`import transformers`, `from transformers import ...` in its body)."""
    if not isinstance(code, types.CodeType):
        return False
    return any(used == name or used.startswith(f"{name}.") for used in code.co_names) or \
        any(_names(const, name) for const in code.co_consts)


def _sdpa_standin(*args, **kwargs):  # type: ignore[no-untyped-def]
    from shapecheck.pytorch.front import tables as _tables

    return _tables.made("sdpa", args, kwargs)


def _eager_standin(*args, **kwargs):  # type: ignore[no-untyped-def]
    from shapecheck.pytorch.front import tables as _tables

    return _tables.made("eager", args, kwargs)


def made(kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The original's table, carrying how it was made (the stand-ins' body)."""
    import torch
    from transformers.masking_utils import and_masks, padding_mask_function, prepare_padding_mask

    table = _ORIGINALS[kind](*args, **kwargs)
    if not isinstance(table, torch.Tensor) or table.dim() != 4:
        return table
    signature = _ORIGINALS["signature" if kind == "sdpa" else "eager_signature"]
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return table
    bound.apply_defaults()
    call = bound.arguments
    # `use_vmap=True` (a model's own and/or mask function) made the table by `vmap`: it is
    # recorded too, and `as_tables` follows it only where the function broadcasts and gives
    # that very table (a vmap-only function stays a tensor)
    if not all(isinstance(call.get(n), int) for n in (
            "q_offset", "kv_offset", "q_length", "kv_length", "batch_size")):
        return table
    # as sdpa_mask does: the 2D padding mask (padded to the keys) and-ed in
    mask_mod = call["mask_function"]
    padding = prepare_padding_mask(call.get("attention_mask"), call["kv_length"],
                                   call["kv_offset"])
    if padding is not None:
        mask_mod = and_masks(mask_mod, padding_mask_function(padding))
    dtype = call.get("dtype", torch.float32) if kind == "eager" else None
    setattr(table, ATTRIBUTE, Recorded(mask_mod, call["q_offset"], call["kv_offset"], dtype))
    return table


# --- tracing and running a layer given such a table -----------------------------------------


def as_tables(inputs: dict[str, Any]) -> dict[str, Any]:
    """The call with every recorded table whose function torch.fx traces as a
    :class:`TableMask` (else the tensor it is, as before). **Decision**: only where the
    function, evaluated again, gives the very table the module was called with — a table
    the model changed after making it (in place, or a copy of another's record) stays a
    tensor: the spec must say what the module was given."""
    import torch

    out = dict(inputs)
    for name, value in inputs.items():
        recorded_ = getattr(value, ATTRIBUTE, None) if isinstance(value, torch.Tensor) else None
        if recorded_ is None:
            continue
        try:
            captured = flex.read_tensors(recorded_.mask_mod)
        except Exception:
            continue
        batch, _, q_length, kv_length = value.shape
        carrier = value.new_empty((batch, 0, q_length, kv_length))
        mask = TableMask(recorded_, carrier, list(captured.values()), list(captured))
        try:
            same = bool(torch.equal(mask.evaluated({}), value))
        except Exception:  # the function does not broadcast (a vmap-only pattern)
            same = False
        if same:
            out[name] = mask
    return out


def evaluated(inputs: dict[str, Any], tensors: dict[str, Any]) -> dict[str, Any]:
    """The call with each :class:`TableMask` evaluated into the table it stands for, at the
    sizes of the spec's inputs ``tensors`` (by spec name)."""
    return {name: value.evaluated(tensors) if type(value) is TableMask else value
            for name, value in inputs.items()}


def _run_sizes(mask: TableMask, tensors: dict[str, Any]) -> tuple[int, int, int]:
    """The table's batch, query and key lengths at a run: its sizes as the spec writes them,
    each dim read off an input that holds it; as traced where the spec has none."""
    traced = (int(mask.carrier.shape[0]), *mask.lengths)
    if mask.key not in SIZES:
        return traced
    texts, sources = SIZES[mask.key]
    bindings = {dim: int(tensors[name].shape[axis]) for dim, (name, axis) in sources.items()
                if name in tensors}
    found = [size_at(text, bindings) for text in texts]
    return traced if None in found else (found[0], found[1], found[2])  # type: ignore[return-value]


def size_at(text: str, bindings: dict[str, int]) -> int | None:
    """A size the spec writes (`P + T`, `2 * W`) at ``bindings``: names, integers, + - * //
    read from its syntax tree (never run as code); None when it holds anything else."""
    import ast
    import operator

    operations = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                  ast.FloorDiv: operator.floordiv}

    def value(node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            return bindings.get(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in operations:
            left, right = value(node.left), value(node.right)
            return None if left is None or right is None else \
                operations[type(node.op)](left, right)
        return None

    try:
        return value(ast.parse(text, mode="eval").body)
    except SyntaxError:
        return None


@contextmanager
def built_in_forward(module: Any, names: list[str]) -> Iterator[None]:
    """While tracing: the arguments ``names`` (TableMasks) become their tables inside the
    traced forward, so that the operator that builds them is in the graph."""
    if not names:
        yield
        return
    TABLES.clear()  # a trace's tables are lowered before the next trace starts
    own = module.__dict__.get("forward")
    original = module.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        kwargs = {k: v.traced(k) if type(v) is TableMask else v for k, v in kwargs.items()}
        return original(*args, **kwargs)

    forward.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
    module.forward = forward
    try:
        yield
    finally:
        if own is None:
            del module.forward
        else:
            module.forward = own


def _operator() -> Any:
    """``shapecheck::mask_table``: a `bool[B, 1, Q, KV]` table of the carrier's sizes."""
    if _OPERATOR:
        return _OPERATOR[0]
    import torch

    @torch.library.custom_op(OPERATOR, mutates_args=(), schema="(Tensor carrier, "
                             "Tensor[] captured, int call) -> Tensor")
    def table(carrier: torch.Tensor, captured: list[torch.Tensor], call: int) -> torch.Tensor:
        raise RuntimeError("shapecheck's mask table stand-in is traced, never run")

    @table.register_fake
    def _(carrier: torch.Tensor, captured: list[torch.Tensor], call: int) -> torch.Tensor:
        batch, _, q_length, kv_length = carrier.shape
        return carrier.new_empty((batch, 1, q_length, kv_length), dtype=torch.bool)

    _OPERATOR.append(table)
    return table


# --- writing the operator -------------------------------------------------------------------


def lower(low: Any, node: Any, args: list[Any], kw: dict[str, Any]) -> Any:
    """The rule for ``shapecheck::mask_table``: the function as `def` statements at their
    Python lines, the table as the function at every position, broadcast as HF does."""
    from .lower import Statement, Unlowerable, Val

    table = TABLES.get(node.args[2])
    if table is None or table.problem is not None or table.function is None:
        raise Unlowerable(table.problem if table is not None and table.problem else
                          "a mask table")
    captured = {key: flex.operand_name(low, item, value) for (key, _), item, value in
                zip(table.captured, node.args[1], args[1].items)}
    traced = {key: item.meta.get("val") for (key, _), item in zip(table.captured, node.args[1])}
    written = flex.Writer(low, captured, traced, low.location(node))
    name = written.function(table.function)
    batch, _, q_length, kv_length = (low.size(s) for s in node.meta["val"].shape)
    SIZES[table.key] = ([batch, q_length, kv_length], _held(low))
    shape = node.meta["val"].shape
    q_offset = _offset(low, table.q_offset,
                       low.size(shape[3] - shape[2]) if table.after_cache else "")
    kv_offset = _offset(low, table.kv_offset, "")
    positions = (f"arange({batch})[:, None, None, None]", "arange(1)[None, :, None, None]",
                 f"arange({q_length})[None, None, :, None]{q_offset}",
                 f"arange({kv_length})[None, None, None, :]{kv_offset}")
    text = f"expand({name}({', '.join(positions)}), [{batch}, 1, {q_length}, {kv_length}])"
    # named as the argument the module was given (`attention_mask`), where it is made
    table_name = low._fresh(table.argument)
    low.out.statements.append(Statement(
        f"{table_name}: bool[{batch}, 1, {q_length}, {kv_length}] = {text}",
        low.location(node), table_name))
    return Val(table_name, kind="bool")


def _held(low: Any) -> dict[str, tuple[str, int]]:
    """Where the spec's inputs hold each dim: the input's name and the axis."""
    held: dict[str, tuple[str, int]] = {}
    for node in low.program.graph.nodes:
        value = low.values.get(node)
        if node.op != "placeholder" or value is None or value.text not in low.out.inputs:
            continue
        for axis, size in enumerate(getattr(node.meta.get("val"), "shape", ())):
            text = low.size(size)
            if text.isidentifier():
                held.setdefault(text, (value.text, axis))
    return held


def _offset(low: Any, offset: int, cached: str) -> str:
    """An offset added to the positions: a decode step's queries start after the cache
    (``q_offset`` is then the keys less the queries, written so: true at every size)."""
    if offset == 0:
        return ""
    if cached:
        return f" + {cached}" if cached.isidentifier() else f" + ({cached})"
    return f" + {flex.literal(low, offset, in_mask=True)}"
