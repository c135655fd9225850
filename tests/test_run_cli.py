"""`shapecheck run` (contract: shared/spec/cli.md, `run`): exit codes, messages, files."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from shapecheck.backend import numpy_backend
from shapecheck.cli import cli

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MULTI_HEAD = str(EXAMPLES / "multi_head.attn")
SINGLE_HEAD = str(EXAMPLES / "single_head.attn")


def shapecheck_run(*args: str):
    return CliRunner().invoke(cli, ["run", *args], catch_exceptions=False)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    np.save(tmp_path / "x.npy", rng.standard_normal((16, 32)))
    np.save(tmp_path / "q.npy", rng.standard_normal((10, 4)))
    np.save(tmp_path / "k11.npy", rng.standard_normal((11, 4)))
    np.save(tmp_path / "bool.npy", np.ones((10, 4), dtype=bool))
    np.save(tmp_path / "complex.npy", np.ones((10, 4), dtype=complex))
    with_nan = rng.standard_normal((10, 4))
    with_nan[2, 3] = np.nan
    np.save(tmp_path / "nan.npy", with_nan)
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    (tmp_path / "pickled.npy").write_bytes(pickle.dumps(np.ones(3)))
    (tmp_path / "text.npy").write_text("not an array")
    (tmp_path / "empty.npy").write_bytes(b"")
    whole = (tmp_path / "q.npy").read_bytes()
    (tmp_path / "truncated.npy").write_bytes(whole[:-8])
    np.savez(tmp_path / "qkv.npz", Q=rng.standard_normal((10, 4)), K=rng.standard_normal((10, 4)),
             V=rng.standard_normal((10, 4)))
    np.savez(tmp_path / "stranger.npz", Z=np.ones(3))
    return tmp_path


def test_runs_a_spec_and_reports_outputs_and_invariants():
    result = shapecheck_run(MULTI_HEAD, "--dim", "N=8", "--dim", "d=4", "--dim", "H=2",
                            "--fused", "off")  # every statement as written
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "ran with N=8, d=4, H=2, D_model=8 (float64, numpy)" in out
    assert "generated (seed 0): X ~ N(0, 1)" in out
    assert "generated (seed 0): W_Q, W_K, W_V, W_O ~ N(0, 1/fan_in)" in out
    assert "output Y: shape [8, 8], float64, min " in out
    assert "7 statement shape(s) match the checker's at the bindings" in out
    assert "softmax `P` (line 21): every row sums to 1 along axis 2" in out


def test_the_same_seed_gives_the_same_numbers_and_another_seed_does_not():
    def output(seed: str) -> str:
        result = shapecheck_run(SINGLE_HEAD, "--dim", "N=4", "--dim", "d=2", "--seed", seed)
        return next(line for line in result.stdout.splitlines() if line.startswith("output"))

    assert output("3") == output("3") != output("4")


def test_names_every_free_dim_left_unbound():
    result = shapecheck_run(MULTI_HEAD, "--dim", "N=8")
    assert result.exit_code == 1
    assert ("free dims left unbound: d, H; bind them with --dim d=INT --dim H=INT "
            "(then the spec determines D_model)") in result.stderr


def test_refuses_a_spec_with_errors_showing_them():
    result = shapecheck_run(str(EXAMPLES / "broken" / "missing_transpose.attn"))
    assert result.exit_code == 1
    assert "error[SC301]" in result.stderr and "did you mean `Q @ K.T`?" in result.stderr
    assert "the spec does not verify (1 error); it cannot be run" in result.stderr


def test_a_binding_that_violates_a_constraint_is_refused():
    result = shapecheck_run(MULTI_HEAD, "--dim", "N=4", "--dim", "d=2", "--dim", "H=2",
                            "--dim", "D_model=5")
    assert result.exit_code == 1
    assert "SC203" in result.stderr


def test_dims_are_bound_from_arrays(files):
    result = shapecheck_run(MULTI_HEAD, "--input", f"X={files / 'x.npy'}", "--dim", "H=4")
    assert result.exit_code == 0, result.output
    assert "ran with N=16, d=8, H=4, D_model=32" in result.stdout
    assert "loaded: X from" in result.stdout


def test_an_array_that_contradicts_a_dim_names_input_shapes_and_dim(files):
    result = shapecheck_run(MULTI_HEAD, "--input", f"X={files / 'x.npy'}", "--dim", "H=4",
                            "--dim", "N=3")
    assert result.exit_code == 1
    assert ("input `X` is declared as [N, D_model], but the array has shape (16, 32): "
            "axis 0 gives N = 16, but --dim N=3 gives N = 3") in result.stderr


def test_two_arrays_that_disagree_on_a_dim(files):
    result = shapecheck_run(SINGLE_HEAD, "--input", f"Q={files / 'q.npy'}",
                            "--input", f"K={files / 'k11.npy'}")
    assert result.exit_code == 1
    assert ("input `K` is declared as [N, d], but the array has shape (11, 4): axis 0 gives "
            "N = 11, but input `Q` (shape (10, 4)) gives N = 10") in result.stderr


def test_an_entry_that_is_a_dim_expression_is_compared_at_the_bindings(tmp_path, files):
    spec = tmp_path / "weights.attn"
    spec.write_text("dim N, d, H\ninput X: [N, H * d]\nparam W: [H * d, d]\noutput Y = X @ W\n")
    np.save(tmp_path / "w.npy", np.ones((6, 3)))
    np.save(tmp_path / "x.npy", np.ones((5, 6)))
    ok = shapecheck_run(str(spec), "--input", f"X={tmp_path / 'x.npy'}", "--dim", "H=2")
    assert ok.exit_code == 0, ok.output
    assert "ran with N=5, d=3, H=2" in ok.stdout  # d solved from H * d = 6
    np.save(tmp_path / "w.npy", np.ones((4, 3)))
    bad = shapecheck_run(str(spec), "--input", f"X={tmp_path / 'x.npy'}",
                         "--input", f"W={tmp_path / 'w.npy'}", "--dim", "H=2")
    assert bad.exit_code == 1
    assert ("param `W` is declared as [H*d, d], which is [6, 3] at the bindings (H=2, d=3), "
            "but the array has shape (4, 3): axis 0 (H*d) is 6 at the bindings, the array has 4"
            ) in bad.stderr


def test_bindings_from_arrays_that_violate_a_constraint(tmp_path):
    spec = tmp_path / "gqa.attn"
    spec.write_text("dim N, H, G, R\nconstraint H == G * R\ninput Q: [H, N]\ninput K: [G, N]\n"
                    "output Y = repeat(K, R, axis=0) + Q\n")
    np.save(tmp_path / "q.npy", np.ones((5, 2)))
    np.save(tmp_path / "k.npy", np.ones((2, 2)))
    result = shapecheck_run(str(spec), "--input", f"Q={tmp_path / 'q.npy'}",
                            "--input", f"K={tmp_path / 'k.npy'}", "--dim", "R=2")
    assert result.exit_code == 1
    assert "SC203" in result.stderr
    assert "H=5 (input `Q` (shape (5, 2)))" in result.stderr


@pytest.mark.parametrize("name, expected, status", [
    ("missing.npy", "missing.npy: no such file", 2),
    ("text.npy", "not a .npy file (it does not start with a NumPy header)", 1),
    ("empty.npy", "not a .npy file (it does not start with a NumPy header)", 1),
    ("truncated.npy", "shorter than its header says", 1),
    ("objects.npy", "holds Python objects", 1),
    ("pickled.npy", "not a .npy file", 1),
    ("bool.npy", "which holds real numbers (floats or integers), but the array's element type "
     "is bool", 1),
    ("complex.npy", "element type is complex128", 1),
    ("nan.npy", "input `Q` contains 1 non-finite value(s)", 1),
    ("qkv.npz", "it is a .npz archive; pass it with --inputs", 1),
])
def test_bad_input_files_are_messages_not_tracebacks(files, name, expected, status):
    result = shapecheck_run(SINGLE_HEAD, "--input", f"Q={files / name}")
    assert result.exit_code == status, result.output
    assert expected in result.stderr
    assert "Traceback" not in result.output


def test_an_archive_supplies_inputs_by_name(files):
    result = shapecheck_run(SINGLE_HEAD, "--inputs", str(files / "qkv.npz"))
    assert result.exit_code == 0, result.output
    assert "loaded: Q from" in result.stdout and "generated" not in result.stdout
    stranger = shapecheck_run(SINGLE_HEAD, "--inputs", str(files / "stranger.npz"))
    assert stranger.exit_code == 1
    assert "`Z` is not an input or param of the spec (they are: `Q`, `K`, `V`)" in stranger.stderr
    single = shapecheck_run(SINGLE_HEAD, "--inputs", str(files / "q.npy"))
    assert single.exit_code == 1 and "not a .npz archive" in single.stderr
    np.savez(files / "objects.npz", Q=np.array([{}, 1], dtype=object))
    objects = shapecheck_run(SINGLE_HEAD, "--inputs", str(files / "objects.npz"))
    assert objects.exit_code == 1 and "objects.npz[Q]: holds Python objects" in objects.stderr
    whole = (files / "qkv.npz").read_bytes()
    (files / "cut.npz").write_bytes(whole[: len(whole) // 2])
    cut = shapecheck_run(SINGLE_HEAD, "--inputs", str(files / "cut.npz"))
    assert cut.exit_code == 1 and "cut.npz: not a .npz archive" in cut.stderr


def test_usage_errors_exit_2(files):
    assert shapecheck_run(SINGLE_HEAD, "--save-all").exit_code == 2
    assert shapecheck_run(SINGLE_HEAD, "--input", "Q").exit_code == 2
    assert shapecheck_run(SINGLE_HEAD, "--max-memory", "lots").exit_code == 2
    assert shapecheck_run(SINGLE_HEAD, "--dtype", "float16").exit_code == 2
    assert shapecheck_run(str(files / "no-such.attn")).exit_code == 2
    twice = shapecheck_run(SINGLE_HEAD, "--inputs", str(files / "qkv.npz"),
                           "--input", f"Q={files / 'q.npy'}")
    assert twice.exit_code == 2


def test_save_writes_outputs_and_save_all_every_tensor(tmp_path):
    outputs, everything = tmp_path / "out.npz", tmp_path / "all.npz"
    args = [MULTI_HEAD, "--dim", "N=4", "--dim", "d=2", "--dim", "H=2"]
    assert shapecheck_run(*args, "--save", str(outputs)).exit_code == 0
    assert shapecheck_run(*args, "--save", str(everything), "--save-all",
                          "--dtype", "float32").exit_code == 0
    with np.load(outputs) as saved:
        assert saved.files == ["Y"] and saved["Y"].shape == (4, 4)
        y64 = saved["Y"]
    with np.load(everything) as saved:
        assert set(saved.files) == {"X", "W_Q", "W_K", "W_V", "W_O", "Q", "K", "V", "S", "P",
                                    "O", "Y"}
        assert {saved[k].dtype for k in saved.files} == {np.dtype(np.float32)}
        np.testing.assert_allclose(saved["P"].sum(axis=-1), 1, rtol=1e-6)
        np.testing.assert_allclose(saved["Y"], y64, rtol=1e-4, atol=1e-5)
    unwritable = shapecheck_run(*args, "--save", str(tmp_path / "missing" / "out.npz"))
    assert unwritable.exit_code == 2 and "its folder does not exist" in unwritable.stderr


def test_refuses_a_run_that_needs_more_memory_than_allowed():
    result = shapecheck_run(SINGLE_HEAD, "--dim", "N=1000", "--dim", "d=64", "--max-memory", "1MiB",
                            "--fused", "off")  # the [N, N] table is built
    assert result.exit_code == 1
    assert ("the run needs about 9.7 MiB at the bindings (N=1000, d=64), more than --max-memory "
            "1.0 MiB; the largest tensor is `S` [1000, 1000], 7.6 MiB") in result.stderr
    default = shapecheck_run(SINGLE_HEAD, "--dim", "N=1000000", "--dim", "d=64", "--fused", "off")
    assert default.exit_code == 1 and "the largest tensor is `S` [1000000, 1000000]" in default.stderr


def test_a_fully_masked_row_is_a_warning_naming_the_statement(tmp_path):
    spec = tmp_path / "masked.attn"
    spec.write_text("dim N\ninput S: [N, N]\ninput keep: bool[N, N]\n"
                    "P = softmax(where(keep, S, -inf), axis=row)\n")
    keep = np.ones((3, 3), dtype=bool)
    keep[0] = False
    np.save(tmp_path / "keep.npy", keep)
    result = shapecheck_run(str(spec), "--input", f"keep={tmp_path / 'keep.npy'}")
    assert result.exit_code == 0
    assert "warning: `P` (line 4): 1 softmax row(s) are entirely -inf" in result.stderr
    assert "3 NaN" in result.stdout and "that is not NaN sums to 1" in result.stdout


def test_a_checker_bug_is_an_internal_error(monkeypatch):
    monkeypatch.setitem(numpy_backend.BUILTINS, "merge_heads", numpy_backend.BUILTINS["dropout"])
    result = shapecheck_run(MULTI_HEAD, "--dim", "N=4", "--dim", "d=2", "--dim", "H=2")
    assert result.exit_code == 2
    assert "internal error: checker bug: `O` (line 22) has runtime shape [2, 4, 2]" in result.stderr


def test_no_traceback_from_the_installed_command(files):
    process = subprocess.run(
        [sys.executable, "-m", "shapecheck", "run", SINGLE_HEAD, "--input",
         f"Q={files / 'objects.npy'}"], capture_output=True, text=True, check=False)
    assert process.returncode == 1
    assert "Traceback" not in process.stderr and "holds Python objects" in process.stderr


def test_verify_does_not_import_numpy():
    code = ("import sys\nfrom shapecheck.cli import main\n"
            f"try:\n    main(['verify', {SINGLE_HEAD!r}])\nexcept SystemExit:\n    pass\n"
            "print('numpy' in sys.modules)")
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True)
    assert process.stdout.strip().endswith("False")
