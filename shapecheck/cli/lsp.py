"""`shapecheck lsp`: the language server over stdin/stdout (docs/editors.md)."""

from __future__ import annotations

from .common import MESSAGES, UsageFailure, cli, lang_option


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

