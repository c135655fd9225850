"""FlexAttention as others write it, a second corpus (issue 33): attention-gym's newer masks
and score changes (Longformer's global tokens, packed documents by their offsets, a shared
prompt, Flamingo's image intervals, batchify, block diffusion, JetSpec's training and tree
masks, Sandwich, Graphormer, an activation through the log-space trick) and torchtitan's
(block causal from positions, fixed blocks, its sliding window, the efficient packed mask,
the vision encoder's segments), their bodies those projects' own (BSD-3; headers in
tests/data/flex/public2/). Every correct module verifies clean and conforms to the spec
`extract` writes for it; each one-edit bug (`EDITS`, planted in a copy) that something
true can be said about is flagged at the Python line of its mask_mod or score_mod, and the
others are listed with the reason nothing is said (docs/torch.md, "A second public corpus").
Slow: each target is traced (never compiled)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.nn.attention.flex_attention")

from shapecheck.pytorch.conform import conform  # noqa: E402
from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data" / "flex" / "public2"

CLEAN = [
    "gym2.py:longformer", "gym2.py:packed_causal", "gym2.py:shared_prefix", "gym2.py:flamingo",
    "gym2.py:batchify", "gym2.py:batchify_noop", "gym2.py:block_diffusion",
    "gym2.py:jetspec_training", "gym2.py:jetspec_tree", "gym2.py:sandwich",
    "gym2.py:graphormer", "gym2.py:activation",
    "titan.py:block_causal", "titan.py:fixed_block", "titan.py:sliding_window",
    "titan.py:packed_causal", "titan.py:vision_segments",
]

#: the one-edit bugs: each a correct module of the corpus with its text edited (every edit
#: on one line, so a line of the copy is the original's), by name: (file, factory, edits)
EDITS: dict[str, tuple[str, str, tuple[tuple[str, str], ...]]] = {
    "activation_no_offset": (  # an offset left out: the log of the activation alone
        "gym2.py", "activation", (
            ("return torch.log(activation(score) + offset)",
             "return torch.log(activation(score))"),
        )),
    "batchify_div": (  # `//` for `%`: the inner mask compares an offset with a group number
        "gym2.py", "batchify", (
            ("inner_mask = mask_mod(b, h, q_idx % batchify_size, kv_idx % batchify_size)",
             "inner_mask = mask_mod(b, h, q_idx % batchify_size, kv_idx // batchify_size)"),
        )),
    "diffusion_own_block": (  # `>=` for `>`: a noised token sees its own block's clean tokens
        "gym2.py", "block_diffusion", (
            ("offset_block_causal = (q_block > kv_block) & q_noised & ~kv_noised",
             "offset_block_causal = (q_block >= kv_block) & q_noised & ~kv_noised"),
        )),
    "doc_start_strict": (  # a comparison made strict: a document's first token sees no key
        "gym2.py", "packed_causal", (
            ("return (kv_idx >= doc_start) & causal_mask(b, h, q_idx, kv_idx)",
             "return (kv_idx > doc_start) & causal_mask(b, h, q_idx, kv_idx)"),
        )),
    "flamingo_same_bound": (  # the wrong index read: no text token sees any image
        "gym2.py", "flamingo", (
            ("return (q_idx >= interval[0]) & (q_idx < interval[1])",
             "return (q_idx >= interval[0]) & (q_idx < interval[0])"),
        )),
    # the wrong index read: the bias table read by sample where the head was meant
    "graphormer_bias_by_batch": (
        "gym2.py", "graphormer", (
            ("return score + spatial_bias[h, distances[b, q_idx, kv_idx]]",
             "return score + spatial_bias[b, distances[b, q_idx, kv_idx]]"),
        )),
    # the wrong index read: the distances read by head where the batch was meant
    "graphormer_by_head": (
        "gym2.py", "graphormer", (
            ("return score + spatial_bias[h, distances[b, q_idx, kv_idx]]",
             "return score + spatial_bias[h, distances[h, q_idx, kv_idx]]"),
        )),
    "jetspec_anchor": (  # `<` for `<=`: a block's token does not see itself
        "gym2.py", "jetspec_training", (
            ("(q_block == kv_block) & (kv_block_offset <= q_block_offset)",
             "(q_block == kv_block) & (kv_block_offset < q_block_offset)"),
        )),
    # the wrong index read: the ancestor matrix read at the key's position, past its nodes
    "jetspec_tree_key": (
        "gym2.py", "jetspec_tree", (
            ("return (kv_idx < prefix_length) | (tree_visible & ancestor_matrix[q_idx, tree_idx])",
             "return (kv_idx < prefix_length) | (tree_visible & ancestor_matrix[q_idx, kv_idx])"),
        )),
    "longformer_and": (  # and_masks for or_masks: a global token is seen only inside the window
        "gym2.py", "longformer", (
            ("global_sliding_window_mask = or_masks(sliding_window, global_attention)",
             "global_sliding_window_mask = and_masks(sliding_window, global_attention)"),
        )),
    "longformer_same_side": (  # the wrong index read: no query sees a global key outside its window
        "gym2.py", "longformer", (
            ("return is_global[q_idx] | is_global[kv_idx]",
             "return is_global[q_idx] | is_global[q_idx]"),
        )),
    "sandwich_no_offset": (  # an offset left out: the bias of another distance
        "gym2.py", "sandwich", (
            ("return score + rel_bias[q_idx - kv_idx + offset] * head_scale[h]",
             "return score + rel_bias[q_idx - kv_idx] * head_scale[h]"),
        )),
    # the wrong index read: the head scale read by query, past its heads
    "sandwich_scale_by_query": (
        "gym2.py", "sandwich", (
            ("return score + rel_bias[q_idx - kv_idx + offset] * head_scale[h]",
             "return score + rel_bias[q_idx - kv_idx + offset] * head_scale[q_idx]"),
        )),
    "shared_prefix_end": (  # an offset left out: the continuations never see their prompt
        "gym2.py", "shared_prefix", (
            ("q_prefix_end = offsets[q_prefix_document + 1]",
             "q_prefix_end = offsets[q_prefix_document]"),
        )),
    "titan_block_or": (  # or for and: every earlier key, and the block's later ones
        "titan.py", "fixed_block", (
            ("return and_masks(get_causal_mask_mod(), get_fixed_block_mask_mod(self.size))",
             "return or_masks(get_causal_mask_mod(), get_fixed_block_mask_mod(self.size))"),
            ("import and_masks, create_block_mask, flex_attention",
             "import and_masks, create_block_mask, flex_attention, or_masks"),
        )),
    "titan_documents_same": (  # the wrong index read: the document mask always true
        "titan.py", "block_causal", (
            ("return doc_ids[q_idx] == doc_ids[kv_idx]",
             "return doc_ids[q_idx] == doc_ids[q_idx]"),
        )),
    # the wrong index read: each key after its own document's start, always
    "titan_packed_by_key": (
        "titan.py", "packed_causal", (
            ("return kv_idx >= offsets[document_id[q_idx]]",
             "return kv_idx >= offsets[document_id[kv_idx]]"),
        )),
    "titan_reversed": (  # a comparison flipped: each query sees the keys after it
        "titan.py", "fixed_block", (
            ("return q_idx >= kv_idx",
             "return q_idx <= kv_idx"),
        )),
    "titan_vision_by_head": (  # a flat read by head: past the segments at every head but the first
        "titan.py", "vision_segments", (
            ("return segment_ids[q_idx] == segment_ids[kv_idx]",
             "return segment_ids[h * N + q_idx] == segment_ids[kv_idx]"),
        )),
    "titan_window_inclusive": (  # `<=` for `<`: one key more than the documented window
        "titan.py", "sliding_window", (
            ("return (kv_idx <= q_idx) & (q_idx - kv_idx < window_size)",
             "return (kv_idx <= q_idx) & (q_idx - kv_idx <= window_size)"),
        )),
}

BUGS = [  # (name in EDITS, code, line of the function that is wrong)
    ("batchify_div", "SC433", 95),             # `//` for `%`: query 4 sees no key
    ("flamingo_same_bound", "SC433", 83),      # `iv[0] <= q < iv[0]`: no query sees a key
    ("shared_prefix_end", "SC436", 73),        # `o[p] <= kv < o[p]`: the prefix part never true
    ("jetspec_tree_key", "SC613", 139),        # ancestor_matrix[q_idx, kv_idx]: past its nodes
    ("sandwich_scale_by_query", "SC613", 158),  # head_scale[q_idx]: past its heads
    ("graphormer_by_head", "SC613", 166),      # distances[h, ...]: past the samples
    # spatial_bias[b, ...]: in range at 2 samples, past its heads' rows at 6 (B is free)
    ("graphormer_bias_by_batch", "SC613", 166),
    ("titan_documents_same", "SC435", 27),     # doc_ids[q_idx] == doc_ids[q_idx]
    ("longformer_same_side", "SC435", 34),     # g[q_idx] | g[q_idx]: the key's flag read nowhere
    ("titan_reversed", "SC407", 20),           # q_idx <= kv_idx: the keys after each query
    ("titan_vision_by_head", "SC613", 155),    # segment_ids[h * N + q_idx]: past its end
]

#: one-edit bugs nothing true can be said about without the author's intent: a valid mask
#: or score of another shape, or a difference that only the data's meaning shows
INTENT_ONLY = {
    "longformer_and": "and_masks for or_masks: a window of global tokens, valid if meant",
    "doc_start_strict": "`kv > offsets[ids[q]]`: empty rows only if the offsets are the "
                        "documents' starts, which the data says, not the code",
    "diffusion_own_block": "`>=` for `>`: a block diffusion of another shape",
    "jetspec_anchor": "`<` for `<=`: the anchor sees the prefix only; valid",
    "sandwich_no_offset": "the offset left out: another distance's bias, in range (eager "
                          "PyTorch reads a negative index from the end)",
    "activation_no_offset": "log(sigmoid(s)): still defined, another activation",
    "titan_window_inclusive": "`<=` for `<`: found once the convention is stated (below)",
    "titan_block_or": "or_masks for and_masks: causal plus whole blocks, a prefix-LM-like "
                      "mask",
    "titan_packed_by_key": "`offsets[ids[kv]]`: always true for valid ids; only the data's "
                           "meaning shows it",
}


def found(path: Path, factory: str, init: list[str] | None = None) -> list[tuple[str, int]]:
    return [(d.code, d.span.line) for r in check(f"{path}:{factory}", init or [])
            for d in r.diagnostics]


@pytest.mark.parametrize("name", CLEAN)
def test_public_flex_modules_are_clean_and_conform(name: str) -> None:
    file, _, factory = name.partition(":")
    assert found(DATA / file, factory) == []
    extraction = extract(f"{DATA / file}:{factory}")
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2, rtol=1e-4, atol=1e-5)
    assert result.ok, result.report()


def planted(name: str, tmp_path: Path) -> tuple[Path, str]:
    """The module of ``EDITS[name]``, written beside the test with its edits, and its factory."""
    file, factory, edits = EDITS[name]
    text = (DATA / file).read_text()
    for old, new in edits:
        assert text.count(old) == 1, (name, old)
        text = text.replace(old, new)
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path, factory


@pytest.mark.parametrize("name, code, line", BUGS)
def test_public_flex_bugs_are_flagged_at_their_line(name: str, code: str, line: int,
                                                    tmp_path: Path) -> None:
    assert found(*planted(name, tmp_path)) == [(code, line)]


def test_every_bug_is_flagged_or_listed_as_intent_only() -> None:
    flagged = {name for name, _, _ in BUGS}
    assert not flagged & set(INTENT_ONLY) and flagged | set(INTENT_ONLY) == set(EDITS)


@pytest.mark.parametrize("name", ["longformer_and", "diffusion_own_block",
                                  "sandwich_no_offset", "titan_block_or"])
def test_intent_only_bugs_are_not_flagged(name: str, tmp_path: Path) -> None:
    """A sample of the listed ones (each a valid mask or score of another shape): nothing is
    said, so a change that makes one flagged is seen and its truth judged."""
    assert found(*planted(name, tmp_path)) == []


def test_a_stated_window_convention_finds_torchtitans_window_made_inclusive(
        tmp_path: Path) -> None:
    """torchtitan documents `window_size` as the keys a query sees, its own included
    (`q_idx - kv_idx < window_size`): stated (`size=W window exclusive`), `<=` is SC432 at
    the mask_mod's line and the correct module is clean."""
    stated = ["size=W window exclusive"]
    assert found(DATA / "titan.py", "sliding_window", stated) == []
    assert found(*planted("titan_window_inclusive", tmp_path), stated) == [("SC432", 57)]


def test_reads_past_an_axis_are_flagged_at_the_mask_mod() -> None:
    """SC613: the read by head where the batch was meant (the open item of the first
    corpus, `document_ids[h, q_idx]`), at the mask_mod's `return` line with a note at the
    read's own line, the position and the call's sizes in the message."""
    [result] = check(f"{DATA.parent / 'public' / 'bugs' / 'documents_by_head.py'}:make")
    [diagnostic] = result.diagnostics
    assert (diagnostic.code, diagnostic.span.line) == ("SC613", 23)
    assert [n.span.line for n in diagnostic.notes if n.span is not None] == [22]
    assert "reads `document_ids` at 2 on axis 0, which has 2 entries" in diagnostic.message
    assert "at h = 2 (a call of 2 samples" in diagnostic.message


def test_a_read_in_range_only_by_its_clamp_is_clean(tmp_path: Path) -> None:
    """JetSpec's tree mask clamps its index into the tree (`(kv_idx - P).clamp(0, N - 1)`),
    as a mask_mod evaluated at every key must: clean; the same read at `kv_idx` is not."""
    assert found(DATA / "gym2.py", "jetspec_tree") == []
    assert found(*planted("jetspec_tree_key", tmp_path)) == [("SC613", 139)]
