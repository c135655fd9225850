"""A verified spec as a callable: arrays in by name, outputs out.

One run is a straight line, each step a method of :class:`CompiledSpec`::

    load     the arrays by name: in memory, or files known by their headers
    bind     the dims their shapes determine; the program re-checked at those sizes
             (Program.at); a backend's plan built; the memory estimate checked
    read     files read, arrays cast to the run's dtype, the rest generated
    execute  the plan, statement by statement, each checked against the checker
    report   outputs, the invariants checked, warnings (RunResult)

Checking a spec at new sizes costs SymPy work; running it should not. So a
:class:`CompiledSpec` keeps one bound plan per set of array shapes: later calls
with the same shapes go straight to reading and executing.

Backends: :data:`BACKENDS` maps a name to a function that builds the plan of a program
at bound sizes (``numpy_backend.build_plan``); a plan has
``execute(values, check_invariants=...)`` returning a frame with ``values``,
``checks`` and ``warnings``, and ``peak_bytes``/``largest``/``final_bytes`` for
the memory estimate. Invariants a plan checks as it runs (a softmax sums to 1)
go to ``frame.checks``; a violated one raises :class:`CheckerBug` -- except the
weights an attention's contraction sums (the spec's doing: a warning).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np

from .. import depth
from ..options import check_bindings, parse_size
from ..check.program import Program
from ..messages.diagnostics import shown
from . import runtime
from .arrays import ArrayFile
from .errors import (
    InputError, MemoryLimitError, OptionError, SpecError, bindings_text, message, names_text,
)
from .numpy_backend import build_plan
from .plan import Plan, evaluate_shape

DTYPES = ("float32", "float64")
DEFAULT = "default"  # max_memory: runtime.default_max_memory()
CACHE_SIZE = 32
RUN_OVERHEAD = 64 << 10  # the run's own Python objects and NumPy scalars, in bytes
FUSED = ("auto", "off")


def _numpy_plan(program: Program, dtype: np.dtype, *, keep_all: bool, fuse: bool,
                device: str) -> Plan:
    return build_plan(program, dtype, keep_all=keep_all, fuse=fuse)


def _torch_plan(program: Program, dtype: np.dtype, *, keep_all: bool, fuse: bool,
                device: str) -> Any:
    from . import torch_backend  # torch is imported only when it runs a spec

    return torch_backend.build_plan(program, dtype.name, keep_all=keep_all, fuse=fuse,
                                    device=device)


def _jax_plan(program: Program, dtype: np.dtype, *, keep_all: bool, fuse: bool,
              device: str) -> Any:
    from . import jax_backend  # jax is imported only when it runs a spec

    return jax_backend.build_plan(program, dtype, keep_all=keep_all, fuse=fuse, device=device)


BACKENDS: dict[str, Callable[..., Plan]] = {"numpy": _numpy_plan, "torch": _torch_plan,
                                            "jax": _jax_plan}
DEVICES = {"numpy": ("cpu",), "torch": ("cpu", "cuda"), "jax": ("cpu", "cuda")}  # and cuda:N
OPTIONAL = {"torch": ("torch_backend", "no_torch", "no_cuda"),  # the extras: their module,
            "jax": ("jax_backend", "no_jax", "no_gpu_jax")}  # its absence, no GPU there


def framework_module(backend: str) -> Any:
    """The module of an optional backend (torch, jax), imported now; its absence is an
    :class:`OptionError` naming the extra to install."""
    module, missing, _ = OPTIONAL[backend]
    try:
        return importlib.import_module(f"{__package__}.{module}")
    except ImportError as error:
        raise OptionError(message(missing, reason=error)) from None


SpecSource = Union[Program, str, "os.PathLike[str]"]


@dataclass
class RunResult:
    """What one execution produced and what it checked."""

    outputs: dict[str, np.ndarray]
    tensors: dict[str, np.ndarray]  # inputs, params and every defined tensor (keep_intermediates)
    bindings: dict[str, int]  # the value of every dim
    sources: dict[str, str]  # where each given dim came from (--dim, an array)
    generated: list[str]  # inputs and params drawn from the seed
    checks: list[str]  # the invariants that were checked, one line each
    warnings: list[str] = field(default_factory=list)
    peak_estimate: int = 0  # bytes, the estimate checked against max_memory
    plan: list[str] = field(default_factory=list)  # which attention patterns ran fused, or why not


@dataclass(frozen=True)
class _Bound:
    """A spec bound to sizes: the program at those sizes, its plan, the whole estimate."""

    bound: runtime.Bound
    plan: Plan
    peak_bytes: int  # the largest of: reading the inputs, the plan, the report


class CompiledSpec:
    """A verified spec, ready to execute with NumPy.

    ``spec(X=x, W_Q=w_q, ...)`` returns the outputs by name; every input and
    param must be given, and the dims are read from the arrays' shapes (plus
    the ``dims`` given to :func:`compile_spec`). :meth:`run` can also generate
    missing arrays, keep the intermediates and check invariants.
    """

    def __init__(self, program: Program, *, dims: Mapping[str, int] | None = None,
                 dtype: str = "float64", max_memory: int | None | str = DEFAULT,
                 hint: Callable[[list[str]], str] = runtime.api_hint,
                 backend: str = "numpy", device: str = "cpu", fused: str = "auto") -> None:
        if not program.ok:
            raise SpecError(program)
        if not isinstance(dtype, (str, np.dtype)) or str(dtype) not in DTYPES:
            raise OptionError(message("dtype", dtype=repr(dtype), choices=", ".join(DTYPES)))
        self.dtype = np.dtype(dtype)
        self.program = program
        self.dims = check_bindings(dims)
        self.max_memory = (runtime.default_max_memory() if max_memory == DEFAULT
                           else parse_size(max_memory))
        self.declared = runtime.declared(program)
        self.inputs = tuple(n for n, t in self.declared.items() if t.kind == "input")
        self.params = tuple(n for n, t in self.declared.items() if t.kind == "param")
        self.outputs = tuple(program.outputs)
        if backend not in BACKENDS:
            raise OptionError(message("backend", backend=repr(backend),
                                      choices=", ".join(BACKENDS)))
        check_fused(fused)
        if backend in OPTIONAL:
            framework_module(backend)  # only to know that it can run
        self.backend, self.device, self.fuse = backend, check_device(backend, device), fused == "auto"
        self._build_plan = BACKENDS[backend]
        self._hint = hint  # how the user binds dims, for the message naming unbound ones
        self._plans: dict[Any, _Bound] = {}

    def __repr__(self) -> str:
        return (f"CompiledSpec(inputs={list(self.inputs)}, params={list(self.params)}, "
                f"outputs={list(self.outputs)}, dtype={self.dtype.name}, backend={self.backend})")

    def __call__(self, arrays: Mapping[str, Any] | None = None, /, **named: Any) -> dict[str, np.ndarray]:
        """The outputs, by name, for the given inputs and params."""
        return self.run({**(arrays or {}), **named}).outputs

    def run(self, arrays: Mapping[str, Any] | None = None, *, dims: Mapping[str, int] | None = None,
            seed: int | None = None, keep_intermediates: bool = False,
            check_invariants: bool = False,
            progress: Callable[[float, str], None] | None = None,
            zero_masked_rows: bool = False) -> RunResult:
        """Execute once: load, bind, read, execute, report.

        ``arrays`` maps input and param names to arrays (or :class:`~.arrays.ArrayFile`
        headers, read only after the memory check); ``dims`` adds bindings to the
        compiled ones; ``seed`` generates every input and param not in ``arrays``
        (without it, all must be given); ``keep_intermediates`` returns every tensor
        in ``RunResult.tensors``; ``check_invariants`` checks that every softmax sums
        to 1 and that the outputs are finite (an extra pass over the data);
        ``progress(fraction, label)`` is told how far the execution is;
        ``zero_masked_rows`` gives a fully masked softmax row zero weights (the value SDPA and
        FlexAttention give it) instead of NaN: conformance's second reading of a spec
        (docs/conform.md), for an unfused NumPy run only.
        """
        if zero_masked_rows and (self.fuse or self.backend != "numpy"):
            raise ValueError("zero_masked_rows is for an unfused NumPy run")  # internal use
        with depth.room():  # building and running recurse as deep as the spec nests
            return self._run(arrays, dims, seed, keep_intermediates, check_invariants, progress,
                             zero_masked_rows)

    def _run(self, arrays: Mapping[str, Any] | None, dims: Mapping[str, int] | None,
             seed: int | None, keep_intermediates: bool, check_invariants: bool,
             progress: Callable[[float, str], None] | None,
             zero_masked_rows: bool = False) -> RunResult:
        supplied = self._load(arrays or {}, seed)
        bound = self._bind(supplied, {**self.dims, **check_bindings(dims)}, keep_intermediates)
        try:
            values, generated = self._read(bound, supplied, seed)
            frame = bound.plan.execute(values, check_invariants=check_invariants,
                                       progress=progress, zero_masked_rows=zero_masked_rows)
            return self._report(bound, frame, values, generated, keep_intermediates,
                                check_invariants)
        except MemoryError:
            raise MemoryLimitError(message(
                "out_of_memory", bindings=bindings_text(bound.plan.bindings),
                total=runtime.format_bytes(bound.peak_bytes),
                limit=_limit_text(self.max_memory))) from None

    # --- the steps of a run, in order ---------------------------------------------------------

    def _load(self, arrays: Mapping[str, Any], seed: int | None) -> dict[str, runtime.Supplied]:
        """The supplied arrays by name, in declaration order, their element kinds checked."""
        unknown = [n for n in arrays if n not in self.declared]
        if unknown:
            raise InputError(message("unknown_array", name=unknown[0],
                                     names=names_text(list(self.declared))))
        missing = [n for n in self.declared if n not in arrays]
        if missing and seed is None:
            raise InputError(message("missing_arrays", names=names_text(missing)))
        # declaration order, so that bindings and messages do not depend on the caller's order
        return {n: runtime.check_array(self.declared[n], arrays[n]) for n in self.declared
                if n in arrays}

    def _bind(self, supplied: dict[str, runtime.Supplied], dims: dict[str, int],
              keep_all: bool) -> _Bound:
        """Bind the dims (from ``dims`` and the arrays' shapes), plan, check the memory
        estimate; cached per set of shapes."""
        key = (tuple((n, a.shape, a.dtype.str, isinstance(a, ArrayFile), _layout(a))
                     for n, a in supplied.items()), tuple(sorted(dims.items())), keep_all)
        # (one backend, device and fusion choice per CompiledSpec: the key need not name them)
        cached = self._plans.get(key)
        if cached is not None:
            return cached
        base = self.program.at(dims)
        if not base.ok:
            raise SpecError(base)
        bound = runtime.bind(base, {n: a.shape for n, a in supplied.items()}, dims, self._hint)
        plan = self._build_plan(bound.program, self.dtype, keep_all=keep_all, fuse=self.fuse,
                                device=self.device)
        reading = runtime.reading_bytes(bound.program, self.declared, supplied, self.dtype)
        peak = RUN_OVERHEAD + max(plan.peak_bytes, reading,
                                  plan.final_bytes + _report_bytes(bound.program, plan))
        if self.max_memory is not None and peak > self.max_memory:
            raise memory_error(plan, peak, self.max_memory)
        result = _Bound(bound, plan, peak)
        if len(self._plans) >= CACHE_SIZE:
            self._plans.pop(next(iter(self._plans)))
        self._plans[key] = result
        return result

    def _read(self, bound: _Bound, supplied: dict[str, runtime.Supplied],
              seed: int | None) -> tuple[dict[str, np.ndarray], list[str]]:
        """Every input and param in the run's dtype: read and cast, or generated."""
        values: dict[str, np.ndarray] = {}
        generated: list[str] = []
        for name, tensor in self.declared.items():  # one at a time, as the estimate assumes
            if name in supplied:
                values[name] = runtime.cast(tensor, supplied[name], self.dtype)
                continue
            assert seed is not None  # _load refuses missing arrays without a seed
            shape = evaluate_shape(bound.bound.program, tensor.value)
            values[name] = runtime.generate_for(bound.bound.program, tensor, shape, self.dtype,
                                                seed)
            generated.append(name)
        return values, generated

    def _report(self, bound: _Bound, frame: Any, values: dict[str, np.ndarray],
                generated: list[str], keep_intermediates: bool,
                check_invariants: bool) -> RunResult:
        # An output that is a version of a rebound input (`cache[...] = xk; output cache`)
        # is named as written; none aliases an input or another output.
        outputs = _unaliased({shown(name): np.asarray(frame.values[name])
                              for name in self.outputs}, values)
        checks = [message("check_shapes", count=len(bound.plan.steps)),
                  message("check_dtype", dtype=self.dtype.name) if not any(
                      t.value.element == "complex" for t in bound.bound.program.tensors.values())
                  else message("check_dtype_complex", dtype=self.dtype.name,
                               complex=np.result_type(self.dtype, np.complex64).name),
                  *frame.checks.values()]
        warnings = list(frame.warnings)
        if check_invariants:
            for name, value in outputs.items():
                if value.dtype.kind == "f" and not np.isfinite(value).all():
                    count = value.size - int(np.count_nonzero(np.isfinite(value)))
                    warnings.append(message("non_finite_output", name=name, count=count))
        # Intermediates by their own names (a rebound tensor's versions are `name′2`, ...).
        tensors = ({**{n: np.asarray(v) for n, v in frame.values.items()}, **outputs}
                   if keep_intermediates else dict(outputs))
        return RunResult(outputs, tensors, bound.plan.bindings, dict(bound.bound.sources),
                         generated, checks, warnings, bound.peak_bytes, list(bound.plan.notes))


def _unaliased(outputs: dict[str, np.ndarray],
               inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs, each its own writable array: one that may share memory with an input
    (`output A = reshape(X, [2*N])`, a view of the caller's array) or with an earlier
    output is copied, so that writing into an output never changes anything else."""
    result: dict[str, np.ndarray] = {}
    others = [a for a in inputs.values() if isinstance(a, np.ndarray)]
    for name, value in outputs.items():
        if not value.flags.writeable or any(np.may_share_memory(value, o) for o in others):
            value = np.array(value)
        result[name] = value
        others.append(value)
    return result


def check_fused(fused: object) -> None:
    """``fused`` is ``"auto"`` or ``"off"`` (:class:`OptionError` otherwise)."""
    if not isinstance(fused, str) or fused not in FUSED:
        raise OptionError(message("fused_option", fused=repr(fused), choices=", ".join(FUSED)))


def check_device(backend: str, device: str) -> str:
    """The device, checked: NumPy runs on the CPU; torch and jax on ``cpu``, ``cuda`` or
    ``cuda:N`` (a CUDA device this machine lacks is refused here, before anything runs)."""
    if not isinstance(device, str) or (device not in DEVICES[backend] and not (
            "cuda" in DEVICES[backend] and device.startswith("cuda:") and device[5:].isdigit())):
        raise OptionError(message("device", device=repr(device), backend=backend,
                                  choices=", ".join(DEVICES[backend])))
    if device.startswith("cuda") and not framework_module(backend).cuda_available():
        raise OptionError(message(OPTIONAL[backend][2], device=device))
    return device


def _layout(array: runtime.Supplied) -> bool:
    """Whether reading the array gives a C-contiguous one (else casting copies it)."""
    if isinstance(array, ArrayFile):
        return not array.fortran_order or array.ndim < 2
    return bool(array.flags.c_contiguous)


def _report_bytes(program: Program, plan: Plan) -> int:
    """Temporaries of the run's last pass over the outputs (finiteness, statistics):
    two bool arrays of the largest real output (a bool output needs none)."""
    sizes = [plan.element_counts.get(name, 0) for name in program.outputs
             if not program.tensors[name].value.is_bool]
    return 2 * max(sizes, default=0)


def _limit_text(limit: int | None) -> str:
    return "unlimited" if limit is None else runtime.format_bytes(limit)


def memory_error(plan: Plan, total: int, limit: int) -> MemoryLimitError:
    largest = plan.largest
    assert largest is not None
    return MemoryLimitError(message(
        "memory", total=runtime.format_bytes(total), bindings=bindings_text(plan.bindings),
        limit=runtime.format_bytes(limit), largest=largest.label,
        shape=list(largest.shape), size=runtime.format_bytes(largest.nbytes)))


def load(spec: SpecSource, dims: Mapping[str, int] | None = None) -> Program:
    """Check a spec: a :class:`Program` (re-checked with ``dims``), a path, or source text.

    A path is a :class:`os.PathLike`, or a one-line ``str`` ending in ``.attn``; any
    other ``str`` is source text. Bad ``dims`` raise :class:`OptionError`.
    """
    from ..loader import check_path, check_text  # loading a spec: the stage before this one

    bindings = check_bindings(dims)
    if isinstance(spec, Program):
        return spec.at(bindings) if bindings else spec
    if isinstance(spec, os.PathLike) or (spec.endswith(".attn") and "\n" not in spec):
        return check_path(Path(spec), bindings)
    return check_text(spec, bindings)


def compile_spec(spec: SpecSource, *, dims: Mapping[str, int] | None = None,
                 dtype: str = "float64", max_memory: int | None | str = DEFAULT,
                 backend: str = "numpy", device: str = "cpu", fused: str = "auto") -> CompiledSpec:
    """Check a spec and compile it into a callable (raises :class:`SpecError` if it
    does not verify). ``max_memory``: bytes, a size such as ``"4GiB"``, ``None`` for
    no limit; ``backend``: ``numpy``, ``torch`` or ``jax`` (the optional extras);
    ``device``: ``cpu``, or ``cuda`` with torch or jax; ``fused``: ``auto`` runs each
    attention pattern fused (blockwise in NumPy, one ``scaled_dot_product_attention`` in
    torch, one ``jax.nn.dot_product_attention`` in jax) where it can, ``off`` never. A bad
    option raises :class:`OptionError`."""
    return CompiledSpec(load(spec, dims), dims=dims, dtype=dtype, max_memory=max_memory,
                        backend=backend, device=device, fused=fused)
