"""The blockwise attention kernel against the table it never builds.

A differential test: ``softmax(ops(Q @ K.T)) @ V`` written densely here (the whole score
table, the operations in order, NumPy's softmax) and computed by the kernel in row
blocks, in key blocks with an online softmax, on one thread or several.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shapecheck.backend import fused, pattern

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)


def dense(q, k, v, ops):
    scores = q @ np.swapaxes(k, -1, -2)
    nq, nk = scores.shape[-2:]
    for op in ops:
        if op.kind == "scale":
            scores = scores / op.value if op.divides else scores * op.value
        elif op.kind == "bias":
            scores = scores + op.tensor
        else:
            keep = op.causal.keep(range(nq), range(nk)) if op.causal else op.tensor
            hidden = ~keep if op.keeps else keep
            scores = np.where(hidden, scores + op.fill if op.additive else op.fill, scores)
    with np.errstate(all="ignore"):
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return weights / weights.sum(axis=-1, keepdims=True) @ v


@st.composite
def problems(draw):
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    nq, nk, d, dv = (draw(st.integers(1, 24)) for _ in range(4))
    rng = np.random.default_rng(draw(st.integers(0, 1000)))
    q, k, v = (rng.standard_normal((*batch, n, width)) for n, width in ((nq, d), (nk, d), (nk, dv)))
    ops = [fused.Op("scale", value=math.sqrt(d), divides=True)]
    if draw(st.booleans()):
        ops.append(fused.Op("bias", tensor=rng.standard_normal((nq, nk))))
    kind = draw(st.sampled_from(["none", "causal", "window", "tensor"]))
    if kind in ("causal", "window"):
        window = draw(st.integers(1, 8)) if kind == "window" else None
        offset = draw(st.sampled_from([nk - nq, 0, -2, 3]))
        ops.append(fused.Op("mask", causal=fused.Causal(offset, window, draw(st.booleans()))))
    elif kind == "tensor":
        keep = rng.random((*batch, 1, nk)) < 0.6
        ops.append(fused.Op("mask", tensor=keep, keeps=draw(st.booleans()),
                            fill=draw(st.sampled_from([-math.inf, -1e9, -5.0])),
                            additive=draw(st.booleans())))
    if draw(st.booleans()):
        ops.append(fused.Op("scale", value=0.5))
    rows, keys = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    blocks = draw(st.sampled_from([None, fused.Blocks(rows, keys, True),
                                   fused.Blocks(rows, nk, False)]))
    return q, k, v, ops, blocks, draw(st.sampled_from([1, 2]))


@SETTINGS
@given(problems())
def test_blocks_equal_the_whole_table(problem):
    q, k, v, ops, blocks, workers = problem
    expected = dense(q, k, v, ops)
    got, observed = fused.attention(q, k, v, ops, blocks=blocks, check=True, workers=workers)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))  # fully masked rows
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12, equal_nan=True)
    assert observed.worst_sum < 1e-12
    masked_rows = int(np.isnan(expected).all(axis=-1).sum())
    assert observed.masked_rows == masked_rows


def test_float32_stays_float32():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 40, 8)).astype(np.float32) for _ in range(3))
    ops = [fused.Op("mask", causal=fused.Causal())]
    got, observed = fused.attention(q, k, v, ops, blocks=fused.Blocks(8, 8, True), check=True)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, dense(q, k, v, ops), rtol=1e-5, atol=1e-6)
    assert observed.worst_sum < 1e-5 and observed.rows_checked == 80


def test_causal_key_blocks_above_the_diagonal_are_never_computed(monkeypatch):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((64, 4)) for _ in range(3))
    seen: list[range] = []
    original = fused._Kernel.scores

    def scores(self, rows, keys):
        seen.append(keys)
        return original(self, rows, keys)

    monkeypatch.setattr(fused._Kernel, "scores", scores)
    ops = [fused.Op("mask", causal=fused.Causal())]
    fused.attention(q, k, v, ops, blocks=fused.Blocks(16, 16, True), workers=1)
    # rows 0-15 need keys 0-15 only; rows 48-63 all four key blocks: 1 + 2 + 3 + 4 blocks
    assert len(seen) == 10 and all(keys.stop <= 64 for keys in seen)


def test_the_online_bookkeeping_is_checked(monkeypatch):
    # a wrong rescale (forgetting exp(m_old - m_new)) breaks the float64 recomputation
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((8, 4)) * 3 for _ in range(3))
    real_exp = np.exp
    calls = {"n": 0}

    def broken_exp(x, *args, **kwargs):
        calls["n"] += 1
        result = real_exp(x, *args, **kwargs)
        return result * 1.5 if result.shape[-1:] == (1,) and calls["n"] % 2 else result

    monkeypatch.setattr(fused.np, "exp", broken_exp)
    _, observed = fused.attention(q, k, v, [], blocks=fused.Blocks(8, 2, True), check=True,
                                  workers=1)
    assert observed.worst_sum > 1e-3


def test_blocks_for_keeps_a_block_near_the_tile():
    whole = fused.blocks_for(batch=1, nq=8192, nk=8192, itemsize=4)
    assert not whole.online and whole.rows * 8192 * 4 <= fused.TILE_BYTES
    long = fused.blocks_for(batch=64, nq=1 << 20, nk=1 << 20, itemsize=4)
    assert long.online and long.rows == fused.MIN_ROWS
    assert 64 * long.rows * long.keys * 4 <= fused.TILE_BYTES * 1.01


def test_layout_brings_roles_into_canonical_order():
    array = np.arange(2 * 3 * 5).reshape(5, 2, 3)  # [N, H, d] -> [H, N, d]
    recipe = pattern.layout(["query", "batch:0", "feature"], array.shape,
                          ["batch:0", "query", "feature"])
    assert recipe is not None
    np.testing.assert_array_equal(fused.to_canonical(array, recipe), array.transpose(1, 0, 2))
    mask = np.ones((4, 1, 1, 7), dtype=bool)  # [B, 1, 1, N] against [B, H, Nq, Nk]
    recipe = pattern.layout(["batch:0", None, None, "key"], mask.shape,
                          ["batch:0", "batch:1", "query", "key"])
    assert recipe is not None and fused.to_canonical(mask, recipe).shape == (4, 1, 1, 7)
    assert pattern.layout(["query", None], (3, 2), ["query", "key"]) is None  # sized, no role
    back = pattern.layout(["query", "batch:0", "value"], (5, 2, 3), ["batch:0", "query", "value"])
    canonical = np.arange(30).reshape(2, 5, 3)
    assert back is not None
    np.testing.assert_array_equal(fused.from_canonical(canonical, back, (5, 2, 3)),
                                  canonical.transpose(1, 0, 2))


@given(st.integers(1, 12), st.integers(1, 12), st.integers(-6, 6),
       st.one_of(st.none(), st.integers(1, 5)), st.booleans(), st.integers(1, 5))
@SETTINGS
def test_a_causal_key_range_covers_every_key_its_rows_see(nq, nk, offset, window, transposed, size):
    mask = fused.Causal(offset, window, transposed)
    whole = mask.keep(range(nq), range(nk))
    for start in range(0, nq, size):
        rows = range(start, min(nq, start + size))
        keys = mask.key_range(rows, nk)
        seen = np.nonzero(whole[rows.start:rows.stop].any(axis=0))[0]
        assert all(j in keys for j in seen)
        np.testing.assert_array_equal(mask.keep(rows, range(nk)), whole[rows.start:rows.stop])
