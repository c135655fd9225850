"""Configuration, the file walk and suppression, through the real CLI (issue 11).

`shapecheck/config.py` (settings found from a file's folder upward), `walk.py`
(which files a folder means) and `suppress.py` (`# noqa`), as `verify`, `run` and
`report` use them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shapecheck.cli import main
from shapecheck.config import ConfigError, Finder, Overrides, Settings, load

WARN_UNUSED = "dim N, d, unused\ninput Q: [N, d]\noutput S = Q @ Q.T\n"  # SC401 on line 1
WARN_SOFTMAX = ("dim N, d\ninput Q: [N, d]\ninput V: [N, d]\n"
                "P = softmax(Q @ Q.T / sqrt(d), axis=col)\noutput O = P @ V\n")  # SC402 on line 5
ERROR = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\noutput S = Q @ K\n"  # SC301
CLEAN = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\noutput S = Q @ K.T\n"


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stopped:
        main([str(a) for a in args])
    captured = capsys.readouterr()
    code = stopped.value.code
    return (code if isinstance(code, int) else 1 if code else 0), captured.out, captured.err


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def codes_of(out: str) -> dict[str, list[str]]:
    """verify --format json -> {file name: [codes]}."""
    return {Path(f["path"]).name: [d["code"] for d in f["diagnostics"]]
            for f in json.loads(out)["files"]}


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from the test's folder, so this repository's own pyproject.toml is not found."""
    monkeypatch.chdir(tmp_path)


# --- discovery and precedence ---------------------------------------------------------


def test_pyproject_section_is_found_from_the_file_upward(capsys, tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n\n[tool.shapecheck]\n'
          'ignore = ["SC401"]\n')
    spec = write(tmp_path / "specs" / "deep" / "a.attn", WARN_UNUSED)
    status, out, _ = run(capsys, "verify", "--format", "json", spec)
    assert status == 0 and codes_of(out) == {"a.attn": []}
    assert run(capsys, "verify", "--isolated", "--format", "json", spec)[1].count("SC401") == 1


def test_the_closest_configuration_wins_and_shapecheck_toml_beats_pyproject(capsys, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.shapecheck]\nignore = ["SC401"]\n')
    write(tmp_path / "sub" / "pyproject.toml", '[tool.shapecheck]\nignore = ["SC402"]\n')
    write(tmp_path / "sub" / "shapecheck.toml", 'select = ["SC402"]\n')  # beats sub/pyproject
    top = write(tmp_path / "top.attn", WARN_UNUSED)
    below = write(tmp_path / "sub" / "below.attn", WARN_UNUSED)
    below2 = write(tmp_path / "sub" / "soft.attn", WARN_SOFTMAX)
    _, out, _ = run(capsys, "verify", "--format", "json", top, below, below2)
    assert codes_of(out) == {"top.attn": [], "below.attn": [], "soft.attn": ["SC402"]}


def test_a_pyproject_without_the_section_is_passed_over(tmp_path):
    write(tmp_path / "shapecheck.toml", 'ignore = ["SC401"]\n')
    write(tmp_path / "sub" / "pyproject.toml", '[project]\nname = "shapecheck-user"\n')
    settings = Finder(cwd=tmp_path).settings_for(tmp_path / "sub" / "x.attn")
    assert settings.file == tmp_path / "shapecheck.toml"
    assert "SC401" in settings.disabled()


def test_dot_shapecheck_toml_beats_shapecheck_toml(tmp_path):
    write(tmp_path / "shapecheck.toml", 'strict = true\n')
    write(tmp_path / ".shapecheck.toml", 'strict = false\n')
    assert Finder(cwd=tmp_path).settings_for(tmp_path / "a.attn").fail_on == "error"


def test_config_flag_uses_one_file_and_inline_pairs_override(capsys, tmp_path):
    config = write(tmp_path / "elsewhere" / "custom.toml", 'ignore = ["SC401"]\n')
    write(tmp_path / "shapecheck.toml", 'ignore = ["SC402"]\n')  # not used with --config
    spec = write(tmp_path / "a.attn", WARN_UNUSED)
    soft = write(tmp_path / "b.attn", WARN_SOFTMAX)
    _, out, _ = run(capsys, "verify", "--format", "json", "--config", config, spec, soft)
    assert codes_of(out) == {"a.attn": [], "b.attn": ["SC402"]}
    _, out, _ = run(capsys, "verify", "--format", "json", "--config", 'ignore = ["SC4"]', spec,
                    soft)
    assert codes_of(out) == {"a.attn": [], "b.attn": []}


