"""Issue 29: attention modules copied faithfully from public projects the tool had never
seen (tests/data/torch/public/, each file names its repository, path and license), called
as their models call them: each verifies clean and conforms with no flag, and a one-edit bug
planted in three of them is flagged with its code at its line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("einops")

from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = ROOT / "tests" / "data" / "torch" / "public"

CLEAN = [
    "whisper_attention.py:make",          # SDPA, is_causal from a traced size (was SC601)
    "whisper_attention.py:make_manual",   # (q * s) @ (k * s).T, mask[:n_ctx, :n_ctx]
    "whisper_attention.py:make_cross",    # keys and values from xa
    "sd_cross_attention.py:make",         # einops, einsum, exists/default
    "sd_cross_attention.py:make_cross",   # a context of another width
    "sd_cross_attention.py:make_masked",  # repeat of a [b, j] mask, masked_fill_
    "vit_attention.py:make",              # chunk, rearrange, nn.Softmax
    "mingpt_attention.py:make",           # a CfgNode config (was four SC307 notes)
    "swin_window_attention.py:make",      # relative position bias table, no shift
    "swin_window_attention.py:make_shifted",  # mask [nW, N, N], view(B_ // nW, nW) (was SC201)
    "sam_attention.py:make",              # [B, H, W, C], decomposed rel pos (was SC411)
]

BUGS = [
    ("vit_attention_bug.py:make", "SC402", 39),           # nn.Softmax(dim = -2)
    ("mingpt_attention_bug.py:make", "SC408", 52),        # bias[...] == 1: mask inverted
    ("whisper_attention_bug.py:make_manual", "SC404", 80),  # ** -0.5 on q and on k
]


def _found(target: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(str(PUBLIC / target)) for d in r.diagnostics]


@pytest.mark.slow
@pytest.mark.parametrize("target", CLEAN)
def test_public_module_verifies_clean(target: str) -> None:
    assert _found(target) == []


@pytest.mark.slow
@pytest.mark.parametrize("target", CLEAN)
def test_public_module_conforms_with_no_flag(target: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.attn"
    run = [sys.executable, "-m", "shapecheck"]
    path = str(PUBLIC / target)
    written = subprocess.run([*run, "extract", path, "-o", str(spec)], capture_output=True,
                             text=True, cwd=ROOT)
    assert written.returncode == 0, written.stderr
    done = subprocess.run([*run, "conform", str(spec), path], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("target", "code", "line"), BUGS)
def test_planted_bug_is_flagged_at_its_line(target: str, code: str, line: int) -> None:
    assert _found(target) == [(code, line)]
