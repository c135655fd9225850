"""No false alarm by construction: a size or shape error on a traced module's spec is run.

A traced module ran in PyTorch at its traced sizes, so a size or shape error on its spec
(SC2xx, SC3xx) is either true at other admissible sizes or a defect of the lowering. Each
one is confirmed by running the module at the diagnostic's counterexample sizes, rebuilt
there (:attr:`Extraction.remake`: the constructor's or the config's sizes from the dims)
and called with inputs of the spec's shapes at those sizes:

- PyTorch fails at the diagnostic's line, or returns another shape than the spec says
  there: **confirmed**, shown with what torch did;
- PyTorch runs and returns the spec's shapes: **contradicted**, never shown;
- the module cannot be built or run there (its constructor refuses the sizes, it fails at
  another line, it cannot be rebuilt at other sizes): the smallest admissible
  counterexample of the same diagnostic is tried; when none can be run, the diagnostic is
  shown as a note that names the sizes and says it is unconfirmed;
- the module refuses those sizes by a check of its own (a `raise` or an `assert` in Python
  outside torch: einops' "can't divide axis of length 1 in chunks of 7", a module's
  `assert T <= block_size`) at every counterexample tried: **refused**, never shown — the
  sizes the diagnostic needs are ones the code rejects on purpose.

One entry point, :func:`confirm` (the checked spec's diagnostics -> those to show).
"""

from __future__ import annotations

import functools
import itertools
import linecache
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ...messages import codes
from ...messages.diagnostics import Diagnostic, Note, Severity
from .errors import Location, traceback_locations

if TYPE_CHECKING:
    from ...check.program import Program
    from . import Extraction

#: The codes confirmed by running: size and shape errors (a formula warning is not run).
CONFIRMED_FAMILIES = ("SC2", "SC3")
#: Counterexamples tried per diagnostic, and the re-checks spent finding them.
MAX_TRIES, MAX_RECHECKS = 4, 48
#: Small sizes the search for another counterexample draws from, besides those near the
#: first counterexample's.
SMALL = (1, 2, 3, 4, 5, 6, 7, 8)


@dataclass(frozen=True)
class Outcome:
    """What running the module at some sizes said about a diagnostic."""

    verdict: str                 # "confirmed", "contradicted", "refused" or "unrun"
    sizes: dict[str, int]
    detail: str = ""


@dataclass
class Confirmed:
    """The diagnostics to show, and those PyTorch contradicts (a lowering defect each: never
    shown, and a failure in the zoo's test)."""

    shown: list[Diagnostic]
    contradicted: list[Diagnostic]
    #: how many of ``shown`` PyTorch could not run to confirm (demoted to notes)
    unconfirmed: int = 0


def confirm(extraction: Extraction, program: Program) -> Confirmed:
    """The diagnostics of ``program`` (the spec traced from ``extraction``): size and shape
    errors confirmed by PyTorch shown with a note on what it did, those it contradicts set
    apart, those it cannot run demoted to notes, those the module refuses on purpose
    dropped; the others as they are."""
    confirmed = Confirmed([], [])
    base = _traced_sizes(extraction, program)
    # a size no input's shape gives (one the data decides: an expert's share of the
    # tokens, `nonzero`'s count) cannot be chosen for a run: no confirmation
    unbound = [name for name in _free(program) if name not in base]
    lines = program.source.splitlines()
    for diagnostic in program.diagnostics:
        if not diagnostic.code.startswith(CONFIRMED_FAMILIES) \
                or _states_an_annotation(diagnostic, lines):
            confirmed.shown.append(diagnostic)
            continue
        outcome = Outcome("unrun", dict(diagnostic.counterexample), codes.TORCH_HELPS[
            "data_sizes"].format(names=", ".join(f"`{name}`" for name in unbound))) \
            if unbound else _judge(extraction, program, diagnostic, base)
        if outcome.verdict == "contradicted":
            confirmed.contradicted.append(diagnostic)
        elif outcome.verdict == "refused":
            continue  # the module rejects the sizes on purpose: nothing true to say
        else:
            confirmed.shown.append(_annotated(diagnostic, outcome))
            confirmed.unconfirmed += outcome.verdict != "confirmed"
    return confirmed


