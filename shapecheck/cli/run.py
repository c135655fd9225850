"""`shapecheck run`: verify, bind, execute, report (contract: shared/spec/cli.md).

The command is light to import: the backend (and so NumPy) is imported when a run
starts, never when another command runs.

Results go to stdout; diagnostics, warnings and errors to stderr. Exit status:
0 success; 1 the spec does not verify, or an input (array, binding, size) is
wrong; 2 usage error, unreadable file, or internal failure (a checker bug).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING

import click

from .. import fileio
from ..options import OptionError, parse_size
from ..records import Record
from .common import (
    EXIT_ERRORS, EXIT_OK, EXIT_USAGE, STDOUT, cli, color_option, config_option, dim_option,
    finder_for, infer_option, isolated_option, lang_option, parse_bindings, stdin_filename_option,
    stdin_spec, use_color,
)

if TYPE_CHECKING:
    from ..backend.arrays import ArrayFile
    from ..backend.compiled import CompiledSpec, RunResult
    from ..check.program import Program


class RunOptions(Record, frozen=True):
    path: str
    bindings: dict[str, int]
    input_files: tuple[str, ...] = ()
    archive: str | None = None
    seed: int = 0
    save: str | None = None
    save_all: bool = False
    dtype: str = "float64"
    max_memory: str | None = None
    color: bool = False
    ignore: frozenset[str] = frozenset()  # codes the configuration turns off
    defaults: Mapping[str, int] = field(default_factory=dict)  # the configuration's [dims]
    infer: bool | None = None  # --infer / --no-infer (None: only in a sketch)
    backend: str = "numpy"
    device: str = "cpu"
    fused: str = "auto"
    source: bytes | None = None  # the spec's bytes when read from `-` (path is its name)


def run_command(options: RunOptions) -> int:
    """Everything `shapecheck run` does; returns the exit status."""
    from ..backend import runtime
    from ..backend.errors import CheckerBug, RunError, SpecError, message

    if options.save_all and options.save is None:
        raise click.UsageError(message("report_save_all_needs_save"))
    if options.save == STDOUT:
        raise click.BadParameter(message("save_stdout"), param_hint="--save")
    try:
        limit = (runtime.default_max_memory() if options.max_memory is None
                 else parse_size(options.max_memory))
    except OptionError as error:
        raise click.BadParameter(str(error), param_hint="--max-memory") from None
    try:
        return _run(options, limit)
    except SpecError as error:
        _show_diagnostics(error.program, options)
        _error(str(error))
        if error.bindings:
            _error(error.bindings)
        return EXIT_ERRORS
    except OptionError as error:
        raise click.UsageError(str(error)) from None
    except CheckerBug as error:
        click.echo(message("report_internal", text=error), err=True)
        return EXIT_USAGE
    except RunError as error:
        _error(str(error))
        return error.exit_code


def _run(options: RunOptions, limit: int | None) -> int:
    """load the spec and arrays → bind and plan → execute → report (and save)."""
    from ..backend.arrays import save_npz
    from ..backend.compiled import CompiledSpec
    from ..backend.errors import message
    from ..backend.progress import Progress
    from ..backend import runtime
    from ..config import default_bindings

    program = _load_spec(options)
    _show_diagnostics(program, options)  # warnings, if any
    arrays, origins = _load_arrays(options)
    protect = _protected(options, origins)
    if options.save is not None:
        _check_save(options.save, protect)  # before a long run
    bindings = {**default_bindings(options.defaults, program.dims.dims), **options.bindings}
    spec = CompiledSpec(program, dims=bindings, dtype=options.dtype, max_memory=limit,
                        hint=runtime.cli_hint, backend=options.backend, device=options.device,
                        fused=options.fused)
    bar = Progress()  # on a terminal only, and only once the run has taken a while
    try:
        result = spec.run(arrays, seed=options.seed, keep_intermediates=options.save_all,
                          check_invariants=True, progress=bar.update)
    finally:
        bar.close()
    _report(spec, result, origins, options)
    if options.save is not None:
        saved = result.tensors if options.save_all else result.outputs
        save_npz(options.save, saved, protect)
        click.echo(message("report_saved", count=len(saved), path=options.save))
    return EXIT_OK


def _load_spec(options: RunOptions) -> Program:
    from ..backend.arrays import UnreadableFile
    from ..backend.errors import SpecError, message
    from ..loader import check_bytes, check_path

    try:
        program = (check_path(options.path, options.bindings, ignore=options.ignore,
                              defaults=options.defaults, infer=options.infer)
                   if options.source is None else
                   check_bytes(options.source, options.bindings, ignore=options.ignore,
                               defaults=options.defaults, infer=options.infer))
    except OSError as error:
        raise UnreadableFile(message("unreadable", path=options.path,
                                     reason=error.strerror or error)) from None
    if not program.ok:
        raise SpecError(program)
    return program


def _protected(options: RunOptions, origins: dict[str, str]) -> list[tuple[str, str]]:
    """Files `--save` must never replace: the spec and every input file."""
    from ..backend.errors import message

    files = [options.path, *([options.archive] if options.archive else []),
             *(item.partition("=")[2].strip() for item in options.input_files)]
    return [(path, message("what_spec" if index == 0 else "what_input"))
            for index, path in enumerate(files)]


def _check_save(path: str, protect: list[tuple[str, str]]) -> None:
    from ..backend.arrays import UnreadableFile
    from ..backend.errors import message

    try:
        fileio.check_target(path, protect=protect)
    except OSError as error:
        raise UnreadableFile(message("cannot_write", path=path,
                                     reason=error.strerror or error)) from None


def _load_arrays(options: RunOptions) -> tuple[dict[str, ArrayFile], dict[str, str]]:
    """The files named by --inputs and --input, known by their headers (read after the
    memory check)."""
    from ..backend.arrays import open_npy, open_npz
    from ..backend.errors import message

    arrays: dict[str, ArrayFile] = {}
    origins: dict[str, str] = {}
    if options.archive is not None:
        for key, array in open_npz(options.archive).items():
            arrays[key] = array
            origins[key] = array.origin
    for item in options.input_files:
        name, separator, file = item.partition("=")
        name, file = name.strip(), file.strip()
        if not separator or not name.isidentifier() or not file:
            raise click.BadParameter(message("input_syntax", item=item), param_hint="--input")
        if name in origins:
            raise click.BadParameter(message("input_twice", name=name, first=origins[name],
                                             second=file), param_hint="--input")
        arrays[name] = open_npy(file)
        origins[name] = file
    return arrays, origins


def _report(spec: CompiledSpec, result: RunResult, origins: dict[str, str],
            options: RunOptions) -> None:
    from ..backend import runtime
    from ..backend.errors import bindings_text, message

    backend = options.backend if options.device == "cpu" else f"{options.backend}, {options.device}"
    click.echo(message("report_header", path=options.path, bindings=bindings_text(result.bindings),
                       dtype=options.dtype, backend=backend))
    for text in result.plan:
        click.echo(message("report_plan", text=text))
    for name in spec.declared:
        if name in origins:
            click.echo(message("report_loaded", name=name, source=origins[name]))
    by_kind: dict[str, list[str]] = {}
    for name in result.generated:
        stated = runtime.stated_conventions(spec.program, name)
        by_kind.setdefault(runtime.generation_note(spec.declared[name], stated), []).append(name)
    for how, names in by_kind.items():
        click.echo(message("report_generated", seed=options.seed, names=", ".join(names), how=how))
    for name, value in result.outputs.items():
        click.echo(message("report_output", name=name, shape=list(value.shape),
                                           dtype=value.dtype, stats=runtime.output_stats(value)))
    click.echo(message("report_checked"))
    for text in result.checks:
        click.echo(message("report_check", text=text))
    for text in result.warnings:
        click.echo(message("report_warning", text=text), err=True)


def _show_diagnostics(program: Program, options: RunOptions) -> None:
    from ..loader import file_result

    if not program.diagnostics:
        return
    from ..formats import render

    result = file_result(program, options.path)
    click.echo(render([result], "text", color=options.color, fail_on="error"), nl=False, err=True)


def _error(text: str) -> None:
    from ..backend.errors import message

    click.echo(message("report_error", text=text), err=True)


# --- the command ------------------------------------------------------------------------


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
@click.option("--backend", type=click.Choice(["numpy", "torch", "jax"]), default="numpy",
              show_default=True,
              help="Numeric backend (torch, jax: the optional extras attn-shapecheck[torch], "
              "attn-shapecheck[jax]).")
@click.option("--device", default="cpu", show_default=True, metavar="cpu|cuda",
              help="Where the torch or jax backend runs (cuda, cuda:N where there is one).")
@click.option("--fused", type=click.Choice(["auto", "off"]), default="auto", show_default=True,
              help="Run each attention pattern fused where it can (NumPy: block by block, "
              "O(N·d) memory; torch: one scaled_dot_product_attention; jax, float32: one "
              "jax.nn.dot_product_attention), or never.")
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
    """Verify a spec, then execute it (NumPy, PyTorch or JAX) and report its outputs.

    The configuration's [dims] are default bindings (--dim wins), and its rule
    selection and the spec's `# noqa` comments apply to the warnings shown.
    """
    bindings = parse_bindings(dims)
    shown, source, where = stdin_spec(path, stdin_filename)
    settings = finder_for(config, isolated).settings_for(where)
    options = RunOptions(shown, bindings, input_files, archive, seed, save, save_all,
                         dtype, max_memory, use_color(color), ignore=settings.disabled(str(where)),
                         defaults=dict(settings.dims), infer=infer, backend=backend,
                         device=device, fused=fused, source=source)
    sys.exit(run_command(options))


__all__ = ["RunOptions", "run", "run_command"]
