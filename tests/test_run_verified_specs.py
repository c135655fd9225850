"""Issue 17: specs that verify never run to wrong numbers or stop with an internal error.

One test per numbered item; each failed before its change. The generated corpus
(``test_plan_differential.py``) pins the general rule; these pin the reported cases.
"""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from shapecheck.api import check_text
from shapecheck.backend import compile_spec, differential
from shapecheck.cli import cli

VARIANTS = [("numpy", "auto"), ("numpy", "off"), ("torch", "auto"), ("torch", "off")]


def _outputs(text: str, dims: dict[str, int], **arrays: np.ndarray) -> dict[tuple, dict]:
    """The outputs of every variant, by (backend, fused, keep_intermediates)."""
    results = {}
    for backend, fused in VARIANTS:
        for keep in (False, True):
            spec = compile_spec(text, dims=dims, backend=backend, fused=fused)
            given = {n: a.copy() for n, a in arrays.items()}
            results[backend, fused, keep] = spec.run(given or None, seed=None if given else 3,
                                                     keep_intermediates=keep).outputs
    return results


def _agree(results: dict[tuple, dict], name: str = "O") -> None:
    reference = results["numpy", "off", False][name]
    for variant, outputs in results.items():
        np.testing.assert_allclose(outputs[name], reference, rtol=1e-10, atol=1e-12,
                                   err_msg=str(variant))


ATTENTION = """dim N, d
input Q: [N, d]
input K: [N, d]
input V: [N, d]
"""


# 1. a scale in a statement of its own is applied once by the fused plan


@pytest.mark.parametrize("scaling", [
    "q = Q * d ** -0.5\nk = K\n",                           # gemma: q.mul_(self.scaling)
    "q = Q * d ** -0.25\nk = K * d ** -0.25\n",             # whisper
    "q = Q\nk = K / sqrt(d)\n",
])
def test_a_scale_on_a_named_q_or_k_is_applied_once(scaling):
    text = ATTENTION + scaling + "output O = softmax(q @ k.T) @ V\n"
    results = _outputs(text, {"N": 5, "d": 4})
    _agree(results)
    q, k, v = (differential.inputs_for(check_text(text, {"N": 5, "d": 4}), 3)[n] for n in "QKV")
    scores = q @ k.T / 2.0
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    expected = weights / weights.sum(axis=-1, keepdims=True) @ v
    np.testing.assert_allclose(results["numpy", "auto", False]["O"], expected, rtol=1e-12)


def test_a_scaled_k_with_a_named_bias_is_scaled_once():
    text = ATTENTION + ("input bias: [N, N]\nk = K * d ** -0.5\nS = Q @ k.T + bias\n"
                        "output O = softmax(S) @ V\n")
    _agree(_outputs(text, {"N": 6, "d": 4}))


# 2. the caller's arrays are never written; no output aliases an input


def test_numpy_never_writes_into_the_callers_arrays():
    text = ("dim N\ninput X: [N, 2]\noutput A = reshape(X, [2*N])\n"
            "output B = rmsnorm(reshape(X.T, [2, N, 1]))\n")
    x = np.arange(8.0).reshape(4, 2)
    for backend in ("numpy", "torch"):
        for keep in (False, True):
            given = x.copy()
            result = compile_spec(text, backend=backend).run({"X": given},
                                                             keep_intermediates=keep)
            np.testing.assert_array_equal(given, x)
            np.testing.assert_array_equal(result.outputs["A"], x.reshape(8))
            assert not np.shares_memory(result.outputs["A"], given)
            result.outputs["A"][...] = -1  # an output is the caller's to write
            np.testing.assert_array_equal(given, x)


# 3. a named mask turned into a named bias


def test_a_named_causal_mask_turned_into_a_named_bias_runs_fused():
    text = ATTENTION + ("band = causal_mask(N)\nbias = where(band, 0.0, -inf)\n"
                        "P = softmax(Q @ K.T / sqrt(d) + bias)\noutput O = P @ V\n")
    results = _outputs(text, {"N": 5, "d": 3})
    _agree(results)
    note = compile_spec(text, dims={"N": 5, "d": 3}).run(seed=0).plan
    assert ": fused, " in note[0]


