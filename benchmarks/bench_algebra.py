"""The algebra blow-ups of issue 7, timed (CPU seconds), each with its verdict.

Every one must answer well under 10 s; the verdicts are fixed by the budget
(tests/test_budget.py counts the work, this prints the time).

Usage: python benchmarks/bench_algebra.py [--repeat N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from blowups import blowups  # noqa: E402

from shapecheck.api import check_text  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs")
    args = parser.parse_args()
    check_text("dim N, d\nconstraint N == 2 * d - d\n")  # SymPy's lazy imports, once
    worst = 0.0
    for name, spec in blowups().items():
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            program = check_text(spec)
            best = min(best, time.process_time() - start)
        worst = max(worst, best)
        verdict = ", ".join(sorted({d.code for d in program.diagnostics if d.is_error})) or "verified"
        print(f"{best:7.2f} s  {name}: {verdict}")
    print(f"worst: {worst:.2f} s CPU (target: well under 10 s)")


if __name__ == "__main__":
    main()
