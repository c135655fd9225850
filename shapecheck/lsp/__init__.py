"""The language server (``shapecheck lsp``): diagnostics, hover, definitions, inlay
hints, code actions and symbols for ``.attn`` files, over stdio; and on Python files that
hold a target, the traced checks on save (:mod:`shapecheck.lsp.python`).

It needs the optional ``lsp`` extra (pygls, lsprotocol):
``python -m pip install 'attn-shapecheck[lsp]'``. :func:`available` says whether they
are installed; the server itself is :mod:`shapecheck.lsp.server`, and everything it
knows comes from :mod:`shapecheck.lsp.analysis` (the checker, the configuration and
suppression, never a copy of them).
"""

from __future__ import annotations

from importlib.util import find_spec

__all__ = ["available", "serve"]


def available() -> bool:
    """Whether pygls and lsprotocol are installed."""
    return find_spec("pygls") is not None and find_spec("lsprotocol") is not None


def serve() -> None:
    from .server import serve as run

    run()
