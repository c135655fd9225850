"""``shapecheck lsp``: a Language Server over stdio (pygls, lsprotocol).

Features, all read off the checked program of :mod:`shapecheck.lsp.analysis`:

- diagnostics on open and on every change (the configuration and ``# noqa`` apply);
  a change is checked once the messages already received are handled, so a burst of
  keystrokes costs one check, not one per keystroke;
- hover: the shape of the tensor, or what the dim is, under the cursor --
  symbolic, and at the configuration's ``[dims]`` when it has some;
- go to definition of a tensor or a dim;
- inlay hints: the shape of each statement that defines a tensor without annotating it;
- code actions: the fixes of the diagnostics in the range (``quickfix``);
- document symbols: dims and tensors with their shapes;
- on a Python file that holds a target: the traced checks when it is opened and saved, in a
  worker (:mod:`shapecheck.lsp.python`), with hover on a traced line and quick fixes that
  are verified source edits.

Positions follow the encoding negotiated at initialisation (UTF-16 by default).
Requests about a document that was never opened get an empty answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types

from .._version import __version__
from ..syntax import nodes
from ..check.builtins import BUILTINS
from ..messages.codes import REGISTRY
from ..messages.diagnostics import VERSION_MARK, Diagnostic, Severity, Span, shown
from ..i18n import Table
from ..check.program import Program
from ..symbolic import to_text
from .analysis import Analysis, Documents, Positions, path_of, settings_of
from .python import Outcome, Request, Tracer, targets_of

try:
    from pygls.lsp.server import LanguageServer
except ImportError:  # pragma: no cover - pygls 1.x
    from pygls.server import LanguageServer  # type: ignore[no-redef]

TEXT: Table = Table("lsp", "TEXT", {
    "input": "input",
    "param": "param",
    "defined": "tensor",
    "shape_at": "at {bindings}: `{shape}`",
    "dim_free": "free dim",
    "dim_fixed": "fixed dim: `{name} = {value}`",
    "dim_derived": "derived dim: `{name} = {definition}`",
    "dim_value": "`{name} = {value}` at the configured dims",
    "config_problem": "shapecheck: the configuration is not used: {problem}",
    "version": "this line's version of `{name}` (the name is rebound or written into)",
    "spelling": "**`{written}`** is the builtin `{builtin}`: {doc}",
    "traced": "traced on this line:",
})

SEVERITIES = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.NOTE: types.DiagnosticSeverity.Information,
}
SOURCE = "shapecheck"


class ShapecheckServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("shapecheck", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.documents = Documents()
        self.pending: set[str] = set()
        self.told: set[str] = set()  # configuration problems already shown
        self.collector = Collector()
        self.tracer = Tracer(self.publish_traced)
        self.named: list[str] = []  # targets the client names (initializationOptions)
        self.published: dict[str, set[str]] = {}  # traced file -> the URIs given diagnostics

    # --- helpers -------------------------------------------------------------------------

    def encoding(self) -> str:
        found = getattr(self.workspace, "position_encoding", None)
        return str(getattr(found, "value", found) or "utf-16")

    def text_of(self, uri: str) -> tuple[str, int | None] | None:
        document = self.workspace.text_documents.get(unquote(uri))
        if document is None:
            return None
        return document.source, document.version

    def analysis(self, uri: str) -> Analysis | None:
        """The analysis of the document's current text (checked now if it is stale); None
        for a Python file, which is traced, not read as a spec."""
        if is_python(uri):
            return None
        found = self.text_of(uri)
        if found is None:
            return None
        text, version = found
        return self.documents.analyse(uri, text, version)

    def check_and_publish(self, uri: str) -> None:
        self.pending.discard(uri)
        with self.collector.paused():
            self._check_and_publish(uri)

    def _check_and_publish(self, uri: str) -> None:
        analysis = self.analysis(uri)
        if analysis is None:
            return
        if analysis.config_problem and analysis.config_problem not in self.told:
            self.told.add(analysis.config_problem)
            self.window_show_message(types.ShowMessageParams(
                types.MessageType.Warning,
                TEXT["config_problem"].format(problem=analysis.config_problem)))
        positions = Positions(analysis.text, self.encoding())
        diagnostics = [lsp_diagnostic(d, uri, positions) for d in analysis.program.diagnostics]
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, diagnostics=diagnostics, version=analysis.version))

    def trace(self, uri: str) -> None:
        """Trace the targets a Python file holds, in a worker (none: nothing is shown)."""
        path = path_of(uri)
        if path is None:
            return
        settings, _ = settings_of(uri)
        configured = settings.modules_in(path) if settings is not None else []
        root = self.workspace.root_path
        targets = targets_of(path, configured, self.named, Path(root) if root else None)
        if not targets:
            return
        ignore = settings.disabled(path) if settings is not None else frozenset()
        # The bindings are verify's for a Python target: none unless asked (the trace's sizes).
        self.tracer.request(Request(str(path.resolve()), targets, {}, ignore),
                            asyncio.get_running_loop())

    def publish_traced(self, outcome: Outcome) -> None:
        """A trace's diagnostics, at the Python lines of each file; a file that had some from
        the last trace of the same file and has none now is cleared."""
        given = set()
        for path, diagnostics in outcome.diagnostics.items():
            uri = Path(path).as_uri()
            given.add(uri)
            positions = Positions(outcome.texts.get(path, ""), self.encoding())
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=[lsp_diagnostic(d, uri, positions) for d in diagnostics]))
        for uri in self.published.get(outcome.path, set()) - given:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=[]))
        self.published[outcome.path] = given

    def traced(self, uri: str) -> tuple[Outcome, str] | None:
        """The latest trace that reports on this file, if the document still holds the text
        it traced (positions and edits are that text's), with the file's path."""
        path = path_of(uri)
        found = self.text_of(uri)
        if path is None or found is None:
            return None
        key = str(path.resolve())
        for outcome in self.tracer.latest.values():
            if outcome.texts.get(key) == found[0]:
                return outcome, key
        return None

    def schedule(self, uri: str) -> None:
        """Check once the messages already received are handled (a burst of changes
        costs one check)."""
        if uri in self.pending:
            return
        self.pending.add(uri)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.check_and_publish(uri)
            return
        loop.call_soon(self.check_and_publish, uri)


class Collector:
    """When the cyclic garbage collector runs in the server.

    Python's collector scans every live object now and then, and a server holding the
    syntax trees and checked programs of large documents holds hundreds of thousands:
    left to itself it would scan them all every few changes (tens of milliseconds each
    time, on the way from a change to its diagnostics). Instead a check runs with the
    collector paused, and what exists after it is frozen (``gc.freeze``: not scanned by
    later collections). A frozen object is still freed as soon as nothing refers to it;
    only garbage *cycles* (a check leaves about a thousand small objects in them) wait
    for the full collection made every ``FULL_EVERY`` checks, which bounds them.
    """

    FULL_EVERY = 50

    def __init__(self) -> None:
        self.checks = 0

    @contextmanager
    def paused(self) -> Iterator[None]:
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            self.checks += 1
            if self.checks % self.FULL_EVERY == 0:
                gc.unfreeze()
                gc.collect()
            gc.freeze()
            if enabled:
                gc.enable()


server = ShapecheckServer()


# --- conversions ----------------------------------------------------------------------------


def lsp_range(span: Span, positions: Positions) -> types.Range:
    start = positions.to_client(span.line, span.column)
    end = positions.to_client(span.end_line, span.end_column)
    if end < start:
        end = start
    return types.Range(types.Position(*start), types.Position(*end))


def lsp_diagnostic(diagnostic: Diagnostic, uri: str, positions: Positions) -> types.Diagnostic:
    message = "\n".join([diagnostic.message, *(f"help: {line}" for line in diagnostic.help)])
    related = [
        types.DiagnosticRelatedInformation(
            types.Location(uri, lsp_range(note.span, positions)), note.message)
        for note in diagnostic.notes if note.span is not None
    ]
    message += "".join(f"\nnote: {note.message}" for note in diagnostic.notes if note.span is None)
    return types.Diagnostic(
        range=lsp_range(diagnostic.span, positions),
        message=message,
        severity=SEVERITIES[diagnostic.severity],
        code=diagnostic.code,
        source=SOURCE,
        related_information=related or None,
    )


# --- document sync --------------------------------------------------------------------------


def is_python(uri: str) -> bool:
    return unquote(uri).endswith(".py")


def _named_targets(settings: object) -> list[str] | None:
    """``{"targets": [...]}`` or ``{"shapecheck": {"targets": [...]}}``: the client's targets."""
    if isinstance(settings, dict) and isinstance(settings.get("shapecheck"), dict):
        settings = settings["shapecheck"]
    named = settings.get("targets") if isinstance(settings, dict) else None
    return [t for t in named if isinstance(t, str)] if isinstance(named, list) else None


@server.feature(types.INITIALIZE)
def initialize(ls: ShapecheckServer, params: types.InitializeParams) -> None:
    ls.named = _named_targets(params.initialization_options) or []


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: ShapecheckServer,
                             params: types.DidChangeConfigurationParams) -> None:
    """New targets from the client's settings: the open Python files are traced again."""
    named = _named_targets(params.settings)
    if named is None:
        return
    ls.named = named
    for uri in list(ls.workspace.text_documents):
        if is_python(uri):
            ls.trace(uri)


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: ShapecheckServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    if is_python(uri):
        ls.trace(uri)
    else:
        ls.check_and_publish(uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: ShapecheckServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: ShapecheckServer, params: types.DidSaveTextDocumentParams) -> None:
    uri = params.text_document.uri
    if is_python(uri):
        ls.trace(uri)  # the file on disk is what the trace imports: on save, never per keystroke
    else:
        ls.schedule(uri)  # a configuration may have changed meanwhile


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: ShapecheckServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.documents.close(uri)
    ls.pending.discard(uri)
    path = path_of(uri)
    if path is not None and is_python(uri):
        ls.tracer.cancel(str(path.resolve()), asyncio.get_running_loop())
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# --- hover, definition --------------------------------------------------------------------------


