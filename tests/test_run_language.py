"""The numeric meaning of issue 10's constructs, executed and compared with NumPy
written out here: indexing and slicing (also as a property: the checker accepts a
slice exactly when NumPy would neither clamp it nor make it empty, and then the run
equals NumPy's), comparisons and logic, and the new builtins.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shapecheck.api import check_text
from shapecheck.backend import compile_spec

RNG = np.random.default_rng(10)


def run(source: str, dtype: str = "float64", dims: dict[str, int] | None = None,
        **arrays: np.ndarray) -> dict[str, np.ndarray]:
    spec = compile_spec(source, dims=dims, dtype=dtype)
    return spec.run(arrays, keep_intermediates=True, check_invariants=True).tensors


# --- indexing and slicing ---------------------------------------------------------------------


def test_slices_indices_new_axes_and_ellipsis_as_numpy():
    x = RNG.standard_normal((4, 3, 6))
    out = run("dim T, N, h\ndim d = 2 * h\nconstraint T >= 3\ninput x: [T, N, d]\n"
              "a = x[..., :h]\nb = x[:, :, h:]\nc = x[..., ::2]\ne = x[..., 1::2]\n"
              "f = x[T - 1]\ng = x[-1, None, :, -h:]\ni = x[:, 0, ...]\nj = x[..., ::-1]\n"
              "k = x[1:3, None]\nl = x[..., h - 1::-2]\nm = x[0, 0, 0]\nn = x[None, ..., None]",
              x=x)
    np.testing.assert_array_equal(out["a"], x[..., :3])
    np.testing.assert_array_equal(out["b"], x[:, :, 3:])
    np.testing.assert_array_equal(out["c"], x[..., ::2])
    np.testing.assert_array_equal(out["e"], x[..., 1::2])
    np.testing.assert_array_equal(out["f"], x[3])
    np.testing.assert_array_equal(out["g"], x[-1, None, :, -3:])
    np.testing.assert_array_equal(out["i"], x[:, 0, ...])
    np.testing.assert_array_equal(out["j"], x[..., ::-1])
    np.testing.assert_array_equal(out["k"], x[1:3, None])
    np.testing.assert_array_equal(out["l"], x[..., 2::-2])
    assert out["m"] == x[0, 0, 0] and np.shape(out["m"]) == ()
    np.testing.assert_array_equal(out["n"], x[None, ..., None])


def test_a_slice_of_a_temporary_written_in_place_leaves_the_inputs_alone():
    x = RNG.standard_normal((3, 4))
    before = x.copy()
    out = run("dim N, h\ndim d = 2 * h\ninput x: [N, d]\n"
              "a = (x * 2)[:, :h] + 1\nb = -(x[:, h:])\nc = exp(x[..., ::2]) * x[..., 1::2]", x=x)
    np.testing.assert_array_equal(x, before)
    np.testing.assert_array_equal(out["a"], x[:, :2] * 2 + 1)
    np.testing.assert_array_equal(out["b"], -x[:, 2:])
    np.testing.assert_allclose(out["c"], np.exp(x[..., ::2]) * x[..., 1::2])


def _literal(value: int | None) -> str:
    return "" if value is None else str(value)


bounds = st.one_of(st.none(), st.integers(-8, 8))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(n=st.integers(1, 6), start=bounds, stop=bounds,
       step=st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0)))
def test_a_slice_checks_exactly_when_numpy_neither_clamps_nor_empties_it(n, start, stop, step):
    text = f"{_literal(start)}:{_literal(stop)}" + ("" if step is None else f":{step}")
    source = f"dim N\ninput x: [N]\ny = x[{text}]\n"
    forward = step is None or step > 0
    last = n if forward else n - 1
    in_range = all(b is None or -n <= b <= last for b in (start, stop))
    x = np.arange(n, dtype=np.float64)
    expected = x[slice(start, stop, step)]
    program = check_text(source, {"N": n})
    assert program.ok == (in_range and expected.size > 0), (text, n, program.diagnostics)
    if program.ok:
        np.testing.assert_array_equal(run(source, dims={"N": n}, x=x)["y"], expected)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(n=st.integers(1, 5), index=st.integers(-7, 7))
def test_an_index_checks_exactly_when_numpy_accepts_it(n, index):
    source = f"dim N\ninput x: [N, 2]\ny = x[{index}]\n"
    program = check_text(source, {"N": n})
    assert program.ok == (-n <= index < n), (index, n)
    if program.ok:
        x = RNG.standard_normal((n, 2))
        np.testing.assert_array_equal(run(source, dims={"N": n}, x=x)["y"], x[index])


# --- comparisons and logic ----------------------------------------------------------------------


def test_comparisons_and_logic_give_bool_arrays():
    s = RNG.standard_normal((4, 4))
    m = RNG.random((4, 4)) < 0.5
    out = run("dim N, W\ninput s: [N, N]\ninput m: bool[N, N]\n"
              "i = arange(N)[:, None]\nj = arange(N)[None, :]\n"
              "a = (j <= i) & (i - j < W)\nb = ~m | (s > 0)\nc = s == s.T\ne = m != m.T\n"
              "f = m == 1\ng = where(a, s, -inf)\nk = N >= W",
              dims={"W": 2}, s=s, m=m)
    i, j = np.arange(4)[:, None], np.arange(4)[None, :]
    window = (j <= i) & (i - j < 2)
    np.testing.assert_array_equal(out["a"], window)
    np.testing.assert_array_equal(out["b"], ~m | (s > 0))
    np.testing.assert_array_equal(out["c"], s == s.T)
    np.testing.assert_array_equal(out["e"], m != m.T)
    np.testing.assert_array_equal(out["f"], m)
    np.testing.assert_array_equal(out["g"], np.where(window, s, -np.inf))
    assert out["k"] == np.bool_(True)
    for name in "abcefk":
        assert out[name].dtype == np.bool_, name


# --- builtins ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_new_elementwise_builtins(dtype):
    x = np.array([[-30.0, -2.0, -0.5, 0.0, 0.5, 3.0, 30.0]])
    out = run("dim N, M\ninput x: [N, M]\na = cos(x)\nb = sin(x)\nc = silu(x)\n"
              "e = softplus(x)\nf = erf(x)\ng = square(x)\nh = rsqrt(abs(x) + 1)\n"
              "i = elu(x)\nj = elu(x, alpha=0.5)\nk = rsqrt(4)", dtype=dtype, x=x)
    rtol = 1e-14 if dtype == "float64" else 1e-6
    np.testing.assert_allclose(out["a"], np.cos(x), rtol=rtol)
    np.testing.assert_allclose(out["b"], np.sin(x), rtol=rtol, atol=1e-7)
    np.testing.assert_allclose(out["c"], x / (1 + np.exp(-x)), rtol=rtol, atol=1e-30)
    np.testing.assert_allclose(out["e"], np.log1p(np.exp(x)), rtol=rtol, atol=1e-30)
    np.testing.assert_allclose(out["f"], [[math.erf(v) for v in x[0]]], rtol=rtol)
    np.testing.assert_allclose(out["g"], x * x, rtol=rtol)
    np.testing.assert_allclose(out["h"], 1 / np.sqrt(np.abs(x) + 1), rtol=rtol)
    np.testing.assert_allclose(out["i"], np.where(x > 0, x, np.exp(x) - 1), rtol=rtol, atol=1e-7)
    np.testing.assert_allclose(out["j"], np.where(x > 0, x, 0.5 * (np.exp(x) - 1)), rtol=rtol,
                               atol=1e-7)
    assert out["k"] == 0.5
    for name in "abcefghijk":
        assert out[name].dtype == np.dtype(dtype), name


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_acos_is_the_arc_cosine(dtype):
    """YOSO's collision probability `1 - acos(q·k)/π` (issue 29): `acos`, with its
    spellings, is the arc cosine in [0, π]; outside [-1, 1] it is NaN, as NumPy and PyTorch
    give."""
    x = np.array([[-1.0, -0.5, 0.0, 0.25, 1.0, 2.0]])
    out = run("dim N, M\ninput x: [N, M]\na = acos(x)\nb = x.acos()\nc = torch.arccos(x)\n"
              "d = np.arccos(x) + math.acos(0.5)", dtype=dtype, x=x)
    rtol = 1e-14 if dtype == "float64" else 1e-6
    with np.errstate(invalid="ignore"):
        expected = np.arccos(x)
    for name in "abc":
        np.testing.assert_allclose(out[name], expected, rtol=rtol)
        assert out[name].dtype == np.dtype(dtype), name
    np.testing.assert_allclose(out["d"], expected + math.pi / 3, rtol=rtol)
    assert out["a"][0, 0] == pytest.approx(math.pi) and np.isnan(out["a"][0, -1])


def test_arange_stack_tril_triu():
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    m = RNG.random((3, 4)) < 0.5
    out = run("dim N, d\ninput x: [N, d]\ninput y: [N, d]\ninput m: bool[N, d]\n"
              "p = arange(d)\ns = stack([x, y])\nt = stack((x, y, x), axis=-1)\n"
              "u = stack([x, y], dim=1)\nlo = tril(x)\nhi = triu(x, 1)\nlk = tril(x, k=d - N)\n"
              "tm = tril(m, -1)", x=x, y=y, m=m)
    np.testing.assert_array_equal(out["p"], np.arange(4.0))
    np.testing.assert_array_equal(out["s"], np.stack([x, y]))
    np.testing.assert_array_equal(out["t"], np.stack([x, y, x], axis=-1))
    np.testing.assert_array_equal(out["u"], np.stack([x, y], axis=1))
    np.testing.assert_array_equal(out["lo"], np.tril(x))
    np.testing.assert_array_equal(out["hi"], np.triu(x, 1))
    np.testing.assert_array_equal(out["lk"], np.tril(x, 1))
    np.testing.assert_array_equal(out["tm"], np.tril(m, -1))
    assert out["tm"].dtype == np.bool_


@pytest.mark.parametrize(("queries", "keys", "window"),
                         [(4, 4, None), (2, 6, None), (1, 5, None), (5, 5, 2), (3, 7, 3), (6, 3, None)])
def test_causal_mask_is_aligned_bottom_right_with_an_optional_window(queries, keys, window):
    dims = {"A": queries, "B": keys} | ({"W": window} if window else {})
    out = run(f"dim {', '.join(dims)}\nm = causal_mask(A, B{', window=W' if window else ''})\n",
              dims=dims)
    # Written out: query i sits at absolute position i + keys - queries.
    expected = np.zeros((queries, keys), dtype=bool)
    for i in range(queries):
        position = i + keys - queries
        for j in range(keys):
            expected[i, j] = j <= position and (window is None or position - j < window)
    np.testing.assert_array_equal(out["m"], expected)
    # The definition in docs/language.md: tril(ones([N_q, N_k]), k = N_k - N_q).
    ones = np.ones((queries, keys))
    defined = np.tril(ones, k=keys - queries).astype(bool)
    if window:
        defined &= ~np.tril(ones, k=keys - queries - window).astype(bool)
    np.testing.assert_array_equal(expected, defined)
