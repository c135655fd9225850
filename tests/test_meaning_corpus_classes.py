"""A second, independent set of planted bugs on the spec corpus (issue 31): for each of
the transcriptions of tests/meaning_corpus/, every bug class of docs/bugs.md that applies
to it, written the way a person gets it wrong and spelled otherwise than the bugs of
tests/test_meaning_corpus.py (a scale by the sequence or the heads, `/ d`, the scale
twice; a softmax over the heads; a triangle that hides the diagonal; a mask added to the
probabilities; the weights transposed inside an einsum; a bias after the softmax...).

Each bug is (transcription, class, old, new, code): `old` must occur, the edit is made
once, the mutant must compute other numbers than the original (tests/test_meaning_corpus
_classes: `test_each_bug_changes_the_numbers`), and it must give exactly the warning
`code`, at a line the edit wrote (the diagnostic's or one of its notes'). The classes whose
bug only a stated convention decides (an input mask inverted, a window's edge) are planted
on the transcription with the convention stated (STATED), which must itself be clean.
A bug no diagnostic can truly see is in UNSEEN with why, and must stay silent (no false
claim about it).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest

from shapecheck.api import check_text
from shapecheck.backend import compile_spec

CORPUS = Path(__file__).parent / "meaning_corpus"

# A convention stated on a transcription: the declaration as the original writes it, and as
# stated (docs/language.md §10.3).
STATED: dict[str, tuple[str, str]] = {
    "bert": ("input attention_mask: [B, N]", "input attention_mask: [B, N] keep"),
    "t5": ("input attention_mask: [B, M]", "input attention_mask: [B, M] keep"),
    "t5_encoder": ("input attention_mask: [B, N]", "input attention_mask: [B, N] keep"),
    "mistral": ("dim B, T, Hkv, G, h, W", "dim B, T, Hkv, G, h\ndim W window inclusive"),
    "gemma3": ("dim B, T, Hkv, G, h, qs, W", "dim B, T, Hkv, G, h, qs\ndim W window exclusive"),
}

SCALE, SOFTMAX, MASK_T, MASK_INV, MASK_Q, MASK_AFTER = (
    "scale", "softmax_axis", "mask_transposed", "mask_inverted", "mask_query_axis",
    "mask_after_softmax")
TRIANGLE, ALIGN, TILED, ROTARY, HEADS, WINDOWS, PTV, KV_ORDER, CROSS, BIAS_T, BIAS_AFTER, BATCH = (
    "causal_triangle", "causal_alignment", "kv_tiled", "rotary", "heads_transpose",
    "windows_permute", "pt_v", "kv_order", "cross_qk", "bias_transposed", "bias_after_softmax",
    "batch_axis")
INPUT_MASK, WINDOW_EDGE = "input_mask_inverted (convention)", "window_edge (convention)"

Bug = tuple[str, str, str, str, "str | tuple[str, ...]"]

BUGS: list[Bug] = [
    # nanoGPT
    ("nanogpt", SCALE, "* (1.0 / sqrt(hs))", "* (1.0 / sqrt(T))", "SC404"),
    ("nanogpt", SCALE, "* (1.0 / sqrt(hs))", "* (1.0 / hs)", "SC404"),
    ("nanogpt", SCALE, "* (1.0 / sqrt(hs))", "* (1.0 / sqrt(hs)) / sqrt(hs)", "SC404"),
    ("nanogpt", SOFTMAX, "softmax(att_masked, dim=-1)", "softmax(att_masked, dim=1)", "SC402"),
    # the transposed 0/1 triangle hidden where it is 0 keeps each query's diagonal and future
    ("nanogpt", MASK_T, "where(bias[:, :, :T, :T] == 0", "where(transpose(bias[:, :, :T, :T], [0, 1, 3, 2]) == 0",
     "SC408"),
    ("nanogpt", MASK_INV, "bias[:, :, :T, :T] == 0, -inf", "bias[:, :, :T, :T] != 0, -inf", "SC408"),
    ("nanogpt", TRIANGLE, "tril(ones([L, L]))", "tril(ones([L, L]), -1)", "SC408"),
    ("nanogpt", MASK_AFTER, "att_masked = where(bias[:, :, :T, :T] == 0, -inf, att)\n"
     "att_weights = dropout(softmax(att_masked, dim=-1), 0.1)",
     "att_weights = dropout(where(bias[:, :, :T, :T] == 0, 0.0, softmax(att, dim=-1)), 0.1)", "SC406"),
    ("nanogpt", HEADS, "q = transpose(reshape(qkv[:, :, :C], [B, T, nh, hs]), [0, 2, 1, 3])",
     "q = reshape(qkv[:, :, :C], [B, nh, T, hs])", "SC411"),
    ("nanogpt", HEADS, "reshape(transpose(y, [0, 2, 1, 3]), [B, T, C])",
     "reshape(transpose(y, [0, 1, 3, 2]), [B, T, C])", "SC411"),
    ("nanogpt", PTV, "y = att_weights @ v", 'y = einsum("bhqk,bhqd->bhkd", att_weights, v)', "SC402"),
    # Llama 3 with its cache
    ("llama", SCALE, "/ sqrt(hd)", "/ sqrt(H)", "SC404"),
    ("llama", SCALE, "/ sqrt(hd)", "/ hd", "SC404"),
    ("llama", SCALE, "/ sqrt(hd)", "/ sqrt(hd) / sqrt(hd)", "SC404"),
    ("llama", SCALE, "/ sqrt(hd)", "/ sqrt(P + T)", "SC404"),
    ("llama", SOFTMAX, "softmax(scores + mask, dim=-1)", "softmax(scores + mask, dim=1)", "SC402"),
    ("llama", ALIGN, "mask = concat([zeros([T, P]), triu(ones([T, T]) * -inf, 1)], axis=1)",
     "mask = triu(ones([T, P + T]) * -inf, 1)", "SC417"),
    ("llama", ALIGN, "mask = concat([zeros([T, P]), triu(ones([T, T]) * -inf, 1)], axis=1)",
     "mask = where(tril(ones([T, P + T])) == 1, 0.0, -inf)", "SC417"),
    ("llama", ALIGN, "mask = concat([zeros([T, P]), triu(ones([T, T]) * -inf, 1)], axis=1)",
     "mask = where(arange(P + T)[None, :] > arange(T)[:, None], -inf, 0.0)", "SC417"),
    ("llama", TRIANGLE, "triu(ones([T, T]) * -inf, 1)", "tril(ones([T, T]) * -inf, -1)", "SC408"),
    # `>=` for `>` in the cache mask's causal block: each new query loses its own key
    ("llama", TRIANGLE, "triu(ones([T, T]) * -inf, 1)", "triu(ones([T, T]) * -inf, 0)", "SC408"),
    ("llama", MASK_AFTER, "probs = softmax(scores + mask, dim=-1)", "probs = softmax(scores, dim=-1) + mask",
     "SC406"),
    ("llama", TILED, "values_rep = reshape(repeat(values[:, :, :, None, :], G, axis=3), [B, P + T, Hkv * G, hd])",
     "values_rep = reshape(repeat(values[:, :, None, :, :], G, axis=2), [B, P + T, Hkv * G, hd])", "SC414"),
    ("llama", ROTARY, "keys = concat([cache_k, xk_rot], axis=1)", "keys = concat([cache_k, xk], axis=1)", "SC418"),
    ("llama", ROTARY, "q = transpose(xq_rot, [0, 2, 1, 3])", "q = transpose(xq, [0, 2, 1, 3])", "SC418"),
    ("llama", HEADS, "q = transpose(xq_rot, [0, 2, 1, 3])", "q = reshape(xq_rot, [B, H, T, hd])", "SC411"),
    ("llama", HEADS, "reshape(transpose(o, [0, 2, 1, 3]), [B, T, H * hd])", "reshape(o, [B, T, H * hd])", "SC411"),
    ("llama", KV_ORDER, "values = concat([cache_v, xv], axis=1)", "values = concat([xv, cache_v], axis=1)", "SC419"),
    ("llama", KV_ORDER, "keys = concat([cache_k, xk_rot], axis=1)", "keys = concat([xk_rot, cache_k], axis=1)", "SC419"),
    # Mistral's reference
    ("mistral", SCALE, "* hd ** -0.5", "* T ** -0.5", "SC404"),
    ("mistral", SCALE, "* hd ** -0.5", "* D ** -0.5", "SC404"),
    ("mistral", SCALE, "* hd ** -0.5", "* hd ** -1", "SC404"),
    ("mistral", SCALE, "* hd ** -0.5", "* hd ** -0.5 * hd ** -0.5", "SC404"),
    ("mistral", SOFTMAX, "softmax(scores + mask[None, None, :, :], dim=-1)",
     "softmax(scores + mask[None, None, :, :], dim=2)", "SC402"),
    ("mistral", MASK_T, "mask = log(triu(tril(ones([T, T])), -W))", "mask = log(triu(tril(ones([T, T])), -W).T)",
     "SC407"),
    ("mistral", MASK_AFTER, "probs = softmax(scores + mask[None, None, :, :], dim=-1)",
     "probs = softmax(scores, dim=-1) + mask[None, None, :, :]", "SC406"),
    ("mistral", TILED, "key = repeat(xk_rot, G, axis=2)",
     "key = reshape(repeat(xk_rot[:, :, None, :, :], G, axis=2), [B, T, H, hd])", "SC414"),
    ("mistral", ROTARY, "value = repeat(xv, G, axis=2)",
     "value = repeat(reshape(stack([xv[..., ::2] * c - xv[..., 1::2] * s, xv[..., ::2] * s + xv[..., 1::2] * c], "
     "axis=-1), [B, T, Hkv, hd]), G, axis=2)", "SC413"),
    ("mistral", ROTARY, "key = repeat(xk_rot, G, axis=2)", "key = repeat(xk, G, axis=2)", "SC418"),
    # V built from the keys' (rotated) tensor: a note at V's read of it
    ("mistral", ROTARY, "v = transpose(value, [0, 2, 1, 3])", "v = transpose(key, [0, 2, 1, 3])", "SC413"),
    ("mistral", HEADS, "k = transpose(key, [0, 2, 1, 3])", "k = reshape(key, [B, H, T, hd])", "SC411"),
    ("mistral", PTV, "o = probs @ v", "o = transpose(probs, [0, 1, 3, 2]) @ v", "SC402"),
    # Gemma 2
    ("gemma2", SOFTMAX, "full_mask[None, None, :T, :T], dim=-1)", "full_mask[None, None, :T, :T], dim=-3)",
     "SC402"),
    ("gemma2", MASK_AFTER, "probs = softmax(capped + full_mask[None, None, :T, :T], dim=-1)",
     "probs = softmax(capped, dim=-1) + full_mask[None, None, :T, :T]", "SC406"),
    ("gemma2", MASK_T, "capped + full_mask[None, None, :T, :T]", "capped + transpose(full_mask, [1, 0])[None, None, :T, :T]",
     "SC408"),
    ("gemma2", TRIANGLE, "triu(ones([L, L]) * -2.3819763e38, 1)", "triu(ones([L, L]) * -2.3819763e38)", "SC408"),
    ("gemma2", TILED, "key = repeat(xk_rot, G, axis=2)",
     "key = reshape(repeat(xk_rot[:, :, None], G, axis=2), [B, T, H, hd])", "SC414"),
    ("gemma2", ROTARY, "key = repeat(xk_rot, G, axis=2)", "key = repeat(xk, G, axis=2)", "SC418"),
    ("gemma2", HEADS, "v = transpose(value, [0, 2, 1, 3])", "v = reshape(value, [B, H, T, hd])", "SC411"),
    ("gemma2", PTV, "o = probs @ v", 'o = einsum("bhqk,bhqd->bhkd", probs, v)', "SC402"),
    # Gemma 3, a local layer
    ("gemma3", SCALE, "* qs ** -0.5", "* T ** -0.5", ("SC401", "SC404")),  # and `qs` unused
    ("gemma3", SOFTMAX, "-3.4028235e38), dim=-1)", "-3.4028235e38), dim=2)", "SC402"),
    ("gemma3", MASK_T, "where(local, scores", "where(transpose(local, [1, 0]), scores", "SC407"),
    ("gemma3", MASK_INV, "where(local, scores", "where(~local, scores", "SC408"),
    ("gemma3", TRIANGLE, "local = (j <= i)", "local = (j < i)", "SC408"),
    ("gemma3", TILED, "k = transpose(repeat(xk_rot, G, axis=2), [0, 2, 1, 3])",
     "k = transpose(reshape(repeat(xk_rot[:, :, None], G, axis=2), [B, T, H, hd]), [0, 2, 1, 3])", "SC414"),
    ("gemma3", ROTARY, "q = transpose(xq_rot, [0, 2, 1, 3])", "q = transpose(xq, [0, 2, 1, 3])", "SC418"),
    ("gemma3", HEADS, "reshape(transpose(o, [0, 2, 1, 3]), [B, T, H * hd])", "reshape(o, [B, T, H * hd])", "SC411"),
    ("gemma3", PTV, "o = probs @ v", "o = transpose(probs, [0, 1, 3, 2]) @ v", "SC402"),
    # DeepSeek-V3 MLA, naive
    ("deepseek_mla_naive", SCALE, "* (dn + dr) ** -0.5", "* (dn + dr) ** -1", "SC404"),
    ("deepseek_mla_naive", SCALE, "* (dn + dr) ** -0.5", "* H ** -0.5", "SC404"),
    ("deepseek_mla_naive", SCALE, "* (dn + dr) ** -0.5", "* dr ** -0.5", "SC404"),
    ("deepseek_mla_naive", SOFTMAX, "mask[:, None, :], dim=-1)", "mask[:, None, :], dim=-2)", "SC402"),
    ("deepseek_mla_naive", ROTARY, "repeat(k_rot[:, :, None, :], H, axis=2)", "repeat(k_pe[:, :, None, :], H, axis=2)",
     "SC418"),
    ("deepseek_mla_naive", MASK_AFTER, "probs = softmax(scores + mask[:, None, :], dim=-1)",
     "probs = softmax(scores, dim=-1) + mask[:, None, :]", "SC406"),
    ("deepseek_mla_naive", PTV, 'o = einsum("bsht,bthd->bshd", probs, v)', 'o = einsum("bsht,bshd->bthd", probs, v)',
     "SC402"),
    ("deepseek_mla_naive", TRIANGLE, "triu(ones([S, S]) * -inf, 1)", "triu(ones([S, S]) * -inf)", "SC408"),
    # DeepSeek-V3 MLA, absorbed
    ("deepseek_mla_absorb", SCALE, "* (dn + dr) ** -0.5", "* S ** -0.5", "SC404"),
    ("deepseek_mla_absorb", SOFTMAX, "mask[:, None, :], dim=-1)", "mask[:, None, :], dim=1)", "SC402"),
    ("deepseek_mla_absorb", ROTARY, '"bshr,btr->bsht", q_rot, k_rot)', '"bshr,btr->bsht", q_rot, k_pe)', "SC418"),
    ("deepseek_mla_absorb", PTV, 'o_lat = einsum("bsht,btc->bshc", probs, kv)',
     'o_lat = einsum("bsht,bsc->bthc", probs, kv)', "SC402"),
    ("deepseek_mla_absorb", MASK_AFTER, "probs = softmax(scores + mask[:, None, :], dim=-1)",
     "probs = softmax(scores, dim=-1) + mask[:, None, :]", "SC406"),
    # T5, cross-attention
    ("t5", SCALE, "scores = q @ transpose(k, [0, 1, 3, 2])", "scores = q @ transpose(k, [0, 1, 3, 2]) / sqrt(M)",
     "SC404"),
    ("t5", SOFTMAX, "(position_bias + extended), dim=-1)", "(position_bias + extended), dim=-2)", "SC402"),
    ("t5", BIAS_AFTER, "weights = dropout(softmax(scores + (position_bias + extended), dim=-1), 0.1)",
     "weights = dropout(softmax(scores + extended, dim=-1) + position_bias, 0.1)", "SC406"),
    ("t5", HEADS, "reshape(transpose(o, [0, 2, 1, 3]), [B, N, H * dk])", "reshape(o, [B, N, H * dk])", "SC411"),
    # T5's encoder
    ("t5_encoder", SOFTMAX, "+ extended, dim=-1)", "+ extended, dim=1)", "SC402"),
    ("t5_encoder", BIAS_AFTER, "weights = softmax(q @ transpose(k, [0, 1, 3, 2]) + position_bias + extended, dim=-1)",
     "weights = softmax(q @ transpose(k, [0, 1, 3, 2]) + extended, dim=-1) + position_bias", "SC406"),
    ("t5_encoder", PTV, "transpose(weights @ v", "transpose(transpose(weights, [0, 1, 3, 2]) @ v", "SC402"),
    ("t5_encoder", HEADS, "k = transpose(reshape(hidden @ k_w, [B, N, H, dk]), [0, 2, 1, 3])",
     "k = reshape(hidden @ k_w, [B, H, N, dk])", "SC411"),
    ("t5_encoder", MASK_Q, "+ position_bias + extended", "+ position_bias + transpose(extended, [0, 1, 3, 2])",
     "SC412"),
    # Whisper
    ("whisper", SCALE, "scale = d ** -0.25", "scale = d ** -0.5", "SC404"),
    ("whisper", SCALE, "scale = d ** -0.25", "scale = D ** -0.25", "SC404"),
    ("whisper", SCALE, "scale = d ** -0.25", "scale = H ** -0.25", "SC404"),
    ("whisper", SOFTMAX, "w = softmax(qk, dim=-1)", "w = softmax(qk, dim=2)", "SC402"),
    ("whisper", MASK_AFTER, "qk = q @ k + mask[:T, :T]\nw = softmax(qk, dim=-1)",
     "qk = q @ k\nw = softmax(qk, dim=-1) + mask[:T, :T]", "SC406"),
    ("whisper", TRIANGLE, "mask = triu(ones([L, L]) * -inf, 1)", "mask = triu(ones([L, L]) * -inf)", "SC408"),
    ("whisper", HEADS, "k = transpose(reshape(x @ Wk, [B, T, H, d]), [0, 2, 3, 1]) * scale",
     "k = reshape(x @ Wk, [B, H, d, T]) * scale", "SC411"),
    ("whisper", HEADS, "reshape(transpose(w @ v, [0, 2, 1, 3]), [B, T, D])", "reshape(w @ v, [B, T, D])", "SC411"),
    ("whisper", PTV, "transpose(w @ v", "transpose(transpose(w, [0, 1, 3, 2]) @ v", "SC402"),
    # BERT
    ("bert", SCALE, "/ sqrt(hs)", "/ sqrt(H)", "SC404"),
    ("bert", SCALE, "/ sqrt(hs)", "/ hs", "SC404"),
    ("bert", SCALE, "/ sqrt(hs)", "/ sqrt(N)", "SC404"),
    ("bert", SOFTMAX, "softmax(scores + extended, dim=-1)", "softmax(scores + extended, dim=1)", "SC402"),
    ("bert", PTV, "probs @ v", "transpose(probs, [0, 1, 3, 2]) @ v", "SC402"),
    ("bert", HEADS, "v = transpose(reshape(hidden @ Wv, [B, N, H, hs]), [0, 2, 1, 3])",
     "v = reshape(hidden @ Wv, [B, H, N, hs])", "SC411"),
    # the merge's transpose written on the line before it, with the wrong axes
    ("bert", HEADS, "context = transpose(probs @ v, [0, 2, 1, 3])", "context = transpose(probs @ v, [0, 1, 3, 2])",
     "SC411"),
    ("bert", MASK_AFTER, "dropout(softmax(scores + extended, dim=-1), 0.1)",
     "dropout(softmax(scores, dim=-1) + extended, 0.1)", "SC406"),
    ("bert", MASK_Q, "softmax(scores + extended", "softmax(scores + transpose(extended, [0, 1, 3, 2])", "SC412"),
    # ViT
    ("vit", WINDOWS, "[0, 2, 4, 3, 5, 1]", "[0, 2, 3, 4, 5, 1]", "SC411"),
    ("vit", SCALE, "* dh ** -0.5", "* N ** -0.5", "SC404"),
    ("vit", SCALE, "* dh ** -0.5", "* H ** -0.5", "SC404"),
    ("vit", SCALE, "* dh ** -0.5", "/ dh", "SC404"),
    ("vit", SOFTMAX, "attn = softmax(dots, dim=-1)", "attn = softmax(dots, dim=1)", "SC402"),
    ("vit", PTV, "out_heads = attn @ v", 'out_heads = einsum("bhij,bhid->bhjd", attn, v)', "SC402"),
    ("vit", HEADS, "reshape(transpose(out_heads, [0, 2, 1, 3]), [B, N, D])", "reshape(out_heads, [B, N, D])",
     "SC411"),
    # Performer
    ("performer", TRIANGLE, "num = tril(A) @ V", "num = tril(A).T @ V", "SC407"),
    # PaLM
    ("palm", SCALE, "q_rot * d ** -0.5", "q_rot * D ** -0.5", "SC404"),
    ("palm", SCALE, "q_rot * d ** -0.5", "q_rot * N ** -0.5", "SC404"),
    ("palm", SCALE, "q_rot * d ** -0.5", "q_rot * d ** -1", "SC404"),
    ("palm", ROTARY, "q_rot * d ** -0.5, k_rot)", "q_rot * d ** -0.5, k)", "SC418"),
    ("palm", TRIANGLE, "causal = triu(ones([N, N]), 1) == 1", "causal = triu(ones([N, N])) == 1", "SC408"),
    # the future triangle kept: read as the causal mask transposed (either fix is right)
    ("palm", MASK_INV, "where(causal, -inf, sim)", "where(causal, sim, -inf)", "SC407"),
    ("palm", SOFTMAX, "-inf, sim), dim=-1)", "-inf, sim), dim=1)", "SC402"),
    ("palm", PTV, 'o = einsum("bhij,bjd->bhid", attn, v)', 'o = einsum("bhji,bjd->bhid", attn, v)', "SC402"),
    ("palm", HEADS, "reshape(transpose(o, [0, 2, 1, 3]), [B, N, H * d])", "reshape(o, [B, N, H * d])", "SC411"),
    ("palm", MASK_AFTER, "attn = softmax(where(causal, -inf, sim), dim=-1)",
     "attn = where(causal, 0.0, softmax(sim, dim=-1))", "SC406"),
    # flash-attention's reference
    ("flash_ref", SCALE, "q / sqrt(d)", "q / sqrt(Hkv * G)", "SC404"),
    ("flash_ref", SCALE, "q / sqrt(d)", "q / d", "SC404"),
    ("flash_ref", SCALE, "q / sqrt(d)", "q / sqrt(d) / sqrt(d)", "SC404"),
    ("flash_ref", SOFTMAX, "attention = softmax(masked, dim=-1)", "attention = softmax(masked, dim=1)", "SC402"),
    ("flash_ref", MASK_INV, "kpos > qpos + (Tk - Tq)", "kpos <= qpos + (Tk - Tq)", "SC408"),
    ("flash_ref", TILED, "vr = repeat(v, G, axis=2)", "vr = reshape(repeat(v[:, :, None], G, axis=2), [B, Tk, G * Hkv, d])",
     "SC414"),
]

# Bugs decided by a stated convention: planted on the transcription with STATED applied.
CONVENTION_BUGS: list[Bug] = [
    ("bert", INPUT_MASK, "(1.0 - attention_mask[:, None, None, :]) * -10000.0",
     "attention_mask[:, None, None, :] * -10000.0", "SC432"),
    ("t5_encoder", INPUT_MASK, "(1.0 - attention_mask[:, None, None, :]) * -3.4028235e38",
     "attention_mask[:, None, None, :] * -3.4028235e38", "SC432"),
    ("gemma3", WINDOW_EDGE, "(i - j < W)", "(i - j <= W)", "SC432"),
]


# Bugs no warning at the edited line can truly see (yet): (bug, the codes the mutant gets,
# why). Each must keep exactly these codes; none of them at a line the edit wrote.
ELSEWHERE: list[tuple[Bug, tuple[str, ...], str]] = [
    (("vit", BATCH, "[B, N, H, dh]), [0, 2, 1, 3])\nk = transpose(reshape(qkv[..., D:2 * D], [B, N, H, dh]), "
      "[0, 2, 1, 3])\nv = transpose(reshape(qkv[..., 2 * D:], [B, N, H, dh]), [0, 2, 1, 3])",
      "[B, N, H, dh]), [2, 1, 0, 3])\nk = transpose(reshape(qkv[..., D:2 * D], [B, N, H, dh]), "
      "[2, 1, 0, 3])\nv = transpose(reshape(qkv[..., 2 * D:], [B, N, H, dh]), [2, 1, 0, 3])", ""),
     ("SC411",),
     "the attention over the batch is self-consistent until the heads are merged: SC411 at the "
     "merge (line 19). Which axis is the batch only its name says"),
    (("t5_encoder", BIAS_T, "+ position_bias + extended", "+ transpose(position_bias, [0, 1, 3, 2]) + extended", ""),
     (), "the bias is an input: which of its axes is the query's only the caller knows"),
    (("nanogpt", KV_ORDER, "qkv[:, :, C:2 * C], [B, T, nh, hs]), [0, 2, 1, 3])\nv = transpose(reshape(qkv[:, :, 2 * C:]",
      "qkv[:, :, 2 * C:], [B, T, nh, hs]), [0, 2, 1, 3])\nv = transpose(reshape(qkv[:, :, C:2 * C]", ""),
     (), "K and V read from each other's slice of the fused projection (`q, v, k = ...split`): "
     "the formula computes an attention with its weights relabelled; only trained weights say "
     "which slice is K"),
    (("gemma2", SCALE, "* qs ** -0.5", "* T ** -0.5", ""), ("SC401",),
     "the scale is not judged through a soft-cap (docs/language.md, issue 32); `qs` unused"),
    (("gemma2", SCALE, "* qs ** -0.5", "* H ** -0.5", ""), ("SC401",),
     "the same: soft-capped scores"),
]

# Convention bugs the convention checks do not reach (yet), with why; they stay silent.
CONVENTION_ELSEWHERE: list[tuple[Bug, str]] = [
    (("t5", INPUT_MASK, "(1.0 - attention_mask[:, None, None, :]) * -3.4028235e38",
      "attention_mask[:, None, None, :] * -3.4028235e38", ""),
     "the mask is added inside a bias (`scores + (position_bias + extended)`): the sum is a bias "
     "to the meaning pass, its mask is not followed"),
    (("mistral", WINDOW_EDGE, "triu(tril(ones([T, T])), -W)", "triu(tril(ones([T, T])), -W + 1)", ""),
     "an additive window (`log` of a 0/1 triangle) is not lifted to a function of positions"),
]


def source(name: str, stated: bool = False) -> str:
    text = (CORPUS / f"{name}.attn").read_text(encoding="utf-8")
    if stated:
        old, new = STATED[name]
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def planted(bug: Bug, stated: bool = False) -> tuple[str, set[int]]:
    """The mutant's text and the lines the edit wrote (1-based)."""
    name, _cls, old, new, _code = bug
    text = source(name, stated)
    assert old in text, old
    first = text[:text.index(old)].count("\n") + 1
    return text.replace(old, new, 1), set(range(first, first + new.count("\n") + 1))


