"""The algebra budget (issue 7): every question about dims is answered within a
deterministic budget of terms, degree, integer size and Gröbner steps; past it the
statement gets SC003. No clock: these tests count the work, they do not time it
(``benchmarks/bench_algebra.py`` prints the times).
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sympy

from shapecheck import symbolic
from shapecheck.api import check_text

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


blowups = _load("blowups")

# (line, code) of every error each blow-up must give: a verdict, or SC003.
EXPECTED: dict[str, set[tuple[int, str]]] = {
    "1 / B ** 63 < N with (N + N // 2) ** 3 == B": set(),
    "... and N - 1 used": {(4, "SC003")},
    "... the other way round": {(3, "SC003"), (4, "SC201")},
    "elimination chain, 11 links": {(14, "SC003")},
    "elimination chain, 30 links": {(33, "SC003")},
    "1,000 linear constraints": set(),  # a0 - 1000 is proved a size
    "1,000 Fibonacci constraints": {(1004, "SC303")},  # a0 = a1 + a2 > a1
    "200 proportional constraints": {(204, "SC303")},  # a0 = (3/2)**200 * a200
    "Gröbner system of 4 dims": {(7, "SC303")},
    "Gröbner system of 5 dims": {(8, "SC303")},
}


class Meter:
    """Counts the work SymPy is asked for while a spec is checked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.largest_expansion = 0
        self.steps: dict[symbolic.Steps, int] = {}  # each budget kept alive: ids stay unique
        expand = sympy.expand

        def counted_expand(expr: Any, *args: Any, **kwargs: Any) -> Any:
            result = expand(expr, *args, **kwargs)
            self.largest_expansion = max(self.largest_expansion, len(sympy.Add.make_args(result)))
            return result

        def forbidden(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("unbounded SymPy machinery called")

        take = symbolic.Steps.take

        def counted_take(steps: symbolic.Steps) -> None:
            self.steps[steps] = self.steps.get(steps, 0) + 1
            take(steps)

        monkeypatch.setattr(sympy, "expand", counted_expand)
        for name in ("simplify", "solve", "groebner", "nsimplify", "factor"):
            monkeypatch.setattr(sympy, name, forbidden)
        monkeypatch.setattr(symbolic.Steps, "take", counted_take)

    def assert_within_budget(self) -> None:
        assert self.largest_expansion <= symbolic.MAX_TERMS
        assert max(self.steps.values(), default=0) <= symbolic.MAX_STEPS + 1


@pytest.mark.slow
@pytest.mark.parametrize("name", list(blowups.blowups()))
def test_every_blowup_is_answered_within_the_budget(name: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    meter = Meter(monkeypatch)
    program = check_text(blowups.blowups()[name])
    meter.assert_within_budget()
    errors = {(d.span.line, d.code) for d in program.diagnostics if d.is_error}
    if name in EXPECTED:
        assert errors == EXPECTED[name], [(d.code, d.message) for d in program.diagnostics]
    else:  # the larger Gröbner systems: past the budget, said so on the question
        question = program.source.count("\n") - 1  # `Z = X + Y`
        assert errors <= {(question, "SC003")}, errors
    for diagnostic in program.diagnostics:
        if diagnostic.code == "SC003":
            assert "too complex to prove" in diagnostic.message or "too large" in diagnostic.message


def test_the_groebner_budget_is_what_stops_a_large_system(monkeypatch: pytest.MonkeyPatch) -> None:
    meter = Meter(monkeypatch)
    program = check_text(blowups.groebner_system(8))
    (error,) = [d for d in program.diagnostics if d.is_error]
    assert error.code == "SC003" and "steps" in error.message
    assert max(meter.steps.values()) == symbolic.MAX_STEPS + 1  # the step that passed it


def test_a_too_complex_answer_is_memoised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten statements asking the same too-complex question cost one budget, not ten."""
    meter = Meter(monkeypatch)
    spec = blowups.groebner_system(8).replace("Z = X + Y\noutput Z\n", "")
    spec += "".join(f"Z{i} = X + Y\n" for i in range(10))
    program = check_text(spec)
    assert Counter(d.code for d in program.diagnostics if d.is_error) == {"SC003": 10}
    assert len(meter.steps) == 1


def test_the_limits_in_the_explanation_are_the_real_ones() -> None:
    from shapecheck.messages import codes

    text = " ".join(codes.DETAILS[key] for key in codes.DETAILS if key.startswith("too_complex"))
    for key in ("too_complex_terms", "too_complex_work", "too_complex_degree",
                "too_complex_bits", "too_complex_steps"):
        assert key in codes.DETAILS
    assert "{limit}" in text


@pytest.mark.parametrize("text, value", [
    ("dim a = 7\ndim b = a ** 64\ndim c = b ** 64\n", None),  # 7**4096: past the bits
    ("dim a = 7\ndim b = a ** 64\ninput X: [b]\noutput X\n", 7 ** 64),
])
def test_numbers_stay_printable(text: str, value: int | None) -> None:
    program = check_text(text)
    for diagnostic in program.diagnostics:
        assert len(diagnostic.message) < 5000
    if value is not None:
        assert program.dims.value_of("b") == value
    else:
        assert [d.code for d in program.diagnostics if d.is_error] == ["SC003"]
