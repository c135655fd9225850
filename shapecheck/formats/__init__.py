"""Output formats of ``shapecheck verify``: text, json, sarif, github.

Every format renders the same data (a list of :class:`FileResult`) and returns
the whole output as one string that ends with a newline (or is empty): write it
as it is (``click.echo(out, nl=False)``). Rendering never raises on odd input:
a missing source, a span past the end of the text, control characters or
undecodable bytes in a path all print safely.
"""

from __future__ import annotations

from importlib import import_module

from ..diagnostics import FileResult

__all__ = ["FORMATS", "github_step_summary", "render"]

FORMATS: tuple[str, ...] = ("text", "json", "sarif", "github")

# Each format's module loads only when used: a linter's start-up time counts.
_RENDERERS: dict[str, tuple[str, str]] = {
    "text": ("text", "render_text"),
    "json": ("json_format", "render_json"),
    "sarif": ("sarif", "render_sarif"),
    "github": ("github", "render_github"),
}


def render(results: list[FileResult], fmt: str, *, color: bool, strict: bool) -> str:
    """Render ``results`` in format ``fmt`` (one of :data:`FORMATS`).

    ``color`` only affects ``text`` (the caller decides: a terminal and no
    ``NO_COLOR``). ``strict`` makes warnings count as errors in the verdicts
    (``text`` summary, ``json`` ``ok``); severities themselves are unchanged.
    """
    entry = _RENDERERS.get(fmt)
    if entry is None:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    module, function = entry
    renderer = getattr(import_module(f".{module}", __name__), function)
    if fmt == "text":
        return renderer(results, color=color, strict=strict)
    if fmt == "json":
        return renderer(results, strict=strict)
    return renderer(results)


def github_step_summary(results: list[FileResult], *, strict: bool = False) -> str:
    """A Markdown table (file, errors, warnings, status) for ``$GITHUB_STEP_SUMMARY``."""
    from .github import step_summary

    return step_summary(results, strict=strict)
