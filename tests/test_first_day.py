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
