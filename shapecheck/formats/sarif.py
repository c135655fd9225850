"""SARIF 2.1.0 for GitHub code scanning (and any other SARIF consumer).

Choices, each for a reason:

- ``tool.driver.rules`` lists *every* code of the registry, sorted by id, not only
  the codes that occur: a rule's ``ruleIndex`` is then the same in every run, and
  code scanning can show the documentation of any code. A code missing from the
  registry (a bug elsewhere) still gets a bare rule, so the log stays valid.
- Columns are code points, as the parser counts them: the run says so with
  ``columnKind: unicodeCodePoints`` (SARIF's default is UTF-16 code units).
- ``partialFingerprints`` uses our own key. ``primaryLocationLineHash`` is
  reserved by GitHub, which recomputes it and warns when a tool's value differs.
  Ours hashes the code, the path and the text of the line (whitespace-collapsed),
  not the line number, so an alert survives edits above it; ``:N`` counts
  repeats of the same code on identical lines of one file.
- Relative paths are relative to ``%SRCROOT%`` (the checkout root for GitHub).
  ``verify`` passes a base folder (``--base-dir``, by default the repository root),
  so URIs are the same from whatever folder it runs; ``originalUriBaseIds`` then
  says where ``%SRCROOT%`` is.
- Problems of the tool rather than of a spec -- a path that cannot be read (SC007),
  an internal failure while checking a file (SC006), a ``--dim`` that no spec
  declares (SC207) -- are ``invocations[0].toolExecutionNotifications``, not
  results: they are not alerts on code. ``executionSuccessful`` is false when one
  of them is an error. The document is valid in every case, empty runs included.
- A diagnostic whose ``help:`` is an exact edit carries it as a SARIF ``fix``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..messages import codes
from .._version import __version__
from ..messages.diagnostics import Diagnostic, FileResult, Fix, Note, Severity, Span
from .common import absolute_uri, is_absolute, posix_path, rebase, relative_uri, scrub_tree
from .source import SourceLines

JsonObject = dict[str, object]

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SARIF_VERSION = "2.1.0"
TOOL_NAME = "shapecheck"
INFORMATION_URI = "https://pypi.org/project/attn-shapecheck/"
#: Codes that are problems of the tool, not of a spec (see the module docstring).
TOOL_CODES = frozenset({"SC006", "SC007"})
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "shapecheck/v1"
LEVELS: dict[Severity, str] = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.NOTE: "note",
}


def render_sarif(results: list[FileResult], *, notices: Sequence[Diagnostic] = (),
                 base_dir: Path | None = None) -> str:
    log = sarif_log(results, notices=notices, base_dir=base_dir)
    return json.dumps(scrub_tree(log), indent=2, ensure_ascii=True) + "\n"


def sarif_log(results: list[FileResult], *, notices: Sequence[Diagnostic] = (),
              base_dir: Path | None = None) -> JsonObject:
    rules = _rule_ids(results, notices)
    index = {rule_id: position for position, rule_id in enumerate(rules)}
    sarif_results: list[JsonObject] = []
    notifications: list[JsonObject] = []
    for result in results:
        path = rebase(result.path, base_dir)
        findings = [d for d in result.diagnostics if d.code not in TOOL_CODES]
        sarif_results.extend(_file_results(result, path, findings, index))
        location = artifact_location(path)
        notifications.extend(_notification(d, index, location) for d in result.diagnostics
                             if d.code in TOOL_CODES)
    notifications.extend(_notification(notice, index, None) for notice in notices)
    run: JsonObject = {
        "tool": {"driver": _driver(rules)},
        "invocations": [{
            "executionSuccessful": not any(n["level"] == "error" for n in notifications),
            "toolExecutionNotifications": notifications,
        }],
        "columnKind": "unicodeCodePoints",
        "results": sarif_results,
    }
    if base_dir is not None:
        run["originalUriBaseIds"] = {SRCROOT: {"uri": _folder_uri(base_dir)}}
    return {"$schema": SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}


def _folder_uri(folder: Path) -> str:
    uri = absolute_uri(str(folder))
    return uri if uri.endswith("/") else uri + "/"


def _notification(diagnostic: Diagnostic, index: dict[str, int],
                  location: JsonObject | None) -> JsonObject:
    notification: JsonObject = {
        "level": LEVELS[diagnostic.severity],
        "message": {"text": _message_text(diagnostic)},
        "associatedRule": {"id": diagnostic.code, "index": index[diagnostic.code]},
    }
    if location is not None:
        notification["locations"] = [{"physicalLocation": {"artifactLocation": dict(location)}}]
    return notification


def _rule_ids(results: list[FileResult], notices: Sequence[Diagnostic]) -> list[str]:
    """Every registry code, then any unregistered code that occurs (in order)."""
    ids = sorted(codes.REGISTRY)
    found = [d for result in results for d in result.diagnostics] + list(notices)
    for diagnostic in found:
        if diagnostic.code not in codes.REGISTRY and diagnostic.code not in ids:
            ids.append(diagnostic.code)
    return ids


def _driver(rule_ids: list[str]) -> JsonObject:
    return {
        "name": TOOL_NAME,
        "informationUri": INFORMATION_URI,
        "version": __version__,
        "semanticVersion": __version__,
        "rules": [_rule(rule_id) for rule_id in rule_ids],
    }


def _rule(rule_id: str) -> JsonObject:
    code = codes.REGISTRY.get(rule_id)
    if code is None:
        return {"id": rule_id}
    return {
        "id": code.id,
        "name": code.name,
        "shortDescription": {"text": code.text("summary")},
        "fullDescription": {"text": code.text("what")},
        "help": {"text": codes.explain(code.id) or code.text("summary"), "markdown": rule_markdown(code)},
        "defaultConfiguration": {"level": LEVELS[code.severity]},
    }


def rule_markdown(code: codes.Code) -> str:
    """A code's documentation as Markdown, in the order ``shapecheck explain`` prints it."""
    example = code.text("example")
    fence = _fence_for(example)
    heading = codes.EXPLAIN
    return (
        f"**{code.id}** (`{code.name}`): {code.text('summary')}\n\n"
        f"### {heading['what']}\n\n{code.text('what')}\n\n"
        f"### {heading['why']}\n\n{code.text('why')}\n\n"
        f"### {heading['example']}\n\n{fence}\n{example}\n{fence}\n\n"
        f"### {heading['fix']}\n\n{code.text('fix')}\n"
    )


