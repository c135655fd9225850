"""Issue 21's examples against independent NumPy transcriptions of the public code they
come from: Meta's Llama attention (complex rotary, grouped heads, a KV cache) and T5's
relative position bias (its bucket function and the embedding gather). Each spec runs in
both backends; the reference is written from the original Python, not from the spec."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from shapecheck.api import check_path
from shapecheck.backend import CompiledSpec, InputError
from shapecheck.backend.reference import reference

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


# --- Meta's Llama (llama/model.py) -----------------------------------------------------------


def _precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> np.ndarray:
    freqs = 1.0 / (theta ** (np.arange(0, dim, 2)[: (dim // 2)].astype(np.float64) / dim))
    t = np.arange(end)
    freqs = np.outer(t, freqs)
    return np.ones_like(freqs) * np.exp(1j * freqs)  # torch.polar(ones, freqs)


def _apply_rotary_emb(xq: np.ndarray, xk: np.ndarray, freqs_cis: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    def as_complex(x: np.ndarray) -> np.ndarray:
        pairs = x.reshape(*x.shape[:-1], -1, 2)
        return pairs[..., 0] + 1j * pairs[..., 1]

    def as_real(z: np.ndarray) -> np.ndarray:
        return np.stack([z.real, z.imag], axis=-1).reshape(*z.shape[:-1], -1)

    xq_, xk_ = as_complex(xq), as_complex(xk)
    shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    freqs = freqs_cis.reshape(shape)  # reshape_for_broadcast
    return as_real(xq_ * freqs), as_real(xk_ * freqs)


def _llama_attention(x, cache_k, cache_v, wq, wk, wv, wo, n_heads, n_kv_heads, start_pos, end):
    bsz, seqlen, _ = x.shape
    head_dim = wq.shape[1] // n_heads
    n_rep = n_heads // n_kv_heads
    freqs_cis = _precompute_freqs_cis(head_dim, end)[start_pos: start_pos + seqlen]
    xq = (x @ wq).reshape(bsz, seqlen, n_heads, head_dim)
    xk = (x @ wk).reshape(bsz, seqlen, n_kv_heads, head_dim)
    xv = (x @ wv).reshape(bsz, seqlen, n_kv_heads, head_dim)
    xq, xk = _apply_rotary_emb(xq, xk, freqs_cis)
    # the cache: a buffer of max positions, written at start_pos, read up to the end
    buffer_k = np.zeros((bsz, start_pos + seqlen, n_kv_heads, head_dim))
    buffer_v = np.zeros_like(buffer_k)
    buffer_k[:, :start_pos], buffer_v[:, :start_pos] = cache_k, cache_v
    buffer_k[:bsz, start_pos: start_pos + seqlen] = xk
    buffer_v[:bsz, start_pos: start_pos + seqlen] = xv
    keys = buffer_k[:bsz, : start_pos + seqlen]
    values = buffer_v[:bsz, : start_pos + seqlen]
    keys = np.broadcast_to(keys[:, :, :, None, :], (bsz, start_pos + seqlen, n_kv_heads, n_rep,
                                                     head_dim)).reshape(bsz, -1, n_heads, head_dim)
    values = np.broadcast_to(values[:, :, :, None, :], (bsz, start_pos + seqlen, n_kv_heads,
                                                         n_rep, head_dim)).reshape(bsz, -1, n_heads,
                                                                                   head_dim)
    xq, keys, values = (a.transpose(0, 2, 1, 3) for a in (xq, keys, values))
    scores = xq @ keys.transpose(0, 1, 3, 2) / math.sqrt(head_dim)
    mask = np.triu(np.full((seqlen, seqlen), -np.inf), k=1)
    mask = np.hstack([np.zeros((seqlen, start_pos)), mask])
    scores = scores + mask
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    scores /= scores.sum(axis=-1, keepdims=True)
    output = (scores @ values).transpose(0, 2, 1, 3).reshape(bsz, seqlen, -1)
    return output @ wo


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("sizes", [
    {"B": 2, "S": 3, "P": 4, "T": 16, "G": 2, "R": 2, "h": 4},
    {"B": 1, "S": 1, "P": 5, "T": 6, "G": 1, "R": 3, "h": 2},  # one decoding step
])
def test_llama_example_equals_metas_code(backend: str, sizes: dict[str, int]) -> None:
    program = check_path(EXAMPLES / "llama_rotary_cache.attn", sizes)
    assert program.ok, [d.message for d in program.diagnostics]
    case = reference(program, "float64", seed=5)
    spec = CompiledSpec(program, dims=sizes, dtype="float64", backend=backend)
    got = spec.run(case.inputs).outputs["Y"]
    i = case.inputs
    expected = _llama_attention(i["x"], i["cache_k"], i["cache_v"], i["wq"], i["wk"], i["wv"],
                                i["wo"], sizes["G"] * sizes["R"], sizes["G"], sizes["P"],
                                sizes["T"])
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_an_odd_head_width_paired_into_complex_numbers_is_its_own_error() -> None:
    text = (EXAMPLES / "llama_rotary_cache.attn").read_text().replace(
        "dim hd = 2 * h ", "dim hd = 2 * h + 1 ").replace("[:h]", "[:h + 1]")
    from shapecheck.api import check_text

    found = [d.code for d in check_text(text).diagnostics]
    assert "SC323" in found or "SC307" in found, found


# --- T5's relative position bias (transformers/models/t5/modeling_t5.py) ---------------------


def _relative_position_bucket(relative_position: np.ndarray, num_buckets: int = 32,
                              max_distance: int = 128) -> np.ndarray:
    relative_buckets = np.zeros_like(relative_position)
    num_buckets //= 2  # bidirectional
    relative_buckets += (relative_position > 0).astype(np.int64) * num_buckets
    relative_position = np.abs(relative_position)
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0): masked by is_small
        relative_position_if_large = max_exact + (
            np.log(relative_position.astype(np.float64) / max_exact)
            / math.log(max_distance / max_exact) * (num_buckets - max_exact)
        ).astype(np.int64)
    relative_position_if_large = np.minimum(
        relative_position_if_large, np.full_like(relative_position_if_large, num_buckets - 1))
    relative_buckets += np.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def _t5_attention(Q, K, V, table):
    query_length, key_length = Q.shape[1], K.shape[1]
    context_position = np.arange(query_length, dtype=np.int64)[:, None]
    memory_position = np.arange(key_length, dtype=np.int64)[None, :]
    buckets = _relative_position_bucket(memory_position - context_position)
    bias = table[buckets].transpose(2, 0, 1)  # nn.Embedding, then permute([2, 0, 1])
    scores = Q @ K.transpose(0, 2, 1) + bias
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ V


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("sizes", [{"N": 5, "M": 7, "H": 2, "d": 3},
                                   {"N": 40, "M": 300, "H": 1, "d": 2}])  # past max_distance
def test_t5_example_equals_hugging_faces_code(backend: str, sizes: dict[str, int]) -> None:
    program = check_path(EXAMPLES / "t5_relative_bias.attn", sizes)
    assert program.ok, [d.message for d in program.diagnostics]
    case = reference(program, "float64", seed=2)
    got = CompiledSpec(program, dims=sizes, dtype="float64", backend=backend).run(
        case.inputs).outputs["O"]
    i = case.inputs
    np.testing.assert_allclose(got, _t5_attention(i["Q"], i["K"], i["V"], i["bias_table"]),
                               rtol=1e-10, atol=1e-12)


def test_the_buckets_are_the_reference_buckets() -> None:
    sizes = {"N": 9, "M": 200, "H": 1, "d": 1}
    program = check_path(EXAMPLES / "t5_relative_bias.attn", sizes)
    case = reference(program, "float64", seed=0)
    result = CompiledSpec(program, dims=sizes, dtype="float64").run(case.inputs,
                                                                   keep_intermediates=True)
    rel = np.arange(200)[None, :] - np.arange(9)[:, None]
    np.testing.assert_array_equal(result.tensors["buckets"], _relative_position_bucket(rel))


def test_a_gather_past_the_table_is_a_run_time_input_error() -> None:
    """A spec whose positions can leave the table: the run names the index and the axis."""
    from shapecheck.api import check_text

    program = check_text("dim V, D, N\ninput E: [V, D]\ninput ids: int[N]\n"
                         "output O = E[ids + 1]\n", {"V": 3, "D": 2, "N": 4})
    assert program.ok
    spec = CompiledSpec(program, dims={"V": 3, "D": 2, "N": 4}, dtype="float64")
    with pytest.raises(InputError, match=r"`ids \+ 1` holds 3 as a position on axis 0 of `E`"):
        spec.run({"E": np.zeros((3, 2)), "ids": np.array([0, 1, 2, 2])})
    with pytest.raises(InputError, match="not a whole number"):
        spec.run({"E": np.zeros((3, 2)), "ids": np.array([0.5, 1, 1, 1])})


# --- conformance of complex-valued and integer-indexed code -----------------------------------

ROTARY = """dim B, S, H, h, V
dim hd = 2 * h
input xq: [B, S, H, hd]
input tokens: int[B, S]
param table: [V, H * hd]
e = reshape(table[tokens], [B, S, H, hd]) + xq
angles = outer(arange(S), 1.0 / (10000.0 ** (arange(0, hd, 2) / hd)))
fc = reshape(polar(ones_like(angles), angles), [1, S, 1, h])
output rotated = view_as_complex(reshape(e, [B, S, H, -1, 2])) * fc
"""


def _rotary_numpy(xq, tokens, table):
    """Meta's apply_rotary_emb on an embedding lookup, in NumPy (complex output)."""
    B, S, H, hd = xq.shape
    e = table[tokens].reshape(B, S, H, hd) + xq
    freqs = np.outer(np.arange(S), 1.0 / (10000.0 ** (np.arange(0, hd, 2) / hd)))
    pairs = e.reshape(B, S, H, -1, 2)
    return (pairs[..., 0] + 1j * pairs[..., 1]) * np.exp(1j * freqs)[None, :, None, :]


