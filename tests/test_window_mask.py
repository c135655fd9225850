"""`causal_mask(N, window=W)` against the two constructions people copy (issue 18, item 5).

Hugging Face's `sliding_window` (transformers' `sliding_window_causal_mask_function`:
`kv_idx <= q_idx` and `kv_idx > q_idx - sliding_window`) keeps the W most recent keys,
the query's own included: that is `window=W`. Mistral's reference implementation
(`one_file_ref.py`: `tril(ones)` then `triu(mask, diagonal=-sliding_window)`) lets W + 1
keys through: that is `window=W + 1`. Both backends, the materialised mask and the fused
attention, are compared with each construction.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapecheck

MASK = "dim N, W\noutput M = causal_mask(N, window=W)\n"
MASK_KV = "dim N, T, W\noutput M = causal_mask(N, T, window=W)\n"
ATTENTION = """dim N, d, W
input Q: [N, d]
input K: [N, d]
input V: [N, d]
S = where(causal_mask(N, window=W), Q @ K.T / sqrt(d), -inf)
P = softmax(S, axis=-1)
output O: [N, d] = P @ V
"""
SIZES = [(1, 1), (5, 1), (6, 2), (7, 3), (8, 8), (9, 20)]


def hugging_face(n: int, sliding_window: int) -> np.ndarray:
    """transformers.masking_utils: and_masks(sliding_window_overlay(w), causal_mask_function)."""
    q_idx = torch.arange(n)[:, None]
    kv_idx = torch.arange(n)[None, :]
    return ((kv_idx <= q_idx) & (kv_idx > q_idx - sliding_window)).numpy()


def mistral_reference(n: int, sliding_window: int) -> np.ndarray:
    """mistral-src one_file_ref.py: the banded causal mask, before its log."""
    mask = torch.full((n, n), fill_value=1)
    mask = torch.tril(mask, diagonal=0)
    mask = torch.triu(mask, diagonal=-sliding_window)
    return mask.numpy().astype(bool)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("n, w", SIZES)
def test_window_is_hugging_faces_sliding_window(backend, n, w):
    mask = shapecheck.compile_spec(MASK, dims={"N": n, "W": w}, backend=backend)()["M"]
    np.testing.assert_array_equal(np.asarray(mask), hugging_face(n, w))
    assert (np.asarray(mask).sum(axis=1) == np.minimum(np.arange(n) + 1, w)).all()


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("n, w", SIZES)
def test_mistrals_reference_is_window_plus_one(backend, n, w):
    mask = shapecheck.compile_spec(MASK, dims={"N": n, "W": w + 1}, backend=backend)()["M"]
    np.testing.assert_array_equal(np.asarray(mask), mistral_reference(n, w))
    if n > w + 1:
        assert not np.array_equal(mistral_reference(n, w), hugging_face(n, w))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_with_a_cache_the_window_is_aligned_bottom_right(backend):
    n, t, w = 3, 8, 4
    mask = np.asarray(shapecheck.compile_spec(MASK_KV, dims={"N": n, "T": t, "W": w},
                                              backend=backend)()["M"])
    q_idx = np.arange(n)[:, None] + (t - n)  # the new queries are the last positions
    kv_idx = np.arange(t)[None, :]
    np.testing.assert_array_equal(mask, (kv_idx <= q_idx) & (kv_idx > q_idx - w))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("fused", ["auto", "off"])
def test_fused_attention_sees_the_same_keys(backend, fused):
    n, d, w = 11, 4, 3
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
    run = shapecheck.compile_spec(ATTENTION, dims={"W": w}, backend=backend, fused=fused)
    out = np.asarray(run(Q=q, K=k, V=v)["O"])
    scores = np.where(hugging_face(n, w), q @ k.T / np.sqrt(d), -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, weights / weights.sum(axis=1, keepdims=True) @ v,
                               rtol=1e-10, atol=1e-12)


def test_transformers_own_mask_function_agrees():
    masking = pytest.importorskip("transformers.masking_utils")
    n, w = 9, 3
    function = masking.sliding_window_causal_mask_function(w)
    theirs = np.array([[bool(function(0, 0, torch.tensor(i), torch.tensor(j))) for j in range(n)]
                       for i in range(n)])
    mask = shapecheck.compile_spec(MASK, dims={"N": n, "W": w})()["M"]
    np.testing.assert_array_equal(mask, theirs)
