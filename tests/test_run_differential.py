"""Differential tests: the same thing computed two independent ways.

1. Symbolic vs executed: for every example and every test spec that verifies,
   random admissible bindings (the free dims no constraint determines, drawn
   small; the checker derives the rest), and each statement's runtime shape must
   equal its symbolic shape evaluated at the bindings.
2. Two formulations: matrix form vs index (einsum) form; the multi-head specs in
   their three layouts vs an independent NumPy loop over heads; causal, grouped-
   query, cross and batched attention vs computations written out here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from shapecheck.api import check_path, check_text
from shapecheck.backend import CompiledSpec, MemoryLimitError, compile_spec
from shapecheck.backend.runtime import unbound_dims
from spec_files import verifying  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MEMORY_CAP = 64 << 20  # a test spec with huge fixed dims is not executed


SPECS = list(verifying())
SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


def test_every_example_is_exercised():
    assert {p.name for p in EXAMPLES.glob("*.attn")} <= {p.name for p in SPECS}


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
@SETTINGS
@given(data=st.data())
def test_executed_shapes_equal_symbolic_shapes(path: Path, data: st.DataObject) -> None:
    source = check_path(path).source
    free, _ = unbound_dims(check_text(source))
    bindings = {name: data.draw(st.integers(1, 5), label=name) for name in free}
    program = check_text(source, bindings)
    assume(program.ok and not program.dims.unbound())  # e.g. a violated `N >= 2`
    dtype = data.draw(st.sampled_from(["float32", "float64"]), label="dtype")
    spec = CompiledSpec(program, dims=bindings, dtype=dtype, max_memory=MEMORY_CAP)
    try:
        result = spec.run(seed=data.draw(st.integers(0, 3), label="seed"), keep_intermediates=True)
    except MemoryLimitError:  # a test spec with a huge fixed dim
        assume(False)
    for name, tensor in program.tensors.items():
        assert tensor.value.shape is not None
        symbolic = tuple(program.dims.evaluate(d) for d in tensor.value.shape)
        executed = result.tensors[name]
        assert executed.shape == symbolic, (name, tensor.value.text())
        held = np.result_type(dtype, np.complex64) if tensor.value.element == "complex" \
            else np.dtype(dtype)  # int tensors are held in the run's dtype (docs/language.md)
        assert executed.dtype == (np.bool_ if tensor.value.is_bool else held), name


# --- two formulations ----------------------------------------------------------------------------

sizes = st.fixed_dictionaries({"N": st.integers(1, 6), "d": st.integers(1, 4),
                               "H": st.integers(1, 3), "seed": st.integers(0, 100)})
FORMULATIONS = settings(max_examples=10, deadline=None, derandomize=True)


def _normal(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    """Written out row by row, independently of the backend."""
    result = np.empty_like(scores)
    for index in np.ndindex(scores.shape[:-1]):
        row = scores[index]
        weights = np.exp(row - row.max())
        result[index] = weights / weights.sum()
    return result


def _attention_heads(X, M, W_Q, W_K, W_V, W_O, H, mask=None, kv_head=None):
    """Multi-head attention as the notes describe it: one head at a time, head h
    taking columns h*d ... h*d+d-1 of the projections, outputs concatenated."""
    d = W_Q.shape[1] // H
    heads = []
    for h in range(H):
        g = h if kv_head is None else kv_head(h)
        Q = X @ W_Q[:, h * d:(h + 1) * d]
        K = M @ W_K[:, g * d:(g + 1) * d]
        V = M @ W_V[:, g * d:(g + 1) * d]
        S = Q @ K.T / np.sqrt(d)
        if mask is not None:
            S = np.where(mask, S, -np.inf)
        heads.append(_softmax_rows(S) @ V)
    return np.concatenate(heads, axis=1) @ W_O


@FORMULATIONS
@given(sizes)
def test_matrix_form_equals_index_form(s):
    rng = np.random.default_rng(s["seed"])
    Q, K, V = (_normal(rng, s["N"], s["d"]) for _ in range(3))
    matrix = compile_spec(EXAMPLES / "single_head.attn")(Q=Q, K=K, V=V)["O"]
    index = compile_spec(EXAMPLES / "index_form.attn")
    # index_form.attn is unscaled, as the notes write it: scale Q instead
    np.testing.assert_allclose(index(Q=Q / np.sqrt(s["d"]), K=K, V=V)["O"], matrix, rtol=1e-12)
    by_hand = np.array([[sum(_softmax_rows(np.array([[Q[i] @ K[j] for j in range(s["N"])]]))[0, j]
                             * V[j, c] for j in range(s["N"])) for c in range(s["d"])]
                        for i in range(s["N"])])
    np.testing.assert_allclose(index(Q=Q, K=K, V=V)["O"], by_hand, rtol=1e-12)


@FORMULATIONS
@given(sizes)
def test_multi_head_in_three_layouts_equals_an_independent_loop_over_heads(s):
    rng = np.random.default_rng(s["seed"])
    width = s["H"] * s["d"]
    X = _normal(rng, s["N"], width)
    weights = {name: _normal(rng, width, width) for name in ("W_Q", "W_K", "W_V", "W_O")}
    expected = _attention_heads(X, X, *weights.values(), s["H"])
    for layout in ("multi_head", "multi_head_nhd", "multi_head_einsum"):
        spec = compile_spec(EXAMPLES / f"{layout}.attn", dims={"H": s["H"]})
        np.testing.assert_allclose(spec(X=X, **weights)["Y"], expected, rtol=1e-10, atol=1e-12,
                                   err_msg=layout)


@FORMULATIONS
@given(sizes)
def test_causal_attention_equals_a_hand_masked_computation(s):
    rng = np.random.default_rng(s["seed"])
    n, width = s["N"], s["H"] * s["d"]
    X = _normal(rng, n, width)
    weights = {name: _normal(rng, width, width) for name in ("W_Q", "W_K", "W_V", "W_O")}
    visible = np.array([[j <= i for j in range(n)] for i in range(n)])  # i sees j <= i
    expected = _attention_heads(X, X, *weights.values(), s["H"], mask=visible)
    result = compile_spec(EXAMPLES / "causal.attn", dims={"H": s["H"]}).run(
        {"X": X, **weights}, keep_intermediates=True)
    np.testing.assert_allclose(result.outputs["Y"], expected, rtol=1e-10, atol=1e-12)
    assert (result.tensors["P"][:, ~visible] == 0).all()  # no weight on a future token


@FORMULATIONS
@given(sizes, st.integers(1, 3))
def test_grouped_query_equals_sharing_key_value_heads(s, groups):
    rng = np.random.default_rng(s["seed"])
    per_group = s["H"]
    heads, width = groups * per_group, groups * per_group * s["d"]
    X = _normal(rng, s["N"], width)
    W_Q, W_O = _normal(rng, width, width), _normal(rng, width, width)
    W_K, W_V = _normal(rng, width, groups * s["d"]), _normal(rng, width, groups * s["d"])
    expected = _attention_heads(X, X, W_Q, W_K, W_V, W_O, heads,
                                kv_head=lambda h: h // per_group)
    spec = compile_spec(EXAMPLES / "grouped_query.attn", dims={"G": groups})
    got = spec(X=X, W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O)["Y"]
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


@FORMULATIONS
@given(sizes, st.integers(1, 5))
def test_cross_attention_equals_an_independent_loop(s, memory):
    rng = np.random.default_rng(s["seed"])
    width = s["H"] * s["d"]
    X, M = _normal(rng, s["N"], width), _normal(rng, memory, width)
    weights = {name: _normal(rng, width, width) for name in ("W_Q", "W_K", "W_V", "W_O")}
    expected = _attention_heads(X, M, *weights.values(), s["H"])
    spec = compile_spec(EXAMPLES / "cross_attention.attn", dims={"H": s["H"]})
    np.testing.assert_allclose(spec(X=X, M=M, **weights)["Y"], expected, rtol=1e-10, atol=1e-12)


@FORMULATIONS
@given(sizes, st.integers(1, 3))
def test_batched_attention_equals_one_sequence_at_a_time(s, batch):
    rng = np.random.default_rng(s["seed"])
    n, width = s["N"], s["H"] * s["d"]
    X = _normal(rng, batch, n, width)
    keep = rng.random((batch, 1, 1, n)) < 0.7
    keep[..., 0] = True  # every sequence keeps one key
    weights = {name: _normal(rng, width, width) for name in ("W_Q", "W_K", "W_V", "W_O")}
    spec = compile_spec(EXAMPLES / "batched.attn", dims={"H": s["H"]})
    got = spec(X=X, keep=keep, **weights)["Y"]
    for b in range(batch):
        mask = np.broadcast_to(keep[b, 0, 0], (n, n))
        expected = _attention_heads(X[b], X[b], *weights.values(), s["H"], mask=mask)
        np.testing.assert_allclose(got[b], expected, rtol=1e-10, atol=1e-12)
