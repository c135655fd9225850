"""The report in GitHub-flavoured Markdown: for a pull-request comment or a job summary.

The same content as the HTML page: tables, code spans, fenced blocks for the problems
(exactly as `verify` prints them, placed after the line they point at), and the dataflow
as a Mermaid flowchart, which GitHub draws. User text is either inside a code span or
fence (shown literally) or escaped with the formats' Markdown escaping, which also keeps
GitHub from turning it into a mention, an issue reference or a link. Shapes and formulas
keep their spaces unbreakable, so a table cell never splits `[8, 128, 64]`.
"""

from __future__ import annotations

from ..formats.github import escape_markdown
from .cards import Card
from .masks import MaskCard
from .model import DimRow, ModelReport, Problem, Report, SourceLine
from .svg import MAX_NODES
from .templates import Rich, formula_terms, inline, rich, text


def code_span(value: str, in_table: bool = False) -> str:
    """A code span that shows ``value`` literally (in a table cell too)."""
    if in_table:
        value = value.replace("|", "\\|")
    fence = "`" * (_longest_run(value, "`") + 1)
    padded = f" {value} " if value.startswith("`") or value.endswith("`") or not value.strip() else value
    return f"{fence}{padded}{fence}"


def fenced(value: str, info: str = "") -> str:
    fence = "`" * max(3, _longest_run(value, "`") + 1)
    return f"{fence}{info}\n{value}\n{fence}"


def _longest_run(value: str, char: str) -> int:
    longest = run = 0
    for current in value:
        run = run + 1 if current == char else 0
        longest = max(longest, run)
    return longest


NBSP = "\u00a0"


def whole(value: str) -> str:
    """A shape or a formula's term that a table cell must not break: `[8, 128, 64]`."""
    return value.replace(" ", NBSP)


def formula(value: str) -> str:
    """A formula as code spans, one per term: it may wrap between terms, never inside one."""
    return " ".join((f"{op} " if op else "") + code_span(whole(term), True)
                    for op, term in formula_terms(value))


def md(value: Rich, in_table: bool = False) -> str:
    out = []
    for style, part in value:
        if style == "text":  # escaping collapses whitespace: keep the spaces at the ends
            core = escape_markdown(part)
            lead = " " if part[:1].isspace() else ""
            out.append(lead + core + (" " if part[-1:].isspace() and core else ""))
        elif style in ("ok", "bad"):
            out.append(part)
        else:
            out.append(code_span(whole(part) if style == "shape" else part, in_table))
    return "".join(out)


def _e(value: str) -> str:
    return escape_markdown(value)


