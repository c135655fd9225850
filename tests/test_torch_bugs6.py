"""Issue 31: a sixth, independent set of one-edit bugs in real attention code
(tests/data/torch/bugs6/, docs/bugs.md "2026-12-07: forty bugs planted by hand").

Each file is a copy of a correct module of tests/data/torch/public*/, tests/data/whole_models/
or examples/python/ (its header names the original, the class and the edited line) with ONE
edit, as a person makes it; every edit changes what the module computes and none makes it
raise. A bug is *flagged* when `verify FILE:FACTORY` gives a diagnostic, or a note of one,
at a line of the edited statement. The table states, for each bug, the code expected there;
a bug no diagnostic at its line could be true of is kept as an expected miss, with the codes
the file gives elsewhere (so that a change shows) and why.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("einops")

from shapecheck.messages.diagnostics import Diagnostic  # noqa: E402
from shapecheck.messages import codes  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

from test_torch_public import CLEAN  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "torch"
BUGS6 = DATA / "bugs6"


@dataclass(frozen=True)
class Bug:
    target: str              # file in bugs6/ : factory
    kind: str                # the class (docs/bugs.md)
    code: str | None         # flagged: the code at the line; a miss: the codes elsewhere
    lines: tuple[int, ...]   # the lines of the edited statement, in the bug's file
    flagged: bool = True
    why: str = ""            # a miss: why no diagnostic at the line is true of the code


B = Bug
TABLE = [
    # softmax over the wrong axis
    B("mingpt_softmax_heads.py:make", "softmax", "SC402", (57,)),
    B("sd_softmax_queries.py:make_masked", "softmax", "SC402", (64,)),
    B("wenet_softmax_queries.py:make", "softmax", "SC402", (159, 160, 161)),
    # the scale
    B("vit_scale_model_width.py:make", "scale", "SC404", (21,)),  # note: `self.scale` set here
    B("whisper_scale_squared.py:make_manual", "scale", "SC404", (72,)),  # note: `scale` set here
    B("decoder_scale_heads.py:make", "scale", "SC404", (30,)),
    B("cache_scale_sequence.py:make", "scale", "SC201 SC201", (38,), False,
      "`math.sqrt(k.size(-2))` makes torch.export specialise the key length (8): the scale "
      "is a number and the cache `8 - T` long; a constant factor is a model's choice (T5)"),
    B("perceiver_unscaled.py:make", "scale", "SC405", (52,)),
    B("swin_scale_twice.py:make", "scale", "SC404", (89,)),
    # masks
    B("decoder_mask_transposed.py:make", "mask_transposed", "SC610", (74,)),
    B("mingpt_mask_transposed.py:make", "mask_transposed", "SC407", (56,)),
    B("cache_mask_inverted.py:make", "mask_inverted", "SC408", (40,)),
    B("decoder_mask_inverted.py:make", "mask_inverted", "SC610", (32,)),  # note: applied here
    B("sd_mask_queries.py:make_masked", "mask_query_axis", "SC412", (60,)),  # note: defined here
    B("wenet_mask_queries.py:make", "mask_query_axis", "SC412", (155,), False,
      "SC412 is said at the masked_fill (158): the edited `mask.unsqueeze(-1).eq(0)` is "
      "lowered inline into that statement, so no note can name its line (it was SC317 "
      "alone: `mask[..., :T]` of the axis of 1 read as a slice past its end)"),
    B("cross_mask_after_softmax.py:make", "mask_after_softmax", "SC406", (37, 38)),
    B("mistral_mask_after_softmax.py:make", "mask_after_softmax", "SC406",
      (151, 152, 153, 154, 155)),
    # the causal triangle and its alignment
    B("litgpt_softcap_tril.py:make_softcap", "triangle", "SC408", (266,)),
    B("clip_mask_tril.py:make", "triangle", None, (99,), False,
      "the mask is built by the factory (the caller) and held as a tensor attribute: the "
      "traced module sees a [7, 7] constant, not its construction"),
    B("olmo_bias_diagonal.py:make_masked", "triangle", None, (456,), False,
      "the causal bias is an input the factory builds (the model's code, not the block's)"),
    B("cache_top_left.py:make", "alignment", "SC417", (39,)),
    # grouped K/V heads
    B("litgpt_k_tiled.py:make", "gqa_tiled", "SC414", (217,)),
    B("mistral_v_tiled.py:make", "gqa_tiled", "SC414", (37,)),
    B("flash_kv_tiled.py:make_gqa", "gqa_tiled", None, (137,), False,
      "K and V are tiled alike (one packed tensor): a relabelling of the query heads, which "
      "only trained weights can rule on (docs/torch.md)"),
    # rotary
    B("litgpt_rope_q_only.py:make_mha", "rotary", "SC418", (190,), False,
      "SC418 is said, at the rotation (306) with notes at the queries' call (189) and the "
      "product (272); the edited line leaves no traced node: with full rotary its whole-axis "
      "slice and the cat with an empty rest are erased by torch.export"),
    # a complex rotary (`view_as_complex(x) * freqs_cis`): SC418 and SC413 note the call
    B("mistral_rotary_on_v.py:make", "rotary", "SC418", (129,)),
    B("torchtune_rope_q_only.py:make", "rotary", "SC418", (569,), False,
      "the edit is the condition of an `if`: the branch not taken leaves no traced node at "
      "its line; SC418 is at the rotation, noting the queries' call"),
    # heads and windows
    B("olmo_merge_no_transpose.py:make", "heads", "SC411", (682,)),
    B("cross_split_no_transpose.py:make", "heads", "SC411", (33,)),
    B("nanogpt_merge_no_transpose.py:make", "heads", "SC411", (77,)),
    B("vitdet_merge_no_permute.py:make", "heads", None, (186,), False,
      "`[B*nH, H*W, d]` reshaped to `[B, H, W, nH*d]`: the heads sit inside a product with "
      "the batch, which SC411's regrouping search does not split"),
    # (windows partitioned without the permute: timm's Swin block, SC411 at the `view`, was
    # measured here and left to tests/test_whole_models.py's Swin block bug: tracing a
    # whole Swin block costs over a minute of CI)
    # products, caches, roles
    B("sd_weights_transposed.py:make", "pt_v", "SC402", (66,)),
    B("whisper_weights_transposed.py:make_manual", "pt_v", "SC402", (90,)),
    B("wenet_cache_v_after.py:make_chunk", "kv_order", "SC419", (207,)),
    B("fairseq_cache_k_after.py:make_decoder_step", "kv_order", "SC419", (473,)),
    B("xtransformers_queries_from_context.py:make_cross", "cross_roles", None, (602,), False,
      "queries, keys and values all read the context: an attention over it, whose input `x` "
      "goes unread; a module not reading one of its inputs is its interface (SC401 is not "
      "said on a Python target)"),
    # biases, batch
    B("swin_rel_bias_transposed.py:make", "rel_bias_transposed", None, (93,), False,
      "the bias gathered from a learned table by relative index, transposed, is the table "
      "reflected: only trained weights say which way it runs"),
    B("swin_bias_after_softmax.py:make", "bias_after_softmax", "SC406", (94, 102)),
    B("torchvision_batch_first.py:make", "batch_axis", None, (133,), False,
      "`batch_first=False` on [B, S, C]: nn.MultiheadAttention attends over B; which axis is "
      "the batch only the caller's layout says"),
]


def _original(bug: Bug) -> str:
    """The original's target, from the bug file's header (`# BUG (one edit) of PATH, ...`)."""
    file, factory = bug.target.split(":")
    header = (BUGS6 / file).read_text().splitlines()[0]
    found = re.match(r"# BUG \(one edit\) of (\S+), line", header)
    assert found is not None, header
    return f"{found.group(1)}:{factory}"


@functools.cache
def _diagnostics(target: Path) -> list[Diagnostic]:
    """The diagnostics `verify` gives in the target's own file (each target traced once)."""
    return [d for r in check(str(target)) for d in r.diagnostics
            if Path(r.path).name == target.name.split(":")[0]]


