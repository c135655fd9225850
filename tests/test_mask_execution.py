"""Masks and score changes as functions of positions, executed (issue 32 item 4).

NumPy evaluates a function of positions per block of query rows and keys inside the fused
kernel (the ``[..., N_q, N_k]`` table is never built); torch runs it through an eager
``flex_attention`` whose ``mask_mod``/``score_mod`` are the spec's functions. Every variant
gives the numbers of the dense, unfused run, and a fully masked row is NaN with a warning
on every path (docs/run.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from shapecheck.api import check_text
from shapecheck.backend import compile_spec, numpy_backend

HEADER = """dim B, H, N, M, d
constraint N <= M
input Q: [B, H, N, d]
input K: [B, H, M, d]
input V: [B, H, M, d]
input doc: int[M]
input pad: bool[M]
input slopes: [H]
"""
DIMS = {"B": 2, "H": 3, "N": 37, "M": 45, "d": 4}

# (name, definitions, the flex_attention keywords): attention-gym's forms
FORMS = [
    ("causal", "def f(q, k) = k <= q + M - N", "mask=f"),
    ("window", "def f(q, k) = (k <= q + M - N) & (q + M - N - k < 5)", "mask=f"),
    ("document", "def f(b, h, q, k) = (k <= q + M - N) & (doc[q + M - N] == doc[k])", "mask=f"),
    ("padding", "def f(q, k) = (k <= q + M - N) & (pad[k] | (k == 0))", "mask=f"),
    ("alibi", "def f(q, k) = k <= q + M - N\n"
              "def g(s, b, h, q, k) = s + slopes[h] * (k - q - M + N)", "mask=f, score=g"),
    ("relative", "def g(s, q, k) = s - 0.25 * abs(q + M - N - k)", "score=g"),
    ("softcap", "def f(q, k) = k <= q + M - N\n"
                "def g(s, q, k) = 20.0 * tanh(s / 20.0)", "mask=f, score=g"),
]
# forms whose every mask and bias the kernels read as a function of positions (NumPy's
# kernel applies a soft-cap's tanh to each block too; torch's FlexAttention in its score_mod)
FUSED = {"causal", "window", "document", "padding", "alibi", "relative", "softcap"}
TORCH_FUSED = FUSED
# forms FlexAttention runs: every lookup at a position itself (`doc[q + M - N]` is not), and
# a soft-capped one whatever its masks (SDPA has no soft-cap)
FLEX = {"causal", "window", "padding", "alibi", "relative", "softcap"}


def spec(definitions: str, keywords: str) -> str:
    return f"{HEADER}{definitions}\noutput O = flex_attention(Q, K, V, {keywords})\n"


def inputs(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    b, h, n, m, d = (DIMS[x] for x in "BHNMd")
    return {"Q": rng.standard_normal((b, h, n, d)), "K": rng.standard_normal((b, h, m, d)),
            "V": rng.standard_normal((b, h, m, d)), "doc": np.sort(rng.integers(0, 4, m)),
            "pad": rng.random(m) > 0.3, "slopes": rng.random(h)}


@pytest.mark.parametrize("name, definitions, keywords", FORMS, ids=[f[0] for f in FORMS])
def test_a_function_of_positions_runs_blockwise_with_the_dense_numbers(
        name: str, definitions: str, keywords: str) -> None:
    text, arrays = spec(definitions, keywords), inputs()
    dense = compile_spec(text, dims=DIMS, fused="off").run(arrays)
    fused = compile_spec(text, dims=DIMS).run(arrays)
    note = " ".join(fused.plan)
    assert ("functions of positions, evaluated block by block" in note) == (name in FUSED), note
    np.testing.assert_allclose(fused.outputs["O"], dense.outputs["O"], rtol=1e-12, atol=1e-12)
    assert np.isfinite(dense.outputs["O"]).all()


@pytest.mark.slow  # FlexAttention's first eager call takes seconds
@pytest.mark.parametrize("name, definitions, keywords", FORMS, ids=[f[0] for f in FORMS])
def test_torch_runs_it_through_flex_attention_with_the_same_numbers(
        name: str, definitions: str, keywords: str) -> None:
    pytest.importorskip("torch")
    text, arrays = spec(definitions, keywords), inputs(1)
    dense = compile_spec(text, dims=DIMS, fused="off").run(arrays)
    flex = compile_spec(text, dims=DIMS, backend="torch").run(arrays, check_invariants=True)
    note = " ".join(flex.plan)
    assert ("flex_attention" in note) == (name in FLEX), note
    np.testing.assert_allclose(flex.outputs["O"], dense.outputs["O"], rtol=1e-10, atol=1e-12)
    assert any("recomputed" in line for line in flex.checks) == (name in TORCH_FUSED)


STRICT = spec("def f(q, k) = k < q + M - N\ndef g(s, q, k) = s - 0.5 * (q + M - N - k)",
              "mask=f, score=g")


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("fused", ["auto", "off"])
def test_a_fully_masked_row_is_nan_and_a_warning_on_every_path(backend: str, fused: str) -> None:
    """`k < q` hides every key from the first query when N == M: SC433 says so at check
    time; every run returns NaN for that row and warns (eager softmax's value; SDPA and
    FlexAttention's zeros are replaced)."""
    if backend == "torch":
        pytest.importorskip("torch")
    dims = {**DIMS, "M": DIMS["N"]}
    assert "SC433" in {d.code for d in check_text(STRICT).diagnostics}
    arrays = inputs(2)
    arrays.update(K=arrays["K"][:, :, :dims["M"]], V=arrays["V"][:, :, :dims["M"]],
                  doc=arrays["doc"][:dims["M"]], pad=arrays["pad"][:dims["M"]])
    result = compile_spec(STRICT, dims=dims, backend=backend, fused=fused).run(arrays)
    out = result.outputs["O"]
    assert np.isnan(out[:, :, 0]).all() and np.isfinite(out[:, :, 1:]).all()
    assert any(f"{dims['B'] * dims['H']} softmax row(s) are entirely -inf" in w
               for w in result.warnings), result.warnings


def test_the_plan_never_holds_the_table_of_a_function_of_positions() -> None:
    """The memory ledger at N = 4096: the mask's statements are not computed, and nothing
    of the [N, N] table's size is allocated (a function read whole would be 16 MiB of
    bools and 128 MiB of float64 scores)."""
    text = ("dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\ninput doc: int[N]\n"
            "i = arange(N)[:, None]\nj = arange(N)[None, :]\n"
            "allowed = (j <= i) & (doc[i] == doc[j])\n"
            "output O = softmax(where(allowed, Q @ K.T / sqrt(d), -inf)) @ V\n")
    n = 4096
    program = check_text(text, {"N": n, "d": 8})
    plan = numpy_backend.build_plan(program, np.dtype("float64"))
    assert {step.name for step in plan.steps} == {"O"}
    unfused = numpy_backend.build_plan(program, np.dtype("float64"), fuse=False)
    assert unfused.peak_bytes > n * n * 8
    assert plan.peak_bytes < n * n  # below the bool table alone


STRICT_2D = ("dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
             "def earlier(q, k) = k < q\n"
             "output O = flex_attention(Q, K, V, mask=earlier)\n")


def test_conform_reads_sdpa_zeros_for_a_fully_masked_row_as_the_specs_nan() -> None:
    """The first query sees no key: the spec's row is NaN, SDPA's zeros; conform counts
    them as agreeing (docs/conform.md), and still fails a module whose other rows differ."""
    torch = pytest.importorskip("torch")
    from shapecheck.pytorch.conform import conform

    def sdpa(Q, K, V):  # noqa: N803 (the spec's names)
        n = Q.shape[-2]
        keep = torch.arange(n)[None, :] < torch.arange(n)[:, None]
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=keep)

    def wrong(Q, K, V):  # noqa: N803
        n = Q.shape[-2]
        keep = torch.arange(n)[None, :] <= torch.arange(n)[:, None]  # its own key too
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=keep)

    assert conform(STRICT_2D, sdpa, cases=3, framework="torch").ok
    assert not conform(STRICT_2D, wrong, cases=3, shrink=False, framework="torch").ok


