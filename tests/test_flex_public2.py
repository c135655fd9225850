"""FlexAttention as others write it, a second corpus (issue 33): attention-gym's newer masks
and score changes (Longformer's global tokens, packed documents by their offsets, a shared
prompt, Flamingo's image intervals, batchify, block diffusion, JetSpec's training and tree
masks, Sandwich, Graphormer, an activation through the log-space trick) and torchtitan's
(block causal from positions, fixed blocks, its sliding window, the efficient packed mask,
the vision encoder's segments), their bodies those projects' own (BSD-3; headers in
tests/data/flex/public2/). Every correct module verifies clean and conforms to the spec
`extract` writes for it; each one-edit bug of tests/data/flex/public2/bugs/ that something
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

BUGS = [  # (file in bugs/, code, line of the function that is wrong)
    ("batchify_div.py", "SC433", 97),             # `//` for `%`: query 4 sees no key
    ("jetspec_tree_key.py", "SC613", 141),        # ancestor_matrix[q_idx, kv_idx]: past its nodes
    ("sandwich_scale_by_query.py", "SC613", 160),  # head_scale[q_idx]: past its heads
    ("graphormer_by_head.py", "SC613", 168),      # distances[h, ...]: past the samples
    ("titan_documents_same.py", "SC435", 29),     # doc_ids[q_idx] == doc_ids[q_idx]
    ("titan_reversed.py", "SC407", 22),           # q_idx <= kv_idx: the keys after each query
    ("titan_vision_by_head.py", "SC613", 157),    # segment_ids[h * N + q_idx]: past its end
]

#: one-edit bugs nothing true can be said about without the author's intent: a valid mask
#: or score of another shape, or a difference that only the data's meaning shows
INTENT_ONLY = {
    "longformer_and.py": "and_masks for or_masks: a window of global tokens, valid if meant",
    "longformer_same_side.py": "`g[q] | g[q]`: the key's flag never read; a mask of another "
                               "shape (global queries only), redundant but valid",
    "doc_start_strict.py": "`kv > offsets[ids[q]]`: empty rows only if the offsets are the "
                           "documents' starts, which the data says, not the code",
    "shared_prefix_end.py": "`offsets[p]` for `offsets[p + 1]`: an empty prefix range, by "
                            "what the offsets mean",
    "flamingo_same_bound.py": "`interval[0] <= q < interval[0]`: never true, but proving it "
                              "needs the two reads to be one value (opaque reads)",
    "diffusion_own_block.py": "`>=` for `>`: a block diffusion of another shape",
    "jetspec_anchor.py": "`<` for `<=`: the anchor sees the prefix only; valid",
    "sandwich_no_offset.py": "the offset left out: another distance's bias, in range (eager "
                             "PyTorch reads a negative index from the end)",
    "graphormer_bias_by_batch.py": "spatial_bias[b, ...]: in range at the sizes called (fewer "
                                   "samples than heads); another row of the table",
    "activation_no_offset.py": "log(sigmoid(s)): still defined, another activation",
    "titan_window_inclusive.py": "`<=` for `<`: found once the convention is stated (below)",
    "titan_block_or.py": "or_masks for and_masks: causal plus whole blocks, a prefix-LM-like "
                         "mask",
    "titan_packed_by_key.py": "`offsets[ids[kv]]`: always true for valid ids; only the data's "
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


@pytest.mark.parametrize("file, code, line", BUGS)
def test_public_flex_bugs_are_flagged_at_their_line(file: str, code: str, line: int) -> None:
    assert found(DATA / "bugs" / file, "make") == [(code, line)]


def test_every_bug_file_is_flagged_or_listed_as_intent_only() -> None:
    listed = {file for file, _, _ in BUGS} | set(INTENT_ONLY)
    assert listed == {p.name for p in (DATA / "bugs").glob("*.py")}


@pytest.mark.parametrize("file", ["longformer_and.py", "graphormer_bias_by_batch.py",
                                  "sandwich_no_offset.py", "titan_block_or.py"])
def test_intent_only_bugs_are_not_flagged(file: str) -> None:
    """A sample of the listed ones (each a valid mask or score of another shape): nothing is
    said, so a change that makes one flagged is seen and its truth judged."""
    assert found(DATA / "bugs" / file, "make") == []


def test_a_stated_window_convention_finds_torchtitans_window_made_inclusive() -> None:
    """torchtitan documents `window_size` as the keys a query sees, its own included
    (`q_idx - kv_idx < window_size`): stated (`size=W window exclusive`), `<=` is SC432 at
    the mask_mod's line and the correct module is clean."""
    stated = ["size=W window exclusive"]
    assert found(DATA / "titan.py", "sliding_window", stated) == []
    assert found(DATA / "bugs" / "titan_window_inclusive.py", "make", stated) == \
        [("SC432", 59)]


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


def test_a_read_in_range_only_by_its_clamp_is_clean() -> None:
    """JetSpec's tree mask clamps its index into the tree (`(kv_idx - P).clamp(0, N - 1)`),
    as a mask_mod evaluated at every key must: clean; the same read at `kv_idx` is not."""
    assert found(DATA / "gym2.py", "jetspec_tree") == []
    assert found(DATA / "bugs" / "jetspec_tree_key.py", "make") == [("SC613", 141)]
