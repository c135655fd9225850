"""Conformance: does a real implementation compute what a verified spec says?

One entry point, :func:`conform`, reads the checked program and drives the user's
function through several admissible bindings of the spec's free dims
(:func:`shapecheck.loader.admissible_bindings`: every dim a different odd size, every
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
  imports torch (or an ``nn.Module``) gets ``torch`` tensors on ``device``, one whose module
  imports jax gets JAX arrays (called with 64-bit types on for a float64 case), any other
  NumPy arrays. ``framework="numpy"|"torch"|"jax"`` overrides. torch and jax are imported
  only then, each by its backend module.

- **Real modules.** The target may be an ``nn.Module`` class, a factory or an instance:
  built at each binding (``init``, dims by name, ``dtype``), its state bound to the spec's
  params once by :mod:`shapecheck.binding` and written in place, called with ``args``,
  ``masks`` in its convention, and read back by ``outputs`` (docs/conform.md, "Real modules").

NumPy work (generating inputs, the spec's execution, comparing) happens in
:mod:`shapecheck.backend.reference`, the backend being the only NumPy importer.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from ..loader import admissible_bindings
from ..i18n import Table
from ..check.program import Program

if TYPE_CHECKING:
    from ..backend.reference import Case, Difference

SpecSource = Union[Program, str, "os.PathLike[str]"]
Layout = Union[str, Sequence[int]]
FRAMEWORKS = ("auto", "numpy", "torch", "jax")
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
    "a_class": "`{target}` is a class but not an `nn.Module`; name a function, an `nn.Module` "
    "class or factory, or an instance, so that calling it computes the outputs",
    "unknown_name": "`{name}` is not an input, param, output or dim of the spec (they are: {names})",
    "layout_name": "`{name}` is not an input, param or output of the spec, so it has no layout "
    "(they are: {names})",
    "bad_layout": "layout `{layout}` for `{name}` {shape}: use `transpose` (swap the last two axes) "
    "or a permutation of 0..{last}",
    "missing_parameters": "the function has no parameter {names} (its parameters: {parameters}); "
    "map them with {hints}",
    "hint_name": "--name {spec}={parameter}",
    "unfilled_parameters": "the function's parameter {names} has no value: no input, param or dim "
    "of the spec is called so (map one with --name {spec}={first}, or give it with "
    "--arg {first}=VALUE)",
    "arg_unknown": "--arg {names}: the function has no parameter of that name and no **kwargs "
    "(its parameters: {parameters})",
    "init_unknown": "--init {names}: the factory has no parameter of that name (its parameters: "
    "{parameters})",
    "factory_unfilled": "the factory's parameter `{name}` has no value: it is not a dim of the "
    "spec, `dtype` or `device` (give it with --init {name}=EXPR)",
    "factory_result": "the factory returned {type}, not an `nn.Module` (or a module and a dict "
    "of extra forward arguments)",
    "input_hint": "  the spec's input {names} is not a parameter of forward either (forward takes: "
    "{parameters}); pass it with {hint}",
    "layout_state": "--layout {name}: `{name}` is written into the module's state, not passed; "
    "its orientation comes from the layer (choose it with --param {name}=KEY or KEY.T)",
    "mask_not_bool": "--mask {name}=...: `{name}` is not a bool input of the spec",
    "mask_numpy": "--mask converts a mask to a tensor convention; it needs a PyTorch target",
    "param_name": "--param {name}=...: `{name}` is not an input or param of the spec (they are: "
    "{names})",
    "output_name": "--output {name}=...: `{name}` is not an output of the spec (they are: {names})",
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
    "bound": "  the module's state, matched at the first binding (--param to change):",
    "not_compared": "  not compared: {entries}",
    "entry": "returned entry {key}",
    "spec_output": "the spec's output `{name}`",
    "float32_inside": "  the errors are float32's rounding: the target computes in float32 inside "
    "(a cast, a float32 table, softmax(dtype=float32)); compare with --dtype float32",
    "conforms": "conforms: every output matches the spec at {count} binding(s)",
    "zero_rows": "  compared with the spec's fully masked rows as zeros (what SDPA and "
    "FlexAttention give a query that sees no key), the closer of the spec's two readings",
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
    structural: bool = False  # the result's form (a missing entry, not an array): not shrunk


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
    bound: list[str] = field(default_factory=list)  # spec name -> module tensor, as decided
    not_compared: list[str] = field(default_factory=list)  # returned entries --output left out

    @property
    def ok(self) -> bool:
        return self.failure is None

    def report(self) -> str:
        lines = [message("header", spec=self.spec, function=self.function,
                         framework=self.framework, dtype=self.dtype)]
        if self.bound:
            lines.append(message("bound"))
            lines += [f"    {line}" for line in self.bound]
        if self.not_compared:
            lines.append(message("not_compared", entries=", ".join(self.not_compared)))
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
            function_name: str | None = None, init: Mapping[str, Any] | None = None,
            args: Mapping[str, Any] | None = None, masks: Mapping[str, str] | None = None,
            params: Mapping[str, str] | None = None,
            outputs: Mapping[str, int | str] | None = None,
            fused: str = "auto") -> Conformance:
    """Check ``function`` against ``spec`` at ``cases`` admissible bindings.

    ``spec`` is a checked :class:`Program`, a path or source text (as for
    ``compile_spec``); ``dims`` fixes some dims for every case; ``rtol``/``atol``
    replace the tolerance chosen by element type; ``spec_name`` and ``function_name``
    are how the report names them; ``fused`` is how the spec's side runs (``"auto"`` or
    ``"off"``, as ``run --fused``: every variant computes the same numbers). A real module
    (docs/conform.md, "Real modules"):
    ``init`` (factory keyword -> dims expression or value), ``args`` (forward keyword ->
    expression of spec names, dims and literals, or a value), ``masks`` (spec mask ->
    ``additive``, ``additive-min``, ``keep`` or ``drop``), ``params`` (spec name -> module
    key, ``KEY.T`` transposed), ``outputs`` (spec output -> index or key). Raises
    :class:`shapecheck.backend.SpecError` when the spec does not verify,
    :class:`UsageError` for a mapping that does not fit, :class:`FunctionFailed`
    when the function raises. A mismatch is a result (``Conformance.failure``).
    """
    from ..backend import SpecError
    from ..backend.compiled import check_fused, load

    program = load(spec, dims)
    if not program.ok:
        raise SpecError(program)
    check_fused(fused)
    if _is_module(function):  # an instance keeps the sizes it was built with
        built = _instance_dims(program, function, params or {})
        if any(dim not in (dims or {}) for dim in built):
            program = load(spec, {**built, **(dims or {})})
            if not program.ok:
                raise SpecError(program)
    if not isinstance(cases, int) or cases < 1:
        raise UsageError(message("cases", cases=cases))
    wiring = Wiring(init or {}, args or {}, masks or {}, params or {}, outputs or {})
    driver = _Driver(program, function, names or {}, layouts or {}, dtype, seed,
                     (rtol, atol), _framework(function, framework), device, wiring, fused)
    found = admissible_bindings(program, cases, seed=seed, high=HIGHEST, attempts=ATTEMPTS)
    if not found:
        raise UsageError(message("no_bindings", names=", ".join(program.dims.unbound()),
                                 attempts=ATTEMPTS, high=HIGHEST))
    result = Conformance(spec_name or spec_label(spec), function_name or _function_label(function),
                         driver.framework, dtype)
    for checked in found:
        case, outcome = driver.attempt(checked)
        result.bound = driver.matching.lines() if driver.matching is not None else []
        result.not_compared = driver.not_compared
        if outcome is None:
            result.passed.append(case.bindings)
            continue
        result.failed = case.bindings
        if shrink and not (isinstance(outcome, Mismatch) and outcome.structural):
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
    """Calls the target at one binding and compares what it returns. The target is a
    function, an ``nn.Module`` instance, or a factory (an ``nn.Module`` class, or a function
    that takes none of the spec's tensors) called with dims, ``init`` values and ``dtype``."""

    def __init__(self, program: Program, function: Callable[..., Any], names: Mapping[str, str],
                 layouts: Mapping[str, Layout], dtype: str, seed: int,
                 tolerance: tuple[float | None, float | None], framework: str, device: str,
                 wiring: Wiring, fused: str = "auto") -> None:
        from ..backend.runtime import declared

        self.program = program
        self.function = function
        self.dtype = dtype
        self.seed = seed
        self.tolerance = tolerance
        self.fused = fused
        self.framework = framework
        self.device = _device(framework, device)
        self.declared = list(declared(program))
        # `int[...]` inputs reach the function as integers (token ids, positions), as real
        # code indexes with them; the spec holds them in the run's dtype.
        self.integers = {n for n, t in declared(program).items() if t.value.element == "int"}
        self.kinds = {n: t.kind for n, t in declared(program).items()}
        self.stored = used_transposed(program, set(self.kinds))
        self.outputs = list(program.outputs)
        self.names = _check_names(program, names)
        self.layouts = _check_layouts(program, layouts)
        self.wiring = _check_wiring(program, wiring, framework)
        self.tables = {n for n in self.wiring.masks if _square(program.tensors[n].value)}
        self.kind = _target_kind(function, self.declared, list(program.dims.dims), self.names,
                                 self.wiring)
        self.routing: _Routing | None = None
        self.matching: Any = None  # binding.Matching, decided at the first binding
        self.not_compared: list[str] = []
        self.torch: Any = None
        if self.kind != "function":  # a module is torch's, whatever its file imports at top
            self.framework = framework = "torch"
            self.device = _device(framework, device)
        if framework == "torch":
            from ..backend import torch_backend

            self.torch = torch_backend
        self.jax: Any = _jax_backend() if framework == "jax" else None
        if self.kind == "function":  # nothing to build: the signature is checked now
            self.routing = self._route(function, {}, module=False)

    def attempt(self, checked: Program) -> tuple[Case, Outcome]:
        from ..backend.reference import has_nan as reference_has_nan, reference

        case = reference(checked, self.dtype, self.seed, fused=self.fused)
        target, extras = self.function, {}
        if self.kind == "factory":
            try:
                target, extras = self._build(case.bindings)
            except UsageError:
                raise
            except Exception as error:  # the factory is the user's code
                return case, error
        if self.kind != "function":
            self._prepare(target)
        if self.routing is None:
            self.routing = self._route(target, extras, module=True)
        if self.routing.state:
            self._bind(target, case)
        with self._configured():
            arguments = {**extras, **self._arguments(case)}
            try:
                returned = target(**arguments)
            except Exception as error:  # the user's code: any exception is its outcome
                return case, error
        mismatch = self._compare(checked, case, returned)
        if mismatch is not None and mismatch.difference is not None and reference_has_nan(case):
            mismatch = self._zero_rows(checked, case, returned, mismatch)
        return case, mismatch

    def _zero_rows(self, checked: Program, case: Case, returned: Any,
                   mismatch: Mismatch) -> Mismatch | None:
        """The spec read the second way (docs/conform.md, "Fully masked rows"): a fully
        masked row is NaN in the spec's softmax and zeros in SDPA and FlexAttention, and both
        say that the query saw no key; the target conforms if it matches either reading in
        every output. Otherwise the closer one is reported (the zeros where both are as far:
        a target with no NaN says which reading it meant)."""
        from ..backend.reference import zero_rows_reference

        second = self._compare(checked, zero_rows_reference(checked, case), returned)
        if second is None:
            return None
        if second.difference is None or mismatch.difference is None \
                or second.difference.count > mismatch.difference.count:
            return mismatch
        return Mismatch(second.output, (*second.details, message("zero_rows")),
                        second.difference)

    def _configured(self) -> AbstractContextManager[Any]:
        """JAX set for the case's dtype (64-bit types, the device) while the function runs."""
        if self.jax is None:
            return nullcontext()
        return self.jax.configured(self.dtype, self.jax.device_of(self.device))

    # --- building the module and binding its state -----------------------------------------

    def _build(self, bindings: Mapping[str, int]) -> tuple[Any, dict[str, Any]]:
        from .binding import Expression, evaluate

        signature = _signature(self.function)
        parameters = signature.parameters if signature is not None else {}
        kinds = inspect.Parameter
        takes_any = any(p.kind is kinds.VAR_KEYWORD for p in parameters.values())
        unknown = [k for k in self.wiring.init if k not in parameters and not takes_any]
        if unknown:
            raise UsageError(message("init_unknown", names=_names_text(unknown),
                                     parameters=", ".join(parameters) or "none"))
        arguments: dict[str, Any] = {}
        for name, value in self.wiring.init.items():
            arguments[name] = evaluate(value, bindings) if isinstance(value, Expression) else value
        for parameter in parameters.values():
            if parameter.name in arguments or parameter.kind in (kinds.VAR_KEYWORD,
                                                                 kinds.VAR_POSITIONAL):
                continue
            if parameter.name in bindings:
                arguments[parameter.name] = bindings[parameter.name]
            elif parameter.name == "dtype":
                arguments["dtype"] = self.torch.DTYPES[self.dtype]
            elif parameter.name == "device":
                arguments["device"] = self.device
            elif parameter.default is kinds.empty:
                raise UsageError(message("factory_unfilled", name=parameter.name))
        built = self.function(**arguments)
        if _is_module(built):
            return built, {}
        if (isinstance(built, tuple) and len(built) == 2 and _is_module(built[0])
                and isinstance(built[1], Mapping)):
            return built[0], dict(built[1])
        raise UsageError(message("factory_result", type=_type_text(built)))

    def _prepare(self, module: Any) -> None:
        """Evaluation mode (no dropout), cast to the run's dtype, on the run's device."""
        dtype = self.torch.DTYPES[self.dtype]
        module.eval()
        module.to(device=self.device)
        # floating tensors only: `Module.to(dtype)` would also cast a complex buffer (a
        # rotary table) to a real one, dropping its imaginary part
        module._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def _bind(self, module: Any, case: Case) -> None:
        from .binding import BindingError, decide

        assert self.routing is not None
        values = {name: case.inputs[name] for name in self.routing.state}
        try:
            if self.matching is None:
                self.matching = decide(module, values, self.kinds, self.wiring.params,
                                       self.stored)
            self.matching.write(module, values, _bindings_text(case.bindings))
        except BindingError as error:
            text = str(error)
            inputs = [n for n in self.routing.state if self.kinds[n] == "input"]
            if inputs and self.matching is None:
                text += "\n" + message("input_hint", names=_names_text(inputs),
                                       parameters=", ".join(self.routing.parameters) or "none",
                                       hint=message("hint_name", spec=inputs[0], parameter=_likely(
                                           inputs[0], self.routing.parameters)))
            raise UsageError(text) from None

    # --- arguments ---------------------------------------------------------------------------

    def _route(self, target: Callable[..., Any], extras: Mapping[str, Any], module: bool) -> _Routing:
        """Which spec names are passed as which arguments, which go to the module's state;
        checked against the signature once (a usage error names the flag that fits)."""
        signature = _signature(target)
        if signature is None:
            return _Routing({self.names.get(n, n): n for n in self.declared}, [], {}, [])
        kinds = inspect.Parameter
        parameters = signature.parameters
        named = [p for p in parameters if parameters[p].kind not in (kinds.VAR_POSITIONAL,
                                                                      kinds.VAR_KEYWORD)]
        takes_any = any(p.kind is kinds.VAR_KEYWORD for p in parameters.values())
        in_arguments = {n for value in self.wiring.args.values() for n in _names_in(value)}
        passed: dict[str, str] = {}
        state: list[str] = []
        missing: list[str] = []
        for name in self.declared:
            argument = self.names.get(name, name)
            if argument in named and argument not in self.wiring.args:
                passed[argument] = name
            elif name in self.names and takes_any:
                passed[argument] = name
            elif name in in_arguments:
                continue
            elif module:
                state.append(name)
            else:
                missing.append(name)
        laid_out = [n for n in state if n in self.layouts]
        if laid_out:
            raise UsageError(message("layout_state", name=laid_out[0]))
        positional = [a for a in passed if a in parameters
                      and parameters[a].kind is kinds.POSITIONAL_ONLY]
        if positional:
            raise UsageError(message("positional_only", names=_names_text(positional)))
        if missing:
            raise UsageError(message(
                "missing_parameters", names=_names_text(missing),
                parameters=", ".join(named) or "none",
                hints=" ".join(message("hint_name", spec=n, parameter=_likely(n, named))
                               for n in missing)))
        unknown = [a for a in self.wiring.args if a not in named and not takes_any]
        if unknown:
            raise UsageError(message("arg_unknown", names=_names_text(unknown),
                                     parameters=", ".join(named) or "none"))
        dims = _passed_dims(self.program, target, self.names)
        given = {*passed, *self.wiring.args, *dims.values(), *extras}
        unfilled = [p.name for p in parameters.values()
                    if p.default is kinds.empty and p.name not in given
                    and p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY,
                                   kinds.POSITIONAL_ONLY)]
        if unfilled:
            spare = [n for n in state if self.kinds[n] == "input"] or ["SPEC_NAME"]
            raise UsageError(message("unfilled_parameters", names=_names_text(unfilled),
                                     first=unfilled[0], spec=spare[0]))
        return _Routing(passed, state, dims, named)

    def _arguments(self, case: Case) -> dict[str, Any]:
        from ..backend.reference import arrange
        from ..backend.runtime import stated_conventions
        from .binding import Expression, convert_mask, evaluate

        assert self.routing is not None
        values: dict[str, Any] = {}
        for name in self.declared:
            array = arrange(case.inputs[name], self.layouts.get(name), name in self.integers)
            value = (self.torch.to_torch(array, self.device) if self.torch else
                     self.jax.to_jax(array) if self.jax else array)
            if name in self.wiring.masks:
                # convert_mask reads true as "keep": a spec that states `drop` holds the
                # negation (docs/language.md §10.3).
                if "drop" in stated_conventions(self.program, name):
                    value = ~value
                value = convert_mask(value, self.wiring.masks[name],
                                     self.torch.DTYPES[self.dtype], name in self.tables)
            values[name] = value
        arguments = {argument: values[name] for argument, name in self.routing.passed.items()}
        for dim, parameter in self.routing.dims.items():
            arguments[parameter] = case.bindings[dim]
        scope = {**case.bindings, **values}
        for argument, value in self.wiring.args.items():
            arguments[argument] = evaluate(value, scope) if isinstance(value, Expression) else value
        return arguments

    # --- what it returns ---------------------------------------------------------------------

    def _compare(self, checked: Program, case: Case, returned: Any) -> Mismatch | None:
        values = self._unpack(returned)
        if isinstance(values, Mismatch):
            return values
        for name in self.outputs:
            if name not in values:
                continue  # --output named others: this one is not compared
            mismatch = self._compare_output(checked, case, name, values[name])
            if mismatch is not None:
                return mismatch
        return None

    def _unpack(self, returned: Any) -> dict[str, Any] | Mismatch:
        """The returned values by output name, or why they cannot be told apart (a structural
        failure: never shrunk)."""
        if dataclasses.is_dataclass(returned) and not isinstance(returned, (type, Mapping)):
            returned = {f.name: getattr(returned, f.name) for f in dataclasses.fields(returned)}
        if self.wiring.outputs:
            return self._select(returned)
        keys = {name: self.names.get(name, name) for name in self.outputs}
        if isinstance(returned, Mapping):
            for name, key in keys.items():
                if key not in returned:
                    return _structural(name, message(
                        "missing_output", key=key, keys=", ".join(map(str, returned)) or "none"))
            return {name: returned[key] for name, key in keys.items()}
        listed = ", ".join(f"`{n}`" for n in self.outputs)
        if isinstance(returned, (tuple, list)):
            if len(returned) != len(self.outputs):
                return _structural(self.outputs[0], message(
                    "count_outputs", got=len(returned), count=len(self.outputs), names=listed))
            return dict(zip(self.outputs, returned))
        if len(self.outputs) != 1:
            return _structural(self.outputs[0], message("single_value", count=len(self.outputs),
                                                        names=listed))
        return {self.outputs[0]: returned}

    def _select(self, returned: Any) -> dict[str, Any] | Mismatch:
        """``--output O=0 --output P=attn``: the named entries only; the others are listed
        as not compared."""
        if isinstance(returned, Mapping):
            entries: list[tuple[int | str, Any]] = list(returned.items())
        elif isinstance(returned, (tuple, list)):
            entries = list(enumerate(returned))
        else:
            entries = [(0, returned)]  # a bare tensor is output 0
        selected: dict[str, Any] = {}
        used: set[int] = set()
        for name, where in self.wiring.outputs.items():
            position = where if isinstance(where, int) else next(
                (i for i, (key, _) in enumerate(entries) if key == where), None)
            if position is None or not 0 <= position < len(entries):
                shown = ", ".join(str(key) for key, _ in entries) or "none"
                return _structural(name, message("missing_output", key=where, keys=shown))
            selected[name] = entries[position][1]
            used.add(position)
        if not self.not_compared:
            self.not_compared = [
                *(message("entry", key=key) for i, (key, _) in enumerate(entries) if i not in used),
                *(message("spec_output", name=n) for n in self.outputs if n not in selected)]
        return selected

    def _compare_output(self, checked: Program, case: Case, name: str, value: Any) -> Mismatch | None:
        from ..backend import reference

        returned_dtype: str | None = None
        if _is_tensor(value) or (self.jax is not None and self.jax.is_array(value)):
            if self.jax is not None:
                converter = self.jax
            elif self.torch is None:
                from ..backend import torch_backend as converter
            else:
                converter = self.torch
            array, returned_dtype = converter.to_numpy(value)
        else:
            array = reference.as_array(value)
        if array is None:
            return _structural(name, message("not_array", type=_type_text(value)))
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
        details = [
            message("values", max_abs=difference.max_abs, max_rel=difference.max_rel,
                    rtol=rtol, atol=atol, tolerance_dtype=tolerance_dtype),
            message("worst", index=list(difference.worst),
                    expected=reference.finite_text(difference.expected),
                    got=reference.finite_text(difference.got)),
            message("count", count=difference.count, size=difference.size),
        ]
        if self._float32_inside(tolerance_dtype, expected, array):
            details.append(message("float32_inside"))
        return Mismatch(name, tuple(details), difference)

    def _float32_inside(self, tolerance_dtype: str, expected: Any, array: Any) -> bool:
        """A float64 comparison missed only by float32's rounding: the target computes in
        float32 somewhere inside (a cast, a float32 table, ``softmax(dtype=float32)``)."""
        from ..backend import reference

        if tolerance_dtype != "float64" or self.tolerance != (None, None):
            return False
        rtol, atol, _ = reference.tolerance("float32", "float32")
        return reference.compare(expected, array, rtol, atol) is None

    def _layout_text(self, name: str) -> str:
        axes = self.layouts.get(name)
        return "" if axes is None else ",".join(map(str, axes))


