"""The shape-annotated report (`shapecheck report`, shapecheck.report).

HTML is read back with the standard library's HTML parser and checked for structure:
every statement with its shape, the cards, the picture with a node for every tensor and
an edge for every dependency, no external resource, no executable markup from a spec.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shapecheck.api import check_path, check_text
from shapecheck.cli import main
from shapecheck.messages.diagnostics import Diagnostic, FileResult, Severity, Span
from shapecheck.formats import github_step_summary
from shapecheck.report import build_report, render, write_atomically
from shapecheck.messages import diagnostics
from shapecheck import i18n
from shapecheck.report.templates import plain, text

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MULTI_HEAD_SIZES = {"N": 128, "H": 8, "d": 64}


# --- a small DOM -----------------------------------------------------------------------------

VOID = {"meta", "br", "img", "link", "input", "hr", "source", "wbr", "area", "base", "col", "embed"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):  # type: ignore[no-untyped-def]
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, tag: str, **attrs: str) -> list[Element]:
        want = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        return [e for e in self.iter() if e.tag == tag
                and all(v in e.attrs.get(k, "").split() if k == "class" else e.attrs.get(k) == v
                        for k, v in want.items())]


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        assert tag not in VOID
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse_html(text: str) -> Element:
    builder = _Builder()
    builder.feed(text)
    builder.close()
    assert builder.stack == [builder.root], "unclosed elements"
    return builder.root


def report_html(path: Path, bindings: dict[str, int] | None = None) -> tuple[str, Element]:
    program = check_path(path, bindings)
    html = render(build_report(program, str(path.relative_to(ROOT)), bindings), "html")
    return html, parse_html(html)


# --- structure ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.attn")))
def test_every_statement_is_shown_with_its_shape(name: str) -> None:
    path = EXAMPLES / name
    program = check_path(path)
    _, dom = report_html(path)
    lines = program.source.splitlines()
    rows = {e.attrs["id"]: e for e in dom.find_all("tr") if e.attrs.get("id", "").startswith("L")}
    assert sorted(rows, key=lambda r: int(r[1:])) == [f"L{n}" for n in range(1, len(lines) + 1)]
    for number, line in enumerate(lines, start=1):
        assert rows[f"L{number}"].find_all("td", class_="code")[0].text() == line
    shown = {(e.attrs["data-name"], e.attrs["data-shape"]) for e in dom.find_all("span", class_="stmt")}
    for tensor_name, tensor in program.tensors.items():
        # a version of a rebound name (`xq′1`) is shown as the name the spec writes (`xq`)
        label = f"output {tensor_name}" if tensor_name in program.outputs and tensor.kind == "defined" \
            and _is_output_statement(program, tensor_name) else diagnostics.shown(tensor_name)
        assert (label, tensor.value.text()) in shown, tensor_name


def _is_output_statement(program, name: str) -> bool:  # type: ignore[no-untyped-def]
    from shapecheck.syntax import nodes

    return any(isinstance(s, nodes.Output) and s.name.name == name and s.value is not None
               for s in program.statements)


def test_concrete_shapes_at_the_bindings() -> None:
    _, dom = report_html(EXAMPLES / "multi_head.attn", MULTI_HEAD_SIZES)
    row = dom.find_all("tr", id="L20")[0]  # S: [H, N, N] = Q @ K.T / sqrt(d)
    assert row.find_all("span", class_="stmt")[0].attrs["data-shape"] == "[H, N, N]"
    assert "[8, 128, 128]" in row.text()
    assert "D_model = 512" in dom.find_all("tr", id="L8")[0].text()


@pytest.mark.parametrize(("name", "count"), [
    ("single_head.attn", 1), ("multi_head.attn", 1), ("index_form.attn", 1),
    ("multi_head_einsum.attn", 1), ("causal.attn", 1), ("cross_attention.attn", 1),
])
def test_one_card_per_attention_pattern(name: str, count: int) -> None:
    _, dom = report_html(EXAMPLES / name)
    assert len(dom.find_all("article", class_="card")) == count


def test_a_spec_with_two_attention_blocks_gets_two_cards() -> None:
    spec = (EXAMPLES / "single_head.attn").read_text() + (
        "input K2: [N, d]\ninput V2: [N, d]\n"
        "S2 = O @ K2.T\nP2 = softmax(S2)\nO2 = P2 @ V2\n")
    report = build_report(check_text(spec), "two.attn")
    assert [card.line for card in report.cards] == [16, 21]
    second = report.cards[1]
    roles = {row.role: plain(row.tensor) for row in second.rows}
    assert roles["Q: query"] == "O" and roles["K: index (key)"] == "K2" and roles["V: content (value)"] == "V2"


def test_card_of_multi_head_attention() -> None:
    report = build_report(check_path(EXAMPLES / "multi_head.attn"), "multi_head.attn")
    (card,) = report.cards
    rows = {row.role: row for row in card.rows}
    assert [plain(rows[r].tensor) for r in ("Q: query", "K: index (key)", "V: content (value)")] == ["Q", "K", "V"]
    assert rows["S = QKᵀ: scores"].shape == "[H, N, N]"
    assert rows["P = softmax(S): weights"].shape == "[H, N, N]"
    assert "row" in plain(rows["P = softmax(S): weights"].meaning)
    assert rows["O = PV: output"].shape == "[H, N, d]"
    assert plain(card.summary).startswith("Q/K/V: [H, N, d] · scores S = QKᵀ: [H, N, N]")
    assert "D_model = H·d" in plain(card.identity) and "line 9" in plain(card.identity)
    assert card.identity_ok is True
    assert card.core_flops == "4·H·N²·d"


def test_card_reads_through_masks_and_scaling() -> None:
    report = build_report(check_path(EXAMPLES / "causal.attn"), "causal.attn")
    (card,) = report.cards
    assert plain(card.rows[3].tensor) == "S ← Q @ K.T"


def test_the_multi_head_identity_violated_at_the_bindings() -> None:
    program = check_path(EXAMPLES / "multi_head.attn", {"N": 4, "H": 2, "d": 3, "D_model": 5})
    report = build_report(program, "multi_head.attn", {"N": 4, "H": 2, "d": 3, "D_model": 5})
    (constraint,) = report.constraints
    assert constraint.ok is False and "does not hold" in plain(constraint.status)
    assert report.cards[0].identity_ok is False
    assert "violated at the concrete sizes: 5 ≠ 6" in plain(report.cards[0].identity)


def test_constraint_uses_are_named() -> None:
    report = build_report(check_path(EXAMPLES / "multi_head_nhd.attn"), "nhd.attn")
    (constraint,) = report.constraints
    assert plain(constraint.uses) == "line 16 (reshape), line 17 (reshape), line 18 (reshape), line 29 (@)"
    plain_report = build_report(check_path(EXAMPLES / "multi_head.attn"), "multi_head.attn")
    assert plain(plain_report.constraints[0].uses) == "not needed by any check of this spec"


def test_reasoning_self_check_and_index_form() -> None:
    report = build_report(check_path(EXAMPLES / "multi_head.attn"), "multi_head.attn")
    steps = {r.line: r.steps for r in report.reasoning}
    scores = steps[20][0]
    assert plain(scores.text).startswith("Q [H, N, d] @ K.T [H, d, N]: inner d = d ✓ → [H, N, N]")
    assert plain(scores.index_form) == "index form: S[h,i,j] = (Σ_k Q[h,i,k]·K[h,j,k]) / sqrt(d)"
    assert plain(steps[21][0].text).endswith(
        "Σ_j P[h,i,j] = 1 for every h, i; the queries (N) are axis −2, the keys (N) axis −1; "
        "softmax normalises over the keys, axis −1; P @ V sums over the same axis ✓")
    nhd = build_report(check_path(EXAMPLES / "multi_head_nhd.attn"), "nhd.attn")
    reshape = {r.line: r.steps for r in nhd.reasoning}[16][1]
    assert plain(reshape.text) == ("reshape X @ W_Q [N, D_model] → [N, H, d]: D_model·N = H·N·d "
                                   "elements ✓ by constraint D_model == H*d (line 8)")


def test_cost_of_the_attention_core() -> None:
    report = build_report(check_path(EXAMPLES / "single_head.attn", {"N": 128, "d": 64}),
                          "single_head.attn", {"N": 128, "d": 64})
    rows = {row.name: row for row in report.cost.rows}
    assert rows["S"].flops == "2·N²·d + N²" and rows["S"].flops_value == 2 * 128 * 128 * 64 + 128 * 128
    assert rows["O"].flops == "2·N²·d" and rows["S"].bytes == "8·N²"
    assert report.cost.total == "4·N²·d + 6·N²"
    assert report.cards[0].core_flops == "4·N²·d" and report.cards[0].core_value == 4 * 128 * 128 * 64
    largest = plain(report.cost.largest)
    assert largest.startswith("Largest intermediate: S [N, N], N² elements = 8·N² bytes (131,072")
    assert largest.endswith("It grows as N²: quadratically with the sequence length. "
                            "It is the notes' N×N table of match scores.")


def test_picture_has_a_node_per_tensor_and_an_edge_per_dependency() -> None:
    program = check_path(EXAMPLES / "multi_head.attn")
    _, dom = report_html(EXAMPLES / "multi_head.attn")
    (svg,) = dom.find_all("svg")
    assert float(svg.attrs["width"]) > 300 and float(svg.attrs["height"]) > 100
    drawn = {g.attrs["data-name"] for g in svg.find_all("g", class_="sc-node") if "data-name" in g.attrs}
    assert drawn == set(program.tensors)
    edges = {(g.attrs["data-source"], g.attrs["data-target"]): g.text()
             for g in svg.find_all("g", class_="sc-edge")}
    assert edges[("X", "Q")] == "[N, D_model]"
    assert edges[("S", "P")] == "[H, N, N]" and edges[("O", "Y")] == "[N, H*d]"
    assert set(edges) == {("X", "Q"), ("W_Q", "Q"), ("X", "K"), ("W_K", "K"), ("X", "V"), ("W_V", "V"),
                          ("Q", "S"), ("K", "S"), ("S", "P"), ("P", "O"), ("V", "O"), ("O", "Y"),
                          ("W_O", "Y")}


def test_page_is_self_contained() -> None:
    html, dom = report_html(EXAMPLES / "causal.attn", {"N": 8, "H": 2, "d": 4})
    assert not dom.find_all("script") and not dom.find_all("link") and not dom.find_all("img")
    for element in dom.iter():
        for name, value in element.attrs.items():
            if name in ("src", "href", "xlink:href", "action"):
                assert value.startswith("#") or value.startswith("url(#"), (name, value)
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "@import" not in html and "url(http" not in html
    (policy,) = [m for m in dom.find_all("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in policy.attrs["content"]


def test_a_spec_with_errors_shows_them_inline_as_verify_does(capsys: pytest.CaptureFixture[str]) -> None:
    path = EXAMPLES / "broken" / "missing_transpose.attn"
    html, dom = report_html(path)
    problems = dom.find_all("tr", class_="problem")
    assert [p.attrs["data-code"] for p in problems] == ["SC301"]
    row_ids = [e.attrs.get("id") for e in dom.find_all("tr")]
    assert row_ids[row_ids.index("L11") + 1] == "problem-1"  # just after line 11
    with pytest.raises(SystemExit):
        main(["verify", "--color", "never", str(path.relative_to(ROOT))])
    verify = capsys.readouterr().out
    frame = problems[0].find_all("pre")[0].text()
    assert frame in verify and "help: did you mean `Q @ K.T`?" in frame
    assert dom.find_all("body")[0].attrs["data-verified"] == "false"


# --- escaping -------------------------------------------------------------------------------------

HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(2)>'


def hostile_spec() -> str:
    return (
        f"# {HOSTILE}\n"
        "dim N, d\n"
        "input Q: [N, d]   # ' onmouseover='alert(3)\n"
        f'T = einsum("{HOSTILE}", Q)\n'
        "S = Q @ Q.T\n"
        f"output O = softmax(S) @ Q  # </code></td></tr></table><script>alert(4)</script>\n"
    )


@pytest.mark.parametrize("language", i18n.LANGUAGES)
def test_user_text_is_escaped_in_html(language: str) -> None:
    with i18n.use(language):
        program = check_text(hostile_spec())
        html = render(build_report(program, f"specs/{HOSTILE}.attn"), "html")
        title = text("title", path=f"specs/{HOSTILE}.attn")
    assert not program.ok  # the einsum subscripts are invalid, and quoted in the message
    dom = parse_html(html)
    assert not dom.find_all("script") and not dom.find_all("img")
    for element in dom.iter():
        assert not any(name.startswith("on") for name in element.attrs), element
    shown = dom.text()
    assert HOSTILE in shown  # shown, as text
    assert "<script>alert(4)</script>" in shown
    assert dom.find_all("title")[0].text() == title


@pytest.mark.parametrize("language", i18n.LANGUAGES)
def test_user_text_is_inert_in_markdown(language: str) -> None:
    with i18n.use(language):
        markdown = render(build_report(check_text(hostile_spec()), f"specs/{HOSTILE}.attn"), "md")
    outside = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", markdown, flags=re.MULTILINE | re.DOTALL)
    outside = re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", "", outside)  # code spans
    assert not re.search(r"(?<!\\)<(script|img|/code)", outside)  # only escaped: \<script
    assert "\\<script\\>" in outside  # the problem list and the title escape it
    assert HOSTILE in markdown  # and the source shows it literally, in code


# --- determinism, the command ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("language", i18n.LANGUAGES)
def test_same_input_same_bytes_whatever_the_hash_seed(tmp_path: Path, language: str) -> None:
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"r{seed}.html"
        subprocess.run([sys.executable, "-m", "shapecheck", "report", "examples/grouped_query.attn",
                        "-o", str(out), "--dim", "N=16", "--dim", "d=8", "--lang", language],
                       cwd=ROOT, check=True, env={**os.environ, "PYTHONHASHSEED": seed},
                       capture_output=True)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


def run(args: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(args)
    return int(done.value.code or 0)


def test_exit_status_and_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = str(EXAMPLES / "single_head.attn")
    assert run(["report", spec, "-o", str(tmp_path / "a.html")]) == 0
    assert (tmp_path / "a.html").read_text().startswith("<!DOCTYPE html>")
    assert run(["report", spec, "-o", str(tmp_path / "a.md")]) == 0
    assert (tmp_path / "a.md").read_text().startswith("# Shape report:")
    assert run(["report", spec, "-o", str(tmp_path / "b.txt"), "--format", "md"]) == 0
    assert run(["report", str(EXAMPLES / "broken" / "wrong_w_o.attn"), "-o", str(tmp_path / "w.md")]) == 1
    assert "SC301" in (tmp_path / "w.md").read_text()
    capsys.readouterr()
    assert run(["report", spec, "-o", str(tmp_path / "b.txt")]) == 2
    assert "name it .html or .md" in capsys.readouterr().err
    assert run(["report", str(tmp_path / "missing.attn"), "-o", str(tmp_path / "m.md")]) == 2
    assert run(["report", str(EXAMPLES), "-o", str(tmp_path / "m.md")]) == 2
    assert run(["report", spec, "-o", str(tmp_path / "no" / "such" / "dir.md")]) == 2
    assert run(["report", spec, "-o", str(tmp_path / "x.md"), "--dim", "N=zero"]) == 2
    copy = tmp_path / "copy.md"
    copy.write_text((EXAMPLES / "single_head.attn").read_text())
    assert run(["report", str(copy), "-o", str(copy), "--format", "html"]) == 2
    assert copy.read_text() == (EXAMPLES / "single_head.attn").read_text()
    assert not list(tmp_path.glob(".*.tmp"))


def test_written_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.html"
    target.write_text("the previous report")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_atomically(str(target), "x" * 100_000)
    assert target.read_text() == "the previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
    assert run(["report", str(EXAMPLES / "single_head.attn"), "-o", str(target)]) == 2
    assert target.read_text() == "the previous report"


def test_verify_and_report_import_neither_numpy_nor_more_than_they_need() -> None:
    probe = (
        "import sys\n"
        "from shapecheck.cli import main\n"
        "sys.argv = ['shapecheck', 'verify', 'examples/multi_head.attn']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('shapecheck.report' in sys.modules, 'numpy' in sys.modules)\n"
        "from shapecheck.report import build_report, render\n"
        "from shapecheck.api import check_path\n"
        "render(build_report(check_path('examples/causal.attn'), 'c'), 'html')\n"
        "render(build_report(check_path('examples/causal.attn'), 'c'), 'md')\n"
        "print('numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split()[-3:] == ["False", "False", "False"]


# --- robustness -------------------------------------------------------------------------------------

_SOURCES = [p.read_text() for p in sorted(EXAMPLES.glob("*.attn"))]


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, len(_SOURCES) - 1), cut=st.integers(0, 2000), length=st.integers(0, 40),
       insert=st.sampled_from(["", "@", ".T", ")", "[", "softmax(", "\n", "K", "reshape(", "-1"]))
def test_any_damaged_spec_still_gets_a_report(index: int, cut: int, length: int, insert: str) -> None:
    source = _SOURCES[index]
    cut %= len(source) + 1
    damaged = source[:cut] + insert + source[cut + length:]
    report = build_report(check_text(damaged, {"N": 4}), "damaged.attn", {"N": 4})
    parse_html(render(report, "html"))
    render(report, "md")


# --- the GitHub job summary -----------------------------------------------------------------------


def test_step_summary_lists_the_problems_before_the_file_table(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert run(["verify", "--format", "github", str(EXAMPLES / "broken" / "missing_transpose.attn"),
                str(EXAMPLES / "single_head.attn")]) == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n### shapecheck\n")
    assert "<details><summary>1 problem</summary>" in text
    assert "| 11:5 | error\\[SC301\\] | inner dimensions of \\`@\\` differ" in text
    assert "help: did you mean \\`Q @ K.T\\`?" in text
    assert text.rstrip().splitlines()[-1].endswith("| 0 | 0 | ✅ verified |")


def test_step_summary_caps_the_problem_list() -> None:
    many = FileResult("a.attn", "", [Diagnostic("SC101", Severity.ERROR, f"<b>{i}</b>", Span(i, 1, i, 2))
                                     for i in range(1, 61)])
    text = github_step_summary([many])
    assert "60 problems" in text and "| … | | | 10 more |" in text
    assert not re.search(r"(?<!\\)<b>", text) and "\\<b\\>50\\</b\\>" in text and "51\\</b" not in text
    assert "<details>" not in github_step_summary([FileResult("ok.attn", "", [])])


def test_a_long_spec_stays_fast_and_drops_the_picture() -> None:
    lines = ["dim N, d", "input X0: [N, d]", "param W: [d, d]"]
    lines += [f"X{i} = X{i - 1} @ W + X{i - 1}" for i in range(1, 600)]
    report = build_report(check_text("\n".join(lines) + "\n"), "long.attn")
    html = render(report, "html")
    assert "<svg" not in html and "601 tensors are too many to draw" in html
    assert "601 tensors are too many to draw" in render(report, "md")
    assert report.cost.rows[-1].flops == "2·N·d² + N·d"


# --- broken specs get the most help (issue 12) ------------------------------------------------------

BROKEN = sorted((EXAMPLES / "broken").glob("*.attn"))


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.stem)
def test_every_broken_example_is_carded_with_its_failing_step(path: Path) -> None:
    program = check_path(path)
    report = build_report(program, str(path.relative_to(ROOT)))
    assert report.cards, "a broken spec keeps its cheat card"
    failing = [c for c in report.cards if not c.ok]
    assert failing, "the card of a broken pattern says that it is broken"
    for card in failing:
        marks = [row for row in card.rows if not row.ok] + [c for c in card.checks if c.ok is False]
        assert marks and all("✗" in plain(getattr(m, "meaning", None) or m.text) for m in marks)
        referenced = {re.search(r"see (SC\d+) on line (\d+)", plain(getattr(m, "meaning", None) or m.text))
                      for m in marks} - {None}
        codes = {(d.code, str(d.span.line)) for d in program.diagnostics}
        assert {r.groups() for r in referenced if r} <= codes  # each ✗ names a real problem
    assert any(p.card is not None for p in report.problems)  # and the problems list links to it


def test_the_missing_transpose_card_says_the_fix() -> None:
    report = build_report(check_path(EXAMPLES / "broken" / "missing_transpose.attn"), "m.attn")
    (card,) = report.cards
    inner = card.checks[0]
    assert inner.ok is False
    assert plain(inner.text) == "inner d ≠ N ✗ → did you mean Q @ K.T? see SC301 on line 11"
    assert ("code", "Q @ K.T") in inner.text  # the fix is code, as `help:` writes it
    rows = {row.role: row for row in card.rows}
    assert rows["Q: query"].ok and rows["K: index (key)"].ok  # Q and K are fine; the product is not
    assert not rows["S = QKᵀ: scores"].ok and rows["S = QKᵀ: scores"].shape is None


def test_the_failed_statement_is_marked_in_the_picture() -> None:
    html, dom = report_html(EXAMPLES / "broken" / "wrong_w_o.attn")
    (svg,) = dom.find_all("svg")
    nodes = {g.attrs["data-name"]: g for g in svg.find_all("g", class_="sc-node") if "data-name" in g.attrs}
    assert "sc-failed" in nodes["Y"].attrs["class"].split()  # not a solid green output
    assert not any("sc-failed" in nodes[n].attrs["class"].split() for n in ("O", "W_O", "P"))
    edges = {(g.attrs["data-source"], g.attrs["data-target"]): g.attrs["class"].split()
             for g in svg.find_all("g", class_="sc-edge")}
    assert "sc-failed" in edges[("W_O", "Y")] and "sc-failed" in edges[("O", "Y")]
    assert "sc-failed" not in edges[("P", "O")]
    (item,) = dom.find_all("ul", class_="problems")[0].find_all("li")
    targets = [a.attrs["href"] for a in item.find_all("a")]
    assert targets[0] == "#problem-1" and f"#{nodes['Y'].attrs['id']}" in targets
    assert dom.find_all("tr", id="problem-1")  # the frame the first link goes to
    assert nodes["Y"].find_all("a")[0].attrs["href"] == "#problem-1"  # and the node links back


# --- honest wording (issue 12) ------------------------------------------------------------------------


def test_a_derived_size_is_shown_by_its_name_and_the_identity_is_proved() -> None:
    spec = ("dim N, H, d\ndim D = H * d\ninput X: [N, D]\nparam W_Q: [D, D]\nparam W_K: [D, D]\n"
            "param W_V: [D, D]\nQ = split_heads(X @ W_Q, H)\nK = split_heads(X @ W_K, H)\n"
            "V = split_heads(X @ W_V, H)\nS = Q @ K.T / sqrt(d)\nP = softmax(S)\nO = merge_heads(P @ V)\n")
    report = build_report(check_text(spec), "dd.attn")
    (card,) = report.cards
    assert card.rows[0].shape == "[H, N, d]"
    assert plain(card.identity) == "Multi-head identity D = H·d: holds by the definition of D ✓"
    assert "D/H" not in render(report, "md") and "D/H" not in render(report, "html")


def test_an_identity_that_holds_only_trivially_is_not_ticked() -> None:
    spec = ("dim N, H, d\ninput X: [N, H * d]\nparam W: [H * d, H * d]\nQ = split_heads(X @ W, H)\n"
            "S = Q @ Q.T / sqrt(d)\nO = softmax(S) @ Q\n")
    (card,) = build_report(check_text(spec), "t.attn").cards
    assert card.identity_ok is None and "✓" not in plain(card.identity)
    assert "holds trivially" in plain(card.identity)


def test_growth_is_stated_per_axis() -> None:
    report = build_report(check_path(EXAMPLES / "cross_attention.attn"), "x.attn")
    largest = plain(report.cost.largest)
    assert "quadratically" not in largest
    assert "It grows as L·N with the sequence lengths. It is the notes' N×L table" in largest


def test_a_free_dim_a_constraint_determines_is_not_called_free() -> None:
    report = build_report(check_path(EXAMPLES / "multi_head.attn"), "m.attn")
    rows = {row.name: row for row in report.dims}
    assert rows["D_model"].kind == "determined" and "determined by" in plain(rows["D_model"].definition)
    assert rows["N"].kind == "free"


def test_unbound_dims_are_named_where_a_value_is_missing() -> None:
    bindings = {"N": 128}
    report = build_report(check_path(EXAMPLES / "multi_head.attn", bindings), "m.attn", bindings)
    annotations = [a for line in report.lines for a in line.annotations if a.shape]
    assert annotations and all(a.concrete or a.unbound for a in annotations)
    x = next(a for a in annotations if a.label == "X")
    assert x.concrete is None and x.unbound == "d, H unbound"  # in the spec's order
    dims = {row.name: row for row in report.dims}
    assert dims["N"].value == 128 and dims["H"].unbound == "unbound"
    s_cost = next(row for row in report.cost.rows if row.name == "S")
    assert s_cost.flops_value is None and s_cost.blank == "d, H unbound"
    html = render(report, "html")
    assert "d, H unbound" in html and "<code class=\"shape\"></code>" not in html  # no empty chips


def test_a_query_built_by_concat_is_not_said_to_be_given_directly() -> None:
    spec = ("dim N, d, r, D\ninput X: [N, D]\nparam W_a: [D, d]\nparam W_b: [D, r]\n"
            "Q = concat([X @ W_a, X @ W_b], axis=-1)\nK = concat([X @ W_a, X @ W_b], axis=-1)\n"
            "S = Q @ K.T\nO = softmax(S) @ X\n")
    (card,) = build_report(check_text(spec), "mla.attn").cards
    assert "given directly" not in plain(card.identity)
    assert "cannot follow Q back" in plain(card.identity)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.attn")) + BROKEN, ids=lambda p: p.stem)
def test_every_sentence_is_true_for_the_spec(path: Path) -> None:
    """The wording checks of issue 12, read from every example's report."""
    program = check_path(path)
    report = build_report(program, "x.attn")
    text = render(report, "md")
    largest = re.match(r"Largest intermediate: (\S+) ", plain(report.cost.largest))
    if largest:
        assert largest.group(1) not in program.outputs  # an output is not an intermediate
    if "see the warning" in text:
        assert any(d.severity.value == "warning" for d in program.diagnostics)
    if "quadratically" in text:
        assert re.search(r"It grows as (\w+)²: quadratically", plain(report.cost.largest))
    for row in report.dims:
        assert not (row.kind == "free" and "determined by" in plain(row.definition))
    shapes = [a.shape for line in report.lines for a in line.annotations if a.shape]
    shapes += [row.shape for card in report.cards for row in card.rows if row.shape]
    # no example needs a quotient by its formula, except one the spec writes itself
    # (nanoGPT's `C // n_head`, shown as written)
    written = set(re.findall(r"\w+ ?//? ?\w+", program.source))
    assert not [s for s in shapes if "/" in s
                and not any(q.replace(" ", "") in s.replace(" ", "") for q in written)]
    for card in report.cards:
        for check in card.checks:  # a tick or a cross always says what holds or fails
            assert (check.ok is None) or (("✓" if check.ok else "✗") in plain(check.text))


