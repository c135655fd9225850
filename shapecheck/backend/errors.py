"""Errors of the numeric backend, and every text it prints (messages and the run report).

The backend never builds prose inline: it picks a key of :data:`MESSAGES` and
fills in the fields (as the checker does with :mod:`shapecheck.codes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..i18n import Table
from ..options import OptionError

if TYPE_CHECKING:
    from ..check.program import Program

MESSAGES: Table = Table("run", "MESSAGES", {
    # the spec and its dims
    "no_dims": "no dims",
    "spec_errors": "the spec does not verify ({count}); it cannot be run",
    "unbound": "free dims left unbound: {names}; bind them with {flags}{derived}",
    "unbound_derived": " (then the spec determines {names})",
    "hint_cli": "--dim {name}=INT",
    "hint_api": "'{name}': ...",
    "hints_api": "dims={{{hints}}}",
    "bindings_from": "bindings: {bindings}",
    # supplied arrays
    "unknown_array": "`{name}` is not an input or param of the spec (they are: {names})",
    "missing_arrays": "no array for {names}; pass every input and param (or use run(..., seed=...) "
    "to generate the missing ones)",
    "not_an_array": "{kind} `{name}`: expected a NumPy array, got {type}",
    "rank": "{kind} `{name}` is declared as {declared} (rank {rank}), but the array has shape "
    "{actual} (rank {actual_rank})",
    "dim_conflict": "{kind} `{name}` is declared as {declared}, but the array has shape {actual}: "
    "axis {axis} gives {dim} = {got}, but {source} gives {dim} = {bound}",
    "entry_conflict": "{kind} `{name}` is declared as {declared}, which is {expected} at the "
    "bindings ({bindings}), but the array has shape {actual}: axis {axis} ({dim}) is {bound} "
    "at the bindings, the array has {got}",
    "element_type": "{kind} `{name}` is declared as {declared}, which holds {wanted}, but the "
    "array's element type is {dtype}",
    "wanted_bool": "bool values",
    "wanted_real": "real numbers (floats or integers)",
    "non_finite": "{kind} `{name}` contains {count} non-finite value(s) (NaN or infinity); "
    "inputs and params must be finite",
    "zero_axis": "{kind} `{name}` has shape {actual}: axis {axis} is empty, but dims are "
    "positive integers",
    "source_dim": "--dim {dim}={value}",
    "source_array": "{kind} `{name}` (shape {shape})",
    "source_spec": "the spec ({definition})",
    "its_constraints": "its constraints",
    "generated_input": "N(0, 1)",
    "generated_param": "N(0, 1/fan_in), fan_in the second-to-last axis",
    "generated_mask": "true with probability {fraction}, at least one true per row",
    "generated_drop_mask": "false (kept: the mask is stated `drop`) with probability {fraction}, "
    "at least one false per row",
    # files
    "no_file": "{path}: no such file",
    "unreadable": "cannot read {path}: {reason}",
    "not_npy": "{path}: not a .npy file ({reason})",
    "not_npz": "{path}: not a .npz archive ({reason})",
    "no_magic": "it does not start with a NumPy header",
    "npz_not_npy": "it is a .npz archive; pass it with --inputs",
    "npy_not_npz": "it is a single .npy array; pass it with --input NAME=FILE",
    "truncated": "the file is shorter than its header says: truncated?",
    "pickled": "{path}: holds Python objects (a pickled or object array); only numeric and bool "
    "arrays are loaded, never with pickle",
    "npz_key": "{path}: array `{key}` cannot be loaded ({reason})",
    "npz_member": "{path}[{key}]",
    "npz_members": "{count} members, more than {limit}",
    "npz_not_array": "not a .npy member",
    "npz_twice": "the key appears twice",
    "negative_shape": "its header gives a negative size in shape {shape}",
    "input_twice": "`{name}` is given twice (by {first} and by {second})",
    "input_syntax": "`{item}` is not NAME=FILE.npy",
    "cannot_write": "cannot write {path}: {reason}",
    "save_stdout": "--save needs a file name: standard output carries the run's report",
    "what_spec": "the spec being run",
    "what_input": "an input array of this run",
    "dtype": "dtype must be one of {choices}, got {dtype}",
    "backend": "backend must be one of {choices}, got {backend}",
    "fused_option": "fused must be one of {choices}, got {fused}",
    "device": "device {device} is not one the {backend} backend runs on ({choices})",
    "no_cuda": "device {device}: torch sees no CUDA device on this machine",
    "no_torch": "the torch backend needs PyTorch: pip install 'attn-shapecheck[torch]' ({reason})",
    "no_gpu_jax": "device {device}: jax sees no GPU on this machine (jax[cpu] has none; see "
    "JAX's installation guide for a CUDA build)",
    "no_jax": "the jax backend needs JAX: pip install 'attn-shapecheck[jax]' ({reason})",
    # resources
    "memory": "the run needs about {total} at the bindings ({bindings}), more than --max-memory "
    "{limit}; the largest tensor is {largest} {shape}, {size}",
    "tensor_label": "`{name}`",
    "temporary_label": "a temporary of the statement defining `{name}` (line {line})",
    "too_large": "{what} {shape} has {size} elements: more than NumPy can index ({limit}) at the "
    "bindings ({bindings})",
    "out_of_memory": "NumPy could not allocate memory for the run at the bindings ({bindings}); "
    "its estimate was {total} (--max-memory {limit}): lower the sizes, or keep a --max-memory "
    "below the machine's free memory",
    # internal failures: checker bugs, never user mistakes
    "shape_bug": "checker bug: `{name}` (line {line}) has runtime shape {actual}, but the checker "
    "computed {symbolic}, which is {expected} at the bindings ({bindings}); please report it",
    "dtype_bug": "backend bug: `{name}` (line {line}) has element type {actual}, expected "
    "{expected}; please report it",
    "bug_unbound_shape": "backend bug: shape {shape} is not known at the bindings; please report it",
    "bug_no_type": "backend bug: the checker recorded no shape for the expression on line {line}; "
    "please report it",
    "bug_unresolved_call": "backend bug: the checker did not resolve the call of `{name}` on line "
    "{line}; please report it",
    "bug_no_builtin": "backend bug: builtin `{name}` has no NumPy implementation; please report it",
    "bug_no_builtin_torch": "backend bug: builtin `{name}` has no torch implementation; please "
    "report it",
    "bug_no_builtin_jax": "backend bug: builtin `{name}` has no JAX implementation; please "
    "report it",
    "bug_not_value": "backend bug: cannot execute a {kind} as a value (line {line}); please report it",
    # the report of `shapecheck run`
    "report_header": "{path}: ran with {bindings} ({dtype}, {backend})",
    "report_plan": "  {text}",
    "report_generated": "  generated (seed {seed}): {names} ~ {how}",
    "report_loaded": "  loaded: {name} from {source}",
    "report_output": "output {name}: shape {shape}, {dtype}, {stats}",
    "report_stats": "min {min:.6g}, max {max:.6g}, mean {mean:.6g}",
    "report_stats_bool": " ({true} of {size} true)",
    "report_stats_nan": ", {count} NaN",
    "report_checked": "checked:",
    "report_check": "  {text}",
    "report_warning": "warning: {text}",
    "report_saved": "saved {count} array(s) to {path}",
    "report_error": "shapecheck: {text}",
    "report_internal": "shapecheck: internal error: {text}",
    "report_save_all_needs_save": "--save-all needs --save FILE.npz",
    # invariants and warnings
    "masked_rows": "`{name}` (line {line}): {count} softmax row(s) are entirely -inf (fully "
    "masked) and give NaN",
    "non_finite_output": "output `{name}` contains {count} non-finite value(s)",
    "check_shapes": "{count} statement shape(s) match the checker's at the bindings",
    "check_dtype": "every tensor is {dtype} (bool masks excepted)",
    "check_dtype_complex": "every tensor is {dtype}, complex ones {complex} (bool masks excepted)",
    "check_softmax": "softmax `{name}` (line {line}): every {what} sums to 1 along axis {axis} "
    "(largest error {error:.1e})",
    "check_softmax_nan": "softmax `{name}` (line {line}): every {what} that is not NaN sums to 1 "
    "along axis {axis} (largest error {error:.1e})",
    "what_row": "row",
    "what_column": "column",
    "what_slice": "slice",
    "softmax_sum": "softmax `{name}` (line {line}): a {what} sums to {total!r} along axis {axis}, "
    "not 1",
    # fused attention (numpy: blockwise; torch: scaled_dot_product_attention)
    "check_softmax_fused": "softmax `{name}` (line {line}), fused: every {what} sums to 1 along axis "
    "{axis}, checked block by block (largest error {error:.1e})",
    "check_softmax_sdpa": "softmax `{name}` (line {line}), fused into scaled_dot_product_attention: "
    "{count} {what}(s) recomputed from Q, K and V sum to 1 along axis {axis} and give its output "
    "(largest error {error:.1e})",
    "check_softmax_flex": "softmax `{name}` (line {line}), fused into flex_attention: {count} "
    "{what}(s) recomputed from Q, K, V and the functions of positions sum to 1 along axis {axis} "
    "and give its output (largest error {error:.1e})",
    "flex_bug": "backend bug: flex_attention for softmax `{name}` (line {line}) differs from the "
    "{what}s recomputed from Q, K, V and the functions of positions by {error:.1e}; please report "
    "it",
    "sdpa_bug": "backend bug: scaled_dot_product_attention for softmax `{name}` (line {line}) differs "
    "from the {what}s recomputed from Q, K and V by {error:.1e}; please report it",
    "check_softmax_dpa": "softmax `{name}` (line {line}), fused into jax.nn.dot_product_attention: "
    "{count} {what}(s) recomputed from Q, K and V sum to 1 along axis {axis} and give its output "
    "(largest error {error:.1e})",
    "dpa_bug": "backend bug: jax.nn.dot_product_attention for softmax `{name}` (line {line}) "
    "differs from the {what}s recomputed from Q, K and V by {error:.1e}; please report it",
    "fused": "softmax `{name}` (line {line}): {how}",
    "fused_workspace": "the score blocks of the fused softmax `{name}` (line {line})",
    "fused_blocks": "fused, {rows} query rows at a time{keys}; the {shape} table is never built",
    "fused_keys": ", keys {keys} at a time (online softmax)",
    "fused_sdpa": "fused into one scaled_dot_product_attention call ({mask})",
    "fused_dpa": "fused into one jax.nn.dot_product_attention call ({mask})",
    "fused_flex": "fused into one flex_attention call (eager; its mask_mod and score_mod are "
    "the spec's functions of positions)",
    "fused_flex_ordered": "fused into one flex_attention call (eager; its score_mod applies the "
    "spec's score operations in order, the soft-cap's tanh among them)",
    "fused_positions": "; its masks and biases are functions of positions, evaluated block by "
    "block",
    "sdpa_no_mask": "no mask",
    "sdpa_causal": "is_causal",
    "sdpa_bool": "a bool mask",
    "sdpa_float": "an additive mask",
    "not_fused": "softmax `{name}` (line {line}): not fused: {reason}",
    "fused_off": "--fused off",
    "fused_off_save_all": "every intermediate is kept (--save-all)",
    "fused_no_scores": "the scores are not a product of Q and K the analysis could name",
    "fused_changed": "the weights are changed between the softmax and the product with V",
    "fused_axis": "the product with V does not sum the weights over the axis the softmax "
    "normalises (SC402)",
    "fused_axis_unknown": "which axis of the weights the product with V sums over is not known",
    "fused_handwritten": "the softmax is written out by hand",
    "fused_unknown_step": "the scores go through an operation other than a scale, a bias, a mask "
    "or a soft-cap",
    "fused_fill": "a mask's fill is not a number",
    "fused_needed": "the scores or the weights are needed elsewhere (an output, or read again)",
    "fused_layout": "an axis of Q, K, V, a bias or a mask has no role in the attention",
    "fused_not_sdpa": "a mask replaces scores by a finite value, or the scale is not a positive "
    "constant: no form of scaled_dot_product_attention computes that",
    "fused_not_dpa": "a mask replaces scores by a finite value, or the scale is not a positive "
    "constant: no form of jax.nn.dot_product_attention computes that",
    "fused_not_sdpa_capped": "the scores are soft-capped (`tanh`): no form of "
    "scaled_dot_product_attention computes that",
    "fused_not_flex_scale": "the scores are soft-capped and a scale is not a constant: the "
    "flex_attention call's score_mod applies numbers only",
    "fused_not_dpa_capped": "the scores are soft-capped (`tanh`): no form of "
    "jax.nn.dot_product_attention computes that",
    "fused_dpa_float64": "jax.nn.dot_product_attention computes its softmax in float32, so a "
    "float64 run is not fused",
    "fused_dpa_features": "V has other features than K: jax.nn.dot_product_attention takes a "
    "value shaped as its key",
    "check_weights": "`{contraction}` (line {line}): the weights `{weights}` sum to 1 along the "
    "axis it sums over (axis {axes}; largest error {error:.1e})",
    "check_weights_nan": "`{contraction}` (line {line}): the weights `{weights}` that are not NaN "
    "or all zero sum to 1 along the axis it sums over (axis {axes}; largest error {error:.1e})",
    "weights_sum": "`{contraction}` (line {line}) sums weights `{weights}` that do not add up to 1 "
    "along axis {axes}: {count} slice(s) off, one sums to {total:.6g}; the output is not a "
    "weighted average (a mask or a change after the softmax, or the softmax's axis)",
    # issue 21: integer tensors and gathers
    "index_range": "line {line}: `{index}` holds {value} as a position on axis {axis} of `{operand}`, which has {size} entries (positions 0 to {last})",
    "index_not_whole": "line {line}: `{index}` holds {value} as a position, which is not a whole number",
    "wanted_int": "integers",
    "int_not_whole": "{kind} `{name}` is declared as {declared}, but holds {value}, which is not a whole number",
    "int_too_large": "{kind} `{name}` holds {value}, beyond {limit}, the largest integer a {dtype} run holds exactly",
    "generated_int": "integers from 0 to {high}",
    "generated_positions": "integers from 0 to the size of the axis they index, exclusive",
})


def message(template: str, /, **fields: object) -> str:
    return MESSAGES[template].format(**fields)


class RunError(Exception):
    """The root of every error ``run`` and a compiled spec raise."""

    exit_code = 1


class SpecError(RunError):
    """The spec does not verify (at the bindings); ``program`` holds its diagnostics."""

    def __init__(self, program: Program, bindings: str | None = None) -> None:
        from ..formats.common import plural

        errors = sum(1 for d in program.diagnostics if d.is_error)
        super().__init__(message("spec_errors", count=plural(errors, "error")))
        self.program = program
        self.bindings = bindings  # where the bindings came from, when arrays gave some


class InputError(RunError):
    """A supplied array, file or binding that does not fit the spec."""


class MemoryLimitError(InputError):
    """The run would need more memory than allowed."""


class CheckerBug(RunError):
    """Execution disagrees with the checker: a bug in shapecheck, never ignored."""

    exit_code = 2


def names_text(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def bindings_text(values: Mapping[str, object], sources: Mapping[str, str] | None = None) -> str:
    """``N=128, d=64``, or ``N=128 (--dim N=128), ...`` with where each value came from."""
    if not values:
        return MESSAGES["no_dims"]
    if sources is None:
        return ", ".join(f"{n}={v}" for n, v in values.items())
    return ", ".join(f"{n}={v} ({sources[n]})" for n, v in values.items())
