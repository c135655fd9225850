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
# kernel applies a soft-cap's tanh to each block too; torch and JAX run it unfused)
FUSED = {"causal", "window", "document", "padding", "alibi", "relative", "softcap"}
# and on torch: SDPA and FlexAttention as the plan calls them have no soft-cap step
TORCH_FUSED = FUSED - {"softcap"}
# forms FlexAttention runs: every lookup at a position itself (`doc[q + M - N]` is not)
FLEX = {"causal", "window", "padding", "alibi", "relative"}


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
