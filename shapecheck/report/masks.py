"""The report's masks: each function of positions as written, and as a small picture of its
table at chosen sizes, in the study note's words (a row per query, a column per key)."""

from __future__ import annotations

from dataclasses import dataclass

from ..check.program import Program
from ..messages.diagnostics import line_starts, span_text
from .templates import text

# The words of a proof's outcome (docs/language.md §10.2).
_STATUS = {"proved": "mask_proved", "refuted": "mask_refuted", "undetermined": "mask_undetermined"}
# Sizes the report draws a mask at, for a dim not bound by `--dim`: small enough to read,
# large enough to show an offset and a window.
DRAWN_SIZE = 6
MAX_DRAWN = 24  # a bound size larger than this is drawn at DRAWN_SIZE instead
SEEN, HIDDEN, DEPENDS = "■", "·", "?"


@dataclass(frozen=True)
class MaskCard:
    name: str
    kind: str  # "mask" or "score"
    source: str  # the definition as written
    lengths: str  # "queries N, keys M"
    sizes: str  # the sizes the picture is drawn at ("" for a score change)
    picture: tuple[str, ...]  # a row per query: SEEN, HIDDEN or DEPENDS per key
    explanation: str
    findings: tuple[tuple[str, str], ...]  # (property in words, proved/refuted/undetermined)
    rows: tuple[str, ...] = ()  # what each query may see at the drawn sizes, in words


def mask_cards(program: Program, bindings: dict[str, int]) -> list[MaskCard]:
    model = program.masks
    if model is None:
        return []
    starts = line_starts(program.source)
    drawn = {n: v for n, v in bindings.items() if v <= MAX_DRAWN}
    cards = []
    for function in model.functions.values():
        source = span_text(program.source, starts, function.definition.span)
        findings = tuple(dict.fromkeys(  # a property claimed and implied by a convention: once
            (f.text, text(_STATUS[f.outcome.status])) for f in model.findings
            if f.function == function.name))
        question = function.question
        if question is None or function.kind != "mask":
            cards.append(MaskCard(function.name, function.kind, source, "", "", (),
                                  text("mask_score_explained"), findings))
            continue
        queries, keys = question.lengths()
        used, rows = question.table(drawn, DRAWN_SIZE)
        picture = tuple("".join(SEEN if c else DEPENDS if c is None else HIDDEN for c in row)
                        for row in rows)
        sizes = ", ".join(f"{n}={v}" for n, v in sorted(used.items()))
        cards.append(MaskCard(function.name, function.kind, source,
                              text("mask_lengths", queries=queries, keys=keys), sizes, picture,
                              text("mask_explained", seen=SEEN, hidden=HIDDEN, depends=DEPENDS),
                              findings, tuple(_row_words(i, row) for i, row in enumerate(rows))))
    return cards


def _row_words(query: int, row: list[bool | None]) -> str:
    """`query 3 may see keys 1-3`: the keys a row lets through (or may, as inputs decide)."""
    seen = [j for j, cell in enumerate(row) if cell is not False]
    if not seen:
        return text("mask_row_none", query=query)
    runs: list[list[int]] = []
    for j in seen:
        if runs and runs[-1][-1] == j - 1:
            runs[-1].append(j)
        else:
            runs.append([j])
    keys = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)
    key = "mask_row_depends" if any(row[j] is None for j in seen) else "mask_row"
    return text(key, query=query, keys=keys)
