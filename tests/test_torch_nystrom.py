"""Issue 29: the Nyström approximation as two projects write it (lucidrains'
nystrom-attention, transformers' Nyströmformer with fewer landmarks than positions;
tests/data/torch/nystrom.py). Both were false alarms: the landmarks, means of scaled
queries and keys, read as unscaled (SC404, SC405); the pseudo-inverse's products of the
landmark kernel with its own transpose read as sums of softmax weights (SC402, SC406);
`torch.eye` and `torch.max` unlowered (SC602); lucidrains' `sum / l` read as a scale by
a root and `t * mask[..., None]` as a bool used as numbers (SC403). Each now verifies
clean, its extracted spec conforms, and a softmax over the wrong axis is still found."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("einops")

from shapecheck.pytorch.front.sourcemap import check  # noqa: E402
from test_torch_public6 import _command  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "torch" / "nystrom.py"


def _found(path: Path, factory: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(f"{path}:{factory}") for d in r.diagnostics]


@pytest.mark.slow  # torch.export of each, seconds
@pytest.mark.parametrize("factory", ["make", "make_masked", "make_padded", "make_hf"])
def test_nystrom_attention_verifies_clean(factory: str) -> None:
    assert _found(DATA, factory) == []


@pytest.mark.slow
@pytest.mark.parametrize("factory", ["make_masked", "make_hf"])
def test_nystrom_attention_conforms_with_no_flag(factory: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.attn"
    code, out = _command(capsys, "extract", f"{DATA}:{factory}", "-o", str(spec))
    assert code == 0, out
    text = spec.read_text()
    assert "SC602" not in text
    code, out = _command(capsys, "conform", str(spec), f"{DATA}:{factory}")
    assert code == 0 and "conforms" in out, out


@pytest.mark.slow
def test_a_softmax_over_the_landmarks_queries_is_still_flagged(tmp_path: Path) -> None:
    text = DATA.read_text()
    edited = text.replace("t.softmax(dim = -1)", "t.softmax(dim = -2)")
    assert edited != text
    line = text[:text.index("t.softmax(dim = -1)")].count("\n") + 1
    bug = tmp_path / "nystrom_bug.py"
    bug.write_text(edited)
    found = _found(bug, "make")
    assert found and {code for code, _ in found} == {"SC402"}, found
    assert all(at == line for _, at in found), found
