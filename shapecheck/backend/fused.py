"""Blockwise attention in NumPy: ``softmax(ops(Q @ K.T)) @ V`` in O(N·d) memory.

The kernel takes the pattern in a *canonical* layout — ``q: [..., Nq, d]``,
``k: [..., Nk, d]``, ``v: [..., Nk, dv]`` (batch axes broadcast as in ``matmul``) —
and the operations the spec applies to the scores between the product and the
softmax, in the order it applies them (:class:`Op`: a scale, an added bias, a mask).
It never builds the ``[..., Nq, Nk]`` table:

- **Row blocks.** Queries are processed ``rows`` at a time; a block's scores
  ``[..., rows, keys]`` are computed, masked, normalised and multiplied by ``V`` at once.
- **Key blocks.** Where even a block of a few rows against every key would be too
  large, the keys are processed ``keys`` at a time with an *online softmax*: the
  running row maximum ``m``, normaliser ``l`` and output ``acc`` are rescaled by
  ``exp(m_old - m_new)`` as each key block arrives, and ``acc / l`` is the output.
- **Masks** are applied per block: a causal or sliding-window mask is generated from
  the block's row and key indices (:class:`Causal`), never materialised; a mask given as
  a tensor (a key-padding mask) is sliced. Key blocks that a ``-inf`` causal or window
  mask hides entirely are skipped.
- **Invariants** are checked inside the blocks, where the normaliser is at hand: every
  row's weights ``exp(s - m) / l`` sum to 1 (recomputed in float64 from each key block's
  partial sums and maxima, so the online bookkeeping is checked too); a row whose
  every key is hidden by ``-inf`` gives NaN, as the unfused softmax does, and is counted.

Semantics are those of the unfused execution (a fully masked row is NaN; a finite fill
such as ``-1e9`` replaces the score, as ``where`` does); values agree to rounding.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from .errors import message
from .pattern import Fusable, Layout, layout, parts_span_scores

TILE_BYTES = 4 << 20  # the scores of one block: small enough to stay near the caches
MIN_ROWS = 32  # fewer rows than this against every key: block the keys instead
MIN_KEYS = 256
SHARES = 4  # row blocks per worker, at least, where there are rows enough


@dataclass(frozen=True)
class Causal:
    """Query ``i`` sees key ``j`` when ``j <= i + offset`` (and, with a window ``W``, when
    ``j > i + offset - W``): ``causal_mask(N_q, N_k, window=W)`` has ``offset = N_k - N_q``.
    ``transposed``: the mask's rows are the keys (``causal_mask(N_k, N_q).T``), so query
    ``i`` sees key ``j`` when ``i <= j + offset`` (and ``i > j + offset - W``)."""

    offset: int = 0
    window: int | None = None
    transposed: bool = False

    def keep(self, rows: range, keys: range) -> np.ndarray:
        """The ``[rows, keys]`` block of the mask, from indices alone."""
        i = np.arange(rows.start, rows.stop).reshape(-1, 1)
        j = np.arange(keys.start, keys.stop).reshape(1, -1)
        near, far = (i, j) if self.transposed else (j, i)
        keep = near <= far + self.offset
        if self.window is not None:
            keep &= near > far + self.offset - self.window
        return keep

    def key_range(self, rows: range, nk: int) -> range:
        """The keys some row of ``rows`` may see (the others are hidden for every row)."""
        first, last = rows.start, rows.stop - 1
        if self.transposed:  # j >= i - offset, and j < i - offset + W
            start = max(0, first - self.offset)
            stop = nk if self.window is None else min(nk, last - self.offset + self.window)
        else:  # j <= i + offset, and j > i + offset - W
            stop = min(nk, last + self.offset + 1)
            start = 0 if self.window is None else max(0, first + self.offset - self.window + 1)
        return range(start, max(start, stop))


@dataclass(frozen=True)
class Op:
    """One operation on the scores, applied in this order.

    - ``scale``: multiply by ``value`` (or divide, ``divides``, as the spec writes it);
    - ``bias``: add ``tensor`` (broadcastable to ``[..., Nq, Nk]``), or subtract it
      (``divides``, as for a scale: the inverse operation);
    - ``mask``: where the mask does not keep a score, replace it by ``fill`` (or add
      ``fill``, ``additive``, as ``S + where(m, 0, fill)``). The mask is ``causal``
      (generated) or ``tensor`` (bool, broadcastable); ``keeps`` False inverts it
      (``where(m, fill, S)``);
    - ``cap``: the `tanh` of each score (a soft-cap `c * tanh(S / c)`; its factors are
      scales before and after it).

    A bias or mask that is a function of positions has ``block`` instead of ``tensor``:
    ``block(rows, keys)`` evaluates it for the block only (broadcastable to the block).
    """

    kind: str
    value: float = 1.0
    divides: bool = False
    tensor: np.ndarray | None = None
    causal: Causal | None = None
    keeps: bool = True
    fill: float = -math.inf
    additive: bool = False
    block: Callable[[range, range], np.ndarray] | None = None

    def part(self, rows: range, keys: range) -> np.ndarray:
        """The bias or mask tensor's part for the block."""
        if self.block is not None:
            return self.block(rows, keys)
        assert self.tensor is not None
        return _slice(self.tensor, rows, keys)

    def hides(self) -> bool:
        """A ``-inf`` mask: what it hides has weight exactly 0, whatever else is added."""
        return self.kind == "mask" and self.fill == -math.inf