def test_complex_valued_code_conforms_and_a_wrong_rotation_does_not() -> None:
    from shapecheck.pytorch.conform import conform

    assert conform(ROTARY, _rotary_numpy, cases=3).ok
    def conjugate(xq, tokens, table):  # **kwargs would take no spec names (docs/conform.md)
        return np.conj(_rotary_numpy(xq, tokens, table))

    conjugated = conform(ROTARY, conjugate, cases=2, shrink=False)
    assert not conjugated.ok  # only the imaginary parts differ: both parts are compared


# --- the other passes on the new examples ------------------------------------------------------


@pytest.mark.parametrize("path", [EXAMPLES / "llama_rotary_cache.attn",
                                  EXAMPLES / "t5_relative_bias.attn",
                                  EXAMPLES.parent / "tests" / "cases" / "element_types.attn"],
                         ids=lambda p: p.stem)
def test_meaning_gives_every_value_one_axis_per_entry(path: Path) -> None:
    """Through gathers (the index's axes replace the gathered one) and the complex
    pairing (the paired axis goes or comes back), every value keeps one axis per entry."""
    from shapecheck.syntax import nodes
    from shapecheck.meaning import analyse

    program = check_path(path)
    found = analyse(program)
    pending = [s.value for s in program.statements
               if isinstance(s, (nodes.Define, nodes.Output)) and s.value is not None]
    checked = 0
    while pending:
        node = pending.pop()
        pending.extend(nodes.children(node))
        axes, value = found.axes(node), program.type_of(node)
        if axes is not None and value.shape is not None:
            assert len(axes) == len(value.shape), (path.name, node.span, value.text())
            checked += 1
    assert checked > 10


def test_the_attention_is_found_through_the_complex_rotary_and_the_bias_gather() -> None:
    from shapecheck.meaning import analyse

    (llama,) = analyse(check_path(EXAMPLES / "llama_rotary_cache.attn")).patterns
    assert llama.axis_ok and llama.scale_ok
    assert llama.query is not None and "query" in llama.query.axes
    (t5,) = analyse(check_path(EXAMPLES / "t5_relative_bias.attn")).patterns
    assert t5.axis_ok and t5.key is not None and "key" in t5.key.axes


def test_report_costs_the_new_builtins() -> None:
    from shapecheck.report.cost import PER_ELEMENT, REDUCTIONS

    assert {"cumsum", "cumprod", "minimum", "maximum", "clamp"} <= set(PER_ELEMENT)
    assert {"amax", "amin", "all", "any"} <= REDUCTIONS
