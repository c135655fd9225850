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
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .. import depth, i18n
from .._version import __version__
from ..formats import FORMATS  # light: each format's module loads only when used

if TYPE_CHECKING:
    from ..config import Finder
    from .verify import FileFix, Outcome, Stdin

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


def _check_output(path: str, protect: list[tuple[str, str]]) -> None:
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


def _codes_list(values: Sequence[str]) -> tuple[str, ...]:
    """``--select SC4,SC501 --select SC2`` -> ("SC4", "SC501", "SC2")."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _selectors(values: Sequence[str], option: str, *, turning_off: bool) -> tuple[str, ...]:
    from ..config import selector_problem

    selectors = _codes_list(values)
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


def _stdin_spec(path: str, stdin_filename: str | None) -> tuple[str, bytes | None, Path]:
    """`run -` and `report -`: the name the spec is shown as, its bytes (None: read
    ``path`` itself) and where its configuration is looked for."""
    from .walk import STDIN

    if path != STDIN:
        return path, None, Path(path)
    return stdin_filename or STDIN, _read_stdin(), Path(stdin_filename or Path.cwd() / STDIN)


def finder_for(config: Sequence[str], isolated: bool, overrides: object | None = None) -> Finder:
    from ..config import ConfigError, Finder, Overrides

    try:
        return Finder(config=config, isolated=isolated,
                      overrides=overrides if isinstance(overrides, Overrides) else None)
    except ConfigError as error:
        raise UsageFailure(str(error)) from None


# --- commands ---------------------------------------------------------------------------


EXIT_STATUS_HELP = """\b
Exit status:
  0  no errors (warnings allowed unless --strict)
  1  at least one error in at least one spec (0 with --exit-zero)
  2  usage error, bad configuration, unreadable path, or internal failure"""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             epilog="""\b
Examples:
  shapecheck verify specs/                      check every *.attn below specs/
  shapecheck verify model.attn --format sarif   SARIF 2.1.0 for code scanning
  shapecheck run model.attn --dim N=128         verify, then execute with NumPy
  shapecheck report model.attn -o model.html    a shape-annotated report
  shapecheck explain SC301                      what a code means and how to fix it

""" + EXIT_STATUS_HELP)
@click.version_option(__version__, "--version", prog_name="shapecheck",
                      message="%(prog)s %(version)s")
@lang_option
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Symbolic shape and formula checker for attention specs (.attn files)."""
    ctx.with_resource(depth.room())  # every pass may recurse as deep as a spec may nest


VERIFY_EPILOG = """\b
Examples:
  shapecheck verify specs/                          every *.attn below specs/
  shapecheck verify model.attn --dim N=128 --dim H=8
  shapecheck verify specs/ --select SC4 --ignore SC402 --statistics
  shapecheck verify specs/ --format sarif > shapecheck.sarif
  cat model.attn | shapecheck verify - --stdin-filename specs/model.attn
  shapecheck verify specs/ --fix                    apply the safe fixes

\b
Configuration: [tool.shapecheck] in pyproject.toml, or shapecheck.toml, found
from each spec's folder upward (see docs/configuration.md). Suppress a warning
with `# noqa: SC402` on its statement; errors cannot be suppressed.

""" + EXIT_STATUS_HELP


@cli.command(epilog=VERIFY_EPILOG)
@lang_option
@click.argument("paths", nargs=-1)
@click.option("--format", "--output-format", "fmt", type=click.Choice(FORMATS),
              default="text", show_default=True, help="Output format.")
@click.option("--strict/--no-strict", default=None,
              help="Warnings count as errors (default: the configuration's `strict`, else off).")
@color_option
@dim_option
@click.option("--select", multiple=True, metavar="CODES",
              help="Report only these warnings and notes (codes or prefixes, comma-separated, "
              "ALL); replaces the configuration's selection. Errors are always reported.")
@click.option("--extend-select", multiple=True, metavar="CODES",
              help="Add to the selection.")
@click.option("--ignore", multiple=True, metavar="CODES",
              help="Do not report these warnings and notes (errors cannot be ignored).")
@click.option("--exclude", multiple=True, metavar="PATTERNS",
              help="Folders and files a walk skips (gitignore patterns, comma-separated); "
              "replaces the configuration's `exclude` and its defaults.")
