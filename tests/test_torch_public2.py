"""Attention modules copied faithfully from public projects the tool was not written
against (tests/data/torch/public2/: litgpt, dinov2, perceiver-pytorch, CLIP, ESM), each called as
its model calls it: each verifies clean and the spec `extract` writes conforms to it with no
flag; a one-edit bug planted in three of them is flagged at its line (issue 29)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from shapecheck.loader import check_text  # noqa: E402
from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "tests" / "data" / "torch" / "public2"

CLEAN = [
    "dinov2_attention.py:make", "dinov2_attention.py:make_causal",
    "dinov2_attention.py:make_memeff",
    "perceiver_attention.py:make",
    "litgpt_attention.py:make", "litgpt_attention.py:make_mha",
    "litgpt_attention.py:make_softcap", "litgpt_attention.py:make_softcap_mqa",
    "clip_attention.py:make", "clip_attention.py:make_pool",
    "esm_attention.py:make", "esm_attention.py:make_esm1b",
]


def _codes(target: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(str(HERE / target)) for d in r.diagnostics]


@pytest.mark.slow  # a few seconds each: torch.export, a retrace at sizes apart
@pytest.mark.parametrize("target", CLEAN)
def test_public_module_verifies_clean(target: str) -> None:
    assert _codes(target) == []


def test_a_size_torch_pins_by_an_unsolved_guard_is_traced_static() -> None:
    # CLIP's AttentionPool2d: `H*W + 1` must equal its positional table's length, a guard
    # torch records but neither solves nor keeps; the symbolic trace claimed every map size
    # and the broadcast read as a mismatch (SC303), now the pool is traced as it runs
    assert _codes("clip_attention.py:make_pool") == []


def test_sizes_apart_that_coincide_in_a_derived_size_are_not_written() -> None:
    # litgpt, one key/value head: retraced at heads=5, head_size=7 the qkv width
    # (5 + 2) * 7 read as head_size**2 and the written spec did not verify; the factory's
    # own sizes are kept instead
    spec = extract(str(HERE / "litgpt_attention.py:make_softcap_mqa")).text
    program = check_text(spec, {}, ignore=frozenset({"SC401"}), infer=False)
    assert [d.code for d in program.diagnostics if d.is_error] == []


def test_queries_scaled_before_rotary_keep_their_scale() -> None:
    # ESM: `q *= self.scaling` then the rotary transform; the scale was lost through
    # `q * cos + rotate_half(q) * sin` and a false SC405 said the scores were unscaled
    assert _codes("esm_attention.py:make") == []


@pytest.mark.slow
@pytest.mark.parametrize("target", CLEAN)
def test_public_module_conforms_with_no_flag(target: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.attn"
    run = [sys.executable, "-m", "shapecheck"]
    path = str(HERE / target)
    written = subprocess.run([*run, "extract", path, "-o", str(spec)], capture_output=True,
                             text=True, cwd=ROOT)
    assert written.returncode == 0, written.stderr
    done = subprocess.run([*run, "conform", str(spec), path], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "conforms" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(("target", "code", "line"), [
    ("bugs/perceiver_softmax_axis.py:make", "SC402", 66),  # softmax over the queries
    ("bugs/litgpt_scale_width.py:make", "SC404", 268),  # 1/sqrt(n_embd), not head_size
    ("bugs/esm_scale_width.py:make", "SC404", 330),  # embed_dim**-0.5, before the rotary
])
def test_planted_bug_is_flagged_at_its_line(target: str, code: str, line: int) -> None:
    assert _codes(target) == [(code, line)]
