"""Every variant of a spec computes the same numbers: the differential oracle.

A spec that verifies may run on NumPy, torch or JAX, fused (``auto``) or not (``off``),
keeping its intermediates or not. Whatever the choice, :func:`disagreements` holds it
to the same answer, at one binding:

- every variant gives the same outputs (to the float64 tolerance of :mod:`.reference`),
  and the variants that keep intermediates give the same intermediates;
- the caller's arrays are never written (each run gets copies, compared afterwards);
- no output shares memory with an input or with another output, and each is writable;
- every variant fails, or none does, with the same kind of error (a spec too large for one
  backend is too large for all); an exception that is not a :class:`RunError` is a bug.

The test corpus (``tests/test_plan_differential.py``) and the fuzzer (``tools/fuzz.py``)
both ask this one function.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..check.program import Program
from . import runtime
from .compiled import OPTIONAL, CompiledSpec, RunResult, framework_module
from .errors import OptionError, RunError
from .plan import evaluate_shape
from .reference import compare, tolerance

BACKENDS = ("numpy", "torch", "jax")
MAX_MEMORY = 256 << 20  # a corpus spec is small: a plan past this is refused by every variant


@dataclass(frozen=True)
class Variant:
    """One way to run a spec: backend, fused or not, intermediates kept or not."""

    backend: str
    fused: str
    keep: bool

    def __str__(self) -> str:
        return f"{self.backend}, fused {self.fused}, keep_intermediates {'on' if self.keep else 'off'}"


def variants(backends: Sequence[str] = BACKENDS) -> Iterator[Variant]:
    """Every variant on ``backends``: the first, NumPy unfused without intermediates, is the
    reference the others are compared with."""
    for backend in backends:
        for fused in ("off", "auto"):
            for keep in (False, True):
                yield Variant(backend, fused, keep)


def available(backend: str) -> bool:
    """Whether ``backend`` can run here (torch and jax are optional extras)."""
    try:
        if backend in OPTIONAL:
            framework_module(backend)
    except OptionError:
        return False
    return True


def inputs_for(program: Program, seed: int, dtype: str = "float64") -> dict[str, np.ndarray]:
    """The inputs and params of a spec checked at a binding, generated from ``seed``."""
    return {name: runtime.generate(tensor, evaluate_shape(program, tensor.value),
                                   np.dtype(dtype), seed)
            for name, tensor in runtime.declared(program).items()}


def disagreements(program: Program, *, seed: int = 0, backends: Sequence[str] = BACKENDS,
                  dtype: str = "float64", max_memory: int = MAX_MEMORY,
                  check_invariants: bool = False) -> list[str]:
    """What breaks the oracle for ``program`` (checked at a binding that fixes every dim),
    one line each; empty when every variant agrees. ``check_invariants`` has every variant
    check its softmax rows and outputs as it runs (:meth:`CompiledSpec.run`)."""
    chosen = [variant for variant in variants([b for b in backends if available(b)])]
    try:
        arrays = inputs_for(program, seed, dtype)
    except RunError as error:
        return [] if not isinstance(error, OptionError) else [f"inputs: {error}"]
    problems: list[str] = []
    outcomes: dict[Variant, RunResult | str] = {}
    for variant in chosen:
        given = {name: array.copy() for name, array in arrays.items()}
        outcomes[variant] = _run(program, variant, given, dtype, max_memory, check_invariants)
        problems += [f"{variant}: the input {name} was written"
                     for name, array in given.items() if not _same(arrays[name], array)]
        result = outcomes[variant]
        if isinstance(result, RunResult):
            problems += [f"{variant}: {line}" for line in _aliasing(result, given)]
    return problems + _compare(outcomes, dtype)


def _run(program: Program, variant: Variant, arrays: dict[str, np.ndarray], dtype: str,
         max_memory: int, check_invariants: bool) -> RunResult | str:
    """The run's result, or the kind of error it stopped with (a bug is raised as such)."""
    try:
        spec = CompiledSpec(program, dims=program.dims.bindings, dtype=dtype,
                            max_memory=max_memory, backend=variant.backend, fused=variant.fused)
        return spec.run(arrays, keep_intermediates=variant.keep,
                        check_invariants=check_invariants)
    except RunError as error:
        return f"{type(error).__name__}: {error}"


def _same(before: np.ndarray, after: np.ndarray) -> bool:
    return before.shape == after.shape and bool(np.array_equal(before, after, equal_nan=True))


def _aliasing(result: RunResult, inputs: dict[str, np.ndarray]) -> Iterator[str]:
    seen: list[tuple[str, np.ndarray]] = [(f"the input {n}", a) for n, a in inputs.items()]
    for name, value in result.outputs.items():
        if not value.flags.writeable:
            yield f"the output {name} is read-only"
        for other, array in seen:
            if value.size and np.shares_memory(value, array):
                yield f"the output {name} shares memory with {other}"
        seen.append((f"the output {name}", value))


def _compare(outcomes: dict[Variant, RunResult | str], dtype: str) -> list[str]:
    problems: list[str] = []
    if not outcomes:
        return problems
    reference_variant, reference = next(iter(outcomes.items()))
    kept = next(((p, r) for p, r in outcomes.items() if p.keep and isinstance(r, RunResult)),
                None)
    for variant, result in outcomes.items():
        if isinstance(reference, str) or isinstance(result, str):
            if _kind(reference) != _kind(result):
                problems.append(f"{variant}: {_text(result)}, but {reference_variant}: "
                                f"{_text(reference)}")
            continue
        problems += [f"{variant}: {line}"
                     for line in _differences(reference.outputs, result.outputs, dtype)]
        if variant.keep and kept is not None and isinstance(kept[1], RunResult):
            shared = {n: v for n, v in result.tensors.items() if n in kept[1].tensors}
            problems += [f"{variant} (intermediates, against {kept[0]}): {line}"
                         for line in _differences(kept[1].tensors, shared, dtype)]
    return problems


def _kind(outcome: RunResult | str) -> str:
    return outcome.split(":", 1)[0] if isinstance(outcome, str) else "ran"


def _text(outcome: RunResult | str) -> str:
    return outcome if isinstance(outcome, str) else "ran"


def _differences(expected: dict[str, np.ndarray], got: dict[str, np.ndarray],
                 dtype: str) -> Iterator[str]:
    for name, want in expected.items():
        have = got.get(name)
        if have is None:
            yield f"no {name}"
            continue
        if np.shape(want) != np.shape(have):
            yield f"{name} has shape {list(np.shape(have))}, not {list(np.shape(want))}"
            continue
        if np.asarray(want).dtype.kind != np.asarray(have).dtype.kind:
            yield f"{name} is {np.asarray(have).dtype}, not {np.asarray(want).dtype}"
            continue
        rtol, atol, _ = tolerance(dtype, dtype)
        difference = compare(np.asarray(want), np.asarray(have), rtol, atol)
        if difference is not None:
            yield (f"{name} differs at {list(difference.worst)}: {difference.got!r}, "
                   f"not {difference.expected!r} ({difference.count} of {difference.size})")
