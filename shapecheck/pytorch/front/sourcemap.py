"""`verify` of a Python target: check the traced spec, report at the Python lines.

:func:`check` is what :mod:`shapecheck.lint` calls for ``model.py:Class``: every pass runs
on the spec :func:`shapecheck.torchfront.extract` writes, unchanged; each diagnostic then
moves to the Python line its statement came from (a file result per Python file, with
that file's text, so every format frames the Python line), its help says the fix in
PyTorch terms where it is a source change, and the spec's own edits (fixes of `.attn`
text) are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ...messages import codes
from ...messages.diagnostics import Diagnostic, FileResult, Note, Span, shown
from . import Extraction, ExtractError, Untraceable, display, extract
from .errors import Location, python_source

if TYPE_CHECKING:
    from ...check.program import Program

#: Where in the Python line a code points: the first of these words found there.
ANCHORS: dict[str, tuple[str, ...]] = {
    "SC402": ("softmax", "@", "matmul", "einsum"),
    "SC404": ("sqrt", "**", "*", "/"),
    "SC405": ("@", "matmul"),
    "SC406": ("masked_fill", "where", "*"),
    "SC407": ("masked_fill", "where", "tril"),
    "SC408": ("masked_fill", "where"),
    "SC410": ("masked_fill", "where"),
    "SC411": ("view", "reshape"),
    "SC417": ("masked_fill", "where", "tril", "triu"),
    "SC602": (),
}


def check(target: str, init: tuple[str, ...] | list[str] = (),
          bindings: Mapping[str, int] | None = None,
          ignore: Collection[str] = ()) -> list[FileResult]:
    """Trace TARGET and check it; one result per Python file with diagnostics (the module's
    own file first, always present)."""
    return traced(target, init, bindings, ignore).results


@dataclass
class Traced:
    """A Python target checked: its results, and what the editor shows on a line."""

    results: list[FileResult]
    # (absolute path, line) -> each tensor the traced spec computes there: (name, shape)
    shapes: dict[tuple[str, int], list[tuple[str, str]]] = field(default_factory=dict)
    # the spec's size and shape errors PyTorch contradicts (lowering defects, not shown)
    contradicted: list[Diagnostic] = field(default_factory=list)
    program: Program | None = None  # the traced spec, checked
    unconfirmed: int = 0  # size or shape errors PyTorch could not run (shown as notes)


def traced(target: str, init: tuple[str, ...] | list[str] = (),
           bindings: Mapping[str, int] | None = None,
           ignore: Collection[str] = ()) -> Traced:
    """:func:`check`, and the traced shapes of each Python line (the editor's hover)."""
    import contextlib
    import sys

    # A model prints as it is built ("number of parameters"): never into verify's output.
    with contextlib.redirect_stdout(sys.stderr):
        return _traced(target, init, bindings, ignore)


def _traced(target: str, init: tuple[str, ...] | list[str],
            bindings: Mapping[str, int] | None, ignore: Collection[str]) -> Traced:
    from .model import check_model
    from .target import build

    try:
        try:
            import torch  # noqa: F401
        except ImportError:
            raise ExtractError("no_torch") from None
        built = build(target, init)
        whole = check_model(built, target, bindings, ignore)  # a model holding attention layers
        if whole is not None:
            return whole
        extraction = extract(target, init, built)
    except ExtractError as error:
        path = target.rpartition(":")[0] or target
        return Traced([FileResult(path, None, [codes.TARGET_FAILED.diag(
            Span(1, 1, 1, 1), target=target, reason=str(error))])])
    except Untraceable as failed:
        location = failed.location
        path = location.path if location else target.rpartition(":")[0]
        diagnostic = codes.UNTRACEABLE.diag(Span(1, 1, 1, 1), target=target, reason=failed.reason)
        results = Results(path)
        results.add(location, diagnostic, (), None)
        return Traced(results.finish())
    return check_extraction(extraction, target, bindings, ignore)


def check_extraction(extraction: Extraction, target: str,
                     bindings: Mapping[str, int] | None = None,
                     ignore: Collection[str] = ()) -> Traced:
    """Check a traced module's spec: its diagnostics at their Python lines, and the traced
    shapes of each line."""
    from ...loader import check_text

    # SC401 is the spec's own word: on a module, what is "declared" is what its caller
    # passes and what it holds (a model's `position_ids`, a flag, a buffer); not reading one
    # is the module's interface, not a mistake in it (docs/torch.md).
    ignore = frozenset(ignore) | {"SC401"}
    program = check_text(extraction.text, dict(bindings or {}), warn_unknown_bindings=False,
                         ignore=ignore, infer=False)
    from .confirm import confirm

    results = Results(extraction.main_file or target.rpartition(":")[0])
    statements = extraction.text.splitlines()
    # a size or shape error is shown only as PyTorch confirms it (docs/torch.md)
    confirmed = confirm(extraction, program)
    for diagnostic in confirmed.shown:
        primary = _primary_line(diagnostic, statements)
        location = extraction.lines.get(primary)
        # the statement the diagnostic is reported at (a mask's at its function's `def`)
        line = primary if diagnostic.code in MASK_CODES else diagnostic.span.line
        spec_line = statements[line - 1] if 0 < line <= len(statements) else ""
        # a note keeps its Python line when that line is in the diagnostic's own file
        lines = {n.span.line: extraction.lines.get(n.span.line) for n in diagnostic.notes
                 if n.span is not None and location is not None
                 and getattr(extraction.lines.get(n.span.line), "path", None) == location.path}
        shown_there = _with_callers(_in_torch_terms(diagnostic, spec_line, lines), location)
        shown_there = _with_source_notes(shown_there, location)
        results.add(location, shown_there, ANCHORS.get(diagnostic.code, ()), extraction)
    if "SC414" not in ignore:  # what a helper documents, checked by running it
        from .documented import findings

        for location, diagnostic in findings(extraction):
            results.add(location, diagnostic, (), extraction)
    for location, diagnostic in extraction.lowered.findings:  # SC613: found while lowering
        if diagnostic.code not in ignore:
            results.add(location, diagnostic, (), extraction)
    for operator, location, name in extraction.unknown:
        if "SC602" in ignore:
            continue
        results.add(location, codes.UNKNOWN_OPERATOR.diag(Span(1, 1, 1, 1), operator=operator,
                                                          name=name or "?"), (), None)
    main = results.finish()
    main[0].shapes = program.shapes()
    return Traced(main, _line_shapes(extraction, program), confirmed.contradicted, program,
                  confirmed.unconfirmed)


def _line_shapes(extraction: Extraction, program: Program) -> dict[tuple[str, int],
                                                                   list[tuple[str, str]]]:
    found: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for name, tensor in program.tensors.items():
        location = extraction.lines.get(tensor.name_span.line)
        if location is not None and tensor.kind == "defined" and tensor.value.known:
            found.setdefault((location.path, location.line), []).append(
                (shown(name), tensor.value.text()))
    return found


def _primary_line(diagnostic: Diagnostic, statements: list[str]) -> int:
    """The spec line a diagnostic is reported at in Python: a softmax over the wrong axis
    (SC402) at its softmax, where the fix (`dim=-1`) is written; with the softmax over the
    last axis, the mistake is the product's (`P.transpose(-2, -1) @ V`). Rotary applied
    to V (SC413) at the line that rotates V, which is what the fix deletes."""
    if diagnostic.code in MASK_CODES:
        found = _in_function(diagnostic, statements)
        if found is not None:
            return found
    if diagnostic.code == "SC413":
        for note in diagnostic.notes:
            if note.span is not None and 0 < note.span.line <= len(statements):
                return note.span.line
    if diagnostic.code == "SC402":
        for note in diagnostic.notes:
            if note.span is not None and 0 < note.span.line <= len(statements):
                line = statements[note.span.line - 1]
                if "softmax(" in line and "axis=-1)" not in line:
                    return note.span.line
    return diagnostic.span.line


#: Codes about a mask: at a FlexAttention function's own line when it comes from one.
MASK_CODES = frozenset({"SC407", "SC408", "SC412", "SC417", "SC430", "SC431", "SC432",
                        "SC433"})


def _in_function(diagnostic: Diagnostic, statements: list[str]) -> int | None:
    """The spec line of the function of positions (a `mask_mod`, a `score_mod`, written as
    `def`) a mask diagnostic is about: the one its note points into (the comparison the
    meaning pass found), else the mask `flex_attention` applies on its line (SC433)."""
    for note in diagnostic.notes:
        line = note.span.line if note.span is not None else 0
        if 0 < line <= len(statements) and statements[line - 1].startswith("def "):
            return line
    line = diagnostic.span.line
    applied = re.search(r"\bmask=(\w+)", statements[line - 1]) if \
        0 < line <= len(statements) else None
    if applied is not None:
        for number, text in enumerate(statements, 1):
            if text.startswith(f"def {applied.group(1)}("):
                return number
    return None


def _in_torch_terms(diagnostic: Diagnostic, spec_line: str,
                    note_lines: Mapping[int, Location | None] | None = None) -> Diagnostic:
    statement = spec_line.split("  # ")[0].strip()
    helps: list[str] = []
    torch_help = codes.TORCH_HELPS.get(_variant(diagnostic)) or codes.TORCH_HELPS.get(diagnostic.code)
    if statement.startswith("def ") and diagnostic.code in ("SC407", "SC408"):
        torch_help = codes.TORCH_HELPS["mask_mod"]
    if statement.startswith("def ") and diagnostic.code == "SC417":
        torch_help = codes.TORCH_HELPS["SC417 mask_mod"]
    if torch_help is not None:
        helps.append(torch_help)
    helps.extend(codes.TORCH_HELPS["spec"].format(help=h) for h in diagnostic.help)
    notes = [Note(codes.TORCH_HELPS["traced_as"].format(statement=statement))] if statement \
        else []
    notes.extend(Note(n.message, _note_span(n, note_lines or {})) for n in diagnostic.notes)
    if diagnostic.code in NOTES_AT_THE_CALL:
        notes.extend(_note_callers(diagnostic.notes, note_lines or {}))
    return replace(diagnostic, help=tuple(helps), notes=tuple(notes), fixes=())


#: Codes whose notes name a statement inside a helper that its caller configures: the
#: softmax of `utils_softmax(x, dim=...)` (ESM, fairseq) normalises the axis the call passes.
NOTES_AT_THE_CALL = frozenset({"SC402"})


def _note_callers(notes: Sequence[Note], note_lines: Mapping[int, Location | None]) -> list[Note]:
    """A note at each line of the same file that called the helper a note's statement is in."""
    lines: list[int] = []
    for note in notes:
        location = note_lines.get(note.span.line) if note.span is not None else None
        lines += [line for line in (location.callers if location else ()) if line not in lines]
    return [Note(codes.TORCH_HELPS["called_here"], Span(line, 1, line, 1)) for line in lines]


#: Codes whose fix is where a helper is called, not inside it: a rotary helper is right,
#: the call that passes V or drops the rotated key is the bug.
AT_THE_CALL = frozenset({"SC413", "SC418"})


def _with_callers(diagnostic: Diagnostic, location: Location | None) -> Diagnostic:
    """A note at each line of the same file that called the helper the diagnostic is in."""
    if diagnostic.code not in AT_THE_CALL or location is None or not location.callers:
        return diagnostic
    notes = tuple(Note(codes.TORCH_HELPS["called_here"], Span(line, 1, line, 1))
                  for line in location.callers)
    return replace(diagnostic, notes=diagnostic.notes + notes)


#: Codes whose fix is on another line of the function or class than the traced statement,
#: found from the file's syntax tree (:mod:`.definitions`): where a scale the statement
#: reads was set (torch.export inlined the number: `self.scale = dim ** -0.5` in
#: `__init__`), where a traced `mask_mod` compares a value with itself (the trace maps its
#: whole body to its `return`). Code -> (the finder's name, the note's text).
SOURCE_NOTES = {"SC404": ("root_definitions", "scale_set_here"),
                "SC435": ("self_comparisons", "compared_here")}


def _with_source_notes(diagnostic: Diagnostic, location: Location | None) -> Diagnostic:
    """A note at each line :data:`SOURCE_NOTES` finds for the diagnostic's code."""
    found = SOURCE_NOTES.get(diagnostic.code)
    text = python_source(location.path) if found is not None and location is not None \
        else None
    if text is None or location is None or found is None:
        return diagnostic
    from . import definitions

    finder, message = found
    notes = tuple(Note(codes.TORCH_HELPS[message], Span(line, 1, line, 1))
                  for line in getattr(definitions, finder)(text, location.line))
    return replace(diagnostic, notes=diagnostic.notes + notes)


def _variant(diagnostic: Diagnostic) -> str:
    """The key of the torch help for the repair the spec's help names (`SC402
    drop_weights_transpose`: `P.T @ V`, whose softmax is right), else the code."""
    for key in VARIANTS.get(diagnostic.code, ()):
        head = codes.HELPS[key].split("{")[0]
        if any(h.startswith(head) for h in diagnostic.help):
            return f"{diagnostic.code} {key}"
    return diagnostic.code


#: per code, the spec helps that have a torch help of their own
VARIANTS: dict[str, tuple[str, ...]] = {"SC402": ("drop_weights_transpose",),
                                        "SC406": ("mask_before_softmax", "add_before_softmax"),
                                        "SC408": ("drop_negation",),
                                        "SC411": ("split_in_merge_order",)}


def _note_span(note: Note, note_lines: Mapping[int, Location | None]) -> Span | None:
    """A note's Python line (where the mask it names was built) as a span there, or None."""
    location = note_lines.get(note.span.line) if note.span is not None else None
    return None if location is None else Span(location.line, 1, location.line, 1)


class Results:
    """Diagnostics gathered per Python file."""

    def __init__(self, main: str) -> None:
        self.main = str(Path(main).resolve()) if main else main
        self.by_file: dict[str, list[Diagnostic]] = {self.main: []}
        self.texts: dict[str, str | None] = {}

    def add(self, location: Location | None, diagnostic: Diagnostic, anchors: tuple[str, ...],
            extraction: Extraction | None) -> None:
        path = location.path if location else self.main
        text = self._text(path)
        line = location.line if location else 1
        span = _span(text, line, anchors)
        self.by_file.setdefault(path, []).append(replace(diagnostic, span=span))

    def _text(self, path: str) -> str | None:
        if path not in self.texts:
            self.texts[path] = python_source(path)
        return self.texts[path]

    def finish(self) -> list[FileResult]:
        out: list[FileResult] = []
        for path, diagnostics in self.by_file.items():
            diagnostics.sort(key=lambda d: (d.span.line, d.span.column))
            out.append(FileResult(display(path), self._text(path), diagnostics))
        return out


def _span(text: str | None, line: int, anchors: tuple[str, ...]) -> Span:
    """The span of the Python statement on ``line`` (from its first character to the end
    of the line), or of the first anchor word found in it."""
    if text is None:
        return Span(line, 1, line, 1)
    lines = text.splitlines()
    if not 0 < line <= len(lines):
        return Span(max(line, 1), 1, max(line, 1), 1)
    source = lines[line - 1]
    code = source.split("#")[0].rstrip()
    start = len(code) - len(code.lstrip()) + 1
    for word in anchors:
        found = code.find(word, start - 1)
        if found >= 0:
            return Span(line, found + 1, line, found + 1 + len(word))
    return Span(line, start, line, max(len(code) + 1, start + 1))