@dataclass(frozen=True)
class _Routing:
    """Decided once from the target's signature: argument -> spec name, the spec names held
    as the module's state, dim -> parameter, and the target's named parameters."""

    passed: dict[str, str]
    state: list[str]
    dims: dict[str, str]
    parameters: list[str]


@dataclass(frozen=True)
class Wiring:
    """How a real module takes the spec: ``init`` (factory keyword -> value), ``args``
    (forward keyword -> value), ``masks`` (spec mask -> convention), ``params`` (spec name ->
    module key, ``KEY.T`` for its transpose), ``outputs`` (spec output -> index or key).
    A string value of ``init``/``args`` is parsed as on the command line; another is passed
    as it is."""

    init: Mapping[str, Any] = field(default_factory=dict)
    args: Mapping[str, Any] = field(default_factory=dict)
    masks: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[str, int | str] = field(default_factory=dict)


def _instance_dims(program: Program, module: Any, params: Mapping[str, str]) -> dict[str, int]:
    """The dims an instance's tensors fix (binding.instance_sizes), for the dims the spec
    leaves free."""
    from ..backend.runtime import declared
    from .binding import instance_sizes
    from ..symbolic import shape_text

    dims = set(program.dims.unbound())
    axes: dict[str, list[str | None]] = {}
    for name, tensor in declared(program).items():
        if tensor.value.shape is None:
            continue
        texts = [shape_text((axis,), False).strip("[]") for axis in tensor.value.shape]
        axes[name] = [text if text in dims else None for text in texts]
    return {d: v for d, v in instance_sizes(module, axes, params).items() if d in dims}