# --- Markdown: whole shapes, nothing live (issue 12, issue 7) --------------------------------------


def test_markdown_keeps_shapes_whole_in_table_cells() -> None:
    bindings = {"N": 128, "H": 8, "d": 64}
    markdown = render(build_report(check_path(EXAMPLES / "multi_head.attn", bindings), "m.attn", bindings), "md")
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    spans = [span for row in rows for span in re.findall(r"`((?:bool)?\[[^`]*\])`", row)]
    assert spans and not [s for s in spans if re.search(r"\[[^\]]* [^\]]*\]", s)]  # no breakable space
    assert "`[8,\u00a0128,\u00a064]`" in markdown


REFERENCES = ["@octocat", "#12", "GH-12", "owner/repo#12", "https://evil.example", "www.evil.example",
              "user@example.com"]
LIVE = re.compile(r"@[A-Za-z0-9]|#\d|GH-\d|://|www\.", re.IGNORECASE)


def test_markdown_places_no_mention_reference_or_link() -> None:
    words = " ".join(REFERENCES)
    spec = (f"# {words}\ndim N, d\ninput Q: [N, d]\n"
            f'T = einsum("{words}", Q)\nS = Q @ Q.T\noutput O = softmax(S) @ Q\n')
    program = check_text(spec)
    assert any(words in d.message for d in program.diagnostics)  # the einsum string is quoted
    markdown = render(build_report(program, f"specs/{words}.attn"), "md")
    outside = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", markdown, flags=re.MULTILINE | re.DOTALL)
    outside = re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", "", outside)  # code spans stay literal on GitHub
    assert "octocat" in outside and not LIVE.search(outside), LIVE.findall(outside)


