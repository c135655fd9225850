"""docs/conform.md and docs/porting.md, "Real modules": every snippet runs — each `python`
block is executed, each `shapecheck conform` command is run and conforms."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from shapecheck.cli import main

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent


def section(page: str) -> str:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    start = text.index("\n## Real modules")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def blocks(page: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(page), flags=re.DOTALL)


COMMANDS = [shlex.split(command.replace("\\\n", " ")) for block in blocks("conform.md", "sh")
            for command in re.split(r"\n(?=shapecheck )", block.strip())]
SNIPPETS = [(page, code) for page in ("conform.md",) for code in blocks(page, "python")]


def test_the_sections_have_snippets():
    assert len(COMMANDS) >= 4 and len(SNIPPETS) >= 2
    assert blocks("porting.md", "python")  # run by tests/test_porting.py with the page's others


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=[c[2].rsplit("/", 1)[-1] for c in COMMANDS])
def test_a_command_conforms(command, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert command[:2] == ["shapecheck", "conform"]
    with pytest.raises(SystemExit) as stopped:
        main([*command[1:], "--cases", "2"])
    captured = capsys.readouterr()
    assert stopped.value.code == 0, captured.out + captured.err


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_a_snippet_runs(index, monkeypatch):
    monkeypatch.chdir(ROOT)
    page, code = SNIPPETS[index]
    exec(compile(code, f"docs/{page} (real modules, snippet {index + 1})", "exec"),  # noqa: S102
         {"__name__": f"conform_docs_{index}"})
