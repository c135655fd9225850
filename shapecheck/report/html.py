"""The report as one self-contained HTML page.

No external script, style sheet, font or image: the page opens offline, and a Content
Security Policy forbids loading or running anything, so even a mistake in escaping
could not run a spec's text. Every piece of user text goes through :func:`html.escape`.
The page has no script at all; the style sheet below is the only styling, with a print
variant.
"""

from __future__ import annotations

from html import escape

from .cards import Card
from .model import DimRow, ModelReport, Problem, Report, SourceLine
from .svg import render_svg
from .templates import Rich, formula_terms, inline, rich, text

_SEGMENT = {
    "text": "{}",
    "code": "<code>{}</code>",
    "shape": '<code class="shape">{}</code>',
    "math": '<span class="math">{}</span>',
    "ok": '<span class="ok">{}</span>',
    "bad": '<span class="bad">{}</span>',
}

SECTIONS = [("source", "sec_source"), ("dims", "sec_dims"), ("cards", "sec_cards"),
            ("cost", "sec_cost"), ("reasoning", "sec_reasoning"), ("dataflow", "sec_graph")]


def h(value: object) -> str:
    return escape(str(value), quote=True)


def r(value: Rich) -> str:
    return "".join(_SEGMENT[style].format(h(part)) for style, part in value)


def render_html(report: Report) -> str:
    body = [
        _header(report),
        _contents(report),
        _problems(report) if report.problems else "",
        _section("source", "sec_source", _source(report)),
        _section("dims", "sec_dims", _dims(report)),
        _section("cards", "sec_cards", _cards(report)),
        _section("masks", "sec_masks", _masks(report)) if report.masks else "",
        _section("cost", "sec_cost", _cost(report)),
        _section("reasoning", "sec_reasoning", _reasoning(report)),
        _section("dataflow", "sec_graph", _graph(report)),
        f'<footer>{h(text("footer", version=report.version))}</footer>',
    ]
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="{h(text("html_lang"))}">\n<head>\n<meta charset="utf-8">\n'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="{h(text("generator", version=report.version))}">\n'
        f"<title>{h(report.title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f'<body data-verified="{"true" if report.ok else "false"}">\n<main>\n'
        + "\n".join(part for part in body if part)
        + "\n</main>\n</body>\n</html>\n"
    )


def render_cards(report: Report) -> str:
    """The verdict and the cards alone, as a piece of someone else's page (a notebook shows
    a checked program so): styled under one class, so that neither page restyles the other."""
    mark = "✓" if report.ok else "✗"
    verdict = "verdict ok" if report.ok else "verdict fail"
    return (f'<div class="shapecheck-cards" lang="{h(text("html_lang"))}">'
            f"<style>{_CARD_CSS}</style>\n"
            f'<p class="{verdict}">{mark} {h(report.verdict)}</p>\n'
            + "\n".join(_card_list(report)) + "\n</div>")


def _section(anchor: str, title: str, content: str) -> str:
    return f'<section id="{anchor}">\n<h2>{h(text(title))}</h2>\n{content}\n</section>'


def _header(report: Report) -> str:
    verdict_class = "verdict ok" if report.ok else "verdict fail"
    mark = "✓" if report.ok else "✗"
    sizes = h(report.bindings) if report.bindings else r(rich("no_bindings"))
    return (
        f'<header>\n<h1>{h(report.title)}</h1>\n'
        f'<p class="{verdict_class}">{mark} {h(report.verdict)}</p>\n'
        f"<p>{sizes}<br>{h(report.dtype)}</p>\n</header>"
    )


def _contents(report: Report) -> str:
    items = [(anchor, key) for anchor, key in SECTIONS]
    if report.masks:
        items.insert(3, ("masks", "sec_masks"))
    if report.problems:
        items.insert(0, ("problems", "sec_problems"))
    links = "".join(f'<li><a href="#{a}">{h(text(k))}</a></li>' for a, k in items)
    return f'<nav aria-label="{h(text("contents"))}"><ol>{links}</ol></nav>'


