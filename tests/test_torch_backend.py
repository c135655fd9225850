"""The PyTorch backend: every builtin's call run by torch as by NumPy, float32 kept, the
invariants and the fused form (one SDPA call).

Every example and every verifying test case, run on torch and NumPy (fused or not, every
statement kept or not) at two bindings, is one oracle call in
tests/test_plan_differential.py (style.md: a differential test).
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

from builtin_calls import CALLS, HEAD

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MEMORY_CAP = 64 << 20


def test_the_torch_table_covers_every_builtin():
    assert set(torch_backend.BUILTINS) == set(builtins.BUILTINS)


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


def _plan(name: str, bindings: dict[str, int], **options):
    program = check_text((EXAMPLES / name).read_text(encoding="utf-8"), bindings)
    return program, torch_backend.build_plan(program, "float64", **options)


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
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


def test_every_builtin_has_a_call_run_by_both_backends():
    """A builtin added to the table fails here until it has a call in `builtin_calls` (and so
    a torch implementation compared with NumPy's)."""
    assert set(CALLS) == set(builtins.BUILTINS)


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_builtin_runs_in_torch_as_in_numpy(name: str, dtype: str) -> None:
    source = HEAD + CALLS[name] + "\n"
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
