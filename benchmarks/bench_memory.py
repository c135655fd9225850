"""The run's memory estimate against the memory it really uses: every builtin, the
operators, and every example.

    python benchmarks/bench_memory.py              # tensors of 8 MiB (float64)
    python benchmarks/bench_memory.py --size 512 --dtype float32

For each spec: compile it, run it once (binding and planning allocate Python objects,
not NumPy buffers), then run it again under ``tracemalloc`` with every input generated
inside the run (``run(seed=0, check_invariants=True)``, as ``shapecheck run`` does) and
compare ``RunResult.peak_estimate`` with the traced peak.

Why tracemalloc: NumPy reports every data buffer it allocates to it
(``PyTraceMalloc_Track``), so its peak is the peak of NumPy's buffers plus the few
Python objects the run creates — exactly what the estimate is meant to cover. (The
process's resident size would also count the interpreter and freed pages that the
allocator keeps; ``np.core.multiarray`` has no peak counter of its own.)

Target (issue 7): estimate / measured never below 1 (the guard never lets through a
run larger than it says), and at most 1.25 (it does not refuse runs that fit).
Exit status 1 when a figure is outside the target, so the script can gate a change.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from pathlib import Path

from shapecheck.backend import compile_spec, numpy_backend

ROOT = Path(__file__).resolve().parent.parent
LOW, HIGH = 1.0, 1.25

# One spec per builtin: `x`, `y` are [N, M]; `m` a bool mask of the same shape.
HEADER = "dim N, M\ninput x: [N, M]\n"
BUILTIN_SPECS: dict[str, str] = {
    "softmax": "output r = softmax(x)",
    "exp": "output r = exp(x)",
    "log": "output r = log(abs(x) + 1)",
    "sqrt": "output r = sqrt(abs(x))",
    "tanh": "output r = tanh(x)",
    "sigmoid": "output r = sigmoid(x)",
    "relu": "output r = relu(x)",
    "gelu": "output r = gelu(x)",
    "abs": "output r = abs(x)",
    "transpose": "output r = transpose(x) + 1",
    "reshape": "output r = reshape(x.T, [N * M])",
    "split_heads": "output r = split_heads(x, 8)",
    "merge_heads": "output r = merge_heads(reshape(x, [8, N, M / 8]))",
    "repeat": "output r = repeat(x, 2, axis=0)",
    "concat": "output r = concat([x, x * 2], axis=col)",
    "sum": "output r = sum(x, axis=row)",
    "mean": "output r = mean(x, axis=col, keepdims=true)",
    "max": "output r = max(x, axis=row)",
    "min": "output r = min(x)",
    "layernorm": "output r = layernorm(x)",
    "rmsnorm": "output r = rmsnorm(x.T)",
    "where": "input m: bool[N, M]\noutput r = where(m, x, -inf)",
    "causal_mask": "output r = causal_mask(N)",
    "ones": "output r = ones([N, M]) + x",
    "zeros": "output r = zeros([N, M])",
    "einsum": 'input y: [N, M]\noutput r = einsum("nk,mk->nm", x, y)',
    "dropout": "output r = dropout(x, 0.1)",
}
OPERATOR_SPECS: dict[str, str] = {
    "matmul (@, .T)": "input y: [N, M]\noutput r = x @ y.T",
    "elementwise chain": "output r = (x * 2 + 1) / sqrt(M) - x",
    "bool as numbers": "input m: bool[N, M]\noutput r = m * x + exp(m)",
    "einsum, batched": 'input y: [N, M]\noutput r = einsum("n...,m...->nm", x, y)',
    "einsum, three operands": 'input y: [N, M]\noutput r = einsum("nk,mk,m->n", x, y, sum(y, axis=0))',
    "attention": "output r = softmax(x @ x.T / sqrt(M), axis=row) @ x",
}
EXAMPLE_DIMS = {"N": 256, "L": 192, "d": 64, "H": 8, "G": 2, "R": 4, "B": 2}


def measure(source: str, dims: dict[str, int], dtype: str) -> tuple[int, int]:
    spec = compile_spec(source, dims=dims, dtype=dtype, max_memory=None)
    spec.run(seed=0, check_invariants=True)  # bind and plan (Python objects, not buffers)
    gc.collect()
    tracemalloc.start()
    try:
        result = spec.run(seed=0, check_invariants=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result.peak_estimate, peak


def report(label: str, estimate: int, peak: int) -> bool:
    ratio = estimate / peak
    ok = LOW <= ratio <= HIGH
    print(f"{label:<28} {estimate / 2**20:>9.2f} {peak / 2**20:>9.2f} {ratio:>7.3f}"
          f"{'' if ok else '   <-- outside [1, 1.25]'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="N = M for the builtin specs")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    args = parser.parse_args()
    missing = sorted(set(numpy_backend.BUILTINS) - set(BUILTIN_SPECS))
    if missing:  # a builtin added without a benchmark row fails loudly
        print(f"no benchmark spec for: {', '.join(missing)}")
        return 1
    dims = {"N": args.size, "M": args.size}
    print(f"{'spec':<28} {'estimate':>9} {'measured':>9} {'ratio':>7}   (MiB, {args.dtype})")
    ok = True
    for name, body in {**BUILTIN_SPECS, **OPERATOR_SPECS}.items():
        ok &= report(name, *measure(HEADER + body + "\n", dims, args.dtype))
    for path in sorted((ROOT / "examples").glob("*.attn")):
        source = path.read_text(encoding="utf-8")
        program_dims = {k: v for k, v in EXAMPLE_DIMS.items() if f" {k}" in source}
        try:
            figures = measure(source, program_dims, args.dtype)
        except Exception as error:  # an example that needs other dims: say so, not crash
            print(f"{path.name:<28} skipped: {error}")
            continue
        ok &= report(path.name, *figures)
    print("target: 1 <= estimate / measured <= 1.25:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