@dataclass(frozen=True)
class Blocks:
    rows: int
    keys: int
    online: bool  # keys in blocks of ``keys`` (an online softmax); else every key at once


def blocks_for(batch: int, nq: int, nk: int, itemsize: int, tile_bytes: int = TILE_BYTES,
               workers: int = 1) -> Blocks:
    """Row and key block sizes keeping a block's scores near ``tile_bytes``, with at least
    :data:`SHARES` row blocks per worker where the rows allow (so that the workers stay
    busy, and a short table does not get blocks larger than itself)."""
    per_row = batch * nk * itemsize
    rows = max(1, tile_bytes // max(per_row, 1))
    if rows >= MIN_ROWS or rows >= nq:
        shared = max(MIN_ROWS, -(-nq // (SHARES * workers)))
        return Blocks(min(rows, nq, shared), nk, False)
    rows = min(nq, MIN_ROWS)
    keys = max(MIN_KEYS, tile_bytes // max(batch * rows * itemsize, 1))
    return Blocks(rows, min(keys, nk), keys < nk)


def workspace_bytes(blocks: Blocks, batch: int, dv: int, itemsize: int) -> int:
    """The memory the kernel adds to its inputs and output: a block's scores, a bool mask
    block, the block's ``P @ V``, and (online) the running maximum, normaliser and output."""
    tile = batch * blocks.rows * blocks.keys
    rows = batch * blocks.rows
    product = rows * (dv + 1) * itemsize  # P @ V with the row sums, then divided
    extra = 3 * product + 4 * rows * 8 if blocks.online else 2 * product
    return tile * itemsize + tile + 2 * rows * 8 + extra


@dataclass
class Observed:
    """What the kernel saw: fully masked rows, the worst softmax sum."""

    masked_rows: int = 0
    worst_sum: float = 0.0  # largest |sum of a row's weights - 1| (NaN rows excepted)
    worst_total: float = 1.0  # that row's sum
    rows_checked: int = 0

    def merge(self, other: Observed) -> None:
        self.masked_rows += other.masked_rows
        self.rows_checked += other.rows_checked
        if other.worst_sum > self.worst_sum:
            self.worst_sum, self.worst_total = other.worst_sum, other.worst_total


@dataclass(frozen=True)
class _Kernel:
    q: np.ndarray
    k_t: np.ndarray  # [..., d, Nk]: K transposed, C-contiguous (BLAS reads it fastest so)
    v: np.ndarray  # [..., Nk, dv + 1]: V and a column of ones (P @ it gives the row sums too)
    ops: Sequence[Op]
    blocks: Blocks
    check: bool
    batch: tuple[int, ...]
    # each worker's scores buffer, reused block after block (a fresh 4 MiB array per
    # block costs its pages again)
    local: threading.local = field(default_factory=threading.local)

    def scores(self, rows: range, keys: range) -> np.ndarray:
        q, k_t = self.q[..., rows.start:rows.stop, :], self.k_t[..., keys.start:keys.stop]
        shape = (*np.broadcast_shapes(q.shape[:-2], k_t.shape[:-2]), len(rows), len(keys))
        size = math.prod(shape)
        buffer = getattr(self.local, "buffer", None)
        if buffer is None or buffer.size < size:
            buffer = self.local.buffer = np.empty(size, dtype=np.result_type(q, k_t))
        block = np.matmul(q, k_t, out=buffer[:size].reshape(shape))
        for op in self.ops:
            _apply(op, block, rows, keys)
        return block

    def key_range(self, rows: range) -> range:
        """The keys this row block must see: those no ``-inf`` causal mask hides from all
        of its rows (a replaced ``-inf`` has weight exactly 0, whatever else is added)."""
        nk = self.k_t.shape[-1]
        keys = range(0, nk)
        for op in self.ops:
            if op.hides() and op.causal is not None and op.keeps and not op.additive:
                allowed = op.causal.key_range(rows, nk)
                keys = range(max(keys.start, allowed.start), min(keys.stop, allowed.stop))
        return keys if keys.stop > keys.start else range(0, 0)

    def row_block(self, rows: range) -> tuple[np.ndarray, Observed]:
        observed = Observed()
        keys = self.key_range(rows)
        with np.errstate(all="ignore"):  # -inf - -inf is NaN on purpose (a fully masked row)
            if self.blocks.online and len(keys) > self.blocks.keys:
                return _online(self, rows, keys, observed), observed
            return _whole(self, rows, keys, observed), observed


def _slice(tensor: np.ndarray, rows: range, keys: range) -> np.ndarray:
    """A broadcastable ``[..., Nq, Nk]`` operand's part for the block (size-1 axes stay)."""
    row_part = slice(None) if tensor.shape[-2] == 1 else slice(rows.start, rows.stop)
    key_part = slice(None) if tensor.shape[-1] == 1 else slice(keys.start, keys.stop)
    return tensor[..., row_part, key_part]


def _apply(op: Op, block: np.ndarray, rows: range, keys: range) -> None:
    scalar = block.dtype.type
    if op.kind == "cap":
        np.tanh(block, out=block)
        return
    if op.kind == "scale":
        if op.divides:
            np.true_divide(block, scalar(op.value), out=block)
        else:
            np.multiply(block, scalar(op.value), out=block)
        return
    if op.kind == "bias":
        (np.subtract if op.divides else np.add)(block, op.part(rows, keys), out=block)
        return
    keep = op.causal.keep(rows, keys) if op.causal is not None else op.part(rows, keys)
    hidden = np.broadcast_to(np.logical_not(keep) if op.keeps else keep, block.shape)
    if op.additive:
        np.add(block, scalar(op.fill), out=block, where=hidden)
    else:
        np.copyto(block, scalar(op.fill), where=hidden)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, ops: Sequence[Op], *,
              blocks: Blocks | None = None, check: bool = False, workers: int | None = None,
              progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, Observed]:
    """``softmax(ops(q @ k.T)) @ v`` over the last axis, block by block; canonical layout.

    Row blocks run on ``workers`` threads (default: :func:`default_workers`), NumPy releasing
    the GIL in every ufunc and product, with BLAS held to one thread meanwhile so that the
    two kinds of parallelism do not oversubscribe the cores. ``progress(done, total)`` is
    called as row blocks finish (rows done, rows in all). Returns the output
    ``[..., Nq, dv]`` and what was observed.
    """
    nq, nk = q.shape[-2], k.shape[-2]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    if blocks is None:
        blocks = blocks_for(math.prod(batch), nq, nk, q.dtype.itemsize)
    out = np.empty((*batch, nq, v.shape[-1]), dtype=np.result_type(q, v))
    q, ops = _scaled_queries(q, ops, np.result_type(q, k))
    ones = np.ones((*v.shape[:-1], 1), dtype=np.result_type(q, v))
    kernel = _Kernel(q, np.ascontiguousarray(np.swapaxes(k, -1, -2)),
                     np.concatenate([v, ones], axis=-1), ops, blocks, check, batch)
    observed = Observed()
    starts = range(0, nq, blocks.rows)
    workers = max(1, min(workers or default_workers(), len(starts)))

    def run(start: int) -> tuple[int, Observed]:
        rows = range(start, min(nq, start + blocks.rows))
        result, seen = kernel.row_block(rows)
        out[..., rows.start:rows.stop, :] = result
        return len(rows), seen

    done = 0
    with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
        for count, seen in (map(run, starts) if workers == 1 else pool.map(run, starts)):
            observed.merge(seen)
            done += count
            if progress is not None:
                progress(done, nq)
    return out, observed


def _scaled_queries(q: np.ndarray, ops: Sequence[Op], dtype: np.dtype
                    ) -> tuple[np.ndarray, Sequence[Op]]:
    """The scales the spec applies to the scores first, applied to the queries instead
    (``(c·Q) @ K.T`` is ``c·(Q @ K.T)``: one pass over [N, d], not over every score)."""
    leading = 0
    while leading < len(ops) and ops[leading].kind == "scale":
        leading += 1
    if not leading:
        return q, ops
    scaled = np.array(q, dtype=dtype)
    for op in ops[:leading]:
        (np.true_divide if op.divides else np.multiply)(scaled, scaled.dtype.type(op.value),
                                                         out=scaled)
    return scaled, ops[leading:]


def default_workers() -> int:
    """One thread per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _whole(kernel: _Kernel, rows: range, keys: range, observed: Observed) -> np.ndarray:
    """One row block against all the keys it may see, at once."""
    v = kernel.v[..., keys.start:keys.stop, :]
    if len(keys) == 0:  # every key hidden: a fully masked row is NaN
        observed.masked_rows += math.prod(kernel.batch) * len(rows)
        return np.full((*kernel.batch, len(rows), v.shape[-1] - 1), np.nan, dtype=kernel.q.dtype)
    block = kernel.scores(rows, keys)
    peak = np.max(block, axis=-1, keepdims=True)
    observed.masked_rows += int(np.count_nonzero(np.isneginf(peak)))
    np.subtract(block, peak, out=block)
    np.exp(block, out=block)
    product = np.matmul(block, v)  # V's column of ones gives each row's sum: no pass of its own
    total = product[..., -1:]
    result = product[..., :-1] / total
    if kernel.check:
        _observe(observed, np.sum(block, axis=-1, dtype=np.float64) / total[..., 0])
    return result


def _online(kernel: _Kernel, rows: range, keys: range, observed: Observed) -> np.ndarray:
    """One row block, the keys ``kernel.blocks.keys`` at a time (online softmax)."""
    dtype, batch = kernel.q.dtype, kernel.batch
    peak = np.full((*batch, len(rows), 1), -np.inf, dtype=dtype)
    acc = np.zeros((*batch, len(rows), kernel.v.shape[-1]), dtype=dtype)  # its last column: sums
    partial: list[tuple[np.ndarray, np.ndarray]] = []  # (shift, float64 sum) per key block
    for start in range(keys.start, keys.stop, kernel.blocks.keys):
        part = range(start, min(keys.stop, start + kernel.blocks.keys))
        block = kernel.scores(rows, part)
        new_peak = np.maximum(peak, np.max(block, axis=-1, keepdims=True))
        shift = np.where(np.isneginf(new_peak), dtype.type(0), new_peak)  # no -inf - -inf here
        np.subtract(block, shift, out=block)
        np.exp(block, out=block)
        rescale = np.exp(peak - shift)
        acc *= rescale
        acc += np.matmul(block, kernel.v[..., part.start:part.stop, :])
        peak = new_peak
        if kernel.check:
            partial.append((shift, np.sum(block, axis=-1, keepdims=True, dtype=np.float64)))
    masked = np.isneginf(peak)
    observed.masked_rows += int(np.count_nonzero(masked))
    total = acc[..., -1:]
    result = acc[..., :-1] / total  # 0 / 0: NaN for a fully masked row, as the unfused softmax
    if kernel.check:
        final = np.where(masked, 0.0, peak).astype(np.float64)
        sums = sum(s * np.exp(shift.astype(np.float64) - final) for shift, s in partial)
        _observe(observed, (np.asarray(sums) / total)[..., 0])
    return result


def _observe(observed: Observed, totals: np.ndarray) -> None:
    valid = ~np.isnan(totals)
    observed.rows_checked += int(totals.size)
    if valid.any():
        deviation = np.abs(totals[valid] - 1.0)
        worst = int(np.argmax(deviation))
        if deviation[worst] > observed.worst_sum:
            observed.worst_sum = float(deviation[worst])
            observed.worst_total = float(totals[valid][worst])


def to_canonical(array: np.ndarray, recipe: Layout) -> np.ndarray:
    """``array`` in the canonical axis order (a view when NumPy can make one)."""
    return np.reshape(np.transpose(np.reshape(array, recipe.squeezed), recipe.order), recipe.shape)


def block_to_canonical(array: np.ndarray, labels: Sequence[str | None],
                       target: Sequence[str]) -> np.ndarray:
    """A block of a part (its query and key axes cut to the block) in the canonical axis
    order ``target``: as :func:`to_canonical`, with the sizes read off the block."""
    kept = [axis for axis, label in enumerate(labels) if label is not None]
    present = [labels[axis] for axis in kept]
    ordered = [label for label in target if label in present]
    moved = np.transpose(np.reshape(array, [array.shape[axis] for axis in kept]),
                         [present.index(label) for label in ordered])
    return np.reshape(moved, [moved.shape[ordered.index(label)] if label in ordered else 1
                              for label in target])


def from_canonical(array: np.ndarray, recipe: Layout, shape: tuple[int, ...]) -> np.ndarray:
    """The canonical ``array`` back in the layout ``recipe`` was made for (``shape``)."""
    return np.reshape(np.transpose(np.reshape(array, recipe.canonical), recipe.inverse), shape)


# --- a pattern of the program, planned -----------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """One attention pattern as the NumPy backend runs it: the layouts of its operands, the
    block sizes, and the memory the kernel adds (for the estimate)."""

    fusable: Fusable
    layouts: dict[int, Layout]  # id(node) -> its layout to canonical
    causal: dict[int, Causal]  # id(step) -> the mask at the bindings
    blocks: Blocks
    workers: int
    batch: tuple[int, ...]
    nq: int
    nk: int
    dv: int
    workspace: int  # bytes, every worker's blocks together

    def note(self) -> str:
        keys = message("fused_keys", keys=self.blocks.keys) if self.blocks.online else ""
        if any(step.blockwise is not None for step in self.fusable.ops):
            keys += message("fused_positions")
        how = message("fused_blocks", rows=self.blocks.rows, keys=keys,
                      shape=list((*self.batch, self.nq, self.nk)))
        return message("fused", name=self.fusable.softmax_name, line=self.fusable.softmax_line,
                       how=how)


def plan(fusable: Fusable, shape_of: Callable[[Any], tuple[int, ...]],
         evaluate: Callable[[Any], int | None], itemsize: int) -> Planned | None:
    """How to run ``fusable`` at the bindings; None when an operand's axes do not fit the
    canonical layout (a sized axis without a role)."""
    layouts: dict[int, Layout] = {}
    wanted = [(fusable.query, fusable.canonical_query), (fusable.key, fusable.canonical_key),
              (fusable.value, fusable.canonical_value), *(
                  (step.part, fusable.canonical_scores) for step in fusable.ops if step.part)]
    for part, target in wanted:
        recipe = layout(part.labels, shape_of(part.node), target)
        if recipe is None:
            return None
        layouts[id(part.node)] = recipe
    output = layout(fusable.output_labels, shape_of(fusable.output), fusable.canonical_output)
    if output is None:
        return None
    layouts[id(fusable.output)] = output
    causal = {}
    for step in fusable.ops:
        if step.causal is not None:
            n = evaluate(step.causal.n)
            n_k = evaluate(step.causal.n_k) if step.causal.n_k is not None else n
            window = evaluate(step.causal.window) if step.causal.window is not None else None
            if n is None or n_k is None:
                return None
            causal[id(step)] = Causal(n_k - n, window, step.causal.transposed)
    batch = output.shape[:-2]
    nq, dv = output.shape[-2:]
    nk = layouts[id(fusable.key.node)].shape[-2]
    if not parts_span_scores(fusable, shape_of, nq, nk):
        return None
    workers = default_workers()
    blocks = blocks_for(math.prod(batch), nq, nk, itemsize, workers=workers)
    workers = min(workers, -(-nq // blocks.rows))
    value = layouts[id(fusable.value.node)].shape
    copies = (math.prod(layouts[id(fusable.query.node)].shape)  # the scaled queries
              + math.prod(layouts[id(fusable.key.node)].shape)  # K transposed
              + math.prod(value[:-1]) * (value[-1] + 1)) * itemsize  # V and a column of ones
    workspace = workers * workspace_bytes(blocks, math.prod(batch), dv, itemsize) + copies
    return Planned(fusable, layouts, causal, blocks, workers, batch, nq, nk, dv, workspace)
