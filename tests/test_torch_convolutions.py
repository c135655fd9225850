"""Convolutions (issue 29; docs/torch.md, "Convolutions"): a kernel equal to its stride with
no padding, dilation or groups (a ViT's patch embedding, PVT v2's and SegFormer's spatial
reduction, a 1x1 conv) is lowered as patches times the weight as a matrix; every other one
(padded, overlapping, dilated, grouped, depthwise, `'same'`), the poolings (average,
adaptive, max) and `nn.Unfold` as one einsum with a selection of taps per spatial axis (or,
for a max, a gather by an index from `arange`; a transposed conv reads its selections the
other way round), so the attention they feed is checked with their sizes: clean and
conforming where the code is right (conformance in NumPy is what proves each lowering
exact), a bug after them flagged at its line; an adaptive max pooling by its bins (its
indices stay SC602). (PVT v2, as its repository writes it, is in tests/test_torch_public6.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from shapecheck.pytorch.conform import conform  # noqa: E402
from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check, check_extraction  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "torch" / "convolutions.py"
WINDOWS = DATA.parent / "conv_windows.py"

LOWERED = {  # factory -> a form its spec must hold (the conv lowered, not SC602)
    # the 30 x 27 image's last two columns dropped, as torch's conv drops them, then patches
    "patch_attention": "reshape(images[:, :, :((T//patch)) * patch, :((S//patch)) * patch], "
                       "[B, channels, (T//patch), patch, (S//patch), patch])",
    # a 1x1 conv: the channels last, times the weight, and back
    "pointwise_attn_block": "transpose(transpose(h_, [0, 2, 3, 1]) @ reshape(q_weight, "
                            "[channels, channels]).T + q_bias, [0, 3, 1, 2])",
    # a volume's patches of 2: the module runs only where each axis holds one (torch's own
    # floor of 2 is no range constraint torch records)
    "other_shapes": "constraint T3 >= 2",
}


#: factory of conv_windows.py (or convolutions.py) -> a form its spec must hold: the conv
#: or pooling read by its taps, not SC602
BY_TAPS = {
    # a padded 3x3 conv, a depthwise one of kernel 1, a dilated conv1d, an overlapping one
    "convolutions.py:not_products": 'einsum("...chw,yjh,xkw,ocjk->...oyx", x, taps, taps_1, '
                                    'padded_weight) + padded_bias[:, None, None]',
    # every form at once (avg/adaptive/max poolings, groups, 'same', unfold, batch norm,
    # transposed convs):
    # the selection of a 'same' conv1d of kernel 4 (one zero before, two after)
    "conv_windows.py:windows": "taps = maximum(1 - abs(arange(13)[None, None, :] - "
                               "(arange(13)[:, None, None] - 1 + arange(4)[None, :, None])), 0)",
    # Restormer-style MDTA: the depthwise 3x3 padded conv of q, k, v
    "conv_windows.py:channel_attention": '"...chw,yjh,xkw,cjk->...cyx"',
    # SegFormer's overlapping patch embedding: kernel 7, stride 4, padding 3
    "conv_windows.py:overlap_embed_attention": "[:, None, None] * 4 - 3 + arange(7)",
    # keys and values average-pooled with padding, the padding not counted
    "conv_windows.py:pooled_keys_attention": '/ einsum("yjh,xkw->yx", taps, taps_1)',
    # an adaptive max pooling: the map given an axis per output axis, -inf outside each of
    # torch's bins (overlapping: 5 rows in 3 bins), the maximum over the map's axes
    "convolutions.py:adaptive_max": "amax(where((bins > 0)[:, :, None, None] & (bins_1 > 0)"
                                    "[None, None, :, :], x[:, :, None, :, None, :], -inf), "
                                    "axis=(3, 5))",
    # a sequence pooled to 4 spans, and to 1 (the maximum of each channel)
    "convolutions.py:adaptive_max_spans": "amax(where((bins > 0), pooled[:, :, None, :], -inf), "
                                          "axis=3) + max(pooled_1, axis=2, keepdims=true)",
    # Nyströmformer's depthwise (3, 1) conv of the values, a group per head
    "conv_windows.py:nystromformer": '"...chw,yjh,cjk->...cyw"',
    # ConvBERT's separable conv1d and its unfold of a [B, C, T, 1] map by (k, 1) windows
    "conv_windows.py:convbert": '"...chw,yjh->...cjyw"',
    # CvT's depthwise conv (stride 2 for the keys and values) and its BatchNorm2d in eval
    "conv_windows.py:cvt": "convolution_projection_key_convolution_projection_normalization_"
                           "running_mean[:, None, None]",
    # SqueezeBERT's grouped 1x1 conv1d
    "conv_windows.py:squeezebert": '"...gch,gocj->...goh"',
    # flash-attn's MHA with dwconv=True: a causal depthwise conv1d (padded by 2, cut back)
    "public4/flash_attn_mha.py:make_dwconv": '"...ch,yjh,cj->...cy"',
    # MaxViT's MBConv: BatchNorm2d, a depthwise 3x3 padded conv, squeeze-excitation
    "public6/max_vit_attention.py:make_mbconv": '"...chw,yjh,xkw,cjk->...cyx"',
}

#: factories of conv_windows.py with a softmax over the queries (`# BUG`) after a conv or a
#: pooling read by its taps
BUGS = ["channel_attention_bug", "overlap_embed_attention_bug", "pooled_keys_attention_bug"]


def _line(text: str, data: Path = DATA) -> int:
    return next(i for i, line in enumerate(data.read_text().splitlines(), 1) if text in line)


def _found(factory: str, data: Path = DATA) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(f"{data}:{factory}") for d in r.diagnostics]


@pytest.mark.slow  # a trace each (seconds)
@pytest.mark.parametrize("factory", list(LOWERED))
def test_a_convolution_that_is_a_product_is_lowered_clean_and_conforms(factory: str) -> None:
    target = f"{DATA}:{factory}"
    extraction = extract(target)
    assert extraction.unknown == [], extraction.text
    assert LOWERED[factory] in extraction.text, extraction.text
    traced = check_extraction(extraction, target)
    assert [d.code for r in traced.results for d in r.diagnostics] == [], extraction.text
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2)
    assert result.ok, result.report()


@pytest.mark.slow
def test_a_bug_after_a_patch_embedding_is_flagged_at_its_line() -> None:
    # the scores scaled by the model's width: SC404 through the lowered conv (the flattened
    # map's `(T//patch) * (S//patch)` was a false SC201 that hid it)
    assert _found("patch_attention_bug") == [("SC404", _line("# BUG"))]


@pytest.mark.slow  # a trace each, and conformance at five bindings (seconds)
@pytest.mark.parametrize("target", list(BY_TAPS))
def test_a_window_read_by_its_taps_is_clean_and_conforms(target: str, tmp_path: Path) -> None:
    if target.split(":")[1] in ("nystromformer", "convbert", "cvt", "squeezebert"):
        pytest.importorskip("transformers")
    path = f"{DATA.parent / target}"
    extraction = extract(path)
    assert extraction.unknown == [], extraction.text
    assert BY_TAPS[target] in extraction.text, extraction.text
    traced = check_extraction(extraction, path)
    assert [d.code for r in traced.results for d in r.diagnostics] == [], extraction.text
    # the spec on its own: the checker proves each einsum's shapes, and the selections,
    # made from `arange`, raise no formula warning (no SC4xx from positions or masks)
    from shapecheck.loader import check_text

    program = check_text(extraction.text)
    assert [d.code for d in program.diagnostics] == [], extraction.text
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=3)
    assert result.ok, result.report()


@pytest.mark.slow
@pytest.mark.parametrize("factory", BUGS)
def test_a_softmax_over_the_queries_after_a_window_is_flagged_at_its_line(factory: str) -> None:
    # each bug module's `# BUG` line, in the order of BUGS
    lines = [i for i, line in enumerate(WINDOWS.read_text().splitlines(), 1) if "# BUG" in line]
    assert _found(factory, WINDOWS) == [("SC402", lines[BUGS.index(factory)])]


@pytest.mark.slow
def test_an_adaptive_max_poolings_indices_stay_unlowered_at_their_line() -> None:
    # its maximum is lowered (BY_TAPS); the indices `return_indices=True` gives are not
    assert _found("adaptive_max_indices") == [
        ("SC602", _line("y, where = F.adaptive_max_pool2d(x, 3, return_indices=True)"))]


@pytest.mark.slow
def test_talking_heads_by_1x1_convs_are_mixed_maps_not_a_sum_with_the_values() -> None:
    # x-transformers mixes the heads with `nn.Conv2d(heads, heads, 1)` before and after the
    # softmax: the weight, reshaped to a matrix, is still a param, so the mixed weights are
    # read as CaiT's einsum mix is (it was a false SC402 once the conv was lowered)
    target = DATA.parent / "public4" / "x_transformers_attention.py"
    assert [(d.code, d.span.line) for r in check(f"{target}:make_talking_heads")
            for d in r.diagnostics] == []


@pytest.mark.slow
def test_segformer_spatially_reduced_attention_is_clean() -> None:
    pytest.importorskip("transformers")
    assert _found("segformer_attention") == []  # was SC602 at the reduction's conv


@pytest.mark.slow
def test_a_one_layer_vit_is_traced_whole_with_its_patch_embedding() -> None:
    """A model holding one attention layer is a block, traced whole where it lowers whole:
    ViT's patch embedding was SC602, and only the attention layer was then checked."""
    pytest.importorskip("transformers")
    from shapecheck.pytorch.front.model import _block
    from shapecheck.pytorch.front.target import build

    target = f"{DATA}:vit_one_layer"
    traced = _block(build(target), target, None, ())
    assert traced is not None
    assert [d.code for r in traced.results for d in r.diagnostics] == []
