"""Benchmarks for `verify` (issue 2). Prints figures and ratios measured side by side.

1. Cold start: `shapecheck verify examples/multi_head.attn` vs
   `python -c "import sympy, lark, click"`, alternated, median of several runs.
   Target: <= 1.2x.
2. Throughput: checking a generated 10,000-statement spec vs a bare Lark parse
   of the same text with the same grammar (parse tree built, no checking).
   Target: <= 1.5x. And 10k vs 1k statements: target ratio <= 11 (linear).

Usage: python benchmarks/bench_verify.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "multi_head.attn"

HEADER = """\
dim N, d, H
dim D_model
constraint D_model == H * d
input X0: [N, D_model]
param W_Q: [D_model, H * d]
param W_K: [D_model, H * d]
param W_V: [D_model, H * d]
param W_O: [H * d, D_model]
"""

BLOCK = """\
Q{i} = split_heads(X{i} @ W_Q, H)
K{i} = split_heads(X{i} @ W_K, H)
V{i} = split_heads(X{i} @ W_V, H)
S{i}: [H, N, N] = Q{i} @ K{i}.T / sqrt(d)
P{i} = softmax(S{i}, axis=row)
O{i} = merge_heads(P{i} @ V{i})
Y{i}: [N, D_model] = O{i} @ W_O
Z{i} = layernorm(X{i} + Y{i})
A{i} = relu(Z{i} @ W_Q) @ W_O
X{j} = Z{i} + A{i} * 0.5
"""


def generate(statements: int) -> str:
    """A spec of about `statements` statements: stacked attention blocks."""
    blocks = max(1, (statements - 8) // 10)
    body = "".join(BLOCK.format(i=i, j=i + 1) for i in range(blocks))
    return HEADER + body + f"output X{blocks}: [N, D_model]\n"


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def cold_start(runs: int) -> None:
    verify = [sys.executable, "-m", "shapecheck", "verify", str(EXAMPLE)]
    imports = [sys.executable, "-c", "import sympy, lark, click"]
    _time(verify)  # warm the OS file cache and the grammar cache once
    verify_times, import_times = [], []
    for _ in range(runs):
        verify_times.append(_time(verify))
        import_times.append(_time(imports))
    v, i = statistics.median(verify_times), statistics.median(import_times)
    print(f"cold verify {EXAMPLE.name}: median {v * 1000:.0f} ms (min {min(verify_times) * 1000:.0f})")
    print(f"import sympy, lark, click:   median {i * 1000:.0f} ms (min {min(import_times) * 1000:.0f})")
    print(f"ratio (target <= 1.2): {v / i:.2f}")


def _best(function, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def throughput(repeat: int) -> None:
    from shapecheck.api import check_text
    from shapecheck.parser import bare_parser, parse

    bare = bare_parser()
    parse("dim N\n")  # build the checker's parser once, outside the timing
    text_10k, text_1k = generate(10_000), generate(1_000)
    program = check_text(text_10k)
    assert program.ok, program.diagnostics[:3]
    lines = text_10k.count("\n")
    bare_time = _best(lambda: bare.parse(text_10k), repeat)
    verify_10k = _best(lambda: check_text(text_10k), repeat)
    verify_1k = _best(lambda: check_text(text_1k), repeat * 3)
    print(f"10k-statement spec ({lines} lines, {len(text_10k) / 1e6:.2f} MB)")
    print(f"bare Lark parse: {bare_time * 1000:.0f} ms; check_text: {verify_10k * 1000:.0f} ms")
    print(f"ratio verify / bare parse (target <= 1.5): {verify_10k / bare_time:.2f}")
    print(f"1k-statement check_text: {verify_1k * 1000:.0f} ms; "
          f"ratio 10k / 1k (target <= 11): {verify_10k / verify_1k:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    cold_start(args.runs)
    throughput(max(1, args.runs // 3))


if __name__ == "__main__":
    main()