def warnings(text: str) -> list[tuple[str, set[int]]]:
    """Each warning's code and its lines (the diagnostic's and its notes')."""
    return [(d.code, {d.span.line} | {n.span.line for n in d.notes if n.span})
            for d in check_text(text).diagnostics if d.severity.value != "note"]


def codes_of(code: str | tuple[str, ...]) -> list[str]:
    return sorted((code,) if isinstance(code, str) else code)


CASES = [(False, b) for b in BUGS] + [(True, b) for b in CONVENTION_BUGS]


def _id(case: tuple[bool, Bug]) -> str:
    stated, (name, cls, *_rest) = case
    return f"{name}-{cls.split()[0]}"


@pytest.mark.parametrize("name", sorted(STATED))
def test_the_stated_transcriptions_are_clean(name: str) -> None:
    assert warnings(source(name, stated=True)) == []


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_each_bug_is_flagged_at_its_line(case: tuple[bool, Bug]) -> None:
    stated, bug = case
    text, lines = planted(bug, stated)
    found = warnings(text)
    assert sorted(code for code, _ in found) == codes_of(bug[4]), text
    assert any(at & lines for _, at in found), (found, lines)


@pytest.mark.parametrize("case", ELSEWHERE, ids=[_id((False, c[0])) for c in ELSEWHERE])
def test_the_bugs_seen_elsewhere_keep_their_codes(case: tuple[Bug, tuple[str, ...], str]) -> None:
    bug, codes, _why = case
    text, lines = planted(bug)
    found = warnings(text)
    assert sorted(code for code, _ in found) == sorted(codes)
    assert not any(at & lines for _, at in found)