def _at(ls: ShapecheckServer, uri: str, position: types.Position
        ) -> tuple[Analysis, Positions, str, Span] | None:
    analysis = ls.analysis(uri)
    if analysis is None:
        return None
    positions = Positions(analysis.text, ls.encoding())
    line, column = positions.from_client(position.line, position.character)
    found = analysis.name_at(line, column)
    if found is None:
        return None
    return analysis, positions, found[0], found[1]


@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(ls: ShapecheckServer, params: types.HoverParams) -> types.Hover | None:
    if is_python(params.text_document.uri):
        return python_hover(ls, params.text_document.uri, params.position)
    found = _at(ls, params.text_document.uri, params.position)
    if found is None:
        return None
    analysis, positions, name, span = found
    text = hover_text(analysis, name, span)
    if text is None:
        return None
    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, text),
                       lsp_range(span, positions))


def hover_text(analysis: Analysis, name: str, span: Span | None = None) -> str | None:
    program = analysis.program
    bound = analysis.bound()
    found = _node_at(program.statements, span) if span is not None else None
    if isinstance(found, nodes.Call) and found.func.name in BUILTINS \
            and found.func.name != name:
        # a PyTorch spelling (`.transpose`, `F.softmax`): the builtin it is
        builtin = BUILTINS[found.func.name]
        return TEXT["spelling"].format(written=name, builtin=builtin.name, doc=builtin.doc)
    version = found.name if isinstance(found, (nodes.Name, nodes.Ident)) else name
    tensor = program.tensors.get(version) or program.tensors.get(name)
    if tensor is not None:
        name = version if version in program.tensors else name
        lines = [f"**`{shown(name)}`**: {TEXT[tensor.kind]} `{tensor.value.text()}`"]
        if VERSION_MARK in name or name != version or _is_rebound(program, name):
            lines.append(TEXT["version"].format(name=shown(name)))
        concrete = _concrete_shape(bound, name) if bound is not None else None
        if concrete is not None:
            lines.append(TEXT["shape_at"].format(bindings=_bindings(bound), shape=concrete))
        return "\n\n".join(lines)
    info = program.dims.dims.get(name)
    if info is None:
        return None
    if info.kind == "fixed":
        what = TEXT["dim_fixed"].format(name=name, value=program.dims.value_of(name))
    elif info.kind == "derived" and info.definition is not None:
        what = TEXT["dim_derived"].format(name=name, definition=to_text(info.definition))
    else:
        what = TEXT["dim_free"]
    lines = [f"**`{name}`**: {what}"]
    if bound is not None and info.kind != "fixed":
        value = bound.dims.value_of(name)
        if value is not None:
            lines.append(TEXT["dim_value"].format(name=name, value=value))
    return "\n\n".join(lines)


