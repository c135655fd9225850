"""The `shapecheck` command line (contract: shared/spec/cli.md).

Exit status: 0 no errors, 1 errors in a spec, 2 usage error, unreadable file
or internal failure. No traceback reaches the user; set SHAPECHECK_DEBUG=1 to
see one for an internal failure.
"""

from __future__ import annotations

import contextvars
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from . import i18n
from ._version import __version__
from .formats import FORMATS  # light: each format's module loads only when used

if TYPE_CHECKING:
    from .diagnostics import Diagnostic

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2

# The command line's own messages (click's parsing errors and --help texts are click's and
# stay in English: see docs/i18n.md).
MESSAGES: i18n.Table = i18n.Table("cli", "MESSAGES", {
    "not_name_int": "`{item}` is not NAME=INT",
    "not_positive": "`{item}`: the value must be a positive integer",
    "bound_twice": "`{name}` is bound twice",
    "no_such_path": "{path}: no such file or directory",
    "cannot_read": "cannot read {path}: {reason}",
    "cannot_write_summary": "cannot write the step summary {path}: {reason}",
    "report_format": "cannot tell the report format from `{output}`; name it .html or .md, or "
    "give --format html|md",
    "report_over_spec": "the report {output} would overwrite the spec it reports on",
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
    bindings: dict[str, int] = {}
    for item in values:
        name, sep, number = item.partition("=")
        name, number = name.strip(), number.strip()
        if not sep or not name.isidentifier():
            raise click.BadParameter(MESSAGES["not_name_int"].format(item=item), param_hint="--dim")
        if not number.isdigit() or int(number) <= 0 or len(number) > 18:
            raise click.BadParameter(MESSAGES["not_positive"].format(item=item), param_hint="--dim")
        if name in bindings and bindings[name] != int(number):
            raise click.BadParameter(MESSAGES["bound_twice"].format(name=name), param_hint="--dim")
        bindings[name] = int(number)
    return bindings


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


def spec_files(paths: Sequence[str]) -> Iterator[Path]:
    """Files as given; a folder means every `*.attn` below it, in sorted order.

    A file named twice (`verify examples examples/broken`) is checked once.
    """
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.attn") if p.is_file())
        elif path.exists():
            found = [path]
        else:
            raise UsageFailure(MESSAGES["no_such_path"].format(path=raw))
        for file in found:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                yield file


def cannot_read(path: str | Path, error: OSError) -> str:
    return MESSAGES["cannot_read"].format(path=path, reason=error.strerror or error)


def use_color(choice: str) -> bool:
    if "NO_COLOR" in os.environ:  # the contract: never when NO_COLOR is set (even empty)
        return False
    if choice != "auto":
        return choice == "always"
    return sys.stdout.isatty()


# --- commands ---------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="shapecheck",
                      message="%(prog)s %(version)s")
@lang_option
def cli() -> None:
    """Symbolic shape and formula checker for attention specs (.attn files)."""


@cli.command()
@lang_option
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS),
              default="text", show_default=True, help="Output format.")
@click.option("--strict", is_flag=True, help="Warnings count as errors.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Colour in text output (auto: on a terminal, unless NO_COLOR is set).")
@dim_option
def verify(paths: tuple[str, ...], fmt: str, strict: bool, color: str, dims: tuple[str, ...]) -> None:
    """Check spec files (a folder means every *.attn below it)."""
    from .api import check_path, file_result
    from .formats import github_step_summary, render

    bindings = parse_bindings(dims)
    files = list(spec_files(paths))
    results = []
    declared: set[str] = set()
    unreadable = False
    for path in files:
        try:
            # With several files a binding applies to those that declare the dim;
            # one that no file declares is reported once, below.
            program = check_path(path, bindings, warn_unknown_bindings=len(files) == 1)
        except OSError as error:
            click.echo(f"shapecheck: {cannot_read(path, error)}", err=True)
            unreadable = True
            continue
        declared.update(program.dims.dims)
        results.append(file_result(program, str(path)))
    if len(files) > 1 and results:
        results[0].diagnostics.extend(_unknown_bindings(bindings, declared))
    colored = use_color(color)
    # click strips ANSI codes off a terminal unless told; `--color always` means it.
    click.echo(render(results, fmt, color=colored, strict=strict), nl=False, color=colored)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if fmt == "github" and summary_file:
        _append(summary_file, github_step_summary(results, strict=strict))
    if unreadable:
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_OK if all(r.ok(strict) for r in results) else EXIT_ERRORS)


def _unknown_bindings(bindings: dict[str, int], declared: set[str]) -> list[Diagnostic]:
    from . import codes
    from .diagnostics import Span

    return [codes.UNKNOWN_BINDING.diag(Span(1, 1, 1, 1), name=name, value=value)
            for name, value in bindings.items() if name not in declared]


def _append(path: str, text: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as error:
        click.echo("shapecheck: " + MESSAGES["cannot_write_summary"].format(path=path, reason=error),
                   err=True)


@cli.command()
@lang_option
@click.argument("path", type=click.Path())
@dim_option
@click.option("--input", "input_files", multiple=True, metavar="NAME=FILE.npy",
              help="Load an input or param from a .npy file (repeatable; never with pickle).")
@click.option("--inputs", "archive", metavar="FILE.npz",
              help="Load inputs and params from a .npz archive (keys: their names).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed for the inputs and params that are not supplied.")
@click.option("--save", metavar="FILE.npz", help="Write the outputs, keyed by name.")
@click.option("--save-all", is_flag=True, help="With --save: write every intermediate too.")
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default="float64",
              show_default=True, help="Element type of the computation, end to end.")
@click.option("--backend", type=click.Choice(["numpy"]), default="numpy", show_default=True,
              help="Numeric backend.")
