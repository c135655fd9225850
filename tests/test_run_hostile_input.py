"""Hostile options, arrays and output paths for `run`, `report` and the API (issue 7)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import shapecheck
from shapecheck.backend import InputError, MemoryLimitError, compile_spec
from shapecheck.cli import cli, main
from shapecheck.options import OptionError, parse_size

ROOT = Path(__file__).resolve().parent.parent
SINGLE_HEAD = str(ROOT / "examples" / "single_head.attn")
SMALL = ["--dim", "N=4", "--dim", "d=2"]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def no_internal_error(result) -> None:
    assert "internal error" not in result.output and "Traceback" not in result.output


# --- options and API values ---------------------------------------------------------------


@pytest.mark.parametrize("binding", ["N=²", "N=٣", "N=+4", "N=4.0", "N=0x10", "N= "])
def test_a_binding_that_is_not_ascii_digits_is_a_usage_error(binding):
    result = invoke("run", SINGLE_HEAD, "--dim", binding, "--dim", "d=2")
    assert result.exit_code == 2 and "--dim" in result.output
    no_internal_error(result)


@pytest.mark.parametrize("size, expected", [
    ("4GiB", 4 << 30), ("512MiB", 512 << 20), ("2GB", 2_000_000_000), ("1.5KiB", 1536),
    ("1000000", 1_000_000), ("unlimited", None), (" 64 MiB ", 64 << 20), (4096, 4096), (None, None),
])
def test_sizes(size, expected):
    assert parse_size(size) == expected


@pytest.mark.parametrize("size", ["0.5", "0", "-1GiB", "lots", "1e400", "nan", "4 GiBs", True, 0])
def test_bad_sizes_are_option_errors(size):
    with pytest.raises(OptionError):
        parse_size(size)


def test_max_memory_below_a_byte_is_refused_not_read_as_zero():
    result = invoke("run", SINGLE_HEAD, *SMALL, "--max-memory", "0.5")
    assert result.exit_code == 2 and "less than one byte" in result.output


@pytest.mark.parametrize("bindings", [{"N": 0}, {"N": -3}, {"N": 2.5}, {"N": True}, {"N": "4"},
                                      {"N": 10**30}, {"not a name": 3}])
def test_the_api_refuses_bad_bindings_with_option_error(bindings):
    source = Path(SINGLE_HEAD).read_text(encoding="utf-8")
    with pytest.raises(OptionError):
        shapecheck.check_text(source, bindings=bindings)
    with pytest.raises(OptionError):
        compile_spec(source, dims=bindings)
    assert issubclass(OptionError, ValueError) and shapecheck.OptionError is OptionError


def test_numpy_integers_are_bindings():
    program = shapecheck.check_text("dim N\ninput X: [N]\n", bindings={"N": np.int64(3)})
    assert program.ok and program.dims.bindings == {"N": 3}


def test_compile_spec_takes_a_size_string_and_refuses_a_bad_one():
    spec = compile_spec(SINGLE_HEAD, dims={"N": 512, "d": 8}, max_memory="1MiB", fused="off")
    assert spec.max_memory == 1 << 20
    with pytest.raises(MemoryLimitError):
        spec.run(seed=0)
    with pytest.raises(OptionError, match="not a size"):
        compile_spec(SINGLE_HEAD, max_memory="lots")
    with pytest.raises(OptionError, match="dtype"):
        compile_spec(SINGLE_HEAD, dtype="float16")
    with pytest.raises(OptionError, match="backend"):
        shapecheck.backend.CompiledSpec(shapecheck.check_path(SINGLE_HEAD), backend="tensorflow")


def test_huge_fixed_dims_are_refused_with_sizes_not_an_overflow(tmp_path):
    spec = tmp_path / "big.attn"
    spec.write_text("dim N = 100000000000000000\ninput X: [N]\noutput Y = exp(X)\n")
    result = invoke("run", str(spec))
    assert result.exit_code == 1 and "PiB" in result.output
    unlimited = invoke("run", str(spec), "--max-memory", "unlimited")
    assert unlimited.exit_code == 1
    no_internal_error(unlimited)


def test_unlimited_memory_on_a_spec_too_large_for_the_machine_is_a_message():
    result = invoke("run", SINGLE_HEAD, "--dim", "N=100000000", "--dim", "d=100000",
                    "--max-memory", "unlimited")
    assert result.exit_code == 1
    assert "could not allocate" in result.output or "more than NumPy can index" in result.output
    no_internal_error(result)


# --- run bugs: every builtin, bool and real, rank 0 and 1, float32 ---------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("source", [
    "dim N\ninput keep: bool[N]\noutput Y = keep\n",
    "dim N\ninput keep: bool[N]\ninput x: [N]\noutput Y = where(keep, x, 0)\n",
    "input keep: bool[]\ninput x: []\noutput Y = where(keep, x, -x)\n",
    "dim N\noutput Y: [N, N] = causal_mask(N)\n",
    "dim N\nM: [N, N] = causal_mask(N)\noutput Y = -M + exp(M)\n",
    "dim N\ninput m: bool[N, N]\nZ: [N, N] = m\noutput Y = Z * 2\n",
    "dim N\ninput m: bool[N]\noutput Y = sum(m) + mean(m, axis=0) + max(m)\n",
    "dim N\ninput x: [N]\noutput Y = gelu(x) + layernorm(x) + rmsnorm(x) + softmax(x)\n",
    "input x: []\noutput Y = gelu(x) + sigmoid(x) + relu(x) + tanh(x) + abs(x)\n",
    'dim N\ninput m: bool[N, N]\noutput Y = einsum("ij,jk->ik", m, m)\n',
    'dim N\ninput x: [N]\noutput Y = einsum("i,i->", x, x)\n',
    'dim N, M\ninput x: [N, M]\noutput Y = einsum("ij->", x)\n',
    'dim N, M\ninput x: [N, M]\ninput y: [M]\noutput Y = einsum("ij,j,j->i", x, y, y)\n',
    'dim A, B, C\ninput x: [A, B, C]\noutput Y = einsum("abc,abc->b", x, x)\n',
    'dim N\ninput x: [N, N]\noutput Y = einsum("ii->i", x)\n',
    'dim N\ninput m: bool[N]\noutput Y = concat([m, m], axis=0)\n',
    'dim N\ninput m: bool[N, N]\noutput Y = repeat(transpose(m), 2, axis=0)\n',
    'dim N\ninput m: bool[N, N]\noutput Y = reshape(m, [N * N])\n',
])
def test_small_specs_run_with_the_checkers_shapes(source, dtype):
    program = shapecheck.check_text(source)
    assert program.ok, program.diagnostics
    result = compile_spec(program, dims={"N": 3, "M": 2, "A": 2, "B": 3, "C": 4},
                          dtype=dtype).run(seed=1, check_invariants=True)
    for name, value in result.outputs.items():
        assert value.dtype == (np.dtype(bool) if program.tensors[name].value.is_bool
                               else np.dtype(dtype))


def test_a_bool_value_under_a_plain_annotation_stays_bool():
    # `[N, N]` checks the shape only (docs/language.md), on every backend (issue 17)
    for backend in ("numpy", "torch"):
        result = invoke("run", str(_write(
            "dim N\noutput Y: [N, N] = causal_mask(N)\n")), "--dim", "N=3", "--backend", backend)
        assert result.exit_code == 0, result.output
        assert "output Y: shape [3, 3], bool, min 0, max 1, mean 0.666667" in result.output


def test_einsum_agrees_with_numpy():
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal(5)
    cases = {
        '"bnd,bmd->bnm", a, b': np.einsum("bnd,bmd->bnm", a, b),
        '"bnd,bmd", a, b': np.einsum("bnd,bmd", a, b),
        '"...nd,...md->...nm", a, b': np.einsum("...nd,...md->...nm", a, b),
        '"bmd,m->bd", b, c': np.einsum("bmd,m->bd", b, c),
        '"bnd->dn", a': np.einsum("bnd->dn", a),
        '"bnd,bmd,m->n", a, b, c': np.einsum("bnd,bmd,m->n", a, b, c),
    }
    for arguments, expected in cases.items():
        source = ("dim B, N, M, D\ninput a: [B, N, D]\ninput b: [B, M, D]\ninput c: [M]\n"
                  f"output Y = einsum({arguments})\n")
        program = shapecheck.check_text(source)
        assert program.ok, (arguments, program.diagnostics)
        got = compile_spec(program)(a=a, b=b, c=c)["Y"]
        np.testing.assert_allclose(got, expected, err_msg=arguments)


def _write(text: str) -> Path:
    import tempfile

    folder = Path(tempfile.mkdtemp())
    path = folder / "spec.attn"
    path.write_text(text)
    return path


# --- hostile arrays ---------------------------------------------------------------------------


def _npz_with_header(path: Path, key: str, shape: tuple[int, ...], payload: bytes = b"") -> None:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{key}.npy", header.getvalue() + payload)


def test_a_member_claiming_a_huge_shape_is_refused_before_reading(tmp_path):
    _npz_with_header(tmp_path / "huge.npz", "Q", (10**12, 4), b"\0" * 64)
    result = invoke("run", SINGLE_HEAD, "--inputs", str(tmp_path / "huge.npz"))
    assert result.exit_code == 1 and "shorter than its header says" in result.output
    no_internal_error(result)


def test_a_zip_bomb_is_refused_by_the_estimate_before_decompressing(tmp_path):
    # 100 MB of zeros compress to ~100 KB; the header says so before anything is inflated.
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (12_500, 1000)})
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("Q.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            for _ in range(100):
                member.write(bytes(1_000_000))
    assert (tmp_path / "bomb.npz").stat().st_size < 1_000_000
    result = invoke("run", SINGLE_HEAD, "--inputs", str(tmp_path / "bomb.npz"),
                    "--max-memory", "50MiB")
    assert result.exit_code == 1 and "more than --max-memory 50.0 MiB" in result.output
    headers = shapecheck.backend.open_npz(tmp_path / "bomb.npz")
    assert headers["Q"].shape == (12_500, 1000) and not headers["Q"].mapped


@pytest.mark.parametrize("make, status, message", [
    (lambda p: np.save(p, np.ones((3, 2), dtype=">f8")), 0, None),
    (lambda p: np.save(p, np.asfortranarray(np.ones((3, 2)))), 0, None),
    (lambda p: p.write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': 'O'}   \n"), 1, "not a .npy"),
    (lambda p: p.write_bytes(b"\x93NUMPY\x09\x00"), 1, "not a .npy"),
])
def test_odd_npy_files(tmp_path, make, status, message):
    path = tmp_path / "q.npy"
    make(path)
    result = invoke("run", SINGLE_HEAD, "--input", f"Q={path}")
    assert result.exit_code == status, result.output
    if message:
        assert message in result.output
    no_internal_error(result)


def test_npz_members_are_read_with_their_values(tmp_path):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((5, 3)).astype(np.float32)
    np.savez_compressed(tmp_path / "in.npz", Q=q, K=np.asfortranarray(q), V=q.astype(">f8"))
    spec = compile_spec(SINGLE_HEAD)
    files = shapecheck.backend.open_npz(tmp_path / "in.npz")
    np.testing.assert_allclose(spec.run(files).outputs["O"], spec(Q=q, K=q, V=q)["O"])


def test_an_array_file_as_input_to_the_api(tmp_path):
    np.save(tmp_path / "q.npy", np.ones((4, 2)))
    array = shapecheck.backend.open_npy(tmp_path / "q.npy")
    assert array.shape == (4, 2) and array.mapped
    with pytest.raises(InputError, match="no array for"):
        compile_spec(SINGLE_HEAD).run({"Q": array})
    assert compile_spec(SINGLE_HEAD).run({"Q": array}, seed=0).outputs["O"].shape == (4, 2)
    # A file cut short after its header was read: an input error, not a crash.
    (tmp_path / "q.npy").write_bytes((tmp_path / "q.npy").read_bytes()[:-16])
    with pytest.raises(InputError, match="shorter than its header says"):
        compile_spec(SINGLE_HEAD).run({"Q": array}, seed=0)


# --- output paths -------------------------------------------------------------------------------


def test_save_refuses_the_spec_an_input_a_device_and_an_empty_path(tmp_path):
    spec = tmp_path / "model.attn"
    spec.write_text(Path(SINGLE_HEAD).read_text())
    np.save(tmp_path / "q.npy", np.ones((4, 2)))
    original = spec.read_bytes(), (tmp_path / "q.npy").read_bytes()
    cases = [(str(spec), "the spec being run"), (str(tmp_path / "q.npy"), "an input array"),
             ("/dev/null", "character device"), ("", "the path is empty"),
             (str(tmp_path), "is a folder"), (str(tmp_path / "no" / "x.npz"), "folder does not")]
    for target, message in cases:
        result = invoke("run", str(spec), "--input", f"Q={tmp_path / 'q.npy'}", "--save", target)
        assert result.exit_code == 2, (target, result.output)
        assert message in result.output and "ran with" not in result.output
        no_internal_error(result)
    assert (spec.read_bytes(), (tmp_path / "q.npy").read_bytes()) == original
    dash = invoke("run", str(spec), "--save", "-", *SMALL)
    assert dash.exit_code == 2 and "standard output" in dash.output


def test_save_through_a_planted_symlink_replaces_the_link_only(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "out.npz").symlink_to(victim)
    (tmp_path / ".out.npz.partial").symlink_to(victim)
    result = invoke("run", SINGLE_HEAD, *SMALL, "--save", str(tmp_path / "out.npz"))
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious"
    with np.load(tmp_path / "out.npz") as saved:
        assert saved["O"].shape == (4, 2)


def test_report_to_standard_output_and_never_onto_the_spec_or_a_device(tmp_path, capsys):
    spec = tmp_path / "model.attn"
    spec.write_text(Path(SINGLE_HEAD).read_text())
    out = invoke("report", str(spec), "-o", "-")
    assert out.exit_code == 0 and out.output.startswith("# Shape report")
    html = invoke("report", str(spec), "-o", "-", "--format", "html")
    assert html.exit_code == 0 and "<html" in html.output
    for target, message in ((str(spec), "the spec it reports on"),
                            ("/dev/null", "character device"), ("", "the path is empty")):
        with pytest.raises(SystemExit) as exit_status:
            main(["report", str(spec), "-o", target, "--format", "md"])
        assert exit_status.value.code == 2
        assert message in capsys.readouterr().err
    link = tmp_path / "report.md"
    link.symlink_to(spec)
    assert invoke("report", str(spec), "-o", str(link)).exit_code == 0
    assert spec.read_text() == Path(SINGLE_HEAD).read_text()
