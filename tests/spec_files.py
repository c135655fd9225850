"""The `.attn` files of the examples and the tests, and those of them that verify: checked
once per test process, however many test modules parametrize over them."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from shapecheck.loader import check_path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@cache
def verifying() -> tuple[Path, ...]:
    """Every example and test spec that verifies, examples first, each list sorted."""
    candidates = sorted(EXAMPLES.glob("*.attn")) + sorted((ROOT / "tests").rglob("*.attn"))
    return tuple(p for p in candidates if check_path(p).ok)
