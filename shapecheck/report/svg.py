"""The dataflow picture, drawn as inline SVG by a simple layered layout.

Inputs and params stand in the first column; every defined tensor one column after the
last tensor it reads; outputs that nothing reads move to the last column. Within a
column, nodes are ordered by the mean row of what they read (one barycentre pass, ties
in source order), which keeps most edges short. An edge enters its target at its own
height, and its label (the shape that flows along it, on a white background) sits on the
straight stretch just before the target, so labels of one target never overlap.

No edge crosses a box: an edge leaves its source straight to the right edge of the
source's column and bends only in the gap between columns; an edge that skips columns
passes each one through a reserved slot (a waypoint), and one that skips very many runs
in a lane of its own below every box. A failed statement and the edges into it are drawn
red. Text widths are estimated from character counts (East Asian wide characters count
twice): no font is measured, so the output is the same everywhere.
"""

from __future__ import annotations

import unicodedata
from html import escape

from ..records import Record
from .model import GraphEdge, GraphNode
from .templates import text

NAME_CHAR = 8.4  # px per character, 13px bold sans
SHAPE_CHAR = 7.3  # px per character, 12px monospace
LABEL_CHAR = 6.7  # px per character, 11px monospace
LINE = 16
PAD = 10
ROW_GAP = 18
COLUMN_GAP = 48
MARGIN = 10
LEGEND = 34
WAYPOINT = 6
#: An edge that skips more columns than this runs in a lane below the boxes (waypoints
#: would grow quadratically with a long chain of statements that all read one weight).
MAX_WAYPOINTS = 6
LANE = 8  # the distance between two lanes below the boxes
LABEL_HEIGHT = 14
#: Beyond this many tensors the picture is left out: it could not be read anyway.
MAX_NODES = 400


class _Box(Record):
    """A node, or a waypoint that carries a long edge through a column (``node`` is None)."""

    name: str
    node: GraphNode | None
    column: int
    x: float = 0.0
    y: float = 0.0
    width: float = 0.0
    height: float = 0.0

    @property
    def lines(self) -> list[str]:
        if self.node is None:
            return []
        return [self.node.shape] + ([self.node.concrete] if self.node.concrete else [])


def text_width(value: str, per_char: float) -> float:
    """The estimated width of a text: a wide (CJK) character takes two cells."""
    return per_char * sum(2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in value)


def render_svg(nodes: tuple[GraphNode, ...], edges: tuple[GraphEdge, ...], title: str) -> str:
    if not nodes or len(nodes) > MAX_NODES:
        return ""
    boxes = _columns(nodes, edges)
    edges = tuple(e for e in edges if e.source in boxes and e.target in boxes)
    chains = _chains(boxes, edges)
    incoming: dict[str, list[GraphEdge]] = {n.name: [] for n in nodes}
    for edge in edges:
        incoming[edge.target].append(edge)
    _size(boxes, incoming)
    columns = _order(boxes, chains)
    width, height = _place(columns, incoming)
    right = _column_rights(columns)
    long_edges = [e for e in edges if len(chains[e]) == 2
                  and boxes[e.target].column - boxes[e.source].column > 1]
    lanes = {edge: height - MARGIN + LANE * (index + 1) for index, edge in enumerate(long_edges)}
    height += LANE * len(long_edges)
    for entering in incoming.values():
        entering.sort(key=lambda e: (lanes.get(e, boxes[chains[e][-2]].y), boxes[chains[e][-2]].x))
    height += LEGEND
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="sc-graph" role="img" '
        f'width="{_n(width)}" height="{_n(height)}" viewBox="0 0 {_n(width)} {_n(height)}" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        _DEFS,
    ]
    parts.extend(_edge(boxes, chains[edge], incoming[edge.target], edge, right, lanes.get(edge))
                 for edge in edges)
    parts.extend(_node(box) for box in boxes.values() if box.node is not None)
    parts.append(_legend(height - LEGEND + 8))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _columns(nodes: tuple[GraphNode, ...], edges: tuple[GraphEdge, ...]) -> dict[str, _Box]:
    boxes: dict[str, _Box] = {}
    sources: dict[str, list[str]] = {}
    for edge in edges:
        sources.setdefault(edge.target, []).append(edge.source)
    for node in nodes:  # declaration order: what a tensor reads is declared before it
        if node.kind in ("input", "param"):
            column = 0
        else:
            column = 1 + max((boxes[s].column for s in sources.get(node.name, []) if s in boxes), default=0)
        boxes[node.name] = _Box(node.name, node, column)
    last = max(box.column for box in boxes.values())
    read = {edge.source for edge in edges}
    for box in boxes.values():
        if box.node is not None and box.node.output and box.name not in read and box.node.kind == "defined":
            box.column = last
    return boxes


