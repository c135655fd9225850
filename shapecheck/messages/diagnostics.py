"""Spans and diagnostics: the data every pass produces and every format renders.

A diagnostic is plain data. Its text comes from the code registry
(:mod:`shapecheck.codes`); the passes only choose a code and fill in fields.
"""

from __future__ import annotations

import re
from dataclasses import field
from enum import Enum
from functools import cache

from ..records import NamedTuple, Record


class Span(NamedTuple):
    """A source range: 1-based line and column, end column exclusive.

    A named tuple rather than a dataclass: spans are built for every token
    and node, and tuples are the cheapest immutable record to build.
    """

    line: int
    column: int
    end_line: int
    end_column: int

    def to(self, other: Span) -> Span:
        """The span from the start of ``self`` to the end of ``other``."""
        return Span(self.line, self.column, other.end_line, other.end_column)

    def contains(self, inner: Span) -> bool:
        """``inner`` lies wholly inside ``self``."""
        return (self.line, self.column) <= (inner.line, inner.column) \
            and (inner.end_line, inner.end_column) <= (self.end_line, self.end_column)


def line_starts(text: str) -> list[int]:
    """The offset where each line of ``text`` starts (line 1 at index 0)."""
    starts = [0]
    index = text.find("\n")
    while index >= 0:
        starts.append(index + 1)
        index = text.find("\n", index + 1)
    return starts


def span_text(source: str, starts: list[int], span: Span) -> str:
    """The text ``span`` covers in ``source`` (``starts`` its :func:`line_starts`), its
    whitespace runs (line breaks included) made single spaces."""
    start = starts[span.line - 1] + span.column - 1
    end = starts[span.end_line - 1] + span.end_column - 1
    return " ".join(source[start:end].split())


# A rebound tensor's earlier versions are named `att′1`, `att′2`, ... (shapecheck.versions);
# the mark cannot be written in a spec, and every message shows a version by its name.
VERSION_MARK = "′"


@cache  # compiled on first use: most runs never need it (issue 36)
def _version() -> re.Pattern[str]:
    return re.compile(VERSION_MARK + r"\d+")


def shown(text: str) -> str:
    """``text`` with each version of a name written as the name (`att′1` -> `att`)."""
    return _version().sub("", text) if VERSION_MARK in text else text


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


class Note(Record, frozen=True, slots=True):
    """A secondary location with a message ("`Q` declared here as [N, d]")."""

    message: str
    span: Span | None = None


class Edit(Record, frozen=True, slots=True):
    """Replace the text of ``span`` (1-based lines, character columns, end
    exclusive, in the file as read) with ``replacement``; an empty span inserts."""

    span: Span
    replacement: str


class Fix(Record, frozen=True, slots=True):
    """A `help:` suggestion that is an exact edit of the spec.

    ``help`` is the help line it belongs to (one of ``Diagnostic.help``). A fix
    is attached only after the edited spec was re-checked and the diagnostic it
    fixes is gone; ``safe`` fixes are the ones `verify --fix` applies without
    being asked twice (a rename of a misspelled name, `K` -> `K.T`, a missing
    constraint), the others are offered to editors and SARIF only.
    """

    help: str
    edits: tuple[Edit, ...]
    safe: bool = True


class Diagnostic(Record, frozen=True, slots=True):
    """One problem. ``counterexample`` holds, for a claim about dims that was refuted
    ("fails at D_model=1, H=2"), the sizes where it fails: (dim name, size) pairs,
    sorted by name; empty otherwise."""

    code: str
    severity: Severity
    message: str
    span: Span
    notes: tuple[Note, ...] = ()
    help: tuple[str, ...] = ()
    fixes: tuple[Fix, ...] = ()
    counterexample: tuple[tuple[str, int], ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


MAX_DIAGNOSTICS = 200  # per file: past that, SC004 says the checker stopped


class DiagnosticSink(Record, slots=True):
    """Collects diagnostics for one file, capping runaway counts."""

    limit: int = MAX_DIAGNOSTICS
    items: list[Diagnostic] = field(default_factory=list)
    dropped: int = 0
    # One statement written as several (`q, k, v = split(...)`: one part each) reports
    # the same problem once.
    seen: set[tuple[str, Span, str]] = field(default_factory=set)

    def add(self, diagnostic: Diagnostic) -> None:
        key = (diagnostic.code, diagnostic.span, diagnostic.message)
        if key in self.seen:
            return
        self.seen.add(key)
        if len(self.items) >= self.limit:
            self.dropped += 1
            return
        self.items.append(diagnostic)

    def extend(self, diagnostics: list[Diagnostic]) -> None:
        for diagnostic in diagnostics:
            self.add(diagnostic)

    @property
    def full(self) -> bool:
        return len(self.items) >= self.limit

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.items, key=lambda d: (d.span.line, d.span.column))


class InferredNames(NamedTuple):
    """What a file uses without declaring it and inference supplied (a sketch): the
    tensors (their shapes are in ``FileResult.shapes``), the dims, and the declarations
    that state them, one pasteable line each."""

    tensors: tuple[str, ...] = ()
    dims: tuple[str, ...] = ()
    declarations: tuple[str, ...] = ()


class FileResult(Record, slots=True):
    """What `verify` knows about one file, ready for any output format.

    ``shapes`` maps every tensor whose shape is known to its dims, each printed
    in the spec's own notation (``["N", "H*d"]``); ``inferred`` says which of them
    (and which dims) were inferred rather than declared. ``covered``: what a Python target
    that is a whole model checked, and what it did not trace, one sentence (the text
    format prints it above the verdict).
    """

    path: str
    source: str | None
    diagnostics: list[Diagnostic]
    shapes: dict[str, list[str]] = field(default_factory=dict)
    inferred: InferredNames = InferredNames()
    covered: str | None = None

    @property
    def errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity is Severity.ERROR)

    @property
    def warnings(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity is Severity.WARNING)
