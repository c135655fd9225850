"""The JAX backend: the third op table on the one plan, held to NumPy's numbers.

As for torch (tests/test_torch_backend.py): every builtin's call and an example run on
JAX and NumPy, compared statement by statement at float64 (JAX's 64-bit types, on for the
run only) and at float32; the fused form (one ``jax.nn.dot_product_attention`` call, float32)
against NumPy's outputs; the generated differential corpus on JAX (a sample here); `run
--backend jax` and conformance of a plain JAX function. Every example and verifying test
spec, and one corpus spec in ten, run on JAX in tests/test_plan_differential.py (slow). Skipped where jax is not installed (the test extra installs it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from click.testing import CliRunner  # noqa: E402

import shapecheck  # noqa: E402
from shapecheck.api import admissible_bindings, check_path, check_text  # noqa: E402
from shapecheck.backend import CheckerBug, OptionError, differential, jax_backend  # noqa: E402
from shapecheck.backend.compiled import CompiledSpec  # noqa: E402
from shapecheck.backend.reference import reference  # noqa: E402
from shapecheck.check import builtins  # noqa: E402
from shapecheck.cli import cli  # noqa: E402
from shapecheck.messages.diagnostics import shown  # noqa: E402
from shapecheck.pytorch.conform import conform  # noqa: E402

from builtin_calls import CALLS, HEAD  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.attn"))
MEMORY_CAP = 64 << 20
TOLERANCE = {"float64": (1e-12, 1e-13), "float32": (2e-6, 1e-6)}  # as for torch


def _x64() -> bool:
    return bool(jax.config.jax_enable_x64)


def _compare(program, dtype: str, seed: int, **options) -> None:
    """JAX and NumPy (unfused, every tensor kept) agree on every tensor JAX keeps."""
    case = reference(program, dtype, seed=seed)
    expected = CompiledSpec(program, dims=program.dims.bindings, dtype=dtype,
                            max_memory=MEMORY_CAP, fused="off").run(
        case.inputs, keep_intermediates=True, check_invariants=True)
    plan = jax_backend.build_plan(program, dtype, **options)
    frame = plan.execute(case.inputs, check_invariants=True)
    versions = {shown(name): name for name in program.outputs}
    rtol, atol = TOLERANCE[dtype]
    for name, value in expected.tensors.items():
        got = frame.values.get(versions.get(name, name))
        if got is None:  # not computed: fused scores
            continue
        assert (got.shape, got.dtype) == (value.shape, value.dtype), name
        np.testing.assert_allclose(got, value, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=f"{name} at {program.dims.bindings}")
    assert not _x64()  # restored after the run


def test_the_jax_table_covers_every_builtin():
    assert set(jax_backend.BUILTINS) == set(builtins.BUILTINS) == set(CALLS)


# JAX compiles each operation for each shape on first use: the fast tier runs one builtin of
# each kind of row (a recipe, positions, complex numbers, softmax, the shared ones) in
# float32 (float64 has a fast test of its own), the slow tier every builtin in both.
SAMPLE = ("softmax", "layernorm", "scatter", "polar")


@pytest.mark.parametrize("name, dtype", [
    pytest.param(name, dtype, marks=() if name in SAMPLE and dtype == "float32" else
                 pytest.mark.slow) for name in sorted(CALLS) for dtype in ("float64", "float32")])
def test_every_builtin_runs_in_jax_as_in_numpy(name: str, dtype: str) -> None:
    for bindings in ({"N": 5, "M": 3, "H": 2}, {"N": 4, "M": 4, "H": 1}):
        program = check_text(HEAD + CALLS[name] + "\n", bindings)
        assert program.ok, (name, [d.message for d in program.diagnostics])
        _compare(program, dtype, seed=7, keep_all=True)


def test_an_example_runs_in_jax_as_in_numpy() -> None:
    (checked,) = admissible_bindings(check_path(ROOT / "examples" / "key_padding.attn"), 1, seed=1)
    _compare(checked, "float64", seed=2, keep_all=True)
    _compare(checked, "float32", seed=3)  # fused


# --- 64-bit types for the run only ---------------------------------------------------------------


def test_float64_runs_in_64_bits_and_float32_stays_float32():
    program = check_text((ROOT / "examples" / "causal.attn").read_text(encoding="utf-8"),
                         {"N": 7, "d": 3, "H": 2})
    for dtype in ("float64", "float32"):
        case = reference(program, dtype, seed=0)
        frame = jax_backend.build_plan(program, dtype, fuse=False).execute(
            case.inputs, check_invariants=True, tensors=True)
        assert frame.values["Y"].dtype == np.dtype(dtype)
        assert not _x64()


def test_the_x64_flag_is_restored_after_an_error_and_a_callers_own_survives(monkeypatch):
    monkeypatch.setitem(jax_backend.BUILTINS, "transpose", jax_backend.BUILTINS["dropout"])
    program = check_text("dim N, d\ninput Q: [N, d]\noutput T = transpose(Q)\n", {"N": 2, "d": 3})
    plan = jax_backend.build_plan(program, "float64")
    with pytest.raises(CheckerBug, match=r"`T` \(line 3\) has runtime shape \[2, 3\]"):
        plan.execute({"Q": np.zeros((2, 3))})
    assert not _x64()
    doubled = check_text("dim N\ninput Q: [N]\noutput T = Q * 2\n", {"N": 2})
    with jax.enable_x64(True):  # a caller's own setting survives a float32 run
        frame = jax_backend.build_plan(doubled, "float32").execute(
            {"Q": np.ones(2, np.float32)}, tensors=True)
        assert frame.values["T"].dtype == np.float32 and _x64()


def test_inputs_are_never_written_and_outputs_are_the_callers():
    spec = shapecheck.compile_spec(ROOT / "examples" / "multi_head.attn", backend="jax")
    rng = np.random.default_rng(0)
    arrays = {"X": rng.standard_normal((5, 4)), **{w: rng.standard_normal((4, 4))
                                                   for w in ("W_Q", "W_K", "W_V", "W_O")}}
    copies = {name: array.copy() for name, array in arrays.items()}
    outputs = spec.run(arrays, dims={"H": 2}).outputs
    for name, array in arrays.items():
        np.testing.assert_array_equal(array, copies[name])
    assert all(value.flags.writeable for value in outputs.values())


# --- attention as one jax.nn.dot_product_attention call -------------------------------------------


@pytest.mark.slow  # every example; the fast tier has key_padding's above and the two below
def test_every_example_attention_is_one_call_in_float32(monkeypatch):
    calls: list[tuple[int, ...]] = []
    original = jax.nn.dot_product_attention

    def recording(q, k, v, *args, **kwargs):
        calls.append((q.ndim, k.ndim, v.ndim))
        return original(q, k, v, *args, **kwargs)

    monkeypatch.setattr(jax.nn, "dot_product_attention", recording)
    for example in EXAMPLES:
        (checked,) = admissible_bindings(check_path(example), 1)
        plan = jax_backend.build_plan(checked, "float32")
        if example.name == "latent_attention.attn":  # V's features are not K's
            assert "V has other features than K" in plan.notes[0]
            continue
        assert any("fused into one jax.nn.dot_product_attention" in n for n in plan.notes), example
        calls.clear()
        plan.execute(reference(checked, "float32", 0).inputs, check_invariants=True)
        assert calls == [(4, 4, 4)], example


def test_float64_is_not_fused_and_says_why():
    program = check_text((ROOT / "examples" / "causal.attn").read_text(encoding="utf-8"),
                         {"N": 6, "d": 2, "H": 2})
    assert jax_backend.build_plan(program, "float64").notes == (
        "softmax `P` (line 20): not fused: jax.nn.dot_product_attention computes its softmax in "
        "float32, so a float64 run is not fused",)
    assert jax_backend.build_plan(program, "float32").notes == (
        "softmax `P` (line 20): fused into one jax.nn.dot_product_attention call (is_causal)",)


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_fully_masked_row_is_nan_with_the_fused_call_too():
    source = ("dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
              "input keep: bool[N, N]\n"
              "output O = softmax(where(keep, Q @ K.T / sqrt(d), -inf)) @ V\n")
    program = check_text(source, {"N": 3, "d": 2})
    plan = jax_backend.build_plan(program, "float32")
    assert "fused into one" in plan.notes[0]
    keep = np.ones((3, 3), dtype=bool)
    keep[1] = False
    ones = np.ones((3, 2), dtype=np.float32)
    frame = plan.execute({"Q": ones, "K": ones, "V": ones, "keep": keep}, check_invariants=True)
    out = frame.values["O"]
    assert np.isnan(out[1]).all() and not np.isnan(out[0]).any()
    assert frame.warnings == ["`O` (line 6): 1 softmax row(s) are entirely -inf (fully masked) "
                              "and give NaN"]


def test_the_sampled_rows_catch_a_wrong_fused_call(monkeypatch):
    program = check_text((ROOT / "examples" / "single_head.attn").read_text(encoding="utf-8"),
                         {"N": 5, "d": 3})
    plan = jax_backend.build_plan(program, "float32")
    inputs = reference(program, "float32", 0).inputs
    monkeypatch.setattr(jax.nn, "dot_product_attention",
                        lambda q, k, v, *args, **kwargs: jax.numpy.zeros_like(q))
    with pytest.raises(CheckerBug, match="jax.nn.dot_product_attention for softmax `P`"):
        plan.execute(inputs, check_invariants=True)
    assert not _x64()


# --- the differential corpus -------------------------------------------------------------------


def test_the_oracle_runs_jax_on_a_sample_of_the_corpus():
    """Every spec of the corpus runs on JAX in tests/test_plan_differential.py (slow)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import plan_corpus

    assert "jax" in differential.BACKENDS and differential.available("jax")
    for label, text in plan_corpus.corpus(0, 2):
        (checked,) = admissible_bindings(check_text(text), 1, seed=len(label))
        problems = differential.disagreements(checked, backends=("numpy", "jax"))
        assert not problems, f"{label}:\n{text}\n" + "\n".join(problems)