def _chains(boxes: dict[str, _Box], edges: tuple[GraphEdge, ...]) -> dict[GraphEdge, list[str]]:
    """Each edge as the boxes it passes: a waypoint in every column it crosses."""
    chains = {}
    for index, edge in enumerate(edges):
        chain = [edge.source]
        start, end = boxes[edge.source].column + 1, boxes[edge.target].column
        for column in range(start, end if end - start <= MAX_WAYPOINTS else start):
            name = f"edge {index} column {column}"  # a space: never a tensor's name
            boxes[name] = _Box(name, None, column)
            chain.append(name)
        chains[edge] = chain + [edge.target]
    return chains


def _size(boxes: dict[str, _Box], incoming: dict[str, list[GraphEdge]]) -> None:
    for box in boxes.values():
        if box.node is None:
            box.height = WAYPOINT
            continue
        widest = max([text_width(box.name, NAME_CHAR)] + [text_width(line, SHAPE_CHAR) for line in box.lines])
        box.width = max(90.0, widest + 2 * PAD)
        box.height = max(PAD + LINE * (1 + len(box.lines)) + 2, LINE * len(incoming[box.name]) + PAD)


def _order(boxes: dict[str, _Box], chains: dict[GraphEdge, list[str]]) -> list[list[_Box]]:
    """Columns of boxes; each column sorted by the mean row of its predecessors."""
    count = max(box.column for box in boxes.values()) + 1
    columns: list[list[_Box]] = [[] for _ in range(count)]
    for box in boxes.values():
        columns[box.column].append(box)
    before: dict[str, list[str]] = {}
    for chain in chains.values():
        for first, second in zip(chain, chain[1:]):
            before.setdefault(second, []).append(first)
    rank = {box.name: i for i, box in enumerate(columns[0])}
    position = {name: i for i, name in enumerate(boxes)}
    for column in columns[1:]:
        def centre(box: _Box) -> tuple[float, int]:
            rows = [rank[name] for name in before.get(box.name, []) if name in rank]
            return (sum(rows) / len(rows) if rows else float("inf"), position[box.name])
        column.sort(key=centre)
        rank.update({box.name: i for i, box in enumerate(column)})
    return columns


def _place(columns: list[list[_Box]], incoming: dict[str, list[GraphEdge]]) -> tuple[float, float]:
    heights = [sum(b.height for b in column) + ROW_GAP * (len(column) - 1) for column in columns]
    tallest = max(heights)
    x = MARGIN
    for index, column in enumerate(columns):
        labels = [text_width(e.label, LABEL_CHAR) for b in column for e in incoming.get(b.name, [])]
        x += (max(labels, default=0) + COLUMN_GAP) if index else 0
        y = MARGIN + (tallest - heights[index]) / 2
        width = max((b.width for b in column), default=0)
        for box in column:
            box.x, box.y = x, y
            if box.node is None:
                box.width = width  # a waypoint runs straight across the column
            y += box.height + ROW_GAP
        x += width
    return x + MARGIN, tallest + 2 * MARGIN


def _column_rights(columns: list[list[_Box]]) -> dict[int, float]:
    """The right edge of each column: an edge leaves a box straight to it, past wider boxes."""
    return {index: max(box.x + box.width for box in column) for index, column in enumerate(columns)
            if column}


def _edge(boxes: dict[str, _Box], chain: list[str], entering: list[GraphEdge], edge: GraphEdge,
          right: dict[int, float], lane: float | None) -> str:
    source, target = boxes[chain[0]], boxes[chain[-1]]
    slot = entering.index(edge)
    x, y = source.x + source.width, source.y + source.height / 2
    path = [f"M{_n(x)},{_n(y)}"]
    x = right[source.column]
    path.append(f"L{_n(x)},{_n(y)}")
    for name in chain[1:-1]:  # through each waypoint: a bend, then straight across its column
        waypoint = boxes[name]
        wy = waypoint.y + waypoint.height / 2
        path.append(_bend(x, y, waypoint.x, wy) + f" L{_n(right[waypoint.column])},{_n(wy)}")
        x, y = right[waypoint.column], wy
    tx = target.x
    ty = target.y + target.height * (slot + 1) / (len(entering) + 1)
    label_width = text_width(edge.label, LABEL_CHAR)
    ex = tx - label_width - 10
    if lane is not None:  # down into its lane below every box, along it, up before the target
        down, up = x + WAYPOINT, ex - WAYPOINT
        path.append(f"L{_n(down)},{_n(y)} L{_n(down)},{_n(lane)} L{_n(up)},{_n(lane)} "
                    f"L{_n(up)},{_n(ty)} L{_n(ex)},{_n(ty)}")
    else:
        path.append(_bend(x, y, ex, ty))
    path.append(f"L{_n(tx - 2)},{_n(ty)}")
    css = "sc-edge sc-failed" if edge.failed else "sc-edge"
    return (f'<g class="{css}" data-source="{escape(edge.source)}" data-target="{escape(edge.target)}">'
            f'<path d="{" ".join(path)}" marker-end="url(#{"sc-arrow-bad" if edge.failed else "sc-arrow"})"/>'
            f'<rect class="sc-label" x="{_n(ex + 1)}" y="{_n(ty - 4 - LABEL_HEIGHT + 3)}" '
            f'width="{_n(label_width + 4)}" height="{_n(LABEL_HEIGHT)}" rx="2"/>'
            f'<text x="{_n(ex + 3)}" y="{_n(ty - 4)}">{escape(edge.label)}</text></g>')