def test_functions_of_positions_in_key_blocks_too(monkeypatch) -> None:
    """Tiles small enough that the keys come in blocks (the online softmax): a function of
    positions is evaluated for each key block, with the dense numbers and the NaN row."""
    from shapecheck.backend import fused

    blocks_for = fused.blocks_for
    monkeypatch.setattr(fused, "MIN_ROWS", 8)
    monkeypatch.setattr(fused, "MIN_KEYS", 16)
    monkeypatch.setattr(fused, "blocks_for",
                        lambda *args, **options: blocks_for(*args, **{**options, "tile_bytes": 4096}))
    for name, definitions, keywords in FORMS:
        if name not in FUSED:
            continue
        text, arrays = spec(definitions, keywords), inputs(3)
        dense = compile_spec(text, dims=DIMS, fused="off").run(arrays).outputs["O"]
        result = compile_spec(text, dims=DIMS).run(arrays, check_invariants=True)
        assert "(online softmax); its masks and biases are functions" in result.plan[0], name
        np.testing.assert_allclose(result.outputs["O"], dense, rtol=1e-12, atol=1e-12)


# --- soft-capped attention on torch: one flex_attention call (issue 32 item 4) -------------

CAPPED_HEADER = """dim B, H, N, d
input Q: [B, H, N, d]
input K: [B, H, N, d]
input V: [B, H, N, d]
input bias: [H, N, N]
S = Q @ K.T / sqrt(d) + bias
"""
# (name, the statements from the scores to O): Gemma 2's order (scale, bias, cap, mask),
# a window, a mask before the cap (SC410: the cap makes -inf a finite -c, which the kernel
# must keep), a finite fill replacing after the cap, and a cap with no mask at all
CAPPED = [
    ("causal", "C = 30.0 * tanh(S / 30.0)\noutput O = softmax(where(causal_mask(N), C, -inf)) @ V"),
    ("window", "C = 30.0 * tanh(S / 30.0)\n"
               "output O = softmax(where(causal_mask(N, window=4), C, -inf)) @ V"),
    ("mask_before_cap", "M = where(causal_mask(N), S, -inf)\n"
                        "output O = softmax(5.0 * tanh(M / 5.0)) @ V"),
    ("finite_fill", "C = 2.0 * tanh(S / 2.0)\n"
                    "output O = softmax(where(causal_mask(N, window=3), C, -1e4)) @ V"),
    ("no_mask", "output O = softmax(50.0 * tanh(S / 50.0)) @ V"),
]
CAPPED_DIMS = {"B": 2, "H": 3, "N": 11, "d": 4}


