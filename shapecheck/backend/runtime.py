"""Everything around execution: arrays in, bindings from them, resources.

- Checking supplied arrays (in memory, or files known by their headers:
  :mod:`.arrays`) against their declarations (rank, element type, finite values)
  and binding the dims they determine: the program is re-checked at those
  bindings (:meth:`Program.at`), so derived dims and constraints are decided by
  the symbolic module, not here.
- Generating the arrays that are not supplied, from a seed.
- Sizes: the default of ``--max-memory``, printing byte counts.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .. import symbolic
from ..check.program import Program, Tensor
from .arrays import ArrayFile
from .errors import InputError, SpecError, bindings_text, message
from ..syntax import nodes

MASK_TRUE_FRACTION = 0.8
DEFAULT_INT_HIGH = 8  # an `int` input that indexes no axis directly: 0 to 7
GIB = 1 << 30
DEFAULT_MEMORY_CAP = 4 * GIB

Supplied = Union[np.ndarray, ArrayFile]  # an array, or a file known by its header


# --- declarations --------------------------------------------------------------------------


def declared(program: Program) -> dict[str, Tensor]:
    """Inputs and params, in declaration order."""
    return {n: t for n, t in program.tensors.items() if t.kind in ("input", "param")}


def element_kind_ok(tensor: Tensor, array: Supplied) -> bool:
    """bool declarations take bool arrays; real and `int` ones floats and integers (an `int`
    one's values are then checked to be whole, by :func:`cast`); `complex` ones complex
    numbers too."""
    if tensor.value.element == "complex":
        return array.dtype.kind in "cfiu"
    return array.dtype.kind == "b" if tensor.value.is_bool else array.dtype.kind in "fiu"


def check_array(tensor: Tensor, array: Any) -> Supplied:
    """The array as NumPy sees it (a file is not read), if its element type fits."""
    if not isinstance(array, (np.ndarray, ArrayFile)):
        try:
            array = np.asarray(array)
        except (TypeError, ValueError):
            raise InputError(message("not_an_array", kind=tensor.kind, name=tensor.name,
                                     type=type(array).__name__)) from None
    if not element_kind_ok(tensor, array):
        wanted = message("wanted_bool" if tensor.value.is_bool else
                         "wanted_int" if tensor.value.element == "int" else "wanted_real")
        raise InputError(message("element_type", kind=tensor.kind, name=tensor.name,
                                 declared=tensor.value.text(), wanted=wanted, dtype=array.dtype))
    return array


def cast(tensor: Tensor, array: Supplied, dtype: np.dtype) -> np.ndarray:
    """The array in the run's dtype (bool stays bool), C-contiguous, refusing NaN and
    infinity; a file is read here. A copy is made only when the type or layout differs."""
    if isinstance(array, ArrayFile):
        array = array.read()
    if tensor.value.is_bool:
        return np.asarray(array, dtype=bool, order="C")
    if tensor.value.element == "int":
        _exact_integers(tensor, np.asarray(array), dtype)
    if tensor.value.element == "complex":  # held as the run's complex counterpart
        dtype = np.result_type(dtype, np.complex64)
    result = np.asarray(array, dtype=dtype, order="C")
    if not np.isfinite(result).all():
        count = result.size - int(np.count_nonzero(np.isfinite(result)))
        raise InputError(message("non_finite", kind=tensor.kind, name=tensor.name, count=count))
    return result


def _exact_integers(tensor: Tensor, array: np.ndarray, dtype: np.dtype) -> None:
    """An `int` tensor holds whole numbers; it is held in the run's float dtype (the
    backends compute with one element type; positions are compared, added and taken
    modulo there), which holds every integer up to 2**(mantissa + 1) exactly: a value
    that is not whole, or larger, is refused."""
    if not array.size:
        return
    if array.dtype.kind == "f":
        finite = np.isfinite(array)
        broken = ~finite | (np.floor(np.where(finite, array, 0)) != array)
        if broken.any():
            raise InputError(message("int_not_whole", kind=tensor.kind, name=tensor.name,
                                     declared=tensor.value.text(), value=array[broken].flat[0]))
    limit = 2 ** (np.finfo(dtype).nmant + 1)
    largest = np.abs(array).max()
    if largest > limit:
        raise InputError(message("int_too_large", kind=tensor.kind, name=tensor.name,
                                 value=int(largest), limit=limit, dtype=dtype.name))


def index_high(program: Program, name: str) -> int | None:
    """The exclusive upper end of the values an `int` input admits: the smallest axis it
    indexes directly (``gathers.index_ranges``), at the program's bindings."""
    from ..check.gathers import index_ranges

    sizes = [program.dims.evaluate(d) for d in index_ranges(program).get(name, [])]
    known = [s for s in sizes if s is not None]
    return min(known) if known else None