def test_strict_from_the_configuration_and_no_strict(capsys, tmp_path):
    write(tmp_path / "shapecheck.toml", "strict = true\n")
    spec = write(tmp_path / "a.attn", WARN_UNUSED)
    assert run(capsys, "verify", spec)[0] == 1
    assert run(capsys, "verify", "--no-strict", spec)[0] == 0


@pytest.mark.parametrize(("config", "flag", "status"), [
    ("", None, 1),  # the default: a warning about the code fails, as in ruff
    ('fail-on = "error"\n', None, 0),
    ('fail-on = "warning"\n', None, 1),
    ("strict = false\n", None, 0),  # `strict` is an alias of `fail-on`
    ('fail-on = "error"\n', "--strict", 1),  # the command line wins over the file
    ('fail-on = "warning"\n', "--no-strict", 0),
    ("strict = true\n", "--exit-zero", 0),
])
def test_fail_on_and_its_aliases(capsys, tmp_path, config, flag, status):
    write(tmp_path / "shapecheck.toml", config)
    spec = write(tmp_path / "a.attn", WARN_UNUSED)
    assert run(capsys, "verify", *([flag] if flag else []), spec)[0] == status


# --- rule selection ----------------------------------------------------------------------


def selection(*layers: tuple[list[str] | None, list[str], list[str]]) -> frozenset[str]:
    from shapecheck.config import Layer

    settings = Settings(root=Path("."), layers=tuple(
        Layer(None if s is None else tuple(s), tuple(e), tuple(i)) for s, e, i in layers))
    return settings.disabled()


def test_selection_follows_ruff_specificity():
    assert "SC402" in selection((["SC4"], [], ["SC402"]))  # the code is more specific
    assert "SC402" not in selection((["SC402"], [], ["SC4"]))
    assert "SC401" in selection((["SC402"], [], []))  # select replaces the default (all)
    assert "SC402" in selection((["SC4"], [], ["SC4"]))  # a tie: ignore wins
    assert "SC401" not in selection((None, [], ["SC402"]))
    # A second layer (the command line) builds on the first; --select resets it.
    assert "SC401" not in selection((None, [], ["SC401"]), (["ALL"], [], []))
    assert "SC401" in selection((None, [], ["SC401"]), (None, ["SC402"], []))


def test_errors_are_never_turned_off():
    off = selection((["SC402"], [], []))
    assert "SC301" not in off and "SC001" not in off


def test_select_and_ignore_on_the_command_line(capsys, tmp_path):
    a = write(tmp_path / "a.attn", WARN_UNUSED)
    b = write(tmp_path / "b.attn", WARN_SOFTMAX)
    c = write(tmp_path / "c.attn", ERROR)
    _, out, _ = run(capsys, "verify", "--format", "json", "--select", "SC402", a, b, c)
    assert codes_of(out) == {"a.attn": [], "b.attn": ["SC402"], "c.attn": ["SC301"]}
    _, out, _ = run(capsys, "verify", "--format", "json", "--ignore", "SC401,SC402", a, b)
    assert codes_of(out) == {"a.attn": [], "b.attn": []}


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--ignore", "SC301", "is an error"),
    ("--ignore", "SC3", "matches only errors"),
    ("--select", "XY1", "matches no code"),
])
def test_bad_selectors_on_the_command_line_are_usage_errors(capsys, tmp_path, flag, value, words):
    spec = write(tmp_path / "a.attn", CLEAN)
    status, out, err = run(capsys, "verify", flag, value, spec)
    assert status == 2 and words in err and out == ""


def test_per_file_ignores(capsys, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.shapecheck.per-file-ignores]\n'
          '"legacy/*.attn" = ["SC401"]\n"b.attn" = ["SC4"]\n')
    a = write(tmp_path / "a.attn", WARN_UNUSED)
    legacy = write(tmp_path / "legacy" / "old.attn", WARN_UNUSED)
    b = write(tmp_path / "sub" / "b.attn", WARN_SOFTMAX)  # a name alone matches anywhere
    _, out, _ = run(capsys, "verify", "--format", "json", a, legacy, b)
    assert codes_of(out) == {"a.attn": ["SC401"], "old.attn": [], "b.attn": []}


