"""The hostile inputs of tests/test_robustness.py, timed (CPU seconds), each with its codes.

The test checks that each gets well-formed diagnostics and guards against hangs;
this prints how long each takes. Target: every one well under 10 s of CPU.

Usage: python benchmarks/bench_hostile.py [--repeat N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_robustness import HOSTILE  # noqa: E402

from shapecheck.api import check_bytes  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs")
    args = parser.parse_args()
    check_bytes(b"dim N, d\nconstraint N == 2 * d - d\n")  # SymPy's lazy imports, once
    worst = 0.0
    for name, (data, _) in HOSTILE.items():
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            program = check_bytes(data)
            best = min(best, time.process_time() - start)
        worst = max(worst, best)
        found = ", ".join(sorted({d.code for d in program.diagnostics})) or "no diagnostics"
        print(f"{best:7.2f} s  {name} ({len(data):,} bytes): {found}")
    print(f"worst: {worst:.2f} s CPU (target: well under 10 s)")


if __name__ == "__main__":
    main()
