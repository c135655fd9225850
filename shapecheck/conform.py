"""Conformance: does a real implementation compute what a verified spec says?

One entry point, :func:`conform`, reads the checked program and drives the user's
function through several admissible bindings of the spec's free dims
(:func:`shapecheck.api.admissible_bindings`: every dim a different odd size, every
dim the same size, then random small sizes; constraints and divisibility respected).
At each binding the inputs and params are generated from the seed, passed to the
function **by name**, and every output is compared with the spec's own execution:
its shape with the symbolic shape at the binding, its values within a tolerance
that follows the element type. The first failing binding is shrunk, one dim at a
time, to the smallest binding that still fails.

- **Names.** A spec name (input, param, output, dim) is the function's parameter of
  the same name unless ``names`` maps it (``{"W_Q": "q_weight"}``). A dim is passed
  when the function has a parameter of its name (``H``, or ``names={"H": "num_heads"}``).
- **Layouts.** ``layouts={"W_Q": "transpose"}`` hands the function ``W_Q`` with its
  last two axes swapped (PyTorch's [out, in] weights); a tuple is a permutation of
  the axes (``(1, 0, 2)``). For an output, the function returns it in that layout.
- **Outputs.** The function returns the spec's outputs: one value for one output,
  a tuple or list in the spec's output order, or a mapping by (mapped) name.
- **Arrays or tensors.** The function's module decides: a function whose module
  imports torch (or an ``nn.Module``) gets ``torch`` tensors on ``device``, any other
  NumPy arrays. ``framework="numpy"|"torch"`` overrides. torch is imported only then.

NumPy work (generating inputs, the spec's execution, comparing) happens in
:mod:`shapecheck.backend.reference`, the backend being the only NumPy importer.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from .api import admissible_bindings
from .i18n import Table
from .program import Program

if TYPE_CHECKING:
    from .backend.reference import Case, Difference

SpecSource = Union[Program, str, "os.PathLike[str]"]
Layout = Union[str, Sequence[int]]
FRAMEWORKS = ("auto", "numpy", "torch")
DEFAULT_CASES = 5
SHRINK_BUDGET = 48  # candidate bindings tried while shrinking
ATTEMPTS, HIGHEST = 200, 8  # candidate bindings tried, and their largest size

EXIT_CONFORMS, EXIT_DIFFERS, EXIT_FUNCTION = 0, 1, 2

MESSAGES: Table = Table("conform", "MESSAGES", {
    # the target and the mapping (usage errors, exit 2)
    "target_syntax": "`{target}` is not MODULE:FUNCTION (for example `mypackage.attention:forward` "
    "or `path/to/file.py:forward`)",
    "no_module": "cannot import `{module}`: {reason}",
    "import_failed": "importing `{module}` raised {error}",
    "no_attribute": "`{module}` has no attribute `{name}`",
    "not_callable": "`{target}` is a {type}, not a function",
    "a_class": "`{target}` is a class; name a function, or an instance (an `nn.Module` built "
    "at module level), so that calling it computes the outputs",
    "unknown_name": "`{name}` is not an input, param, output or dim of the spec (they are: {names})",
    "layout_name": "`{name}` is not an input, param or output of the spec, so it has no layout "
    "(they are: {names})",
    "bad_layout": "layout `{layout}` for `{name}` {shape}: use `transpose` (swap the last two axes) "
    "or a permutation of 0..{last}",
    "missing_parameters": "the function has no parameter {names} (its parameters: {parameters}); "
    "map them with {hints}",
    "hint_name": "--name {spec}={parameter}",
    "unfilled_parameters": "the function's parameter {names} has no value: no input, param or dim "
    "of the spec is called so (map one with --name SPEC_NAME={first})",
    "positional_only": "the function's parameter {names} is positional-only; conformance passes "
    "every argument by name",
    "framework": "framework must be one of {choices}, got `{framework}`",
    "cases": "the number of cases must be a positive integer, got {cases}",
    "no_bindings": "no admissible binding of the free dims {names} was found among {attempts} "
    "candidates with sizes up to {high}; bind some with --dim",
    # the outcome
    "header": "{spec}: conformance of {function} ({framework}, {dtype})",
    "case_ok": "  ok    {bindings}",
    "case_failed": "  FAIL  {bindings}",
    "conforms": "conforms: every output matches the spec at {count} binding(s)",
    "failed_at": "output `{output}` does not match the spec at {bindings}{shrunk}",
    "raised_at": "the function raised at {bindings}{shrunk}: {error}",
    "shrunk": " (the smallest failing binding; it first failed at {first})",
    "values": "  max abs error {max_abs:.3g}, max rel error {max_rel:.3g} (allowed: |error| <= "
    "{atol:g} + {rtol:g}·|expected|, for {tolerance_dtype})",
    "worst": "  worst at index {index}: the spec gives {expected}, the function {got}",
    "count": "  {count} of {size} element(s) beyond the tolerance",
    "shape": "  it has shape {got}, but the spec's is {symbolic} = {expected} at the binding",
    "layout_rank": "  it has shape {got}, which its layout `{layout}` does not fit",
    "not_array": "  the function returned {type} for it, not an array",
    "missing_output": "  the function's result has no entry `{key}` (it has: {keys})",
    "count_outputs": "  the function returned {got} value(s); the spec has {count} output(s): {names}",
    "single_value": "  the function returned one value; the spec has {count} outputs: {names} (return "
    "a tuple in this order, or a mapping by name)",
    "function_label": "`{target}`",
    # the command
    "cannot_read": "cannot read {path}: {reason}",
    "spec_errors": "shapecheck: the spec does not verify, so nothing can conform to it",
    "error": "shapecheck: {text}",
    "pair_syntax": "`{item}` is not NAME=VALUE",
    "pair_twice": "`{name}` is given twice",
    "no_such_file": "no such file",
    "not_python": "not a Python file",
    "type_none": "None",
    "type_a": "a {type}",
})


def message(template: str, /, **fields: object) -> str:
    return MESSAGES[template].format(**fields)


class ConformanceError(Exception):
    """The root of the errors :func:`conform` raises (not a mismatch: that is a result)."""

    exit_code = EXIT_FUNCTION


class UsageError(ConformanceError):
    """A target that cannot be imported, or a mapping that does not fit the spec or the function."""


class FunctionFailed(ConformanceError):
    """The function raised; ``bindings`` is where (shrunk), ``error`` what it raised."""

    def __init__(self, text: str, bindings: dict[str, int], error: BaseException) -> None:
        super().__init__(text)
        self.bindings = bindings
        self.error = error


@dataclass(frozen=True)
class Mismatch:
    """Why one output of one binding does not conform."""

    output: str
    details: tuple[str, ...]  # lines saying how (shape, values, worst index)
    difference: Difference | None = None


@dataclass(frozen=True)
class Failure:
    bindings: dict[str, int]  # the smallest failing binding found (every dim)
    mismatch: Mismatch
    first: dict[str, int] | None = None  # where it failed first, when shrinking found smaller

    @property
    def output(self) -> str:
        return self.mismatch.output

    def text(self) -> str:
        shrunk = (message("shrunk", first=_bindings_text(self.first)) if self.first else "")
        lines = [message("failed_at", output=self.output, bindings=_bindings_text(self.bindings),
                         shrunk=shrunk), *self.mismatch.details]
        return "\n".join(lines)


@dataclass
class Conformance:
    """The outcome: the bindings that conform, and the failure (if any)."""

    spec: str
    function: str
    framework: str
    dtype: str
    passed: list[dict[str, int]] = field(default_factory=list)
    failed: dict[str, int] | None = None  # the case that failed (before shrinking)
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None

    def report(self) -> str:
        lines = [message("header", spec=self.spec, function=self.function,
                         framework=self.framework, dtype=self.dtype)]
        lines += [message("case_ok", bindings=_bindings_text(b)) for b in self.passed]
        if self.failure is None:
            lines.append(message("conforms", count=len(self.passed)))
        else:
            assert self.failed is not None
            lines.append(message("case_failed", bindings=_bindings_text(self.failed)))
            lines.append(self.failure.text())
        return "\n".join(lines) + "\n"


# --- the entry point ---------------------------------------------------------------------


def conform(spec: SpecSource, function: Callable[..., Any], *,
            dims: Mapping[str, int] | None = None, names: Mapping[str, str] | None = None,
            layouts: Mapping[str, Layout] | None = None, dtype: str = "float64",
            cases: int = DEFAULT_CASES, seed: int = 0, rtol: float | None = None,
            atol: float | None = None, framework: str = "auto", device: str = "cpu",
            shrink: bool = True, spec_name: str | None = None,
            function_name: str | None = None, fused: str = "auto") -> Conformance:
    """Check ``function`` against ``spec`` at ``cases`` admissible bindings.

    ``spec`` is a checked :class:`Program`, a path or source text (as for
    ``compile_spec``); ``dims`` fixes some dims for every case; ``rtol``/``atol``
    replace the tolerance chosen by element type; ``spec_name`` and ``function_name``
    are how the report names them; ``fused`` is how the spec's side runs (``"auto"`` or
    ``"off"``, as ``run --fused``: every plan computes the same numbers). Raises
    :class:`shapecheck.backend.SpecError` when the spec does not verify,
    :class:`UsageError` for a mapping that does not fit, :class:`FunctionFailed`
    when the function raises. A mismatch is a result (``Conformance.failure``).
    """
    from .backend import SpecError
    from .backend.compiled import check_fused, load

    program = load(spec, dims)
    if not program.ok:
        raise SpecError(program)
    check_fused(fused)
    if not isinstance(cases, int) or cases < 1:
        raise UsageError(message("cases", cases=cases))
    driver = _Driver(program, function, names or {}, layouts or {}, dtype, seed,
                     (rtol, atol), _framework(function, framework), device, fused)
    found = admissible_bindings(program, cases, seed=seed, high=HIGHEST, attempts=ATTEMPTS)
    if not found:
        raise UsageError(message("no_bindings", names=", ".join(program.dims.unbound()),
                                 attempts=ATTEMPTS, high=HIGHEST))
    result = Conformance(spec_name or spec_label(spec), function_name or _function_label(function),
                         driver.framework, dtype)
    for checked in found:
        case, outcome = driver.attempt(checked)
        if outcome is None:
            result.passed.append(case.bindings)
            continue
        result.failed = case.bindings
        if shrink:
            checked, case, outcome = _shrink(driver, program, checked, case, outcome)
        first = result.failed if case.bindings != result.failed else None
        if isinstance(outcome, BaseException):
            shrunk = message("shrunk", first=_bindings_text(first)) if first else ""
            raise FunctionFailed(message("raised_at", bindings=_bindings_text(case.bindings),
                                         shrunk=shrunk, error=_error_text(outcome)),
                                 case.bindings, outcome) from outcome
        result.failure = Failure(case.bindings, outcome, first)
        break
    return result


# --- one binding ---------------------------------------------------------------------------

Outcome = Union[Mismatch, BaseException, None]  # None: the binding conforms


class _Driver:
    """Calls the function at one binding and compares what it returns."""

    def __init__(self, program: Program, function: Callable[..., Any], names: Mapping[str, str],
                 layouts: Mapping[str, Layout], dtype: str, seed: int,
                 tolerance: tuple[float | None, float | None], framework: str, device: str,
                 fused: str = "auto") -> None:
        from .backend.runtime import declared

        self.program = program
        self.function = function
        self.dtype = dtype
        self.seed = seed
        self.tolerance = tolerance
        self.fused = fused
        self.framework = framework
        self.device = _device(framework, device)
        self.declared = list(declared(program))
        self.outputs = list(program.outputs)
        self.names = _check_names(program, names)
        self.layouts = _check_layouts(program, layouts)
        self.dims = _passed_dims(program, function, self.names)
        _check_signature(function, [self.names.get(n, n) for n in self.declared], self.dims)
        self.torch: Any = None
        if framework == "torch":
            from .backend import torch_backend

            self.torch = torch_backend

    def attempt(self, checked: Program) -> tuple[Case, Outcome]:
        from .backend.reference import reference

        case = reference(checked, self.dtype, self.seed, fused=self.fused)
        try:
            returned = self.function(**self._arguments(case))
        except Exception as error:  # the user's code: any exception is its outcome
            return case, error
        return case, self._compare(checked, case, returned)

    def _arguments(self, case: Case) -> dict[str, Any]:
        from .backend.reference import arrange

        arguments: dict[str, Any] = {}
        for name in self.declared:
            array = arrange(case.inputs[name], self.layouts.get(name))
            arguments[self.names.get(name, name)] = (
                self.torch.to_torch(array, self.device) if self.torch else array)
        for dim, parameter in self.dims.items():
            arguments[parameter] = case.bindings[dim]
        return arguments

    def _compare(self, checked: Program, case: Case, returned: Any) -> Mismatch | None:
        values = self._unpack(returned)
        if isinstance(values, Mismatch):
            return values
        for name in self.outputs:
            mismatch = self._compare_output(checked, case, name, values[name])
            if mismatch is not None:
                return mismatch
        return None

    def _unpack(self, returned: Any) -> dict[str, Any] | Mismatch:
        """The returned values by output name, or why they cannot be told apart."""
        keys = {name: self.names.get(name, name) for name in self.outputs}
        if isinstance(returned, Mapping):
            for name, key in keys.items():
                if key not in returned:
                    return Mismatch(name, (message("missing_output", key=key,
                                                   keys=", ".join(map(str, returned)) or "none"),))
            return {name: returned[key] for name, key in keys.items()}
        listed = ", ".join(f"`{n}`" for n in self.outputs)
        if isinstance(returned, (tuple, list)):
            if len(returned) != len(self.outputs):
                return Mismatch(self.outputs[0], (message(
                    "count_outputs", got=len(returned), count=len(self.outputs), names=listed),))
            return dict(zip(self.outputs, returned))
        if len(self.outputs) != 1:
            return Mismatch(self.outputs[0], (message("single_value", count=len(self.outputs),
                                                      names=listed),))
        return {self.outputs[0]: returned}

    def _compare_output(self, checked: Program, case: Case, name: str, value: Any) -> Mismatch | None:
        from .backend import reference

        returned_dtype: str | None = None
        if _is_tensor(value):
            if self.torch is None:
                from .backend import torch_backend as converter
            else:
                converter = self.torch
            array, returned_dtype = converter.to_numpy(value)
        else:
            array = reference.as_array(value)
        if array is None:
            return Mismatch(name, (message("not_array", type=_type_text(value)),))
        returned_dtype = returned_dtype or reference.dtype_name(array)
        axes = self.layouts.get(name)
        layout = self._layout_text(name)
        if axes is not None and len(axes) != array.ndim:
            return Mismatch(name, (message("layout_rank", got=list(array.shape), layout=layout),))
        array = reference.restore(array, axes)
        expected = case.outputs[name]
        if array.shape != expected.shape:
            symbolic = checked.tensors[name].value.text()
            return Mismatch(name, (message("shape", got=list(array.shape), symbolic=symbolic,
                                           expected=list(expected.shape)),))
        rtol, atol, tolerance_dtype = reference.tolerance(self.dtype, returned_dtype)
        rtol = self.tolerance[0] if self.tolerance[0] is not None else rtol
        atol = self.tolerance[1] if self.tolerance[1] is not None else atol
        difference = reference.compare(expected, array, rtol, atol)
        if difference is None:
            return None
        return Mismatch(name, (
            message("values", max_abs=difference.max_abs, max_rel=difference.max_rel,
                    rtol=rtol, atol=atol, tolerance_dtype=tolerance_dtype),
            message("worst", index=list(difference.worst),
                    expected=reference.finite_text(difference.expected),
                    got=reference.finite_text(difference.got)),
            message("count", count=difference.count, size=difference.size),
        ), difference)

    def _layout_text(self, name: str) -> str:
        axes = self.layouts.get(name)
        return "" if axes is None else ",".join(map(str, axes))


def _shrink(driver: _Driver, program: Program, checked: Program, case: Case,
            outcome: Outcome) -> tuple[Program, Case, Outcome]:
    """Make each chosen dim as small as it can be while the function still fails the same
    way (a mismatch stays a mismatch, a raise a raise), one dim at a time, until no dim
    shrinks; at most :data:`SHRINK_BUDGET` candidates."""
    chosen = program.dims.unbound()
    raised = isinstance(outcome, BaseException)
    budget = SHRINK_BUDGET
    improved = True
    while improved and budget > 0:
        improved = False
        for dim in chosen:
            current = checked.dims.bindings[dim]
            for smaller in range(1, current):
                if budget <= 0:
                    break
                budget -= 1
                candidate = program.at({**checked.dims.bindings, dim: smaller})
                if not candidate.ok or candidate.dims.unbound() or candidate.dims.determined():
                    continue
                new_case, new_outcome = driver.attempt(candidate)
                if new_outcome is None or isinstance(new_outcome, BaseException) != raised:
                    continue
                checked, case, outcome = candidate, new_case, new_outcome
                improved = True
                break
    return checked, case, outcome


# --- checking the mapping against the spec and the function ---------------------------------


def _spec_names(program: Program) -> list[str]:
    from .backend.runtime import declared

    return [*declared(program), *program.outputs, *program.dims.dims]


def _check_names(program: Program, names: Mapping[str, str]) -> dict[str, str]:
    known = _spec_names(program)
    for name in names:
        if name not in known:
            raise UsageError(message("unknown_name", name=name, names=", ".join(known)))
    return dict(names)


def _check_layouts(program: Program, layouts: Mapping[str, Layout]) -> dict[str, tuple[int, ...]]:
    from .backend.reference import permutation
    from .backend.runtime import declared

    tensors = [*declared(program), *program.outputs]
    result: dict[str, tuple[int, ...]] = {}
    for name, layout in layouts.items():
        if name not in tensors:
            raise UsageError(message("layout_name", name=name, names=", ".join(tensors)))
        value = program.tensors[name].value
        axes = permutation(value.rank, layout)
        if axes is None:
            shown = layout if isinstance(layout, str) else ",".join(map(str, layout))
            raise UsageError(message("bad_layout", layout=shown, name=name,
                                     shape=f"(declared {value.text()})",
                                     last=max(value.rank - 1, 0)))
        result[name] = axes
    return result


def _device(framework: str, device: str) -> str:
    """The device checked as ``run --device`` checks it (NumPy arrays live on the CPU; a
    CUDA device this machine lacks is refused before anything runs)."""
    from .backend.compiled import check_device
    from .options import OptionError

    try:
        return check_device(framework, device)
    except OptionError as error:
        raise UsageError(str(error)) from None


def _signature(function: Callable[..., Any]) -> inspect.Signature | None:
    """The parameters the function takes; an ``nn.Module``'s are its ``forward``'s (its
    ``__call__`` takes ``*args, **kwargs`` and passes them on)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(function, torch.nn.Module):
        function = function.forward
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):  # some builtins and extension functions have none
        return None


