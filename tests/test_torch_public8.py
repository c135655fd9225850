"""Issue 29, the eighth public corpus (tests/data/torch/public8/: ESPnet, OpenNMT-py,
torchaudio's wav2vec2, XCiT, OpenFold, SpeechBrain; each file names its repository, commit,
path and license), called as their models call them: each verifies clean, the spec `extract`
writes conforms to it with no flag (a few targets, to keep CI short), a one-edit bug planted
in some of them is flagged with its code at its line, the forms they taught the front end
(forms.py) stay lowered, clean and conforming, and what the checker finds in the originals is
asserted as it is."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("scipy")  # OpenFold's initialisers

from shapecheck.pytorch.front.sourcemap import check  # noqa: E402
from test_torch_public6 import _command  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "torch" / "public8"

CLEAN = [
    "espnet_attention.py:make",                 # mask (#batch, 1, time), `mask.unsqueeze(1).eq(0)`
    "espnet_attention.py:make_sdpa",            # use_sdpa with the bool mask
    "espnet_attention.py:make_rel",             # RelPositionalEncoding's centre cut of `self.pe`,
    "espnet_attention.py:make_rel_zero_triu",   # the rel_shift and its `tril(ones, T2 - T1)`
    "espnet_attention.py:make_decoder",         # self (pad & subsequent) and source attention
    "opennmt_attention.py:make",                # mask True at a pad, `masked_fill(-1e18)`
    "opennmt_attention.py:make_relative",       # Shaw's clipped relative positions
    "opennmt_attention.py:make_context",        # cross attention
    "opennmt_attention.py:make_step",           # the dict cache and `arange(-length + 1, 1)`
    # (was SC602 in its spec)
    "torchaudio_wav2vec2.py:make",              # `x[mask] = 0.0`, weight_norm (were SC602 in
    "torchaudio_wav2vec2.py:make_large",        # its spec, not conformable)
    "torchaudio_wav2vec2.py:make_no_lengths",
    "xcit_attention.py:make_xca",               # cross-covariance attention
    # the class-attention stage inside a wrapper that takes no size: dims from its parts'
    # constructors (`ClassAttentionBlock(48, 4)`), the head width `dim // num_heads` (were
    # SC318 and an unconfirmed SC307, 48 read as 3 * num_heads ** 2)
    "xcit_attention.py:make_class_attention",
    "xcit_attention.py:make_class_attention_tokens_norm",
    "xcit_attention.py:make",                   # the whole model (its layers checked alone)
    "openfold_attention.py:make",               # triangle attention, both nodes, with the mask
    "openfold_attention.py:make_no_mask",       # `x.new_ones(x.shape[:-1])`
    "openfold_attention.py:make_global",        # the masked mean as the query
]

#: extract and conform (each costs seconds of torch work)
CONFORM = [
    "espnet_attention.py:make_rel",
    "opennmt_attention.py:make_step",
    "torchaudio_wav2vec2.py:make",
    "openfold_attention.py:make_global",
    "xcit_attention.py:make_class_attention",
    "xcit_attention.py:make",                   # DETR's sine positions' `dim_t // 2`
]

#: one-edit bugs, each planted in a copy of its module at the line given (the copy keeps the
#: original's lines): (target, line edited, text there, its replacement, code, line flagged)
BUGS = [
    ("espnet_attention.py:make", 146, "torch.softmax(scores, dim=-1)",
     "torch.softmax(scores, dim=-2)", "SC402", 146),
    ("opennmt_attention.py:make", 93, "nn.Softmax(dim=-1)", "nn.Softmax(dim=-2)", "SC402", 230),
    ("openfold_attention.py:make_no_mask", 204, "nn.Softmax(dim=-1)", "nn.Softmax(dim=-2)",
     "SC402", 243),
    # the scale by the model width: silent before 2026-12-08, when a factory whose module
    # takes no size was "traced again at sizes apart" with nothing chosen, every dim a number
    ("espnet_attention.py:make", 206, "math.sqrt(self.d_k)", "math.sqrt(self.h * self.d_k)",
     "SC404", 206),
    ("openfold_attention.py:make_no_mask", 238, "math.sqrt(self.c_hidden)",
     "math.sqrt(self.c_hidden * self.no_heads)", "SC404", 239),
]

#: what the checker finds in the originals, true of their code: SpeechBrain scales the
#: scores by 1 / sqrt(embed_dim) (`self.scale`), not by the head width they sum over
FINDINGS = [
    ("speechbrain_attention.py:make", [("SC404", 392)]),        # RelPosMHAXL (its
    ("speechbrain_attention.py:make_causal", [("SC404", 392)]),  # `pos_bias_u` view was SC411 x2)
    ("speechbrain_attention.py:make_rope", [("SC404", 735)]),   # SDPA's `scale=self.scale`
]

FORMS = [
    "forms.py:arange_traced_start",   # arange(-n + 1, 1) (was SC602)
    "forms.py:leading_mask_put",      # x[pad] = 0.0 of [B, T] in [B, T, C] (was SC602)
    "forms.py:weight_norm_conv",      # _weight_norm (was SC602)
    "forms.py:remasked_weights",      # the same mask computed twice (was SC406)
]

def _found(target: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(str(DATA / target)) for d in r.diagnostics]


def _conforms(target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
              data: Path = DATA) -> str:
    spec = tmp_path / "spec.attn"
    path = str(data / target)
    code, out = _command(capsys, "extract", path, "-o", str(spec))
    assert code == 0, out
    assert "SC602" not in out, out
    code, out = _command(capsys, "conform", str(spec), path)
    assert code == 0, out
    assert "conforms" in out
    return spec.read_text()


@pytest.mark.slow  # a few seconds each: torch.export, a retrace at sizes apart
@pytest.mark.parametrize("target", CLEAN)
def test_public8_module_verifies_clean(target: str) -> None:
    assert _found(target) == []


@pytest.mark.slow
@pytest.mark.parametrize("target", CONFORM)
def test_public8_module_conforms_with_no_flag(target: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _conforms(target, tmp_path, capsys)


@pytest.mark.slow
@pytest.mark.parametrize(("target", "edited", "old", "new", "code", "line"), BUGS)
def test_public8_planted_bug_is_flagged_at_its_line(target: str, edited: int, old: str, new: str,
                                                    code: str, line: int,
                                                    tmp_path: Path) -> None:
    planted = _planted(DATA, target, edited, old, new, tmp_path)
    assert [(d.code, d.span.line) for r in check(planted)
            for d in r.diagnostics] == [(code, line)]


def _planted(data: Path, target: str, edited: int, old: str, new: str, tmp_path: Path) -> str:
    """The target of a copy of its module (in ``tmp_path``, the original's lines) with one
    edit on line ``edited``."""
    file, _, factory = target.partition(":")
    lines = (data / file).read_text().splitlines(keepends=True)
    assert old in lines[edited - 1], (file, edited, old)
    lines[edited - 1] = lines[edited - 1].replace(old, new)
    planted = tmp_path / file
    planted.write_text("".join(lines))
    return f"{planted}:{factory}"


@pytest.mark.slow
@pytest.mark.parametrize(("target", "found"), FINDINGS)
def test_public8_original_finding_is_reported(target: str, found: list[tuple[str, int]]) -> None:
    assert _found(target) == found


@pytest.mark.slow
@pytest.mark.parametrize("target", FORMS)
def test_public8_form_is_lowered_clean_and_conforms(target: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert _found(target) == []
    _conforms(target, tmp_path, capsys)


@pytest.mark.slow
def test_public8_weight_norm_is_written_as_a_norm(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    spec = _conforms("forms.py:weight_norm_conv", tmp_path, capsys)
    assert "sqrt(sum(" in spec and "keepdims=true" in spec
