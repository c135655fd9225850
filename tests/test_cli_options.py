"""Commands that do what the docs say (issue 18, items 9-11): `verify --diff`'s exit
status and JSON, `run -` and `report -` with `--stdin-filename`, and `--config 'KEY =
VALUE'` replacing the file's value of a selection key; and the first-day slips of issue 34
(`--diff` says what remains, `report` prints its problems, `--fix` and SC404, `explain`'s
order, the README's CI step on every example)."""

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


# --- issue 34: the first-day slips a new user met -------------------------------------------


def test_explain_lists_the_codes_in_order(capsys) -> None:
    status, out, _ = run(capsys, "explain")
    listed = [line.split()[0] for line in out.splitlines()]
    assert status == 0 and listed == sorted(listed)
    assert listed.index("SC323") < listed.index("SC340") < listed.index("SC341") < listed.index("SC401")
    for code in ("SC207", "SC602"):  # about the tool's limits: explain says they never fail
        assert "it never fails `verify`" in run(capsys, "explain", code)[1]
    assert "never fails" not in run(capsys, "explain", "SC402")[1]


def test_the_configuration_sample_ignores_the_code_its_file_name_means() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert '"scaled_by_model_width.attn" = ["SC404"]' in text  # SC404 is scale-size


FIXABLE_AND_NOT = ("dim N, d\ninput Q: [N, d]\n"
                   "output S = Q @ Q.T  # noqa: SC401\noutput T: [N, N] = Q @ Q @ Q\n")


def test_diff_says_which_errors_remain(capsys, tmp_path) -> None:
    path = tmp_path / "a.attn"
    path.write_text(UNFIXABLE, encoding="utf-8")
    status, out, err = run(capsys, "verify", "--diff", path)
    assert status == 1 and out == ""
    assert f"{path}:3:20: error[SC301]" in err and "Found 1 error and 0 warnings in 1 file." in err
    assert err.rstrip().endswith("Would fix 0 problem(s) in 0 file(s).")
    path.write_text(FIXABLE_AND_NOT, encoding="utf-8")
    status, out, err = run(capsys, "verify", "--diff", path)
    assert status == 1 and "-output S = Q @ Q.T  # noqa: SC401" in out
    assert "error[SC301]" in err and "SC501" not in err  # what the fix leaves, not what it fixes
    clean = tmp_path / "b.attn"
    clean.write_text(UNFIXABLE.replace("Q @ Q @ Q", "Q @ Q.T"), encoding="utf-8")
    assert run(capsys, "verify", "--diff", clean)[1:] == ("", "Would fix 0 problem(s) in 0 file(s).\n")


def test_report_prints_the_diagnostics_it_embeds(capsys, tmp_path) -> None:
    broken = ROOT / "examples" / "broken" / "missing_transpose.attn"
    out_path = tmp_path / "r.html"
    status, out, err = run(capsys, "report", broken, "-o", out_path)
    assert status == 1 and out_path.exists()
    _, verified, _ = run(capsys, "verify", "-q", broken)
    assert out.startswith(verified)  # the frames verify prints, then where it went
    assert out.endswith(f"Wrote {out_path}.\nFound 1 error and 0 warnings in 1 file.\n")
    status, out, err = run(capsys, "report", broken, "-o", "-")
    assert status == 1 and out.startswith("# ") and err == verified  # stdout holds the report
    clean = ROOT / "examples" / "single_head.attn"
    status, out, _ = run(capsys, "report", clean, "-o", tmp_path / "c.md")
    assert status == 0 and out == f"Wrote {tmp_path / 'c.md'}.\n1 file verified.\n"


def test_fix_applies_the_exact_scale_help(capsys, tmp_path) -> None:
    """SC404's `help: scale by the contracted size: / sqrt(d)` is an edit where the scale is
    one `/ sqrt(X)`; written otherwise, `explain SC404` says why the help stays words."""
    source = (ROOT / "examples" / "broken" / "scaled_by_model_width.attn").read_text("utf-8")
    path = tmp_path / "s.attn"
    path.write_text(source, encoding="utf-8")
    status, out, _ = run(capsys, "verify", "--fix", path)
    assert status == 0 and "Fixed 1 problem(s) in 1 file(s)." in out, out
    assert path.read_text("utf-8") == source.replace("/ sqrt(D_model)", "/ sqrt(d)")
    other = source.replace("/ sqrt(D_model)", "* D_model ** -0.5")
    path.write_text(other, encoding="utf-8")
    status, out, _ = run(capsys, "verify", "--fix", path)
    assert status == 1 and "warning[SC404]" in out and path.read_text("utf-8") == other
    _, explained, _ = run(capsys, "explain", "SC404")
    assert "has no one place to edit" in explained


def _readme_ci_command() -> list[str]:
    import re
    import shlex

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^- run: (shapecheck verify specs/ --format github)", text, re.M)
    assert found, "the README's CI sample"
    return shlex.split(found.group(1))[1:]


EXAMPLES = sorted((ROOT / "examples").rglob("*.attn"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT / "examples")))
def test_the_readme_ci_step_fails_on_each_bug_and_passes_the_clean(capsys, path: Path) -> None:
    """Issue 34's quality bar: the README's CI step, as written, on each example: every
    broken one fails it -- the formula bugs (warnings) as the shape bugs (errors) -- and
    every other passes."""
    command = [str(path) if part == "specs/" else part for part in _readme_ci_command()]
    status, out, _ = run(capsys, *command)
    broken = path.parent.name == "broken"
    assert status == (1 if broken else 0), out
    assert ("::error " in out or "::warning " in out) == broken
