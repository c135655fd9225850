"""The examples of issue 10, run and compared with independent hand-written NumPy.

Each reference is written the way the method's own papers and reference code write it
(rotary embeddings with ``rotate_half`` / ``rotate_every_two`` and duplicated cos/sin
tables, ALiBi's slopes, a decode step as the last rows of full causal attention), with
loops over heads, never through the spec's formulas.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shapecheck.api import check_path
from shapecheck.backend import compile_spec

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NEW_EXAMPLES = ["rotary_half", "rotary_interleaved", "sliding_window", "kv_cache_decode",
                "alibi", "key_padding", "latent_attention"]


def _run(name: str, dims: dict[str, int], **arrays: np.ndarray) -> dict[str, np.ndarray]:
    spec = compile_spec(EXAMPLES / f"{name}.attn", dims=dims)
    return spec.run(arrays, check_invariants=True).outputs


def _normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape) / np.sqrt(shape[0] if len(shape) == 2 else 1)


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def _heads(x: np.ndarray, heads: int) -> list[np.ndarray]:
    """Head h owns columns h*d ... h*d+d-1 (the notes' layout)."""
    width = x.shape[-1] // heads
    return [x[..., h * width:(h + 1) * width] for h in range(heads)]


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
               bias: np.ndarray | float = 0.0) -> np.ndarray:
    scores = q @ k.T / np.sqrt(q.shape[-1]) + bias
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    return _softmax_rows(scores) @ v


def _rope_tables(positions: int, half: int) -> tuple[np.ndarray, np.ndarray]:
    """LLaMA's: inv_freq = 1 / 10000^(arange(0, d, 2) / d), freqs = outer(t, inv_freq)."""
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, 2 * half, 2) / (2 * half)))
    freqs = np.outer(np.arange(positions), inv_freq)  # [N, half]
    return np.cos(freqs), np.sin(freqs)


def rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def apply_rope_half(x: np.ndarray) -> np.ndarray:
    """x: [N, d]; as Hugging Face's apply_rotary_pos_emb."""
    cos, sin = _rope_tables(x.shape[0], x.shape[-1] // 2)
    cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
    return x * cos + rotate_half(x) * sin


def rotate_every_two(x: np.ndarray) -> np.ndarray:
    return np.stack([-x[..., 1::2], x[..., ::2]], axis=-1).reshape(x.shape)


def apply_rope_interleaved(x: np.ndarray) -> np.ndarray:
    """x: [N, d]; as GPT-J's apply_rotary_pos_emb (sin and cos repeated per pair)."""
    cos, sin = _rope_tables(x.shape[0], x.shape[-1] // 2)
    cos, sin = np.repeat(cos, 2, axis=-1), np.repeat(sin, 2, axis=-1)
    return x * cos + rotate_every_two(x) * sin


def _causal(queries: int, keys: int) -> np.ndarray:
    return np.array([[j <= i + keys - queries for j in range(keys)] for i in range(queries)])


def test_every_new_example_verifies():
    for name in NEW_EXAMPLES:
        program = check_path(EXAMPLES / f"{name}.attn")
        assert program.ok and not program.diagnostics, (name, program.diagnostics)


@pytest.mark.parametrize("name, rope", [("rotary_half", apply_rope_half),
                                        ("rotary_interleaved", apply_rope_interleaved)])
@pytest.mark.parametrize("n, heads, half", [(6, 2, 2), (9, 3, 4), (1, 1, 1)])
def test_rotary_attention_equals_the_reference(name, rope, n, heads, half):
    rng = np.random.default_rng(n * 100 + heads * 10 + half)
    width = heads * 2 * half
    arrays = {"X": rng.standard_normal((n, width))}
    arrays |= {w: _normal(rng, width, width) for w in ("W_Q", "W_K", "W_V", "W_O")}
    got = _run(name, {"N": n, "H": heads, "h": half}, **arrays)["Y"]
    q, k, v = (arrays["X"] @ arrays[w] for w in ("W_Q", "W_K", "W_V"))
    heads_out = [_attention(rope(qh), rope(kh), vh, None)
                 for qh, kh, vh in zip(_heads(q, heads), _heads(k, heads), _heads(v, heads))]
    expected = np.concatenate(heads_out, axis=-1) @ arrays["W_O"]
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_rotary_scores_depend_only_on_relative_positions():
    """The reason for rotary embeddings, checked on the references themselves: the two
    formulations rotate by the same angles, so shifting q and k together keeps q·k."""
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((1, 8)), rng.standard_normal((1, 8))
    for rope in (apply_rope_half, apply_rope_interleaved):
        def at(x: np.ndarray, position: int) -> np.ndarray:
            return rope(np.repeat(x, position + 1, axis=0))[position]
        assert np.isclose(at(q, 5) @ at(k, 2), at(q, 7) @ at(k, 4))


@pytest.mark.parametrize("n, heads, d, window", [(7, 2, 3, 3), (5, 1, 2, 1), (4, 2, 2, 9)])
def test_sliding_window_attention_equals_the_reference(n, heads, d, window):
    rng = np.random.default_rng(n + window)
    width = heads * d
    arrays = {"X": rng.standard_normal((n, width))}
    arrays |= {w: _normal(rng, width, width) for w in ("W_Q", "W_K", "W_V", "W_O")}
    out = _run("sliding_window", {"N": n, "H": heads, "d": d, "W": window}, **arrays)
    mask = np.array([[j <= i and i - j < window for j in range(n)] for i in range(n)])
    assert out["same"].all()
    q, k, v = (arrays["X"] @ arrays[w] for w in ("W_Q", "W_K", "W_V"))
    heads_out = [_attention(qh, kh, vh, mask)
                 for qh, kh, vh in zip(_heads(q, heads), _heads(k, heads), _heads(v, heads))]
    np.testing.assert_allclose(out["Y"], np.concatenate(heads_out, -1) @ arrays["W_O"],
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("past, new, heads, d", [(5, 2, 2, 3), (1, 1, 1, 2), (3, 4, 2, 2)])
def test_a_decode_step_equals_the_last_rows_of_full_causal_attention(past, new, heads, d):
    rng = np.random.default_rng(past * 10 + new)
    width = heads * d
    x_all = rng.standard_normal((past + new, width))
    weights = {w: _normal(rng, width, width) for w in ("W_Q", "W_K", "W_V", "W_O")}
    k_all, v_all = x_all @ weights["W_K"], x_all @ weights["W_V"]
    cache_k = np.stack(_heads(k_all[:past], heads))  # what earlier steps stored: [H, T_past, d]
    cache_v = np.stack(_heads(v_all[:past], heads))
    out = _run("kv_cache_decode", {"T_past": past, "T_new": new, "H": heads, "d": d},
               X_new=x_all[past:], K_cache=cache_k, V_cache=cache_v, **weights)
    # Full causal attention over the whole sequence, as if there were no cache.
    q_all = x_all @ weights["W_Q"]
    square = _causal(past + new, past + new)
    full = np.concatenate([_attention(qh, kh, vh, square) for qh, kh, vh in zip(
        _heads(q_all, heads), _heads(k_all, heads), _heads(v_all, heads))], -1) @ weights["W_O"]
    np.testing.assert_allclose(out["Y"], full[past:], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out["K"], np.stack(_heads(k_all, heads)), rtol=1e-12)
    np.testing.assert_allclose(out["V"], np.stack(_heads(v_all, heads)), rtol=1e-12)


@pytest.mark.parametrize("n, heads, d", [(5, 4, 2), (6, 8, 1), (1, 1, 3)])
def test_alibi_equals_the_reference(n, heads, d):
    rng = np.random.default_rng(n * heads)
    width = heads * d
    arrays = {"X": rng.standard_normal((n, width))}
    arrays |= {w: _normal(rng, width, width) for w in ("W_Q", "W_K", "W_V", "W_O")}
    got = _run("alibi", {"N": n, "H": heads, "d": d}, **arrays)["Y"]
    # Press et al.: for 8 heads the slopes are 1/2, 1/4, ..., 1/256; in general 2^(-8h/H).
    slopes = [2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)]
    if heads == 8:
        assert slopes == [1 / 2 ** (h + 1) for h in range(8)]
    q, k, v = (arrays["X"] @ arrays[w] for w in ("W_Q", "W_K", "W_V"))
    heads_out = []
    for h, (qh, kh, vh) in enumerate(zip(_heads(q, heads), _heads(k, heads), _heads(v, heads))):
        bias = np.array([[-slopes[h] * (i - j) for j in range(n)] for i in range(n)])
        heads_out.append(_attention(qh, kh, vh, _causal(n, n), bias))
    np.testing.assert_allclose(got, np.concatenate(heads_out, -1) @ arrays["W_O"],
                               rtol=1e-10, atol=1e-12)


def test_key_padding_hides_the_padding_keys():
    rng = np.random.default_rng(4)
    batch, n, heads, d = 3, 5, 2, 3
    width = heads * d
    lengths = [5, 2, 1]
    keep = np.array([[j < length for j in range(n)] for length in lengths])
    arrays = {"X": rng.standard_normal((batch, n, width)), "keep": keep}
    arrays |= {w: _normal(rng, width, width) for w in ("W_Q", "W_K", "W_V", "W_O")}
    got = _run("key_padding", {"B": batch, "N": n, "H": heads, "d": d}, **arrays)["Y"]
    for b in range(batch):
        q, k, v = (arrays["X"][b] @ arrays[w] for w in ("W_Q", "W_K", "W_V"))
        mask = np.repeat(keep[b][None, :], n, axis=0)
        heads_out = [_attention(qh, kh, vh, mask)
                     for qh, kh, vh in zip(_heads(q, heads), _heads(k, heads), _heads(v, heads))]
        np.testing.assert_allclose(got[b], np.concatenate(heads_out, -1) @ arrays["W_O"],
                                   rtol=1e-10, atol=1e-12)
    # Changing padding tokens changes nothing for the real tokens of their sequence.
    changed = dict(arrays, X=arrays["X"].copy())
    changed["X"][1, 3:] += 100.0
    again = _run("key_padding", {"B": batch, "N": n, "H": heads, "d": d}, **changed)["Y"]
    np.testing.assert_allclose(again[1, :2], got[1, :2], rtol=1e-10)


def test_latent_attention_equals_content_plus_rotary_scores():
    """DeepSeek-V2's MLA computed the other way: per head, the content score and the
    rotary score (with the key part shared by every head) as two products, added."""
    rng = np.random.default_rng(5)
    dims = {"N": 6, "H": 2, "d_nope": 3, "h_rope": 2, "d_v": 3, "d_c": 4, "d_cq": 5,
            "D_model": 8}
    n, heads, d_nope, d_rope, d_v = 6, 2, 3, 4, 3
    shapes = {"W_DQ": (8, 5), "W_UQ": (5, heads * d_nope), "W_QR": (5, heads * d_rope),
              "W_DKV": (8, 4), "W_UK": (4, heads * d_nope), "W_UV": (4, heads * d_v),
              "W_KR": (8, d_rope), "W_O": (heads * d_v, 8)}
    arrays = {"X": rng.standard_normal((n, 8))}
    arrays |= {name: _normal(rng, *shape) for name, shape in shapes.items()}
    got = _run("latent_attention", dims, **arrays)["Y"]
    c_q, c_kv = arrays["X"] @ arrays["W_DQ"], arrays["X"] @ arrays["W_DKV"]
    k_rope = apply_rope_half(arrays["X"] @ arrays["W_KR"])  # one for every head
    heads_out = []
    for h in range(heads):
        q_content = _heads(c_q @ arrays["W_UQ"], heads)[h]
        q_rope = apply_rope_half(_heads(c_q @ arrays["W_QR"], heads)[h])
        k_content = _heads(c_kv @ arrays["W_UK"], heads)[h]
        value = _heads(c_kv @ arrays["W_UV"], heads)[h]
        scores = (q_content @ k_content.T + q_rope @ k_rope.T) / np.sqrt(d_nope + d_rope)
        scores = np.where(_causal(n, n), scores, -np.inf)
        heads_out.append(_softmax_rows(scores) @ value)
    np.testing.assert_allclose(got, np.concatenate(heads_out, -1) @ arrays["W_O"],
                               rtol=1e-10, atol=1e-12)
