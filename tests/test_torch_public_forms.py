"""The forms the third public corpus (tests/data/torch/public3/: gemma_pytorch, open_clip,
Swin V2, torchtune, BEiT, PaLM, mistral-src, performer) and the fourth (public4/:
x-transformers, diffusers, OLMo, DETR, torchvision, flash-attention) and the fifth (public5/:
timm, llama, fairseq, espnet, ViTDet) taught the front end, each in a small module of their
forms.py: lowered, clean, and conforming. The corpus itself (clean,
conforming, its planted bugs at their lines, the two forms torch.export cannot trace) is
tested with the others in tests/test_torch_public.py."""
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
DATA4 = ROOT / "tests" / "data" / "torch" / "public4"
DATA5 = ROOT / "tests" / "data" / "torch" / "public5"


def _lowered_clean_and_conforms(name: str, data: Path = DATA) -> str:
    target = f"{data / 'forms.py'}:{name}"
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


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_cache_the_caller_passes_is_written_by_index_copy() -> None:
    # Gemma's `k_cache.index_copy_(1, kv_write_indices, xk)` was SC602 at each write
    text = _lowered_clean_and_conforms("given_cache")
    assert "index_copy(kv_cache_0, 1, positions, " in text



@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_trace_that_fails_at_sizes_apart_prints_nothing() -> None:
    # torchtune's projections are the caller's: rebuilt at sizes apart the module cannot
    # run, and torch logged each failed operator with its traceback into verify's output
    done = subprocess.run([sys.executable, "-m", "shapecheck", "verify",
                           f"{DATA / 'forms.py'}:injected"], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout
    assert done.stderr == ""


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_literal_factor_is_never_half_of_a_dim() -> None:
    # BEiT's `qkv.reshape(B, N, 3, self.num_heads, -1)` at attn_head_dim=6: the literal 3
    # was read as half of the head width (head_dim = 2 * head_dim_half), the 2 of a chunk
    # as half of num_heads = 4, and the scale by the head width then as another dim's: a
    # false SC404
    found = check(str(DATA / "beit_attention.py:make_shared"))
    assert [d.code for r in found for d in r.diagnostics] == []


def test_a_branch_on_a_single_token_keeps_the_size_torch_traced_from() -> None:
    # Mistral's `if positions.shape[0] > 1:` (prefill, else decode from the cache): torch
    # decides it from its floor for a traced size, 2, with no guard, and the spec admitted
    # T = 1, where the module reads the cache instead (conform failed there)
    text = _lowered_clean_and_conforms("prefill")
    assert "constraint T >= 2" in text
    assert "constraint" not in extract(f"{DATA / 'forms.py'}:shifted").text.replace(
        "constraint shift < T", "")


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_rolling_cache_is_scattered_at_positions_modulo_its_window() -> None:
    # `positions % window` (remainder), `cache[:bsz].scatter_(1, slots, k)` (scatter, and
    # the slice write whose open start torch records as None) were SC602 each, and
    # `positions[-window:]` of a sequence traced shorter than the window an SC317 the
    # written spec did not verify with
    text = _lowered_clean_and_conforms("rolling")
    assert "slots = (positions % window)[None, ...][..., None]" in text
    assert "scatter(cache_k[:B], 1, slots_1, k)" in text


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_reciprocal_is_one_over_it() -> None:
    # Performer's `D_inv = 1. / torch.einsum(...)` was SC602 (`reciprocal.default`)
    assert "= 1 / einsum(\"...nd,...d->...n\", q, " in _lowered_clean_and_conforms("linear")


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_positions_table_keeps_the_width_the_module_gave_it() -> None:
    # x-transformers' rotary freqs [T, rot_dim] passed to the layer: the width was traced as
    # a free size S, and `t[..., :rot_dim]` of a head of 12 gave notes (SC317, SC201) at
    # every slice; it is the module's width, as a [B, T, width] table's is
    text = _lowered_clean_and_conforms("partial_rotary", DATA4)
    # its traced width, 6, not a free size; since slices are written as wide as their
    # bounds say (`t[..., rot_dim:]`, issue 29's zoo), the width stays the number, which
    # the module takes from the caller (`rot_dim = freqs.shape[-1]`), not half the head
    assert "input freqs: [T, 6]" in text and "constraint 6 < head_dim" in text


@pytest.mark.slow
def test_a_bool_mask_padded_stays_bool() -> None:
    # `F.pad(mask, (num_mem, 0), value=True)` was an int tensor in the spec, and the `~` of
    # it SC602 (`bitwise_not.default`)
    text = _lowered_clean_and_conforms("padded_key_mask", DATA4)
    assert "bool[B, T + num_mem] = concat([full([B, num_mem], 1) > 0, mask], axis=1)" in text


@pytest.mark.slow
def test_group_norm_is_a_layernorm_of_each_group() -> None:
    # diffusers' VAE attention: `group_norm.default` was SC602 and the spec could not
    # conform (its result an input the module does not take); baddbmm's alpha was a number
    text = _lowered_clean_and_conforms("group_normed", DATA4)
    assert "layernorm(reshape(x, [B, groups, 4 * S * T]), eps=1e-06)" in text
    assert "(q @ k.T) / sqrt(channels)" in text


@pytest.mark.slow
def test_a_table_kept_in_a_dict_conforms() -> None:
    # OLMo keeps rotary sin/cos in a dict: torch lifts them as constants, which
    # functional_call cannot replace, so the module ran on its own tables and the spec on
    # conformance's random ones (conform failed at every T > 1)
    text = _lowered_clean_and_conforms("dict_tables", DATA4)
    assert "param lifted_tensor_0: " in text


@pytest.mark.slow
def test_a_number_made_a_tensor_of_no_axes_is_the_number() -> None:
    # audiocraft's `where(valid, zeros([]), full([], -inf))`: the -inf was
    # `-inf * ones([])`, read as the scores the where fills with 0 (a false SC410), and
    # the spec did not conform
    text = _lowered_clean_and_conforms("scalar_bias", DATA4)
    assert ", 0, -inf)" in text and "ones([])" not in text


def test_a_tensor_filled_like_another_is_a_filled_tensor() -> None:
    # timm's causal bias `attn.new_full((N, N), -inf).triu_(1)` was SC602
    # (`new_full.default`), the bias an input of its traced shape
    text = _lowered_clean_and_conforms("new_full_causal", DATA5)
    assert "triu(-inf * ones([T, T]), 1)" in text


@pytest.mark.slow
def test_a_bool_mask_beside_a_time_first_input_keeps_its_lengths() -> None:
    # fairseq's [B, S] key padding mask beside x: [T, B, C]: its first axis is the input's
    # second, which the rule for a [T, width] positions table read as a sequence, so its
    # key axis was a width and torch pinned the sequence length at the traced 9
    text = _lowered_clean_and_conforms("time_first_padded", DATA5)
    assert "9" not in text.split("input key_padding_mask: ")[1].split("\n")[0]
    assert "9" not in text.split("input x: ")[1].split("\n")[0]


@pytest.mark.slow
def test_a_bool_mask_longer_than_the_keys_is_cut_to_them() -> None:
    # wenet's streaming chunk: a [1, 1, time2] mask over the cached keys and the chunk's,
    # cut by `mask[..., :scores.size(-1)]`; its last axis was read as a [B, T, width]
    # table's width and traced at its size, 20, and the cut then past its end (SC317 in
    # verify, an error in the written spec, which conform refused)
    text = _lowered_clean_and_conforms("chunk_mask", DATA5)
    assert "20" not in text.split("input mask: ")[1].split("\n")[0]


@pytest.mark.slow
def test_a_flag_set_after_building_holds_at_sizes_apart() -> None:
    # timm's `attn.fused_attn = False` after the constructor: the module built again at
    # sizes apart (dim=48 and num_heads=6 divide) took the constructor's default, the fused
    # path, so the manual path the factory asked for was never checked (a softmax over the
    # queries there went unflagged)
    text = _lowered_clean_and_conforms("fused_off", DATA5)
    assert "traced again at sizes that do not" in text
    assert "einsum(" in text


@pytest.mark.slow
def test_a_table_resized_by_linear_interpolation_is_its_tent_weights() -> None:
    # ViTDet's and SAM's get_rel_pos: `F.interpolate(table, size=2 * T - 1, mode="linear")`
    # was SC602 (`upsample_linear1d.vec`), the resized table an input of its traced shape
    text = _lowered_clean_and_conforms("resized_table", DATA5)
    assert 'einsum("...i,ji->...j", ' in text