@click.option("--extend-exclude", multiple=True, metavar="PATTERNS",
              help="More patterns to skip, on top of `exclude`.")
@config_option
@isolated_option
@click.option("--statistics", is_flag=True,
              help="Print how often each code was reported, instead of the diagnostics.")
@click.option("-q", "--quiet", is_flag=True,
              help="Print the diagnostics only: no summary line.")
@click.option("--exit-zero", is_flag=True,
              help="Exit 0 even when a spec has errors (2 still means a tool failure).")
@click.option("--stdin-filename", metavar="PATH",
              help="The name of the spec read from `-` (standard input): used in messages, "
              "to find its configuration, and for per-file-ignores.")
@click.option("--base-dir", type=click.Path(file_okay=False), metavar="DIR",
              help="SARIF and GitHub paths are relative to DIR (default: the repository root "
              "when inside a git repository, else the current folder).")
@click.option("--allow-empty", is_flag=True,
              help="Checking no file at all is not an error.")
@click.option("--fix", is_flag=True,
              help="Apply the safe fixes (exact `help:` edits) to the files, then report what "
              "remains. A spec read from `-` is printed fixed instead.")
@click.option("--diff", is_flag=True,
              help="Print the safe fixes as a unified diff instead of the report; write nothing.")
@infer_option
def verify(paths: tuple[str, ...], fmt: str, strict: bool | None, color: str,
           dims: tuple[str, ...], select: tuple[str, ...], extend_select: tuple[str, ...],
           ignore: tuple[str, ...], exclude: tuple[str, ...], extend_exclude: tuple[str, ...],
           config: tuple[str, ...], isolated: bool, statistics: bool, quiet: bool,
           exit_zero: bool, stdin_filename: str | None, base_dir: str | None,
           allow_empty: bool, fix: bool, diff: bool, infer: bool | None) -> None:
    """Check spec files (a folder means every *.attn below it; `-` reads standard input)."""
    from ..config import ConfigError, Overrides
    from ..formats import github_step_summary, render, render_statistics
    from .verify import TOOL_CODES, Stdin, lint
    from .verify import fix as apply_fixes

    bindings = parse_bindings(dims)
    if not paths:
        if stdin_filename is None:
            raise click.UsageError(MESSAGES["no_path"])
        paths = ("-",)
    if fix and diff:
        raise click.UsageError(MESSAGES["fix_and_diff"])
    if statistics and fmt not in ("text", "json"):
        raise click.BadParameter(MESSAGES["statistics_format"], param_hint="--format")
    overrides = Overrides(
        select=_selectors(select, "--select", turning_off=False) if select else None,
        extend_select=_selectors(extend_select, "--extend-select", turning_off=False),
        ignore=_selectors(ignore, "--ignore", turning_off=True),
        exclude=_codes_list(exclude) if exclude else None,
        extend_exclude=_codes_list(extend_exclude),
        strict=strict,
    )
    finder = finder_for(config, isolated, overrides)
    stdin = Stdin(_read_stdin(), stdin_filename) if "-" in paths else None
    try:
        outcome = lint(paths, finder, bindings, stdin=stdin, infer=infer)
    except ConfigError as error:
        raise UsageFailure(str(error)) from None
    nothing = not outcome.results
    if diff or fix:
        fixed = apply_fixes(outcome, bindings, write=fix, stdin=stdin, infer=infer)
        if diff:
            if nothing and not allow_empty:
                raise UsageFailure(MESSAGES["nothing_checked"])
            sys.exit(_show_diff(outcome, fixed, fmt, strict=strict, exit_zero=exit_zero))
        if stdin is not None:
            _print_fixed_stdin(fixed, stdin)
    strict_now = any(settings.strict for settings in outcome.settings.values()) \
        if outcome.settings else bool(strict) or finder.settings_for(Path.cwd()).strict
    colored = use_color(color)
    root = _base_dir(base_dir)
    if statistics:
        out = render_statistics(outcome.results, outcome.notices, fmt)
    else:
        out = render(outcome.results, fmt, color=colored, strict=strict_now,
                     notices=outcome.notices, base_dir=root, quiet=quiet)
    # With `--fix -`, standard output holds the fixed spec: the report goes to stderr.
    report_to_stderr = fix and stdin is not None
    # click strips ANSI codes off a terminal unless told; `--color always` means it.
    click.echo(out, nl=False, color=colored, err=report_to_stderr)
    if fix and not quiet:
        count = sum(item.applied for item in fixed)
        if count:
            click.echo(MESSAGES["fixed"].format(count=count, files=len(fixed)),
                       err=report_to_stderr or fmt != "text")
    if fmt != "text":  # the document is on stdout; a person reading the log sees these
        for result in outcome.results:
            for diagnostic in result.diagnostics:
                if diagnostic.code in TOOL_CODES:
                    click.echo(f"shapecheck: {diagnostic.code}: {diagnostic.message}", err=True)
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if fmt == "github" and summary_file:
        _append(summary_file, github_step_summary(outcome.results, strict=strict_now))
    if nothing and not allow_empty:
        raise UsageFailure(MESSAGES["nothing_checked"])
    if outcome.tool_failure:
        sys.exit(EXIT_USAGE)
    failed = not all(r.ok(strict_now) for r in outcome.results) or (
        strict_now and bool(outcome.notices))
    sys.exit(EXIT_ERRORS if failed and not exit_zero else EXIT_OK)


