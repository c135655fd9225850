"""Output formats of ``shapecheck verify``: text, json, sarif, github.

Every format renders the same data (a list of :class:`FileResult`) and returns
the whole output as one string that ends with a newline (or is empty): write it
as it is (``click.echo(out, nl=False)``). Rendering never raises on odd input:
a missing source, a span past the end of the text, control characters or
undecodable bytes in a path all print safely.
"""

from __future__ import annotations

from collections.abc import Callable

from ..diagnostics import FileResult
from .github import render_github, step_summary
from .json_format import render_json
from .sarif import render_sarif
from .text import render_text

__all__ = ["FORMATS", "github_step_summary", "render"]

FORMATS: tuple[str, ...] = ("text", "json", "sarif", "github")

Renderer = Callable[[list[FileResult], bool, bool], str]

_RENDERERS: dict[str, Renderer] = {
    "text": lambda results, color, strict: render_text(results, color=color, strict=strict),
    "json": lambda results, color, strict: render_json(results, strict=strict),
    "sarif": lambda results, color, strict: render_sarif(results),
    "github": lambda results, color, strict: render_github(results),
}


def render(results: list[FileResult], fmt: str, *, color: bool, strict: bool) -> str:
    """Render ``results`` in format ``fmt`` (one of :data:`FORMATS`).

    ``color`` only affects ``text`` (the caller decides: a terminal and no
    ``NO_COLOR``). ``strict`` makes warnings count as errors in the verdicts
    (``text`` summary, ``json`` ``ok``); severities themselves are unchanged.
    """
    renderer = _RENDERERS.get(fmt)
    if renderer is None:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return renderer(results, color, strict)


def github_step_summary(results: list[FileResult], *, strict: bool = False) -> str:
    """A Markdown table (file, errors, warnings, status) for ``$GITHUB_STEP_SUMMARY``."""
    return step_summary(results, strict=strict)
