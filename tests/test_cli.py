"""`shapecheck verify`, `explain` and `--version` (contract: shared/spec/cli.md).

Most tests call the real entry point, ``cli.main``, in-process (it is what the
installed command runs, exit status included); the ones about terminals, imports
and tracebacks run ``python -m shapecheck`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shapecheck.messages import codes
from shapecheck import fileio
from shapecheck._version import __version__
from shapecheck.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MULTI_HEAD = EXAMPLES / "multi_head.attn"
MISSING_TRANSPOSE = EXAMPLES / "broken" / "missing_transpose.attn"
ESC = "\x1b"

CLEAN = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\noutput S = Q @ K.T\n"
WARNING = "dim N, d, unused\ninput Q: [N, d]\noutput S = Q @ Q.T\n"  # SC401
ERROR = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\noutput S = Q @ K\n"  # SC301


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """Run the CLI as the installed command does; (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as stopped:
        main([str(a) for a in args])
    captured = capsys.readouterr()
    code = stopped.value.code
    return (code if isinstance(code, int) else 1 if code else 0), captured.out, captured.err


def spec(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def subprocess_run(*args: str | Path, env: dict[str, str] | None = None,
                   timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shapecheck", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})


# --- exit status ------------------------------------------------------------------------


def test_a_clean_spec_exits_0(capsys, tmp_path):
    status, out, err = run(capsys, "verify", spec(tmp_path, "ok.attn", CLEAN))
    assert status == 0 and err == ""
    assert "1 file verified" in out


def test_every_shipped_example_verifies(capsys):
    files = [p for p in sorted(EXAMPLES.glob("*.attn"))]
    status, out, _ = run(capsys, "verify", *files)
    assert status == 0, out


def test_errors_exit_1(capsys, tmp_path):
    status, out, _ = run(capsys, "verify", spec(tmp_path, "bad.attn", ERROR))
    assert status == 1
    assert "error[SC301]" in out


def test_an_error_in_one_file_of_many_exits_1(capsys, tmp_path):
    good = spec(tmp_path, "good.attn", CLEAN)
    bad = spec(tmp_path, "bad.attn", ERROR)
    assert run(capsys, "verify", good, bad)[0] == 1
    assert run(capsys, "verify", bad, good)[0] == 1


def test_warnings_fail_as_in_ruff_unless_fail_on_error(capsys, tmp_path):
    # issue 34: a warning about the code fails the run (CI catches a formula bug);
    # `--no-strict` (fail-on = "error") keeps the older rule, `--exit-zero` only reports
    path = spec(tmp_path, "warn.attn", WARNING)
    status, out, _ = run(capsys, "verify", path)
    assert status == 1 and "warning[SC401]" in out
    assert out.rstrip().endswith("Found 0 errors and 1 warning in 1 file.")
    assert run(capsys, "verify", "--strict", path)[0] == 1
    status, out, _ = run(capsys, "verify", "--no-strict", path)
    assert status == 0 and out.rstrip().endswith("1 file verified, with 1 warning.")
    assert run(capsys, "verify", "--exit-zero", path)[0] == 0
    assert run(capsys, "verify", "--config", 'fail-on = "error"', path)[0] == 0
    assert run(capsys, "verify", spec(tmp_path, "ok.attn", CLEAN))[0] == 0


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_exit_status_is_the_same_in_every_format(capsys, tmp_path, fmt):
    assert run(capsys, "verify", "--format", fmt, spec(tmp_path, "ok.attn", CLEAN))[0] == 0
    assert run(capsys, "verify", "--format", fmt, spec(tmp_path, "bad.attn", ERROR))[0] == 1
    warn = spec(tmp_path, "warn.attn", WARNING)
    assert run(capsys, "verify", "--format", fmt, warn)[0] == 1
    assert run(capsys, "verify", "--format", fmt, "--no-strict", warn)[0] == 0


def test_a_missing_path_is_a_diagnostic_and_the_rest_is_checked(capsys, tmp_path):
    good = spec(tmp_path, "ok.attn", CLEAN)
    status, out, err = run(capsys, "verify", good, tmp_path / "nope.attn")
    assert status == 2
    assert "nope.attn:1:1: error[SC007]: cannot read" in out and "no such file" in out
    assert "1 error" in out and "2 files" in out
    assert "Traceback" not in err
    status, out, err = run(capsys, "verify", "--format", "json", tmp_path / "nope.attn", good)
    assert status == 2
    document = json.loads(out)
    assert [f["ok"] for f in document["files"]] == [False, True]
    assert document["files"][0]["diagnostics"][0]["code"] == "SC007"
    assert "nope.attn" in err and "no such file" in err  # for whoever reads the log


def test_an_unreadable_file_exits_2(capsys, tmp_path, monkeypatch):
    unreadable = spec(tmp_path, "secret.attn", CLEAN)
    real_read = fileio.read_bytes

    def read_bytes(path) -> bytes:
        if Path(path).name == "secret.attn":
            raise PermissionError(13, "Permission denied")
        return real_read(path)

    monkeypatch.setattr(fileio, "read_bytes", read_bytes)
    status, out, err = run(capsys, "verify", unreadable, spec(tmp_path, "ok.attn", CLEAN))
    assert status == 2
    assert "secret.attn:1:1: error[SC007]: cannot read" in out and "permission denied" in out
    assert "Found 1 error and 0 warnings in 2 files." in out  # the readable file is still checked


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root reads files whatever their mode")
def test_a_file_without_read_permission_exits_2(capsys, tmp_path):
    path = spec(tmp_path, "locked.attn", CLEAN)
    path.chmod(0)
    try:
        status, out, _ = run(capsys, "verify", path)
    finally:
        path.chmod(0o644)
    assert status == 2 and "error[SC007]: cannot read" in out


def test_a_malformed_file_is_a_diagnostic_not_exit_2(capsys, tmp_path):
    binary = tmp_path / "binary.attn"
    binary.write_bytes(bytes(range(256)) * 4)
    status, out, err = run(capsys, "verify", binary)
    assert status == 1
    assert "error[SC002]" in out and err == ""


@pytest.mark.parametrize("binding", [
    "N", "N=", "=4", "N=abc", "N=0", "N=-1", "N=1.5", "1N=4", "N=4=5",
    "N=99999999999999999999999999",
])
def test_a_bad_dim_binding_exits_2(capsys, tmp_path, binding):
    status, out, err = run(capsys, "verify", "--dim", binding, spec(tmp_path, "ok.attn", CLEAN))
    assert status == 2, (binding, out, err)
    assert "--dim" in err and "Traceback" not in err
    assert out == ""


def test_a_dim_bound_twice_differently_exits_2(capsys, tmp_path):
    path = spec(tmp_path, "ok.attn", CLEAN)
    assert run(capsys, "verify", "--dim", "N=4", "--dim", "N=5", path)[0] == 2
    assert run(capsys, "verify", "--dim", "N=4", "--dim", "N=4", path)[0] == 0


def test_bindings_are_checked_against_constraints(capsys, tmp_path):
    path = spec(tmp_path, "c.attn", "dim N, H, d, D\nconstraint D == H * d\n"
                "input X: [N, D]\noutput X\n")
    assert run(capsys, "verify", "--dim", "H=8", "--dim", "d=64", "--dim", "D=512", path)[0] == 0
    status, out, _ = run(capsys, "verify", "--dim", "H=8", "--dim", "d=64", "--dim", "D=500", path)
    assert status == 1 and "error[SC203]" in out and "500 != 512" in out


def test_a_binding_for_an_undeclared_dim_is_a_warning(capsys, tmp_path):
    # a warning about the command line, not the code (`about_tool`): it never fails the run
    path = spec(tmp_path, "ok.attn", CLEAN)
    status, out, _ = run(capsys, "verify", "--dim", "n=4", path)
    assert status == 0 and "warning[SC207]" in out
    assert run(capsys, "verify", "--strict", "--dim", "n=4", path)[0] == 0


def test_usage_errors_exit_2(capsys):
    assert run(capsys, "verify")[0] == 2  # no path
    assert run(capsys, "verify", "--format", "xml", MULTI_HEAD)[0] == 2
    assert run(capsys, "frobnicate")[0] == 2
    assert run(capsys, "verify", "--no-such-option", MULTI_HEAD)[0] == 2


def test_an_internal_failure_in_one_file_is_a_diagnostic_for_that_file(capsys, tmp_path,
                                                                       monkeypatch):
    """Issue 7 §3: the other files are still checked and reported, in every format; exit 2."""
    from shapecheck import loader  # where checking lives (api re-exports it)

    real = loader.check_text

    def broken(text: str, *args: object, **kwargs: object) -> object:
        if "boom" in text:
            raise RuntimeError("boom")
        return real(text, *args, **kwargs)

    monkeypatch.setattr(loader, "check_text", broken)
    monkeypatch.delenv("SHAPECHECK_DEBUG", raising=False)
    bad = spec(tmp_path, "a_bad.attn", "# boom\n" + CLEAN)
    good = spec(tmp_path, "b_error.attn", ERROR)
    status, out, err = run(capsys, "verify", bad, good)
    assert status == 2
    assert "a_bad.attn:1:1: error[SC006]: internal failure while checking" in out
    assert "RuntimeError: boom" in out and "error[SC301]" in out
    assert "Traceback" not in out + err
    for fmt in ("json", "sarif", "github"):
        status, out, err = run(capsys, "verify", "--format", fmt, tmp_path)
        assert status == 2, fmt
        assert "SC301" in out and "a_bad.attn" in out and "boom" in out, fmt
        assert "SC006" in err and "Traceback" not in err


# --- folders ------------------------------------------------------------------------------


def test_a_folder_means_every_attn_file_below_it(capsys, tmp_path):
    spec(tmp_path, "a.attn", CLEAN)
    spec(tmp_path, "sub/b.attn", CLEAN)
    spec(tmp_path, "sub/deeper/c.attn", ERROR)
    spec(tmp_path, "sub/notes.txt", ERROR)  # not a spec
    spec(tmp_path, "sub/d.attn.bak", ERROR)  # not a spec
    (tmp_path / "empty_dir").mkdir()
    status, out, _ = run(capsys, "verify", "--format", "json", tmp_path)
    assert status == 1
    document = json.loads(out)
    paths = [Path(f["path"]).relative_to(tmp_path).as_posix() for f in document["files"]]
    assert paths == ["a.attn", "sub/b.attn", "sub/deeper/c.attn"]
    assert document["summary"]["files"] == 3


def test_a_folder_without_specs_is_a_usage_error_unless_allowed(capsys, tmp_path):
    status, out, err = run(capsys, "verify", "--format", "json", tmp_path)
    assert status == 2 and "no spec files" in err and "--allow-empty" in err
    assert json.loads(out)["summary"] == {"files": 0, "errors": 0, "warnings": 0}
    status, out, _ = run(capsys, "verify", "--allow-empty", "--format", "json", tmp_path)
    assert status == 0
    assert json.loads(out)["summary"] == {"files": 0, "errors": 0, "warnings": 0}


def test_a_file_named_twice_is_checked_once(capsys):
    status, out, _ = run(capsys, "verify", "--format", "json", EXAMPLES, EXAMPLES / "broken",
                         MISSING_TRANSPOSE)
    assert status == 1
    paths = [f["path"] for f in json.loads(out)["files"]]
    assert len(paths) == len(set(paths)) == len(list(EXAMPLES.rglob("*.attn")))


# --- the JSON contract ------------------------------------------------------------------------


def test_json_has_the_contract_fields(capsys, tmp_path):
    bad = spec(tmp_path, "bad.attn", "dim N, d, unused\n" + ERROR.split("\n", 1)[1])
    status, out, _ = run(capsys, "verify", "--format", "json", MULTI_HEAD, bad)
    assert status == 1
    document = json.loads(out)
    assert set(document) >= {"files", "summary"}
    assert document["summary"] == {"files": 2, "errors": 1, "warnings": 1}
    good, broken = document["files"]
    for entry in (good, broken):
        assert set(entry) >= {"path", "ok", "diagnostics", "shapes"}
        assert isinstance(entry["path"], str) and isinstance(entry["ok"], bool)
    assert good["ok"] is True and good["diagnostics"] == []
    assert broken["ok"] is False
    fields = {"severity": str, "code": str, "message": str, "line": int, "column": int,
              "end_line": int, "end_column": int}
    for diagnostic in broken["diagnostics"]:
        for name, kind in fields.items():
            assert isinstance(diagnostic[name], kind), (name, diagnostic)
        assert diagnostic["line"] >= 1 and diagnostic["column"] >= 1
        assert (diagnostic["end_line"], diagnostic["end_column"]) >= \
            (diagnostic["line"], diagnostic["column"])
    matmul = next(d for d in broken["diagnostics"] if d["code"] == "SC301")
    assert matmul["severity"] == "error"
    # `output S = Q @ K`: line 4, columns 12-17 (1-based, end exclusive)
    assert (matmul["line"], matmul["column"], matmul["end_line"], matmul["end_column"]) == \
        (4, 12, 4, 17)
    unused = next(d for d in broken["diagnostics"] if d["code"] == "SC401")
    assert unused["severity"] == "warning"


def test_json_shapes_are_in_the_spec_notation(capsys):
    _, out, _ = run(capsys, "verify", "--format", "json", MULTI_HEAD)
    shapes = json.loads(out)["files"][0]["shapes"]
    assert shapes["X"] == ["N", "D_model"]
    assert shapes["W_Q"] == ["D_model", "H*d"]
    assert shapes["Q"] == ["H", "N", "d"]
    assert shapes["S"] == ["H", "N", "N"]
    assert shapes["O"] == ["N", "H*d"]
    assert shapes["Y"] == ["N", "D_model"]
    assert all(isinstance(d, str) for dims in shapes.values() for d in dims)


def test_json_shapes_leave_out_unknown_tensors(capsys, tmp_path):
    path = spec(tmp_path, "bad.attn", ERROR + "P = softmax(S)\nscalar = 2 * d\n")
    _, out, _ = run(capsys, "verify", "--format", "json", path)
    shapes = json.loads(out)["files"][0]["shapes"]
    assert "S" not in shapes and "P" not in shapes  # failed, and what depends on it
    assert shapes["Q"] == ["N", "d"] and shapes["scalar"] == []


def test_json_is_one_document_even_for_binary_input(capsys, tmp_path):
    path = tmp_path / "junk.attn"
    path.write_bytes(b"\x00\xff\xfe" * 100)
    _, out, _ = run(capsys, "verify", "--format", "json", path)
    document = json.loads(out)
    assert document["files"][0]["diagnostics"][0]["code"] == "SC002"


# --- colour ------------------------------------------------------------------------------------


def test_no_ansi_when_not_a_terminal(capsys):
    _, out, err = run(capsys, "verify", MISSING_TRANSPOSE)
    assert ESC not in out and ESC not in err


def test_no_ansi_when_no_color_is_set_unless_color_is_asked_for(capsys, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("FORCE_COLOR", "1")  # NO_COLOR wins over FORCE_COLOR
    _, out, _ = run(capsys, "verify", MISSING_TRANSPOSE)
    assert ESC not in out
    _, out, _ = run(capsys, "verify", "--color", "always", MISSING_TRANSPOSE)
    assert ESC in out  # no-color.org: an explicit choice wins over the environment


def _on_a_terminal(*args: str, env_extra: dict[str, str] | None = None) -> str:
    """Run the CLI with stdout on a pseudo-terminal; what it wrote there."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(env_extra or {})
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "shapecheck", *args],
                                   stdout=terminal, stderr=subprocess.DEVNULL, env=env)
        os.close(terminal)
        chunks = []
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=60)
    finally:
        os.close(controller)
    return b"".join(chunks).decode("utf-8", errors="replace")


@pytest.mark.slow
def test_colour_on_a_terminal_follows_no_color_org():
    spec_path = str(MISSING_TRANSPOSE)
    coloured = _on_a_terminal("verify", spec_path)
    assert "error" in coloured and ESC in coloured
    plain = _on_a_terminal("verify", spec_path, env_extra={"NO_COLOR": "1"})
    assert "error" in plain and ESC not in plain
    # An empty NO_COLOR does not count (no-color.org); --color never always wins.
    assert ESC in _on_a_terminal("verify", spec_path, env_extra={"NO_COLOR": ""})
    assert ESC not in _on_a_terminal("verify", "--color", "never", spec_path)


@pytest.mark.slow
def test_color_follows_force_color_and_the_flag_off_a_terminal(tmp_path):
    path = spec(tmp_path, "bad.attn", "dim N\ninput X: [N]\nY = Z\n")
    command = [sys.executable, "-m", "shapecheck", "verify", str(path)]
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}

    def out(*extra: str, **env: str) -> str:
        return subprocess.run(command + list(extra), capture_output=True, text=True,
                              env={**base, **env}, check=False).stdout

    assert "\x1b[" not in out()
    assert "\x1b[" in out(FORCE_COLOR="1")
    assert "\x1b[" not in out(FORCE_COLOR="")
    assert "\x1b[" not in out(FORCE_COLOR="1", NO_COLOR="1")
    assert "\x1b[" in out("--color", "always")
    assert "\x1b[" in out("--color", "always", NO_COLOR="1")
    assert "\x1b[" not in out("--color", "never", FORCE_COLOR="1")


# --- --version and explain -----------------------------------------------------------------------


def test_version(capsys):
    status, out, _ = run(capsys, "--version")
    assert status == 0
    assert out.strip() == f"shapecheck {__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", __version__)


@pytest.mark.parametrize("code", sorted(codes.REGISTRY))
def test_explain_every_code(capsys, code):
    status, out, _ = run(capsys, "explain", code)
    entry = codes.REGISTRY[code]
    assert status == 0
    assert out.startswith(f"{code} ({entry.name}): {entry.summary}")
    assert f"severity: {entry.severity.value}" in out
    for heading in ("What it means", "Why it matters", "Example", "How to fix it"):
        assert heading in out


def test_explain_is_case_insensitive(capsys):
    status, out, _ = run(capsys, "explain", "sc301")
    assert status == 0 and out.startswith("SC301")


@pytest.mark.parametrize("slug", ["matmul-inner-mismatch", "MATMUL-INNER-MISMATCH", "matmul_inner_mismatch"])
def test_explain_takes_a_slug(capsys, slug):
    status, out, _ = run(capsys, "explain", slug)
    assert status == 0 and out.startswith("SC301 (matmul-inner-mismatch)")


def test_explain_suggests_a_near_slug(capsys):
    status, out, err = run(capsys, "explain", "matmul-inner")
    assert status == 2 and "did you mean `matmul-inner-mismatch`?" in err


@pytest.mark.parametrize("code", ["SC999", "E0001", "301", ""])
def test_explain_an_unknown_code_exits_2(capsys, code):
    status, out, err = run(capsys, "explain", code)
    assert status == 2
    assert out == "" and "unknown code" in err


def test_explain_without_a_code_lists_them_all(capsys):
    status, out, _ = run(capsys, "explain")
    assert status == 0
    listed = re.findall(r"^(SC\d{3})\s", out, flags=re.MULTILINE)
    assert listed == sorted(codes.REGISTRY)  # in order: SC340, SC341 after SC323 (issue 34)


# --- what a command loads, and what reaches the user ---------------------------------------------


def test_verify_does_not_import_numpy():
    process = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "shapecheck", "verify", str(MULTI_HEAD)],
        capture_output=True, text=True, timeout=120, check=False)
    assert process.returncode == 0, process.stdout + process.stderr
    imported = {line.split("|")[-1].strip() for line in process.stderr.splitlines()
                if line.startswith("import time:")}
    assert "shapecheck.check.checker" in imported  # the report is real
    assert not {name for name in imported if name == "numpy" or name.startswith("numpy.")}


def test_version_and_explain_load_neither_sympy_nor_lark():
    code = ("import sys\nfrom shapecheck.cli import main\n"
            "for argv in (['--version'], ['explain', 'SC301']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in ('sympy', 'lark', 'numpy') if m in sys.modules))")
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=True)
    assert process.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
def test_no_traceback_from_the_installed_command(tmp_path):
    junk = tmp_path / "junk.attn"
    junk.write_bytes(b"dim N\x00\n\xff\xfe(((" + b"[" * 5000 + b"\n")
    process = subprocess_run("verify", junk, tmp_path / "missing.attn")
    assert process.returncode == 2  # the missing path
    process = subprocess_run("verify", junk)
    assert process.returncode == 1
    assert "Traceback" not in process.stdout + process.stderr


def test_a_binding_applies_to_the_files_that_declare_the_dim(capsys, tmp_path):
    heads = spec(tmp_path, "heads.attn", "dim N, H\ninput X: [N, H]\nY = X * 2\n")
    plain = spec(tmp_path, "plain.attn", "dim N\ninput X: [N]\nY = X * 2\n")
    code, out, _ = run(capsys, "verify", "--strict", "--format", "json", "--dim", "H=2",
                       heads, plain)
    assert code == 0, out
    code, out, _ = run(capsys, "verify", "--strict", "--format", "json", "--dim", "Hx=2",
                       heads, plain)
    document = json.loads(out)
    assert [d["code"] for f in document["files"] for d in f["diagnostics"]] == []
    # once for the run, not per file, and not at some file's 1:1
    assert [n["code"] for n in document["notifications"]] == ["SC207"]
    assert code == 0  # SC207 is about the tool's use, not the code: it never fails


def test_an_unknown_binding_with_one_file_is_a_notice_too(capsys, tmp_path):
    path = spec(tmp_path, "ok.attn", CLEAN)
    status, out, _ = run(capsys, "verify", "--dim", "n=4", path)
    assert status == 0
    assert out.startswith("warning[SC207]: `--dim n=4` binds `n`") and "ok.attn:1:1" not in out
    assert out.rstrip().endswith("1 file verified, with 1 warning.")
