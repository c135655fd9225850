"""Notebooks: ``%load_ext shapecheck`` (docs/notebooks.md).

Two magics, both a face over the one pipeline, as the command line is:

- ``%%attn`` checks the cell as a spec: the diagnostics as ``verify`` prints them, the shapes
  table, and the shape-annotated report inline (``shapecheck report``'s HTML page);
- ``%shapecheck TARGET`` traces a Python target (``model.py:make``, ``package.module:Name``,
  or a name defined in the notebook) and prints its diagnostics at its Python lines, as
  ``verify model.py:make`` does, with the traced shapes.

A spec with errors shows them and the cell succeeds; ``--strict`` raises :class:`SpecFailed`
when ``verify --strict`` would exit 1 (a notebook run as a test). IPython is imported only
here, and only when the extension is loaded or a magic runs.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from . import i18n

if TYPE_CHECKING:
    from .check.program import Program
    from .config import Settings
    from .messages.diagnostics import FileResult

__all__ = ["SpecFailed", "attn", "load_ipython_extension", "shapecheck"]


class SpecFailed(Exception):
    """A ``--strict`` magic whose spec or target has problems (``verify --strict`` fails)."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows this instead of a traceback: the diagnostics are already above it.
        return [f"SpecFailed: {self}"]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext shapecheck``: register ``%%attn`` and ``%shapecheck``."""
    ipython.register_magic_function(_with_shell(attn, ipython), magic_kind="cell",
                                    magic_name="attn")
    ipython.register_magic_function(_with_shell(shapecheck, ipython), magic_kind="line",
                                    magic_name="shapecheck")


def _with_shell(magic: Callable[..., None], ipython: Any) -> Callable[..., None]:
    def run(*arguments: str) -> None:
        magic(*arguments, shell=ipython)

    run.__doc__ = magic.__doc__
    return run


# --- the options ------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option is IPython's usage error (one line), never an exit."""

    def error(self, message: str) -> NoReturn:
        from IPython.core.error import UsageError

        raise UsageError(f"{self.prog}: {message}")


def _parser(name: str) -> _Parser:
    parser = _Parser(prog=name, add_help=False)
    parser.add_argument("-d", "--dim", action="append", default=[], metavar="NAME=INT")
    parser.add_argument("--lang", choices=i18n.LANGUAGES, default=None)
    parser.add_argument("--strict", action="store_true")
    return parser


_ATTN = _parser("%%attn")
_ATTN.add_argument("--no-report", dest="report", action="store_false")
_ATTN.add_argument("-o", "--output", metavar="NAME", default=None)
_TARGET = _parser("%shapecheck")
_TARGET.add_argument("--init", action="append", default=[], metavar="NAME=VALUE")
_TARGET.add_argument("target")


def _options(parser: _Parser, line: str) -> argparse.Namespace:
    try:
        return parser.parse_args(shlex.split(line))
    except ValueError as error:  # an unclosed quote
        parser.error(str(error))


def _bindings(items: Sequence[str]) -> dict[str, int]:
    from IPython.core.error import UsageError

    from .options import OptionError, parse_bindings

    try:
        return parse_bindings(tuple(items))
    except OptionError as error:
        raise UsageError(f"--dim: {error}") from None


def _settings(path: Path) -> Settings:
    """The configuration that governs ``path`` ([tool.shapecheck], shapecheck.toml)."""
    from IPython.core.error import UsageError

    from .config import ConfigError, Finder

    try:
        return Finder().settings_for(path)
    except ConfigError as error:
        raise UsageError(str(error)) from None


# --- %%attn -------------------------------------------------------------------------------


def attn(line: str, cell: str, *, shell: Any) -> None:
    """Check the cell as a spec: ``%%attn [-d N=128] [--lang zh] [--strict] [--no-report]
    [-o NAME]``. Its lines are numbered from the first line after ``%%attn``."""
    options = _options(_ATTN, line)
    bindings = _bindings(options.dim)
    with i18n.use(options.lang or i18n.current()):
        from .api import check_text, file_result
        from .config import default_bindings

        name = _cell_name(shell)
        settings = _settings(Path.cwd() / "notebook.attn")
        program = check_text(cell, bindings, ignore=settings.disabled(),
                             defaults=settings.dims)
        if options.output:
            shell.user_ns[options.output] = program
        results = [file_result(program, name)]
        _show_diagnostics(results)
        _show_shapes(program.shapes())
        if options.report:
            shown = {**default_bindings(settings.dims, program.dims.dims), **bindings}
            _show_report(program, name, shown)
        _raise_if_failed(results, options.strict)


