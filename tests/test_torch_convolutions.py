"""Convolutions that are products (issue 29; docs/torch.md, "Convolutions"): a kernel equal
to its stride with no padding, dilation or groups (a ViT's patch embedding, PVT v2's and
SegFormer's spatial reduction, a 1x1 conv) is lowered as patches times the weight as a
matrix, so the attention it feeds is checked with its sizes: clean and conforming where the
code is right, a bug after it flagged at its line; every other convolution stays SC602.
(PVT v2's reduction, as its repository writes it, is in tests/test_torch_public6.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from shapecheck.pytorch.conform import conform  # noqa: E402
from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check, check_extraction  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "torch" / "convolutions.py"

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


def _line(text: str) -> int:
    return next(i for i, line in enumerate(DATA.read_text().splitlines(), 1) if text in line)


def _found(factory: str) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(f"{DATA}:{factory}") for d in r.diagnostics]


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


@pytest.mark.slow
def test_other_convolutions_stay_unlowered_at_their_lines() -> None:
    lines = [_line(f"= self.{name}(") for name in ("padded", "depthwise", "dilated",
                                                    "overlapping")]
    assert _found("not_products") == [("SC602", line) for line in lines]


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
