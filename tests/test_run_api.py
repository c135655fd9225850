"""The Python API: check a spec, compile it, call it with arrays (README, "Python API")."""

from __future__ import annotations

import os
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import shapecheck
from shapecheck.backend import InputError, MemoryLimitError, SpecError, compile_spec

ROOT = Path(__file__).resolve().parent.parent
SINGLE_HEAD = ROOT / "examples" / "single_head.attn"
MULTI_HEAD = ROOT / "examples" / "multi_head.attn"
RNG = np.random.default_rng(3)


def test_the_readme_example_runs(monkeypatch):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert code is not None
    monkeypatch.chdir(ROOT)
    exec(compile(code.group(1), "README.md", "exec"), {})  # noqa: S102 -- our own README


def test_compile_from_text_path_or_program():
    q = RNG.standard_normal((5, 3))
    source = SINGLE_HEAD.read_text(encoding="utf-8")
    results = [compile_spec(spec)(Q=q, K=q, V=q)["O"]
               for spec in (source, SINGLE_HEAD, shapecheck.check_text(source))]
    for other in results[1:]:
        np.testing.assert_array_equal(results[0], other)
    assert shapecheck.load(SINGLE_HEAD).ok and shapecheck.compile_spec is compile_spec


def test_dims_are_read_from_the_arrays_on_each_call():
    spec = compile_spec(SINGLE_HEAD)
    assert spec.inputs == ("Q", "K", "V") and spec.params == () and spec.outputs == ("O",)
    for n, d in ((4, 2), (7, 3), (4, 2)):
        q = RNG.standard_normal((n, d))
        assert spec(Q=q, K=q, V=q)["O"].shape == (n, d)
    assert spec({"Q": q, "K": q, "V": q})["O"].shape == (4, 2)  # a mapping works too


def test_a_spec_that_does_not_verify_raises_with_its_diagnostics():
    with pytest.raises(SpecError) as caught:
        compile_spec(ROOT / "examples" / "broken" / "missing_transpose.attn")
    assert [d.code for d in caught.value.program.diagnostics] == ["SC301"]


def test_missing_unknown_and_contradicting_arrays():
    spec = compile_spec(SINGLE_HEAD)
    q = RNG.standard_normal((4, 2))
    with pytest.raises(InputError, match="no array for `K`, `V`"):
        spec(Q=q)
    with pytest.raises(InputError, match="`Z` is not an input or param of the spec"):
        spec(Q=q, K=q, V=q, Z=q)
    with pytest.raises(InputError, match=r"axis 1 gives d = 3, but input `Q` \(shape \(4, 2\)\)"):
        spec(Q=q, K=RNG.standard_normal((4, 3)), V=q)
    with pytest.raises(InputError, match="element type is <U1"):
        spec(Q=q, K=q, V=np.array([["a", "b"]] * 4))
    unbound = compile_spec(MULTI_HEAD)
    with pytest.raises(InputError, match=r"free dims left unbound: d, H; bind them with "
                       r"dims=\{'d': \.\.\., 'H': \.\.\.\}"):
        unbound(X=RNG.standard_normal((4, 6)), **{w: np.eye(6) for w in unbound.params})


def test_run_generates_keeps_and_checks():
    spec = compile_spec(MULTI_HEAD, dims={"N": 4, "d": 2, "H": 2}, dtype="float32")
    result = spec.run(seed=5, keep_intermediates=True, check_invariants=True)
    assert result.generated == ["X", "W_Q", "W_K", "W_V", "W_O"]
    assert result.bindings == {"N": 4, "d": 2, "H": 2, "D_model": 4}
    assert result.tensors["S"].shape == (2, 4, 4) and result.outputs["Y"].dtype == np.float32
    assert any("every row sums to 1" in line for line in result.checks)
    again = spec.run(seed=5).outputs["Y"]  # fused (nothing kept): the same to rounding
    np.testing.assert_allclose(again, result.outputs["Y"], rtol=1e-5, atol=1e-6)


def test_memory_limit():
    # unfused, the [N, N] table is the largest tensor (fused, there is none: test_run_torch.py)
    spec = compile_spec(SINGLE_HEAD, dims={"N": 512, "d": 8}, max_memory=1 << 20, fused="off")
    with pytest.raises(MemoryLimitError, match=r"the largest tensor is `S` \[512, 512\], 2.0 MiB"):
        spec.run(seed=0)
    assert compile_spec(SINGLE_HEAD, dims={"N": 512, "d": 8}, max_memory=None).run(seed=0)


def _careful_multi_head(X, W_Q, W_K, W_V, W_O, H):
    n, width = X.shape[0], W_Q.shape[1]
    d = width // H
    Q, K, V = ((X @ W).reshape(n, H, d).swapaxes(0, 1) for W in (W_Q, W_K, W_V))
    S = Q @ K.swapaxes(-1, -2)
    S /= np.sqrt(d)
    S -= S.max(axis=-1, keepdims=True)
    np.exp(S, out=S)
    S /= S.sum(axis=-1, keepdims=True)
    return (S @ V).swapaxes(0, 1).reshape(n, width) @ W_O


@pytest.mark.skipif(os.environ.get("PYTHONTRACEMALLOC") is not None, reason="tracemalloc in use")
def test_peak_memory_is_that_of_careful_hand_written_numpy():
    n, heads, d = 256, 4, 16
    arrays = {"X": RNG.standard_normal((n, heads * d))}
    arrays |= {w: RNG.standard_normal((heads * d, heads * d)) for w in ("W_Q", "W_K", "W_V", "W_O")}
    spec = compile_spec(MULTI_HEAD, dims={"H": heads})
    spec(**arrays)  # binds and compiles

    def peak(call) -> int:
        tracemalloc.start()
        try:
            call()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    ours = peak(lambda: spec(**arrays))
    theirs = peak(lambda: _careful_multi_head(*arrays.values(), heads))
    assert ours <= 1.1 * theirs, (ours, theirs)
    np.testing.assert_allclose(spec(**arrays)["Y"], _careful_multi_head(*arrays.values(), heads))
