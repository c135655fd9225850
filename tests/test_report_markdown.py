"""The Markdown report, compared with snapshot files in tests/snapshots/.

After an intended change of the report, regenerate them with

    SHAPECHECK_UPDATE_SNAPSHOTS=1 python -m pytest tests/test_report_markdown.py

and review the diff: it is the report a reader will see in a pull-request comment.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shapecheck.api import check_path
from shapecheck.report import build_report, render

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = Path(__file__).parent / "snapshots"

CASES = {
    "report_single_head.md": ("examples/single_head.attn", {}),
    "report_multi_head_nhd_bound.md": ("examples/multi_head_nhd.attn", {"N": 128, "H": 8, "d": 64}),
    "report_missing_transpose.md": ("examples/broken/missing_transpose.attn", {}),
}


@pytest.mark.parametrize("snapshot", sorted(CASES))
def test_markdown_snapshot(snapshot: str) -> None:
    path, bindings = CASES[snapshot]
    markdown = render(build_report(check_path(ROOT / path, bindings), path, bindings), "md")
    target = SNAPSHOTS / snapshot
    if os.environ.get("SHAPECHECK_UPDATE_SNAPSHOTS"):
        target.write_text(markdown, encoding="utf-8")
    assert markdown == target.read_text(encoding="utf-8")


def test_markdown_tables_are_well_formed() -> None:
    """Every table row has as many cells as its header (a stray `|` would add one)."""
    for path, bindings in CASES.values():
        markdown = render(build_report(check_path(ROOT / path, bindings), path, bindings), "md")
        columns = None
        for line in markdown.splitlines():
            if not line.startswith("| "):
                columns = None
                continue
            cells = len(line.replace("\\|", "").split(" | "))
            columns = columns or cells
            assert cells == columns, line