def test_a_causal_mask_read_by_another_statement_too_is_still_computed():
    text = ATTENTION + ("band = causal_mask(N)\nbias = where(band, 0.0, -inf)\n"
                        "output count = sum(band)\n"
                        "P = softmax(Q @ K.T / sqrt(d) + bias)\noutput O = P @ V\n")
    results = _outputs(text, {"N": 5, "d": 3})
    _agree(results)
    _agree(results, "count")


# 4. layernorm and rmsnorm of a scalar


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_normalising_a_scalar_is_sc305(norm):
    program = check_text(f"dim N\ninput x: [N]\ns = sum(x)\noutput y = {norm}(s)\n")
    assert [d.code for d in program.diagnostics if d.severity == "error"] == ["SC305"]


# 5. bool under a plain annotation; 0-d inputs


def test_a_bool_value_under_a_plain_annotation_stays_bool_on_every_backend():
    text = "dim N\ninput X: [N, N]\nM: [N, N] = X > 0\noutput Z = where(M, X, 0.0)\noutput M\n"
    assert check_text(text).ok
    x = np.array([[1.0, -1.0], [-2.0, 3.0]])
    for variant, outputs in _outputs(text, {}, X=x).items():
        assert outputs["M"].dtype == np.bool_, variant
        np.testing.assert_array_equal(outputs["Z"], np.where(x > 0, x, 0.0))


def test_torch_keeps_a_0d_input_0d():
    text = "dim N\ninput X: [N]\ninput s: []\noutput t = s * 2.0\noutput Y = X * s\n"
    for variant, outputs in _outputs(text, {"N": 3}).items():
        assert outputs["t"].shape == (), variant


# 6. report of a where of scalars