def python_hover(ls: ShapecheckServer, uri: str, position: types.Position) -> types.Hover | None:
    """On a traced line: the shapes the trace computed there, and each diagnostic with its
    help and the registry's explanation (what `shapecheck explain` says)."""
    found = ls.traced(uri)
    if found is None:
        return None
    outcome, path = found
    shapes, diagnostics = outcome.at(path, position.line + 1)
    if not shapes and not diagnostics:
        return None
    parts = []
    if shapes:
        parts.append(TEXT["traced"] + "\n\n" + "\n".join(f"- `{name}`: `{shape}`"
                                                       for name, shape in shapes))
    for diagnostic in diagnostics:
        code = REGISTRY.get(diagnostic.code)
        lines = [f"**{diagnostic.severity.value}[{diagnostic.code}]**: {diagnostic.message}",
                 *(f"help: {line}" for line in diagnostic.help)]
        if code is not None:
            lines.extend([code.text("what"), code.text("why")])
        parts.append("\n\n".join(lines))
    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, "\n\n---\n\n".join(parts)))


def _node_at(statements: list[nodes.Stmt], span: Span) -> object | None:
    """The name (or a spelling's call) that the checked statements hold at ``span``: a
    version of a rebound tensor is a name of its own there (:mod:`shapecheck.versions`)."""
    stack: list[object] = list(statements)
    while stack:
        current = stack.pop()
        if isinstance(current, (nodes.Name, nodes.Ident)) and current.span == span:
            return current
        if isinstance(current, nodes.Call) and current.func.span == span:
            return current
        if isinstance(current, (list, tuple)) and not isinstance(current, Span):
            stack.extend(current)
        elif dataclasses.is_dataclass(current) and not isinstance(current, (type, Span)):
            stack.extend(getattr(current, f.name) for f in dataclasses.fields(current))
    return None


