"""`shapecheck report`: the shape-annotated report of one spec or Python target (docs/report.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .common import (
    EXIT_ERRORS, EXIT_OK, MESSAGES, STDOUT, UsageFailure, cannot_read, cannot_write, check_output,
    cli, config_option, dim_option, finder_for, infer_option, isolated_option, lang_option,
    parse_bindings, stdin_filename_option, stdin_spec,
)
from .extract import traced_program

if TYPE_CHECKING:
    from ..report import ModelReport


@cli.command()
@lang_option
@click.argument("path", type=click.Path())
@click.option("-o", "--output", "output", required=True, type=click.Path(), metavar="OUT",
              help="The report to write: .html or .md (by its suffix, unless --format says); "
              "`-` writes it to standard output (Markdown unless --format says).")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), default=None,
              help="Report format (default: from OUT's suffix).")
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default="float64",
              show_default=True, help="Element type for the byte counts.")
@dim_option
@config_option
@isolated_option
@stdin_filename_option
@infer_option
def report(path: str, output: str, fmt: str | None, dtype: str, dims: tuple[str, ...],
           config: tuple[str, ...], isolated: bool, stdin_filename: str | None,
           infer: bool | None) -> None:
    """Write a shape-annotated report of one spec (HTML or Markdown).

    The configuration's [dims] are default bindings (--dim wins), and its rule
    selection and the spec's `# noqa` comments apply to the problems shown.
    """
    from ..api import check_bytes, check_path
    from ..config import default_bindings
    from ..report import ModelReport, build_report, format_for, render, write_atomically

    bindings = parse_bindings(dims)
    to_stdout = output == STDOUT
    fmt = fmt or ("md" if to_stdout else format_for(output))
    if fmt is None:
        raise UsageFailure(MESSAGES["report_format"].format(output=output))
    shown, source, where = stdin_spec(path, stdin_filename)
    protect = [(str(where), MESSAGES["what_spec"])]
    if not to_stdout:
        check_output(output, protect)
    settings = finder_for(config, isolated).settings_for(where)
    ignore = settings.disabled(str(where))
    try:
        if source is not None:
            program = check_bytes(source, bindings, ignore=ignore, defaults=settings.dims,
                                  infer=infer)
        elif path.endswith(".attn") or Path(path).exists() and not path.endswith(".py"):
            program = check_path(path, bindings, ignore=ignore, defaults=settings.dims,
                                 infer=infer)
        else:  # a Python target: the report of its traced spec, each line naming its source
            program = traced_program(path, bindings, ignore, dtype)
    except OSError as error:
        raise UsageFailure(cannot_read(path, error)) from None
    if isinstance(program, ModelReport):  # a whole model: one page for its attention layers
        _write_page(program, output, fmt, to_stdout, protect)
    bindings = {**default_bindings(settings.dims, program.dims.dims), **bindings}
    built = build_report(program, shown, bindings, dtype)
    # The problems the report embeds, framed as `verify` prints them: a count alone would
    # send the reader to the file to learn what failed (stderr when the report is on stdout).
    if built.problems:
        click.echo("\n".join(problem.frame + "\n" for problem in built.problems),
                   nl=not to_stdout, err=to_stdout)
    if to_stdout:
        click.echo(render(built, fmt), nl=False)
        sys.exit(EXIT_OK if program.ok else EXIT_ERRORS)
    try:
        write_atomically(output, render(built, fmt), protect=protect)
    except OSError as error:
        raise UsageFailure(cannot_write(output, error)) from None
    # Like `verify`: where it went, then the verdict in verify's own words.
    from ..formats.common import Totals
    from ..formats.text import summary_line

    click.echo(MESSAGES["report_written"].format(path=output))
    click.echo(summary_line(Totals(1, built.errors, built.warnings), fail_on="error"))
    sys.exit(EXIT_OK if program.ok else EXIT_ERRORS)


def _write_page(page: ModelReport, output: str, fmt: str, to_stdout: bool,
                protect: list[tuple[str, str]]) -> None:
    """A whole model's page, written as one spec's report is: its problems first, as
    `verify` prints them (on stderr when the page goes to stdout)."""
    from ..report import render, write_atomically

    if page.problems:
        click.echo("\n".join(page.problems), err=to_stdout)
    if to_stdout:
        click.echo(render(page, fmt), nl=False)
        sys.exit(EXIT_OK if page.ok else EXIT_ERRORS)
    try:
        write_atomically(output, render(page, fmt), protect=protect)
    except OSError as error:
        raise UsageFailure(cannot_write(output, error)) from None
    click.echo(MESSAGES["report_written"].format(path=output))
    sys.exit(EXIT_OK if page.ok else EXIT_ERRORS)
