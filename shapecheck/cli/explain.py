"""`shapecheck explain`: what a code means and how to fix it."""

from __future__ import annotations

import click

from .common import MESSAGES, UsageFailure, cli, lang_option


@cli.command()
@lang_option
@click.argument("code", required=False)
def explain(code: str | None) -> None:
    """Explain a diagnostic code, by number (SC301) or slug (matmul-inner-mismatch);
    without CODE, list them all."""
    import difflib

    from ..messages import codes

    if code is None:
        for entry in sorted(codes.REGISTRY.values(), key=lambda entry: entry.id):  # SC340 after SC323
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