def _masks(report: Report) -> str:
    """Each function of positions as written, its table drawn, what was proved of it."""
    parts = [f"<p>{h(text('intro_masks'))}</p>"]
    for card in report.masks:
        parts.append(f"<h3><code>{h(card.name)}</code></h3><pre>{h(card.source)}</pre>")
        if card.picture:
            drawn = h(card.lengths + "; " + text("mask_drawn", sizes=card.sizes))
            rows = "\n".join(" ".join(row) for row in card.picture)
            parts.append(f"<p>{drawn}</p><pre>{h(rows)}</pre>")
        parts.append(f"<p>{h(card.explanation)}</p>")
        if card.rows:
            parts.append("<ul>" + "".join(f"<li>{h(row)}</li>" for row in card.rows) + "</ul>")
        if card.findings:
            items = "".join(f"<li>{h(words)}: <strong>{h(status)}</strong></li>"
                            for words, status in card.findings)
            parts.append(f"<ul>{items}</ul>")
    return "\n".join(parts)


def _problems(report: Report) -> str:
    items = []
    for p in report.problems:
        links = [f'<a href="#{h(p.anchor)}">{p.line}:{p.column}</a>']
        if p.node is not None:
            links.append(f'<a class="to" href="#{h(p.node)}">{h(text("link_picture"))}</a>')
        if p.card is not None:
            links.append(f'<a class="to" href="#card-{p.card}">'
                         f'{h(text("link_card", number=p.card))}</a>')
        items.append(f'<li class="{h(p.severity)}">{links[0]} {h(p.severity)}[{h(p.code)}]: '
                     f'{r(inline(p.message))}' + (f' <span class="links">{" ".join(links[1:])}</span>'
                                          if len(links) > 1 else "") + "</li>")
    return (f'<section id="problems">\n<h2>{h(text("sec_problems"))}</h2>\n'
            f'<ul class="problems">{"".join(items)}</ul>\n</section>')


# --- annotated source --------------------------------------------------------------------------


def _source(report: Report) -> str:
    concrete = bool(report.bindings)
    intro = r(rich("intro_source", concrete=text("intro_source_concrete") if concrete else ""))
    head = [text("col_line"), text("col_source"), text("col_shape")] + ([text("col_concrete")] if concrete else [])
    rows = []
    for line in report.lines:
        rows.append(_source_row(line, concrete))
        rows.extend(_problem_row(problem, len(head)) for problem in line.problems)
    # No scrolling box around it: long source lines wrap, and a problem's frame scrolls
    # inside its own box, so the shape column always stays in view.
    return (f"<p>{intro}</p>\n<table class=\"source\">\n<thead><tr>"
            + "".join(f"<th>{h(c)}</th>" for c in head) + "</tr></thead>\n<tbody>\n"
            + "\n".join(rows) + "\n</tbody></table>")


def _source_row(line: SourceLine, concrete: bool) -> str:
    status = "blank"
    for annotation in line.annotations:
        status = annotation.status if status in ("blank", "ok") else status
    if line.problems and status in ("blank", "ok"):
        status = line.problems[0].severity
    shapes = "<br>".join(
        f'<span class="stmt" data-name="{h(a.label)}" data-shape="{h(a.shape or "")}">'
        f'<b>{h(a.label)}</b>' + (f' <code class="shape">{h(a.shape)}</code>' if a.shape else "")
        + (f' <span class="note">{h(a.note)}</span>' if a.note else "") + "</span>"
        for a in line.annotations)
    cells = [f'<td class="ln">{line.number}</td>', f'<td class="code"><code>{h(line.text)}</code></td>',
             f'<td class="ann">{shapes}</td>']
    if concrete:
        values = "<br>".join(
            f'<code class="shape">{h(a.concrete)}</code>' if a.concrete
            else f'<span class="note">{h(a.unbound)}</span>' if a.unbound else ""
            for a in line.annotations)
        cells.append(f'<td class="ann concrete">{values}</td>')
    return f'<tr id="L{line.number}" class="line-{status}">' + "".join(cells) + "</tr>"


def _problem_row(problem: Problem, columns: int) -> str:
    return (f'<tr class="problem {h(problem.severity)}" id="{h(problem.anchor)}" '
            f'data-code="{h(problem.code)}"><td></td>'
            f'<td colspan="{columns - 1}"><pre>{h(problem.frame)}</pre></td></tr>')


# --- dims and constraints ----------------------------------------------------------------------


