"""`shapecheck run`: verify, bind, execute, report (contract: shared/spec/cli.md).

Results go to stdout; diagnostics, warnings and errors to stderr. Exit status:
0 success; 1 the spec does not verify, or an input (array, binding, size) is
wrong; 2 usage error, unreadable file, or internal failure (a checker bug).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import click
import numpy as np

from .. import fileio
from ..loader import check_bytes, check_path, file_result
from ..config import default_bindings
from ..options import OptionError, parse_size
from ..check.program import Program
from ..backend import runtime
from ..backend.arrays import ArrayFile, UnreadableFile, open_npy, open_npz
from ..backend.compiled import CompiledSpec, RunResult
from ..backend.errors import CheckerBug, RunError, SpecError, bindings_text, message
from ..backend.progress import Progress

EXIT_OK, EXIT_ERRORS, EXIT_USAGE = 0, 1, 2
STDOUT = "-"  # refused for --save: standard output carries the run's report


@dataclass(frozen=True)
class RunOptions:
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
        _save(options.save, saved, protect)
        click.echo(message("report_saved", count=len(saved), path=options.save))
    return EXIT_OK


def _load_spec(options: RunOptions) -> Program:
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
    files = [options.path, *([options.archive] if options.archive else []),
             *(item.partition("=")[2].strip() for item in options.input_files)]
    return [(path, message("what_spec" if index == 0 else "what_input"))
            for index, path in enumerate(files)]


def _check_save(path: str, protect: list[tuple[str, str]]) -> None:
    try:
        fileio.check_target(path, protect=protect)
    except OSError as error:
        raise UnreadableFile(message("cannot_write", path=path,
                                     reason=error.strerror or error)) from None


def _save(path: str, arrays: dict[str, np.ndarray], protect: list[tuple[str, str]]) -> None:
    """The archive, whole or not at all (fileio: a fresh temporary, then a rename)."""
    try:
        fileio.write_atomic(path, lambda handle: np.savez(handle, **arrays), protect=protect)
    except OSError as error:
        raise UnreadableFile(message("cannot_write", path=path,
                                     reason=error.strerror or error)) from None


def _load_arrays(options: RunOptions) -> tuple[dict[str, ArrayFile], dict[str, str]]:
    """The files named by --inputs and --input, known by their headers (read after the
    memory check)."""
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
        by_kind.setdefault(runtime.generation_note(spec.declared[name]), []).append(name)
    for how, names in by_kind.items():
        click.echo(message("report_generated", seed=options.seed, names=", ".join(names), how=how))
    for name, value in result.outputs.items():
        click.echo(message("report_output", name=name, shape=list(value.shape),
                                           dtype=value.dtype, stats=_stats(value)))
    click.echo(message("report_checked"))
    for text in result.checks:
        click.echo(message("report_check", text=text))
    for text in result.warnings:
        click.echo(message("report_warning", text=text), err=True)


def _stats(value: np.ndarray) -> str:
    """min / max / mean, ignoring NaN; no temporary larger than one bool per element."""
    if value.dtype.kind == "b":  # min / max / mean as for any output, read as 0 and 1
        true = int(np.count_nonzero(value))
        return message("report_stats", min=int(true == value.size), max=int(true > 0),
                       mean=true / value.size) + message(
            "report_stats_bool", true=true, size=value.size)
    missing = int(np.count_nonzero(np.isnan(value)))
    if missing == value.size:
        return message("report_stats_nan", count=value.size).lstrip(", ")
    present = None if not missing else np.logical_not(np.isnan(value))
    total = np.add.reduce(value, axis=None, dtype=np.float64, where=present if missing else True)
    text = message("report_stats", min=float(np.fmin.reduce(value, axis=None)),
                   max=float(np.fmax.reduce(value, axis=None)),
                   mean=float(total) / (value.size - missing))
    return text + (message("report_stats_nan", count=missing) if missing else "")


def _show_diagnostics(program: Program, options: RunOptions) -> None:
    if not program.diagnostics:
        return
    from ..formats import render

    result = file_result(program, options.path)
    click.echo(render([result], "text", color=options.color, strict=False), nl=False, err=True)


def _error(text: str) -> None:
    click.echo(message("report_error", text=text), err=True)


__all__ = ["RunOptions", "run_command"]
