"""The entry points the CLI and users call: load and check specs.

The functions live in :mod:`shapecheck.loader`, the first stage of the pipeline, so that
the run path (``backend/``) and conformance read specs without importing the face of
the package; this module names them for users (``from shapecheck.api import check_text``).
"""

from __future__ import annotations

from .loader import (
    admissible_bindings, check_bytes, check_parsed, check_path, check_text, file_result,
)

__all__ = ["admissible_bindings", "check_bytes", "check_parsed", "check_path", "check_text",
           "file_result"]