def _dims(report: Report) -> str:
    concrete = bool(report.bindings)
    parts = []
    if report.dims:
        head = [text("col_dim"), text("col_kind"), text("col_definition")] \
            + ([text("col_value")] if concrete else []) + [text("col_line")]
        rows = []
        for dim in report.dims:
            cells = [f"<td><code>{h(dim.name)}</code></td>", f"<td>{h(dim.kind)}</td>",
                     f"<td>{r(dim.definition)}</td>"]
            if concrete:
                cells.append(f'<td class="num">{h(dim.value)}</td>' if dim.value is not None
                             else f'<td><span class="note">{h(dim.unbound or "")}</span></td>')
            cells.append(f'<td><a href="#L{dim.line}">{dim.line}</a></td>')
            rows.append(f'<tr data-dim="{h(dim.name)}">' + "".join(cells) + "</tr>")
        parts.append(_table("dims", head, rows))
    else:
        parts.append(f"<p>{h(text('no_dims'))}</p>")
    if report.constraints:
        head = [text("col_constraint"), text("col_line"), text("col_status"), text("col_used")]
        rows = [
            f'<tr class="{_ok_class(c.ok)}"><td><code>{h(c.text)}</code></td>'
            f'<td><a href="#L{c.line}">{c.line}</a></td><td>{r(c.status)}</td><td>{r(c.uses)}</td></tr>'
            for c in report.constraints]
        parts.append(_table("constraints", head, rows))
    else:
        parts.append(f"<p>{h(text('no_constraints'))}</p>")
    parts.extend(f'<p class="identity">{r(identity)}</p>' for identity in report.identities)
    return "\n".join(parts)


def _ok_class(ok: bool | None) -> str:
    return {True: "holds", False: "fails", None: "assumed"}[ok]


def _table(css: str, head: list[str], rows: list[str], foot: str = "") -> str:
    return (f'<div class="scroll"><table class="{css}">\n<thead><tr>'
            + "".join(f"<th>{h(c)}</th>" for c in head) + "</tr></thead>\n<tbody>\n"
            + "\n".join(rows) + "\n</tbody>" + foot + "</table></div>")


# --- cards ------------------------------------------------------------------------------------------


def _cards(report: Report) -> str:
    return "\n".join([f"<p>{r(rich('intro_cards'))}</p>", *_card_list(report)])


def _card_list(report: Report) -> list[str]:
    """Each card, or why there is none; the patterns whose shapes are unknown."""
    parts = [] if report.cards or report.unfilled_cards else [f"<p>{r(rich('no_cards'))}</p>"]
    parts.extend(_card(card, bool(report.bindings)) for card in report.cards)
    if report.unfilled_cards:
        lines = ", ".join(str(line) for line in report.unfilled_cards)
        parts.append(f'<p class="unfilled">{r(rich("unfilled_cards", lines=lines))}</p>')
    return parts


def _card(card: Card, concrete: bool) -> str:
    head = [text("col_role"), text("col_tensor"), text("col_shape")] \
        + ([text("col_concrete")] if concrete else []) + [text("col_meaning")]
    rows = []
    for row in card.rows:
        shown = f'<code class="shape">{h(row.shape)}</code>' if row.shape is not None \
            else f'<span class="bad">?</span>'
        cells = [f"<th scope=\"row\">{h(row.role)}</th>", f"<td>{r(row.tensor)}</td>", f"<td>{shown}</td>"]
        if concrete:
            cells.append(f'<td><code class="shape">{h(row.concrete)}</code></td>' if row.concrete
                         else "<td></td>")
        cells.append(f"<td>{r(row.meaning)}</td>")
        rows.append(("<tr>" if row.ok else '<tr class="failed">') + "".join(cells) + "</tr>")
    checks = "".join(
        f'<li class="{_check_class(check.ok)}"><b>{h(check.label)}</b>: {r(check.text)}</li>'
        for check in card.checks)
    core = ""
    if card.core_flops is not None:
        value = f" = {card.core_value:,}" if card.core_value is not None else ""
        core = (f'<p class="core">{h(text("role_core"))} ({h(text("mean_core"))}): '
                f'<span class="math">{h(card.core_flops)}</span> {h(text("col_flops"))}{h(value)}</p>')
    state = "card" if card.ok else "card broken"
    return (f'<article class="{state}" id="card-{card.number}" data-line="{card.line}">\n'
            f"<h3>{r(card.title)}</h3>\n<p class=\"oneline\">{r(card.summary)}</p>\n"
            + _table("roles", head, rows)
            + f'\n<h4>{h(text("checks"))}</h4>\n<ul class="checks">{checks}</ul>\n'
            + f'<p class="identity">{r(card.identity)}</p>\n{core}\n</article>')


