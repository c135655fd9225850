"""Everything around execution: arrays in, bindings from them, resources.

- Loading ``.npy``/``.npz`` files, never with pickle.
- Checking supplied arrays against their declarations (rank, element type,
  finite values) and binding the dims they determine: the bindings are fed
  back to the checker (``check_text(source, bindings)``), so derived dims and
  constraints are decided by the symbolic module, not here.
- Generating the arrays that are not supplied, from a seed.
- Sizes: parsing ``--max-memory``, its default, printing byte counts.
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import symbolic
from ..api import check_text
from ..program import Program, Tensor
from .errors import InputError, RunError, SpecError, bindings_text, message

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK"
MASK_TRUE_FRACTION = 0.8
GIB = 1 << 30
DEFAULT_MEMORY_CAP = 4 * GIB


class UnreadableFile(RunError):
    """A file named on the command line cannot be read at all (exit 2, as for `verify`)."""

    exit_code = 2


# --- declarations --------------------------------------------------------------------------


def declared(program: Program) -> dict[str, Tensor]:
    """Inputs and params, in declaration order."""
    return {n: t for n, t in program.tensors.items() if t.kind in ("input", "param")}


def element_kind_ok(tensor: Tensor, array: np.ndarray) -> bool:
    """bool declarations take bool arrays; real ones take floats and integers."""
    return array.dtype.kind == "b" if tensor.value.is_bool else array.dtype.kind in "fiu"


def check_array(tensor: Tensor, array: Any) -> np.ndarray:
    """The array as NumPy sees it, if its element type fits the declaration."""
    if not isinstance(array, np.ndarray):
        try:
            array = np.asarray(array)
        except (TypeError, ValueError):
            raise InputError(message("not_an_array", kind=tensor.kind, name=tensor.name,
                                     type=type(array).__name__)) from None
    if not element_kind_ok(tensor, array):
        wanted = message("wanted_bool" if tensor.value.is_bool else "wanted_real")
        raise InputError(message("element_type", kind=tensor.kind, name=tensor.name,
                                 declared=tensor.value.text(), wanted=wanted, dtype=array.dtype))
    return array


def cast(tensor: Tensor, array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The array in the run's dtype (bool stays bool), refusing NaN and infinity."""
    if tensor.value.is_bool:
        return np.asarray(array, dtype=bool)
    result = np.asarray(array, dtype=dtype)
    if not np.isfinite(result).all():
        count = result.size - int(np.count_nonzero(np.isfinite(result)))
        raise InputError(message("non_finite", kind=tensor.kind, name=tensor.name, count=count))
    return result


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
    program = check_text(base.source, bindings, infer=base.infer)
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


# --- generated arrays ----------------------------------------------------------------------


def generate(tensor: Tensor, shape: tuple[int, ...], dtype: np.dtype, seed: int) -> np.ndarray:
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
    values = rng.standard_normal(shape)
    if tensor.kind == "param" and len(shape) >= 2:
        values /= math.sqrt(shape[-2])
    return np.asarray(values, dtype=dtype)


def _mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    mask = np.asarray(rng.random(shape) < MASK_TRUE_FRACTION)
    if mask.ndim:
        empty = np.nonzero(~mask.any(axis=-1))
        mask[(*empty, rng.integers(shape[-1], size=len(empty[0])))] = True
    return mask


def generation_note(tensor: Tensor) -> str:
    if tensor.value.is_bool:
        return message("generated_mask", fraction=MASK_TRUE_FRACTION)
    return message("generated_param" if tensor.kind == "param" else "generated_input")


# --- files ------------------------------------------------------------------------------------


def load_npy(path: str | Path) -> np.ndarray:
    """A ``.npy`` file, memory-mapped (nothing is read until it is used), never unpickled."""
    head = _head(path)
    if not head.startswith(NPY_MAGIC):
        reason = message("npz_not_npy") if head.startswith(ZIP_MAGIC) else message("no_magic")
        raise InputError(message("not_npy", path=path, reason=reason))
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as error:
        raise _load_error(path, error) from None
    except EOFError as error:
        raise InputError(message("not_npy", path=path, reason=error)) from None
    except OSError as error:
        raise UnreadableFile(message("unreadable", path=path, reason=_reason(error))) from None
    if not isinstance(array, np.ndarray):
        raise InputError(message("not_npy", path=path, reason=type(array).__name__))
    return array


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Every array of a ``.npz`` archive, by key, never unpickled."""
    head = _head(path)
    if not head.startswith(ZIP_MAGIC):
        reason = message("npy_not_npz") if head.startswith(NPY_MAGIC) else message("no_magic")
        raise InputError(message("not_npz", path=path, reason=reason))
    arrays: dict[str, np.ndarray] = {}
    try:
        with np.load(path, allow_pickle=False) as archive:
            for key in archive.files:
                try:
                    arrays[key] = archive[key]
                except ValueError as error:
                    raise _load_error(path, error, key) from None
                except (EOFError, zipfile.BadZipFile, zlib.error) as error:
                    raise InputError(message("npz_key", path=path, key=key,
                                             reason=error)) from None
    except (zipfile.BadZipFile, EOFError, ValueError) as error:
        raise InputError(message("not_npz", path=path, reason=error)) from None
    except OSError as error:
        raise UnreadableFile(message("unreadable", path=path, reason=_reason(error))) from None
    return arrays


def _head(path: str | Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(NPY_MAGIC))
    except FileNotFoundError:
        raise UnreadableFile(message("no_file", path=path)) from None
    except OSError as error:
        raise UnreadableFile(message("unreadable", path=path, reason=_reason(error))) from None


def _load_error(path: str | Path, error: ValueError, key: str | None = None) -> InputError:
    text = str(error)
    if any(word in text for word in ("pickle", "Object arrays", "Python objects")):
        where = message("npz_member", path=path, key=key) if key is not None else str(path)
        return InputError(message("pickled", path=where))
    if "mmap length" in text:
        text = message("truncated")
    if key is not None:
        return InputError(message("npz_key", path=path, key=key, reason=text))
    return InputError(message("not_npy", path=path, reason=text))


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def save_npz(path: str | Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write the archive whole or not at all (a temporary file, then a rename)."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.partial")
    try:
        with open(temporary, "wb") as handle:
            np.savez(handle, **arrays)  # type: ignore[arg-type]
        os.replace(temporary, target)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise UnreadableFile(message("cannot_write", path=path, reason=_reason(error))) from None


# --- sizes ------------------------------------------------------------------------------------

_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
          "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40}


def parse_size(text: str) -> int | None:
    """``4GiB``, ``512MiB``, ``2GB``, ``1000000`` -> bytes; ``unlimited`` -> None."""
    cleaned = text.strip().lower().replace(" ", "")
    if cleaned in ("unlimited", "none"):
        return None
    number = cleaned.rstrip("kmgtib")
    unit = cleaned[len(number):].removesuffix("b")
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not math.isfinite(value) or value <= 0:
        raise InputError(message("memory_size", text=text))
    return int(value * _UNITS[unit])


def default_max_memory() -> int:
    """4 GiB, or half the machine's memory when that is less."""
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return DEFAULT_MEMORY_CAP
    return min(DEFAULT_MEMORY_CAP, physical // 2) if physical > 0 else DEFAULT_MEMORY_CAP


def format_bytes(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"