def _cell_name(shell: Any) -> str:
    """The cell as IPython names it in tracebacks: ``In[3]``."""
    return f"In[{shell.execution_count}]"


# --- %shapecheck TARGET -----------------------------------------------------------------------


def shapecheck(line: str, *, shell: Any) -> None:
    """Trace a Python target and check it: ``%shapecheck TARGET [--init NAME=VALUE]
    [-d N=128] [--lang zh] [--strict]``. TARGET is ``model.py:make``, ``package.module:Name``,
    or a name defined in the notebook (``make``, ``Attention``)."""
    options = _options(_TARGET, line)
    bindings = _bindings(options.dim)
    with i18n.use(options.lang or i18n.current()):
        from .pytorch.front.sourcemap import check

        target = _target(options.target, shell)
        path = target.rpartition(":")[0]
        file = Path(path) if path.endswith(".py") else None  # else the notebook's folder's
        ignore = _settings(file or Path.cwd() / "notebook.py").disabled(file)
        results = [_named_cells(result, shell) for result in
                   check(target, tuple(options.init), bindings, ignore)]
        _show_diagnostics(results)
        _show_shapes(results[0].shapes)
        _raise_if_failed(results, options.strict)


def _target(given: str, shell: Any) -> str:
    """A bare name (``make``, ``Attention.build``) is the notebook's own: ``__main__:make``."""
    head = given.split(".")[0]
    if ":" not in given and not given.endswith(".py") and head in shell.user_ns:
        return f"__main__:{given}"
    return given


def _named_cells(result: FileResult, shell: Any) -> FileResult:
    """A diagnostic in a cell is shown at ``In[2]``, as IPython's tracebacks name cells, not at
    the temporary file name the kernel compiled the cell under."""
    from dataclasses import replace

    _, named = shell.compile.format_code_name(str(Path(result.path).resolve())) or (None, None)
    return replace(result, path=named) if named else result


# --- what a magic shows ---------------------------------------------------------------------


def _show_diagnostics(results: list[FileResult]) -> None:
    """The diagnostics as ``verify`` prints them without colour, and its summary line (under
    verify's default, ``fail-on = "warning"``)."""
    from .formats.text import render_text

    print(render_text(results, color=False, fail_on="warning"), end="")


def _show_shapes(shapes: dict[str, list[str]] | None) -> None:
    """Each tensor's shape: a table in the notebook, aligned columns where only text shows."""
    from IPython.display import display

    from .report.templates import text

    if not shapes:
        return
    head = (text("col_tensor"), text("col_shape"))
    rows = [(name, f"[{', '.join(shape)}]") for name, shape in shapes.items()]
    width = max(len(name) for name, _ in [head, *rows])
    plain = "\n".join(f"{name.ljust(width)}  {shape}" for name, shape in [head, *rows])
    cells = "".join(f"<tr><td><code>{escape(name)}</code></td><td><code>{escape(shape)}</code>"
                    "</td></tr>" for name, shape in rows)
    table = (f'<table class="shapecheck-shapes"><thead><tr><th>{escape(head[0])}</th>'
             f"<th>{escape(head[1])}</th></tr></thead><tbody>{cells}</tbody></table>")
    display({"text/plain": plain, "text/html": table}, raw=True)


def _show_report(program: Program, name: str, bindings: dict[str, int]) -> None:
    """The shape-annotated report inline. Its HTML page goes into a sandboxed frame, so its
    style sheet and Content Security Policy stay its own and the notebook's stay the
    notebook's; the Markdown report is what a front end without HTML shows."""
    from IPython.display import display

    from .report import build_report, render

    built = build_report(program, name, bindings)
    frame = (f'<iframe class="shapecheck-report" sandbox srcdoc="{escape(render(built, "html"))}" '
             'style="width: 100%; height: 36em; border: 1px solid #d1d5db;"></iframe>')
    display({"text/html": frame, "text/markdown": render(built, "md")}, raw=True)


def _raise_if_failed(results: list[FileResult], strict: bool) -> None:
    from .formats.common import Totals
    from .formats.text import summary_line

    totals = Totals.of(results)
    if strict and totals.failed("warning"):
        raise SpecFailed(summary_line(totals, "warning"))
