"""The PyTorch backend: NumPy vs torch on every example and every verifying test case.

A differential test (style.md): the same program executed by two independent backends
must agree — every statement, not just the outputs — at float64, at several admissible
bindings (every dim a different odd size, every dim the same size, random ones).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from shapecheck.check import builtins
from shapecheck.api import admissible_bindings, check_path, check_text
from shapecheck.backend import CheckerBug, torch_backend
from shapecheck.backend.reference import reference
from shapecheck.backend.compiled import CompiledSpec
from shapecheck.messages.diagnostics import shown

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MEMORY_CAP = 64 << 20


def _verifying_specs() -> list[Path]:
    candidates = sorted(EXAMPLES.glob("*.attn")) + sorted((ROOT / "tests").rglob("*.attn"))
    return [p for p in candidates if check_path(p).ok]


SPECS = _verifying_specs()


def test_the_torch_table_covers_every_builtin():
    assert set(torch_backend.BUILTINS) == set(builtins.BUILTINS)


@pytest.mark.slow  # every spec at three bindings; the fast tier keeps the CALLS below
@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_torch_equals_numpy_statement_by_statement(path: Path) -> None:
    program = check_path(path)
    for checked in admissible_bindings(program, 3, seed=1):
        plan = torch_backend.build_plan(checked, "float64", keep_all=True)
        if plan.peak_bytes > MEMORY_CAP:  # a test spec with a huge fixed dim
            continue
        spec = CompiledSpec(checked, dims=checked.dims.bindings, max_memory=MEMORY_CAP)
        case = reference(checked, "float64", seed=2)
        expected = spec.run(case.inputs, keep_intermediates=True, check_invariants=True)
        frame = plan.execute(case.inputs, check_invariants=True)
        # an output that is a version of a rebound input (`cache_k′1`) is named as written
        versions = {shown(name): name for name in checked.outputs}
        for name, value in expected.tensors.items():
            got = frame.values[versions.get(name, name)]
            assert got.shape == value.shape, name
            assert got.dtype == value.dtype, name
            np.testing.assert_allclose(got, value, rtol=1e-12, atol=1e-13, equal_nan=True,
                                       err_msg=f"{path.name}: {name} at {checked.dims.bindings}")
        softmax_checks = [text.split(" (largest")[0] for text in expected.checks
                          if text.startswith("softmax")]
        assert [text.split(" (largest")[0] for text in frame.checks.values()] == softmax_checks
        assert frame.warnings == [w for w in expected.warnings if "softmax row" in w]


def test_float32_stays_float32_and_the_invariants_are_checked():
    program = check_text((EXAMPLES / "causal.attn").read_text(encoding="utf-8"),
                         {"N": 7, "d": 3, "H": 2})
    case = reference(program, "float32", seed=0)
    plan = torch_backend.build_plan(program, "float32", fuse=False)
    frame = plan.execute(case.inputs, check_invariants=True, tensors=True)
    assert frame.values["Y"].dtype == torch.float32
    (check,) = frame.checks.values()
    assert re.fullmatch(r"softmax `P` \(line 20\): every row sums to 1 along axis 2 "
                        r"\(largest error \d\.\de-\d\d\)", check), check
    released = {n for step in plan.steps for n in step.release}
    # one liveness for every framework: an input, too, leaves the frame after its last use
    assert {"S", "X"} <= released and "Y" not in released and "Y" in frame.values


def test_a_fully_masked_row_warns_and_gives_nan():
    source = ("dim N\ninput S: [N, N]\ninput keep: bool[N, N]\n"
              "output P = softmax(where(keep, S, -inf))\n")
    program = check_text(source, {"N": 3})
    keep = np.ones((3, 3), dtype=bool)
    keep[1] = False
    plan = torch_backend.build_plan(program, "float64")
    frame = plan.execute({"S": np.zeros((3, 3)), "keep": keep})
    assert np.isnan(frame.values["P"][1]).all()
    assert frame.warnings == ["`P` (line 4): 1 softmax row(s) are entirely -inf (fully masked) "
                              "and give NaN"]


def test_a_disagreement_with_the_checker_is_a_checker_bug(monkeypatch):
    monkeypatch.setitem(torch_backend.BUILTINS, "transpose", torch_backend.BUILTINS["dropout"])
    program = check_text("dim N, d\ninput Q: [N, d]\noutput T = transpose(Q)\n", {"N": 2, "d": 3})
    plan = torch_backend.build_plan(program, "float64")
    with pytest.raises(CheckerBug, match=r"`T` \(line 3\) has runtime shape \[2, 3\]"):
        plan.execute({"Q": np.zeros((2, 3))})


def test_a_wrong_softmax_is_caught_by_the_invariant(monkeypatch):
    monkeypatch.setattr(torch, "softmax", lambda x, dim: torch.exp(x))
    program = check_text("dim N\ninput S: [N, N]\noutput P = softmax(S)\n", {"N": 3})
    plan = torch_backend.build_plan(program, "float64")
    with pytest.raises(CheckerBug, match="softmax `P` .* not 1"):
        plan.execute({"S": np.ones((3, 3))}, check_invariants=True)


def test_conversions_keep_values_and_name_the_element_type():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = torch_backend.to_torch(array)
    assert tensor.dtype == torch.float32 and tensor.shape == (2, 3)
    back, name = torch_backend.to_numpy(tensor.to(torch.bfloat16))
    assert name == "bfloat16" and back.dtype == np.float32
    np.testing.assert_array_equal(back, array)
    read_only = np.ones(3)
    read_only.flags.writeable = False
    assert torch_backend.to_torch(read_only).sum() == 3


# --- attention as one scaled_dot_product_attention call -------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_fused_torch_equals_numpy_on_the_outputs(path: Path) -> None:
    program = check_path(path)
    for checked in admissible_bindings(program, 2, seed=3):
        plan = torch_backend.build_plan(checked, "float64")
        if plan.peak_bytes > MEMORY_CAP:
            continue
        case = reference(checked, "float64", seed=4)
        frame = plan.execute(case.inputs, check_invariants=True)
        for internal in checked.outputs:  # a written input's output is its last version
            name, value = shown(internal), case.outputs[shown(internal)]
            np.testing.assert_allclose(frame.values[internal], value, rtol=1e-11, atol=1e-12,
                                       equal_nan=True,
                                       err_msg=f"{path.name}: {name} at {checked.dims.bindings}")


def _plan(name: str, bindings: dict[str, int], **options):
    program = check_text((EXAMPLES / name).read_text(encoding="utf-8"), bindings)
    return program, torch_backend.build_plan(program, "float64", **options)


def test_every_example_attention_is_one_sdpa_call_with_4d_inputs(monkeypatch):
    calls: list[tuple[int, ...]] = []
    original = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, **kwargs):
        calls.append((q.ndim, k.ndim, v.ndim))
        return original(q, k, v, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    for example in sorted(EXAMPLES.glob("*.attn")):
        program = check_path(example)
        (checked,) = admissible_bindings(program, 1)
        plan = torch_backend.build_plan(checked, "float64")
        assert any("fused into one scaled_dot_product_attention" in n for n in plan.notes), example
        assert "P" not in {step.name for step in plan.steps}, example  # never computed
        calls.clear()
        plan.execute(reference(checked, "float64", 0).inputs)
        assert calls == [(4, 4, 4)], example


def test_a_causal_mask_is_is_causal_and_a_padding_mask_a_bool_mask():
    _, causal = _plan("causal.attn", {"N": 6, "d": 2, "H": 2})
    assert causal.notes == ("softmax `P` (line 20): fused into one scaled_dot_product_attention "
                            "call (is_causal)",)
    assert {step.name for step in causal.steps} == {"Q", "K", "V", "O", "Y"}  # no mask either
    _, batched = _plan("batched.attn", {"B": 2, "N": 5, "d": 2, "H": 2})
    assert batched.notes[0].endswith("(a bool mask)")


def test_keeping_every_tensor_turns_fusion_off():
    _, plan = _plan("multi_head.attn", {"N": 4, "d": 2, "H": 2}, keep_all=True)
    assert plan.notes == ("softmax `P` (line 21): not fused: every intermediate is kept "
                          "(--save-all)",)
    assert "P" in {step.name for step in plan.steps}
    _, plan = _plan("multi_head.attn", {"N": 4, "d": 2, "H": 2}, fuse=False)
    assert plan.notes == () and "S" in {step.name for step in plan.steps}


def test_a_fully_masked_row_is_nan_with_sdpa_too():
    source = ("dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
              "input keep: bool[N, N]\n"
              "output O = softmax(where(keep, Q @ K.T / sqrt(d), -inf)) @ V\n")
    program = check_text(source, {"N": 3, "d": 2})
    plan = torch_backend.build_plan(program, "float64")
    assert "fused" in plan.notes[0] and "not fused" not in plan.notes[0]
    keep = np.ones((3, 3), dtype=bool)
    keep[1] = False
    ones = np.ones((3, 2))
    frame = plan.execute({"Q": ones, "K": ones, "V": ones, "keep": keep}, check_invariants=True)
    out = frame.values["O"]
    assert np.isnan(out[1]).all() and not np.isnan(out[0]).any()
    assert frame.warnings == ["`O` (line 6): 1 softmax row(s) are entirely -inf (fully masked) "
                              "and give NaN"]


def test_the_sampled_rows_catch_a_wrong_fused_call(monkeypatch):
    program, plan = _plan("single_head.attn", {"N": 5, "d": 3})
    inputs = reference(program, "float64", 0).inputs
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda q, k, v, **kwargs: torch.zeros_like(q))
    with pytest.raises(CheckerBug, match="scaled_dot_product_attention for softmax `P`"):
        plan.execute(inputs, check_invariants=True)


# --- every builtin runs in both backends ---------------------------------------------------------

_HEAD = ("dim N, M, H\ninput X: [N, M]\ninput Y: [N, M]\ninput T: [N, H * M]\n"
         "input B: [H, N, M]\ninput keep: bool[N, M]\n")
CALLS = {  # one small use of each builtin, its arguments' options included
    "abs": "output O = abs(X) + abs(Y - X)",
    "arange": "output O = X + arange(M)\noutput O2 = arange(N) * 0.5",
    "causal_mask": "output O = where(causal_mask(N), X @ Y.T, -1.0) + where(causal_mask(N).T, 1, 0)"
                   "\noutput O2 = where(causal_mask(N, M), X, 0) + where(causal_mask(N, M, window=2), 1, 0)",
    "concat": "output O = concat([X, Y, X], axis=1)\noutput O2 = concat([X, Y])",
    "cos": "output O = cos(X)",
    "dropout": "output O = dropout(X) + dropout(Y, 0.25)",
    "einsum": 'output O = einsum("hnm,nm->hn", B, X)\noutput O2 = einsum("...m,km", X, Y)',
    "elu": "output O = elu(X) + elu(Y, alpha=0.5)",
    "erf": "output O = erf(X)",
    "exp": "output O = exp(X)",
    "gelu": "output O = gelu(X)",
    "layernorm": "output O = layernorm(X)\noutput O2 = layernorm(B, eps=1e-3)",
    "log": "output O = log(abs(X) + 0.5)",
    "max": "output O = max(X, axis=-1)\noutput O2 = max(B, axis=0, keepdims=true) + max(X)",
    "mean": "output O = mean(X, axis=0)\noutput O2 = mean(B, axis=1, keepdims=true) + mean(X)",
    "merge_heads": "output O = merge_heads(B)",
    "min": "output O = min(X, axis=1)\noutput O2 = min(B, axis=-1, keepdims=true) + min(Y)",
    "ones": "output O = X + ones([N, M])\noutput O2 = ones([]) * 2",
    "relu": "output O = relu(X)",
    "repeat": "output O = repeat(X, H, axis=0)\noutput O2 = repeat(B, 2, axis=-1)",
    "reshape": "output O = reshape(B, [N, H * M])\noutput O2 = reshape(X, [M, N])",
    "rmsnorm": "output O = rmsnorm(X)\noutput O2 = rmsnorm(B, eps=0.1)",
    "rsqrt": "output O = rsqrt(abs(X) + 0.5)",
    "sigmoid": "output O = sigmoid(X)",
    "silu": "output O = silu(X)",
    "sin": "output O = sin(X)",
    "softmax": "output O = softmax(X)\noutput O2 = softmax(B, axis=0)\noutput O3 = softmax(X @ Y.T, axis=row)",
    "softplus": "output O = softplus(X)",
    "split_heads": "output O = split_heads(T, H)",
    "swapaxes": "output O = swapaxes(B, 0, 2)\noutput O2 = swapaxes(X, axis1=-1, axis2=-2)",
    "section": "output O = section(T, H - 1, H, axis=1)\noutput O2 = section(B, 0, H, size=1)",
    "sqrt": "output O = sqrt(abs(X)) / sqrt(M)",
    "square": "output O = square(X)",
    "stack": "output O = stack([X, Y])\noutput O2 = stack([X, Y, X], axis=-1)",
    "sum": "output O = sum(X, axis=1)\noutput O2 = sum(B, axis=-1, keepdims=true) + sum(Y)",
    "tanh": "output O = tanh(X)",
    "transpose": "output O = transpose(X)\noutput O2 = transpose(B, [2, 0, 1])",
    "tril": "output O = tril(X)\noutput O2 = tril(B, k=-1)",
    "triu": "output O = triu(X @ Y.T)\noutput O2 = triu(B, k=1)",
    "where": "output O = where(keep, X, Y)\noutput O2 = where(keep, 0, -inf) + where(keep, 1.0, X)",
    "zeros": "output O = X + zeros([N, M])\noutput O2 = zeros([H]) - 1",
}


CALLS.update({  # issue 21: the builtins beyond the contract's
    "cumsum": "output O = cumsum(X, axis=-1)\noutput O2 = cumsum(keep, 0)",
    "cumprod": "output O = cumprod(X / 4 + 1, axis=0)",
    "minimum": "output O = minimum(X, Y)\noutput O2 = minimum(X, M - 1) + minimum(B, 0.5)",
    "maximum": "output O = maximum(X, Y[0])\noutput O2 = maximum(0, X)",
    "clamp": "output O = clamp(X, min=-0.5)\noutput O2 = clamp(X, min=-1, max=M) + clamp(B, max=Y)",
    "full": "output O = X + full([N, M], -inf)\noutput O2 = full([H], M) + full([N], 0.5)[0]",
    "tile": "output O = tile(X, [2, 1])\noutput O2 = tile(B, [2, 1, 1, 3])",
    "expand": "output O = expand(X[None], [3, -1, -1])\noutput O2 = expand(X[:, :1], [N, 4])",
    "flatten": "output O = flatten(X)\noutput O2 = flatten(swapaxes(X[None], 1, 2), 1)",
    "transpose_2d": "output O = transpose_2d(X)\noutput O2 = transpose_2d(X[0]) + transpose_2d(B[0, 0])",
    "all": "output O = all(keep, axis=-1)\noutput O2 = all(X > 0) | all(keep, axis=(0, 1), keepdims=true)",
    "any": "output O = any(keep, axis=0)\noutput O2 = any(X > Y, axis=(-1, -2))",
    "amax": "output O = amax(B, axis=(-1, -2))\noutput O2 = amax(X, axis=0, keepdims=true)",
    "amin": "output O = amin(B, axis=(0, 2), keepdims=true)\noutput O2 = amin(X)",
    "take": "input ids: int[H, N]\noutput O = take(X, ids, axis=0)\noutput O2 = X[ids] + B[:, ids % H][0]",
    "index_select": "input pos: int[M]\noutput O = index_select(X, 1, pos)\noutput O2 = index_select(B, -1, pos)",
    "take_along_axis": "input ids: int[N, 1]\noutput O = take_along_axis(X, ids, axis=-1)"
                       "\noutput O2 = take_along_axis(B, ids[None] % N, axis=1)",
    "index_copy": "output O = index_copy(X, 0, arange(N) * 0 + (arange(N) + 1) % N, Y)"
                  "\noutput O2 = index_copy(B, 2, (arange(M) + 2) % M, 0.5)",
    "scatter": "output O = scatter(X, 1, tile((arange(M)[None] + 1) % M, [N, 1]), Y)",
    "view_as_complex": "output O = view_as_real(view_as_complex(stack([X, Y], axis=-1)) * 2)",
    "view_as_real": "input z: complex[N, M]\noutput O = view_as_real(z * z)",
    "as_complex": "output O = as_real(as_complex(concat([X, Y], axis=-1)) * as_complex(tile(X, [1, 2])))",
    "as_real": "input z: complex[N, M]\noutput O = as_real(exp(z) + conj(z))",
    "polar": "output O = view_as_real(polar(abs(X), Y) * polar(ones_like(X[0]), X))",
    "real": "input z: complex[N, M]\noutput O = real(z * z) + real(X)",
    "imag": "input z: complex[N, M]\noutput O = imag(z) * imag(z[0]) + abs(z)",
    "conj": "input z: complex[N, M]\noutput O = imag(conj(z) @ z.T)\noutput O2 = sum(z, axis=0) + mean(z)",
    "outer": "output O = outer(arange(N), X[0]) + outer(X[:, 0], arange(M))",
    "ones_like": "output O = ones_like(X) + X\noutput O2 = where(ones_like(keep), X, 0)",
    "zeros_like": "output O = zeros_like(B) + B",
    "full_like": "output O = full_like(X, -inf)\noutput O2 = full_like(arange(N), M - 1) + arange(N)",
    "long": "output O = long(X * 4)\noutput O2 = long(keep) + long(-2.5)",
    "argmax": "output O = argmax(X, axis=-1)\noutput O2 = argmax(B, axis=1, keepdims=true) + argmax(X)",
    "argmin": "output O = argmin(X, axis=0, keepdims=true)\noutput O2 = argmin(B)",
    "sort": "output O = sort(X)\noutput O2 = sort(B, axis=1, descending=true)",
    "argsort": "output O = argsort(X, axis=0)\noutput O2 = take_along_axis(X, argsort(X, descending=true), axis=-1)",
    "flip": "output O = flip(X, axis=-1)\noutput O2 = flip(B, axis=(0, 2)) + flip(keep)[0, 0]",
    "arange_steps": None,
})
CALLS.pop("arange_steps")
CALLS["arange"] += "\noutput O3 = arange(1, N, 2) + arange(N - 1, -1, -1)[0]\noutput O4 = arange(2, M + 2)"


def test_every_builtin_has_a_call_run_by_both_backends():
    """A builtin added to the table fails here until it has a call below (and so a torch
    implementation compared with NumPy's)."""
    assert set(CALLS) == set(builtins.BUILTINS)


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_builtin_runs_in_torch_as_in_numpy(name: str, dtype: str) -> None:
    source = _HEAD + CALLS[name] + "\n"
    for bindings in ({"N": 5, "M": 3, "H": 2}, {"N": 4, "M": 4, "H": 1}):
        program = check_text(source, bindings)
        assert program.ok, (name, [d.message for d in program.diagnostics])
        case = reference(program, dtype, seed=7)
        expected = CompiledSpec(program, dims=bindings, dtype=dtype).run(
            case.inputs, keep_intermediates=True, check_invariants=True)
        plan = torch_backend.build_plan(program, dtype, keep_all=True)
        frame = plan.execute(case.inputs, check_invariants=True)
        tight = dtype == "float64"
        for tensor, value in expected.tensors.items():
            got = frame.values[tensor]
            assert (got.shape, got.dtype) == (value.shape, value.dtype), (name, tensor)
            np.testing.assert_allclose(got, value, rtol=1e-12 if tight else 2e-6,
                                       atol=1e-13 if tight else 1e-6, equal_nan=True,
                                       err_msg=f"{name}: {tensor} at {bindings}")
