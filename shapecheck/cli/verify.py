"""`shapecheck verify`: walk, configure, check each file, render (contract: shared/spec/cli.md).

The command's logic has one entry point, :func:`lint`. Each file is checked **in
isolation**: a path that cannot be read becomes SC007 for that path, and a failure inside
shapecheck while checking one file becomes SC006 for that file, so every other file is
still checked and reported in every format; either makes the run a tool failure
(exit 2). A ``--dim`` that no checked spec declares is one run-level notice
(SC207), not a diagnostic of some file.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..messages import codes
from ..config import Finder, Settings
from ..messages.diagnostics import Diagnostic, FileResult, Span
from ..formats import FORMATS  # light: each format's module loads only when used
from ..formats.common import Totals
from ..records import Record
from .common import (
    EXIT_ERRORS, EXIT_OK, EXIT_STATUS_HELP, EXIT_USAGE, MESSAGES, UsageFailure, cli, codes_list,
    color_option,
    config_option, dim_option, finder_for, infer_option, isolated_option, lang_option,
    parse_bindings, read_stdin, selectors, use_color,
)
from . import collector
from .walk import STDIN, Target, targets

if TYPE_CHECKING:
    from ..check.program import Program

#: Codes that describe a failure of the tool, not a mistake in a spec: SARIF carries
#: them as tool execution notifications, and they make the exit status 2.
TOOL_CODES = frozenset({"SC006", "SC007", "SC603"})
FILE_START = Span(1, 1, 1, 1)


class Outcome(Record):
    """Everything a format renders: one result per file, and run-level notices."""

    results: list[FileResult] = field(default_factory=list)
    notices: list[Diagnostic] = field(default_factory=list)
    settings: dict[str, Settings] = field(default_factory=dict)  # path -> its settings

    @property
    def tool_failure(self) -> bool:
        return any(d.code in TOOL_CODES for r in self.results for d in r.diagnostics)


class Stdin(Record, frozen=True):
    """The spec read from standard input (``-``), and the name it is checked as."""

    data: bytes
    name: str | None = None

    @property
    def display(self) -> str:
        return self.name or STDIN


def lint(paths: Sequence[str], finder: Finder, bindings: Mapping[str, int], *,
         stdin: Stdin | None = None, infer: bool | None = None,
         init: tuple[str, ...] = ()) -> Outcome:
    """Check every file the paths name; ``infer`` as in ``api.check_text`` (--infer);
    ``init`` builds a Python target named on the command line (``--init``)."""
    outcome = Outcome()
    declared: set[str] = set()
    checked = 0  # files checked to the end (not unreadable, no internal failure)
    python = [raw for raw in paths if _is_python(raw)]
    paths = [raw for raw in paths if raw not in python]
    for raw in python:  # Python targets: traced (torch is imported only here)
        for result in check_python(raw, finder, bindings, init):
            outcome.results.append(result)
            checked += not any(d.code in TOOL_CODES for d in result.diagnostics)
            declared.update(bindings)
    for raw in paths:  # a folder also checks the modules its configuration lists
        if Path(raw).is_dir():
            for target, init in _configured(finder, Path(raw)):
                outcome.results.extend(check_python_target(target, init, finder, bindings))
    for target in _with_stdin(paths, finder):
        if target is None:
            assert stdin is not None
            settings = finder.settings_for(Path(stdin.name or Path.cwd() / STDIN))
            result, dims = check_file(stdin.display, stdin.data, settings, bindings, infer)
        elif target.problem is not None:
            outcome.results.append(unreadable(str(target.path), target.problem))
            continue
        else:
            settings = finder.settings_for(target.path)
            result, dims = check_file(str(target.path), None, settings, bindings, infer)
        outcome.settings[result.path] = settings
        outcome.results.append(result)
        declared.update(dims)
        checked += not any(d.code in TOOL_CODES for d in result.diagnostics)
    if checked:
        outcome.notices.extend(
            codes.UNKNOWN_BINDING.diag(FILE_START, name=name, value=value)
            for name, value in bindings.items() if name not in declared)
    return outcome


def _is_python(raw: str) -> bool:
    if raw == STDIN or raw.endswith(".attn") or Path(raw).is_dir():
        return False  # a spec or a folder: the front end is not even imported
    from ..pytorch.front import is_python_target  # light: torch loads only when one is checked

    return is_python_target(raw)


def check_python(raw: str, finder: Finder, bindings: Mapping[str, int],
                 init: tuple[str, ...] = ()) -> list[FileResult]:
    """``model.py:Class`` is traced and checked (its configured ``init``, then the command
    line's); ``model.py`` alone checks the modules its configuration lists for that file
    (``modules`` in [tool.shapecheck]), or says how to name one."""
    if ":" in Path(raw).name or not raw.endswith(".py"):
        settings = finder.settings_for(Path(raw.rpartition(":")[0]))
        configured = next((i for t, i in settings.modules if _same_target(settings, t, raw)),
                          ())
        return check_python_target(raw, (*configured, *init), finder, bindings)
    listed = finder.settings_for(Path(raw)).modules_in(raw)
    if not listed:
        from ..pytorch.front.errors import MESSAGES

        return [FileResult(raw, None, [codes.TARGET_FAILED.diag(
            FILE_START, target=raw, reason=MESSAGES["not_configured"].format(path=raw))])]
    return [r for target, init in listed for r in check_python_target(target, init, finder,
                                                                       bindings)]


def check_python_target(target: str, init: tuple[str, ...], finder: Finder,
                        bindings: Mapping[str, int]) -> list[FileResult]:
    from ..pytorch.front.sourcemap import check
    from .collector import torch_frozen

    torch_frozen()  # what torch's import made is not walked by each collection after it
    path = target.rpartition(":")[0]
    settings = finder.settings_for(Path(path))
    try:
        return check(target, init, bindings, settings.disabled(path))
    except Exception as error:  # a bug in shapecheck: this target's diagnostic
        return [_internal(path, None, error)]


def _configured(finder: Finder, folder: Path) -> list[tuple[str, tuple[str, ...]]]:
    """The configured modules below ``folder``, their files resolved from the configuration's
    folder."""
    settings = finder.settings_for(folder / "__shapecheck__.attn")
    found: list[tuple[str, tuple[str, ...]]] = []
    for target, init in settings.modules:
        file, _, name = target.rpartition(":")
        resolved = (settings.root / file).resolve() if file.endswith(".py") else None
        if resolved is None:
            found.append((target, init))
        elif resolved.is_relative_to(folder.resolve()):
            found.append((f"{resolved}:{name}", init))
    return found


def _same_target(settings: Settings, configured: str, raw: str) -> bool:
    file, _, name = configured.rpartition(":")
    raw_file, _, raw_name = raw.rpartition(":")
    if name != raw_name:
        return False
    if not file.endswith(".py"):
        return file == raw_file
    return (settings.root / file).resolve() == Path(raw_file).resolve()


def _with_stdin(paths: Sequence[str], finder: Finder) -> list[Target | None]:
    """The targets in order; ``None`` stands for standard input."""
    out: list[Target | None] = []
    rest: list[str] = []
    for raw in paths:
        if raw == STDIN:
            if rest:
                out.extend(targets(rest, finder))
                rest = []
            if None not in out:
                out.append(None)
        else:
            rest.append(raw)
    if rest:
        out.extend(targets(rest, finder))
    return out


def check_file(path: str, data: bytes | None, settings: Settings,
               bindings: Mapping[str, int], infer: bool | None = None) -> tuple[FileResult, set[str]]:
    """Check one file (read from ``path`` unless ``data`` is given), in isolation.

    Returns the result and the dims the spec declares.
    """
    with collector.own_imports():  # the loader, not its face `api` (issue 36: one module less)
        from ..loader import check_bytes, check_path, file_result

    ignore = settings.disabled(path)
    try:
        if data is None:  # check_path reads safely (a FIFO or a device is refused, not read)
            program = check_path(path, dict(bindings), warn_unknown_bindings=False, ignore=ignore,
                                 infer=infer)
        else:
            program = check_bytes(data, dict(bindings), warn_unknown_bindings=False, ignore=ignore,
                                  infer=infer)
        return file_result(program, path), set(program.dims.dims)
    except OSError as error:
        return unreadable(path, error), set()
    except Exception as error:  # a bug in shapecheck: this file's diagnostic, not the run's end
        return _internal(path, data, error), set()


def unreadable(path: str, error: OSError) -> FileResult:
    """SC007 for a path: the system's reason, in the current language where we know it."""
    known = {errno.ENOENT: "no_such_path", errno.ENOTDIR: "no_such_path",
             errno.EACCES: "permission_denied", errno.EPERM: "permission_denied"}
    key = known.get(error.errno or 0)
    reason = codes.detail(key) if key else (error.strerror or str(error)).lower()
    return FileResult(path, None, [codes.UNREADABLE.diag(FILE_START, path=path, reason=reason)])


def _internal(path: str, data: bytes | None, error: BaseException) -> FileResult:
    if os.environ.get("SHAPECHECK_DEBUG"):
        traceback.print_exception(error)
    text = None if data is None else data.decode("utf-8", errors="replace")
    described = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return FileResult(path, text, [codes.INTERNAL.diag(FILE_START, path=path, error=described)])


# --- fixes (verify --fix / --diff) -------------------------------------------------------------

BOM = b"\xef\xbb\xbf"


class FileFix(Record, frozen=True):
    """What fixing one file did (or would do, with ``--diff``)."""

    path: str
    before: str
    after: str
    applied: int
    written: bool = False
    result: FileResult | None = None  # the fixed text's check (what is left after the fixes)


def apply_fixes(outcome: Outcome, bindings: Mapping[str, int], *, write: bool,
        stdin: Stdin | None = None, infer: bool | None = None) -> list[FileFix]:
    """Apply the safe fixes of every checked file (:mod:`shapecheck.fixes`).

    With ``write``, each changed file is rewritten atomically, keeping its mode and
    its byte order mark, through a symbolic link to the file it points at, and its
    result in ``outcome`` becomes that of the fixed text. A file that changed on
    disk since it was checked is left alone. The spec read from standard input is
    never written (the caller prints it).
    """
    from ..api import check_text, file_result
    from ..messages.fixes import fix_text

    done: list[FileFix] = []
    for index, result in enumerate(outcome.results):
        if result.source is None or not any(fix.safe for d in result.diagnostics
                                             for fix in d.fixes):
            continue
        ignore = outcome.settings[result.path].disabled(result.path)
        last: list[Program] = []

        def check(text: str) -> list[Diagnostic]:
            last[:] = [check_text(text, dict(bindings), warn_unknown_bindings=False,
                                  ignore=ignore, infer=infer)]
            return last[0].diagnostics

        fixed = fix_text(result.source, check, result.diagnostics)
        if not fixed.changed(result.source):
            continue
        is_stdin = stdin is not None and result.path == stdin.display
        written = write and not is_stdin and _write(result.path, result.source, fixed.text)
        after = file_result(last[0], result.path) if last else None
        done.append(FileFix(result.path, result.source, fixed.text, fixed.applied, written, after))
        if (written or (write and is_stdin)) and last:
            outcome.results[index] = file_result(last[0], result.path)
    return done


def _write(path: str, checked: str, text: str) -> bool:
    """Rewrite ``path`` with ``text`` if it still holds what was checked."""
    from .. import fileio

    try:
        data = fileio.read_bytes(path)
    except OSError:
        return False
    bom = BOM if data.startswith(BOM) else b""
    if data[len(bom):].decode("utf-8", errors="replace") != checked:
        return False  # edited since it was checked: never overwrite someone's work
    fileio.write_atomic(path, bom + text.encode("utf-8"), keep_mode=True, follow_symlinks=True)
    return True


# --- the command ------------------------------------------------------------------------


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
              help="Whether warnings about the code fail the run: the same as `fail-on = "
              "\"warning\"` / `\"error\"` (default: the configuration's, else warnings fail).")
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
              help="Report, but exit 0 even when errors or warnings remain (2 still means a "
              "tool failure).")
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
@click.option("--init", "init", multiple=True, metavar="NAME=SIZE|NAME=DIM|NAME=[SHAPE]",
              help="For a Python target: a constructor size (`n_head=4`), the dim it takes "
              "(`n_head=H`), or an argument's shape (`query=[B, H, T, d_k]`, `mask=None`); "
              "repeatable (docs/torch.md).")