def _verified(target: Path) -> list[tuple[str, int, tuple[int, ...]]]:
    return [(d.code, d.span.line, tuple(n.span.line for n in d.notes if n.span is not None))
            for d in _diagnostics(target)]


def test_the_table_covers_every_bug_file_once() -> None:
    files = sorted(b.target.split(":")[0] for b in TABLE)
    assert files == sorted(p.name for p in BUGS6.glob("*.py"))
    for bug in TABLE:
        header = (BUGS6 / bug.target.split(":")[0]).read_text().splitlines()[:3]
        assert header[1] == f"# class: {bug.kind}"
        edited = header[2].removeprefix("# edited line(s) here: ").split(", ")
        assert all(int(line) in bug.lines for line in edited), (bug.target, edited)


@pytest.mark.slow  # one trace each, in this process (torch imported once)
@pytest.mark.parametrize("bug", TABLE, ids=[b.target for b in TABLE])
def test_bug_is_flagged_at_its_line_or_an_expected_miss(bug: Bug) -> None:
    found = _verified(BUGS6 / bug.target)
    at_line = [code for code, line, notes in found
               if line in bug.lines or any(n in bug.lines for n in notes)]
    if bug.flagged:
        assert bug.code in at_line, found
    else:
        assert at_line == [], found
        assert [code for code, _, _ in found] == (bug.code.split() if bug.code else []), found


