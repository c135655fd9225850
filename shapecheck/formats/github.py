"""GitHub Actions: workflow-command annotations, and the job summary table.

An annotation is one line::

    ::error file=a.attn,line=4,col=5,endLine=4,endColumn=10,title=SC301::message%0Ahelp: ...

GitHub only places a column range on a single line, so a span over several
lines gives ``line`` and ``endLine`` without columns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..messages.diagnostics import Diagnostic, FileResult, Note, Severity
from .common import WORDS, Totals, passes, plural, posix_path, rebase, scrub

COMMANDS: dict[Severity, str] = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.NOTE: "notice",
}


def escape_data(text: str) -> str:
    """Escape a command's message (after ``::``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a command property's value (``file=...``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(results: list[FileResult], *, notices: Sequence[Diagnostic] = (),
                  base_dir: Path | None = None) -> str:
    """One annotation per diagnostic; ``file=`` is relative to ``base_dir`` (the
    repository root, which is what GitHub expects) when one is given. A notice
    (SC207) has no file."""
    lines = [
        annotation(diagnostic, rebase(result.path, base_dir))
        for result in results
        for diagnostic in result.diagnostics
    ]
    lines.extend(_run_annotation(notice) for notice in notices)
    return "".join(line + "\n" for line in lines)


def _run_annotation(notice: Diagnostic) -> str:
    message = escape_data(_message(notice, ""))
    return scrub(f"::{COMMANDS[notice.severity]} title={escape_property(notice.code)}::{message}")


def annotation(diagnostic: Diagnostic, path: str) -> str:
    properties = ",".join(
        f"{key}={escape_property(value)}" for key, value in _properties(diagnostic, path)
    )
    message = escape_data(_message(diagnostic, path))
    return scrub(f"::{COMMANDS[diagnostic.severity]} {properties}::{message}")


def _properties(diagnostic: Diagnostic, path: str) -> list[tuple[str, str]]:
    span = diagnostic.span
    properties = [("file", posix_path(path)), ("line", str(span.line))]
    if span.end_line == span.line:
        properties.append(("col", str(span.column)))
    properties.append(("endLine", str(max(span.line, span.end_line))))
    if span.end_line == span.line:
        properties.append(("endColumn", str(max(span.column, span.end_column))))
    properties.append(("title", diagnostic.code))
    return properties


def _message(diagnostic: Diagnostic, path: str) -> str:
    lines = [diagnostic.message]
    lines.extend(_note_line(note, path) for note in diagnostic.notes)
    lines.extend(f"help: {line}" for line in diagnostic.help)
    return "\n".join(lines)


def _note_line(note: Note, path: str) -> str:
    if note.span is None:
        return f"note: {note.message}"
    return f"note: {note.message} ({posix_path(path)}:{note.span.line}:{note.span.column})"


# --- the job summary ($GITHUB_STEP_SUMMARY) -------------------------------------------

_MARKDOWN_SPECIAL = "\\`*_[]<>|~"
# Where GitHub would turn text into a live reference: an @mention (`@user`, `@org/team`), an
# issue or pull request (`#12`, `GH-12`, `owner/repo#12`), an autolink (`https://…`, `www.…`,
# `user@host`) or a commit (a long hexadecimal word). An empty HTML comment at that point
# splits the text, so nothing links or notifies, and nothing shows.
_REFERENCE = re.compile(
    r"(?<=@)(?=[A-Za-z0-9_])"  # @user, user@host
    r"|(?<=#)(?=\d)"  # #12, owner/repo#12
    r"|(?<=\bGH-)(?=\d)"  # GH-12
    r"|(?<=:)(?=//)"  # https://
    r"|(?<=\bwww)(?=\.)"  # www.example.com
    r"|(?<=\b[0-9a-f])(?=[0-9a-f]*\d[0-9a-f]*\b)(?=[0-9a-f]{6,}\b)",  # a commit hash
    re.IGNORECASE)
UNLINK = "<!-- -->"


def escape_markdown(text: str) -> str:
    """Text that GitHub's Markdown shows literally (inside a table cell too): no markup, no
    mention, no issue reference, no autolink."""
    flat = " ".join(text.split())  # a newline would end the table row
    escaped = "".join("\\" + char if char in _MARKDOWN_SPECIAL else char for char in flat)
    return _REFERENCE.sub(UNLINK, escaped)


def step_summary(results: list[FileResult], *, fail_on: str = "warning") -> str:
    totals = Totals.of(results)
    verdict = WORDS["summary_failed" if totals.failed(fail_on) else "summary_passed"]
    rows = [
        "### shapecheck",
        "",
        WORDS["summary_counts"].format(files=plural(totals.files, "file"),
                                       errors=plural(totals.errors, "error"),
                                       warnings=plural(totals.warnings, "warning"), verdict=verdict)
        + (WORDS["summary_errors_only"] if fail_on == "error" else ""),
        "",
        *_problem_details(results),
        _row(WORDS["col_file"], WORDS["col_errors"], WORDS["col_warnings"], WORDS["col_status"]),
        "| --- | ---: | ---: | --- |",
    ]
    rows.extend(_summary_row(result, fail_on) for result in results)
    return "".join(row + "\n" for row in rows)


#: At most this many problems are listed in the job summary (GitHub caps its size).
SUMMARY_PROBLEMS = 50


def _problem_details(results: list[FileResult]) -> list[str]:
    """The errors and warnings, folded away: where, which code, the message and its help."""
    found = [(result.path, d) for result in results for d in result.diagnostics
             if d.severity is not Severity.NOTE]
    if not found:
        return []
    rows = [
        f"<details><summary>{plural(len(found), 'problem')}</summary>",
        "",
        _row(WORDS["col_file"], WORDS["col_line"], WORDS["col_code"], WORDS["col_message"]),
        "| --- | ---: | --- | --- |",
    ]
    for path, diagnostic in found[:SUMMARY_PROBLEMS]:
        message = " — ".join([diagnostic.message] + [f"help: {line}" for line in diagnostic.help])
        rows.append(f"| {escape_markdown(scrub(path))} | {diagnostic.span.line}:{diagnostic.span.column} "
                    f"| {diagnostic.severity.value}\\[{escape_markdown(diagnostic.code)}\\] "
                    f"| {escape_markdown(scrub(message))} |")
    if len(found) > SUMMARY_PROBLEMS:
        rows.append(f"| … | | | {WORDS['more'].format(count=len(found) - SUMMARY_PROBLEMS)} |")
    rows += ["", "</details>", ""]
    return rows


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _summary_row(result: FileResult, fail_on: str) -> str:
    status = WORDS["status_verified" if passes(result, fail_on) else "status_failed"]
    path = escape_markdown(scrub(result.path))
    return f"| {path} | {result.errors} | {result.warnings} | {status} |"
