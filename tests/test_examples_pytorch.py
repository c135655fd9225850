"""The examples written with PyTorch's spellings (issue 21), run on both backends and
compared with NumPy written independently, with loops over the batch and the heads, the
way the reference implementations compute them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shapecheck.api import check_path
from shapecheck.backend import compile_spec

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RNG = np.random.default_rng(2121)


def _softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("name", ["kv_cache_write", "nanogpt"])
def test_the_example_verifies_clean(name: str) -> None:
    assert check_path(EXAMPLES / f"{name}.attn").diagnostics == []


def _llama_step(x, cache_k, cache_v, w, start, heads):
    """llama/model.py's Attention.forward for one batch element at a time."""
    cache_k, cache_v = cache_k.copy(), cache_v.copy()
    batch, seqlen, _ = x.shape
    head_dim = w["wq"].shape[1] // heads
    out = np.zeros((batch, seqlen, w["wo"].shape[1]))
    for b in range(batch):
        xq = (x[b] @ w["wq"]).reshape(seqlen, heads, head_dim)
        cache_k[b, start:start + seqlen] = (x[b] @ w["wk"]).reshape(seqlen, heads, head_dim)
        cache_v[b, start:start + seqlen] = (x[b] @ w["wv"]).reshape(seqlen, heads, head_dim)
        heads_out = []
        for h in range(heads):
            keys = cache_k[b, :start + seqlen, h]
            values = cache_v[b, :start + seqlen, h]
            scores = xq[:, h] @ keys.T / np.sqrt(head_dim)
            mask = np.triu(np.full((seqlen, seqlen), -np.inf), k=1)
            scores = scores + np.hstack([np.zeros((seqlen, start)), mask])
            heads_out.append(_softmax(scores) @ values)
        out[b] = np.concatenate(heads_out, axis=-1) @ w["wo"]
    return out, cache_k, cache_v


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("start, seqlen", [(1, 4), (3, 2), (5, 1)])  # dims are positive
def test_llama_with_a_written_kv_cache_equals_numpy(backend: str, start: int, seqlen: int) -> None:
    batch, max_len, heads, head_dim = 2, 7, 2, 3
    dim = heads * head_dim
    x = RNG.standard_normal((batch, seqlen, dim))
    cache_k = RNG.standard_normal((batch, max_len, heads, head_dim))
    cache_v = RNG.standard_normal((batch, max_len, heads, head_dim))
    w = {name: RNG.standard_normal((dim, dim)) / np.sqrt(dim) for name in ("wq", "wk", "wv", "wo")}
    before = cache_k.copy()
    spec = compile_spec(EXAMPLES / "kv_cache_write.attn", backend=backend,
                        dims={"B": batch, "S": seqlen, "P": start, "M": max_len, "H": heads,
                              "hd": head_dim})
    out = spec.run({"x": x, "cache_k": cache_k, "cache_v": cache_v, **w},
                   check_invariants=True).outputs
    y, new_k, new_v = _llama_step(x, cache_k, cache_v, w, start, heads)
    np.testing.assert_allclose(np.asarray(out["y"]), y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(out["cache_k"]), new_k, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.asarray(out["cache_v"]), new_v, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(cache_k, before)  # the input is not written in place


def _nanogpt(x, c_attn, c_proj, n_head):
    batch, tokens, channels = x.shape
    hs = channels // n_head
    out = np.zeros_like(x)
    for b in range(batch):
        qkv = x[b] @ c_attn
        heads = []
        for h in range(n_head):
            q = qkv[:, h * hs:(h + 1) * hs]
            k = qkv[:, channels + h * hs:channels + (h + 1) * hs]
            v = qkv[:, 2 * channels + h * hs:2 * channels + (h + 1) * hs]
            att = q @ k.T / np.sqrt(hs)
            att[np.triu_indices(tokens, 1)] = -np.inf
            heads.append(_softmax(att) @ v)
        out[b] = np.concatenate(heads, axis=-1) @ c_proj
    return out


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_nanogpt_with_rebound_names_equals_numpy(backend: str) -> None:
    batch, tokens, n_head, hs = 2, 5, 3, 2
    channels = n_head * hs
    x = RNG.standard_normal((batch, tokens, channels))
    c_attn = RNG.standard_normal((channels, 3 * channels)) / np.sqrt(channels)
    c_proj = RNG.standard_normal((channels, channels)) / np.sqrt(channels)
    spec = compile_spec(EXAMPLES / "nanogpt.attn", backend=backend,
                        dims={"B": batch, "T": tokens, "n_head": n_head, "hs": hs})
    out = spec.run({"x": x, "c_attn": c_attn, "c_proj": c_proj}, check_invariants=True).outputs
    np.testing.assert_allclose(np.asarray(out["y"]), _nanogpt(x, c_attn, c_proj, n_head),
                               rtol=1e-10, atol=1e-12)
