"""What the language server knows about one document, computed by the checker.

:class:`Documents` keeps, per open document, the checked program of its latest
text. It never copies the checker: a text is parsed by the parser (reusing the
statements that did not change), then checked by :func:`shapecheck.api.check_parsed`
with the settings found for the document's path (:mod:`shapecheck.config`), so
suppression and rule selection are exactly those of ``verify``.

**Incremental work.** A spec is a list of statements split the way the grammar
splits them (``parser.split_statements``). A statement whose text did not change is
not parsed again: its syntax tree is reused, its line numbers shifted when lines
were inserted or removed above it. Only when a statement's brackets do not balance
(where the splitter's guess and the grammar could disagree) is the whole text parsed
as ``verify`` parses it. Checking reuses, through the document's
:class:`~shapecheck.incremental.Memo`, what checking an unchanged statement did when
nothing it reads has changed.

Positions: shapecheck's spans are 1-based lines split on ``\\n`` and 1-based
columns in code points; the protocol's are 0-based lines and columns in the code
units the client and server agreed on (UTF-16 unless told otherwise).
:class:`Positions` converts between them.
"""

from __future__ import annotations

import dataclasses
import gc
import re
from collections.abc import Iterator, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..records import Record
from ..syntax import nodes
from ..messages.diagnostics import Diagnostic, Span, line_starts
from ..passes.incremental import Memo
from ..syntax.parser import Chunk, ParseResult, parse, parse_chunk, split_statements
from ..check.program import Program

_NAME = re.compile(r"[^\W\d]\w*")


# --- positions ------------------------------------------------------------------------------


class Positions:
    """Converts between shapecheck's (line, column) and the protocol's (line, character)."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.lines = text.split("\n")
        self.encoding = encoding.lower().replace("_", "-")

    def _units(self, text: str) -> int:
        if self.encoding == "utf-8":
            return len(text.encode("utf-8", "surrogatepass"))
        if self.encoding == "utf-32":
            return len(text)
        return len(text.encode("utf-16-le", "surrogatepass")) // 2

    def to_client(self, line: int, column: int) -> tuple[int, int]:
        """1-based (line, code-point column) -> 0-based (line, client units)."""
        if line > len(self.lines):
            return len(self.lines), 0
        if line < 1:
            return 0, 0
        text = self.lines[line - 1]
        return line - 1, self._units(text[:max(0, column - 1)])

    def from_client(self, line: int, character: int) -> tuple[int, int]:
        """0-based (line, client units) -> 1-based (line, code-point column), clamped."""
        if line >= len(self.lines):
            return len(self.lines), len(self.lines[-1]) + 1
        text = self.lines[max(0, line)]
        units = 0
        for index, char in enumerate(text):
            if units >= character:
                return line + 1, index + 1
            units += self._units(char)
        return line + 1, len(text) + 1


# --- incremental parsing -----------------------------------------------------------------------


def _balanced(text: str) -> bool:
    depth = 0
    for token in re.finditer(r"#[^\n]*|\"[^\"\n]*\"?|'[^'\n]*'?|[()\[\]]", text):
        value = token.group()
        if value in "([":
            depth += 1
        elif value in ")]":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _shift(value: Any, lines: int) -> Any:
    """A diagnostic (or span, or tuple of them) moved down by ``lines``: a new value."""
    if isinstance(value, Span):
        return Span(value.line + lines, value.column, value.end_line + lines, value.end_column)
    if isinstance(value, tuple):
        return tuple(_shift(item, lines) for item in value)
    if isinstance(value, list):
        return [_shift(item, lines) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _shift(getattr(value, f.name), lines)
                   for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value


def _move(statement: nodes.Stmt, lines: int) -> None:
    """Move a statement's syntax tree down by ``lines``, in place (its nodes keep their
    identity: side tables and the incremental checker key them by ``id``)."""
    stack: list[Any] = [statement]
    while stack:
        node = stack.pop()
        if type(node) is tuple:
            stack.extend(node)
            continue
        spans, children = _fields(type(node))
        for slot in spans:
            span = getattr(node, slot)
            setattr(node, slot, Span(span[0] + lines, span[1], span[2] + lines, span[3]))
        for slot in children:
            value = getattr(node, slot)
            if type(value) is Span:
                setattr(node, slot, _down(value, lines))
            elif type(value) is tuple:
                stack.extend(item for item in value if item is not None)
            elif value is not None:
                stack.append(value)


_FIELDS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def _fields(kind: type) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A node class's fields that hold a span, and those that may hold nodes (a node,
    a tuple of nodes, or None); other fields hold names, numbers and flags."""
    found = _FIELDS.get(kind)
    if found is None:
        spans: list[str] = []
        children: list[str] = []
        for item in dataclasses.fields(kind) if dataclasses.is_dataclass(kind) else ():
            if item.type == "Span":
                spans.append(item.name)
            elif item.type not in _PLAIN:
                children.append(item.name)
        found = _FIELDS[kind] = (tuple(spans), tuple(children))
    return found