@pytest.mark.slow
def test_a_tril_the_layer_drops_is_not_told_to_be_built_with_tril() -> None:
    # the decoder's `tril` read by the block's `masked_fill(mask, -inf)`: SC610 at the
    # mask, a note at the block's line, and no help (building it with tril is no fix)
    [found] = _diagnostics(BUGS6 / "decoder_mask_inverted.py:make")
    assert (found.code, found.help) == ("SC610", ())
    assert [n.span.line for n in found.notes if n.span is not None] == [32]


@pytest.mark.slow
def test_a_bias_moved_after_the_softmax_is_told_to_go_back_to_the_scores() -> None:
    # Swin's relative position bias added to the weights: the help is the bias's, not a
    # mask's (`masked_fill` would be no repair of a bias)
    [found] = [d for d in _diagnostics(BUGS6 / "swin_bias_after_softmax.py:make")
               if d.code == "SC406"]
    assert found.help[0] == codes.TORCH_HELPS["SC406 add_before_softmax"]
    assert "before the softmax" in found.help[1] and "masked_fill" not in " ".join(found.help)


#: originals no corpus test verifies (the public modules are tests/test_torch_public.py's)
_ELSEWHERE_UNCHECKED = ("examples/", "tests/data/whole_models/")
#: of those, the ones another test verifies clean (a whole model: a trace saved here)
_VERIFIED_ELSEWHERE = {
    "tests/data/whole_models/nanogpt_model.py:make": "tests/test_whole_models.py",
}


def test_every_public_original_is_a_clean_target_of_the_public_corpus() -> None:
    for bug in TABLE:
        original = _original(bug)
        if original.startswith("tests/data/torch/"):
            assert original.removeprefix("tests/data/torch/") in CLEAN, original
        else:
            assert original.startswith(_ELSEWHERE_UNCHECKED), original


@pytest.mark.slow
@pytest.mark.parametrize("original", sorted({_original(b) for b in TABLE
                                             if _original(b).startswith(_ELSEWHERE_UNCHECKED)
                                             and _original(b) not in _VERIFIED_ELSEWHERE}))
def test_original_outside_the_public_corpus_is_clean(original: str) -> None:
    assert _verified(ROOT / original) == []
