"""The zoo's other families (tools/zoo.py, docs/torch.md "Families beyond the list"): the
forms of their attention that were false findings, written small (tests/data/torch/
zoo_forms.py), each verified clean with nothing PyTorch contradicts, and the harness's
generic builds of vision, audio and hybrid families."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check_extraction  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FORMS = ROOT / "tests" / "data" / "torch" / "zoo_forms.py"


def _clean(name: str) -> str:
    """Verify through one trace (what `verify` does): no diagnostic, none contradicted."""
    target = f"{FORMS}:{name}"
    extraction = extract(target)
    traced = check_extraction(extraction, target)
    assert traced is not None
    assert [d.code for r in traced.results for d in r.diagnostics] == []
    assert [d.code for d in traced.contradicted] == []
    return extraction.text


def test_a_slice_from_a_bound_is_as_wide_as_its_bounds_say() -> None:
    """`query[..., rotary_ndims:]` is `head_size - rotary_ndims` wide, traced 6 as the heads
    are 6: named by its value it was `heads` (an SC303 PyTorch contradicts)."""
    text = _clean("partial_rotary")
    assert "query_pass: [B, heads, T, head_size - rotary_ndims]" in text