def _annotated(diagnostic: Diagnostic, outcome: Outcome) -> Diagnostic:
    sizes = _sizes_text(outcome.sizes)
    if outcome.verdict == "confirmed":
        note = codes.TORCH_HELPS["confirmed"].format(sizes=sizes, detail=outcome.detail)
        return replace(diagnostic, notes=(*diagnostic.notes, Note(note)))
    note = codes.TORCH_HELPS["unconfirmed"].format(sizes=sizes, detail=outcome.detail)
    return replace(diagnostic, severity=Severity.NOTE, notes=(*diagnostic.notes, Note(note)))


def _sizes_text(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{name}={size}" for name, size in sizes.items()) or \
        codes.TORCH_HELPS["other_sizes"]


def _states_an_annotation(diagnostic: Diagnostic, lines: list[str]) -> bool:
    """A diagnostic on the ``assert`` a jaxtyping annotation became (front/annotations.py):
    it is about what the annotation says, true at the traced sizes themselves, not a size
    at which the module would fail, so it is shown as it is."""
    line = diagnostic.span.line
    return 0 < line <= len(lines) and lines[line - 1].lstrip().startswith("assert ")


def base_bindings(extraction: Extraction, program: Program) -> dict[str, int] | None:
    """The traced sizes of the spec's free dims: the built dims', and each symbolic axis
    read from the example input it belongs to. None when one cannot be told."""
    free = _free(program)
    bindings = _traced_sizes(extraction, program)
    return bindings if all(name in bindings for name in free) else None


def _free(program: Program) -> list[str]:
    return [name for name, info in program.dims.dims.items() if info.kind == "free"]


def _traced_sizes(extraction: Extraction, program: Program) -> dict[str, int]:
    """The free dims the module's build or an example input's shape gives, with their sizes."""
    free = _free(program)
    bindings = {name: size for name, size in extraction.bindings.items() if name in free}
    for name, (argument, path) in extraction.lowered.inputs.items():
        tensor = program.tensors.get(name)
        found = leaf(extraction.example.get(argument), path)
        if tensor is None or tensor.value.shape is None or not hasattr(found, "shape"):
            continue
        for dim, size in zip(tensor.value.shape, found.shape):
            text = str(dim)
            if text in free and text not in bindings:
                bindings[text] = int(size)
        for dim, size in zip(tensor.value.shape, found.shape):
            bindings.update(_of_multiple(str(dim), int(size), free, {**extraction.bindings,
                                                                       **bindings}))
    return bindings


def _of_multiple(text: str, size: int, free: set[str], known: dict[str, int]) -> dict[str, int]:
    """The free dim of an axis written as its multiple (`7 * T`, `patch_size * T`: a size
    the module cuts into windows or patches), every other factor a number or a known dim."""
    factors = [part.strip() for part in text.split("*")] if "*" in text and "**" not in text \
        and "/" not in text and "+" not in text and "-" not in text else []
    unknown = [f for f in factors if f in free and f not in known]
    if len(unknown) != 1 or any(f not in known and not f.isdigit() for f in factors
                                if f != unknown[0]):
        return {}
    product = 1
    for factor in factors:
        if factor != unknown[0]:
            product *= int(factor) if factor.isdigit() else known[factor]
    return {unknown[0]: size // product} if product and size % product == 0 else {}


def _judge(extraction: Extraction, program: Program, diagnostic: Diagnostic,
           base: dict[str, int]) -> Outcome:
    location = extraction.lines.get(diagnostic.span.line)
    # the module as built takes other sizes of its inputs' symbolic axes; other dims only
    # as it can be built again with them
    changeable = set(base) - set(extraction.bindings)
    if extraction.remake is not None:
        changeable |= set(base) if extraction.rebuilt is None else set(base) & extraction.rebuilt
    unrun: Outcome | None = None
    contradicted: Outcome | None = None
    refused: Outcome | None = None
    for sizes in itertools.islice(_candidates(program, diagnostic, base, changeable), MAX_TRIES):
        outcome = _run(extraction, program, {**base, **sizes}, sizes, location)
        if outcome.verdict == "confirmed":
            return outcome
        if outcome.verdict == "refused":
            refused = refused or outcome
            continue
        if outcome.verdict == "contradicted":
            # a size of 1 broadcasts: a contradiction there is checked where none is 1
            if 1 not in sizes.values():
                return outcome
            contradicted = contradicted or outcome
        else:
            unrun = unrun or outcome
    if contradicted is not None:
        return contradicted
    if refused is not None and unrun is None:
        return refused
    return unrun or Outcome("unrun", dict(diagnostic.counterexample) or dict(base),
                            codes.TORCH_HELPS["not_rebuilt"])


def _candidates(program: Program, diagnostic: Diagnostic, base: dict[str, int],
                changeable: set[str]) -> Iterator[dict[str, int]]:
    """The diagnostic's own counterexample (the traced sizes when it has none), then the
    smallest others at which the spec still reports it, smallest first."""
    first = {name: size for name, size in diagnostic.counterexample if name in base}
    if set(first) <= changeable:
        yield first
    names = sorted(set(first) & changeable) or sorted(changeable)
    if not names:
        return
    values = {name: sorted({*SMALL, base[name], *_near(first.get(name))}) for name in names}
    # smallest first, those without a size of 1 (which broadcasts) before the others
    points = sorted(itertools.product(*(values[n] for n in names)),
                    key=lambda p: (1 in p, sum(p), p))
    rechecks = 0
    for point in points:
        sizes = dict(zip(names, point))
        if sizes == first or rechecks >= MAX_RECHECKS:
            continue
        rechecks += 1
        try:
            checked = program.at({**base, **sizes})
        except Exception:  # a binding the spec cannot be checked at is no counterexample
            continue
        if any(d.code == diagnostic.code and d.span.line == diagnostic.span.line
               for d in checked.diagnostics):
            yield sizes


def _near(size: int | None) -> tuple[int, ...]:
    return () if size is None else (size, size + 1, 2 * size)


def _run(extraction: Extraction, program: Program, bindings: dict[str, int],
         sizes: dict[str, int], location: Location | None) -> Outcome:
    """Build the module at ``bindings`` and call it with inputs of the spec's shapes there."""
    import torch

    from . import call_inputs

    try:
        checked = program.at(bindings)
        shapes = {name: _shape(checked, name) for name in extraction.lowered.inputs}
    except Exception as error:
        return Outcome("unrun", sizes, _error_text(error))
    if any(shape is None for shape in shapes.values()):
        return Outcome("unrun", sizes, codes.TORCH_HELPS["no_shapes"])
    # a built dim the spec declares at its size is not among the bindings: not changed
    changed = any(bindings.get(n, v) != v for n, v in extraction.bindings.items())
    with torch.random.fork_rng(devices=[]):  # the caller's random state is its own
        torch.manual_seed(0)
        try:
            module = _rebuilt(extraction, bindings) if changed else extraction.module
        except Exception as error:  # the constructor refuses these sizes
            return Outcome("unrun", sizes, _error_text(error))
        tensors = {name: _tensor(extraction, name, shape) for name, shape in shapes.items()}
        arguments = call_inputs(extraction, tensors)
        try:
            with torch.no_grad():
                module.eval()  # not its result (a `train` override may return None)
                result = module(**arguments)
        except Exception as error:
            return _failed(error, location, sizes)
    return _compare(extraction, checked, result, sizes)


def _rebuilt(extraction: Extraction, bindings: dict[str, int]) -> Any:
    """The module built at ``bindings``, in the traced module's floating dtype."""
    if extraction.remake is None:
        raise ValueError(codes.TORCH_HELPS["not_rebuilt"])
    module = extraction.remake(bindings)
    dtype = next((p.dtype for p in extraction.module.parameters() if p.is_floating_point()),
                 None)
    return module if dtype is None else module.to(dtype)


def _failed(error: BaseException, location: Location | None, sizes: dict[str, int]) -> Outcome:
    """PyTorch raised: a refusal where the module's own check raised, a confirmation where
    it fails at the diagnostic's line, else these sizes could not be run."""
    if _refuses(error):
        return Outcome("refused", sizes, _error_text(error))
    if location is not None and _fails_at(error, location):
        detail = codes.TORCH_HELPS["raises"].format(error=_error_text(error))
        return Outcome("confirmed", sizes, detail)
    return Outcome("unrun", sizes, _error_text(error))


def _compare(extraction: Extraction, checked: Program, result: Any,
             sizes: dict[str, int]) -> Outcome:
    import torch

    flat = [leaf for leaf in torch.utils._pytree.tree_leaves(result)
            if isinstance(leaf, torch.Tensor)]
    for name, position in zip(extraction.lowered.outputs, extraction.lowered.output_positions):
        expected = _shape(checked, name)
        if position >= len(flat) or expected is None:
            continue
        actual = tuple(int(n) for n in flat[position].shape)
        if actual != expected:
            detail = codes.TORCH_HELPS["other_shape"].format(
                name=name, actual=list(actual), expected=list(expected))
            return Outcome("confirmed", sizes, detail)
    return Outcome("contradicted", sizes)


def _shape(program: Program, name: str) -> tuple[int, ...] | None:
    tensor = program.tensors.get(name)
    if tensor is None or tensor.value.shape is None:
        return None
    values = [program.dims.evaluate(d) for d in tensor.value.shape]
    return None if any(v is None or v < 0 for v in values) else tuple(values)  # type: ignore


def _tensor(extraction: Extraction, name: str, shape: tuple[int, ...]) -> Any:
    """A tensor of ``shape`` for the spec input ``name``, of its traced dtype: random
    numbers, all-true masks, integers within the traced ones' range."""
    import torch

    argument, path = extraction.lowered.inputs[name]
    traced = leaf(extraction.example.get(argument), path)
    dtype = getattr(traced, "dtype", torch.float32)
    if dtype == torch.bool:
        return torch.ones(shape, dtype=torch.bool)
    if not dtype.is_floating_point and not dtype.is_complex:
        high = int(traced.max()) + 1 if traced is not None and traced.numel() else 2
        return torch.randint(0, max(high, 1), shape, dtype=dtype)
    return torch.randn(shape, dtype=dtype)


def leaf(value: Any, path: tuple[int, ...]) -> Any:
    """The tensor at ``path`` (child positions, as the trace numbers them) in ``value``."""
    import torch.utils._pytree as pytree

    for position in path:
        node = pytree.SUPPORTED_NODES.get(type(value))
        if node is None:
            return value
        value = list(node.flatten_fn(value)[0])[position]
    return value


def _fails_at(error: BaseException, location: Location) -> bool:
    """Does the error's traceback pass through the diagnostic's Python line?"""
    return any(found == location for found in traceback_locations(error))


def _refuses(error: BaseException) -> bool:
    """Was the error raised on purpose by Python code outside torch (its innermost frame a
    `raise` or an `assert` statement: einops' checks, a module's own)? A failed tensor
    operation raises from C++ (the innermost Python frame is the call), and torch's own
    Python checks are the shape errors the spec reports."""
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = tb.tb_frame.f_code.co_filename
    if path.startswith((_torch_root(), "<")):
        return False
    line = linecache.getline(path, tb.tb_lineno).strip()
    return line.startswith(("raise ", "raise(", "assert ", "assert("))


@functools.lru_cache(maxsize=1)
def _torch_root() -> str:
    import torch

    return os.path.dirname(os.path.abspath(torch.__file__))


def _error_text(error: BaseException) -> str:
    text = " ".join(str(error).split())
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text[:300]


__all__ = ["Confirmed", "Outcome", "base_bindings", "confirm"]