@click.option("--max-memory", metavar="SIZE",
              help="Refuse a run estimated to need more (4GiB, 512MiB, unlimited). "
              "Default: 4 GiB, or half the machine's memory if less.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Colour in diagnostics.")
def run(path: str, dims: tuple[str, ...], input_files: tuple[str, ...], archive: str | None,
        seed: int, save: str | None, save_all: bool, dtype: str, backend: str,
        max_memory: str | None, color: str) -> None:
    """Verify a spec, then execute it with NumPy and report its outputs."""
    from .backend.command import RunOptions, run_command

    options = RunOptions(path, parse_bindings(dims), input_files, archive, seed, save, save_all,
                         dtype, max_memory, use_color(color))
    sys.exit(run_command(options))


@cli.command(name="conform")
@lang_option
@click.argument("path", type=click.Path())
@click.argument("target", metavar="MODULE:FUNCTION")
@dim_option
@click.option("--name", "names", multiple=True, metavar="SPEC=PARAM",
              help="Pass the spec's input, param or dim SPEC as the function's parameter PARAM "
              "(an output: read it from the returned mapping's key PARAM). Repeatable.")
@click.option("--layout", "layouts", multiple=True, metavar="NAME=transpose|PERM",
              help="The function takes (or returns) NAME with its last two axes swapped, or its "
              "axes permuted (NAME=1,0,2). Repeatable.")
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default="float64",
              show_default=True, help="Element type of the generated inputs and the spec's run.")
@click.option("--cases", type=click.IntRange(min=1), default=5, show_default=True,
              help="How many admissible bindings to try.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed for the bindings and the generated inputs.")
@click.option("--rtol", type=click.FloatRange(min=0), help="Relative tolerance (default: by dtype).")
@click.option("--atol", type=click.FloatRange(min=0), help="Absolute tolerance (default: by dtype).")
@click.option("--framework", type=click.Choice(["auto", "numpy", "torch"]), default="auto",
              show_default=True,
              help="Arrays or tensors (auto: tensors when the function's module imports torch).")
@click.option("--device", default="cpu", show_default=True, help="Device of the torch tensors.")
@click.option("--no-shrink", "no_shrink", is_flag=True,
              help="Report the first failing binding as found, without shrinking it.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Colour in diagnostics.")
def conform_command(path: str, target: str, dims: tuple[str, ...], names: tuple[str, ...],
                    layouts: tuple[str, ...], dtype: str, cases: int, seed: int,
                    rtol: float | None, atol: float | None, framework: str, device: str,
                    no_shrink: bool, color: str) -> None:
    """Check that a function (NumPy or PyTorch) computes what a spec says."""
    from .conform import ConformOptions, command

    options = ConformOptions(path, target, parse_bindings(dims), names, layouts, dtype, cases,
                             seed, rtol, atol, framework, device, not no_shrink, use_color(color))
    sys.exit(command(options))


@cli.command()
@lang_option
@click.argument("path", type=click.Path())
@click.option("-o", "--output", "output", required=True, type=click.Path(), metavar="OUT",
              help="The report to write: .html or .md (by its suffix, unless --format says).")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), default=None,
              help="Report format (default: from OUT's suffix).")
@click.option("--dtype", type=click.Choice(["float32", "float64"]), default="float64",
              show_default=True, help="Element type for the byte counts.")
@dim_option
def report(path: str, output: str, fmt: str | None, dtype: str, dims: tuple[str, ...]) -> None:
    """Write a shape-annotated report of one spec (HTML or Markdown)."""
    from .api import check_path
    from .report import build_report, format_for, render, write_atomically

    bindings = parse_bindings(dims)
    fmt = fmt or format_for(output)
    if fmt is None:
        raise UsageFailure(MESSAGES["report_format"].format(output=output))
    if Path(output).exists() and Path(path).exists() and Path(output).samefile(path):
        raise UsageFailure(MESSAGES["report_over_spec"].format(output=output))
    try:
        program = check_path(path, bindings)
    except OSError as error:
        raise UsageFailure(cannot_read(path, error)) from None
    built = build_report(program, path, bindings, dtype)
    try:
        write_atomically(output, render(built, fmt))
    except OSError as error:
        raise UsageFailure(MESSAGES["cannot_write"].format(path=output, reason=error.strerror or error)) \
            from None
    # Like `verify`: where it went, then the verdict in verify's own words.
    from .formats._common import Totals
    from .formats.text import summary_line

    click.echo(MESSAGES["report_written"].format(path=output))
    click.echo(summary_line(Totals(1, built.errors, built.warnings), strict=False))
    sys.exit(EXIT_OK if program.ok else EXIT_ERRORS)


@cli.command()
@lang_option
@click.argument("code", required=False)
def explain(code: str | None) -> None:
    """Explain a diagnostic code, by number (SC301) or slug (matmul-inner-mismatch);
    without CODE, list them all."""
    import difflib

    from . import codes

    if code is None:
        for entry in codes.REGISTRY.values():
            click.echo(f"{entry.id}  {entry.severity.value:<7}  {entry.name}: {entry.text('summary')}")
        return
    text = codes.explain(code)
    if text is None:
        names = [entry.name for entry in codes.REGISTRY.values()]
        close = difflib.get_close_matches(code.lower(), names, n=1)
        if close:
            raise UsageFailure(MESSAGES["unknown_code_near"].format(code=code, name=close[0]))
        raise UsageFailure(MESSAGES["unknown_code"].format(code=code))
    click.echo(text, nl=False)


# --- entry point --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI, turning every failure into a message and an exit status."""
    # In a context of its own: `--lang` chooses the language for this call only (a test
    # or a program that calls `main` several times gets no language left behind).
    contextvars.copy_context().run(_main, argv)


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
