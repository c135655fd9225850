"""The first-day slips a new user met (issue 34), each through the real command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from shapecheck.cli import main

ROOT = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stopped:
        main([str(a) for a in args])
    captured = capsys.readouterr()
    code = stopped.value.code
    return (code if isinstance(code, int) else 1 if code else 0), captured.out, captured.err


def test_explain_lists_the_codes_in_order(capsys) -> None:
    status, out, _ = run(capsys, "explain")
    listed = [line.split()[0] for line in out.splitlines()]
    assert status == 0 and listed == sorted(listed)
    assert listed.index("SC323") < listed.index("SC340") < listed.index("SC341") < listed.index("SC401")


def test_the_configuration_sample_ignores_the_code_its_file_name_means() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert '"scaled_by_model_width.attn" = ["SC404"]' in text  # SC404 is scale-size


UNFIXABLE = "dim N, d\ninput Q: [N, d]\noutput S: [N, N] = Q @ Q @ Q\n"  # no exact help
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