# --- bindings from arrays --------------------------------------------------------------------


@dataclass
class Bound:
    """A spec checked at bindings that fix every dim it needs."""

    program: Program
    bindings: dict[str, int]  # the dims given or read from arrays (what was fed to the checker)
    sources: dict[str, str]  # dim -> where its value came from


def bind(base: Program, shapes: Mapping[str, tuple[int, ...]], dims: Mapping[str, int],
         hint: Callable[[list[str]], str]) -> Bound:
    """Bind the dims the arrays' shapes determine, re-check, and demand every dim be known.

    ``base`` is the spec checked with ``dims``; ``shapes`` holds the shape of each
    supplied array by name; ``hint`` says how the user binds dims (for messages).
    """
    tensors = declared(base)
    bindings = dict(dims)
    sources = {name: message("source_dim", dim=name, value=value) for name, value in dims.items()}
    for name, shape in shapes.items():
        _bind_plain_dims(base, tensors[name], shape, bindings, sources)
    program = base if bindings == base.dims.bindings else _recheck(base, bindings, sources)
    while True:  # a dim met only inside an expression (`[N, H * d]`): solve for it
        solved = False
        for name, shape in shapes.items():
            solved |= _compare(program, program.tensors[name], shape, bindings, sources)
        if not solved:
            break
        program = _recheck(base, bindings, sources)
    _demand_bound(program, hint)
    return Bound(program, bindings, sources)


def _bind_plain_dims(base: Program, tensor: Tensor, shape: tuple[int, ...],
                     bindings: dict[str, int], sources: dict[str, str]) -> None:
    """Entries that are one free dim (`N` in `[N, H * d]`) take the array's size."""
    declared_shape = tensor.value.shape
    assert declared_shape is not None
    if len(shape) != len(declared_shape):
        raise InputError(message("rank", kind=tensor.kind, name=tensor.name,
                                 declared=tensor.value.text(), rank=len(declared_shape),
                                 actual=shape, actual_rank=len(shape)))
    for axis, (entry, size) in enumerate(zip(declared_shape, shape)):
        if size <= 0:
            raise InputError(message("zero_axis", kind=tensor.kind, name=tensor.name, axis=axis,
                                     actual=shape))
        if not symbolic.is_name(entry):
            continue
        (name,) = symbolic.free_names(entry)
        known = bindings.get(name, base.dims.value_of(name))
        if known is not None and known != size:
            raise InputError(message(
                "dim_conflict", kind=tensor.kind, name=tensor.name, declared=tensor.value.text(),
                actual=shape, axis=axis, dim=name, got=size, bound=known,
                source=sources.get(name) or _spec_source(base, name)))
        if known is None and base.dims.dims[name].kind == "free":
            bindings[name] = size
            sources[name] = message("source_array", kind=tensor.kind, name=tensor.name, shape=shape)


def _spec_source(program: Program, name: str) -> str:
    info = program.dims.dims[name]
    if info.definition is not None:
        return message("source_spec", definition=f"dim {name} = {symbolic.to_text(info.definition)}")
    return message("source_spec", definition=message("its_constraints"))


def _recheck(base: Program, bindings: dict[str, int], sources: dict[str, str]) -> Program:
    program = base.at(bindings)
    if not program.ok:
        raise SpecError(program, message("bindings_from", bindings=bindings_text(bindings, sources)))
    return program