@pytest.mark.parametrize("case", CONVENTION_ELSEWHERE,
                         ids=[_id((True, c[0])) for c in CONVENTION_ELSEWHERE])
def test_the_conventions_not_reached_stay_silent(case: tuple[Bug, str]) -> None:
    assert warnings(planted(case[0], stated=True)[0]) == []


def sizes(text: str) -> dict[str, int]:
    """Distinct sizes for the free dims (a window narrower than the sequence)."""
    free = [name.strip().split()[0] for line in text.splitlines()
            if (m := re.match(r"dim ([^=#]*)$", line.strip()))
            for name in m.group(1).split(",")]
    bound = dict(zip(free, (2, 3, 5, 7, 11, 13, 17, 19, 23, 29)))
    if "W" in bound:
        bound["W"] = 2
    return bound


@functools.lru_cache(maxsize=None)
def outputs(text: str) -> dict[str, np.ndarray]:
    bound = sizes(text)
    arrays = {}
    if "attention_mask" in text:  # a padding mask of 0s and 1s, one key hidden
        mask = np.ones((bound["B"], bound.get("M", bound.get("N", 1))))
        mask[0, -1] = 0.0
        arrays["attention_mask"] = mask
    result = compile_spec(text, dims=bound, fused="off").run(arrays, seed=0)
    return {name: np.asarray(value) for name, value in result.outputs.items()}


ALL = CASES + [(False, c[0]) for c in ELSEWHERE] + [(True, c[0]) for c in CONVENTION_ELSEWHERE]


@pytest.mark.parametrize("case", ALL, ids=[_id(c) for c in ALL])
def test_each_bug_changes_the_numbers(case: tuple[bool, Bug]) -> None:
    """A mutant that computes the original's numbers at distinct sizes is no bug."""
    stated, bug = case
    before = outputs(source(bug[0], stated))
    after = outputs(planted(bug, stated)[0])
    assert not all(np.allclose(before[n], after[n], equal_nan=True) for n in before)