def _fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run inside ``text``."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _file_results(result: FileResult, path: str, findings: list[Diagnostic],
                  index: dict[str, int]) -> list[JsonObject]:
    lines = SourceLines(result.source)
    location = artifact_location(path)
    seen: Counter[tuple[str, str]] = Counter()
    line_keys: dict[int, str] = {}  # a long line is normalised once, not per diagnostic
    out: list[JsonObject] = []
    for diagnostic in findings:
        content = _fingerprint_content(diagnostic, lines, line_keys)
        seen[(diagnostic.code, content)] += 1
        fingerprint = _fingerprint(
            diagnostic.code, path, content, seen[(diagnostic.code, content)]
        )
        out.append(_result(diagnostic, location, index, fingerprint))
    return out


def _result(
    diagnostic: Diagnostic, location: JsonObject, index: dict[str, int], fingerprint: str
) -> JsonObject:
    result: JsonObject = {
        "ruleId": diagnostic.code,
        "ruleIndex": index[diagnostic.code],
        "level": LEVELS[diagnostic.severity],
        "message": {"text": _message_text(diagnostic)},
        "locations": [_location(location, diagnostic.span)],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
    }
    related = [
        _related(number, note, location)
        for number, note in enumerate(diagnostic.notes)
        if note.span is not None
    ]
    if related:
        result["relatedLocations"] = related
    if diagnostic.fixes:
        result["fixes"] = [_fix(fix, location) for fix in diagnostic.fixes]
    return result


def _fix(fix: Fix, location: JsonObject) -> JsonObject:
    """A SARIF fix: the help line it belongs to, and its replacements."""
    return {
        "description": {"text": fix.help},
        "artifactChanges": [{
            "artifactLocation": dict(location),
            "replacements": [
                {"deletedRegion": region(edit.span), "insertedContent": {"text": edit.replacement}}
                for edit in fix.edits
            ],
        }],
    }


def _message_text(diagnostic: Diagnostic) -> str:
    """The message, then notes that have no location, then help lines."""
    lines = [diagnostic.message]
    lines.extend(f"note: {note.message}" for note in diagnostic.notes if note.span is None)
    lines.extend(f"help: {line}" for line in diagnostic.help)
    return "\n".join(lines)


def _related(number: int, note: Note, artifact: JsonObject) -> JsonObject:
    assert note.span is not None
    return {
        "id": number,
        **_location(artifact, note.span),
        "message": {"text": note.message},
    }


def artifact_location(path: str) -> JsonObject:
    if is_absolute(path):
        return {"uri": absolute_uri(path)}
    return {"uri": relative_uri(path), "uriBaseId": SRCROOT}


def _location(artifact: JsonObject, span: Span) -> JsonObject:
    return {"physicalLocation": {"artifactLocation": dict(artifact), "region": region(span)}}


def region(span: Span) -> JsonObject:
    """The span as a SARIF region, clamped to what the schema allows (all >= 1)."""
    start_line = max(1, span.line)
    start_column = max(1, span.column)
    end_line = max(start_line, span.end_line)
    end_column = max(1, span.end_column)
    if end_line == start_line:
        end_column = max(start_column, end_column)
    return {
        "startLine": start_line,
        "startColumn": start_column,
        "endLine": end_line,
        "endColumn": end_column,
    }


def _fingerprint_content(diagnostic: Diagnostic, lines: SourceLines, cache: dict[int, str]) -> str:
    """A digest of what the finding is anchored on: its line's text, whitespace-collapsed."""
    number = diagnostic.span.line
    if number not in cache:
        text = lines.get(number)
        if text is None:  # no source line to anchor on: the message is the next most stable thing
            return _digest(diagnostic.message)
        cache[number] = _digest(" ".join(text.split()))
    return cache[number]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _fingerprint(code: str, path: str, content: str, occurrence: int) -> str:
    return f"{_digest(chr(0).join((code, posix_path(path), content)))[:32]}:{occurrence}"