def _check_class(ok: bool | None) -> str:
    return {True: "check-ok", False: "check-failed", None: "check-neutral"}[ok]


# --- cost -----------------------------------------------------------------------------------------


def _cost(report: Report) -> str:
    concrete = bool(report.bindings)
    cost = report.cost
    intro = r(rich("intro_cost", evaluated=text("intro_cost_evaluated") if concrete else ""))
    head = [text("col_line"), text("col_statement"), text("col_flops")] \
        + ([text("col_value")] if concrete else []) + [text("col_bytes")] \
        + ([text("col_value")] if concrete else []) + [text("col_ops")]
    rows = []
    for row in cost.rows:
        cells = [f'<td><a href="#L{row.line}">{row.line}</a></td>', f"<td><code>{h(row.name)}</code></td>",
                 _formula(row.flops)]
        if concrete:
            cells.append(_number(row.flops_value, row.blank))
        cells.append(_formula(row.bytes))
        if concrete:
            cells.append(_number(row.bytes_value, row.blank))
        cells.append(f"<td>{h(row.ops)}</td>")
        rows.append(f'<tr data-name="{h(row.name)}">' + "".join(cells) + "</tr>")
    label = text("total_partial") if cost.partial else text("total")
    foot_cells = [f'<th colspan="2">{h(label)}</th>', _formula(cost.total)]
    if concrete:
        foot_cells.append(_number(cost.total_value))
    foot_cells.append(f'<td colspan="{3 if concrete else 2}"></td>')
    foot = "\n<tfoot><tr>" + "".join(foot_cells) + "</tr></tfoot>"
    return (f"<p>{intro}</p>\n" + _table("cost", head, rows, foot)
            + f'\n<p class="largest">{r(cost.largest)}</p>')


def _formula(value: str | None) -> str:
    """A cost formula; its terms never break inside, the sum may wrap between them."""
    if value is None:
        return f'<td class="math"><span class="note">{h(text("unknown"))}</span></td>'
    return '<td class="math">' + " ".join(
        (f"{h(op)} " if op else "") + f'<span class="term">{h(term)}</span>'
        for op, term in formula_terms(value)) + "</td>"


def _number(value: int | None, blank: str | None = None) -> str:
    if value is None:
        return f'<td class="num"><span class="note">{h(blank or "")}</span></td>'
    return f'<td class="num">{h(f"{value:,}")}</td>'


# --- reasoning and picture --------------------------------------------------------------------


def _reasoning(report: Report) -> str:
    parts = [f"<p>{r(rich('intro_reasoning'))}</p>"]
    if not report.reasoning:
        parts.append(f"<p>{h(text('no_steps'))}</p>")
    for statement in report.reasoning:
        steps = []
        for step in statement.steps:
            css = {True: "step-ok", False: "step-failed", None: "step-unknown"}[step.ok]
            index = f'<br><span class="index">{r(step.index_form)}</span>' if step.index_form else ""
            steps.append(f'<li class="{css}">{r(step.text)}{index}</li>')
        parts.append(
            f'<div class="reason" data-line="{statement.line}"><p><a href="#L{statement.line}">'
            f"{h(text('col_line'))} {statement.line}</a> <code>{h(statement.source)}</code></p>"
            f"<ul>{''.join(steps)}</ul></div>")
    return "\n".join(parts)


def _graph(report: Report) -> str:
    title = text("graph_title", path=report.path)
    svg = render_svg(report.nodes, report.edges, title)
    if not svg:
        key = "no_graph" if report.nodes else "no_tensors"
        return f"<p>{h(text(key, count=len(report.nodes)))}</p>"
    return f"<p>{h(text('intro_graph'))}</p>\n<div class=\"graph\">\n{svg}</div>"


