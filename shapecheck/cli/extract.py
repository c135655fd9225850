"""`shapecheck extract`: a PyTorch module traced with torch.export, written as a spec
(docs/torch.md)."""

from __future__ import annotations

import sys

import click

from .common import EXIT_ERRORS, EXIT_OK, STDOUT, UsageFailure, cannot_write, check_output, cli, lang_option


@cli.command(epilog="""\b
Examples:
  shapecheck extract model.py:CausalSelfAttention -o attention.attn
  shapecheck extract model.py:CausalSelfAttention --init n_head=H --init n_embd=64
  shapecheck extract model.py:make -o -            a factory returning (module, inputs)
  shapecheck extract attention.py:attention --init "query=[B, H, T, d_k]"   a function

\b
Exit status:
  0  the spec was written (an operator it does not know is a warning, SC602)
  1  the module cannot be traced (SC601, torch's reason at the line)
  2  usage error, a target that cannot be loaded or built, an unwritable output""")
@lang_option
@click.argument("target")
@click.option("-o", "--output", "output", default=STDOUT, type=click.Path(), metavar="OUT",
              help="The spec to write (default `-`: standard output).")
@click.option("--init", "init", multiple=True,
              metavar="NAME=SIZE|NAME=DIM [CONVENTION]|NAME=[SHAPE]",
              help="A size for a constructor parameter (`n_head=4`), the dim name it takes "
              "in the spec (`n_head=H`) with a window's convention after it if any "
              "(`window=W window inclusive`), or an argument's shape (`query=[B, H, T, d_k]`, "
              "`mask=None`); repeatable.")
def extract(target: str, output: str, init: tuple[str, ...]) -> None:
    """Trace a PyTorch module with torch.export and write it as a spec (docs/torch.md)."""
    from ..messages.diagnostics import Span
    from ..pytorch.front import ExtractError, Untraceable, display
    from ..pytorch.front import extract as trace

    from .collector import torch_frozen

    if output != STDOUT:
        check_output(output, [])
    torch_frozen()  # what torch's import made is not walked by each collection after it
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


def traced_program(target: str, bindings: dict[str, int], ignore: frozenset[str],
                   dtype: str = "float64") -> object:
    """The checked program of a traced module, or the page of a whole model (its attention
    layers, docs/torch.md "Whole models")."""
    import contextlib

    from ..api import check_text
    from ..pytorch.front import ExtractError, Untraceable, extract as trace
    from ..pytorch.front import model
    from ..pytorch.front.target import build
    from .collector import torch_frozen

    torch_frozen()
    try:
        with contextlib.redirect_stdout(sys.stderr):  # what the model prints as it is built
            built = build(target)
            whole = model.analyse(built, target, bindings, ignore)
            if whole is not None:
                return model.report(whole, dtype)
            extraction = trace(target, (), built)
    except (ExtractError, Untraceable) as error:
        raise UsageFailure(str(error) if isinstance(error, ExtractError) else
                           f"{target}: {error.reason}") from None
    return check_text(extraction.text, bindings, ignore=ignore, infer=False)

