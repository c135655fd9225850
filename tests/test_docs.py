"""The documentation cannot drift from the code registry."""

from __future__ import annotations

import re
from pathlib import Path

from shapecheck.messages import codes

ROOT = Path(__file__).resolve().parent.parent


def test_language_reference_lists_every_code_with_its_summary() -> None:
    text = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (SC\d{3}) \| \w+ \| (.+?) \|$", text, flags=re.MULTILINE))
    expected = {code.id: code.summary for code in codes.REGISTRY.values()}
    assert rows == expected


def test_every_code_has_a_complete_explanation() -> None:
    for code in codes.REGISTRY.values():
        for part in (code.summary, code.what, code.why, code.example, code.fix):
            assert part.strip(), code.id
        assert code.id in (codes.explain(code.id) or "")