def test_report_of_a_where_of_scalars(tmp_path):
    spec = tmp_path / "z.attn"
    spec.write_text("dim N\nZ = where(N > 1, 1.0, 0.0)\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["report", str(spec), "-o", str(tmp_path / "r.md")])
    assert result.exit_code == 0, result.output
    assert "where" in (tmp_path / "r.md").read_text(encoding="utf-8")


# 7. the nesting limit counts what recurses, in every pass and backend


def _nested(kind: str, levels: int) -> str:
    """An expression ``levels`` deep (the parser's count) of one kind of node."""
    if kind == "call":
        return "exp(" * (levels - 1) + "X" + ")" * (levels - 1)
    if kind == "unary":
        return "-" * (levels - 1) + "X"
    if kind == "binop":  # each level a sum and its parentheses
        half = (levels - 1) // 2
        return "(X + " * half + "X" + ")" * half
    if kind == "where":
        return "where(M, " * (levels - 1) + "X" + ", X)" * (levels - 1)
    if kind == "transpose":
        return "X" + ".T" * (levels - 1)
    raise AssertionError(kind)


KINDS = ["call", "unary", "binop", "where", "transpose"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_expression_nested_to_the_limit_runs_everywhere(kind, tmp_path):
    from shapecheck.syntax import parser

    spec = tmp_path / "deep.attn"
    spec.write_text("dim N\ninput X: [N, N]\ninput M: bool[N, N]\n"
                    f"output Y = {_nested(kind, parser.MAX_NESTING - 1)}\noutput Z = sum(M)\n",
                    encoding="utf-8")
    runner = CliRunner()
    commands = [["verify", str(spec)], ["verify", str(spec), "--format", "json"],
                ["verify", str(spec), "--format", "sarif"],
                ["report", str(spec), "-o", str(tmp_path / "r.html")],
                ["report", str(spec), "-o", str(tmp_path / "r.md")]]
    for backend in ("numpy", "torch"):
        for fused in ("auto", "off"):
            commands.append(["run", str(spec), "--dim", "N=2", "--backend", backend,
                             "--fused", fused, "--save", str(tmp_path / "all.npz"), "--save-all"])
    for command in commands:
        result = runner.invoke(cli, command)
        assert result.exit_code == 0, (command, result.output)
        assert "RecursionError" not in result.output, command


@pytest.mark.parametrize("kind", KINDS)
def test_one_level_more_is_sc003(kind):
    from shapecheck.syntax import parser

    program = check_text("dim N\ninput X: [N, N]\ninput M: bool[N, N]\n"
                         f"output Y = {_nested(kind, parser.MAX_NESTING + 2)}\n")
    assert "SC003" in {d.code for d in program.diagnostics}


# 8. SymPy's positivity work is bounded too


def test_positivity_of_a_huge_polynomial_does_not_hang():
    import time

    started = time.process_time()
    program = check_text("dim d\nconstraint 2 >= 1 / d\n"
                         "input X: [170141183460469231731687303715884105728 ** 32 - d ** 64]\n")
    assert time.process_time() - started < 5
    # the same verdict as with `d >= 1`, which never asked SymPy
    assert [d.code for d in program.diagnostics] == ["SC201"]


# 9. the checker knows NumPy's element limit


def test_more_elements_than_numpy_can_index_is_sc003():
    text = "dim B, H\noutput Z = ones([B, H + (10**29 - H)])\n"
    program = check_text(text, {"B": 2, "H": 3})
    assert [d.code for d in program.diagnostics] == ["SC003"]
    assert "more than the 2^60 NumPy can index" in program.diagnostics[0].message
    assert check_text("dim B\noutput Z = ones([B, 2 ** 30, 2 ** 29])\n").ok


# conform and the Python API take `fused=`; the conform command `--fused`

GEMMA = ATTENTION + "q = Q * d ** -0.5\noutput O = softmax(q @ K.T) @ V\n"


def _gemma(Q, K, V):
    scores = (Q * Q.shape[-1] ** -0.5) @ K.T  # q.mul_(self.scaling), then the product
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True) @ V


@pytest.mark.parametrize("fused", ["auto", "off"])
def test_conform_accepts_correct_code_on_every_variant(fused):
    from shapecheck.testing import assert_conforms

    assert_conforms(GEMMA, _gemma, fused=fused, cases=3)


def test_conform_refuses_an_unknown_fused_choice():
    from shapecheck.backend import OptionError
    from shapecheck.pytorch.conform import conform

    with pytest.raises(OptionError, match="fused"):
        conform(GEMMA, _gemma, fused="on")


def test_the_conform_command_takes_fused(tmp_path, monkeypatch):
    (tmp_path / "gemma_impl.py").write_text(
        "import numpy as np\n\n"
        "def attend(Q, K, V):\n"
        "    s = (Q * Q.shape[-1] ** -0.5) @ K.T\n"
        "    w = np.exp(s - s.max(axis=-1, keepdims=True))\n"
        "    return w / w.sum(axis=-1, keepdims=True) @ V\n", encoding="utf-8")
    (tmp_path / "gemma.attn").write_text(GEMMA, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for fused in ("auto", "off"):
        result = CliRunner().invoke(cli, ["conform", str(tmp_path / "gemma.attn"),
                                          "gemma_impl:attend", "--fused", fused])
        assert result.exit_code == 0, result.output


def test_the_report_api_has_room_for_deep_nesting_too():
    from shapecheck.syntax import parser
    from shapecheck.report import build_report, render

    program = check_text("dim N\ninput X: [N, N]\n"
                         f"output Y = {_nested('call', parser.MAX_NESTING - 1)}\n")
    assert program.ok
    built = build_report(program, "deep.attn", {})
    assert render(built, "md") and render(built, "html")


@pytest.mark.parametrize("text,codes", [
    # found by a hunt with huge constants: a floor of a degree-64 argument (SymPy
    # re-evaluated it on every expansion), a divisibility asked of SymPy's assumptions
    ("dim N, d\nconstraint (2 ** 64 - (2 ** 64) ** 64) >= (((3 ** 64 + d)) ** 64 // "
     "((2 ** 64 + 2 ** 64) + 2))\ninput X: [N, d]\noutput Y = X / (10 ** 39 + 2 ** 64)\n",
     ["SC003"]),
    ("dim N, d\ninput X: [N, d]\noutput Y = reshape(X, [(((d // d) + (2 + d))) ** 64, -1])\n",
     ["SC003"]),
])
def test_sympys_own_work_stays_within_the_budget(text, codes):
    import time

    started = time.process_time()
    program = check_text(text)
    assert time.process_time() - started < 2
    assert [d.code for d in program.diagnostics] == codes


# found by tools/fuzz.py (seed 17)


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_sketch_whose_values_are_inferred_bool_runs_fused_on_torch():
    # input 679: `~V` makes V a mask; `P @ V` reads it as numbers (SC403) on every variant
    program = check_text("T1 = ~V\nO = softmax(Q @ K.T / sqrt(d)) @ V\n")
    assert program.ok
    from shapecheck.api import admissible_bindings

    for checked in admissible_bindings(program, 2):
        assert differential.disagreements(checked) == []


def test_the_report_of_a_dim_past_the_algebra_budget():
    # inputs 710, 2230: a chain of 30 constraints `c_i == c_{i+1} * c_{i+1} + 1`
    from shapecheck.report import build_report, render

    names = [f"c{i}" for i in range(31)]
    text = ("dim " + ", ".join(names) + "\n"
            + "".join(f"constraint c{i} == c{i + 1} * c{i + 1} + 1\n" for i in range(30))
            + "input X: [c0]\ninput Y: [c0 - 1]\noutput Z = X + Y\n")
    program = check_text(text)
    built = build_report(program, "chain.attn", {})
    assert "c0" in render(built, "md")


def test_the_element_limit_at_bindings_counts_symbolic_sizes():
    # fuzz input 5417: verified at symbolic sizes, refused by `run` at N=3, D=35
    text = "dim B, N, D\noutput T = causal_mask(B, n_k=D ** 64, window=N)\n"
    assert check_text(text).ok
    at_sizes = check_text(text, {"B": 9, "N": 3, "D": 35})
    assert [d.code for d in at_sizes.diagnostics] == ["SC003"]


def test_a_deferred_definition_past_the_algebra_budget_is_sc003():
    """Fuzz seed 41 input 8187: a dim definition whose positivity waited for the spec's
    constraints (issue 18) and then passed the algebra budget let TooComplex escape."""
    text = ("dim a0, a1, a2\ndim F = 2\ndim G = ((a0 * F) // (a0 + 64))\n"
            "constraint (a0 * ((1 // a1)) ** 0) == (F - ((a2) ** 1) ** 64)\n"
            "input X: [(64 // ((a2 // a1)) ** 2), (64 * (a0 - a0))]\ninput Y: [64, a1]\n"
            "Z = reshape(X, [((G * a1) + G), -1])\n")
    found = [(d.code, d.span.line) for d in check_text(text).diagnostics]
    assert ("SC003", 3) in found


def test_a_complex_value_times_a_real_one_runs_on_torch_as_on_numpy():
    """Found by the fuzzer (seed 61 input 663): torch's matmul refused a complex operand
    with a real one, which NumPy multiplies in the wider type."""
    text = ("dim N\ninput X: [N, 2]\ninput Y: [N, N]\n"
            "output Z = Y @ view_as_complex(X[None])[0]\noutput W = view_as_complex(X[None]) @ Y\n")
    rng = np.random.default_rng(3)
    results = _outputs(text, {"N": 3}, X=rng.standard_normal((3, 2)), Y=rng.standard_normal((3, 3)))
    _agree(results, "Z")
    _agree(results, "W")


def test_polar_of_an_infinite_magnitude_is_the_same_infinity_on_numpy_and_torch():
    """Found by the fuzzer (seed 61 input 681): NumPy built polar as `cos + 1j * sin`, so an
    infinite magnitude met the 0 of `1j` and the real part became NaN where torch gives -inf."""
    text = "dim N\ninput R: [N]\ninput A: [N]\noutput Z = polar(exp(R), A)\n"  # exp(1000) = inf
    with np.errstate(over="ignore"):
        results = _outputs(text, {"N": 3}, R=np.array([1000.0, 0.5, 1000.0]),
                           A=np.array([2.0, 0.5, 0.0]))
    reference = results["numpy", "off", False]["Z"]
    assert not np.isnan(reference.real).any() and reference.real[0] == -np.inf
    for variant, outputs in results.items():
        np.testing.assert_array_equal(outputs["Z"].real, reference.real, err_msg=str(variant))