# --- the command line and the Python API -----------------------------------------------------


def _run(*args: str):
    return CliRunner().invoke(cli, ["run", *args], catch_exceptions=False)


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_jax_and_numpy_runs_save_the_same_outputs(tmp_path: Path) -> None:
    saved = {}
    for backend in ("numpy", "jax"):
        target = tmp_path / f"{backend}.npz"
        result = _run(str(ROOT / "examples" / "causal.attn"), "--dim", "N=9", "--dim", "d=3",
                      "--dim", "H=2", "--backend", backend, "--save", str(target))
        assert result.exit_code == 0, result.output
        assert f"(float64, {backend})" in result.stdout
        with np.load(target) as archive:
            saved[backend] = {key: archive[key] for key in archive.files}
    for key, value in saved["numpy"].items():
        np.testing.assert_allclose(saved["jax"][key], value, rtol=1e-11, atol=1e-12)


def test_a_gpu_jax_lacks_is_a_usage_error() -> None:
    if jax_backend.cuda_available():  # pragma: no cover - a machine with a GPU
        pytest.skip("this machine has a GPU")
    result = _run(str(ROOT / "examples" / "single_head.attn"), "--dim", "N=3", "--dim", "d=2",
                  "--backend", "jax", "--device", "cuda")
    assert result.exit_code == 2
    assert "device cuda: jax sees no GPU on this machine" in result.output
    with pytest.raises(OptionError, match="not one the jax backend runs on"):
        shapecheck.compile_spec(ROOT / "examples" / "single_head.attn", backend="jax",
                                device="tpu")