_PLAIN = frozenset({"str", "int", "float", "bool", "tuple[str, ...]"})


class _Parsed(Record):
    text: str  # the statement's text (a chunk of the document's)
    column: int
    line: int
    offset: int  # where it starts in the document's text
    statement: nodes.Stmt
    problem: Diagnostic | None
    parsed: bool = False  # parsed by the parse that made it (for ``reused``)


class IncrementalParser:
    """Parses a document again and again, reusing the statements that did not change.

    The text is compared with the last one: the statements before the first changed
    character are kept as they are; the text is split again from the start of the line
    of the last of them that begins a line, until a statement starts on a line whose
    line break is in the unchanged end of the text at the place an old statement
    started (from there the split is the old one, moved); only the statements whose
    text is new in between are parsed. Moved statements keep their trees, moved in place.
    """

    def __init__(self) -> None:
        self._text: str | None = None
        self._entries: list[_Parsed] = []
        self.reused = 0  # statements not parsed again in the last parse (for tests)

    def parse(self, text: str) -> ParseResult:
        old, entries = self._text, self._entries
        self._text, self._entries = None, []  # until this parse succeeds
        if old is None:
            old, entries = "", []
        prefix = _common_prefix(old, text)
        tail_from = len(text) - _common_suffix(old, text, prefix)
        # Kept as they are: the statements before the last one that starts a line at or
        # before the first change (the split is redone from that line's start).
        keep: int | None = None
        for index, entry in enumerate(entries):
            if entry.offset > prefix:
                break
            if not old[entry.offset - entry.column + 1:entry.offset].strip():
                keep = index
        if keep is None:  # the change is above every statement: split it all again
            keep, restart, line = 0, 0, 1
        else:
            restart = entries[keep].offset - entries[keep].column + 1
            line = entries[keep].line
        delta = len(text) - len(old)
        old_starts = {entry.offset: index for index, entry in enumerate(entries)}
        body = text[restart:]
        starts = line_starts(body)
        scanned: list[tuple[Chunk, int]] = []
        aligned = len(entries)
        moved = 0
        for chunk in split_statements(body):
            start = restart + starts[chunk.line - 1]
            offset = start + chunk.column - 1
            found = old_starts.get(offset - delta)
            if found is not None and found >= keep and start - 1 >= tail_from:
                # From here the text, and so the split, is the old one, moved.
                aligned, moved = found, line + chunk.line - 1 - entries[found].line
                break
            if not _balanced(chunk.text):
                self.reused = 0
                return parse(text)  # exactly what `verify` does
            if line != 1:
                chunk = dataclasses.replace(chunk, line=chunk.line + line - 1,
                                            span=_down(chunk.span, line - 1))
            scanned.append((chunk, offset))
        # A statement whose text comes back (lines swapped, a line moved) is reused too.
        window: dict[tuple[str, int], list[_Parsed]] = {}
        for entry in entries[keep:aligned]:
            window.setdefault((entry.text, entry.column), []).append(entry)
        fresh = [self._take(chunk, offset, window) for chunk, offset in scanned]
        kept = entries[:keep] + fresh + [_moved(entry, moved, delta)
                                         for entry in entries[aligned:]]
        self.reused = len(kept) - sum(1 for entry in fresh if entry.parsed)
        for entry in fresh:
            entry.parsed = False
        self._text, self._entries = text, kept
        return ParseResult([entry.statement for entry in kept],
                           [entry.problem for entry in kept if entry.problem is not None])

    def _take(self, chunk: Chunk, offset: int,
              window: dict[tuple[str, int], list[_Parsed]]) -> _Parsed:
        """The chunk parsed, or an old statement of the same text moved to it."""
        reusable = window.get((chunk.text, chunk.column))
        if reusable:
            entry = reusable.pop()
            return _moved(entry, chunk.line - entry.line, offset - entry.offset)
        statement, problem = parse_chunk(chunk)
        return _Parsed(chunk.text, chunk.column, chunk.line, offset, statement, problem,
                       parsed=True)


def _moved(entry: _Parsed, lines: int, offset: int) -> _Parsed:
    """The entry of a statement whose text moved by ``lines`` and ``offset`` characters."""
    if not lines and not offset:
        return entry
    if lines:
        _move(entry.statement, lines)
    return _Parsed(entry.text, entry.column, entry.line + lines, entry.offset + offset,
                   entry.statement, _shift(entry.problem, lines) if lines else entry.problem)


def _down(span: Span, lines: int) -> Span:
    return Span(span.line + lines, span.column, span.end_line + lines, span.end_column)