def _compare(program: Program, tensor: Tensor, shape: tuple[int, ...],
             bindings: dict[str, int], sources: dict[str, str]) -> bool:
    """Compare an array's shape with the declaration at the bindings; True when a dim
    was solved for (the caller re-checks)."""
    declared_shape = tensor.value.shape
    assert declared_shape is not None
    for axis, (entry, size) in enumerate(zip(declared_shape, shape)):
        expected = program.dims.evaluate(entry)
        if expected is None:
            solution = symbolic.solve_for(program.dims, entry, size)
            if solution is not None and solution[0] not in bindings:
                bindings[solution[0]] = solution[1]
                sources[solution[0]] = message("source_array", kind=tensor.kind, name=tensor.name,
                                               shape=shape)
                return True
            continue
        if expected != size:
            names = sorted(symbolic.free_names(entry))
            values = bindings_text({n: program.dims.value_of(n) for n in names})
            evaluated = [program.dims.evaluate(d) for d in declared_shape]
            raise InputError(message(
                "entry_conflict", kind=tensor.kind, name=tensor.name, declared=tensor.value.text(),
                expected=evaluated, bindings=values, actual=shape, axis=axis,
                dim=symbolic.to_text(entry), bound=expected, got=size))
    return False


def unbound_dims(program: Program) -> tuple[list[str], list[str]]:
    """Free dims without a value: those to bind, and those the spec then determines
    (``D_model`` when ``constraint D_model == H * d`` and H, d are unbound)."""
    return program.dims.unbound(), program.dims.determined()


def _demand_bound(program: Program, hint: Callable[[list[str]], str]) -> None:
    independent, derived = unbound_dims(program)
    if not independent and not derived:
        return
    names = independent or derived
    follow = message("unbound_derived", names=", ".join(derived)) if independent and derived else ""
    raise InputError(message("unbound", names=", ".join(names), flags=hint(names),
                             derived=follow))


def cli_hint(names: list[str]) -> str:
    return " ".join(message("hint_cli", name=n) for n in names)


def api_hint(names: list[str]) -> str:
    return message("hints_api", hints=", ".join(message("hint_api", name=n) for n in names))


# --- memory of reading the inputs ----------------------------------------------------------


def reading_bytes(program: Program, tensors: Mapping[str, Tensor],
                  supplied: Mapping[str, Supplied], dtype: np.dtype) -> int:
    """The most memory held while the inputs and params are read, cast and generated,
    one at a time in declaration order (as ``CompiledSpec._read`` does).

    Each one held in the run's dtype adds to the total; at its own turn it also needs
    its transient buffers: an ``.npz`` member decompressed at its file's type, a
    cast or C-ordered copy, the finiteness test (one bool per element), or the
    float64 draw of a generated array. A caller's array that needs no copy is counted
    too (the run holds it), so the figure never falls short.
    """
    held = peak = 0
    for name, tensor in tensors.items():
        shape = tuple(program.dims.evaluate(d) or 0 for d in tensor.value.shape or ())
        count = math.prod(shape)
        final = count * (1 if tensor.value.is_bool else dtype.itemsize)
        source = supplied.get(name)
        if source is None:
            transient = generation_bytes(tensor, shape, dtype)
        else:
            in_memory = isinstance(source, ArrayFile) and not source.mapped
            decompressed = source.nbytes if in_memory else 0
            transient = decompressed + final + (0 if tensor.value.is_bool else count)
        peak = max(peak, held + transient)
        held += final
    return max(peak, held)


# --- generated arrays ----------------------------------------------------------------------


def generate(tensor: Tensor, shape: tuple[int, ...], dtype: np.dtype, seed: int,
             high: int | None = None) -> np.ndarray:
    """A reproducible array for a tensor that was not supplied.

    Each tensor has its own stream (seed and name), so supplying one array does
    not change the others. Inputs ~ N(0, 1); params ~ N(0, 1/fan_in) with
    fan_in the second-to-last axis (so X @ W stays of order 1); masks are true
    with probability 0.8, with at least one true along the last axis (the keys),
    so that no softmax row is masked entirely. Drawn in float64, then rounded
    to the run's dtype: a float32 run sees the float64 run's values.
    """
    rng = np.random.default_rng([seed, zlib.crc32(tensor.name.encode("utf-8"))])
    if tensor.value.is_bool:
        return _mask(rng, shape)
    if tensor.value.element == "int":  # positions: within the axis they index (``high``)
        return np.asarray(rng.integers(0, high or DEFAULT_INT_HIGH, size=shape), dtype=np.int64)
    values = rng.standard_normal(shape)
    if tensor.value.element == "complex":  # real and imaginary parts each N(0, 1/2)
        values = (values + 1j * rng.standard_normal(shape)) / math.sqrt(2)
        dtype = np.result_type(dtype, np.complex64)
    if tensor.kind == "param" and len(shape) >= 2:
        values /= math.sqrt(shape[-2])
    return np.asarray(values, dtype=dtype)