def _square(value: Any) -> bool:
    """A 2-D shape whose two axes are the same dim (``[N, N]``): a table of queries by keys."""
    from ..symbolic import shape_text

    shape = value.shape
    return shape is not None and len(shape) == 2 and shape_text(shape[:1]) == shape_text(shape[1:])


def _structural(name: str, text: str) -> Mismatch:
    return Mismatch(name, (text,), structural=True)


def _names_in(value: Any) -> list[str]:
    from .binding import Expression

    return list(value.names()) if isinstance(value, Expression) else []


def _is_module(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)


def _is_module_class(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and inspect.isclass(value) and issubclass(value, torch.nn.Module)


def _target_kind(function: Callable[..., Any], declared: Sequence[str], dims: Sequence[str],
                 names: Mapping[str, str], wiring: Wiring) -> str:
    """``instance`` (an ``nn.Module``), ``factory`` (a module class; a function given
    ``init``, or one that takes none of the spec's inputs and params and whose required
    parameters are all dims, ``dtype`` or ``device``), else ``function``."""
    if _is_module(function):
        return "instance"
    if _is_module_class(function) or wiring.init:
        return "factory"
    signature = _signature(function)
    if signature is None or sys.modules.get("torch") is None:
        return "function"
    kinds = inspect.Parameter
    parameters = signature.parameters
    if any(p.kind in (kinds.VAR_KEYWORD, kinds.VAR_POSITIONAL) for p in parameters.values()):
        return "function"
    spec_side = {names.get(n, n) for n in declared}
    buildable = {*dims, "dtype", "device"}
    required = [p for p, v in parameters.items() if v.default is kinds.empty]
    if spec_side & set(parameters) or not all(p in buildable for p in required):
        return "function"
    return "factory"


def _check_wiring(program: Program, wiring: Wiring, framework: str) -> Wiring:
    """Every name the wiring uses is the spec's; ``--arg``/``--init`` strings parsed."""
    from ..backend.runtime import declared
    from .binding import BindingError, check_mask, parse_expression

    tensors = declared(program)
    dims = list(program.dims.dims)
    try:
        init = {k: parse_expression(v, dims, "what_dims") if isinstance(v, str) else v
                for k, v in wiring.init.items()}
        args = {k: parse_expression(v, [*tensors, *dims]) if isinstance(v, str) else v
                for k, v in wiring.args.items()}
        for name, convention in wiring.masks.items():
            if name not in tensors or not tensors[name].value.is_bool:
                raise BindingError(message("mask_not_bool", name=name))
            check_mask(name, convention)
    except BindingError as error:
        raise UsageError(str(error)) from None
    if wiring.masks and framework != "torch":
        raise UsageError(message("mask_numpy"))
    for name in wiring.params:
        if name not in tensors:
            raise UsageError(message("param_name", name=name, names=", ".join(tensors)))
    for name in wiring.outputs:
        if name not in program.outputs:
            raise UsageError(message("output_name", name=name, names=", ".join(program.outputs)))
    return Wiring(init, args, dict(wiring.masks), dict(wiring.params), dict(wiring.outputs))


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
    from ..backend.runtime import declared

    return [*declared(program), *program.outputs, *program.dims.dims]


def used_transposed(program: Program, names: set[str]) -> frozenset[str]:
    """The declared names the spec uses as ``W.T`` (``x @ W.T``, PyTorch's ``[out, in]``
    weight, as ``extract`` writes it)."""
    from ..syntax import nodes

    found: set[str] = set()
    pending: list[Any] = list(program.statements)
    while pending:
        node = pending.pop()
        if isinstance(node, nodes.Transpose) and isinstance(node.operand, nodes.Name):
            found.add(node.operand.name)
        if isinstance(node, (list, tuple)):
            pending.extend(node)
        elif hasattr(node, "__dataclass_fields__"):
            pending.extend(getattr(node, f) for f in node.__dataclass_fields__
                           if f != "span")
    return frozenset(found & names)


def _check_names(program: Program, names: Mapping[str, str]) -> dict[str, str]:
    known = _spec_names(program)
    for name in names:
        if name not in known:
            raise UsageError(message("unknown_name", name=name, names=", ".join(known)))
    return dict(names)


def _check_layouts(program: Program, layouts: Mapping[str, Layout]) -> dict[str, tuple[int, ...]]:
    from ..backend.reference import permutation
    from ..backend.runtime import declared

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
    from ..backend.compiled import check_device
    from ..options import OptionError

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
    value: Any = import_module_or_file(module_name)
    owner = module_name
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise UsageError(message("no_attribute", module=owner, name=part))
        value = getattr(value, part)
        owner = f"{module_name}:{part}" if owner == module_name else f"{owner}.{part}"
    if inspect.isclass(value) and not _is_module_class(value):  # it would construct, not compute
        raise UsageError(message("a_class", target=target))
    if not callable(value):
        raise UsageError(message("not_callable", target=target, type=type(value).__name__))
    return value


def import_module_or_file(name: str) -> Any:
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
    # `from model import Block` finds its sibling as `python file.py` would: the file's
    # folder is first on the path while it loads (and only then), and a module of a
    # sibling's name imported from elsewhere before does not stand in for it
    folder = path.resolve().parent
    saved = list(sys.path)
    shadowing = _shadowing(folder)
    for other in shadowing:
        del sys.modules[other]
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(name, None)
        raise UsageError(message("import_failed", module=path, error=_error_text(error))) from None
    finally:
        sys.path[:] = saved
        for other, loaded in shadowing.items():
            sys.modules[other] = loaded  # the rest of the process keeps its own
    return module


def _shadowing(folder: Path) -> dict[str, Any]:
    """The loaded top-level modules named like a file or package in ``folder`` but loaded
    from elsewhere."""
    found: dict[str, Any] = {}
    for other, loaded in list(sys.modules.items()):
        if "." in other or loaded is None:
            continue
        if not ((folder / f"{other}.py").is_file() or (folder / other / "__init__.py").is_file()):
            continue
        file = getattr(loaded, "__file__", None)
        if file is None or Path(file).resolve().parent not in (folder, folder / other):
            found[other] = loaded
    return found


def _framework(function: Callable[..., Any], choice: str) -> str:
    """``torch`` for a function whose module imports torch (or an ``nn.Module``), ``jax`` for
    one whose module imports jax, else ``numpy``."""
    if choice not in FRAMEWORKS:
        raise UsageError(message("framework", choices=", ".join(FRAMEWORKS), framework=choice))
    if choice != "auto":
        return choice
    if _is_module(function) or _is_module_class(function):
        return "torch"
    target = getattr(function, "__func__", function)  # a bound method
    namespace = getattr(target, "__globals__", None)
    if namespace is None:
        module = sys.modules.get(getattr(target, "__module__", None) or "")
        namespace = vars(module) if module is not None else {}
    values = list(namespace.values())  # torch itself, or a library's nn.Module classes
    # (a library nothing imported is one the function cannot use)
    if "torch" in sys.modules and any(_from("torch", v) or _is_module_class(v) for v in values):
        return "torch"
    if "jax" in sys.modules and any(_from("jax", v) for v in values):
        return "jax"
    return "numpy"


def _from(library: str, value: Any) -> bool:
    name = getattr(value, "__name__", None) if inspect.ismodule(value) else \
        getattr(value, "__module__", None)
    return isinstance(name, str) and (name == library or name.startswith(f"{library}."))


def _jax_backend() -> Any:
    """The JAX backend module (its conversions); without jax, a usage error naming the extra."""
    from ..backend.compiled import framework_module
    from ..options import OptionError

    try:
        return framework_module("jax")
    except OptionError as error:
        raise UsageError(str(error)) from None


def _is_tensor(value: Any) -> bool:
    module = type(value).__module__
    return module == "torch" or module.startswith("torch.")


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


__all__ = ["EXIT_CONFORMS", "EXIT_DIFFERS", "EXIT_FUNCTION", "Conformance", "ConformanceError",
           "Failure", "FunctionFailed", "Mismatch", "UsageError", "conform", "load_function",
           "message"]