def capped_inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    b, h, n, d = (CAPPED_DIMS[x] for x in "BHNd")
    # large scores, so that the cap changes them (tanh is not near linear there)
    return {"Q": 4 * rng.standard_normal((b, h, n, d)), "K": 4 * rng.standard_normal((b, h, n, d)),
            "V": rng.standard_normal((b, h, n, d)), "bias": 3 * rng.standard_normal((h, n, n))}


@pytest.mark.slow  # FlexAttention's first eager call takes seconds
@pytest.mark.parametrize("dtype, tolerance", [("float64", 1e-12), ("float32", 2e-6)])
@pytest.mark.parametrize("name, statements", CAPPED, ids=[c[0] for c in CAPPED])
def test_a_soft_capped_attention_runs_through_flex_attention_on_torch(
        name: str, statements: str, dtype: str, tolerance: float) -> None:
    """torch runs a soft-capped pattern as one eager flex_attention call whose score_mod
    applies the ops in the spec's order; its numbers are NumPy's fused and unfused ones, and
    the sampled rows are checked. A mask that hides only until a later op shows the score
    again (here: before the cap) is applied where it stands, not as the block mask."""
    pytest.importorskip("torch")
    text, arrays = CAPPED_HEADER + statements + "\n", capped_inputs(4)
    dense = compile_spec(text, dims=CAPPED_DIMS, fused="off", dtype=dtype).run(arrays)
    blocks = compile_spec(text, dims=CAPPED_DIMS, dtype=dtype).run(arrays)
    flex = compile_spec(text, dims=CAPPED_DIMS, backend="torch", dtype=dtype).run(
        arrays, check_invariants=True)
    assert "soft-cap's tanh among them" in flex.plan[0], flex.plan
    assert "fused, " in blocks.plan[0], blocks.plan
    assert any("fused into flex_attention: 8 row(s) recomputed" in line
               for line in flex.checks), flex.checks
    for other in (dense, blocks):
        np.testing.assert_allclose(flex.outputs["O"], other.outputs["O"], rtol=tolerance,
                                   atol=tolerance)
    assert np.isfinite(flex.outputs["O"]).all()


