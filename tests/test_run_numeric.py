"""The numeric meaning of every construct (language.md sections 4-7), executed.

Each test runs a small spec through ``compile_spec`` and compares with NumPy
written out in the test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from shapecheck.backend import CheckerBug, compile_spec
from shapecheck.backend import numpy_backend
from shapecheck.backend.numpy_backend import erf

RNG = np.random.default_rng(7)


def run(source: str, dtype: str = "float64", **arrays: np.ndarray) -> dict[str, np.ndarray]:
    return compile_spec(source, dtype=dtype).run(arrays, keep_intermediates=True).tensors


def test_transpose_swaps_the_last_two_axes():
    x = RNG.standard_normal((2, 3, 4))
    out = run("dim A, B, C\ninput x: [A, B, C]\ny = x.T\nz = transpose(x)\n"
              "w = transpose(x, [2, 0, 1])", x=x)
    np.testing.assert_array_equal(out["y"], np.swapaxes(x, -1, -2))
    np.testing.assert_array_equal(out["z"], np.swapaxes(x, -1, -2))
    np.testing.assert_array_equal(out["w"], np.transpose(x, (2, 0, 1)))


def test_split_heads_is_head_major_and_merge_heads_inverts_it():
    x = RNG.standard_normal((5, 6))
    spec = compile_spec("dim N, H, d\ninput x: [N, H * d]\nq = split_heads(x, H)\n"
                        "y = merge_heads(q)", dims={"H": 3})
    out = spec.run({"x": x}, keep_intermediates=True).tensors
    for h in range(3):  # head h owns columns h*d ... h*d+d-1
        np.testing.assert_array_equal(out["q"][h], x[:, 2 * h:2 * h + 2])
    np.testing.assert_array_equal(out["y"], x)


def test_causal_mask_repeat_concat_where_constants():
    x = RNG.standard_normal((3, 2))
    out = run("dim N, d\ninput x: [N, d]\nm = causal_mask(N)\nr = repeat(x, 2, axis=0)\n"
              "c = concat([x, x * 2], axis=col)\nw = where(causal_mask(d), ones([d, d]), 0)\n"
              "z = zeros([N]) + sum(m, axis=row)\nk = mean(x, axis=0, keepdims=true)\n"
              "t = max(x) - min(x)", x=x)
    np.testing.assert_array_equal(out["m"], np.tril(np.ones((3, 3), dtype=bool)))
    np.testing.assert_array_equal(out["r"], np.repeat(x, 2, axis=0))
    np.testing.assert_array_equal(out["c"], np.concatenate([x, x * 2], axis=0))
    np.testing.assert_array_equal(out["w"], np.tril(np.ones((2, 2))))
    np.testing.assert_array_equal(out["z"], [1.0, 2.0, 3.0])  # counting a mask gives reals
    np.testing.assert_array_equal(out["k"], x.mean(axis=0, keepdims=True))
    assert out["t"] == x.max() - x.min() and out["t"].shape == ()


def test_einsum_as_numpy():
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 5, 4))
    out = run('dim B, N, M, d\ninput a: [B, N, d]\ninput b: [B, M, d]\n'
              's = einsum("bnd,bmd->bnm", a, b)\nt = einsum("...nd->...dn", a)\n'
              'u = einsum("bnd,bmd", a, b)', a=a, b=b)
    np.testing.assert_allclose(out["s"], np.einsum("bnd,bmd->bnm", a, b))
    np.testing.assert_array_equal(out["t"], np.einsum("...nd->...dn", a))
    np.testing.assert_allclose(out["u"], np.einsum("bnd,bmd", a, b))


@pytest.mark.parametrize("subscripts, operands, expected", [
    # One reading for checker and backend (einsum.parse_subscripts): whitespace anywhere is
    # ignored, and `...` axes the output leaves out are summed, with one operand or two.
    ("...i->i", 1, lambda a, b: a.sum(axis=(0, 1))),
    ("ij - > ji", 1, None),
    (" b n d , b m d ", 2, lambda a, b: np.einsum("bnd,bmd", a, b)),  # implicit: m, n
    ("...i,...i->i", 2, lambda a, b: (a * b).sum(axis=(0, 1))),
])
def test_einsum_runs_what_the_checker_read(subscripts, operands, expected):
    a = RNG.standard_normal((2, 3, 4))
    b = RNG.standard_normal((2, 3, 4))
    if subscripts == "ij - > ji":
        a = a[0]
        expected = lambda a, b: a.T  # noqa: E731
    shape = "[A, B, C]" if a.ndim == 3 else "[B, C]"
    args = "a, b" if operands == 2 else "a"
    out = run(f"dim A, B, C\ninput a: {shape}\ninput b: [A, B, C]\n"
              f"y = einsum(\"{subscripts}\", {args})\noutput y", a=a, b=b)
    np.testing.assert_allclose(out["y"], expected(a, b))


def test_the_checker_knows_numpys_limits():
    """rules.MAX_RANK and MAX_EINSUM_OPERANDS are the installed NumPy's, without importing it."""
    from shapecheck.check.rules import MAX_EINSUM_OPERANDS, MAX_RANK

    np.empty((1,) * MAX_RANK)
    with pytest.raises(ValueError):
        np.empty((1,) * (MAX_RANK + 1))
    vectors = [np.ones(2)] * (MAX_EINSUM_OPERANDS + 1)
    np.einsum(",".join(["i"] * MAX_EINSUM_OPERANDS) + "->i", *vectors[:-1])
    with pytest.raises(ValueError):
        np.einsum(",".join(["i"] * (MAX_EINSUM_OPERANDS + 1)) + "->i", *vectors)


