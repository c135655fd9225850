"""The shape-annotated report (`shapecheck report`): HTML or Markdown.

::

    from shapecheck.api import check_path
    from shapecheck.report import build_report, render

    program = check_path("model.attn", {"N": 128})
    html = render(build_report(program, "model.attn", {"N": 128}), "html")

:func:`build_report` turns a checked program into a :class:`~.model.Report` (all text
already worded); :func:`render` writes it in a format; :func:`write_atomically` puts it on
disk whole or not at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from .. import fileio
from .model import ModelReport, Report, build_model_report, build_report

if TYPE_CHECKING:
    from ..check.program import Program

FORMATS = ("html", "md")
SUFFIXES = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}

__all__ = ["FORMATS", "ModelReport", "Report", "build_model_report", "build_report", "card_html",
           "format_for", "render", "write_atomically"]


def format_for(path: str) -> str | None:
    """The format an output file's suffix asks for, if it asks for one."""
    return SUFFIXES.get(Path(path).suffix.lower())


def render(report: Report | ModelReport, fmt: str) -> str:
    """A report (one spec's, or a whole model's page) in ``fmt``."""
    if fmt == "html":
        from .html import render_html, render_model_html

        return render_model_html(report) if isinstance(report, ModelReport) else \
            render_html(report)
    if fmt == "md":
        from .markdown import render_markdown, render_model_markdown

        return render_model_markdown(report) if isinstance(report, ModelReport) else \
            render_markdown(report)
    raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")


def card_html(program: Program) -> str:
    """A checked program's verdict and attention cards as a piece of HTML: what a notebook
    shows for it (``Program._repr_html_``), at the program's own bindings."""
    from .html import render_cards

    return render_cards(build_report(program, "", dict(program.dims.bindings)))


def write_atomically(path: str, content: str, *, protect: Iterable[fileio.Protected] = ()) -> None:
    """Write ``content`` to ``path`` whole or not at all (:func:`shapecheck.fileio.write_atomic`).

    Raises OSError when the file cannot be written, or must not be (a folder, a device,
    a FIFO, one of ``protect``); the old file, if any, is then untouched.
    """
    fileio.write_atomic(path, content, protect=protect)
