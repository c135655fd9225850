"""Issue 29, the seventh public corpus (tests/data/torch/public7/: SAM 2, EfficientViT,
attention-is-all-you-need-pytorch, the annotated transformer, Flux, Bark, labml's
implementations; each file names its repository, commit, path and license), called as their
models call them: each verifies clean, the spec `extract` writes conforms to it with no flag
(one or two targets per project, to keep CI short), a one-edit bug planted in some of them is
flagged with its code at its line, and the forms they taught the front end (forms.py) stay
lowered, clean and conforming."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("einops")

from shapecheck.pytorch.front.sourcemap import check  # noqa: E402
from test_torch_public6 import _command  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "torch" / "public7"

CLEAN = [
    "sam2_attention.py:make_rope",            # complex axial rotary, `k[:, :, :n] = ...`
    "sam2_attention.py:make_memory",          # rope_k_repeat, object pointers left out
    "sam2_attention.py:make_two_way",         # the mask decoder's block (downsample 2)
    "sam2_attention.py:make_two_way_first",
    "sam2_attention.py:make_hiera",           # hiera's attention on windows [B, H, W, C]
    "sam2_attention.py:make_hiera_q_pool",    # the queries max-pooled by 2 (was SC602)
    "efficientvit_lite_mla.py:make",          # the depthwise 5x5 and grouped 1x1 aggregation
    # (was SC602 x2; conform in float32 differs by torch's conv rounding on the ReLU
    # attention's near-zero sums, and agrees at rtol 1e-2)
    "efficientvit_lite_mla.py:make_no_aggregation",  # ReLU linear attention (was SC602:
    "efficientvit_lite_mla.py:make_quadratic",       # the eval-mode BatchNorm2d)
    "jadore_attention.py:make",               # q / temperature, pad mask
    "jadore_attention.py:make_decoder",       # pad & subsequent mask
    "annotated_transformer.py:make",
    "annotated_transformer.py:make_decoder",
    "annotated_transformer.py:make_function",  # `type_as(tgt_mask.data)` (was SC601)
    "flux_attention.py:make",                 # 2 x 2 rotations `pe[..., 1]` (was SC316)
    "flux_attention.py:make_double",          # txt and img attended jointly
    "flux_attention.py:make_single",
    "bark_attention.py:make",                 # SDPA is_causal, the cache returned
    "bark_attention.py:make_manual",          # the buffer cut [FULL_T-T:FULL_T, :FULL_T]
    "bark_attention.py:make_step",            # one step with the past concatenated
    "bark_attention.py:make_step_manual",
    "labml_attention.py:make",                # sequence first, softmax over axis 1
    "labml_attention.py:make_alibi",          # biases by mask.cumsum, cached in forward
    "labml_attention.py:make_xl",             # Transformer-XL's shift (was SC411 x2); its
    # mask a concat of masks, `mask == 0` its negation (was SC403 once the table's slice
    # was bounded)
]

#: extract and conform (each costs seconds of torch work)
CONFORM = [
    "sam2_attention.py:make_two_way",
    "efficientvit_lite_mla.py:make_quadratic",
    "jadore_attention.py:make_decoder",
    "annotated_transformer.py:make_decoder",
    "bark_attention.py:make_step_manual",
    "labml_attention.py:make_alibi",          # torch.pow(m_0, arange) (was an opaque input)
    "labml_attention.py:make_xl",             # the relative table's slice (was SC320, SC317)
    "sam2_attention.py:make_hiera_q_pool",    # a max pool by taps; `(T//2)**2` positive
]

BUGS = [
    ("bugs/annotated_softmax_axis.py:make", "SC402", 38),   # scores.softmax(dim=-2)
    ("bugs/bark_pt_v.py:make_manual", "SC402", 91),          # att.transpose(-2, -1) @ v
    ("bugs/bark_scale_width.py:make_manual", "SC404", 87),   # 1.0 / math.sqrt(C)
    ("bugs/labml_softmax_axis.py:make", "SC402", 188),       # nn.Softmax(dim=0), at its call
]

FORMS = [
    "forms.py:batch_norm_eval",   # _native_batch_norm_legit_no_training (was SC602)
    "forms.py:data_detached",     # x.data in forward (was SC601)
    "forms.py:index_into_input",  # pe[..., 1] of an input (was SC316 at size 1)
    "forms.py:relative_shift",    # espnet's rel_shift (was SC411 x2)
    "forms.py:pow_of_number",     # torch.pow(number, tensor) (was an opaque input)
]


def _found(target: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(str(DATA / target)) for d in r.diagnostics]


def _conforms(target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    spec = tmp_path / "spec.attn"
    path = str(DATA / target)
    code, out = _command(capsys, "extract", path, "-o", str(spec))
    assert code == 0, out
    code, out = _command(capsys, "conform", str(spec), path)
    assert code == 0, out
    assert "conforms" in out
    return spec.read_text()


@pytest.mark.slow  # a few seconds each: torch.export, a retrace at sizes apart
@pytest.mark.parametrize("target", CLEAN)
def test_public7_module_verifies_clean(target: str) -> None:
    assert _found(target) == []


@pytest.mark.slow
@pytest.mark.parametrize("target", CONFORM)
def test_public7_module_conforms_with_no_flag(target: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _conforms(target, tmp_path, capsys)


@pytest.mark.slow
@pytest.mark.parametrize(("target", "code", "line"), BUGS)
def test_public7_planted_bug_is_flagged_at_its_line(target: str, code: str, line: int) -> None:
    assert _found(target) == [(code, line)]


@pytest.mark.slow
@pytest.mark.parametrize("target", FORMS)
def test_public7_form_is_lowered_clean_and_conforms(target: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert _found(target) == []
    _conforms(target, tmp_path, capsys)


@pytest.mark.slow
def test_public7_swapped_view_without_pad_is_still_flagged() -> None:
    # the relative shift's exemption needs the pad: a head merge by a view alone is SC411
    assert _found("forms.py:swapped_view_bug") == [("SC411", 114)]


@pytest.mark.slow
def test_public7_batch_norm_is_written_per_channel(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    spec = _conforms("forms.py:batch_norm_eval", tmp_path, capsys)
    assert "running_mean" in spec and "running_var" in spec and "sqrt(" in spec


@pytest.mark.slow
def test_public7_index_bounds_its_input_axis(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    spec = _conforms("forms.py:index_into_input", tmp_path, capsys)
    assert any(line.startswith("constraint") and ">= 2" in line for line in spec.splitlines())


@pytest.mark.slow
def test_public7_pow_of_a_number_is_lowered(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    # ALiBi's slopes: written exp(x * log(base)), not an input of the traced shape
    spec = _conforms("forms.py:pow_of_number", tmp_path, capsys)
    assert "exp(" in spec
    assert [line for line in spec.splitlines() if line.startswith("input")] == \
        [line for line in spec.splitlines() if line.startswith("input x:")]
