"""The algebra that once blew up (issue 7), as generated specs.

Shared by the tests (``tests/test_budget.py``: every one answers within the
budget, with the expected diagnostics), the benchmark that prints their times
(``benchmarks/bench_algebra.py``) and the fuzzer (``tools/fuzz.py``).
"""

from __future__ import annotations

import random


def _names(prefix: str, count: int) -> str:
    return ", ".join(f"{prefix}{i}" for i in range(count))


def elimination_chain(links: int) -> str:
    """``c_i == c_{i+1} * c_{i+1} + 1``: c0 is a polynomial of degree 2**links in the last."""
    lines = [f"dim {_names('c', links + 1)}"]
    lines += [f"constraint c{i} == c{i + 1} * c{i + 1} + 1" for i in range(links)]
    lines += ["input X: [c0]", "input Y: [c0 - 1]", "Z = X + Y", "output Z"]
    return "\n".join(lines) + "\n"


def linear_chain(count: int) -> str:
    """``a_i == a_{i+1} + 1``: a0 is a_count + count, so a0 - count is a size."""
    lines = [f"dim {_names('a', count + 1)}"]
    lines += [f"constraint a{i} == a{i + 1} + 1" for i in range(count)]
    lines += [f"input X: [a0 - {count}]", f"input Y: [a{count}]", "Z = X + Y", "output Z"]
    return "\n".join(lines) + "\n"


def fibonacci_chain(count: int) -> str:
    """``a_i == a_{i+1} + a_{i+2}``: coefficients grow as Fibonacci numbers."""
    lines = [f"dim {_names('a', count + 2)}"]
    lines += [f"constraint a{i} == a{i + 1} + a{i + 2}" for i in range(count)]
    lines += ["input X: [a0]", "input Y: [a1]", "Z = X + Y", "output Z"]
    return "\n".join(lines) + "\n"


def proportional_chain(count: int) -> str:
    """``2 * a_i == 3 * a_{i+1}``: no dim has coefficient 1."""
    lines = [f"dim {_names('a', count + 1)}"]
    lines += [f"constraint 2 * a{i} == 3 * a{i + 1}" for i in range(count)]
    lines += ["input X: [a0]", f"input Y: [a{count}]", "Z = X + Y", "output Z"]
    return "\n".join(lines) + "\n"


def groebner_system(variables: int, seed: int = 1) -> str:
    """Random quadratic constraints in ``variables`` dims that define no dim."""
    rng = random.Random(seed * 1000 + variables)
    lines = [f"dim {_names('x', variables)}"]
    for _ in range(variables - 1):
        a, b, c, d = (rng.randrange(variables) for _ in range(4))
        lines.append(f"constraint 2 * x{a} * x{b} == 3 * x{c} * x{d} + x{(a + 1) % variables}"
                     f" * x{(c + 2) % variables}")
    lines += ["input X: [x0, x1]", "input Y: [x2, x3]", "Z = X + Y", "output Z"]
    return "\n".join(lines) + "\n"


FLOOR_POWER = "dim N, B\nconstraint 1 / B ** 63 < N\nconstraint (N + N // 2) ** 3 == B\n"
FLOOR_POWER_USED = ("dim N, B\nconstraint 1 / B ** 63 < N\nconstraint (N + N // 2) ** 3 == B\n"
                    "input X: [N - 1]\noutput X\n")
FLOOR_POWER_FIRST = ("dim N, B\nconstraint (N + N // 2) ** 3 == B\nconstraint 1 / B ** 63 < N\n"
                     "input X: [N - 1]\noutput X\n")


def blowups() -> dict[str, str]:
    """Name -> spec, each one of the blow-ups of issue 7 (or a close relative)."""
    specs = {
        "1 / B ** 63 < N with (N + N // 2) ** 3 == B": FLOOR_POWER,
        "... and N - 1 used": FLOOR_POWER_USED,
        "... the other way round": FLOOR_POWER_FIRST,
        "elimination chain, 11 links": elimination_chain(11),
        "elimination chain, 30 links": elimination_chain(30),
        "1,000 linear constraints": linear_chain(1000),
        "1,000 Fibonacci constraints": fibonacci_chain(1000),
        "200 proportional constraints": proportional_chain(200),
    }
    for variables in (4, 5, 6, 7, 8, 9, 10):
        specs[f"Gröbner system of {variables} dims"] = groebner_system(variables)
    return specs