def _show_diff(outcome: Outcome, fixed: Sequence[FileFix], fmt: str, *, strict: bool | None,
               exit_zero: bool) -> int:
    """`--diff`: the changes (text: a unified diff on stdout, how many on stderr; json:
    the document of what is left after the fixes, each file's diff a field). The exit
    status: 1 when a file would change or errors remain after the fixes, else 0."""
    from ..messages.fixes import unified_diff

    diffs = {item.path: unified_diff(item.path, item.before, item.after) for item in fixed}
    after = {item.path: item.result for item in fixed if item.result is not None}
    results = [after.get(result.path, result) for result in outcome.results]
    strict_now = any(settings.strict for settings in outcome.settings.values()) or bool(strict)
    if fmt == "json":
        from ..formats.json_format import render_json

        click.echo(render_json(results, strict=strict_now, notices=outcome.notices, diffs=diffs),
                   nl=False)
    else:
        for item in fixed:
            click.echo(diffs[item.path], nl=False)
        count = sum(item.applied for item in fixed)
        click.echo(MESSAGES["would_fix"].format(count=count, files=len(fixed)), err=True)
    if outcome.tool_failure:
        return EXIT_USAGE
    failed = bool(fixed) or not all(result.ok(strict_now) for result in results)
    return EXIT_ERRORS if failed and not exit_zero else EXIT_OK


def _print_fixed_stdin(fixed: Sequence[FileFix], stdin: Stdin) -> None:
    """`--fix -`: the fixed spec (or the spec as it was) on stdout, as ruff does."""
    after = next((item.after for item in fixed if item.path == stdin.display), None)
    if after is None:
        data = stdin.data
        click.echo(data, nl=False)
    else:
        bom = "\ufeff" if stdin.data.startswith(b"\xef\xbb\xbf") else ""
        click.echo(bom + after, nl=False)


def _read_stdin() -> bytes:
    try:
        return sys.stdin.buffer.read()
    except (OSError, AttributeError, ValueError) as error:
        raise UsageFailure(MESSAGES["cannot_read_stdin"].format(reason=error)) from None


def _base_dir(given: str | None) -> Path:
    if given is not None:
        return Path(os.path.abspath(given))
    from .walk import repository_root

    return repository_root(Path.cwd()) or Path.cwd()


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
@click.option("--backend", type=click.Choice(["numpy", "torch"]), default="numpy",
              show_default=True,
              help="Numeric backend (torch: the optional extra attn-shapecheck[torch]).")
@click.option("--device", default="cpu", show_default=True, metavar="cpu|cuda",
              help="Where the torch backend runs (cuda, cuda:N where there is one).")
@click.option("--fused", type=click.Choice(["auto", "off"]), default="auto", show_default=True,
              help="Run each attention pattern fused where it can (NumPy: block by block, "
              "O(N·d) memory; torch: one scaled_dot_product_attention), or never.")
@click.option("--max-memory", metavar="SIZE",
              help="Refuse a run estimated to need more (4GiB, 512MiB, unlimited). "
              "Default: 4 GiB, or half the machine's memory if less.")