def _passed_dims(program: Program, function: Callable[..., Any],
                 names: Mapping[str, str]) -> dict[str, str]:
    """Dims the function asks for by name: dim -> parameter."""
    signature = _signature(function)
    if signature is None:
        return {}
    parameters = signature.parameters
    return {dim: names.get(dim, dim) for dim in program.dims.dims
            if names.get(dim, dim) in parameters
            and parameters[names.get(dim, dim)].kind is not inspect.Parameter.POSITIONAL_ONLY}


def _check_signature(function: Callable[..., Any], passed: list[str], dims: Mapping[str, str]) -> None:
    signature = _signature(function)
    if signature is None:
        return
    parameters = signature.parameters
    kinds = inspect.Parameter
    takes_any = any(p.kind is kinds.VAR_KEYWORD for p in parameters.values())
    positional = [n for n in passed if n in parameters and parameters[n].kind is kinds.POSITIONAL_ONLY]
    if positional:
        raise UsageError(message("positional_only", names=_names_text(positional)))
    missing = [n for n in passed if n not in parameters and not takes_any]
    if missing:
        listed = [p for p in parameters if parameters[p].kind not in (kinds.VAR_POSITIONAL,)]
        raise UsageError(message(
            "missing_parameters", names=_names_text(missing),
            parameters=", ".join(listed) or "none",
            hints=" ".join(message("hint_name", spec=n, parameter=_likely(n, listed))
                           for n in missing)))
    given = {*passed, *dims.values()}
    unfilled = [p.name for p in parameters.values()
                if p.default is kinds.empty and p.name not in given
                and p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY, kinds.POSITIONAL_ONLY)]
    if unfilled:
        raise UsageError(message("unfilled_parameters", names=_names_text(unfilled),
                                 first=unfilled[0]))


