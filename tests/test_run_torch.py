"""`shapecheck run --backend torch --device --fused`: the run path with the torch backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import shapecheck
from shapecheck.backend import OptionError
from shapecheck.cli import cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SIZES = ("--dim", "N=9", "--dim", "d=3", "--dim", "H=2")


def shapecheck_run(*args: str):
    return CliRunner().invoke(cli, ["run", *args], catch_exceptions=False)


@pytest.mark.parametrize("example", ["multi_head.attn", "causal.attn", "grouped_query.attn"])
def test_torch_and_numpy_runs_save_the_same_outputs(tmp_path: Path, example: str) -> None:
    sizes = SIZES + (("--dim", "G=2") if example == "grouped_query.attn" else ())
    saved = {}
    for backend in ("numpy", "torch"):
        target = tmp_path / f"{backend}.npz"
        result = shapecheck_run(str(EXAMPLES / example), *sizes, "--backend", backend,
                                "--save", str(target))
        assert result.exit_code == 0, result.output
        assert f"(float64, {backend})" in result.stdout
        assert "every tensor is float64" in result.stdout
        with np.load(target) as archive:
            saved[backend] = {key: archive[key] for key in archive.files}
    assert saved["numpy"].keys() == saved["torch"].keys()
    for key, value in saved["numpy"].items():
        np.testing.assert_allclose(saved["torch"][key], value, rtol=1e-11, atol=1e-12)


def test_every_intermediate_with_save_all_and_torch(tmp_path: Path) -> None:
    target = tmp_path / "all.npz"
    result = shapecheck_run(str(EXAMPLES / "causal.attn"), *SIZES, "--backend", "torch",
                            "--save", str(target), "--save-all")
    assert result.exit_code == 0, result.output
    with np.load(target) as archive:
        assert {"S", "P", "mask", "Y"} <= set(archive.files)
        assert archive["P"].shape == (2, 9, 9) and archive["mask"].dtype == bool


@pytest.mark.parametrize(("args", "expected"), [
    (("--backend", "torch", "--device", "cuda"), "torch sees no CUDA device"),
    (("--backend", "torch", "--device", "tpu"), "device 'tpu' is not one the torch backend runs on"),
    (("--device", "cuda"), "device 'cuda' is not one the numpy backend runs on"),
    (("--fused", "sometimes"), "Invalid value for '--fused'"),
])
def test_devices_and_options_that_cannot_run_are_usage_errors(args, expected) -> None:
    if "no CUDA" in expected:
        import torch

        if torch.cuda.is_available():  # pragma: no cover - a machine with a GPU
            pytest.skip("this machine has a CUDA device")
    result = shapecheck_run(str(EXAMPLES / "single_head.attn"), "--dim", "N=3", "--dim", "d=2",
                            *args)
    assert result.exit_code == 2
    assert expected in result.output


def test_the_python_api_takes_backend_device_and_fused() -> None:
    q = np.random.default_rng(0).standard_normal((6, 4))
    torch_spec = shapecheck.compile_spec(EXAMPLES / "single_head.attn", backend="torch")
    numpy_spec = shapecheck.compile_spec(EXAMPLES / "single_head.attn", fused="off")
    np.testing.assert_allclose(torch_spec(Q=q, K=q, V=q)["O"], numpy_spec(Q=q, K=q, V=q)["O"],
                               rtol=1e-12)
    assert "backend=torch" in repr(torch_spec)
    for options in ({"backend": "tensorflow"}, {"fused": "yes"}, {"device": "cuda"}):
        with pytest.raises(OptionError):
            shapecheck.compile_spec(EXAMPLES / "single_head.attn", **options)


def test_a_numpy_run_and_verify_never_import_torch(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "from shapecheck.cli import main\n"
        "for args in (['verify', sys.argv[1]], ['run', sys.argv[1], '--dim', 'N=3', '--dim', 'd=2']):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit as done:\n"
        "        print(args[0], done.code, 'torch' in sys.modules, 'numpy' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", probe, str(EXAMPLES / "single_head.attn")],
                            capture_output=True, text=True, timeout=120, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith(("verify ", "run "))]
    assert lines == ["verify 0 False False", "run 0 False True"], result.stdout + result.stderr
