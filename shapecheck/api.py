"""The entry points the CLI and users call: load and check specs.

The functions live in :mod:`shapecheck.loader`, the first stage of the pipeline, so that
the run path (``backend/``) and conformance read specs without importing the face of
the package; this module names them for users (``from shapecheck.api import check_text``).
"""

from __future__ import annotations

from .check.program import Program
from .loader import (
    admissible_bindings, check_bytes, check_parsed, check_path, check_text, file_result,
)

__all__ = ["admissible_bindings", "check_bytes", "check_parsed", "check_path", "check_text",
           "file_result"]


def _cards(program: Program) -> str:
    from .report import card_html  # the report loads when a program is first shown

    return card_html(program)


# A notebook shows a checked program as its cards (Program._repr_html_).
Program.html_view = _cards
