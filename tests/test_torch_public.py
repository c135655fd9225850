"""Issue 29: attention modules copied faithfully from public projects the tool had never
seen (tests/data/torch/public/: whisper, stable-diffusion, vit-pytorch, minGPT, Swin, SAM;
tests/data/torch/public2/: litgpt, dinov2, perceiver-pytorch, CLIP, ESM; public3/: gemma,
open_clip, Swin V2, torchtune, BEiT, PaLM, mistral, performer; public4/: x-transformers,
diffusers, OLMo, DETR, torchvision, flash-attention; public5/: timm, fairseq, wenet (espnet's
attention), detectron2's ViTDet; public6/: gpt-fast, llama2.c, llama3, CaiT, MaxViT, PVT v2,
checked in tests/test_torch_public6.py; each file names its repository, path and license), called
as their models call them: each verifies clean and the spec `extract` writes conforms to it
with no flag, and a one-edit bug planted in some of them is flagged with its code at its
line."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("einops")

from shapecheck.loader import check_text  # noqa: E402
from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "torch"

CLEAN = [
    "public/whisper_attention.py:make",          # SDPA, is_causal from a traced size (was SC601)
    "public/whisper_attention.py:make_manual",   # (q * s) @ (k * s).T, mask[:n_ctx, :n_ctx]
    "public/whisper_attention.py:make_cross",    # keys and values from xa
    "public/sd_cross_attention.py:make",         # einops, einsum, exists/default
    "public/sd_cross_attention.py:make_cross",   # a context of another width
    "public/sd_cross_attention.py:make_masked",  # repeat of a [b, j] mask, masked_fill_
    "public/vit_attention.py:make",              # chunk, rearrange, nn.Softmax
    "public/mingpt_attention.py:make",           # a CfgNode config (was four SC307 notes)
    "public/swin_window_attention.py:make",      # relative position bias table, no shift
    "public/swin_window_attention.py:make_shifted",  # mask [nW, N, N], view(B_ // nW, nW) (was SC201)
    "../whole_models/swin_block.py:make",          # the block: windows cut around the attention
    "../whole_models/swin_block.py:make_shifted",  # torch.roll, the mask built in __init__
    "public/sam_attention.py:make",              # [B, H, W, C], decomposed rel pos (was SC411)
    "public/sam_attention.py:make_interpolated",  # F.interpolate of the tables (was SC602)
    "public2/dinov2_attention.py:make", "public2/dinov2_attention.py:make_causal",
    "public2/dinov2_attention.py:make_memeff",
    "public2/perceiver_attention.py:make",
    "public2/litgpt_attention.py:make", "public2/litgpt_attention.py:make_mha",
    "public2/litgpt_attention.py:make_softcap", "public2/litgpt_attention.py:make_softcap_mqa",
    "public2/clip_attention.py:make", "public2/clip_attention.py:make_pool",
    "public2/esm_attention.py:make", "public2/esm_attention.py:make_esm1b",
    "public3/gemma_attention.py:make",          # index_copy_ into the cache it is given (was SC602)
    "public3/gemma_attention.py:make_gemma2",   # softcap, query_pre_attn_scalar, qk norm, local mask
    "public3/open_clip_attention.py:make",      # scaled cosine, LND, additive causal mask
    "public3/open_clip_attention.py:make_plain",
    "public3/swinv2_window_attention.py:make",  # torch.roll of the shifted windows (conform failed)
    "public3/swinv2_window_attention.py:make_unshifted",
    "public3/swinv2_window_attention.py:make_attention",  # cpb_mlp bias, cosine, clamped logit scale
    "public3/torchtune_attention.py:make",      # llama3's builder: GQA by expand, rope, is_causal
    "public3/torchtune_attention.py:make_packed",  # a boolean [b, s, s] mask, positions per sample
    "public3/beit_attention.py:make",           # relative position bias with the class token's
    "public3/beit_attention.py:make_shared",    # the model's shared bias; attn_head_dim (was SC404)
    "public3/mistral_attention.py:make",        # rolling cache: scatter_ at positions % window (SC602)
    "public3/mistral_attention.py:make_attention",  # window past the prompt; `if T > 1` prefill
    # PaLM registers its causal mask and rotary table as buffers inside forward: traced once,
    # its module's tensors put back after (was SC601: traced a second time at the same sizes)
    "public3/palm_attention.py:make",
    "public3/performer_attention.py:make",      # FAVOR+ linear attention: 1 / einsum (was SC602)
    "public3/performer_attention.py:make_masked",  # v.masked_fill_(~mask) of a padding mask
    "public4/x_transformers_attention.py:make",  # rotary freqs [T, 32] passed in (free size S)
    "public4/x_transformers_attention.py:make_masked",  # pad_at_dim of a bool mask (SC602 ~)
    "public4/x_transformers_attention.py:make_qk_norm",  # l2norm, a learned scale of 10
    "public4/x_transformers_attention.py:make_cross",  # context, context_mask
    "public4/x_transformers_attention.py:make_flash",  # SDPA is_causal
    "public4/x_transformers_attention.py:make_gqa",  # K and V tiled alike (was SC414)
    "public4/diffusers_attention.py:make",          # AttnProcessor2_0, self-attention
    "public4/diffusers_attention.py:make_cross",    # the UNet's [B, 1, S] bias of -10000.0
    "public4/diffusers_attention.py:make_classic",  # baddbmm alpha=scale (was a number)
    "public4/diffusers_attention.py:make_vae",      # [B, C, H, W], group_norm (was SC602)
    "public4/diffusers_attention.py:make_vae_classic",
    "public4/olmo_attention.py:make",            # rotary in a dict cache (conform failed)
    "public4/olmo_attention.py:make_clip_qkv",   # clamp_, GQA by repeat_interleave
    "public4/olmo_attention.py:make_masked",     # cached causal bias + padding bias
    "public4/olmo_attention.py:make_qk_norm",
    "public4/detr_attention.py:make",            # nn.MultiheadAttention [HW, B, C], key padding
    "public4/detr_attention.py:make_pre",
    "public4/detr_attention.py:make_decoder",    # queries' self- and cross-attention
    "public4/torchvision_vit_attention.py:make",  # nn.MultiheadAttention, batch_first
    "public4/torchvision_vit_attention.py:make_encoder",
    "public4/flash_attn_mha.py:make",            # packed qkv, additive triu bias
    "public4/flash_attn_mha.py:make_padded",     # additive -10000.0 padding bias
    "public4/flash_attn_mha.py:make_gqa",        # repeat "(hkv g)"
    "public4/flash_attn_mha.py:make_cross",
    "public4/audiocraft_attention.py:make",      # where(valid, zeros([]), full([], -inf))
    "public4/audiocraft_attention.py:make_cross",  # (was a false SC410, conform failed)
    "public4/audiocraft_attention.py:make_torch_mha",  # nn.MultiheadAttention, that bias
    "public5/timm_attention.py:make",             # fused SDPA
    "public5/timm_attention.py:make_manual",      # fused_attn off: q * scale @ k.T
    "public5/timm_attention.py:make_qk_norm",     # LayerNorm of each head's q and k
    "public5/timm_attention.py:make_causal",      # new_full((N, N), -inf).triu_(1) (was SC602)
    "public5/timm_attention.py:make_window_shifted",  # Swin's windows, bias by index, mask
    "public5/timm_attention.py:make_swin",        # the block: partition, reverse (static)
    "public5/timm_attention.py:make_swin_shifted",  # torch.roll, the -100.0 mask buffer
    "public5/fairseq_attention.py:make",          # [T, B, C]: F.multi_head_attention_forward
    "public5/fairseq_attention.py:make_onnx",     # its own bmm path, [B, S] padding (was static)
    "public5/fairseq_attention.py:make_onnx_causal",  # the decoder's future mask
    "public5/fairseq_attention.py:make_decoder_step",  # prev_key/value in incremental_state
    "public5/fairseq_attention.py:make_cross",    # encoder_out of kdim=vdim=40
    "public5/wenet_attention.py:make",            # [B, 1, T] mask: -inf, then 0.0
    "public5/wenet_attention.py:make_decoder",    # pad & subsequent_mask, [B, L, L]
    "public5/wenet_attention.py:make_gqa",        # n_kv_head by unsqueeze/expand/reshape
    "public5/wenet_attention.py:make_sdpa",
    "public5/wenet_attention.py:make_rel",        # Conformer: pos_bias_u/v, linear_pos
    "public5/wenet_attention.py:make_chunk",      # streaming cache, mask cut (was SC317)
    "public5/vitdet_attention.py:make",           # decomposed rel pos, global block
    "public5/vitdet_attention.py:make_window",    # padded windows, unpartition
    "public5/vitdet_attention.py:make_resized",   # tables interpolated 11 -> 15 (was SC602)
]

BUGS = [
    ("public/vit_attention_bug.py:make", "SC402", 39),           # nn.Softmax(dim = -2)
    ("public/mingpt_attention_bug.py:make", "SC408", 52),        # bias[...] == 1: mask inverted
    ("public/whisper_attention_bug.py:make_manual", "SC404", 80),  # ** -0.5 on q and on k
    ("public2/bugs/perceiver_softmax_axis.py:make", "SC402", 66),  # softmax over the queries
    ("public2/bugs/litgpt_scale_width.py:make", "SC404", 268),  # 1/sqrt(n_embd), not head_size
    ("public2/bugs/esm_scale_width.py:make", "SC404", 330),  # embed_dim**-0.5, before the rotary
    ("public3/bugs/gemma_softmax_axis.py:make", "SC402", 242),       # softmax over the queries
    ("public3/bugs/mistral_scale_width.py:make", "SC404", 145),      # args.dim**-0.5, used at 145
    ("public3/bugs/open_clip_unscaled.py:make_plain", "SC405", 90),  # `q = q`: the scale left out
    ("public4/bugs/x_transformers_softmax_axis.py:make", "SC402", 424),  # attn_fn(dots, dim=-2)
    ("public4/bugs/diffusers_scale_width.py:make_classic", "SC404", 438),  # query_dim**-0.5,
    # set at 156, used by baddbmm at 438
    ("public4/bugs/flash_attn_unscaled.py:make_padded", "SC405", 79),  # `k`, not k * scale
    ("public5/bugs/timm_softmax_axis.py:make_manual", "SC402", 196),  # softmax(dim=-2)
    ("public5/bugs/timm_causal_inverted.py:make_causal", "SC408", 114),  # tril_(-1) of -inf
    ("public5/bugs/fairseq_scale_width.py:make_onnx", "SC404", 430),  # embed_dim**-0.5,
    # set at 168, used by `q *= self.scaling` at 430
]

#: torch.export cannot trace these: (target, torch's reason)
UNTRACEABLE = [
    # torchtune keeps a second cache for export (torchtune/modules/_export/kv_cache.py)
    ("public3/torchtune_attention.py:make_cached",
     "KVCache.update's `assert (self.cache_pos[0] + seq_len) <= self.k_cache.shape[2]` reads "
     "a tensor as a bool: torch.export 'Could not guard on data-dependent expression "
     "Eq(u0, 1)'"),
]


def _found(target: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(str(DATA / target)) for d in r.diagnostics]


@pytest.mark.slow  # a few seconds each: torch.export, a retrace at sizes apart
@pytest.mark.parametrize("target", CLEAN)
def test_public_module_verifies_clean(target: str) -> None:
    assert _found(target) == []


@pytest.mark.slow
@pytest.mark.parametrize("target", CLEAN)
def test_public_module_conforms_with_no_flag(target: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # the two commands as a user runs them, in this process: torch is imported once for
    # the whole corpus, not twice per module (about 6 s of each of ~60 targets in CI)
    spec = tmp_path / "spec.attn"
    path = str(DATA / target)
    code, out = _command(capsys, "extract", path, "-o", str(spec))
    assert code == 0, out
    code, out = _command(capsys, "conform", str(spec), path)
    assert code == 0, out
    assert "conforms" in out


def _command(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from shapecheck.cli import main

    try:
        main(list(args))
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 0 if exit.code is None else 1
    else:
        code = 0
    captured = capsys.readouterr()
    return code, captured.out + captured.err


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


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_size_torch_pins_by_an_unsolved_guard_is_traced_static() -> None:
    # CLIP's AttentionPool2d: `H*W + 1` must equal its positional table's length, a guard
    # torch records but neither solves nor keeps; the symbolic trace claimed every map size
    # and the broadcast read as a mismatch (SC303), now the pool is traced as it runs
    assert _found("public2/clip_attention.py:make_pool") == []


def test_a_size_split_by_another_is_their_product_not_a_pinned_size() -> None:
    # Swin's attn.view(B_ // nW, nW, ...): torch's guards hold at every multiple (and
    # Max(1, n) == n at every size), so the trace stays symbolic (traced static, the scale
    # by the head width read as a constant: a false SC404)
    assert _found("public/swin_window_attention.py:make_shifted") == []


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_sizes_apart_that_coincide_in_a_derived_size_are_not_written() -> None:
    # litgpt, one key/value head: retraced at heads=5, head_size=7 the qkv width
    # (5 + 2) * 7 read as head_size**2 and the written spec did not verify; the factory's
    # own sizes are kept instead
    spec = extract(str(DATA / "public2/litgpt_attention.py:make_softcap_mqa")).text
    program = check_text(spec, {}, ignore=frozenset({"SC401"}), infer=False)
    assert [d.code for d in program.diagnostics if d.is_error] == []


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_queries_scaled_before_rotary_keep_their_scale() -> None:
    # ESM: `q *= self.scaling` then the rotary transform; the scale was lost through
    # `q * cos + rotate_half(q) * sin` and a false SC405 said the scores were unscaled
    assert _found("public2/esm_attention.py:make") == []
