"""The evaluation behind SC613 (shapecheck/pytorch/front/bounds.py): a traced mask or score
function's reads checked against their axes at given sizes, on the positions alone. Fast:
the functions are traced with torch.fx here, no module is exported."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
fx = pytest.importorskip("torch.fx")

from shapecheck.pytorch.front.bounds import out_of_range  # noqa: E402

MASK = ("b", "h", "q_idx", "kv_idx")
SIZES = {"b": 2, "h": 4, "q_idx": 6, "kv_idx": 6}


def reads(function, tensor, sizes=SIZES, params=MASK):  # type: ignore[no-untyped-def]
    graph = fx.Tracer().trace(function)
    shapes = {n.target: tuple(tensor.shape) for n in graph.nodes if n.op == "get_attr"}
    return [(r.axis, r.index, r.size, r.at) for r in out_of_range(graph, params, sizes, shapes)]


IDS = torch.zeros(2, 6, dtype=torch.long)


def test_a_read_by_head_where_the_sample_was_meant_is_past_the_samples() -> None:
    def mask_mod(b, h, q_idx, kv_idx):  # type: ignore[no-untyped-def]
        return IDS[h, q_idx] == IDS[h, kv_idx]

    assert reads(mask_mod, IDS) == [(0, 2, 2, (("h", 2),)), (0, 2, 2, (("h", 2),))]


def test_a_read_by_sample_is_in_range() -> None:
    def mask_mod(b, h, q_idx, kv_idx):  # type: ignore[no-untyped-def]
        return IDS[b, q_idx] == IDS[b][kv_idx]

    assert reads(mask_mod, IDS) == []


def test_a_clamped_index_is_in_range_and_an_unclamped_one_is_not() -> None:
    table = torch.ones(6, 3, dtype=torch.bool)

    def clamped(b, h, q_idx, kv_idx):  # type: ignore[no-untyped-def]
        return table[q_idx, (kv_idx - 3).clamp(min=0, max=2)]

    def unclamped(b, h, q_idx, kv_idx):  # type: ignore[no-untyped-def]
        return table[q_idx, kv_idx]

    assert reads(clamped, table) == []
    assert reads(unclamped, table) == [(1, 3, 3, (("kv_idx", 3),))]


def test_a_negative_index_that_eager_pytorch_wraps_is_not_reported() -> None:
    bias = torch.zeros(6)

    def score_mod(score, b, h, q_idx, kv_idx):  # type: ignore[no-untyped-def]
        return score + bias[q_idx - kv_idx]

    assert reads(score_mod, bias, params=("score", *MASK)) == []


def test_an_index_read_from_data_is_not_judged() -> None:
    offsets = torch.tensor([0, 100])

    def mask_mod(b, h, q_idx, kv_idx):  # type: ignore[no-untyped-def]
        return kv_idx >= offsets[offsets[q_idx % 2]]

    assert reads(mask_mod, offsets) == []


def test_the_numbers_a_function_holds_are_its_literals() -> None:
    """What the search at other sizes leaves alone (docs/torch.md, "Reads out of range"):
    a dim whose traced value the function holds as a number may stand for it."""
    from shapecheck.pytorch.front.bounds import literals

    def score_mod(score, b, h, q_idx, kv_idx):  # type: ignore[no-untyped-def]
        return score + IDS[b, (q_idx - kv_idx + 23) % 6] * (h > 1)

    assert literals(fx.Tracer().trace(score_mod)) == {23, 6, 1}
