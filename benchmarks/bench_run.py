"""Compiled spec vs hand-written NumPy: multi-head attention, side by side.

    python benchmarks/bench_run.py            # N=2048, H=8, d=64, float32 and float64
    python benchmarks/bench_run.py --n 512 --repeats 5

The spec is examples/multi_head.attn, compiled once with
``shapecheck.compile_spec`` and called with arrays (dims read from them). The
baseline is the same formula written by hand as a careful NumPy user would:
in-place scaling and softmax, one [H, N, N] buffer. A naive baseline (the
formula as written, `softmax` out of place) is shown for reference.

Each round calls every version once (the order reversing from round to round),
so that all see the same machine state; a time is the median over the rounds,
and a time ratio the median of the per-round ratios (robust on a busy machine). Peak memory is measured with tracemalloc
(NumPy reports its buffers to it) over one call each, inputs excluded.
Targets (issue #3): time ratio <= 1.1, peak-memory ratio <= 1.1.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np

import shapecheck

SPEC = Path(__file__).resolve().parent.parent / "examples" / "multi_head.attn"
TARGET = 1.1


def careful(X: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray,
            W_O: np.ndarray, H: int) -> np.ndarray:
    n, width = X.shape[0], W_Q.shape[1]
    d = width // H
    Q = (X @ W_Q).reshape(n, H, d).swapaxes(0, 1)
    K = (X @ W_K).reshape(n, H, d).swapaxes(0, 1)
    V = (X @ W_V).reshape(n, H, d).swapaxes(0, 1)
    S = Q @ K.swapaxes(-1, -2)
    S /= np.sqrt(X.dtype.type(d))
    S -= S.max(axis=-1, keepdims=True)
    np.exp(S, out=S)
    S /= S.sum(axis=-1, keepdims=True)
    O = (S @ V).swapaxes(0, 1).reshape(n, width)
    return O @ W_O


def naive(X: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray,
          W_O: np.ndarray, H: int) -> np.ndarray:
    n, width = X.shape[0], W_Q.shape[1]
    d = width // H
    Q = (X @ W_Q).reshape(n, H, d).swapaxes(0, 1)
    K = (X @ W_K).reshape(n, H, d).swapaxes(0, 1)
    V = (X @ W_V).reshape(n, H, d).swapaxes(0, 1)
    S = Q @ K.swapaxes(-1, -2) / np.sqrt(X.dtype.type(d))
    E = np.exp(S - S.max(axis=-1, keepdims=True))
    P = E / E.sum(axis=-1, keepdims=True)
    O = (P @ V).swapaxes(0, 1).reshape(n, width)
    return O @ W_O


def peak_bytes(call: Callable[[], object]) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bench(dtype: str, n: int, heads: int, d: int, repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    width = heads * d
    arrays = {"X": rng.standard_normal((n, width)).astype(dtype)}
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        arrays[name] = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(dtype)
    spec = shapecheck.compile_spec(SPEC, dims={"H": heads}, dtype=dtype)
    args = (arrays["X"], arrays["W_Q"], arrays["W_K"], arrays["W_V"], arrays["W_O"], heads)
    versions: dict[str, Callable[[], np.ndarray]] = {
        "spec": lambda: spec(**arrays)["Y"],
        "careful": lambda: careful(*args),
        "naive": lambda: naive(*args),
    }
    results = {name: call() for name, call in versions.items()}  # warm-up (binds, compiles)
    for name in ("careful", "naive"):
        assert results[name].dtype == results["spec"].dtype == np.dtype(dtype)
        tolerance = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(results["spec"], results[name], rtol=tolerance, atol=tolerance)
    times: dict[str, list[float]] = {name: [] for name in versions}
    order = list(versions)
    for _ in range(repeats):
        for name in order:
            start = time.perf_counter()
            versions[name]()
            times[name].append(time.perf_counter() - start)
        order.reverse()  # no version always runs right after the same other one
    figures = {f"time_{name}": statistics.median(t) for name, t in times.items()}
    for name in ("careful", "naive"):  # the ratio of each round, then the median of those
        figures[f"ratio_{name}"] = statistics.median(
            a / b for a, b in zip(times["spec"], times[name]))
    figures.update({f"peak_{name}": peak_bytes(call) for name, call in versions.items()})
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()
    print(f"multi-head attention, N={options.n}, H={options.heads}, d={options.d}; "
          f"NumPy {np.__version__}; {options.repeats} rounds")
    ok = True
    for dtype in ("float32", "float64"):
        f = bench(dtype, options.n, options.heads, options.d, options.repeats)
        time_ratio = f["ratio_careful"]
        peak_ratio = f["peak_spec"] / f["peak_careful"]
        ok &= time_ratio <= TARGET and peak_ratio <= TARGET
        mib = 1 << 20
        print(f"{dtype}: time  spec {f['time_spec'] * 1e3:7.1f} ms   careful "
              f"{f['time_careful'] * 1e3:7.1f} ms   naive {f['time_naive'] * 1e3:7.1f} ms   "
              f"spec/careful {time_ratio:.3f}   spec/naive {f['ratio_naive']:.3f}")
        print(f"{dtype}: peak  spec {f['peak_spec'] / mib:7.1f} MiB  careful "
              f"{f['peak_careful'] / mib:7.1f} MiB  naive {f['peak_naive'] / mib:7.1f} MiB  "
              f"spec/careful {peak_ratio:.3f}   spec/naive {f['peak_spec'] / f['peak_naive']:.3f}")
    print(f"targets (spec/careful <= {TARGET}): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
