"""PyTorch: the front end (:mod:`.front`) and conformance (:mod:`.conform`).

Shared by the package's modules: :func:`import_module_or_file` (conformance's loader of a
module or a ``.py`` file, which the front end's target loading reuses). It is loaded on
first use, so that importing :mod:`.front` (``verify``'s target test) stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["import_module_or_file"]


def __getattr__(name: str) -> Any:
    if name == "import_module_or_file":
        from .conform import import_module_or_file

        return import_module_or_file
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
