"""Output formats of ``shapecheck verify``: text, json, sarif, github.

Every format renders the same data (a list of :class:`FileResult`) and returns
the whole output as one string that ends with a newline (or is empty): write it
as it is (``click.echo(out, nl=False)``). Rendering never raises on odd input:
a missing source, a span past the end of the text, control characters or
undecodable bytes in a path all print safely.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from pathlib import Path

from ..messages.diagnostics import Diagnostic, FileResult

__all__ = ["FORMATS", "github_step_summary", "render", "render_statistics"]

FORMATS: tuple[str, ...] = ("text", "json", "sarif", "github")

# Each format's module loads only when used: a linter's start-up time counts.
_RENDERERS: dict[str, tuple[str, str]] = {
    "text": ("text", "render_text"),
    "json": ("json_format", "render_json"),
    "sarif": ("sarif", "render_sarif"),
    "github": ("github", "render_github"),
}


def render(results: list[FileResult], fmt: str, *, color: bool, fail_on: str,
           notices: Sequence[Diagnostic] = (), base_dir: Path | None = None,
           quiet: bool = False) -> str:
    """Render ``results`` in format ``fmt`` (one of :data:`FORMATS`).

    ``color`` only affects ``text`` (the caller decides: see ``cli.use_color``).
    ``fail_on`` (``codes.FAIL_ON``) says what fails the verdicts (``text`` summary,
    ``json`` ``ok``): ``"warning"``, any error or warning about the code; ``"error"``, errors
    only (``run``, ``report`` and ``conform``: "the spec verifies"); severities are
    unchanged. ``notices`` are run-level problems that belong to no file (SC207: a
    ``--dim`` that no spec declares); their spans mean nothing. ``base_dir`` makes SARIF and GitHub paths
    relative to that folder (the repository root), whatever the current folder;
    without it, paths are written as given. ``quiet`` leaves out the text summary.
    """
    entry = _RENDERERS.get(fmt)
    if entry is None:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    module, function = entry
    renderer = getattr(import_module(f".{module}", __name__), function)
    if fmt == "text":
        return renderer(results, color=color, fail_on=fail_on, notices=notices, quiet=quiet)
    if fmt == "json":
        return renderer(results, fail_on=fail_on, notices=notices)
    return renderer(results, notices=notices, base_dir=base_dir)


def render_statistics(results: list[FileResult], notices: Sequence[Diagnostic], fmt: str) -> str:
    """``verify --statistics``: how often each code was reported, most frequent first
    (``text``: one aligned row per code; ``json``: a list of objects)."""
    from .common import statistics

    rows = statistics(results, notices)
    if fmt == "json":
        import json

        return json.dumps([{"code": code, "name": name, "count": count, "fixable": fixable}
                           for code, name, count, fixable in rows], indent=2) + "\n"
    width = max((len(str(count)) for _, _, count, _ in rows), default=1)
    return "".join(f"{count:>{width}}  {code}  {'[*] ' if fixable else ''}{name}\n"
                   for code, name, count, fixable in rows)


def github_step_summary(results: list[FileResult], *, fail_on: str = "warning") -> str:
    """A Markdown table (file, errors, warnings, status) for ``$GITHUB_STEP_SUMMARY``."""
    from .github import step_summary

    return step_summary(results, fail_on=fail_on)