def _likely(name: str, parameters: Sequence[str]) -> str:
    """The function's parameter that ``name`` most likely means (same letters, any case
    or underscores: `W_Q` and `w_q`, `wq`), else ``PARAM``."""
    def folded(text: str) -> str:
        return text.replace("_", "").casefold()

    matches = [p for p in parameters if folded(p) == folded(name)]
    return matches[0] if len(matches) == 1 else "PARAM"


def _names_text(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


# --- the function: importing it, and what it computes with -----------------------------------


def load_function(target: str) -> Callable[..., Any]:
    """``package.module:function`` (an attribute path after the colon: ``module:Class.method``)
    or ``path/to/file.py:function``. The current folder is importable, as with ``python -m``."""
    module_name, separator, attribute = target.rpartition(":")
    if not separator or not module_name or not attribute:
        raise UsageError(message("target_syntax", target=target))
    value: Any = _import(module_name)
    owner = module_name
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise UsageError(message("no_attribute", module=owner, name=part))
        value = getattr(value, part)
        owner = f"{module_name}:{part}" if owner == module_name else f"{owner}.{part}"
    if inspect.isclass(value):  # calling it would construct an instance, not compute
        raise UsageError(message("a_class", target=target))
    if not callable(value):
        raise UsageError(message("not_callable", target=target, type=type(value).__name__))
    return value


def _import(name: str) -> Any:
    if name.endswith(".py") or os.sep in name or "/" in name:
        return _import_file(Path(name))
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise UsageError(message("no_module", module=name, reason=error)) from None
    except Exception as error:  # the module's own code failed while it was imported
        raise UsageError(message("import_failed", module=name, error=_error_text(error))) from None


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise UsageError(message("no_module", module=path, reason=message("no_such_file")))
    name = path.stem if path.stem.isidentifier() else "conform_target"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(message("no_module", module=path, reason=message("not_python")))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # so that the function's module can be looked up by name
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(name, None)
        raise UsageError(message("import_failed", module=path, error=_error_text(error))) from None
    return module


def _framework(function: Callable[..., Any], choice: str) -> str:
    """``torch`` for a function whose module imports torch (or an ``nn.Module``), else ``numpy``."""
    if choice not in FRAMEWORKS:
        raise UsageError(message("framework", choices=", ".join(FRAMEWORKS), framework=choice))
    if choice != "auto":
        return choice
    torch = sys.modules.get("torch")
    if torch is None:  # nothing imported torch, so the function cannot use it
        return "numpy"
    if isinstance(function, torch.nn.Module):
        return "torch"
    target = getattr(function, "__func__", function)  # a bound method
    namespace = getattr(target, "__globals__", None)
    if namespace is None:
        module = sys.modules.get(getattr(target, "__module__", None) or "")
        namespace = vars(module) if module is not None else {}
    return "torch" if any(_from_torch(value) for value in list(namespace.values())) else "numpy"


def _from_torch(value: Any) -> bool:
    name = getattr(value, "__name__", None) if inspect.ismodule(value) else \
        getattr(value, "__module__", None)
    return isinstance(name, str) and (name == "torch" or name.startswith("torch."))


def _is_tensor(value: Any) -> bool:
    module = type(value).__module__
    return module == "torch" or module.startswith("torch.")


# --- the command ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ConformOptions:
    """`shapecheck conform`'s command line, parsed by click."""

    path: str
    target: str
    bindings: dict[str, int]
    names: tuple[str, ...] = ()  # SPEC=PARAM
    layouts: tuple[str, ...] = ()  # NAME=transpose or NAME=1,0,2
    dtype: str = "float64"
    cases: int = DEFAULT_CASES
    seed: int = 0
    rtol: float | None = None
    atol: float | None = None
    framework: str = "auto"
    device: str = "cpu"
    shrink: bool = True
    color: bool = False
    fused: str = "auto"


def command(options: ConformOptions) -> int:
    """Everything `shapecheck conform` does; returns the exit status: 0 the function
    conforms, 1 it does not or the spec does not verify, 2 the function cannot be
    imported or raises, or a usage error."""
    import click

    from .api import check_path, file_result

    names = _pairs(options.names, "--name")
    layouts = {name: _layout(text) for name, text in _pairs(options.layouts, "--layout").items()}
    try:
        program = check_path(options.path, options.bindings)
    except OSError as error:
        click.echo(message("cannot_read", path=options.path, reason=error.strerror or error),
                   err=True)
        return EXIT_FUNCTION
    if not program.ok:
        from .formats import render

        click.echo(render([file_result(program, options.path)], "text", color=options.color,
                          strict=False), nl=False, err=True)
        click.echo(message("spec_errors"), err=True)
        return EXIT_DIFFERS
    try:
        function = load_function(options.target)
        result = conform(program, function, names=names, layouts=layouts, dtype=options.dtype,
                         cases=options.cases, seed=options.seed, rtol=options.rtol,
                         atol=options.atol, framework=options.framework, device=options.device,
                         shrink=options.shrink, spec_name=options.path,
                         function_name=message("function_label", target=options.target),
                         fused=options.fused)
    except ConformanceError as error:
        click.echo(message("error", text=error), err=True)
        return error.exit_code
    click.echo(result.report(), nl=False)
    return EXIT_CONFORMS if result.ok else EXIT_DIFFERS


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    import click

    pairs: dict[str, str] = {}
    for item in items:
        name, separator, value = (part.strip() for part in item.partition("="))
        if not separator or not name or not value:
            raise click.BadParameter(message("pair_syntax", item=item), param_hint=option)
        if name in pairs:
            raise click.BadParameter(message("pair_twice", name=name), param_hint=option)
        pairs[name] = value
    return pairs


def _layout(text: str) -> Layout:
    """``transpose``, or a permutation written ``1,0,2``."""
    if text == "transpose":
        return text
    parts = [part.strip() for part in text.split(",")]
    if all(part.isdigit() for part in parts):
        return tuple(int(part) for part in parts)
    return text  # refused with the spec's rank in the message, by conform()


# --- text ----------------------------------------------------------------------------------


def _bindings_text(bindings: Mapping[str, int] | None) -> str:
    return ", ".join(f"{n}={v}" for n, v in (bindings or {}).items())


def _type_text(value: Any) -> str:
    return message("type_none") if value is None else message("type_a", type=type(value).__name__)


def _error_text(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def spec_label(spec: SpecSource) -> str:
    if isinstance(spec, Program):
        return "<spec>"
    if isinstance(spec, os.PathLike) or ("\n" not in spec and spec.endswith(".attn")):
        return os.fspath(spec)
    return "<spec>"


def _function_label(function: Callable[..., Any]) -> str:
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return message("function_label", target=f"{module}:{name}" if module else name)


__all__ = ["ConformOptions", "Conformance", "ConformanceError", "Failure", "FunctionFailed",
           "Mismatch", "UsageError", "command", "conform", "load_function"]
