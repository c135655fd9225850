"""The HTML reports in a real browser: every example (and every broken one), at 1024 and 1280
px, in English and in Chinese, opened by headless Chromium and measured.

The measuring is ``tools/report_browser.py`` (also behind ``python tools/screenshots.py``,
which writes screenshots a person can look at): each report gets a probe script (the page
itself has none; its Content Security Policy is widened by a nonce for the probe only) and
is opened as a frame of a laptop's width, scrollbars shown. For every page and width:

- the page never scrolls sideways, and the annotated source never needs to (a problem's
  frame and a wide picture scroll inside their own box);
- no table cell spills over its neighbours; no box of the picture overlaps another, no edge
  label sits on a box or another label, no edge passes through a box;
- the picture is not shrunk: edge labels are drawn at their full 11 px;
- no script error, no policy violation, nothing fetched.

Skipped, with the reason, only where no Chromium is installed (Debian: ``apt-get install
chromium fonts-noto-cjk``; ``.ci/run`` installs them).
"""

from __future__ import annotations

import os
import shutil
import struct
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import report_browser as rb  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    rb.chromium() is None, reason="Chromium is not installed (Debian: apt-get install chromium)")]

PAGES = rb.pages()


@pytest.fixture(scope="module", params=rb.LANGUAGES)
def figures(request: pytest.FixtureRequest) -> list[dict]:
    reports = [(page.name, rb.report_html(page, request.param)) for page in PAGES]
    return rb.measure(reports)


def test_every_page_and_width_was_measured(figures: list[dict]) -> None:
    assert sorted((f["page"], f["width"]) for f in figures) == sorted(
        (page.name, width) for page in PAGES for width in rb.WIDTHS)
    assert len(PAGES) >= 18 and any(p.bindings for p in PAGES)  # at the sizes too


def test_no_report_scrolls_sideways(figures: list[dict]) -> None:
    wide = [(f["page"], f["width"], f["overflow"]) for f in figures if f["overflow"] > 0]
    assert wide == []
    source = [(f["page"], f["width"]) for f in figures if f["source_scrolls"]]
    assert source == []  # the shape column is always in view
    spilling = [(f["page"], f["width"], f["cells"]) for f in figures if f["cells"]]
    assert spilling == []


def test_only_frames_and_pictures_scroll_inside_their_box(figures: list[dict]) -> None:
    others = [(f["page"], f["width"], s) for f in figures for s in f["scrolling"]
              if s not in ("pre", "div.graph")]
    assert others == []


def test_the_picture_has_no_overlaps_and_readable_labels(figures: list[dict]) -> None:
    overlaps = [(f["page"], f["width"], f["overlaps"]) for f in figures if f["overlaps"]]
    assert overlaps == []
    small = [(f["page"], f["width"], f["label_px"]) for f in figures
             if f["label_px"] is not None and f["label_px"] < 10.5]
    assert small == []  # drawn at 11 px: never shrunk to fit
    assert all(f["nodes"] > 0 and f["edges"] > 0 for f in figures)


def test_no_errors_and_nothing_fetched(figures: list[dict]) -> None:
    assert [(f["page"], f["problems"]) for f in figures if f["problems"]] == []
    assert [(f["page"], f["resources"]) for f in figures if f["resources"] != 0] == []


def test_every_broken_spec_keeps_its_cards(figures: list[dict]) -> None:
    uncarded = [f["page"] for f in figures if f["cards"] == 0]
    assert uncarded == []


def test_the_page_says_its_language(figures: list[dict]) -> None:
    assert len({f["lang"] for f in figures}) == 1 and figures[0]["lang"] in ("en", "zh-CN")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.parametrize("language", rb.LANGUAGES)
def test_a_screenshot_shows_the_report(tmp_path: Path, language: str) -> None:
    """The report as written (no probe): a screenshot with something drawn in it."""
    page = next(p for p in PAGES if p.name == "broken/missing_transpose")
    source = tmp_path / "report.html"
    source.write_text(rb.report_html(page, language), encoding="utf-8")
    shot = tmp_path / "report.png"
    window = (1024, 1600)
    result = rb.run_chromium([f"--screenshot={shot}", "--hide-scrollbars", source.as_uri()], tmp_path,
                             window=window, timeout=120)
    assert shot.exists(), result.stderr[-2000:]
    assert png_size(shot) == window
    assert shot.stat().st_size > 50_000  # a blank page compresses to a few kilobytes
    keep = os.environ.get("SHAPECHECK_SCREENSHOT_DIR")
    if keep:  # for a human to look at (`python tools/screenshots.py` takes them all)
        shutil.copy(shot, Path(keep) / f"report_missing_transpose_{language}.png")
