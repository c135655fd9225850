"""Issue 29, "no false alarm by construction": a size or shape diagnostic on a Python target
is confirmed by running the module at its counterexample sizes, or shown as an unconfirmed
note. A size the data decides (a boolean selection's length, an expert's share of the
tokens: torch's unbacked sizes) cannot be chosen for a run, so such a diagnostic is a note
that says why (tests/data/torch/data_sizes.py; JetMoE's experts in the zoo were an SC303
error)."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from shapecheck.messages.diagnostics import Severity  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

DATA = Path(__file__).parent / "data" / "torch" / "data_sizes.py"


@pytest.mark.slow
def test_a_shape_diagnostic_between_data_decided_sizes_is_an_unconfirmed_note() -> None:
    [found] = [d for r in check(f"{DATA}:make") for d in r.diagnostics if d.code == "SC303"]
    assert found.severity is Severity.NOTE and found.span.line == 18
    [note] = [n.message for n in found.notes if n.message.startswith("unconfirmed")]
    assert "at other sizes" in note and "`U`, `U2` are decided by the data" in note
