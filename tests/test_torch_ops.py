"""The operators and forms real attention code uses (issue 29 items 3 and 4): each correct
module of tests/data/torch/ops.py verifies clean and conforms, numerically, to the spec
`extract` writes; a bug in a helper function is reported at the helper's line; the binding
reads the `[out, in]` weights `extract` writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("einops")

from shapecheck.pytorch.conform import conform  # noqa: E402
from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check, check_extraction  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OPS = ROOT / "tests" / "data" / "torch" / "ops.py"
NANOGPT = ROOT / "tests" / "data" / "torch" / "nanogpt.py"

CORRECT = {  # target -> a form its spec must hold (the operator lowered, not SC602)
    "Cosine": "sqrt(sum(",
    "MiddleUnbind": "qkv[:, :, :, 0]",
    "Reversed": "flip(",
    "TopK": "sort(s, axis=3, descending=true)[..., :3]",
    "MaskedWrite": "where(future, -inf,",
    "padded": "any(",
    "Einops": "einsum(",
    "Windowed": "concat([x, full(",
    "cached": "index_copy(",
}


def _clean_and_conforms(name: str) -> str:
    extraction = extract(f"{OPS}:{name}")
    assert extraction.unknown == [], extraction.text
    traced = check_extraction(extraction, f"{OPS}:{name}")
    assert [d.code for r in traced.results for d in r.diagnostics] == [], extraction.text
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2, rtol=1e-4, atol=1e-5)
    assert result.ok, result.report()
    return extraction.text


@pytest.mark.parametrize("name", ["TopK", "Einops"])
def test_order_and_einops_are_lowered_clean_and_conform(name: str) -> None:
    assert CORRECT[name] in _clean_and_conforms(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in CORRECT if n not in ("TopK", "Einops")])
def test_each_form_is_lowered_clean_and_conforms(name: str) -> None:
    assert CORRECT[name] in _clean_and_conforms(name)


def test_the_parts_of_a_traced_length_start_where_the_one_before_ends() -> None:
    # x.chunk(2, dim=1) of a symbolic T: the second part was written from 0 (`x[:, : +
    # ...]`), a wrong spec that conform caught on ESM's rotary halves; at T = 1 there is one
    # part, and the unpacking's failure is a true error, confirmed by PyTorch
    text = extract(f"{OPS}:Halves").text
    assert "= x[:, :((T + 1)//2)]" in text and "= x[:, ((T + 1)//2):T]" in text
    line = next(i for i, text in enumerate(OPS.read_text().splitlines(), 1)
                if "x.chunk(2, dim=1)" in text)
    codes = [(d.code, d.span.line) for r in check(f"{OPS}:Halves") for d in r.diagnostics]
    assert ("SC201", line) in codes


def test_a_size_torch_requires_is_a_constraint() -> None:
    # x.topk(3) needs 3 keys: torch's range for T is the spec's constraint, not a bug
    assert "constraint T >= 3" in extract(f"{OPS}:TopK").text


def test_a_size_from_data_is_one_sc602_and_no_error() -> None:
    results = check(f"{OPS}:FromData")
    assert [d.code for r in results for d in r.diagnostics] == ["SC602"]
    assert "input kept: [U, " in extract(f"{OPS}:FromData").text


def test_a_bug_in_a_helper_function_is_reported_at_its_own_line() -> None:
    lines = OPS.read_text().splitlines()
    bug = next(i for i, line in enumerate(lines, 1) if "# BUG" in line)
    results = check(f"{OPS}:HelperBug")
    assert [(d.code, d.span.line) for r in results for d in r.diagnostics] == [("SC405", bug)]


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_the_binding_reads_the_layout_extract_writes(tmp_path: Path) -> None:
    """The spec without its header, so that the binding matches the weights by name and
    shape: `x @ W.T` is PyTorch's `[out, in]`, bound as stored (it once rejected
    `c_attn.weight [42, 14]` for a spec param of exactly that shape)."""
    target = f"{NANOGPT}:CausalSelfAttention"
    spec = tmp_path / "spec.attn"
    spec.write_text(extract(target).text.split("\n", 1)[1])
    done = subprocess.run([sys.executable, "-m", "shapecheck", "conform", str(spec), target],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "c_attn_weight -> c_attn.weight\n" in done.stdout + "\n"


def test_a_rejected_candidate_says_why_it_does_not_fit() -> None:
    import numpy as np

    from shapecheck.pytorch.binding import BindingError, decide

    module = torch.nn.Sequential()
    module.c_attn = torch.nn.Linear(14, 42)
    with pytest.raises(BindingError) as refused:  # used as `x @ W`: [in, out] = [42, 14]?
        decide(module, {"c_attn_weight": np.zeros((42, 14))}, {"c_attn_weight": "param"}, {})
    assert "`c_attn.weight` [42, 14], which Linear stores as [out, in] while the spec uses " \
        "`c_attn_weight` as [in, out] (`x @ W`)" in str(refused.value)


def test_jaxtyping_annotations_are_checked_against_the_traced_shapes() -> None:
    pytest.importorskip("jaxtyping")
    assert [d.code for r in check(f"{OPS}:Typed") for d in r.diagnostics] == []
    lines = OPS.read_text().splitlines()
    wrong = next(i for i, line in enumerate(lines, 1) if "# BUG: [b t d]" in line)
    found = [(d.code, d.span.line) for r in check(f"{OPS}:TypedWrongly") for d in r.diagnostics]
    assert found == [("SC304", wrong)]
