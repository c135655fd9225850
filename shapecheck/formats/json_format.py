"""The JSON format: the contract's document, plus each diagnostic's notes, help and
counterexample (a refuted claim's sizes, or null).

Keys come in a fixed order (the contract's, then ``notes`` and ``help``); tensors
in ``shapes`` keep the order the checker found them in. The output is ASCII
(``ensure_ascii``), so it survives any pipe or locale.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ..messages.diagnostics import Diagnostic, FileResult, Fix, Note, Span
from .common import Totals, passes, scrub_tree

JsonObject = dict[str, object]


def render_json(results: list[FileResult], *, fail_on: str,
                notices: Sequence[Diagnostic] = (), diffs: Mapping[str, str] | None = None) -> str:
    return (
        json.dumps(scrub_tree(document(results, fail_on=fail_on, notices=notices, diffs=diffs)),
                   indent=2, ensure_ascii=True) + "\n"
    )


def document(results: list[FileResult], *, fail_on: str,
             notices: Sequence[Diagnostic] = (),
             diffs: Mapping[str, str] | None = None) -> JsonObject:
    """The contract's document; ``notifications`` (run-level problems such as SC207,
    with no position) is added when there are any. With ``diffs`` (``verify --diff``)
    each file has a ``diff`` field: its unified diff, ``""`` when nothing would change."""
    totals = Totals.of(results, notices)
    files = [_file(result, fail_on) for result in results]
    if diffs is not None:
        for entry, result in zip(files, results):
            entry["diff"] = diffs.get(result.path, "")
    out: JsonObject = {
        "files": files,
        "summary": {"files": totals.files, "errors": totals.errors, "warnings": totals.warnings},
    }
    if notices:
        out["notifications"] = [
            {"severity": n.severity.value, "code": n.code, "message": n.message,
             "help": list(n.help)} for n in notices]
    return out


def _file(result: FileResult, fail_on: str) -> JsonObject:
    entry: JsonObject = {
        "path": result.path,
        "ok": passes(result, fail_on),
        "diagnostics": [_diagnostic(diagnostic) for diagnostic in result.diagnostics],
        "shapes": {name: list(dims) for name, dims in result.shapes.items()},
        # A sketch: which tensors in `shapes`, and which dims, were inferred (not declared).
        "inferred": {"tensors": list(result.inferred.tensors), "dims": list(result.inferred.dims),
                     "declarations": list(result.inferred.declarations)},
    }
    if result.covered:  # a whole model: the layers checked, the rest by kind
        entry["covered"] = result.covered
    return entry


def _diagnostic(diagnostic: Diagnostic) -> JsonObject:
    return {
        "severity": diagnostic.severity.value,
        "code": diagnostic.code,
        "message": diagnostic.message,
        **_position(diagnostic.span),
        "notes": [_note(note) for note in diagnostic.notes],
        "help": list(diagnostic.help),
        # A refuted claim about dims: the sizes where it fails ({"D_model": 1, "H": 2}).
        "counterexample": dict(diagnostic.counterexample) if diagnostic.counterexample else None,
        **({"fixes": [_fix(fix) for fix in diagnostic.fixes]} if diagnostic.fixes else {}),
    }


def _fix(fix: Fix) -> JsonObject:
    return {
        "help": fix.help,
        "safe": fix.safe,
        "edits": [{**_position(edit.span), "replacement": edit.replacement}
                  for edit in fix.edits],
    }


def _note(note: Note) -> JsonObject:
    if note.span is None:
        return {"message": note.message}
    return {"message": note.message, **_position(note.span)}


def _position(span: Span) -> JsonObject:
    return {
        "line": span.line,
        "column": span.column,
        "end_line": span.end_line,
        "end_column": span.end_column,
    }