INVISIBLE = "\u200b\u200c\u200d\u2060\u00ad\u202e\ufeff"


def test_invisible_characters_are_shown_in_both_formats() -> None:
    spec = (f"# a{INVISIBLE}b\ndim N, d\ninput Q: [N, d]\n"
            f'T = einsum("ij{INVISIBLE[0]}", Q)\nS = Q @ Q.T\noutput O = softmax(S) @ Q\n')
    report = build_report(check_text(spec), f"p{INVISIBLE[0]}.attn")
    for fmt, shown in (("html", "&lt;U+200B&gt;"), ("md", "<U+200B>")):
        out = render(report, fmt)
        assert not [c for c in INVISIBLE if c in out], fmt
        assert shown in out or "\\<U+200B\\>" in out, fmt
        for char in INVISIBLE:
            assert f"U+{ord(char):04X}" in out, (fmt, hex(ord(char)))


def test_every_template_is_used() -> None:
    from shapecheck.report.templates import TEXT

    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "shapecheck" / "report").glob("*.py")
                        if p.name != "templates.py")
    dynamic = ("kind_", "op_", "what_")  # text(f"kind_{kind}"), the operation names, annotations
    unused = [key for key in TEXT.english if f'"{key}"' not in sources and f"'{key}'" not in sources
              and not key.startswith(dynamic)]
    assert unused == []