# --- a bad configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(("text", "line", "words"), [
    ('[tool.shapecheck]\nselect = ["SC4"]\nignroe = ["SC401"]\n', 3, "`ignroe`: unknown key; did you mean `ignore`?"),
    ('[tool.shapecheck]\n\nstrict = "yes"\n', 3, '`strict`: must be true or false, not "yes"'),
    ('[tool.shapecheck]\nfail-on = "warnings"\n', 2,
     '`fail-on`: must be "warning" or "error", not "warnings"'),
    ('[tool.shapecheck]\nfail-on = "error"\nstrict = true\n', 3,
     "`strict`: `strict` is an alias of `fail-on`; give one of them"),
    ('[tool.shapecheck]\nignore = ["SC301"]\n', 2, "`ignore`: `SC301` is an error"),
    ('[tool.shapecheck]\nselect = "SC4"\n', 2, "`select`: must be a list of strings"),
    ('[tool.shapecheck.dims]\nN = 128\nd = 0\n', 3, "`dims.d`: must be a positive integer, not 0"),
    ('[tool.shapecheck]\ndims = {N = -1}\n', 2, "`dims.N`: must be a positive integer"),
    ('[tool.shapecheck.per-file-ignores]\n"x.attn" = ["SC999"]\n', 2, "matches no code"),
    ('[tool.shapecheck]\nselect = [\n', 2, "not valid TOML"),
    ('[tool.shapecheck]\nselect = [1 2]\n', 2, "not valid TOML"),
])
def test_a_bad_configuration_names_the_file_line_and_key(capsys, tmp_path, text, line, words):
    config = write(tmp_path / "pyproject.toml", text)
    spec = write(tmp_path / "a.attn", CLEAN)
    status, out, err = run(capsys, "verify", spec)
    assert status == 2 and out == ""
    assert f"{config}:{line}:" in err and words in err, err
    assert "Traceback" not in err


def test_top_level_keys_in_shapecheck_toml_and_a_misplaced_header(tmp_path):
    bad = write(tmp_path / "shapecheck.toml", '[tool.shapecheck]\nstrict = true\n')
    with pytest.raises(ConfigError, match="without a \\[tool.shapecheck\\] header"):
        load(bad)


def test_a_bad_inline_config_is_a_usage_error(capsys, tmp_path):
    spec = write(tmp_path / "a.attn", CLEAN)
    status, _, err = run(capsys, "verify", "--config", "select = [", spec)
    assert status == 2 and "neither a file nor a TOML" in err


# --- default dims: run and report, not verify ---------------------------------------------------

DIMS_SPEC = ("dim N, d, H\ndim D_model = H * d\ninput X: [N, D_model]\nparam W: [D_model, D_model]\n"
             "output Y = X @ W\n")


def test_config_dims_are_defaults_for_run_and_report_but_not_verify(capsys, tmp_path):
    pytest.importorskip("numpy")
    write(tmp_path / "pyproject.toml",
          "[tool.shapecheck.dims]\nN = 4\nd = 2\nH = 2\nunrelated = 7\n")
    spec = write(tmp_path / "m.attn", DIMS_SPEC)
    status, out, err = run(capsys, "run", spec)
    assert status == 0, err
    assert "N=4" in out and "D_model=4" in out and "unrelated" not in out + err
    status, out, err = run(capsys, "run", spec, "--dim", "N=3")  # --dim wins
    assert status == 0 and "N=3" in out
    status, _, err = run(capsys, "run", spec, "--isolated")
    assert status == 1 and "unbound" in err  # without the configuration, N... are free
    status, out, _ = run(capsys, "verify", "--format", "json", spec)
    assert status == 0 and "SC207" not in out  # verify stays symbolic: no binding
    report = tmp_path / "m.md"
    assert run(capsys, "report", spec, "-o", report)[0] == 0
    assert "N=4" in report.read_text(encoding="utf-8").replace(" = ", "=")