def generate_for(program: Program, tensor: Tensor, shape: tuple[int, ...], dtype: np.dtype,
                 seed: int) -> np.ndarray:
    """:func:`generate` for a tensor of ``program``, in the run's dtype: an `int` one drawn
    within the axis it indexes, then held as the run's numbers; a mask the spec states as
    `drop` (true hides a key, docs/language.md §10.3) negated, so that it still keeps a key
    in every row."""
    if tensor.value.is_bool and "drop" in stated_conventions(program, tensor.name):
        return ~generate(tensor, shape, dtype, seed)
    if tensor.value.element != "int":
        return generate(tensor, shape, dtype, seed)
    return cast(tensor, generate(tensor, shape, dtype, seed, index_high(program, tensor.name)),
                dtype)


def stated_conventions(program: Program, name: str) -> frozenset[str]:
    """The convention words the declaration of ``name`` ends with (`keep`, `drop`)."""
    for statement in program.statements:
        if isinstance(statement, nodes.TensorDecl) and statement.name.name == name:
            return frozenset(word.name for word in statement.conventions)
    return frozenset()


def _mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    mask = np.asarray(rng.random(shape) < MASK_TRUE_FRACTION)
    if mask.ndim:  # rank 1 included: its one "row" is the whole vector
        empty = np.flatnonzero(~mask.any(axis=-1))
        rows = mask.reshape(-1, shape[-1])  # a view: the mask is C-contiguous
        rows[empty, rng.integers(shape[-1], size=len(empty))] = True
    return mask


def generation_bytes(tensor: Tensor, shape: tuple[int, ...], dtype: np.dtype) -> int:
    """What :func:`generate` holds at once: the float64 draw, and the result when it is
    another array (float32, or a bool mask)."""
    count = math.prod(shape)
    if tensor.value.is_bool:
        return count * 9 + (count // shape[-1] if shape else 0)  # draw + mask + row test
    return count * 8 + (count * dtype.itemsize if dtype != np.float64 else 0)


def generation_note(tensor: Tensor, stated: frozenset[str] = frozenset()) -> str:
    """How :func:`generate_for` draws ``tensor``; ``stated``: its declaration's convention
    words (a `drop` mask is drawn negated)."""
    if tensor.value.element == "int":
        return message("generated_positions")
    if tensor.value.is_bool:
        key = "generated_drop_mask" if "drop" in stated else "generated_mask"
        return message(key, fraction=MASK_TRUE_FRACTION)
    # What `generate` draws: 1/fan_in only for a param with a second-to-last axis.
    scaled = tensor.kind == "param" and tensor.value.shape is not None \
        and len(tensor.value.shape) >= 2
    return message("generated_param" if scaled else "generated_input")


# --- sizes ------------------------------------------------------------------------------------


def default_max_memory() -> int:
    """4 GiB, or half the machine's memory when that is less."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return DEFAULT_MEMORY_CAP
    return min(DEFAULT_MEMORY_CAP, physical // 2) if physical > 0 else DEFAULT_MEMORY_CAP


def format_bytes(count: int) -> str:
    """``7.6 MiB``; beyond a thousand PiB, a power of two (any size, never OverflowError)."""
    if count >= 1000 << 50:
        return f"about 2^{count.bit_length() - 1} B"
    for unit, size in (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20),
                       ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def output_stats(value: np.ndarray) -> str:
    """min / max / mean, ignoring NaN; no temporary larger than one bool per element."""
    if value.dtype.kind == "b":  # min / max / mean as for any output, read as 0 and 1
        true = int(np.count_nonzero(value))
        return message("report_stats", min=int(true == value.size), max=int(true > 0),
                       mean=true / value.size) + message(
            "report_stats_bool", true=true, size=value.size)
    missing = int(np.count_nonzero(np.isnan(value)))
    if missing == value.size:
        return message("report_stats_nan", count=value.size).lstrip(", ")
    present = None if not missing else np.logical_not(np.isnan(value))
    total = np.add.reduce(value, axis=None, dtype=np.float64, where=present if missing else True)
    text = message("report_stats", min=float(np.fmin.reduce(value, axis=None)),
                   max=float(np.fmax.reduce(value, axis=None)),
                   mean=float(total) / (value.size - missing))
    return text + (message("report_stats_nan", count=missing) if missing else "")
