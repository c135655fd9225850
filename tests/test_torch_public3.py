"""Issue 29: attention modules copied faithfully from public projects not covered before
(tests/data/torch/public3/: gemma_pytorch, open_clip, Swin V2, ... ; each file names its
repository, path and license), called as their models call them: each verifies clean and the
spec `extract` writes conforms to it with no flag; one-edit bugs planted in copies
(public3/bugs/) are flagged with their code at their line; and the forms the tool had to
learn for them (public3/forms.py) are lowered, clean, and conform."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from shapecheck.pytorch.conform import conform  # noqa: E402
from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check, check_extraction  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "torch" / "public3"

CLEAN = [
    "gemma_attention.py:make",          # index_copy_ into the cache it is given (was SC602)
    "gemma_attention.py:make_gemma2",   # softcap, query_pre_attn_scalar, qk norm, local mask
    "open_clip_attention.py:make",      # scaled cosine, LND, additive causal mask
    "open_clip_attention.py:make_plain",
    "swinv2_window_attention.py:make",  # torch.roll of the shifted windows (conform failed)
    "swinv2_window_attention.py:make_unshifted",
    "swinv2_window_attention.py:make_attention",  # cpb_mlp bias, cosine, clamped logit scale
    "torchtune_attention.py:make",      # llama3's builder: GQA by expand, rope, is_causal
    "torchtune_attention.py:make_packed",  # a boolean [b, s, s] mask, positions per sample
    "beit_attention.py:make",           # relative position bias with the class token's
    "beit_attention.py:make_shared",    # the model's shared bias; attn_head_dim (was SC404)
    "mistral_attention.py:make",        # rolling cache: scatter_ at positions % window (SC602)
    "mistral_attention.py:make_attention",  # window past the prompt; `if T > 1` prefill
    "performer_attention.py:make",      # FAVOR+ linear attention: 1 / einsum (was SC602)
    "performer_attention.py:make_masked",  # v.masked_fill_(~mask) of a padding mask
]

#: torch.export cannot trace these: (target, torch's reason)
UNTRACEABLE = [
    # torchtune keeps a second cache for export (torchtune/modules/_export/kv_cache.py)
    ("torchtune_attention.py:make_cached",
     "KVCache.update's `assert (self.cache_pos[0] + seq_len) <= self.k_cache.shape[2]` reads "
     "a tensor as a bool: torch.export 'Could not guard on data-dependent expression "
     "Eq(u0, 1)'"),
    # PaLM registers its causal mask and rotary table as buffers inside forward
    ("palm_attention.py:make",
     "`self.register_buffer(\"position\", pos_emb)` in forward: torch.export records it as "
     "a copy_ into another of the module's tensors (norm.beta, then the input x), and its "
     "own exported program fails to run ('The size of tensor a (48) must match the size of "
     "tensor b (12) at non-singleton dimension 2'), as does run_decompositions"),
]

BUGS = [
    ("bugs/gemma_softmax_axis.py:make", "SC402", 242),       # softmax over the queries
    ("bugs/mistral_scale_width.py:make", "SC404", 145),      # args.dim**-0.5, used at 145
    ("bugs/open_clip_unscaled.py:make_plain", "SC405", 90),  # `q = q`: the scale left out
]


def _found(target: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(str(DATA / target)) for d in r.diagnostics]


@pytest.mark.slow  # seconds each: torch.export, a retrace at sizes apart
@pytest.mark.parametrize("target", CLEAN)
def test_public_module_verifies_clean(target: str) -> None:
    assert _found(target) == []


@pytest.mark.slow
@pytest.mark.parametrize("target", CLEAN)
def test_public_module_conforms_with_no_flag(target: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.attn"
    run = [sys.executable, "-m", "shapecheck"]
    path = str(DATA / target)
    written = subprocess.run([*run, "extract", path, "-o", str(spec)], capture_output=True,
                             text=True, cwd=ROOT)
    assert written.returncode == 0, written.stderr
    done = subprocess.run([*run, "conform", str(spec), path], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "conforms" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("target", [pytest.param(target, marks=pytest.mark.xfail(
    reason=reason, strict=True)) for target, reason in UNTRACEABLE])
def test_untraceable_module_would_verify_clean(target: str) -> None:
    assert _found(target) == []


@pytest.mark.slow
@pytest.mark.parametrize("target", [target for target, _ in UNTRACEABLE])
def test_untraceable_module_is_one_sc601_at_the_line_torch_stops(target: str) -> None:
    assert [code for code, _ in _found(target)] == ["SC601"]


@pytest.mark.slow
@pytest.mark.parametrize(("target", "code", "line"), BUGS)
def test_planted_bug_is_flagged_at_its_line(target: str, code: str, line: int) -> None:
    assert _found(target) == [(code, line)]


def _lowered_clean_and_conforms(name: str) -> str:
    target = f"{DATA / 'forms.py'}:{name}"
    extraction = extract(target)
    assert extraction.unknown == [], extraction.text
    traced = check_extraction(extraction, target)
    assert [d.code for r in traced.results for d in r.diagnostics] == [], extraction.text
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2, rtol=1e-4, atol=1e-5)
    assert result.ok, result.report()
    return extraction.text


def test_a_cyclic_shift_is_the_axis_slices_swapped() -> None:
    # Swin's `torch.roll(x, shifts=(-s, -s), dims=(1, 2))` was an input of its traced shape
    # (SC602), and the spec `extract` wrote did not conform without --name flags
    text = _lowered_clean_and_conforms("shifted")
    assert "concat([x[:, shift:], x[:, :shift]], axis=1)" in text
    assert "constraint shift < T" in text


def test_a_cache_the_caller_passes_is_written_by_index_copy() -> None:
    # Gemma's `k_cache.index_copy_(1, kv_write_indices, xk)` was SC602 at each write
    text = _lowered_clean_and_conforms("given_cache")
    assert "index_copy(kv_cache_0, 1, positions, " in text



def test_a_trace_that_fails_at_sizes_apart_prints_nothing() -> None:
    # torchtune's projections are the caller's: rebuilt at sizes apart the module cannot
    # run, and torch logged each failed operator with its traceback into verify's output
    done = subprocess.run([sys.executable, "-m", "shapecheck", "verify",
                           f"{DATA / 'forms.py'}:injected"], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout
    assert done.stderr == ""


def test_a_literal_factor_is_never_half_of_a_dim() -> None:
    # BEiT's `qkv.reshape(B, N, 3, self.num_heads, -1)` at attn_head_dim=6: the literal 3
    # was read as half of the head width (head_dim = 2 * head_dim_half), the 2 of a chunk
    # as half of num_heads = 4, and the scale by the head width then as another dim's: a
    # false SC404
    assert _found("beit_attention.py:make_shared") == []


def test_a_branch_on_a_single_token_keeps_the_size_torch_traced_from() -> None:
    # Mistral's `if positions.shape[0] > 1:` (prefill, else decode from the cache): torch
    # decides it from its floor for a traced size, 2, with no guard, and the spec admitted
    # T = 1, where the module reads the cache instead (conform failed there)
    text = _lowered_clean_and_conforms("prefill")
    assert "constraint T >= 2" in text
    assert "constraint" not in extract(f"{DATA / 'forms.py'}:shifted").text.replace(
        "constraint shift < T", "")


def test_a_rolling_cache_is_scattered_at_positions_modulo_its_window() -> None:
    # `positions % window` (remainder), `cache[:bsz].scatter_(1, slots, k)` (scatter, and
    # the slice write whose open start torch records as None) were SC602 each, and
    # `positions[-window:]` of a sequence traced shorter than the window an SC317 the
    # written spec did not verify with
    text = _lowered_clean_and_conforms("rolling")
    assert "slots = (positions % window)[None, ...][..., None]" in text
    assert "scatter(cache_k[:B], 1, slots_1, k)" in text


def test_a_reciprocal_is_one_over_it() -> None:
    # Performer's `D_inv = 1. / torch.einsum(...)` was SC602 (`reciprocal.default`)
    assert "= 1 / einsum(\"...nd,...d->...n\", q, " in _lowered_clean_and_conforms("linear")
