"""FlexAttention as public code writes it (issue 33): attention-gym's masks and score
changes, torchtune's packed block-causal mask, torchtitan's document and sliding-window
masks, a bias table, slopes, key lengths, a decode step and `return_lse`, each called as
those projects call it (tests/data/flex/public/). Every correct module is clean; each
one-edit bug of tests/data/flex/public/bugs/ that shapecheck can say something true about
is flagged at the Python line of its mask_mod or score_mod (docs/torch.md, "Public flex
code"). Slow: each target is traced (never compiled)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.nn.attention.flex_attention")

from shapecheck.pytorch.conform import conform  # noqa: E402
from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data" / "flex" / "public"

CLEAN = [
    "gym_masks.py:causal", "gym_masks.py:sliding_window", "gym_masks.py:prefix_lm",
    "gym_masks.py:sink", "gym_masks.py:dilated", "gym_masks.py:natten",
    "gym_masks.py:alibi", "gym_masks.py:softcap", "gym_masks.py:documents",
    "packed.py:torchtune_packed",      # a helper taking the document ids before b, h, q, kv
    "packed.py:titan_document_causal", "packed.py:titan_sliding_window",
    "packed.py:lse",                   # return_lse=True: the log-sum-exp written, an output
    "packed.py:aux_lse",               # return_aux=AuxRequest(lse=True): aux.lse read
    "scores.py:bias_table", "scores.py:slopes", "scores.py:key_lengths",
    "scores.py:decode_step", "scores.py:encoder_lengths",
    "variants.py:score_causal", "variants.py:partial_documents", "variants.py:head_scale",
    "variants.py:chunked", "variants.py:registers", "variants.py:gemma2_local",
    "variants.py:logical_and",
    "more.py:gpt_fast_decode", "more.py:prefix_lengths", "more.py:multimodal",
    "more.py:head_score", "more.py:cross_attention", "more.py:no_mask",
]

BUGS = [  # (file in bugs/, code, line of the function that is wrong)
    ("causal_strict.py", "SC433", 11),       # q_idx > kv_idx: query 0 sees no key
    ("sink_and.py", "SC433", 21),            # and_masks for or_masks: at the and_masks line
    ("reversed_window.py", "SC407", 12),     # kv_idx >= q_idx: each query sees the future
    ("score_unmasks.py", "SC410", 10),       # where(causal, score, 0.0): future keys weighed
    ("decode_no_offset.py", "SC417", 28),    # the cache offset left out of the mask_mod
    ("lengths_query.py", "SC412", 21),       # q_idx < lengths[b] where kv_idx was meant
    ("documents_same_index.py", "SC435", 23),  # ids[b, q_idx] == ids[b, q_idx]: at the
    # mask_mod's return, with a note at the comparison's line (test below)
    ("documents_by_head.py", "SC613", 23),   # ids[h, q_idx]: past the 2 samples at h = 2
]


def found(path: Path, factory: str, init: list[str] | None = None) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(f"{path}:{factory}", init or [])
            for d in r.diagnostics]


@pytest.mark.parametrize("name", CLEAN)
def test_public_flex_modules_are_clean(name: str) -> None:
    file, _, factory = name.partition(":")
    assert found(DATA / file, factory) == []


@pytest.mark.parametrize("file, code, line", BUGS)
def test_public_flex_bugs_are_flagged_at_their_line(file: str, code: str, line: int) -> None:
    assert found(DATA / "bugs" / file, "make") == [(code, line)]


def test_a_helper_given_the_document_ids_is_a_function_of_positions() -> None:
    """torchtune's `_flex_block_causal_mask_mod(document_ids, b, h, q_idx, kv_idx)`: the
    ids are bound at the call, the def keeps FlexAttention's four positions."""
    text = extract(f"{DATA / 'packed.py'}:torchtune_packed").text
    assert "def _flex_block_causal_mask_mod(b, h, q_idx, kv_idx) = (q_idx >= kv_idx) & " \
        "(reshape(block_mask_0, [B * T])[b * T + q_idx] == reshape(block_mask_0, [B * T])" \
        "[b * T + kv_idx])" in text
    assert "def mask_mod(b, h, q_idx, kv_idx) = _flex_block_causal_mask_mod(b, h, q_idx, " \
        "kv_idx)" in text


@pytest.mark.parametrize("factory", ["lse", "aux_lse"])
def test_the_log_sum_exp_is_written_and_conforms(factory: str) -> None:
    extraction = extract(f"{DATA / 'packed.py'}:{factory}")
    assert "[B, n_heads, T] = log(sum(exp(where(causal_mask_(" in extraction.text
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2, rtol=1e-5, atol=1e-6)
    assert result.ok, result.report()


def test_a_decode_step_without_its_offset_says_the_mask_mod_fix() -> None:
    [result] = check(f"{DATA / 'bugs' / 'decode_no_offset.py'}:make")
    assert "q_idx + offset >= kv_idx" in result.diagnostics[0].help[0]


def test_a_comparison_with_itself_is_noted_where_it_is_written() -> None:
    [found] = [d for r in check(f"{DATA / 'bugs' / 'documents_same_index.py'}:make")
               for d in r.diagnostics]
    assert found.code == "SC435"
    assert [n.span.line for n in found.notes if n.span is not None] == [22]
    assert "kv_idx]`?" in found.help[-1]


def test_a_window_convention_stated_under_its_own_name_finds_the_window_made_strict() -> None:
    """attention-gym's `window_size` is inclusive (`q_idx - kv_idx <= window_size`); stated
    so under the argument's own name, the module is still traced again at sizes apart
    (its `setting = 6` is half its head width) and the convention holds there: `<` is
    SC432 at the mask_mod's line and nothing else; the correct window is clean. (Renamed,
    `setting=W`, the retrace is dropped: docs/torch.md, "The six left".)"""
    stated = ["setting=setting window inclusive"]
    assert found(DATA / "bugs" / "window_lt.py", "make", stated) == [("SC432", 16)]
    assert found(DATA / "gym_masks.py", "sliding_window",
                 ["window=window window inclusive"]) == []
