"""Conformance in a test suite (``from shapecheck.testing import assert_conforms``).

The helpers live with the rest of the PyTorch and conformance side, in
:mod:`shapecheck.pytorch.testing`; this module is their public path.
"""

from __future__ import annotations

from .pytorch.testing import assert_conforms

__all__ = ["assert_conforms"]