def _is_rebound(program: Program, name: str) -> bool:
    return any(shown(other) == name and other != name for other in program.tensors)


def _concrete_shape(bound: Program, name: str) -> str | None:
    tensor = bound.tensors.get(name)
    if tensor is None or tensor.value.shape is None:
        return None
    values = [bound.dims.evaluate(dim) for dim in tensor.value.shape]
    if any(value is None for value in values):
        return None
    prefix = "bool" if tensor.value.is_bool else tensor.value.element  # `int[...]`, `complex[...]`
    return f"{prefix}[{', '.join(str(value) for value in values)}]"


def _bindings(bound: Program) -> str:
    return ", ".join(f"{name}={value}" for name, value in bound.dims.bindings.items())


@server.feature(types.TEXT_DOCUMENT_DEFINITION)
def definition(ls: ShapecheckServer, params: types.DefinitionParams) -> types.Location | None:
    found = _at(ls, params.text_document.uri, params.position)
    if found is None:
        return None
    analysis, positions, name, _ = found
    program = analysis.program
    span: Span | None = None
    if name in program.tensors:
        span = program.tensors[name].name_span
    elif name in program.dims.dims:
        span = program.dims.dims[name].span
    if span is None:
        return None
    return types.Location(params.text_document.uri, lsp_range(span, positions))


# --- inlay hints, symbols ---------------------------------------------------------------------------


@server.feature(types.TEXT_DOCUMENT_INLAY_HINT,
                types.InlayHintOptions(resolve_provider=False))
def inlay_hints(ls: ShapecheckServer, params: types.InlayHintParams) -> list[types.InlayHint]:
    analysis = ls.analysis(params.text_document.uri)
    if analysis is None:
        return []
    positions = Positions(analysis.text, ls.encoding())
    first, last = params.range.start.line + 1, params.range.end.line + 1
    hints = []
    for statement in analysis.program.statements:
        name = _unannotated_definition(statement)
        if name is None:
            continue
        tensor = analysis.program.tensors.get(name.name)
        if tensor is None or not tensor.value.known or tensor.name_span != name.span:
            continue
        if not first <= name.span.line <= last:
            continue
        line, character = positions.to_client(name.span.end_line, name.span.end_column)
        hints.append(types.InlayHint(
            position=types.Position(line, character), label=f": {tensor.value.text()}",
            kind=types.InlayHintKind.Type, padding_left=False, padding_right=True))
    return hints


