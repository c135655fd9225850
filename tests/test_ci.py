"""CI that never loses results (issue 11 §4, issue 7 §3), through the real CLI.

Every SARIF document `verify` writes, in every mode, is validated against the
official SARIF 2.1.0 schema (tests/data/sarif-schema-2.1.0.json).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from shapecheck.cli import main
from shapecheck.messages.diagnostics import Diagnostic, Edit, FileResult, Fix, Severity, Span
from shapecheck.formats import render

HERE = Path(__file__).parent
CLEAN = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\noutput S = Q @ K.T\n"
ERROR = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\noutput S = Q @ K\n"


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads((HERE / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def valid(validator: jsonschema.protocols.Validator, text: str) -> dict:
    log = json.loads(text)
    problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]
    assert problems == []
    return log


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


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_a_missing_path_keeps_the_other_results_in_sarif(capsys, tmp_path, validator):
    good = write(tmp_path / "good.attn", ERROR)
    status, out, _ = run(capsys, "verify", "--format", "sarif", "missing.attn", good)
    assert status == 2
    log = valid(validator, out)
    sarif_run = log["runs"][0]
    assert [r["ruleId"] for r in sarif_run["results"]] == ["SC301"]  # still reported
    invocation = sarif_run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    [note] = invocation["toolExecutionNotifications"]
    assert note["level"] == "error" and note["associatedRule"]["id"] == "SC007"
    assert "missing.attn" in note["message"]["text"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "missing.attn"


def test_an_unknown_binding_is_a_notification_not_a_result(capsys, tmp_path, validator):
    spec = write(tmp_path / "a.attn", CLEAN)
    status, out, _ = run(capsys, "verify", "--format", "sarif", "--dim", "n=4", spec)
    assert status == 0
    sarif_run = valid(validator, out)["runs"][0]
    assert sarif_run["results"] == []
    [note] = sarif_run["invocations"][0]["toolExecutionNotifications"]
    assert (note["level"], note["associatedRule"]["id"]) == ("warning", "SC207")
    assert "locations" not in note
    assert sarif_run["invocations"][0]["executionSuccessful"] is True


def test_an_internal_failure_is_a_notification_and_the_rest_is_reported(capsys, tmp_path,
                                                                        monkeypatch, validator):
    from shapecheck import loader  # where checking lives (api re-exports it)

    real = loader.check_text

    def broken(text: str, *args: object, **kwargs: object) -> object:
        if "boom" in text:
            raise ZeroDivisionError("boom")
        return real(text, *args, **kwargs)

    monkeypatch.setattr(loader, "check_text", broken)
    write(tmp_path / "a.attn", "# boom\n" + CLEAN)
    write(tmp_path / "b.attn", ERROR)
    status, out, err = run(capsys, "verify", "--format", "sarif", tmp_path)
    assert status == 2 and "SC006" in err
    sarif_run = valid(validator, out)["runs"][0]
    assert [r["ruleId"] for r in sarif_run["results"]] == ["SC301"]
    [note] = sarif_run["invocations"][0]["toolExecutionNotifications"]
    assert note["associatedRule"]["id"] == "SC006" and "boom" in note["message"]["text"]


def test_nothing_to_check_still_writes_a_valid_document(capsys, tmp_path, validator):
    (tmp_path / "empty").mkdir()
    status, out, err = run(capsys, "verify", "--format", "sarif", tmp_path / "empty")
    assert status == 2 and "no spec files" in err
    valid(validator, out)
    status, out, _ = run(capsys, "verify", "--format", "sarif", "--allow-empty", tmp_path / "empty")
    assert status == 0
    valid(validator, out)


def test_uris_are_relative_to_the_repository_root_from_any_folder(capsys, tmp_path, monkeypatch,
                                                                  validator):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    spec = write(tmp_path / "specs" / "deep" / "bad.attn", ERROR)
    monkeypatch.chdir(tmp_path / "specs")
    _, out, _ = run(capsys, "verify", "--format", "sarif", "deep/bad.attn")
    sarif_run = valid(validator, out)["runs"][0]
    location = sarif_run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "specs/deep/bad.attn", "uriBaseId": "%SRCROOT%"}
    assert sarif_run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    # GitHub annotations too: GitHub resolves file= from the repository root.
    _, out, _ = run(capsys, "verify", "--format", "github", "deep/bad.attn")
    assert out.startswith("::error file=specs/deep/bad.attn,")
    # --base-dir chooses the folder.
    _, out, _ = run(capsys, "verify", "--format", "sarif", "--base-dir", tmp_path / "specs",
                    spec)
    location = json.loads(out)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "deep/bad.attn"


def test_sarif_carries_fixes(validator):
    fix = Fix("did you mean `Q @ K.T`?", (Edit(Span(4, 16, 4, 17), "K.T"),))
    insert = Fix("add `constraint D == H * d`", (Edit(Span(2, 1, 2, 1), "constraint D == H * d\n"),))
    diagnostic = Diagnostic("SC301", Severity.ERROR, "m", Span(4, 12, 4, 17),
                            help=(fix.help, insert.help), fixes=(fix, insert))
    log = valid(validator, render([FileResult("a.attn", ERROR, [diagnostic])], "sarif",
                                  color=False, fail_on="error"))
    fixes = log["runs"][0]["results"][0]["fixes"]
    assert fixes[0]["description"]["text"] == fix.help
    [change] = fixes[0]["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "a.attn"
    assert change["replacements"] == [{
        "deletedRegion": {"startLine": 4, "startColumn": 16, "endLine": 4, "endColumn": 17},
        "insertedContent": {"text": "K.T"}}]
    assert fixes[1]["artifactChanges"][0]["replacements"][0]["deletedRegion"] == {
        "startLine": 2, "startColumn": 1, "endLine": 2, "endColumn": 1}


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("ok.attn",),
    ("bad.attn", "ok.attn"),
    ("missing.attn",),
    ("bad.attn", "--dim", "zz=3"),
    ("-", "--stdin-filename", "piped.attn"),
    (".", "--select", "SC5"),
])
def test_sarif_is_valid_in_every_mode(tmp_path, validator, args):
    write(tmp_path / "ok.attn", CLEAN)
    write(tmp_path / "bad.attn", ERROR + "x = Q @ Q  # noqa: SC301\n# noqa: SC999\n")
    done = subprocess.run([sys.executable, "-m", "shapecheck", "verify", "--format", "sarif", *args],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
                          input=ERROR)
    assert done.returncode in (0, 1, 2) and "Traceback" not in done.stderr
    valid(validator, done.stdout)
