"""Screenshots of every example's HTML report, for a person to look at.

    python tools/screenshots.py                       # all: every example, 1024 and 1280 px, en and zh
    python tools/screenshots.py --only broken/ --lang zh --width 1024
    python tools/screenshots.py --out /tmp/shots

Writes ``OUT/<lang>/<width>/<example>.png`` (whole pages, as tall as each report) and
``OUT/index.html``, a page that shows them side by side with the browser figures of each
(sideways overflow, boxes that scroll, overlaps in the picture). Needs Chromium (Debian:
``apt-get install chromium fonts-noto-cjk``). The default OUT is ``screenshots/`` (ignored
by git).
"""

from __future__ import annotations

import argparse
import html
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report_browser as rb  # noqa: E402

MAX_HEIGHT = 16_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(rb.ROOT / "screenshots"), help="folder to write into")
    parser.add_argument("--only", default="", help="only the examples whose name contains this")
    parser.add_argument("--lang", choices=rb.LANGUAGES, action="append", help="repeatable; default: all")
    parser.add_argument("--width", type=int, action="append", help="repeatable; default: 1024 and 1280")
    args = parser.parse_args(argv)
    browser = rb.chromium()
    if browser is None:
        print("Chromium is not installed (Debian: apt-get install chromium fonts-noto-cjk)", file=sys.stderr)
        return 2
    out = Path(args.out)
    widths = tuple(args.width or rb.WIDTHS)
    pages = [page for page in rb.pages() if args.only in page.name]
    figures = []
    for language in args.lang or rb.LANGUAGES:
        reports = [(page.name, rb.report_html(page, language)) for page in pages]
        measured = {(m["page"], m["width"]): m for m in rb.measure(reports, widths, browser)}
        with tempfile.TemporaryDirectory() as folder:
            for name, page_html in reports:
                source = Path(folder) / (name.replace("/", "_") + ".html")
                source.write_text(page_html, encoding="utf-8")
                for width in widths:
                    figure = measured[(name, width)]
                    target = out / language / str(width) / (name.replace("/", "_") + ".png")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    height = min(int(figure["height"]) + 20, MAX_HEIGHT)
                    rb.run_chromium([f"--screenshot={target}", "--hide-scrollbars", source.as_uri()],
                                    Path(folder), window=(width, height), browser=browser, timeout=120)
                    figures.append((language, width, name, target, figure))
                    print(f"{target}  overflow {figure['overflow']} px, "
                          f"{len(figure['overlaps'])} overlaps, scrolling: {figure['scrolling'] or '-'}")
    (out / "index.html").write_text(_index(figures, out), encoding="utf-8")
    print(f"{len(figures)} screenshots; open {out / 'index.html'}")
    return 0


def _index(figures: list[tuple[str, int, str, Path, dict]], out: Path) -> str:
    rows = []
    for language, width, name, target, figure in figures:
        link = html.escape(str(target.relative_to(out)))
        rows.append(f"<tr><td>{html.escape(name)}</td><td>{language}</td><td>{width}</td>"
                    f"<td>{figure['overflow']}</td><td>{len(figure['overlaps'])}</td>"
                    f"<td>{html.escape(', '.join(figure['scrolling']) or '-')}</td>"
                    f'<td><a href="{link}"><img src="{link}" width="240" alt=""></a></td></tr>')
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>shapecheck reports</title>"
            "<style>body{font:14px sans-serif}td{vertical-align:top;padding:4px 8px}</style></head>"
            "<body><table><tr><th>example</th><th>lang</th><th>width</th><th>overflow px</th>"
            "<th>overlaps</th><th>boxes that scroll</th><th>screenshot</th></tr>"
            + "".join(rows) + "</table></body></html>\n")


if __name__ == "__main__":
    raise SystemExit(main())