def test_a_soft_capped_attention_with_a_hidden_row_is_nan_and_a_warning_on_torch() -> None:
    """`j > i` after the cap hides every key from the last query: its row is NaN and the run
    warns, as the unfused run does (FlexAttention's zeros are replaced)."""
    pytest.importorskip("torch")
    text = (CAPPED_HEADER + "C = 30.0 * tanh(S / 30.0)\n"
            "i = arange(N)[:, None]\nj = arange(N)[None, :]\n"
            "output O = softmax(where(j > i, C, -inf)) @ V\n")
    arrays = capped_inputs(5)
    dense = compile_spec(text, dims=CAPPED_DIMS, fused="off").run(arrays)
    flex = compile_spec(text, dims=CAPPED_DIMS, backend="torch").run(arrays, check_invariants=True)
    assert "soft-cap's tanh among them" in flex.plan[0], flex.plan
    out = flex.outputs["O"]
    assert np.isnan(out[:, :, -1]).all() and np.isfinite(out[:, :, :-1]).all()
    np.testing.assert_allclose(out[:, :, :-1], dense.outputs["O"][:, :, :-1], rtol=1e-12,
                               atol=1e-12)
    count = CAPPED_DIMS["B"] * CAPPED_DIMS["H"]
    for result in (flex, dense):
        assert any(f"{count} softmax row(s) are entirely -inf" in w for w in result.warnings), \
            result.warnings


def test_a_soft_capped_attention_with_a_scale_read_from_a_tensor_runs_unfused_on_torch() -> None:
    """The score_mod applies numbers: a scale held in an input stays unfused, saying so
    (NumPy's kernel fuses it), with the same numbers."""
    pytest.importorskip("torch")
    text = CAPPED_HEADER.replace("/ sqrt(d) + bias", "* t + bias").replace(
        "input bias", "input t: []\ninput bias") + \
        "output O = softmax(where(causal_mask(N), 30.0 * tanh(S / 30.0), -inf)) @ V\n"
    arrays = {**capped_inputs(6), "t": np.array(0.7)}
    result = compile_spec(text, dims=CAPPED_DIMS, backend="torch").run(arrays)
    assert result.plan == ["softmax `O` (line 8): not fused: the scores are soft-capped and a "
                           "scale is not a constant: the flex_attention call's score_mod "
                           "applies numbers only"]
    dense = compile_spec(text, dims=CAPPED_DIMS, fused="off").run(arrays)
    np.testing.assert_allclose(result.outputs["O"], dense.outputs["O"], rtol=1e-12, atol=1e-12)