def test_softmax_is_stable_and_sums_to_one_along_its_axis():
    x = RNG.standard_normal((4, 5)) * 1000  # exp would overflow without the shift
    out = run("dim N, M\ninput x: [N, M]\np = softmax(x)\nq = softmax(x, axis=col)", x=x)
    shifted = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out["p"], shifted / shifted.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(out["q"].sum(axis=0), 1.0)
    assert np.isfinite(out["p"]).all()


def test_elementwise_builtins():
    x = np.array([[-1000.0, -2.0, -0.5, 0.0, 0.5, 3.0, 1000.0]])
    out = run("dim N, M\ninput x: [N, M]\ne = exp(x / 1000)\nt = tanh(x)\ns = sigmoid(x)\n"
              "r = relu(x)\na = abs(x)\ng = gelu(x)\nl = log(abs(x) + 1)\n"
              "q = sqrt(abs(x))\nn = -x ** 2", x=x)
    np.testing.assert_allclose(out["e"], np.exp(x / 1000))
    np.testing.assert_allclose(out["t"], np.tanh(x))
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(out["s"], 1 / (1 + np.exp(-x)), rtol=1e-15)
    np.testing.assert_array_equal(out["r"], np.maximum(x, 0))
    np.testing.assert_array_equal(out["a"], np.abs(x))
    exact = np.array([[v * (1 + math.erf(v / math.sqrt(2))) / 2 for v in x[0]]])
    np.testing.assert_allclose(out["g"], exact, rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(out["l"], np.log(np.abs(x) + 1))
    np.testing.assert_allclose(out["q"], np.sqrt(np.abs(x)))
    np.testing.assert_array_equal(out["n"], -(x ** 2))  # ** binds tighter than unary -


def test_erf_matches_math_erf_to_a_few_ulps():
    xs = np.concatenate([np.linspace(-7, 7, 20001), np.geomspace(1e-300, 1, 200),
                         [0.0, -0.0, 2.0, -2.0, np.inf, -np.inf]])
    exact = np.array([math.erf(v) for v in xs])
    got = erf(xs)
    ulps = np.abs(got - exact) / np.spacing(np.maximum(np.abs(exact), 1e-300))
    assert ulps.max() <= 8
    assert np.isnan(erf(np.array([np.nan]))).all()
    single = erf(xs.astype(np.float32))
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, exact, rtol=2e-6, atol=1e-7)


