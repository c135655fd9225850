"""What every command shares: the `shapecheck` group, exit statuses, the command line's
own messages, the shared options and their parsing (contract: shared/spec/cli.md)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import depth, i18n

if TYPE_CHECKING:
    from ..config import Finder

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2

# The command line's own messages (click's parsing errors and --help texts are click's and
# stay in English: see docs/i18n.md).
MESSAGES: i18n.Table = i18n.Table("cli", "MESSAGES", {
    "no_path": "no path given; `shapecheck verify --help` shows how",
    "statistics_format": "--statistics prints text or json",
    "nothing_checked": "no spec files to check (a folder means the *.attn files below it, "
    "less what exclude and .gitignore skip); --allow-empty accepts that",
    "cannot_read_stdin": "cannot read standard input: {reason}",
    "lsp_missing": "the language server needs pygls and lsprotocol: "
    "python -m pip install 'attn-shapecheck[lsp]'",
    "fix_and_diff": "--fix writes the fixes and --diff only shows them: give one of them",
    "fixed": "Fixed {count} problem(s) in {files} file(s).",
    "would_fix": "Would fix {count} problem(s) in {files} file(s).",
    "cannot_read": "cannot read {path}: {reason}",
    "cannot_write_summary": "cannot write the step summary {path}: {reason}",
    "report_format": "cannot tell the report format from `{output}`; name it .html or .md, or "
    "give --format html|md",
    "what_spec": "the spec it reports on",
    "cannot_write": "cannot write {path}: {reason}",
    "report_written": "Wrote {path}.",
    "unknown_code": "unknown code `{code}`; `shapecheck explain` lists them all",
    "unknown_code_near": "unknown code `{code}`; did you mean `{name}`? `shapecheck explain` "
    "lists them all",
    "unknown_language": "{variable}={value} is not a language shapecheck speaks ({languages}); "
    "using English",
    "aborted": "aborted",
    "interrupted": "interrupted",
    "internal": "internal error: {error}\nThis is a bug in shapecheck; set SHAPECHECK_DEBUG=1 "
    "to see the traceback.",
})


class UsageFailure(Exception):
    """A problem with the command line or the files named on it (exit 2)."""


# --- shared option parsing -----------------------------------------------------------


def parse_bindings(values: Sequence[str]) -> dict[str, int]:
    """`--dim NAME=INT` (repeatable) -> {NAME: INT}; a bad one is a usage error."""
    from ..options import OptionError, parse_bindings as parse

    try:
        return parse(tuple(values))
    except OptionError as error:
        raise click.BadParameter(str(error), param_hint="--dim") from None


def _choose_language(context: click.Context, parameter: click.Parameter, value: str | None) -> None:
    if value is not None:
        i18n.set_language(value)


lang_option = click.option(
    "--lang", type=click.Choice(i18n.LANGUAGES, case_sensitive=False), default=None,
    expose_value=False, is_eager=True, callback=_choose_language,
    help=f"Language of the messages and the report (default: ${i18n.ENV}, else en).",
)

dim_option = click.option(
    "--dim", "dims", multiple=True, metavar="NAME=INT",
    help="Bind a dim to a size (repeatable). Binding a derived dim is checked against its definition.",
)

infer_option = click.option(
    "--infer/--no-infer", "infer", default=None,
    help="Infer the shapes of undeclared names in any spec (--infer), or in none: each is "
    "an error (--no-infer). Default: only in a spec that declares nothing (a sketch).",
)


def cannot_read(path: str | Path, error: OSError) -> str:
    return MESSAGES["cannot_read"].format(path=path, reason=error.strerror or error)


def cannot_write(path: str | Path, error: OSError) -> str:
    return MESSAGES["cannot_write"].format(path=path, reason=error.strerror or error)


STDOUT = "-"  # `report -o -`: the report goes to standard output


def check_output(path: str, protect: list[tuple[str, str]]) -> None:
    """Refuse a bad output path before any work (fileio's rules: not empty, not a folder,
    device or FIFO, not the spec, in a folder that exists)."""
    from ..fileio import check_target

    try:
        check_target(path, protect=protect)
    except OSError as error:
        raise UsageFailure(cannot_write(path, error)) from None


def use_color(choice: str, *, isatty: bool | None = None) -> bool:
    """Colour by no-color.org: an explicit ``--color`` wins; otherwise a non-empty
    ``NO_COLOR`` turns it off, a non-empty ``FORCE_COLOR`` turns it on off a
    terminal, and else colour means a terminal."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty() if isatty is None else isatty