def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common beginning of ``a`` and ``b``."""
    low, high = 0, min(len(a), len(b))
    while low < high:  # compares halves in C: a few dozen slices for any text
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, prefix: int) -> int:
    """The length of the longest common end of ``a`` and ``b`` not overlapping ``prefix``."""
    low, high = 0, min(len(a), len(b)) - prefix
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle:len(a) - low] == b[len(b) - middle:len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low


# --- one document -------------------------------------------------------------------------------


class Analysis(Record):
    """A document's text at one version, and what the checker made of it."""

    uri: str
    version: int | None
    text: str
    program: Program
    parsed: ParseResult
    dims: Mapping[str, int] = field(default_factory=dict)  # the configuration's [dims]
    ignore: frozenset[str] = frozenset()
    config_problem: str | None = None
    _bound: Program | None = None

    def bound(self) -> Program | None:
        """The program checked at the configured dims (None without any)."""
        if not self.dims:
            return None
        if self._bound is None:
            from ..loader import check_parsed

            self._bound = check_parsed(self.text, self.parsed, None, defaults=self.dims,
                                       warn_unknown_bindings=False, ignore=self.ignore)
        return self._bound

    def name_at(self, line: int, column: int) -> tuple[str, Span] | None:
        """The name under (line, column), outside comments and strings."""
        lines = self.text.split("\n")
        if not 1 <= line <= len(lines):
            return None
        text = lines[line - 1]
        from ..messages.suppress import comment_start

        comment = comment_start(text)
        for match in _NAME.finditer(text):
            if match.start() + 1 <= column <= match.end() + 0 + 1 and (
                    comment is None or match.start() < comment):
                if _inside_string(text, match.start()):
                    return None
                return match.group(), Span(line, match.start() + 1, line, match.end() + 1)
        return None


def _inside_string(line: str, index: int) -> bool:
    quote: str | None = None
    for char in line[:index]:
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
    return quote is not None


def path_of(uri: str) -> Path | None:
    """The file a ``file:`` URI names (None for other schemes)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path))


class Documents:
    """The open documents and the analysis of each one's latest text."""

    def __init__(self) -> None:
        self._parsers: dict[str, IncrementalParser] = {}
        self._memos: dict[str, Memo] = {}
        self._latest: dict[str, Analysis] = {}

    def close(self, uri: str) -> None:
        self._parsers.pop(uri, None)
        self._memos.pop(uri, None)
        self._latest.pop(uri, None)

    def latest(self, uri: str) -> Analysis | None:
        return self._latest.get(uri)

    def analyse(self, uri: str, text: str, version: int | None) -> Analysis:
        """Check ``text`` (the document's content at ``version``), reusing what can be."""
        current = self._latest.get(uri)
        if current is not None and current.version == version and current.text == text:
            return current
        from ..loader import check_parsed

        settings, problem = settings_of(uri)
        path = path_of(uri)
        ignore = settings.disabled(path) if settings is not None else frozenset()
        dims = dict(settings.dims) if settings is not None else {}
        parser = self._parsers.setdefault(uri, IncrementalParser())
        # As check_text does: the trees hold no cycles worth collecting, and a full
        # collection walks every live node of every open document.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            parsed = parser.parse(text)
        finally:
            if was_enabled:
                gc.enable()
        try:
            program = check_parsed(text, parsed, None, warn_unknown_bindings=False,
                                   ignore=ignore, memo=self._memos.setdefault(uri, Memo()))
        except Exception as error:  # a bug in the checker: a diagnostic, never a dead server
            program = _internal(text, path, error)
        analysis = Analysis(uri, version, text, program, parsed, dims, ignore, problem)
        self._latest[uri] = analysis
        return analysis

    def __iter__(self) -> Iterator[str]:
        return iter(self._latest)


def settings_of(uri: str) -> tuple[Any, str | None]:
    """The settings for the document (found afresh: a configuration edited meanwhile
    counts), and the text of a configuration error (then the defaults apply)."""
    from ..config import ConfigError, Finder, Settings

    path = path_of(uri)
    try:
        finder = Finder(cwd=path.parent if path is not None else None)
        return finder.settings_for(path if path is not None else Path.cwd() / "untitled.attn"), None
    except ConfigError as error:
        return Settings(root=Path.cwd()), str(error)
    except OSError:
        return Settings(root=Path.cwd()), None


def _internal(text: str, path: Path | None, error: Exception) -> Program:
    from ..messages import codes
    from ..symbolic import DimSystem

    described = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    diagnostic = codes.INTERNAL.diag(Span(1, 1, 1, 1), path=str(path or "<document>"),
                                     error=described)
    return Program(source=text, statements=[], dims=DimSystem(), diagnostics=[diagnostic])