@color_option
@config_option
@isolated_option
@stdin_filename_option
@infer_option
def run(path: str, dims: tuple[str, ...], input_files: tuple[str, ...], archive: str | None,
        seed: int, save: str | None, save_all: bool, dtype: str, backend: str, device: str,
        fused: str, max_memory: str | None, color: str, config: tuple[str, ...], isolated: bool,
        stdin_filename: str | None, infer: bool | None) -> None:
    """Verify a spec, then execute it (NumPy, or PyTorch) and report its outputs.

    The configuration's [dims] are default bindings (--dim wins), and its rule
    selection and the spec's `# noqa` comments apply to the warnings shown.
    """
    from .run import RunOptions, run_command

    bindings = parse_bindings(dims)
    shown, source, where = _stdin_spec(path, stdin_filename)
    settings = finder_for(config, isolated).settings_for(where)
    options = RunOptions(shown, bindings, input_files, archive, seed, save, save_all,
                         dtype, max_memory, use_color(color), ignore=settings.disabled(str(where)),
                         defaults=dict(settings.dims), infer=infer, backend=backend,
                         device=device, fused=fused, source=source)
    sys.exit(run_command(options))


@cli.command(name="conform")
@lang_option
@click.argument("path", type=click.Path())
@click.argument("target", metavar="MODULE:TARGET")
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
@click.option("--fused", type=click.Choice(["auto", "off"]), default="auto", show_default=True,
              help="Run the spec's side with each attention pattern fused where it can, or "
              "never (as run --fused: both compute the same numbers).")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Colour in diagnostics.")
@click.option("--init", "init", multiple=True, metavar="KW=EXPR",
              help="Build the module class or factory with KW=EXPR (dims and literals: "
              "n_embd=H*hs, bias=True). Repeatable.")
@click.option("--arg", "args", multiple=True, metavar="KW=EXPR",
              help="Pass forward's KW as EXPR: spec names, dims, literals, tuples "
              "(position_embeddings=(cos,sin), attention_mask=None). Repeatable.")
@click.option("--mask", "masks", multiple=True, metavar="SPEC=additive|additive-min|keep|drop",
              help="Pass the spec's bool mask SPEC in the module's convention (lifted to 4-D). "
              "Repeatable.")
@click.option("--param", "params", multiple=True, metavar="SPEC=KEY",
              help="The spec's param (or input) SPEC is the module's tensor KEY (KEY.T: its "
              "transpose), instead of the matching by name and shape. Repeatable.")
@click.option("--output", "outputs", multiple=True, metavar="SPEC=INDEX|KEY",
              help="Compare the spec's output SPEC with the returned entry INDEX or KEY only. "
              "Repeatable.")
def conform_command(path: str, target: str, dims: tuple[str, ...], names: tuple[str, ...],
                    layouts: tuple[str, ...], dtype: str, cases: int, seed: int,
                    rtol: float | None, atol: float | None, framework: str, device: str,
                    no_shrink: bool, fused: str, color: str, init: tuple[str, ...],
                    args: tuple[str, ...], masks: tuple[str, ...], params: tuple[str, ...],
                    outputs: tuple[str, ...]) -> None:
    """Check that a function or a PyTorch module computes what a spec says."""
    from ..pytorch.conform import ConformOptions, command

    options = ConformOptions(path, target, parse_bindings(dims), names, layouts, dtype, cases,
                             seed, rtol, atol, framework, device, not no_shrink, use_color(color),
                             init=init, args=args, masks=masks, params=params, outputs=outputs,
                             fused=fused)
    sys.exit(command(options))


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
    from ..report import build_report, format_for, render, write_atomically

    bindings = parse_bindings(dims)
    to_stdout = output == STDOUT
    fmt = fmt or ("md" if to_stdout else format_for(output))
    if fmt is None:
        raise UsageFailure(MESSAGES["report_format"].format(output=output))
    shown, source, where = _stdin_spec(path, stdin_filename)
    protect = [(str(where), MESSAGES["what_spec"])]
    if not to_stdout:
        _check_output(output, protect)
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
            program = _traced_program(path, bindings, ignore)
    except OSError as error:
        raise UsageFailure(cannot_read(path, error)) from None
    bindings = {**default_bindings(settings.dims, program.dims.dims), **bindings}
    built = build_report(program, shown, bindings, dtype)
    if to_stdout:
        click.echo(render(built, fmt), nl=False)
        sys.exit(EXIT_OK if program.ok else EXIT_ERRORS)
    try:
        write_atomically(output, render(built, fmt), protect=protect)
    except OSError as error:
        raise UsageFailure(cannot_write(output, error)) from None
    # Like `verify`: where it went, then the verdict in verify's own words.
    from ..formats._common import Totals
    from ..formats.text import summary_line

    click.echo(MESSAGES["report_written"].format(path=output))
    click.echo(summary_line(Totals(1, built.errors, built.warnings), strict=False))
    sys.exit(EXIT_OK if program.ok else EXIT_ERRORS)