def _table(head: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    align = align or ["---"] * len(head)
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    lines.extend("| " + " | ".join(cell or " " for cell in row) + " |" for row in rows)
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    mark = "✓" if report.ok else "✗"
    sizes = _e(report.bindings) if report.bindings else md(rich("no_bindings"))
    parts = [
        f"# {_e(report.title)}",
        f"**{mark} {_e(report.verdict)}**",
        f"{sizes}  \n{_e(report.dtype)}",
    ]
    if report.problems:
        parts += [f"## {_e(text('sec_problems'))}", "\n".join(_problem(p) for p in report.problems)]
    parts += [f"## {_e(text('sec_source'))}", _source(report)]
    parts += [f"## {_e(text('sec_dims'))}", _dims(report)]
    parts += [f"## {_e(text('sec_cards'))}", md(rich("intro_cards"))]
    parts += [_card(card, bool(report.bindings)) for card in report.cards]
    if report.unfilled_cards:
        lines = ", ".join(str(line) for line in report.unfilled_cards)
        parts.append(md(rich("unfilled_cards", lines=lines)))
    elif not report.cards:
        parts.append(md(rich("no_cards")))
    if report.masks:
        parts += [f"## {_e(text('sec_masks'))}", _e(text("intro_masks"))]
        parts += [_mask(card) for card in report.masks]
    parts += [f"## {_e(text('sec_cost'))}", _cost(report)]
    parts += [f"## {_e(text('sec_reasoning'))}", _reasoning(report)]
    parts += [f"## {_e(text('sec_graph'))}", _graph(report)]
    parts += [f"<sub>{_e(text('footer', version=report.version))}</sub>"]
    return "\n\n".join(part for part in parts if part) + "\n"


def _mask(card: MaskCard) -> str:
    """A function as written, its table drawn at small sizes, and what was proved of it."""
    out = [f"### `{card.name}`", "```\n" + card.source + "\n```"]
    if card.picture:
        out.append(_e(card.lengths + "; " + text("mask_drawn", sizes=card.sizes)))
        out.append("```\n" + "\n".join(" ".join(row) for row in card.picture) + "\n```")
    out.append(_e(card.explanation))
    if card.rows:
        out.append("\n".join(f"- {_e(row)}" for row in card.rows))
    if card.findings:
        out.append("\n".join(f"- {_e(words)}: **{_e(status)}**" for words, status in card.findings))
    return "\n\n".join(out)


def _problem(problem: Problem) -> str:
    where = [text("link_line", line=problem.line)]
    if problem.card is not None:
        where.append(text("link_card", number=problem.card))
    return (f"- {problem.line}:{problem.column} {_e(problem.severity)}\\[{_e(problem.code)}\\]: "
            f"{md(inline(problem.message))} ({_e(', '.join(where))})")


# --- annotated source ---------------------------------------------------------------------------


def _source(report: Report) -> str:
    concrete = bool(report.bindings)
    head = [text("col_line"), text("col_source"), text("col_shape")] + ([text("col_concrete")] if concrete else [])
    align = ["---:", "---", "---"] + (["---"] if concrete else [])
    out = [md(rich("intro_source", concrete=text("intro_source_concrete") if concrete else ""))]
    rows: list[list[str]] = []
    for line in report.lines:
        rows.append(_source_row(line, concrete))
        if line.problems:  # the table breaks for the problems, then goes on
            out.append(_table(head, rows, align))
            out.extend(fenced(p.frame, "text") for p in line.problems)
            rows = []
    if rows:
        out.append(_table(head, rows, align))
    return "\n\n".join(out)


def _source_row(line: SourceLine, concrete: bool) -> list[str]:
    shapes = "<br>".join(
        f"**{_e(a.label)}**" + (f" {code_span(whole(a.shape), True)}" if a.shape else "")
        + (f" {_e(a.note)}" if a.note else "") for a in line.annotations)
    row = [str(line.number), code_span(line.text, True) if line.text.strip() else "", shapes]
    if concrete:
        row.append("<br>".join(code_span(whole(a.concrete), True) if a.concrete
                               else f"*{_e(a.unbound)}*" if a.unbound else ""
                               for a in line.annotations if a.concrete or a.unbound))
    return row


# --- dims, cards, cost, reasoning -------------------------------------------------------------------


def _dims(report: Report) -> str:
    concrete = bool(report.bindings)
    out = []
    if report.dims:
        head = [text("col_dim"), text("col_kind"), text("col_definition")] \
            + ([text("col_value")] if concrete else []) + [text("col_line")]
        rows = [[code_span(d.name, True), _e(d.kind), md(d.definition, True)]
                + ([str(d.value) if d.value is not None else f"*{_e(d.unbound or '')}*"] if concrete else [])
                + [str(d.line)]
                for d in report.dims]
        out.append(_table(head, rows))
    else:
        out.append(_e(text("no_dims")))
    if report.constraints:
        head = [text("col_constraint"), text("col_line"), text("col_status"), text("col_used")]
        rows = [[code_span(c.text, True), str(c.line), md(c.status, True), md(c.uses, True)]
                for c in report.constraints]
        out.append(_table(head, rows))
    else:
        out.append(_e(text("no_constraints")))
    out.extend(f"**{md(identity)}**" for identity in report.identities)
    return "\n\n".join(out)


def _card(card: Card, concrete: bool) -> str:
    head = [text("col_role"), text("col_tensor"), text("col_shape")] \
        + ([text("col_concrete")] if concrete else []) + [text("col_meaning")]
    rows = [[_e(row.role) if row.ok else f"**{_e(row.role)}** ✗", md(row.tensor, True),
             code_span(whole(row.shape), True) if row.shape is not None else "**?**"]
            + ([code_span(whole(row.concrete), True) if row.concrete else ""] if concrete else [])
            + [md(row.meaning, True)] for row in card.rows]
    checks = "\n".join(f"- **{_e(check.label)}**: {md(check.text)}" for check in card.checks)
    out = [f"### {md(card.title)}", f"> {md(card.summary)}", _table(head, rows),
           f"**{_e(text('checks'))}**\n\n{checks}", md(card.identity)]
    if card.core_flops is not None:
        value = f" = {card.core_value:,}" if card.core_value is not None else ""
        out.append(f"{_e(text('role_core'))} ({_e(text('mean_core'))}): {formula(card.core_flops)} "
                   f"{_e(text('col_flops'))}{value}")
    return "\n\n".join(out)


def _cost(report: Report) -> str:
    concrete = bool(report.bindings)
    cost = report.cost
    head = [text("col_line"), text("col_statement"), text("col_flops")] \
        + ([text("col_value")] if concrete else []) + [text("col_bytes")] \
        + ([text("col_value")] if concrete else []) + [text("col_ops")]
    align = ["---:", "---", "---"] + (["---:"] if concrete else []) + ["---"] \
        + (["---:"] if concrete else []) + ["---"]
    rows = []
    for row in cost.rows:
        cells = [str(row.line), code_span(row.name, True), _formula(row.flops)]
        if concrete:
            cells.append(_number(row.flops_value, row.blank))
        cells.append(_formula(row.bytes))
        if concrete:
            cells.append(_number(row.bytes_value, row.blank))
        cells.append(_e(row.ops))
        rows.append(cells)
    label = text("total_partial") if cost.partial else text("total")
    total = ["", f"**{_e(label)}**", _formula(cost.total)] + ([_number(cost.total_value)] if concrete else [])
    rows.append(total + [""] * (len(head) - len(total)))
    intro = md(rich("intro_cost", evaluated=text("intro_cost_evaluated") if concrete else ""))
    return "\n\n".join([intro, _table(head, rows, align), md(cost.largest)])


def _formula(value: str | None) -> str:
    return formula(value) if value is not None else f"*{_e(text('unknown'))}*"


def _number(value: int | None, blank: str | None = None) -> str:
    if value is None:
        return f"*{_e(blank)}*" if blank else ""
    return f"{value:,}"


def _reasoning(report: Report) -> str:
    out = [md(rich("intro_reasoning"))]
    if not report.reasoning:
        out.append(_e(text("no_steps")))
    for statement in report.reasoning:
        lines = [f"**{_e(text('col_line'))} {statement.line}** {code_span(statement.source)}", ""]
        for step in statement.steps:
            lines.append(f"- {md(step.text)}")
            if step.index_form:
                lines.append(f"  - {md(step.index_form)}")
        out.append("\n".join(lines))
    return "\n\n".join(out)


# --- the picture ---------------------------------------------------------------------------------------


def _graph(report: Report) -> str:
    if not report.nodes:
        return _e(text("no_tensors"))
    if len(report.nodes) > MAX_NODES:
        return _e(text("no_graph", count=len(report.nodes)))
    return _e(text("intro_graph")) + "\n\n" + _mermaid(report)


def _mermaid(report: Report) -> str:
    """The dataflow as a Mermaid flowchart (GitHub draws it); ids are generated, labels quoted.
    A failed statement and the edges into it are drawn red."""
    ids = {node.name: f"n{index}" for index, node in enumerate(report.nodes)}
    lines = ["flowchart LR"]
    for node in report.nodes:
        label = f"{node.name}<br/>{node.shape}" + (f"<br/>{node.concrete}" if node.concrete else "")
        open_, close = ("([", "])") if node.kind in ("input", "param") else ("[", "]")
        if node.output:
            open_, close = "[[", "]]"
        lines.append(f'  {ids[node.name]}{open_}"{_mermaid_text(label)}"{close}')
    failed_edges = []
    drawn = 0
    for edge in report.edges:
        if edge.source in ids and edge.target in ids:
            lines.append(f'  {ids[edge.source]} -->|"{_mermaid_text(edge.label)}"| {ids[edge.target]}')
            if edge.failed:
                failed_edges.append(str(drawn))
            drawn += 1
    failed = [ids[node.name] for node in report.nodes if node.failed]
    if failed:
        lines.append("  classDef failed fill:#fee2e2,stroke:#b91c1c,stroke-width:2px,stroke-dasharray:4 3")
        lines.append(f"  class {','.join(failed)} failed")
    if failed_edges:
        lines.append(f"  linkStyle {','.join(failed_edges)} stroke:#b91c1c,stroke-width:2px")
    return fenced("\n".join(lines), "mermaid")


def _mermaid_text(value: str) -> str:
    return value.replace("&", "#amp;").replace('"', "#quot;").replace("<br/>", "\n").replace(
        "<", "#lt;").replace(">", "#gt;").replace("\n", "<br/>")


# --- a whole model ----------------------------------------------------------------------------------


def render_model_markdown(page: ModelReport) -> str:
    """A whole model's page: its dims once, each group of attention layers with its cards,
    the rest of the model by kind."""
    parts = [f"# {_e(page.title)}", f"**{'✓' if page.ok else '✗'} {_e(page.verdict)}**"]
    if page.problems:
        parts += [f"## {_e(text('sec_problems'))}",
                  "\n".join(f"- {_e(problem)}" for problem in page.problems)]
    parts += [f"## {_e(text('sec_dims'))}", _dim_table(page.dims)]
    parts += [f"## {_e(text('sec_layers'))}", _e(text("intro_layers"))]
    for layer in page.layers:
        mark = "✓" if layer.report.ok else "✗"
        parts += [f"### `{layer.label}`", f"{_e(layer.detail)}  \n**{mark} "
                  f"{_e(layer.report.verdict)}**"]
        parts += [_card(card, True) for card in layer.report.cards]
    if page.others:
        parts += [f"## {_e(text('sec_rest'))}", _e(text("intro_rest")),
                  "\n".join(f"- **{_e(kind)}**: `{modules}`" for kind, modules in page.others)]
    parts += [f"<sub>{_e(text('footer', version=page.version))}</sub>"]
    return "\n\n".join(part for part in parts if part) + "\n"


def _dim_table(dims: tuple[DimRow, ...]) -> str:
    if not dims:
        return _e(text("no_dims"))
    head = [text("col_dim"), text("col_kind"), text("col_definition"), text("col_value")]
    return _table(head, [[code_span(d.name, True), _e(d.kind), md(d.definition, True),
                          str(d.value) if d.value is not None else ""] for d in dims])
