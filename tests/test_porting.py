"""docs/porting.md: every Python snippet runs, so every convention it states holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "porting.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_page_has_snippets():
    assert len(SNIPPETS) >= 5


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_snippet_runs(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    code = compile(SNIPPETS[index], f"docs/porting.md (snippet {index + 1})", "exec")
    exec(code, {"__name__": f"porting_{index}"})  # noqa: S102 -- our own documentation