_CSS = """
:root { --fg: #111827; --muted: #4b5563; --line: #d1d5db; --ok: #15803d; --bad: #b91c1c;
  --warn: #b45309; --code-bg: #f3f4f6; --accent: #1d4ed8; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Noto Sans CJK SC",
    "PingFang SC", "Microsoft YaHei", sans-serif; }
main { max-width: 76rem; margin: 0 auto; padding: 1.5rem 1.5rem 3rem; }
h1 { font-size: 1.6rem; margin: 0 0 .4rem; overflow-wrap: anywhere; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 .6rem; padding-bottom: .2rem; border-bottom: 2px solid var(--line); }
h3 { font-size: 1.05rem; margin: 0 0 .5rem; overflow-wrap: anywhere; }
h4 { font-size: .95rem; margin: .8rem 0 .2rem; }
p, li, td { overflow-wrap: anywhere; }
code, pre, .math { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono",
  "Noto Sans Mono CJK SC", monospace; font-size: .9em; }
code { background: var(--code-bg); padding: 0 .2em; border-radius: 3px; }
a { color: var(--accent); }
nav ol { display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; padding: 0; margin: .8rem 0; list-style: none; }
.verdict { display: inline-block; font-weight: 700; padding: .15rem .6rem; border-radius: 4px; margin: .2rem 0; }
.verdict.ok { background: #dcfce7; color: var(--ok); }
.verdict.fail { background: #fee2e2; color: var(--bad); }
.ok { color: var(--ok); font-weight: 700; }
.bad { color: var(--bad); font-weight: 700; }
.note { color: var(--muted); font-style: italic; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .92rem; }
th, td { border-bottom: 1px solid var(--line); padding: .25rem .6rem; text-align: left; vertical-align: top; }
thead th { background: #f9fafb; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.math .term, code.shape { white-space: nowrap; }
table.source { font-size: .85rem; width: 100%; }
table.source td { border: 0; padding: 0 .6rem; }
table.source td.ln { color: var(--muted); text-align: right; user-select: none; width: 3em;
  white-space: nowrap; }
table.source td.code code { background: none; padding: 0; white-space: pre-wrap; overflow-wrap: anywhere; }
table.source td.ann { color: var(--muted); width: 1%; }
table.source td.ann .stmt { white-space: nowrap; }
table.source td.ann b { color: var(--fg); font-weight: 600; }
table.source tr.line-error td.ln { background: #fee2e2; color: var(--bad); }
table.source tr.line-warning td.ln { background: #fef3c7; color: var(--warn); }
/* A frame never widens the table: it takes the cell's width and scrolls inside itself. */
tr.problem pre { width: 0; min-width: 100%; margin: .3rem 0 .6rem; padding: .5rem .7rem;
  background: #fef2f2; border-left: 4px solid var(--bad); white-space: pre; overflow-x: auto; }
tr.problem.warning pre { background: #fffbeb; border-left-color: var(--warn); }
tr.problem.note pre { background: #eff6ff; border-left-color: var(--accent); }
tr.problem:target pre { outline: 2px solid var(--bad); }
ul.problems li.error { color: var(--bad); }
ul.problems li.warning { color: var(--warn); }
ul.problems .links a { margin-left: .5em; font-size: .85em; }
table.constraints tr.fails td:first-child { border-left: 4px solid var(--bad); }
table.constraints tr.holds td:first-child { border-left: 4px solid var(--ok); }
.identity { font-weight: 600; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.2rem; margin: 1rem 0;
  break-inside: avoid; }
.card.broken { border-color: var(--bad); border-width: 2px; }
.card:target { box-shadow: 0 0 0 3px #bfdbfe; }
.card .oneline { background: #f9fafb; border-left: 4px solid var(--accent); padding: .4rem .7rem; }
table.roles th[scope=row] { white-space: nowrap; }
table.roles tr.failed th, table.roles tr.failed td { background: #fef2f2; }
ul.checks { margin: .2rem 0 .6rem 1.2rem; padding: 0; }
ul.checks li { margin: .1rem 0; }
ul.checks li.check-failed { color: var(--bad); }
.reason { margin: .6rem 0; break-inside: avoid; }
.reason p { margin: 0; }
.reason ul { margin: .2rem 0 .2rem 1.2rem; padding: 0; }
.reason li { margin: .15rem 0; }
.reason li.step-failed { color: var(--bad); }
.index { color: var(--muted); }
/* The picture keeps its size (readable labels) and scrolls sideways when it is wider. */
.graph { overflow-x: auto; }
.graph svg { display: block; }
footer { margin-top: 3rem; color: var(--muted); font-size: .85rem; }
@media print {
  body { font-size: 10pt; }
  main { max-width: none; padding: 0; }
  nav { display: none; }
  .scroll, .graph { overflow: visible; }
  tr.problem pre { white-space: pre-wrap; width: auto; }
  h2 { break-after: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""

# The cards' look inside another page: the same colours as the report's, every rule scoped.
_CARD_CSS = """
.shapecheck-cards .card { border: 1px solid #d1d5db; border-radius: 8px; padding: .8rem 1rem;
  margin: .6rem 0; }
