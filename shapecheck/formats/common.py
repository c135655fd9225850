"""Helpers shared by every output format: totals, plurals, safe text, paths."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePath
from urllib.parse import quote

from ..messages.codes import fails
from ..messages.diagnostics import Diagnostic, FileResult, Severity
from ..i18n import Table
from ..records import Record

# The words of the formats' summaries (`verify`'s last line, the GitHub job summary) and of
# `report`'s verdict. A counted word has one entry for 1 (`error`) and one for the rest
# (`errors`): :func:`plural` picks one.
WORDS: Table = Table("formats", "WORDS", {
    "error": "{count} error",
    "errors": "{count} errors",
    "warning": "{count} warning",
    "warnings": "{count} warnings",
    "file": "{count} file",
    "files": "{count} files",
    "problem": "{count} problem",
    "problems": "{count} problems",
    "no_files": "No files checked.",
    "verified_one": "{files} verified",
    "verified_all": "All {files} verified",
    "verified_with": "{verified}, with {warnings}.",
    "verified": "{verified}.",
    "found": "Found {errors} and {warnings} in {files}",
    "found_end": "{found}.",
    "continues": "(continues to line {line})",
    "summary_counts": "{files}, {errors}, {warnings}: **{verdict}**",
    "summary_failed": "failed",
    "summary_passed": "passed",
    "summary_errors_only": " (`fail-on = \"error\"`: warnings do not fail)",
    "col_file": "file",
    "col_line": "line",
    "col_code": "code",
    "col_message": "message",
    "col_errors": "errors",
    "col_warnings": "warnings",
    "col_status": "status",
    "status_verified": "✅ verified",
    "status_failed": "❌ failed",
    "more": "{count} more",
})


class Totals(Record, frozen=True, slots=True):
    """Counts over all files, as the summaries report them."""

    files: int
    errors: int
    warnings: int
    code_warnings: int = 0  # the warnings about the code (not `about_tool`): fail-on counts them

    @classmethod
    def of(cls, results: Iterable[FileResult], notices: Sequence[Diagnostic] = ()) -> Totals:
        results = list(results)
        found = [d for result in results for d in result.diagnostics] + list(notices)
        warnings = [d for d in found if d.severity is Severity.WARNING]
        errors = sum(1 for d in found if d.severity is Severity.ERROR)
        return cls(len(results), errors, len(warnings),
                   sum(1 for d in warnings if fails(d, "warning")))

    def failed(self, fail_on: str) -> bool:
        """Whether the run fails under ``fail_on`` (``codes.FAIL_ON``)."""
        return self.errors > 0 or (fail_on == "warning" and self.code_warnings > 0)


def passes(result: FileResult, fail_on: str) -> bool:
    """Whether one file verifies under ``fail_on`` (the json `ok`, the job summary's status)."""
    return not any(fails(d, fail_on) for d in result.diagnostics)


def plural(count: int, word: str) -> str:
    """``1 error``, ``2 errors`` (in the current language): ``word`` is a key of :data:`WORDS`."""
    return WORDS[word if count == 1 else word + "s"].format(count=count)


def scrub(text: str) -> str:
    """Replace lone surrogates (undecodable bytes of a path) so the text encodes as UTF-8."""
    return text.encode("utf-8", "replace").decode("utf-8")


def scrub_tree(value: object) -> object:
    """``scrub`` every string inside a JSON-like value (keys included)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {scrub(str(key)): scrub_tree(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_tree(item) for item in value]
    return value


def posix_path(path: str) -> str:
    """The path with the platform's separators turned into ``/`` (``./`` dropped)."""
    return PurePath(path).as_posix() if path else path


def is_absolute(path: str) -> bool:
    return bool(path) and PurePath(path).is_absolute()


def relative_uri(path: str) -> str:
    """A relative path as a URI reference; undecodable bytes keep their value."""
    # ':' is escaped too, so that a first segment like `c:x` never reads as a scheme.
    return _quote(posix_path(path))


def absolute_uri(path: str) -> str:
    try:
        return PurePath(path).as_uri()
    except (UnicodeEncodeError, ValueError):
        return "file://" + _quote(posix_path(path))


def _quote(path: str) -> str:
    try:  # a path decoded with surrogateescape gets its original bytes back
        return quote(path, safe="/", errors="surrogateescape")
    except UnicodeEncodeError:
        return quote(path, safe="/", errors="surrogatepass")


def statistics(results: Iterable[FileResult],
               notices: Sequence[Diagnostic]) -> list[tuple[str, str, int, bool]]:
    """(code, name, count, fixable) for every code reported, most frequent first."""
    from ..messages import codes

    counts: Counter[str] = Counter()
    fixable: set[str] = set()
    for diagnostic in [d for r in results for d in r.diagnostics] + list(notices):
        counts[diagnostic.code] += 1
        if any(fix.safe for fix in diagnostic.fixes):
            fixable.add(diagnostic.code)
    rows = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        entry = codes.REGISTRY.get(code)
        rows.append((code, entry.name if entry else "", count, code in fixable))
    return rows


def rebase(path: str, base_dir: Path | None) -> str:
    """``path`` relative to ``base_dir`` when it lies below it; else absolute.

    Without a base folder the path stays as given.
    """
    if base_dir is None or path == "-":
        return path
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(base_dir).as_posix()
    except ValueError:
        return str(absolute)
