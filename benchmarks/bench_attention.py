"""Long sequences: the fused NumPy run and the torch backend against PyTorch's SDPA.

    python benchmarks/bench_attention.py                 # all three figures
    python benchmarks/bench_attention.py --rounds 7 --n 8192 --long 32768

Single head, d = 64, float32, the spec examples/single_head.attn
(``softmax(Q @ K.T / sqrt(d)) @ V``), compiled once with ``shapecheck.compile_spec``:

1. **time**: the fused NumPy run (``fused="auto"``) at N = ``--n`` against
   ``torch.nn.functional.scaled_dot_product_attention`` called directly on the same
   inputs (4-D, as its fast kernels want). Target (issue 36): NumPy / SDPA <= 1.3.
2. **memory**: the fused NumPy run at N = ``--long``: its peak memory above the inputs,
   by tracemalloc (NumPy reports its buffers to it), and the plan's own estimate.
   Target: < 256 MiB (the unfused table alone would be N² x 4 bytes: 4 GiB).
3. **torch backend**: ``compile_spec(..., backend="torch")`` at N = ``--n`` against the same
   direct SDPA call. Target: backend / SDPA <= 1.1.
4. **a mask function**: the fused NumPy run at N = ``--long`` of ``flex_attention`` with a
   causal document mask and a relative bias written as functions of positions
   (:data:`MASKED`): its peak above the inputs, by tracemalloc, and the estimate. Target:
   < 256 MiB (the mask's bool table alone would be N² bytes: 1 GiB).

Each round runs the versions compared once each, alternating their order, so that both
see the same machine state; a ratio is the median of the per-round ratios and the spread
is their range (robust on a busy machine: run it when the machine is quiet).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

import shapecheck

SPEC = Path(__file__).resolve().parent.parent / "examples" / "single_head.attn"
D = 64
MASKED = """dim N, d
input Q: [N, d]
input K: [N, d]
input V: [N, d]
input doc: int[N]
def document(q, k) = (k <= q) & (doc[q] == doc[k])
def relative(s, q, k) = s - 0.125 * (q - k)
output O = flex_attention(Q, K, V, mask=document, score=relative)
"""
TARGETS = {"time": 1.3, "memory": 256 << 20, "backend": 1.1}


def inputs(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {name: rng.standard_normal((n, D)).astype(np.float32) for name in ("Q", "K", "V")}


def sdpa(arrays: dict[str, np.ndarray]) -> Callable[[], object]:
    q, k, v = (torch.from_numpy(arrays[name]).reshape(1, 1, -1, D) for name in ("Q", "K", "V"))

    def call() -> object:
        with torch.inference_mode():
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    return call


def seconds(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def paired(ours: Callable[[], object], theirs: Callable[[], object], rounds: int) -> dict[str, float]:
    """Median times and the median (and range) of the per-round ratios ours / theirs."""
    ours(), theirs()  # warm up: plans built, thread pools started, pages touched
    mine, other, ratios = [], [], []
    for index in range(rounds):
        first, second = (ours, theirs) if index % 2 == 0 else (theirs, ours)
        a, b = seconds(first), seconds(second)
        t_ours, t_theirs = (a, b) if index % 2 == 0 else (b, a)
        mine.append(t_ours)
        other.append(t_theirs)
        ratios.append(t_ours / t_theirs)
    return {"ours": statistics.median(mine), "theirs": statistics.median(other),
            "ratio": statistics.median(ratios), "low": min(ratios), "high": max(ratios)}


def peak_above(call: Callable[[], object]) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        before = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def memory(spec: Path | str, arrays: dict[str, np.ndarray]) -> tuple[int, int]:
    """A fused NumPy run's peak above its inputs (tracemalloc), and the plan's estimate."""
    compiled = shapecheck.compile_spec(spec, dtype="float32")
    results = []
    peak = peak_above(lambda: results.append(compiled.run(arrays)))
    return peak, results[0].peak_estimate - sum(a.nbytes for a in arrays.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=8192, help="N for the time ratios")
    parser.add_argument("--long", type=int, default=32768, help="N for the memory figure")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"torch {torch.__version__} ({torch.get_num_threads()} threads), numpy {np.__version__}, "
          f"single head, d={D}, float32, {args.rounds} rounds; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    arrays = inputs(args.n)
    fused = shapecheck.compile_spec(SPEC, dtype="float32")
    figure = paired(lambda: fused(arrays), sdpa(arrays), args.rounds)
    print(f"1. fused NumPy at N={args.n}: {figure['ours']:.3f} s, SDPA {figure['theirs']:.3f} s, "
          f"ratio {figure['ratio']:.2f} (rounds {figure['low']:.2f}-{figure['high']:.2f}; "
          f"target <= {TARGETS['time']})")

    long = inputs(args.long)
    peak, estimate = memory(SPEC, long)
    print(f"2. fused NumPy at N={args.long}: peak {peak / 2**20:.1f} MiB above the inputs "
          f"(estimate {estimate / 2**20:.1f} MiB; the unfused table alone: "
          f"{args.long**2 * 4 / 2**30:.1f} GiB; target < {TARGETS['memory'] >> 20} MiB)")

    backend = shapecheck.compile_spec(SPEC, dtype="float32", backend="torch")
    figure = paired(lambda: backend(arrays), sdpa(arrays), args.rounds)
    print(f"3. torch backend at N={args.n}: {figure['ours']:.3f} s, SDPA {figure['theirs']:.3f} s, "
          f"ratio {figure['ratio']:.2f} (rounds {figure['low']:.2f}-{figure['high']:.2f}; "
          f"target <= {TARGETS['backend']})")

    masked = {**long, "doc": np.sort(np.random.default_rng(1).integers(0, 16, args.long))}
    peak, estimate = memory(MASKED, masked)
    print(f"4. a document mask and a relative bias as functions of positions, fused NumPy at "
          f"N={args.long}: peak {peak / 2**20:.1f} MiB above the inputs (estimate "
          f"{estimate / 2**20:.1f} MiB; the mask's table alone: {args.long**2 / 2**30:.1f} GiB; "
          f"target < {TARGETS['memory'] >> 20} MiB)")


if __name__ == "__main__":
    main()