def test_layernorm_and_rmsnorm_use_eps_and_no_scale():
    x = RNG.standard_normal((3, 8))
    out = run("dim N, d\ninput x: [N, d]\na = layernorm(x)\nb = rmsnorm(x)\n"
              "c = layernorm(x, eps=0.5)\nk = layernorm(x * 1)\nm = rmsnorm(x + 0)", x=x)
    centred = x - x.mean(axis=-1, keepdims=True)
    expected = centred / np.sqrt((centred ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out["a"], expected)
    np.testing.assert_allclose(out["k"], expected)  # in place on a temporary: same values
    np.testing.assert_allclose(out["c"], centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + 0.5))
    rms = x / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out["b"], rms)
    np.testing.assert_allclose(out["m"], rms)


def test_dims_used_as_values_and_dropout_is_identity():
    x = RNG.standard_normal((2, 4))
    out = run("dim N, d\ninput x: [N, d]\ny = dropout(x, 0.1) * d ** -0.5 + N // 2", x=x)
    np.testing.assert_allclose(out["y"], x * 4 ** -0.5 + 1)


FLOAT32_SPEC = """
dim N, d, H
dim D = H * d
input X: [N, D]
input keep: bool[N, N]
param W: [D, D]
Q = split_heads(layernorm(X) @ W, H)
S = Q @ Q.T / sqrt(d) * d ** -0.5 + 1e-3 - H // 3
Sm = where(keep, S, -inf)
Mc = where(causal_mask(N), Sm, -1e9)
P = softmax(Mc, axis=row)
O = merge_heads(P @ Q)
A = gelu(O) + sigmoid(O) * tanh(O) - relu(O) + abs(O) + exp(-O) + log(abs(O) + 1) + sqrt(abs(O))
B = rmsnorm(A) + dropout(A, 0.5) + mean(A, axis=row, keepdims=true) + sum(A) + max(A) - min(A)
C = concat([B, repeat(B, 2, axis=0)], axis=0)
E = einsum("nd,md->nm", C, C)
F = reshape(transpose(C, [1, 0]), [D, -1]).T @ ones([D, 2]) + zeros([2])
G = sum(keep) + mean(keep, axis=row) + 1
"""


def test_float32_stays_float32_end_to_end():
    spec = compile_spec(FLOAT32_SPEC, dtype="float32", dims={"N": 4, "d": 2, "H": 3})
    result = spec.run(seed=1, keep_intermediates=True, check_invariants=True)
    kinds = {name: value.dtype for name, value in result.tensors.items()}
    assert {k: v for k, v in kinds.items() if v not in (np.float32, np.bool_)} == {}
    assert kinds["keep"] == np.bool_ and kinds["P"] == np.float32
    float64 = compile_spec(FLOAT32_SPEC, dims={"N": 4, "d": 2, "H": 3}).run(seed=1)
    for name, value in result.outputs.items():  # the same computation, rounded
        np.testing.assert_allclose(value, float64.outputs[name], rtol=2e-3, atol=2e-3)


def test_a_fully_masked_row_gives_nan_and_a_warning_naming_the_statement():
    keep = np.ones((3, 3), dtype=bool)
    keep[1] = False
    spec = compile_spec("dim N\ninput S: [N, N]\ninput keep: bool[N, N]\n"
                        "Sm = where(keep, S, -inf)\nP = softmax(Sm, axis=row)")
    result = spec.run({"S": np.zeros((3, 3)), "keep": keep}, check_invariants=True)
    assert np.isnan(result.outputs["P"][1]).all()
    assert not np.isnan(result.outputs["P"][[0, 2]]).any()
    assert any("`P` (line 5): 1 softmax row(s) are entirely -inf" in w for w in result.warnings)
    assert any("that is not NaN sums to 1" in c for c in result.checks)


# --- memory reuse never changes a value ---------------------------------------------------------