# --- the file walk -------------------------------------------------------------------------------


def test_a_walk_skips_gitignored_and_excluded_paths_but_named_files_are_checked(capsys, tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path / ".gitignore", "build/\n*.tmp.attn\n!keep.tmp.attn\n")
    write(tmp_path / "specs" / ".gitignore", "private.attn\n")
    write(tmp_path / "shapecheck.toml", 'extend-exclude = ["legacy", "specs/old_*.attn"]\n')
    write(tmp_path / "specs" / "a.attn", CLEAN)
    write(tmp_path / "specs" / "private.attn", ERROR)
    write(tmp_path / "specs" / "old_1.attn", ERROR)
    write(tmp_path / "x.tmp.attn", ERROR)
    write(tmp_path / "keep.tmp.attn", CLEAN)
    write(tmp_path / "build" / "gen.attn", ERROR)
    write(tmp_path / "legacy" / "l.attn", ERROR)
    write(tmp_path / ".venv" / "v.attn", ERROR)  # a default exclude
    write(tmp_path / ".git" / "g.attn", ERROR)
    status, out, _ = run(capsys, "verify", "--format", "json", tmp_path)
    assert status == 0, out
    found = sorted(Path(f["path"]).relative_to(tmp_path).as_posix()
                   for f in json.loads(out)["files"])
    assert found == ["keep.tmp.attn", "specs/a.attn"]
    # Walking a subfolder still honours the parents' .gitignore up to the repository root.
    _, out, _ = run(capsys, "verify", "--format", "json", tmp_path / "specs")
    assert [Path(f["path"]).name for f in json.loads(out)["files"]] == ["a.attn"]
    # A file named on the command line is always checked.
    status, out, _ = run(capsys, "verify", "--format", "json", tmp_path / "build" / "gen.attn",
                         tmp_path / "specs" / "private.attn")
    assert status == 1 and len(json.loads(out)["files"]) == 2


def test_gitignore_outside_a_repository_and_respect_gitignore_false(capsys, tmp_path):
    write(tmp_path / "specs" / ".gitignore", "skip.attn\n")
    write(tmp_path / "specs" / "a.attn", CLEAN)
    write(tmp_path / "specs" / "skip.attn", ERROR)
    assert run(capsys, "verify", tmp_path / "specs")[0] == 0
    write(tmp_path / "shapecheck.toml", "respect-gitignore = false\n")
    assert run(capsys, "verify", tmp_path / "specs")[0] == 1


def test_exclude_on_the_command_line_replaces_the_defaults(capsys, tmp_path):
    write(tmp_path / "a.attn", CLEAN)
    write(tmp_path / "gen" / "b.attn", ERROR)
    write(tmp_path / ".venv" / "c.attn", ERROR)
    assert run(capsys, "verify", "--extend-exclude", "gen", tmp_path)[0] == 0
    _, out, _ = run(capsys, "verify", "--format", "json", "--exclude", "gen", tmp_path)
    assert sorted(codes_of(out)) == ["a.attn", "c.attn"]


def test_symlinked_folders_are_not_followed(capsys, tmp_path):
    write(tmp_path / "real" / "a.attn", CLEAN)
    (tmp_path / "real" / "loop").symlink_to(tmp_path / "real")
    _, out, _ = run(capsys, "verify", "--format", "json", tmp_path / "real")
    assert len(json.loads(out)["files"]) == 1


# --- stdin, statistics, quiet, exit-zero, output-format -------------------------------------------