.shapecheck-cards .card.broken { border: 2px solid #b91c1c; }
.shapecheck-cards .oneline { border-left: 4px solid #1d4ed8; padding: .3rem .6rem; }
.shapecheck-cards table { border-collapse: collapse; }
.shapecheck-cards th, .shapecheck-cards td { border-bottom: 1px solid #d1d5db; padding: .2rem .5rem;
  text-align: left; vertical-align: top; }
.shapecheck-cards tr.failed th, .shapecheck-cards tr.failed td,
.shapecheck-cards .verdict.fail { background: #fee2e2; }
.shapecheck-cards .verdict { display: inline-block; font-weight: 700; padding: .1rem .5rem;
  border-radius: 4px; }
.shapecheck-cards .verdict.ok { background: #dcfce7; color: #15803d; }
.shapecheck-cards .ok, .shapecheck-cards .check-ok { color: #15803d; }
.shapecheck-cards .bad, .shapecheck-cards .check-failed, .shapecheck-cards .verdict.fail { color: #b91c1c; }
"""


# --- a whole model ----------------------------------------------------------------------------------


def render_model_html(page: ModelReport) -> str:
    """A whole model's page: its dims once, each group of attention layers with its cards,
    the rest of the model by kind (the same self-contained page as one spec's)."""
    verdict = "verdict ok" if page.ok else "verdict fail"
    body = [f'<header>\n<h1>{h(page.title)}</h1>\n<p class="{verdict}">'
            f'{"✓" if page.ok else "✗"} {h(page.verdict)}</p>\n</header>']
    if page.problems:
        items = "".join(f"<li><code>{h(problem)}</code></li>" for problem in page.problems)
        body.append(_section("problems", "sec_problems", f"<ul>{items}</ul>"))
    body.append(_section("dims", "sec_dims", _dim_table(page.dims)))
    layers = [f"<p>{h(text('intro_layers'))}</p>"]
    for number, layer in enumerate(page.layers, 1):
        mark = "✓" if layer.report.ok else "✗"
        ok = "verdict ok" if layer.report.ok else "verdict fail"
        layers.append(f'<section id="layer-{number}"><h3><code>{h(layer.label)}</code></h3>'
                      f"<p>{h(layer.detail)}</p>"
                      f'<p class="{ok}">{mark} {h(layer.report.verdict)}</p>\n'
                      + "\n".join(_card_list(layer.report)) + "</section>")
    body.append(_section("layers", "sec_layers", "\n".join(layers)))
    if page.others:
        items = "".join(f"<li><strong>{h(kind)}</strong>: <code>{h(modules)}</code></li>"
                        for kind, modules in page.others)
        body.append(_section("rest", "sec_rest", f"<p>{h(text('intro_rest'))}</p><ul>{items}</ul>"))
    body.append(f'<footer>{h(text("footer", version=page.version))}</footer>')
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="{h(text("html_lang"))}">\n<head>\n<meta charset="utf-8">\n'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">\n"
        f"<title>{h(page.title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f'<body data-verified="{"true" if page.ok else "false"}">\n<main>\n'
        + "\n".join(body) + "\n</main>\n</body>\n</html>\n")


def _dim_table(dims: tuple[DimRow, ...]) -> str:
    if not dims:
        return f"<p>{h(text('no_dims'))}</p>"
    head = [text("col_dim"), text("col_kind"), text("col_definition"), text("col_value")]
    rows = [f'<tr data-dim="{h(d.name)}"><td><code>{h(d.name)}</code></td><td>{h(d.kind)}</td>'
            f'<td>{r(d.definition)}</td><td class="num">{h("" if d.value is None else d.value)}'
            "</td></tr>" for d in dims]
    return _table("dims", head, rows)