def verify(paths: tuple[str, ...], fmt: str, strict: bool | None, color: str,
           dims: tuple[str, ...], select: tuple[str, ...], extend_select: tuple[str, ...],
           ignore: tuple[str, ...], exclude: tuple[str, ...], extend_exclude: tuple[str, ...],
           config: tuple[str, ...], isolated: bool, statistics: bool, quiet: bool,
           exit_zero: bool, stdin_filename: str | None, base_dir: str | None,
           allow_empty: bool, fix: bool, diff: bool, infer: bool | None,
           init: tuple[str, ...]) -> None:
    """Check spec files (a folder means every *.attn below it; `-` reads standard input)."""
    from ..config import ConfigError, Overrides
    from ..formats import github_step_summary, render, render_statistics

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
        select=selectors(select, "--select", turning_off=False) if select else None,
        extend_select=selectors(extend_select, "--extend-select", turning_off=False),
        ignore=selectors(ignore, "--ignore", turning_off=True),
        exclude=codes_list(exclude) if exclude else None,
        extend_exclude=codes_list(extend_exclude),
        fail_on=None if strict is None else "warning" if strict else "error",
    )
    finder = finder_for(config, isolated, overrides)
    stdin = Stdin(read_stdin(), stdin_filename) if "-" in paths else None
    try:
        outcome = lint(paths, finder, bindings, stdin=stdin, infer=infer, init=init)
    except ConfigError as error:
        raise UsageFailure(str(error)) from None
    nothing = not outcome.results
    if diff or fix:
        fixed = apply_fixes(outcome, bindings, write=fix, stdin=stdin, infer=infer)
        if diff:
            if nothing and not allow_empty:
                raise UsageFailure(MESSAGES["nothing_checked"])
            sys.exit(_show_diff(outcome, fixed, fmt, fail_on=_fail_on(outcome, finder),
                                exit_zero=exit_zero, color=use_color(color)))
        if stdin is not None:
            _print_fixed_stdin(fixed, stdin)
    fail_on = _fail_on(outcome, finder)
    colored = use_color(color)
    root = _base_dir(base_dir)
    if statistics:
        out = render_statistics(outcome.results, outcome.notices, fmt)
    else:
        out = render(outcome.results, fmt, color=colored, fail_on=fail_on,
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
        _append(summary_file, github_step_summary(outcome.results, fail_on=fail_on))
    if nothing and not allow_empty:
        raise UsageFailure(MESSAGES["nothing_checked"])
    if outcome.tool_failure:
        sys.exit(EXIT_USAGE)
    failed = Totals.of(outcome.results, outcome.notices).failed(fail_on)
    sys.exit(EXIT_ERRORS if failed and not exit_zero else EXIT_OK)


def _fail_on(outcome: Outcome, finder: Finder) -> str:
    """The run's `fail-on`: "warning" when any checked spec's settings say so (the command
    line's `--strict`/`--no-strict` is already in them), else "error"."""
    chosen = [settings.fail_on for settings in outcome.settings.values()] \
        or [finder.settings_for(Path.cwd()).fail_on]
    return "warning" if "warning" in chosen else "error"


def _show_diff(outcome: Outcome, fixed: Sequence[FileFix], fmt: str, *, fail_on: str,
               exit_zero: bool, color: bool) -> int:
    """`--diff`: the changes (text: a unified diff on stdout; on stderr, what the fixes
    leave that fails the run, as `verify` prints it, then how many fixes; json: the document
    of what is left after the fixes, each file's diff a field). The exit status: 1 when a
    file would change or what fails the run remains after the fixes, else 0."""
    from ..formats import render
    from ..formats.common import passes
    from ..messages.fixes import unified_diff

    diffs = {item.path: unified_diff(item.path, item.before, item.after) for item in fixed}
    after = {item.path: item.result for item in fixed if item.result is not None}
    results = [after.get(result.path, result) for result in outcome.results]
    if fmt == "json":
        from ..formats.json_format import render_json

        click.echo(render_json(results, fail_on=fail_on, notices=outcome.notices, diffs=diffs),
                   nl=False)
    else:
        for item in fixed:
            click.echo(diffs[item.path], nl=False)
        left = [result for result in results if not passes(result, fail_on)]
        if left:  # without this, "Would fix 0 problem(s)" and exit 1 would not say why
            click.echo(render(left, "text", color=color, fail_on=fail_on), nl=False, err=True,
                       color=color)
        count = sum(item.applied for item in fixed)
        click.echo(MESSAGES["would_fix"].format(count=count, files=len(fixed)), err=True)
    if outcome.tool_failure:
        return EXIT_USAGE
    failed = bool(fixed) or Totals.of(results, outcome.notices).failed(fail_on)
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