def _unannotated_definition(statement: object) -> object | None:
    """The name a statement defines without a shape annotation (None otherwise)."""
    from ..syntax import nodes

    if isinstance(statement, nodes.Define) and statement.annotation is None:
        return statement.name
    if isinstance(statement, nodes.Output) and getattr(statement, "value", None) is not None \
            and getattr(statement, "annotation", None) is None:
        return statement.name
    return None


@server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
def document_symbols(ls: ShapecheckServer,
                     params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
    analysis = ls.analysis(params.text_document.uri)
    if analysis is None:
        return []
    positions = Positions(analysis.text, ls.encoding())
    program = analysis.program
    symbols: list[tuple[Span, types.DocumentSymbol]] = []
    statement_of = _statement_spans(program)
    for name, info in program.dims.dims.items():
        detail = to_text(info.definition) if info.definition is not None else TEXT["dim_free"]
        whole = statement_of.get(info.span, info.span)
        symbols.append((info.span, types.DocumentSymbol(
            name=name, kind=types.SymbolKind.TypeParameter, detail=detail,
            range=lsp_range(whole, positions), selection_range=lsp_range(info.span, positions))))
    for name, tensor in program.tensors.items():
        kind = types.SymbolKind.Variable if tensor.kind == "defined" else types.SymbolKind.Field
        symbols.append((tensor.name_span, types.DocumentSymbol(
            name=name, kind=kind, detail=f"{TEXT[tensor.kind]} {tensor.value.text()}",
            range=lsp_range(_containing(tensor.span, tensor.name_span), positions),
            selection_range=lsp_range(tensor.name_span, positions))))
    return [symbol for _, symbol in sorted(symbols, key=lambda item: (item[0].line,
                                                                       item[0].column))]


def _statement_spans(program: Program) -> dict[Span, Span]:
    """The span of the statement around each dim's declaration."""
    found: dict[Span, Span] = {}
    for info in program.dims.dims.values():
        for statement in program.statements:
            span = statement.span
            if (span.line, span.column) <= (info.span.line, info.span.column) and \
                    (info.span.end_line, info.span.end_column) <= (span.end_line, span.end_column):
                found[info.span] = span
                break
    return found


def _containing(outer: Span, inner: Span) -> Span:
    """``outer``, grown to contain ``inner`` (a symbol's range must hold its selection)."""
    start = min((outer.line, outer.column), (inner.line, inner.column))
    end = max((outer.end_line, outer.end_column), (inner.end_line, inner.end_column))
    return Span(start[0], start[1], end[0], end[1])


# --- code actions ------------------------------------------------------------------------------------


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
def code_actions(ls: ShapecheckServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    analysis = ls.analysis(uri)
    if analysis is not None:
        text, diagnostics = analysis.text, analysis.program.diagnostics
    elif (traced := ls.traced(uri)) is not None:  # a Python file: the trace's verified edits
        outcome, path = traced
        text, diagnostics = outcome.texts[path], outcome.diagnostics.get(path, [])
    else:
        return []
    positions = Positions(text, ls.encoding())
    actions = []
    for diagnostic in _in_range(diagnostics, params.range, positions):
        for fix in diagnostic.fixes:
            edits = [types.TextEdit(lsp_range(edit.span, positions), edit.replacement)
                     for edit in fix.edits]
            actions.append(types.CodeAction(
                title=fix.help, kind=types.CodeActionKind.QuickFix,
                diagnostics=[lsp_diagnostic(diagnostic, uri, positions)],
                edit=types.WorkspaceEdit(changes={uri: edits}), is_preferred=fix.safe))
    return actions


def _in_range(diagnostics: Iterable[Diagnostic], wanted: types.Range,
              positions: Positions) -> Iterable[Diagnostic]:
    start = (wanted.start.line, wanted.start.character)
    end = (wanted.end.line, wanted.end.character)
    for diagnostic in diagnostics:
        found = lsp_range(diagnostic.span, positions)
        if (found.start.line, found.start.character) <= end and \
                start <= (found.end.line, found.end.character):
            yield diagnostic


def serve() -> None:
    """Run the server on stdin/stdout until the client says exit."""
    logging.getLogger("pygls").setLevel(logging.WARNING)
    server.start_io()
