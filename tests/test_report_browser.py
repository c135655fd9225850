"""The HTML report in a real browser: headless Chromium opens it, lays it out, and draws it.

The report itself has no script. The test renders a copy with a small probe added (and the
page's Content Security Policy widened by a nonce for that probe only): after the load
event it records the SVG's laid-out size, how many resources the page fetched, and any
error or policy violation, into an attribute that ``--dump-dom`` prints. A second run
takes a screenshot, whose PNG header must give the window's size.

Set ``SHAPECHECK_SCREENSHOT_DIR`` to keep the screenshot (``report_causal.png``) for a look.

Skipped, with the reason, only where no Chromium is installed (Debian: ``apt-get install
chromium``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from shapecheck.api import check_path
from shapecheck.report import build_report, render

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)
WINDOW = (1280, 2000)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium)")

PROBE = """<script nonce="probe">
const problems = [];
window.addEventListener("error", (e) => problems.push("error: " + (e.message || e.target.tagName)), true);
document.addEventListener("securitypolicyviolation", (e) => problems.push("csp: " + e.violatedDirective));
window.addEventListener("load", () => {
  const svg = document.querySelector("svg.sc-graph");
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const drawn = svg ? svg.getBBox() : {width: 0, height: 0};
  document.body.setAttribute("data-probe", JSON.stringify({
    width: box.width, height: box.height, drawnWidth: drawn.width, drawnHeight: drawn.height,
    nodes: document.querySelectorAll("svg.sc-graph g.sc-node[data-name]").length,
    edges: document.querySelectorAll("svg.sc-graph g.sc-edge").length,
    cards: document.querySelectorAll("article.card").length,
    resources: performance.getEntriesByType("resource").length,
    problems: problems,
  }));
});
</script>
"""


def chromium(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    command = [
        CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}", *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=90)


def with_probe(html: str) -> str:
    html = html.replace("default-src 'none';", "default-src 'none'; script-src 'nonce-probe';", 1)
    return html.replace("</body>", PROBE + "</body>", 1)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_loads_and_draws_in_chromium(tmp_path: Path) -> None:
    bindings = {"N": 128, "H": 8, "d": 64}
    program = check_path(ROOT / "examples" / "causal.attn", bindings)
    html = render(build_report(program, "examples/causal.attn", bindings), "html")
    page = tmp_path / "report.html"
    page.write_text(with_probe(html), encoding="utf-8")

    dom = chromium("--virtual-time-budget=5000", "--dump-dom", page.as_uri(), tmp_path=tmp_path)
    found = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert found, f"the page did not finish loading:\n{dom.stderr[-2000:]}"
    probe = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert probe["problems"] == []
    assert probe["resources"] == 0  # nothing fetched: the page is self-contained
    assert probe["nodes"] == len(program.tensors) and probe["edges"] >= probe["nodes"] - 5
    assert probe["cards"] == 1
    assert probe["width"] > 600 and probe["height"] > 200  # laid out at a real size
    assert probe["drawnWidth"] > 600 and probe["drawnHeight"] > 200  # and something drawn in it

    # The report as written (no probe): a screenshot of the first screenful and more.
    plain_page = tmp_path / "plain.html"
    plain_page.write_text(html, encoding="utf-8")
    shot = tmp_path / "report.png"
    result = chromium(f"--screenshot={shot}", plain_page.as_uri(), tmp_path=tmp_path)
    assert shot.exists(), result.stderr[-2000:]
    assert png_size(shot) == WINDOW
    assert shot.stat().st_size > 50_000  # a blank page compresses to a few kilobytes
    keep = os.environ.get("SHAPECHECK_SCREENSHOT_DIR")
    if keep:  # for a human to look at
        shutil.copy(shot, Path(keep) / "report_causal.png")