@cli.command(epilog="""\b
Examples:
  shapecheck extract model.py:CausalSelfAttention -o attention.attn
  shapecheck extract model.py:CausalSelfAttention --init n_head=H --init n_embd=64
  shapecheck extract model.py:make -o -            a factory returning (module, inputs)

\b
Exit status:
  0  the spec was written (an operator it does not know is a warning, SC602)
  1  the module cannot be traced (SC601, torch's reason at the line)
  2  usage error, a target that cannot be loaded or built, an unwritable output""")
@lang_option
@click.argument("target")
@click.option("-o", "--output", "output", default=STDOUT, type=click.Path(), metavar="OUT",
              help="The spec to write (default `-`: standard output).")
@click.option("--init", "init", multiple=True, metavar="NAME=SIZE|NAME=DIM",
              help="A size for a constructor parameter (`n_head=4`), or the dim name it takes "
              "in the spec (`n_head=H`); repeatable.")
def extract(target: str, output: str, init: tuple[str, ...]) -> None:
    """Trace a PyTorch module with torch.export and write it as a spec (docs/torch.md)."""
    from ..messages.diagnostics import Span
    from ..pytorch.front import ExtractError, Untraceable, display
    from ..pytorch.front import extract as trace

    if output != STDOUT:
        _check_output(output, [])
    try:
        extraction = trace(target, init)
    except ExtractError as error:
        raise UsageFailure(str(error)) from None
    except Untraceable as failed:
        from ..messages import codes

        where = f"{display(failed.location.path)}:{failed.location.line}: " \
            if failed.location else ""
        diagnostic = codes.UNTRACEABLE.diag(Span(1, 1, 1, 1), target=target, reason=failed.reason)
        click.echo(f"{where}error[{diagnostic.code}]: {diagnostic.message}", err=True)
        sys.exit(EXIT_ERRORS)
    from ..messages import codes

    for operator, location, name in extraction.unknown:
        where = f"{display(location.path)}:{location.line}: " if location else ""
        diagnostic = codes.UNKNOWN_OPERATOR.diag(Span(1, 1, 1, 1), operator=operator,
                                                 name=name or "?")
        click.echo(f"{where}warning[{diagnostic.code}]: {diagnostic.message}", err=True)
    if output == STDOUT:
        click.echo(extraction.text, nl=False)
        sys.exit(EXIT_OK)
    from ..fileio import write_atomic
    from ..pytorch.front.errors import MESSAGES as FRONT

    try:
        write_atomic(output, extraction.text.encode("utf-8"))
    except OSError as error:
        raise UsageFailure(cannot_write(output, error)) from None
    click.echo(FRONT["written"].format(path=output, statements=len(extraction.lowered.statements),
                                       target=target))
    sys.exit(EXIT_OK)


def _traced_program(target: str, bindings: dict[str, int], ignore: frozenset[str]) -> object:
    from ..api import check_text
    from ..pytorch.front import ExtractError, Untraceable, extract as trace

    try:
        extraction = trace(target)
    except (ExtractError, Untraceable) as error:
        raise UsageFailure(str(error) if isinstance(error, ExtractError) else
                           f"{target}: {error.reason}") from None
    return check_text(extraction.text, bindings, ignore=ignore, infer=False)


@cli.command(epilog="""\b
Attach it from an editor as a language server for .attn files that runs
`shapecheck lsp` (docs/editors.md shows Neovim and VS Code).""")
@lang_option
def lsp() -> None:
    """Run the language server over stdin/stdout (for editors)."""
    from .. import lsp as server

    if not server.available():
        raise UsageFailure(MESSAGES["lsp_missing"])
    server.serve()


@cli.command()
@lang_option
@click.argument("code", required=False)
def explain(code: str | None) -> None:
    """Explain a diagnostic code, by number (SC301) or slug (matmul-inner-mismatch);
    without CODE, list them all."""
    import difflib

    from ..messages import codes

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
