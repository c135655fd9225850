"""The `shapecheck` command line (contract: shared/spec/cli.md): one module per command
(`verify`, `run`, `report`, `conform`, `extract`, `explain`, `lsp`, each loaded when its
command runs: `common.Commands`), what they share in `common`, and here the entry point.

Exit status: 0 no errors, 1 errors in a spec, 2 usage error, unreadable file
or internal failure. No traceback reaches the user; set SHAPECHECK_DEBUG=1 to
see one for an internal failure.
"""

from __future__ import annotations

import contextvars
import os
import sys
import traceback
from collections.abc import Sequence

import click

from .. import i18n
from . import collector
from .common import EXIT_OK, EXIT_USAGE, MESSAGES, UsageFailure, cli

__all__ = ["cli", "main"]


# --- entry point --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI, turning every failure into a message and an exit status."""
    if argv is None:  # the console script, `python -m shapecheck`: this process is ours
        collector.own_process()
    try:
        # In a context of its own: `--lang` chooses the language for this call only (a test
        # or a program that calls `main` several times gets no language left behind).
        contextvars.copy_context().run(_main, argv)
    finally:
        collector.before_exit()


def _main(argv: Sequence[str] | None) -> None:
    _check_language_variable()
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="shapecheck",
                 standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(EXIT_USAGE)
    except click.exceptions.Abort:
        click.echo(MESSAGES["aborted"], err=True)
        sys.exit(EXIT_USAGE)
    except UsageFailure as error:
        click.echo(f"shapecheck: {error}", err=True)
        sys.exit(EXIT_USAGE)
    except SystemExit:
        raise
    except BrokenPipeError:
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        click.echo(MESSAGES["interrupted"], err=True)
        sys.exit(EXIT_USAGE)
    except BaseException as error:  # an internal failure: a bug, never a user mistake
        if os.environ.get("SHAPECHECK_DEBUG"):
            traceback.print_exc()
        click.echo("shapecheck: " + MESSAGES["internal"].format(error=f"{type(error).__name__}: {error}"),
                   err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_OK)


def _check_language_variable() -> None:
    """An unknown ``SHAPECHECK_LANG`` is said once, not silently ignored."""
    value = os.environ.get(i18n.ENV)
    if value and i18n.normalise(value) is None:
        click.echo("shapecheck: " + MESSAGES["unknown_language"].format(
            variable=i18n.ENV, value=value, languages=", ".join(i18n.LANGUAGES)), err=True)


if __name__ == "__main__":
    main()