# --- the card reads the formula's axes from the axis-meaning analysis (issue 8 §4) ------------------


def _checks(spec: str) -> dict[str, tuple[str, bool | None]]:
    (card,) = build_report(check_text(spec), "a.attn").cards
    found: dict[str, tuple[str, bool | None]] = {}
    for check in card.checks:
        found.setdefault(check.label, (plain(check.text), check.ok))
    return found


BASE = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"


def test_the_card_marks_the_axes_and_the_scale_from_the_analysis() -> None:
    checks = _checks(BASE + "S = Q @ K.T / sqrt(N)\nP = softmax(S, axis=row)\nO = P.T @ V\noutput O\n")
    axes, ok = checks["axes"]
    assert ok is False and axes.startswith("softmax normalises axis −1 of its scores, but P.T @ V sums "
                                           "over axis −2 of them") and "see SC402 on line 7" in axes
    scale, ok = checks["scale"]
    assert ok is False and scale == "/ sqrt(N) is 1/sqrt(N), but the scores sum over d ✗ see SC404 on line 5"


def test_the_card_marks_a_transposed_mask_and_a_mask_after_the_softmax() -> None:
    (card,) = build_report(check_text(
        BASE + "input M: bool[N, N]\nS = where(causal_mask(N).T, Q @ K.T / sqrt(d), -inf)\n"
        "P = softmax(S)\nPm = where(M, P, 0)\nO = Pm @ V\noutput O\n"), "m.attn").cards
    masks = [(plain(c.text), c.ok) for c in card.checks if c.label == "mask"]
    assert masks[0][1] is False and "keys after it" in masks[0][0] and "SC407" in masks[0][0]
    assert masks[1][1] is False and "after the softmax" in masks[1][0] and "SC406" in masks[1][0]
    assert not card.ok