def codes_list(values: Sequence[str]) -> tuple[str, ...]:
    """``--select SC4,SC501 --select SC2`` -> ("SC4", "SC501", "SC2")."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def selectors(values: Sequence[str], option: str, *, turning_off: bool) -> tuple[str, ...]:
    from ..config import selector_problem

    selectors = codes_list(values)
    for selector in selectors:
        problem = selector_problem(selector, turning_off=turning_off)
        if problem:
            raise click.BadParameter(problem, param_hint=option)
    return selectors


color_option = click.option(
    "--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
    help="Colour: auto follows NO_COLOR / FORCE_COLOR, then whether stdout is a terminal.")
config_option = click.option(
    "--config", "config", multiple=True, metavar="FILE | 'KEY = VALUE'",
    help="Use this configuration file for every spec (instead of the one found from each "
    "spec's folder upward), or override one key (repeatable).")
isolated_option = click.option(
    "--isolated", is_flag=True, help="Ignore every configuration file.")
stdin_filename_option = click.option(
    "--stdin-filename", metavar="PATH",
    help="The name of the spec read from `-` (standard input): used in messages and to "
    "find its configuration.")


def stdin_spec(path: str, stdin_filename: str | None) -> tuple[str, bytes | None, Path]:
    """`run -` and `report -`: the name the spec is shown as, its bytes (None: read
    ``path`` itself) and where its configuration is looked for."""
    from .walk import STDIN

    if path != STDIN:
        return path, None, Path(path)
    return stdin_filename or STDIN, read_stdin(), Path(stdin_filename or Path.cwd() / STDIN)


def finder_for(config: Sequence[str], isolated: bool, overrides: object | None = None) -> Finder:
    from ..config import ConfigError, Finder, Overrides

    try:
        return Finder(config=config, isolated=isolated,
                      overrides=overrides if isinstance(overrides, Overrides) else None)
    except ConfigError as error:
        raise UsageFailure(str(error)) from None


def read_stdin() -> bytes:
    try:
        return sys.stdin.buffer.read()
    except (OSError, AttributeError, ValueError) as error:
        raise UsageFailure(MESSAGES["cannot_read_stdin"].format(reason=error)) from None



EXIT_STATUS_HELP = """\b
Exit status:
  0  no error and no warning about the code (SC207 and SC602 are about
     shapecheck's limits and never fail; fail-on = "error" lets warnings pass)
  1  an error, or a warning about the code, remains (0 with --exit-zero)
  2  usage error, bad configuration, unreadable path, or internal failure"""


class Commands(click.Group):
    """The group whose commands load on use: `verify` imports none of the others' modules
    (each is a module of this package that registers its command when imported)."""

    MODULES = ("conform", "explain", "extract", "lsp", "report", "run", "verify")

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.MODULES and cmd_name not in self.commands:
            import_module(f"{__package__}.{cmd_name}")
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.MODULES) | set(self.commands))


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``, as ``click.version_option`` prints it; the version module is read only
    then (a `verify` never reads it: issue 36)."""
    if not value or ctx.resilient_parsing:
        return
    from .._version import __version__

    click.echo(f"shapecheck {__version__}", color=ctx.color)
    ctx.exit()


@click.group(cls=Commands,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog="""\b
Examples:
  shapecheck verify specs/                      check every *.attn below specs/
  shapecheck verify model.attn --format sarif   SARIF 2.1.0 for code scanning
  shapecheck run model.attn --dim N=128         verify, then execute with NumPy
  shapecheck report model.attn -o model.html    a shape-annotated report
  shapecheck explain SC301                      what a code means and how to fix it

""" + EXIT_STATUS_HELP)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              help="Show the version and exit.", callback=_show_version)
@lang_option
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Symbolic shape and formula checker for attention specs (.attn files)."""
    ctx.with_resource(depth.room())  # every pass may recurse as deep as a spec may nest

