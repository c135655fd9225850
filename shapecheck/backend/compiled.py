"""A verified spec as a callable: arrays in by name, outputs out.

Checking a spec at new sizes costs SymPy work; running it should not. So a
:class:`CompiledSpec` keeps one compiled plan per set of array shapes: the
first call with new shapes binds the dims from the arrays, re-checks the spec
at those bindings (derived dims, constraints) and compiles the plan; later
calls with the same shapes go straight to NumPy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np

from ..api import check_path, check_text
from ..program import Program
from . import runtime
from .errors import InputError, MemoryLimitError, SpecError, bindings_text, message, names_text
from .numpy_backend import Plan, compile_program, evaluate_shape

DTYPES = ("float32", "float64")
DEFAULT = "default"  # max_memory: runtime.default_max_memory()
CACHE_SIZE = 32

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


@dataclass(frozen=True)
class _Bound:
    bound: runtime.Bound
    plan: Plan


class CompiledSpec:
    """A verified spec, ready to execute with NumPy.

    ``spec(X=x, W_Q=w_q, ...)`` returns the outputs by name; every input and
    param must be given, and the dims are read from the arrays' shapes (plus
    the ``dims`` given to :func:`compile_spec`). :meth:`run` can also generate
    missing arrays, keep the intermediates and check invariants.
    """

    def __init__(self, program: Program, *, dims: Mapping[str, int] | None = None,
                 dtype: str = "float64", max_memory: int | None | str = DEFAULT,
                 hint: Callable[[list[str]], str] = runtime.api_hint) -> None:
        if not program.ok:
            raise SpecError(program)
        try:
            self.dtype = np.dtype(dtype)
        except TypeError:
            self.dtype = np.dtype(object)
        if self.dtype.name not in DTYPES:
            raise InputError(message("dtype", dtype=dtype, choices=", ".join(DTYPES)))
        self.program = program
        self.dims = dict(dims or {})
        self.max_memory = runtime.default_max_memory() if max_memory == DEFAULT else max_memory
        self.declared = runtime.declared(program)
        self.inputs = tuple(n for n, t in self.declared.items() if t.kind == "input")
        self.params = tuple(n for n, t in self.declared.items() if t.kind == "param")
        self.outputs = tuple(program.outputs)
        self._hint = hint  # how the user binds dims, for the message naming unbound ones
        self._plans: dict[Any, _Bound] = {}

    def __repr__(self) -> str:
        return (f"CompiledSpec(inputs={list(self.inputs)}, params={list(self.params)}, "
                f"outputs={list(self.outputs)}, dtype={self.dtype.name})")

    def __call__(self, arrays: Mapping[str, Any] | None = None, /, **named: Any) -> dict[str, np.ndarray]:
        """The outputs, by name, for the given inputs and params."""
        return self.run({**(arrays or {}), **named}).outputs

    def run(self, arrays: Mapping[str, Any] | None = None, *, dims: Mapping[str, int] | None = None,
            seed: int | None = None, keep_intermediates: bool = False,
            check_invariants: bool = False) -> RunResult:
        """Execute once.

        ``dims`` adds bindings to the compiled ones; ``seed`` generates every
        input and param not in ``arrays`` (without it, all must be given);
        ``keep_intermediates`` returns every tensor in ``RunResult.tensors``;
        ``check_invariants`` checks that every softmax sums to 1 and that the
        outputs are finite (an extra pass over the data).
        """
        supplied = self._supplied(arrays or {}, seed)
        all_dims = {**self.dims, **(dims or {})}
        key = (tuple((n, a.shape, a.dtype.kind == "b") for n, a in supplied.items()),
               tuple(sorted(all_dims.items())), keep_intermediates)
        bound = self._plans.get(key)
        if bound is None:
            bound = self._bind(supplied, all_dims, keep_intermediates)
            if len(self._plans) >= CACHE_SIZE:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = bound
        values = {n: runtime.cast(self.declared[n], a, self.dtype) for n, a in supplied.items()}
        generated = [n for n in self.declared if n not in supplied]
        for name in generated:
            assert seed is not None  # _supplied refuses missing arrays without a seed
            tensor = self.declared[name]
            shape = evaluate_shape(bound.bound.program, tensor.value)
            values[name] = runtime.generate(tensor, shape, self.dtype, seed)
        frame = bound.plan.execute(values, check_invariants=check_invariants)
        outputs = {name: np.asarray(frame.values[name]) for name in self.outputs}
        checks = [message("check_shapes", count=len(bound.plan.steps)),
                  message("check_dtype", dtype=self.dtype.name), *frame.checks.values()]
        warnings = list(frame.warnings)
        if check_invariants:
            for name, value in outputs.items():
                if value.dtype.kind == "f" and not np.isfinite(value).all():
                    count = value.size - int(np.count_nonzero(np.isfinite(value)))
                    warnings.append(message("non_finite_output", name=name, count=count))
        tensors = ({n: np.asarray(v) for n, v in frame.values.items()} if keep_intermediates
                   else dict(outputs))
        return RunResult(outputs, tensors, bound.plan.bindings, dict(bound.bound.sources),
                         generated, checks, warnings, bound.plan.peak_bytes)

    def _supplied(self, arrays: Mapping[str, Any], seed: int | None) -> dict[str, np.ndarray]:
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

    def _bind(self, supplied: dict[str, np.ndarray], dims: dict[str, int],
              keep_all: bool) -> _Bound:
        base = self.program
        if dims != base.dims.bindings:
            base = check_text(self.program.source, dims, infer=self.program.infer)
        if not base.ok:
            raise SpecError(base)
        shapes = {n: a.shape for n, a in supplied.items()}
        bound = runtime.bind(base, shapes, dims, self._hint)
        plan = compile_program(bound.program, self.dtype, keep_all=keep_all)
        if self.max_memory is not None and plan.peak_bytes > int(self.max_memory):
            raise memory_error(plan, int(self.max_memory))
        return _Bound(bound, plan)


def memory_error(plan: Plan, limit: int) -> MemoryLimitError:
    largest = plan.largest
    assert largest is not None
    return MemoryLimitError(message(
        "memory", total=runtime.format_bytes(plan.peak_bytes), bindings=bindings_text(plan.bindings),
        limit=runtime.format_bytes(limit), largest=largest.label,
        shape=list(largest.shape), size=runtime.format_bytes(largest.nbytes)))


def load(spec: SpecSource, dims: Mapping[str, int] | None = None) -> Program:
    """Check a spec: a :class:`Program` (re-checked with ``dims``), a path, or source text.

    A path is a :class:`os.PathLike`, or a one-line ``str`` ending in ``.attn``; any
    other ``str`` is source text.
    """
    if isinstance(spec, Program):
        return check_text(spec.source, dict(dims or {}), infer=spec.infer) if dims else spec
    if isinstance(spec, os.PathLike) or (spec.endswith(".attn") and "\n" not in spec):
        return check_path(Path(spec), dict(dims or {}))
    return check_text(spec, dict(dims or {}))


def compile_spec(spec: SpecSource, *, dims: Mapping[str, int] | None = None,
                 dtype: str = "float64", max_memory: int | None | str = DEFAULT) -> CompiledSpec:
    """Check a spec and compile it into a callable (raises :class:`SpecError` if it
    does not verify). ``max_memory`` in bytes, ``None`` for no limit."""
    return CompiledSpec(load(spec, dims), dims=dims, dtype=dtype, max_memory=max_memory)
