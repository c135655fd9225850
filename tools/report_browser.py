"""The HTML reports of every example, measured in a real browser (headless Chromium).

Used by ``tests/test_report_browser.py`` (the assertions) and ``tools/screenshots.py`` (the
pictures). Each report is rendered, a small probe script is added to a copy (the page's
Content Security Policy is widened by a nonce for that probe only), and all copies are
opened at once as ``srcdoc`` frames of one page, each frame as wide as a laptop window
(scrollbars shown, as on a laptop). After the ``load`` event the parent page measures
every frame and writes the figures into an attribute that ``--dump-dom`` prints:

- ``overflow``: how far the page scrolls sideways (0: it fits);
- ``scrolling``: the boxes that scroll sideways inside themselves (a problem frame, a
  wide picture) and ``source_scrolls`` for the annotated source table itself;
- ``cells``: table cells whose content spills out of them;
- ``overlaps``: boxes of the picture that overlap (node on node, label on node, label on
  label) and edges that pass through a box other than their own two ends;
- ``label_px``: the smallest edge-label font size as drawn (the picture is never shrunk);
- ``problems``: script errors and Content Security Policy violations; ``resources``: how
  many resources the page fetched (0: self-contained).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from shapecheck import i18n
from shapecheck.api import check_path
from shapecheck.report import build_report, render

ROOT = Path(__file__).resolve().parent.parent
WIDTHS = (1024, 1280)
LANGUAGES = i18n.LANGUAGES
# Sizes to bind in the "at the sizes" variant of each example (the dims left free).
SIZES = {"N": 128, "L": 96, "d": 64, "H": 8, "G": 2, "R": 4, "B": 2, "D_model": 512, "T": 128}


def chromium() -> str | None:
    return next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)


@dataclass(frozen=True)
class Page:
    name: str  # `broken/wrong_w_o`, `multi_head@sizes`
    path: Path
    bindings: dict[str, int]


def pages() -> list[Page]:
    """Every example and every broken example; each example that verifies also at sizes."""
    found = []
    for path in sorted((ROOT / "examples").glob("*.attn")) + sorted((ROOT / "examples" / "broken").glob("*.attn")):
        name = str(path.relative_to(ROOT / "examples").with_suffix(""))
        found.append(Page(name, path, {}))
        program = check_path(path)
        if not program.ok:
            continue
        bindings = {dim: SIZES.get(dim, 16) for dim in program.dims.unbound()}
        if bindings and check_path(path, bindings).ok:
            found.append(Page(f"{name}@sizes", path, bindings))
    return found


def report_html(page: Page, language: str) -> str:
    with i18n.use(language):
        program = check_path(page.path, page.bindings)
        return render(build_report(program, str(page.path.relative_to(ROOT)), page.bindings), "html")


PROBE = """<script nonce="probe">
const problems = [];
window.addEventListener("error", (e) => problems.push("error: " + (e.message || e.target.tagName)), true);
document.addEventListener("securitypolicyviolation", (e) => problems.push("csp: " + e.violatedDirective));
window.addEventListener("load", () => {
  document.body.setAttribute("data-probe", JSON.stringify({
    problems: problems, resources: performance.getEntriesByType("resource").length}));
});
</script>
"""

MEASURE = r"""<script>
function rectsOverlap(a, b, inset) {
  return a.x + inset < b.x + b.width - inset && b.x + inset < a.x + a.width - inset
      && a.y + inset < b.y + b.height - inset && b.y + inset < a.y + a.height - inset;
}
function box(el) { const b = el.getBBox(); return {x: b.x, y: b.y, width: b.width, height: b.height}; }
function describe(el) {
  return el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && el.className.baseVal === undefined
      && el.className ? "." + String(el.className).split(" ").join(".") : "");
}
function measureSvg(doc) {
  const out = {overlaps: [], labelPx: null, nodes: 0, edges: 0};
  const svg = doc.querySelector("svg.sc-graph");
  if (!svg) return out;
  const nodes = [...svg.querySelectorAll("g.sc-node[data-name]")].map(g => ({
    name: g.getAttribute("data-name"), rect: box(g.querySelector("rect"))}));
  out.nodes = nodes.length;
  for (let i = 0; i < nodes.length; i++)
    for (let j = i + 1; j < nodes.length; j++)
      if (rectsOverlap(nodes[i].rect, nodes[j].rect, 0))
        out.overlaps.push("node " + nodes[i].name + " / node " + nodes[j].name);
  const edges = [...svg.querySelectorAll("g.sc-edge")];
  out.edges = edges.length;
  const labels = [];
  for (const g of edges) {
    const source = g.getAttribute("data-source"), target = g.getAttribute("data-target");
    const label = g.querySelector("rect.sc-label");
    const tag = source + "→" + target;
    if (label) {
      const rect = box(label);
      labels.push({tag: tag, rect: rect});
      for (const n of nodes) if (rectsOverlap(rect, n.rect, 0.5)) out.overlaps.push("label " + tag + " / node " + n.name);
    }
    const path = g.querySelector("path");
    const length = path.getTotalLength();
    for (let t = 0; t <= length; t += 2) {
      const p = path.getPointAtLength(t);
      for (const n of nodes) {
        if (n.name === source || n.name === target) continue;
        const r = n.rect;
        if (p.x > r.x + 1 && p.x < r.x + r.width - 1 && p.y > r.y + 1 && p.y < r.y + r.height - 1) {
          out.overlaps.push("edge " + tag + " / node " + n.name);
          t = length + 1;
          break;
        }
      }
    }
  }
  for (let i = 0; i < labels.length; i++)
    for (let j = i + 1; j < labels.length; j++)
      if (rectsOverlap(labels[i].rect, labels[j].rect, 0.5))
        out.overlaps.push("label " + labels[i].tag + " / label " + labels[j].tag);
  const text = svg.querySelector("g.sc-edge text");
  if (text) out.labelPx = text.getBoundingClientRect().height
      / (text.getBBox().height || 1) * parseFloat(getComputedStyle(text).fontSize);
  return out;
}
function measure(frame) {
  const doc = frame.contentDocument;
  const root = doc.documentElement;
  const probe = JSON.parse(doc.body.getAttribute("data-probe") || '{"problems": ["no probe"], "resources": -1}');
  const scrolling = [...doc.querySelectorAll("*")].filter(el => {
    const style = getComputedStyle(el);
    return (style.overflowX === "auto" || style.overflowX === "scroll") && el.scrollWidth > el.clientWidth + 1;
  }).map(describe);
  const source = doc.querySelector("table.source");
  const cells = [...doc.querySelectorAll("td, th")].filter(
      el => !el.querySelector("pre") && el.scrollWidth > el.clientWidth + 1).map(
      el => describe(el.closest("tr") || el) + " " + el.textContent.slice(0, 40));
  const svg = measureSvg(doc);
  return {
    page: frame.getAttribute("data-page"), width: Number(frame.getAttribute("width")),
    overflow: root.scrollWidth - root.clientWidth, height: root.scrollHeight,
    scrolling: scrolling,
    source_scrolls: source ? source.scrollWidth > source.parentElement.clientWidth + 1 : false,
    cells: cells, overlaps: svg.overlaps, label_px: svg.labelPx, nodes: svg.nodes, edges: svg.edges,
    cards: doc.querySelectorAll("article.card").length, lang: root.getAttribute("lang"),
    problems: probe.problems, resources: probe.resources};
}
window.addEventListener("load", () => {
  const results = [...document.querySelectorAll("iframe")].map(measure);
  document.body.setAttribute("data-results", JSON.stringify(results));
});
</script>
"""


def with_probe(page_html: str) -> str:
    page_html = page_html.replace("default-src 'none';", "default-src 'none'; script-src 'nonce-probe';", 1)
    return page_html.replace("</body>", PROBE + "</body>", 1)


def measure(reports: list[tuple[str, str]], widths: tuple[int, ...] = WIDTHS,
            browser: str | None = None) -> list[dict]:
    """Open every (name, html) at every width, in one browser run; the figures of each."""
    frames = "".join(
        f'<iframe data-page="{html.escape(name)}" width="{width}" height="900" '
        f'srcdoc="{html.escape(with_probe(page_html), quote=True)}"></iframe>\n'
        for name, page_html in reports for width in widths)
    parent = f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body>\n{frames}{MEASURE}</body></html>"
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "all.html"
        page.write_text(parent, encoding="utf-8")
        result = run_chromium(["--virtual-time-budget=60000", "--dump-dom", page.as_uri()],
                              Path(folder), browser=browser)
    found = re.search(r'data-results="([^"]*)"', result.stdout)
    if not found:
        raise RuntimeError(f"the pages did not finish loading:\n{result.stderr[-3000:]}")
    return json.loads(html.unescape(found.group(1)))


def run_chromium(args: list[str], folder: Path, window: tuple[int, int] = (1400, 1000),
                 browser: str | None = None, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    profile = folder / "profile"
    profile.mkdir(exist_ok=True)
    command = [
        browser or chromium() or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
        "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
        f"--window-size={window[0]},{window[1]}", *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
