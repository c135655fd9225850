"""The installed package carries the grammar (and its type marker)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds and installs the wheel

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_carries_the_grammar(tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr
    wheel = next(tmp_path.glob("attn_shapecheck-*.whl"))  # the distribution's own name
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert "shapecheck/py.typed" in names
        grammar = archive.read("shapecheck/syntax/attn.lark").decode("utf-8")
    assert grammar == (ROOT / "grammar" / "attn.lark").read_text(encoding="utf-8")