def _softmax(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


REUSE_CASES = {
    # B is a view of A: the softmax must not overwrite A
    "A = exp(X)\nB = A.T\nC = softmax(A)\noutput B\noutput C":
        lambda x: {"B": np.exp(x).T, "C": _softmax(np.exp(x))},
    # A is read twice in one statement
    "A = exp(X)\nC = softmax(A) + A":
        lambda x: {"C": _softmax(np.exp(x)) + np.exp(x)},
    # S is an output: the softmax must not overwrite it
    "S = X @ X.T\nP = softmax(S)\noutput S\noutput P":
        lambda x: {"S": x @ x.T, "P": _softmax(x @ x.T)},
    # a view of a view, read after A's last use
    "A = exp(X)\nB = transpose(A)\nC = B.T\nD = softmax(A)\nE = C + D":
        lambda x: {"E": np.exp(x) + _softmax(np.exp(x))},
    # a chain of hand-overs
    "A = X * 2\nB = A + 1\nC = -B\nD = where(causal_mask(N), C, 0)\nE = softmax(D)":
        lambda x: {"E": _softmax(np.where(np.tri(4, dtype=bool), -(x * 2 + 1), 0))},
}


@pytest.mark.parametrize("source", list(REUSE_CASES))
def test_buffers_are_reused_only_when_nothing_else_reads_them(source):
    x = RNG.standard_normal((4, 4))
    spec = compile_spec("dim N\ninput X: [N, N]\n" + source)
    expected = REUSE_CASES[source](x)
    for keep in (False, True):  # keep_intermediates: no reuse at all
        outputs = spec.run({"X": x}, keep_intermediates=keep).outputs
        assert set(outputs) == set(expected)
        for name, value in outputs.items():
            np.testing.assert_allclose(value, expected[name], err_msg=name)


def test_inputs_are_never_overwritten():
    x = RNG.standard_normal((4, 4))
    copy = x.copy()
    compile_spec("dim N\ninput X: [N, N]\nA = softmax(X)\nB = -X\nC = where(causal_mask(N), X, 0)")(X=x)
    np.testing.assert_array_equal(x, copy)


# --- disagreement with the checker is a bug, never ignored ---------------------------------------


def test_a_runtime_shape_that_differs_from_the_checker_is_a_checker_bug(monkeypatch):
    monkeypatch.setitem(numpy_backend.BUILTINS, "transpose", numpy_backend.BUILTINS["dropout"])
    spec = compile_spec("dim N, d\ninput X: [N, d]\nY = transpose(X)")
    with pytest.raises(CheckerBug, match=r"checker bug: `Y` \(line 3\) has runtime shape \[2, 3\], "
                       r"but the checker computed \[d, N\], which is \[3, 2\]"):
        spec(X=np.zeros((2, 3)))


def test_bool_tensors_in_arithmetic_are_zeros_and_ones_in_the_run_dtype():
    m = np.array([[True, False], [False, True]])
    s = RNG.standard_normal((2, 2)).astype(np.float32)
    spec = compile_spec("dim N\ninput M: bool[N, N]\ninput S: [N, N]\nA = S + M\nB = M * M\n"
                        "C = M + M\nD = M @ S\nE = einsum(\"ij,jk->ik\", M, S)\nF = -M\n"
                        "G = exp(M)\nP = softmax(M)\nZ = dropout(M)", dtype="float32")
    assert spec.program.ok and any(d.code == "SC403" for d in spec.program.diagnostics)
    out = spec.run({"M": m, "S": s}, keep_intermediates=True).tensors
    ones = m.astype(np.float32)
    np.testing.assert_allclose(out["A"], s + ones)
    np.testing.assert_array_equal(out["B"], m & m)  # NumPy's bool * and + : and, or
    np.testing.assert_array_equal(out["C"], m | m)
    np.testing.assert_allclose(out["D"], ones @ s)
    np.testing.assert_allclose(out["E"], ones @ s)
    np.testing.assert_array_equal(out["F"], -ones)
    np.testing.assert_allclose(out["G"], np.exp(ones))
    np.testing.assert_array_equal(out["Z"], ones)
    assert {n: v.dtype.name for n, v in out.items() if n not in ("M", "B", "C")} == dict.fromkeys(
        ["S", "A", "D", "E", "F", "G", "P", "Z"], "float32")


def test_the_numpy_table_has_a_row_for_every_builtin_and_the_recipes_name_builtins():
    from shapecheck.backend import lowering
    from shapecheck.check.builtins import BUILTINS

    assert set(numpy_backend.BUILTINS) == set(BUILTINS)
    assert set(lowering.RECIPES) | set(lowering.RUNS_AS) <= set(BUILTINS)
    # an alias runs its target's row, in every framework
    assert numpy_backend.BUILTINS["swapaxes"] is numpy_backend.BUILTINS["transpose"]
