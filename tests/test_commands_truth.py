"""Commands that do what the docs say (issue 18, items 9-11): `verify --diff`'s exit
status and JSON, `run -` and `report -` with `--stdin-filename`, and `--config 'KEY =
VALUE'` replacing the file's value of a selection key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shapecheck.cli import main

ROOT = Path(__file__).resolve().parent.parent
BROKEN = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\noutput S: [N, N] = Q @ K\n"
UNFIXABLE = "dim N, d\ninput Q: [N, d]\noutput S: [N, N] = Q @ Q @ Q\n"
CLEAN = "dim N, d\ninput Q: [N, d]\noutput S: [N, N] = Q @ Q.T\n"
UNUSED_NOQA = "dim N, d\ninput Q: [N, d]\noutput S = Q @ Q.T  # noqa: SC401\n"
WRONG_AXIS = ("dim N, d\ninput X: [N, d]\nS = X @ X.T / sqrt(d)\nP = softmax(S, axis=0)\n"
              "output O: [N, d] = P @ X\n")


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stopped:
        main([str(a) for a in args])
    captured = capsys.readouterr()
    code = stopped.value.code
    return (code if isinstance(code, int) else 1 if code else 0), captured.out, captured.err


def shell(*args: str, stdin: str = "", cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shapecheck", *args], input=stdin, text=True,
                          capture_output=True, cwd=cwd, timeout=120)


# --- item 9: verify --diff ---------------------------------------------------------------


@pytest.mark.parametrize("text, status", [
    (BROKEN, 1),        # a fix would change it
    (UNUSED_NOQA, 1),   # only a warning's fix: still a change
    (UNFIXABLE, 1),     # nothing to fix, but an error remains
    (CLEAN, 0),         # nothing to change, no error
])
def test_diff_exits_1_on_a_change_or_an_error_left(capsys, tmp_path, text, status):
    path = tmp_path / "a.attn"
    path.write_text(text, encoding="utf-8")
    assert run(capsys, "verify", "--diff", path)[0] == status
    assert path.read_text(encoding="utf-8") == text
    assert run(capsys, "verify", "--diff", "--exit-zero", path)[0] == 0


def test_diff_as_json_is_the_document_with_each_files_diff(capsys, tmp_path):
    broken, clean = tmp_path / "a.attn", tmp_path / "b.attn"
    broken.write_text(BROKEN, encoding="utf-8")
    clean.write_text(CLEAN, encoding="utf-8")
    status, out, _ = run(capsys, "verify", "--diff", "--format", "json", broken, clean)
    assert status == 1
    document = json.loads(out)  # a JSON document, not a bare diff
    first, second = document["files"]
    assert first["path"] == str(broken) and "+output S: [N, N] = Q @ K.T" in first["diff"]
    assert first["ok"] and first["diagnostics"] == []  # what is left once it is fixed
    assert second["diff"] == "" and second["ok"]
    assert document["summary"]["errors"] == 0


def test_diff_json_keeps_the_errors_a_fix_leaves(capsys, tmp_path):
    path = tmp_path / "a.attn"
    path.write_text(UNFIXABLE, encoding="utf-8")
    status, out, _ = run(capsys, "verify", "--diff", "--format", "json", path)
    entry = json.loads(out)["files"][0]
    assert status == 1 and entry["diff"] == "" and not entry["ok"]
    assert [d["code"] for d in entry["diagnostics"]] == ["SC301"]


# --- item 10: run - and report - ----------------------------------------------------------


@pytest.mark.slow
def test_run_reads_standard_input_with_its_name():
    spec = (ROOT / "examples" / "causal.attn").read_text(encoding="utf-8")
    done = shell("run", "-", "--stdin-filename", "specs/causal.attn", "--dim", "N=4",
                 "--dim", "d=2", "--dim", "H=2", stdin=spec)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("specs/causal.attn: ran with N=4")
    bare = shell("run", "-", "--dim", "N=4", "--dim", "d=2", "--dim", "H=2", stdin=spec)
    assert bare.returncode == 0 and bare.stdout.startswith("-: ran with")


@pytest.mark.slow
def test_run_from_standard_input_refuses_a_broken_spec_by_its_name():
    done = shell("run", "-", "--stdin-filename", "x.attn", stdin=BROKEN)
    assert done.returncode == 1
    assert "x.attn:4:" in done.stderr and "cannot read" not in done.stderr


@pytest.mark.slow
def test_report_reads_standard_input(tmp_path):
    done = shell("report", "-", "-o", "-", "--stdin-filename", "named.attn", stdin=CLEAN)
    assert done.returncode == 0, done.stderr
    assert "named.attn" in done.stdout and "verifies" in done.stdout
    out = tmp_path / "r.html"
    broken = shell("report", "-", "-o", str(out), stdin=BROKEN)
    assert broken.returncode == 1 and out.exists() and "SC301" in out.read_text(encoding="utf-8")


@pytest.mark.slow
def test_stdin_is_configured_as_its_filename(tmp_path):
    (tmp_path / "shapecheck.toml").write_text('ignore = ["SC402"]\n', encoding="utf-8")
    named = shell("report", "-", "-o", "-", "--stdin-filename", str(tmp_path / "s.attn"),
                  stdin=WRONG_AXIS)
    bare = shell("report", "-", "-o", "-", stdin=WRONG_AXIS)
    assert "SC402" in bare.stdout and "SC402" not in named.stdout


# --- item 11: --config 'KEY = VALUE' overrides the file's key ---------------------------


def test_inline_ignore_replaces_the_files_ignore(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shapecheck.toml").write_text('ignore = ["SC4"]\n', encoding="utf-8")
    (tmp_path / "s.attn").write_text(WRONG_AXIS, encoding="utf-8")
    assert "SC402" not in run(capsys, "verify", "s.attn")[1]
    assert "SC402" in run(capsys, "verify", "s.attn", "--config", "ignore = []")[1]
    # Another key leaves the file's ignore alone; the flags still add a layer on top.
    assert "SC402" not in run(capsys, "verify", "s.attn", "--config", "strict = false")[1]
    assert "SC402" not in run(capsys, "verify", "s.attn", "--config", "ignore = []",
                              "--ignore", "SC402")[1]


def test_inline_select_replaces_the_files_select(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shapecheck.toml").write_text('select = ["SC3"]\n', encoding="utf-8")
    (tmp_path / "s.attn").write_text(WRONG_AXIS, encoding="utf-8")
    assert "SC402" not in run(capsys, "verify", "s.attn")[1]
    assert "SC402" in run(capsys, "verify", "s.attn", "--config", 'select = ["ALL"]')[1]


# --- item 13: what `run` says it generated is what it drew -----------------------------


@pytest.mark.slow
def test_a_rank_1_param_is_reported_as_drawn_n01(tmp_path):
    spec = tmp_path / "r.attn"
    spec.write_text("dim N, d\ninput X: [N, d]\nparam g: [d]\nparam W: [d, d]\n"
                    "output Y: [N, d] = (X * g) @ W\n", encoding="utf-8")
    done = shell("run", str(spec), "--dim", "N=2", "--dim", "d=3")
    assert done.returncode == 0, done.stderr
    assert "generated (seed 0): X, g ~ N(0, 1)" in done.stdout
    assert "generated (seed 0): W ~ N(0, 1/fan_in)" in done.stdout
