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

from shapecheck import builtins
from shapecheck.api import admissible_bindings, check_path, check_text
from shapecheck.backend import CheckerBug, torch_backend
from shapecheck.backend.reference import reference
from shapecheck.backend.compiled import CompiledSpec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MEMORY_CAP = 64 << 20


def _verifying_specs() -> list[Path]:
    candidates = sorted(EXAMPLES.glob("*.attn")) + sorted((ROOT / "tests").rglob("*.attn"))
    return [p for p in candidates if check_path(p).ok]


SPECS = _verifying_specs()


def test_the_torch_table_covers_every_builtin():
    assert set(torch_backend.BUILTINS) == set(builtins.BUILTINS)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_torch_equals_numpy_statement_by_statement(path: Path) -> None:
    program = check_path(path)
    for checked in admissible_bindings(program, 3, seed=1):
        plan = torch_backend.compile_program(checked, "float64", keep_all=True)
        if plan.peak_bytes > MEMORY_CAP:  # a test spec with a huge fixed dim
            continue
        spec = CompiledSpec(checked, dims=checked.dims.bindings, max_memory=MEMORY_CAP)
        case = reference(checked, "float64", seed=2)
        expected = spec.run(case.inputs, keep_intermediates=True, check_invariants=True)
        frame = plan.execute(case.inputs, check_invariants=True)
        for name, value in expected.tensors.items():
            got, dtype = torch_backend.to_numpy(frame.values[name])
            assert got.shape == value.shape, name
            assert dtype == ("bool" if value.dtype == bool else "float64"), name
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
    plan = torch_backend.compile_program(program, "float32")
    frame = plan.execute(case.inputs, check_invariants=True)
    assert frame.values["Y"].dtype == torch.float32
    (check,) = frame.checks.values()
    assert re.fullmatch(r"softmax `P` \(line 20\): every row sums to 1 along axis 2 "
                        r"\(largest error \d\.\de-\d\d\)", check), check
    released = {n for step in plan.steps for n in step.release}
    assert "S" in released and "Y" not in released and set(frame.values) >= {"Y", "X"}


def test_a_fully_masked_row_warns_and_gives_nan():
    source = ("dim N\ninput S: [N, N]\ninput keep: bool[N, N]\n"
              "output P = softmax(where(keep, S, -inf))\n")
    program = check_text(source, {"N": 3})
    keep = np.ones((3, 3), dtype=bool)
    keep[1] = False
    plan = torch_backend.compile_program(program, "float64")
    frame = plan.execute({"S": np.zeros((3, 3)), "keep": keep})
    assert torch.isnan(frame.values["P"][1]).all()
    assert frame.warnings == ["`P` (line 4): 1 softmax row(s) are entirely -inf (fully masked) "
                              "and give NaN"]


def test_a_disagreement_with_the_checker_is_a_checker_bug(monkeypatch):
    monkeypatch.setitem(torch_backend.BUILTINS, "transpose", torch_backend.BUILTINS["dropout"])
    program = check_text("dim N, d\ninput Q: [N, d]\noutput T = transpose(Q)\n", {"N": 2, "d": 3})
    plan = torch_backend.compile_program(program, "float64")
    with pytest.raises(CheckerBug, match=r"`T` \(line 3\) has runtime shape \[2, 3\]"):
        plan.execute({"Q": np.zeros((2, 3))})


def test_a_wrong_softmax_is_caught_by_the_invariant(monkeypatch):
    monkeypatch.setattr(torch, "softmax", lambda x, dim: torch.exp(x))
    program = check_text("dim N\ninput S: [N, N]\noutput P = softmax(S)\n", {"N": 3})
    plan = torch_backend.compile_program(program, "float64")
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