_PROBE = (
    "import sys\n"
    "{before}"
    "from shapecheck.cli import main\n"
    "for args in {commands}:\n"
    "    try:\n"
    "        main(args + [sys.argv[1], '--dim', 'N=3', '--dim', 'd=2'])\n"
    "    except SystemExit as done:\n"
    "        print(args[0], done.code, sys.modules.get('jax') is not None)\n")


def _probe(before: str, commands: list[list[str]]) -> subprocess.CompletedProcess[str]:
    code = _PROBE.format(before=before, commands=commands)
    return subprocess.run([sys.executable, "-c", code, str(ROOT / "examples" / "single_head.attn")],
                          capture_output=True, text=True, timeout=120, check=False)


def test_verify_and_a_numpy_run_never_import_jax() -> None:
    result = _probe("", [["verify"], ["run"]])
    lines = [line for line in result.stdout.splitlines() if line.startswith(("verify ", "run "))]
    assert lines == ["verify 0 False", "run 0 False"], result.stderr


def test_without_jax_the_jax_backend_is_a_usage_error_naming_the_extra() -> None:
    result = _probe("sys.modules['jax'] = None  # as if it were not installed\n",
                    [["run", "--backend", "jax"]])
    assert result.stdout.splitlines()[-1] == "run 2 False", result.stderr
    assert "the jax backend needs JAX: pip install 'attn-shapecheck[jax]'" in result.stderr
    assert "Traceback" not in result.stderr


# --- conformance of a plain JAX function ---------------------------------------------------------


def _attention(Q, K, V, d):
    return jax.nn.softmax(Q @ K.T / jax.numpy.sqrt(d), axis=-1) @ V


def _unscaled(Q, K, V, d):
    return jax.nn.softmax(Q @ K.T, axis=-1) @ V


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_a_jax_function_conforms_and_a_wrong_one_does_not():
    spec = ROOT / "examples" / "single_head.attn"
    result = conform(spec, _attention)  # this module imports jax: auto is jax
    assert result.ok and result.framework == "jax", result
    assert not _x64()
    assert conform(spec, _attention, dtype="float32", cases=2).ok
    wrong = conform(spec, _unscaled, framework="jax", cases=2)
    assert not wrong.ok and wrong.failure is not None and wrong.failure.output == "O"