def _cli(*args: str | Path, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shapecheck", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=120, cwd=cwd, check=False)


@pytest.mark.slow
def test_stdin_with_a_filename_uses_its_configuration(tmp_path):
    write(tmp_path / "specs" / "shapecheck.toml", 'ignore = ["SC401"]\n')
    done = _cli("verify", "-", "--stdin-filename", "specs/model.attn", "--format", "json",
                stdin=WARN_UNUSED.replace("Q @ Q.T", "Q @ Q"), cwd=tmp_path)
    document = json.loads(done.stdout)
    assert document["files"][0]["path"] == "specs/model.attn"
    assert [d["code"] for d in document["files"][0]["diagnostics"]] == ["SC301"]
    assert done.returncode == 1
    plain = _cli("verify", "-", stdin=CLEAN, cwd=tmp_path)
    assert plain.returncode == 0 and "1 file verified" in plain.stdout
    named_only = _cli("verify", "--stdin-filename", "x.attn", stdin=ERROR, cwd=tmp_path)
    assert named_only.returncode == 1 and "x.attn:4:12: error[SC301]" in named_only.stdout


def test_statistics_quiet_exit_zero_and_output_format(capsys, tmp_path):
    a = write(tmp_path / "a.attn", ERROR)
    b = write(tmp_path / "b.attn", ERROR + "input W: [N]\n")
    status, out, _ = run(capsys, "verify", "--statistics", a, b)
    assert status == 1
    # `Q @ K` has a verified fix (`Q @ K.T`): fixable, as ruff marks it
    assert out.splitlines() == ["2  SC301  [*] matmul-inner-mismatch",
                                "1  SC401  unused-declaration"]
    _, out, _ = run(capsys, "verify", "--statistics", "--output-format", "json", a, b)
    assert json.loads(out)[0] == {"code": "SC301", "name": "matmul-inner-mismatch", "count": 2,
                                  "fixable": True}
    status, out, _ = run(capsys, "verify", "--quiet", a)
    assert status == 1 and "error[SC301]" in out and "Found" not in out
    assert run(capsys, "verify", "--exit-zero", a)[0] == 0
    assert run(capsys, "verify", "--exit-zero", tmp_path / "missing.attn")[0] == 2
    _, out, _ = run(capsys, "verify", "--output-format", "github", a)
    assert out.startswith("::error file=")


def test_help_has_examples_and_exit_status(capsys):
    for args in (["--help"], ["verify", "--help"]):
        status, out, _ = run(capsys, *args)
        assert status == 0
        assert "Examples:" in out and "Exit status:" in out
        assert "  2  usage error" in out



def test_the_exit_help_names_the_codes_that_never_fail():
    from shapecheck.cli.common import EXIT_STATUS_HELP
    from shapecheck.messages import codes

    about_tool = sorted(c.id for c in codes.REGISTRY.values() if c.about_tool)
    assert about_tool == ["SC207", "SC602"]
    assert sorted(re.findall(r"SC\d{3}", EXIT_STATUS_HELP)) == about_tool


# --- suppression through the CLI ------------------------------------------------------------------


def test_noqa_suppresses_warnings_but_never_errors(capsys, tmp_path):
    spec = write(tmp_path / "a.attn", "dim N, d, unused  # noqa: SC401\ninput Q: [N, d]\n"
                 "input K: [N, d]\noutput S = Q @ K  # noqa: SC301\n")
    status, out, _ = run(capsys, "verify", "--format", "json", spec)
    assert status == 1 and codes_of(out) == {"a.attn": ["SC301", "SC502"]}


def test_run_refuses_a_spec_whose_error_is_under_noqa(capsys, tmp_path):
    pytest.importorskip("numpy")
    spec = write(tmp_path / "a.attn", "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\n"
                 "output S = Q @ K  # noqa\n")
    status, _, err = run(capsys, "run", spec, "--dim", "N=2", "--dim", "d=3")
    assert status == 1 and "SC301" in err


def test_unused_noqa_can_itself_be_ignored(capsys, tmp_path):
    spec = write(tmp_path / "a.attn", CLEAN.replace("output S = Q @ K.T", "output S = Q @ K.T  # noqa"))
    _, out, _ = run(capsys, "verify", "--format", "json", spec)
    assert codes_of(out) == {"a.attn": ["SC501"]}
    _, out, _ = run(capsys, "verify", "--format", "json", "--ignore", "SC501", spec)
    assert codes_of(out) == {"a.attn": []}


def test_overrides_apply_over_a_found_configuration(tmp_path):
    write(tmp_path / "shapecheck.toml", 'ignore = ["SC401"]\nextend-exclude = ["a"]\n')
    finder = Finder(cwd=tmp_path, overrides=Overrides(select=("SC401",), extend_exclude=("b",)))
    settings = finder.settings_for(tmp_path / "x.attn")
    assert "SC401" not in settings.disabled() and "SC402" in settings.disabled()
    assert settings.extend_exclude == ("a", "b")
