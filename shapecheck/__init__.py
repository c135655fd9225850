"""shapecheck: a symbolic shape and formula checker for attention specs.

The public API, re-exported lazily so that ``shapecheck --version`` and the
CLI start fast (SymPy and Lark load only when a spec is checked)::

    import shapecheck
    program = shapecheck.check_text(source, bindings={"N": 128})
    program.ok, program.diagnostics, program.shapes()
    attention = shapecheck.compile_spec(program)  # NumPy is imported here, not before
    outputs = attention(X=x, W_Q=w_q, ...)         # by name; dims read from the arrays

In a notebook, ``%load_ext shapecheck`` gives the ``%%attn`` and ``%shapecheck`` magics
(:mod:`shapecheck.notebook`, docs/notebooks.md).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._version import __version__

_EXPORTS = {
    "__version__": "_version",  # read when asked for: `verify` never is (issue 36)
    "check_text": "api",
    "check_path": "api",
    "check_bytes": "api",
    "Program": "check.program",
    "Diagnostic": "messages.diagnostics",
    "Severity": "messages.diagnostics",
    "Span": "messages.diagnostics",
    "OptionError": "options",
    "compile_spec": "backend",
    "load": "backend",
    "CompiledSpec": "backend",
    "RunResult": "backend",
    "RunError": "backend",
    "SpecError": "backend",
}

__all__ = [*_EXPORTS]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext shapecheck``: IPython loads the magics from here (imported only then)."""
    from .notebook import load_ipython_extension as load

    load(ipython)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'shapecheck' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