def test_the_card_cites_the_warning_of_an_inverted_mask() -> None:
    # `where(m, -inf, S)` hides what the causal mask allows: the same ✗, but SC408's
    (card,) = build_report(check_text(
        BASE + "S = Q @ K.T / sqrt(d)\nP = softmax(where(causal_mask(N), -inf, S))\nO = P @ V\n"
        "output O\n"), "m.attn").cards
    (mask,) = [(plain(c.text), c.ok) for c in card.checks if c.label == "mask"]
    assert mask[1] is False and "keys after it" in mask[0] and "see SC408 on line 6" in mask[0]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.attn")), ids=lambda p: p.stem)
def test_every_example_s_card_names_its_axes(path: Path) -> None:
    report = build_report(check_path(path), "x.attn")
    assert report.cards
    for card in report.cards:
        axes = next(c for c in card.checks if c.label == "axes")
        assert axes.ok is True and "softmax normalises over the keys" in plain(axes.text)
    softmax_steps = [plain(s.text) for r in report.reasoning for s in r.steps if plain(s.text).startswith("softmax(")]
    assert softmax_steps and all("sums over the same axis ✓" in step for step in softmax_steps)


# --- the language of issue 10 in the report: slicing, comparisons, new builtins ----------------------

MODERN = """dim T_past, T_new, H, h
dim d = 2 * h
dim T = T_past + T_new
dim W
input Q: [H, T_new, d]
input K: [H, T, d]
input V: [H, T, d]
theta = 10000 ** (-arange(h) / h)
angle = arange(T_new)[:, None] * theta
Qr: [H, T_new, d] = concat([Q[..., :h] * cos(angle) - Q[..., h:] * sin(angle),
                          Q[..., h:] * cos(angle) + Q[..., :h] * sin(angle)], axis=-1)
near = (arange(T)[None, :] > T_past - W) & ~(arange(T)[None, :] == 0)
S = where(causal_mask(T_new, T, window=W), Qr @ K.T / sqrt(d), -inf)
P = softmax(where(near, S, -inf), dim=-1)
O = P @ V
pair = stack([tril(O, -1), triu(O)], axis=0)
output O
output pair
"""


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_spec_in_the_new_syntax_gets_its_card_picture_and_costs(language: str) -> None:
    sizes = {"T_past": 5, "T_new": 3, "H": 2, "h": 4, "W": 4}
    program = check_text(MODERN, sizes)
    assert program.ok, [d.message for d in program.diagnostics]
    with i18n.use(language):
        report = build_report(program, "modern.attn", sizes)
        markdown, html = render(report, "md"), render(report, "html")
    (card,) = report.cards  # queries Qr, sliced and rotated; scores masked twice
    assert card.ok and [row.shape for row in card.rows] == [
        "[H, T_new, d]", "[H, T, d]", "[H, T, d]", "[H, T_new, T]", "[H, T_new, T]", "[H, T_new, d]"]
    checks = {c.label: (plain(c.text), c.ok) for c in card.checks}
    with i18n.use(language):
        words = (text("check_scale"), "sum over d ✓" if language == "en" else "在 d 上求和", text("check_mask"),
                 {"en": "query i sees the keys", "zh": "query i 只看 key"}[language])
    assert checks[words[0]][1] is True and words[1] in checks[words[0]][0]
    mask_texts = [plain(c.text) for c in card.checks if c.label == words[2]]
    assert any(f"{words[3]} i + T_past - W < j ≤ i + T_past ✓" in m for m in mask_texts), mask_texts
    # The cost table: every statement has its numbers; slicing, stacking, tril and arange are
    # data movement (0), comparisons and `& ~` are elementwise (1 per element).
    rows = {row.name: row for row in report.cost.rows}
    assert set(rows) == set(program.tensors) - {"Q", "K", "V"}
    assert all(row.flops_value is not None and row.bytes_value is not None for row in rows.values())
    assert rows["near"].flops == "4·T" and rows["near"].bytes_value == 8  # > == ~ &; bool: a byte each
    assert rows["pair"].flops == "0" and rows["pair"].bytes_value == 8 * 2 * 2 * 3 * 8
    assert rows["Qr"].flops == "6·H·T_new·h + 4·T_new·h"  # cos and sin twice each, on [T_new, h]
    # The picture: a node per tensor, an edge per dependency, the slices' sources included.
    dom = parse_html(html)
    (svg,) = dom.find_all("svg")
    drawn = {g.attrs["data-name"] for g in svg.find_all("g", class_="sc-node") if "data-name" in g.attrs}
    assert drawn == set(program.tensors)
    edges = {(g.attrs["data-source"], g.attrs["data-target"]) for g in svg.find_all("g", class_="sc-edge")}
    assert {("Q", "Qr"), ("angle", "Qr"), ("theta", "angle"), ("near", "P"), ("O", "pair")} <= edges
    # Both formats carry the new syntax verbatim (escaped) and nothing untranslated.
    assert "Q[..., :h]" in markdown.replace("\\", "") and "Q[..., :h]" in html
    assert "&amp; ~(arange(T)[None, :] == 0)" in html
    if language == "zh":
        assert "Conventions" not in markdown and "Largest intermediate" not in markdown
