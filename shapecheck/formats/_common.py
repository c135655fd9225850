"""Helpers shared by every output format: totals, plurals, safe text, paths."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from urllib.parse import quote

from ..diagnostics import FileResult


@dataclass(frozen=True, slots=True)
class Totals:
    """Counts over all files, as the summaries report them."""

    files: int
    errors: int
    warnings: int

    @classmethod
    def of(cls, results: Iterable[FileResult]) -> Totals:
        files = errors = warnings = 0
        for result in results:
            files += 1
            errors += result.errors
            warnings += result.warnings
        return cls(files, errors, warnings)

    def failed(self, strict: bool) -> bool:
        return self.errors > 0 or (strict and self.warnings > 0)


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


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