def _bend(x: float, y: float, to_x: float, to_y: float) -> str:
    """A horizontal S-curve from (x, y) to (to_x, to_y)."""
    bend = max(12.0, (to_x - x) / 2)
    return f"C{_n(x + bend)},{_n(y)} {_n(to_x - bend)},{_n(to_y)} {_n(to_x)},{_n(to_y)}"


def _node(box: _Box) -> str:
    node = box.node
    assert node is not None
    classes = ["sc-node", f"sc-{node.kind}"] + (["sc-output"] if node.output else []) \
        + (["sc-failed"] if node.failed else [])
    lines = [f'<text class="sc-name" x="{_n(box.x + PAD)}" y="{_n(box.y + PAD + 12)}">{escape(node.name)}</text>']
    for index, line in enumerate(box.lines):
        css = "sc-shape" if index == 0 else "sc-concrete"
        y = box.y + PAD + 12 + LINE * (index + 1)
        lines.append(f'<text class="{css}" x="{_n(box.x + PAD)}" y="{_n(y)}">{escape(line)}</text>')
    anchor = f' id="{escape(node.anchor)}"' if node.anchor else ""
    shape = (f'<rect x="{_n(box.x)}" y="{_n(box.y)}" width="{_n(box.width)}" height="{_n(box.height)}" '
             f'rx="6"/>' + "".join(lines))
    if node.problem:  # a failed statement links to its problem
        shape = f'<a href="#{escape(node.problem)}">{shape}</a>'
    return (f'<g class="{" ".join(classes)}"{anchor} data-name="{escape(node.name)}" data-line="{node.line}">'
            + shape + "</g>")


def _legend(y: float) -> str:
    items = [("sc-input", "legend_input"), ("sc-param", "legend_param"),
             ("sc-defined", "legend_defined"), ("sc-defined sc-output", "legend_output"),
             ("sc-defined sc-failed", "legend_failed")]
    parts = ['<g class="sc-legend">']
    x = MARGIN
    for css, key in items:
        label = text(key)
        parts.append(f'<g class="sc-node {css}"><rect x="{_n(x)}" y="{_n(y)}" width="14" height="14" rx="3"/></g>'
                     f'<text x="{_n(x + 20)}" y="{_n(y + 11)}">{escape(label)}</text>')
        x += 20 + text_width(label, LABEL_CHAR) + 18
    parts.append("</g>")
    return "".join(parts)


def _n(value: float) -> str:
    """Coordinates with one decimal: stable text, whatever the float arithmetic."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


_DEFS = """<defs><marker id="sc-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" \
markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#6b7280"/></marker>
<marker id="sc-arrow-bad" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" \
orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#b91c1c"/></marker>
<style>
.sc-graph text { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; \
font-size: 12px; fill: #111827; }
.sc-graph .sc-name { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", \
"Noto Sans CJK SC", sans-serif; font-weight: 700; font-size: 13px; }
.sc-graph .sc-legend text { font-family: system-ui, "DejaVu Sans", "Noto Sans CJK SC", sans-serif; }
.sc-graph .sc-concrete { fill: #4b5563; }
.sc-graph .sc-node rect { fill: #f3f4f6; stroke: #6b7280; stroke-width: 1.2; }
.sc-graph .sc-input rect { fill: #dbeafe; stroke: #2563eb; }
.sc-graph .sc-param rect { fill: #ede9fe; stroke: #7c3aed; }
.sc-graph .sc-output rect { fill: #dcfce7; stroke: #15803d; stroke-width: 2.4; }
.sc-graph .sc-failed rect { fill: #fee2e2; stroke: #b91c1c; stroke-dasharray: 4 3; }
.sc-graph .sc-edge path { fill: none; stroke: #6b7280; stroke-width: 1.3; }
.sc-graph .sc-edge .sc-label { fill: #ffffff; fill-opacity: .92; stroke: none; }
.sc-graph .sc-edge text { font-size: 11px; fill: #374151; }
.sc-graph .sc-edge.sc-failed path { stroke: #b91c1c; stroke-width: 2; stroke-dasharray: 5 3; }
.sc-graph .sc-edge.sc-failed text { fill: #b91c1c; font-weight: 700; }
.sc-graph .sc-output.sc-failed rect { fill: #fee2e2; stroke: #b91c1c; stroke-width: 2.4; }
.sc-graph a .sc-name { text-decoration: underline; }
.sc-graph .sc-legend text { font-size: 11px; }
</style></defs>"""
