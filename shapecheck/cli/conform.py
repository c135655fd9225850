"""`shapecheck conform`: does a function or a PyTorch module compute what a spec says
(docs/conform.md)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from ..records import Record
from .common import cli, dim_option, lang_option, parse_bindings, use_color

if TYPE_CHECKING:
    from ..pytorch.conform import Layout


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
@click.option("--framework", type=click.Choice(["auto", "numpy", "torch", "jax"]), default="auto",
              show_default=True,
              help="Arrays or tensors (auto: torch tensors when the function's module imports "
              "torch, JAX arrays when it imports jax, else NumPy arrays).")
@click.option("--device", default="cpu", show_default=True,
              help="Device of the torch tensors or JAX arrays.")
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
    options = ConformOptions(path, target, parse_bindings(dims), names, layouts, dtype, cases,
                             seed, rtol, atol, framework, device, not no_shrink, use_color(color),
                             init=init, args=args, masks=masks, params=params, outputs=outputs,
                             fused=fused)
    sys.exit(command(options))


class ConformOptions(Record, frozen=True):
    """`shapecheck conform`'s command line, parsed by click."""

    path: str
    target: str
    bindings: dict[str, int]
    names: tuple[str, ...] = ()  # SPEC=PARAM
    layouts: tuple[str, ...] = ()  # NAME=transpose or NAME=1,0,2
    dtype: str = "float64"
    cases: int = 5  # `--cases` (the default of conformance, DEFAULT_CASES)
    seed: int = 0
    rtol: float | None = None
    atol: float | None = None
    framework: str = "auto"
    device: str = "cpu"
    shrink: bool = True
    color: bool = False
    init: tuple[str, ...] = ()  # KW=EXPR, for the factory
    args: tuple[str, ...] = ()  # KW=EXPR, for the call
    masks: tuple[str, ...] = ()  # SPEC=additive|additive-min|keep|drop
    params: tuple[str, ...] = ()  # SPEC=KEY or SPEC=KEY.T
    outputs: tuple[str, ...] = ()  # SPEC=INDEX or SPEC=KEY
    fused: str = "auto"


def command(options: ConformOptions) -> int:
    """Everything `shapecheck conform` does; returns the exit status: 0 the function
    conforms, 1 it does not or the spec does not verify, 2 the function cannot be
    imported or raises, or a usage error."""
    from ..loader import check_path, file_result
    from ..pytorch.conform import (
        EXIT_CONFORMS, EXIT_DIFFERS, EXIT_FUNCTION, ConformanceError, conform, load_function,
        message,
    )

    names = _pairs(options.names, "--name")
    layouts = {name: _layout(text) for name, text in _pairs(options.layouts, "--layout").items()}
    try:
        program = check_path(options.path, options.bindings)
    except OSError as error:
        click.echo(message("cannot_read", path=options.path, reason=error.strerror or error),
                   err=True)
        return EXIT_FUNCTION
    if not program.ok:
        from ..formats import render

        click.echo(render([file_result(program, options.path)], "text", color=options.color,
                          fail_on="error"), nl=False, err=True)
        click.echo(message("spec_errors"), err=True)
        return EXIT_DIFFERS
    try:
        traced = _traced(options)
        function, dims, dtype = traced or (load_function(options.target), None, options.dtype)
        result = conform(program, function, dims=dims, names=names, layouts=layouts, dtype=dtype,
                         cases=options.cases, seed=options.seed, rtol=options.rtol,
                         atol=options.atol, framework="torch" if traced else options.framework,
                         device=options.device,
                         shrink=options.shrink, spec_name=options.path,
                         function_name=message("function_label", target=options.target),
                         init=_pairs(options.init, "--init"), args=_pairs(options.args, "--arg"),
                         masks=_pairs(options.masks, "--mask"),
                         params=_pairs(options.params, "--param"),
                         outputs={name: int(where) if where.isdigit() else where
                                  for name, where in _pairs(options.outputs, "--output").items()},
                         fused=options.fused)
    except ConformanceError as error:
        click.echo(message("error", text=error), err=True)
        return error.exit_code
    click.echo(result.report(), nl=False)
    return EXIT_CONFORMS if result.ok else EXIT_DIFFERS


def _traced(options: ConformOptions) -> tuple[object, dict[str, int], str] | None:
    """A spec `extract` wrote, conformed to the target it was traced from: the module runs
    as traced (its arguments, tuples and cache objects by the trace's own routing, its
    weights as the spec names them), at the sizes it was built with; no flag needed. A
    module that computes in float32 on purpose is compared at float32's tolerance."""
    if options.names or options.params or options.args or options.init or options.outputs:
        return None  # the user's own wiring
    from ..pytorch.front import ExtractError, Untraceable, extract, traced_target

    try:
        with open(options.path, encoding="utf-8") as spec:
            target = traced_target(spec.readline())
    except (OSError, UnicodeDecodeError):
        return None
    if target != options.target:
        return None
    try:
        extraction = extract(target)
    except (ExtractError, Untraceable):
        return None  # load_function then says why the target cannot be used
    return extraction.function(), {**extraction.bindings, **options.bindings}, \
        "float32" if extraction.float32 and options.dtype == "float64" else options.dtype


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    from ..pytorch.conform import message

    pairs: dict[str, str] = {}
    for item in items:
        name, separator, value = (part.strip() for part in item.partition("="))
        if not separator or not name or not value:
            raise click.BadParameter(message("pair_syntax", item=item), param_hint=option)
        if name in pairs:
            raise click.BadParameter(message("pair_twice", name=name), param_hint=option)
        pairs[name] = value
    return pairs


def _layout(text: str) -> Layout:
    """``transpose``, or a permutation written ``1,0,2``."""
    if text == "transpose":
        return text
    parts = [part.strip() for part in text.split(",")]
    if all(part.isdigit() for part in parts):
        return tuple(int(part) for part in parts)
    return text  # refused with the spec's rank in the message, by conform()
