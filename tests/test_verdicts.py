"""Three-way verdicts: a claim about dims the checker cannot prove is either refuted
(the smallest admissible sizes where it fails) or undetermined; both carry the weakest
constraint that makes it hold, pasteable as it stands.

The claims are built from spec text by the project's own parser (as in
test_symbolic.py); the differential test pastes each suggested constraint into the spec
and re-checks it.
"""

from __future__ import annotations

import json
import re

import pytest

from shapecheck.api import check_text, file_result
from shapecheck.formats import render
from shapecheck import symbolic
from shapecheck.symbolic import Claim, Verdict

from test_symbolic import dim, system_for

# (declarations, claim kind, expressions, counterexample text or None, weakest constraint or None)
REFUTED = [
    ("dim D_model, H", "divides", ("D_model", "H"), "D_model=1, H=2", "dim k; constraint D_model == H * k"),
    ("dim N, H, d, D", "equal", ("H * d", "D"), "D=2, H=1, d=1", "constraint D == H * d"),
    ("dim N", "positive", ("N - 1",), "N=1", "constraint N >= 2"),
    ("dim N, d", "positive", ("d - N",), "N=1, d=1", "constraint d - N >= 1"),
    ("dim h, d", "at_most", ("h", "d"), "d=1, h=2", "constraint h <= d"),
    # N*N == N holds only at N = 1: refuted, and no constraint is offered (it would pin N)
    ("dim N", "equal", ("N * N", "N"), "N=2", None),
    # an admissible counterexample satisfies the constraints: F*G == 12, so F=4 needs G=3
    ("dim F, G\nconstraint F * G == 12", "equal", ("F", "3"), "F=4, G=3", "constraint F == 3"),
    # and lower bounds: N >= 3 makes N=3 the smallest size
    ("dim N, d\nconstraint N >= 3", "divides", ("N", "2"), "N=3", "dim k; constraint N == 2 * k"),
    # a constraint that defines a dim through others must give it a positive size
    ("dim N, M\nconstraint N == M - 1", "equal", ("M", "3"), "M=2", "constraint M == 3"),
    # `!=` constraints are respected too
    ("dim N, d\nconstraint N != 1", "divides", ("N * d", "2"), "N=3, d=1", None),
    # the suggested new dim avoids every name the spec uses
    ("dim N, k\ninput k2: [N]\noutput k2", "divides", ("N", "k"), "N=1, k=2", "dim k3; constraint N == k * k3"),
]


@pytest.mark.parametrize("declarations, kind, exprs, example, needed", REFUTED)
def test_refuted_with_the_smallest_counterexample(declarations: str, kind: str, exprs: tuple[str, ...],
                                                   example: str, needed: str | None) -> None:
    system = system_for(declarations, {})
    claim = getattr(Claim, kind)(*(dim(system, e) for e in exprs))
    decision = system.decide(claim)
    assert decision.verdict is Verdict.UNPROVED and not decision
    assert decision.refuted and decision.counterexample is not None
    assert decision.counterexample.text() == example
    if needed is None:
        assert decision.needed is None
    else:
        assert decision.needed is not None
        lines = [f"dim {', '.join(decision.needed.dims)}"] if decision.needed.dims else []
        assert "; ".join(lines + [f"constraint {decision.needed.constraint}"]) == needed


def test_the_counterexample_really_fails_and_is_admissible() -> None:
    """Evaluate the claim independently at the reported sizes (plain Python ints)."""
    system = system_for("dim F, G, N\nconstraint F * G == 12", {})
    decision = system.decide(Claim.equal(dim(system, "F * N"), dim(system, "2 * G")))
    assert decision.counterexample is not None
    values = dict(decision.counterexample.values)
    assert values["F"] * values["G"] == 12
    assert values["F"] * values["N"] != 2 * values["G"]
    # smallest sum: nothing with a smaller sum of F, G, N is a counterexample
    best = sum(values.values())
    for f in range(1, 13):
        for n in range(1, best):
            if 12 % f == 0 and f + 12 // f + n < best:
                assert f * n == 2 * (12 // f)


UNDETERMINED = [
    # true for every size, but beyond the algebra: no counterexample, so undetermined
    ("dim N", "equal", ("(N * N + N) // 2 * 2", "N * N + N")),
]


@pytest.mark.parametrize("declarations, kind, exprs", UNDETERMINED)
def test_undetermined_when_no_counterexample_exists(declarations: str, kind: str,
                                                    exprs: tuple[str, ...]) -> None:
    system = system_for(declarations, {})
    decision = system.decide(getattr(Claim, kind)(*(dim(system, e) for e in exprs)))
    assert decision.verdict is Verdict.UNPROVED
    assert decision.counterexample is None


VERIFIED_OR_DIFFERENT = [
    ("dim N, H, d, D\nconstraint D == H * d", "equal", ("H * d", "D"), Verdict.PROVED),
    ("dim N, d", "equal", ("N", "d"), Verdict.DIFFERENT),
    ("dim N, d", "equal", ("N * d", "2 * N * d"), Verdict.DIFFERENT),
    ("dim N, d", "divides", ("N * d", "d"), Verdict.PROVED),
    ("dim N\nconstraint N >= 2", "positive", ("N - 1",), Verdict.PROVED),
    ("dim W, N\nconstraint W <= N", "at_most", ("W", "N"), Verdict.PROVED),
]


@pytest.mark.parametrize("declarations, kind, exprs, verdict", VERIFIED_OR_DIFFERENT)
def test_verified_and_different_never_change(declarations: str, kind: str, exprs: tuple[str, ...],
                                             verdict: Verdict) -> None:
    system = system_for(declarations, {})
    decision = system.decide(getattr(Claim, kind)(*(dim(system, e) for e in exprs)))
    assert decision.verdict is verdict
    assert decision.counterexample is None and decision.needed is None


def test_search_is_bounded_and_deterministic() -> None:
    """Twelve dims whose only counterexample is far away: the search gives up after a
    fixed number of assignments, and says the same thing every time."""
    names = [f"a{i}" for i in range(12)]
    declarations = f"dim {', '.join(names)}\ndim B"
    system = system_for(declarations, {})
    total = " + ".join(names)
    claim = Claim.at_most(dim(system, total), dim(system, "B + 40"))
    first = system.decide(claim)
    assert first.verdict is Verdict.UNPROVED
    assert first.counterexample is None  # sum of a_i > B + 40 needs a sum of at least 53
    assert system_for(declarations, {}).decide(claim) == first


# --- in diagnostics ------------------------------------------------------------------------

SPECS = {
    "split": ("dim N, H, D_model\ninput X: [N, D_model]\nQ = split_heads(X, H)\noutput Q\n",
              "SC313", {"D_model": 1, "H": 2}, "fails at D_model=1, H=2: 1 is not divisible by 2"),
    "matmul": ("dim N, H, d, D\ninput X: [N, H * d]\nparam W: [D, d]\nY = X @ W\noutput Y\n",
               "SC301", {"D": 2, "H": 1, "d": 1}, "differ at D=2, H=1, d=1 (1 vs 2)"),
    "positive": ("dim N\nY = ones([N - 1])\noutput Y\n",
                 "SC201", {"N": 1}, "it is 0 at N=1"),
    "reshape": ("dim N, H, d, D\ninput X: [N, D]\nY = reshape(X, [N, H, d])\noutput Y\n",
                "SC307", {"D": 2, "H": 1, "N": 1, "d": 1}, "differ at D=2, H=1, N=1, d=1"),
    # d is used: a fix that only exposed "d is never used" would not be offered (issue 18)
    "divide": ("dim N, H\ndim d = N / H\ninput X: [N, d]\noutput Y = X\n", "SC202", {"H": 2, "N": 1}, "fails at H=2, N=1"),
    "einsum": ("dim N, H, d, D\ninput A: [N, H * d]\ninput B: [N, D]\n"
               "C = einsum(\"ij,kj->ik\", A, B)\noutput C\n", "SC310", {"D": 2, "H": 1, "d": 1},
               "differs (at D=2, H=1, d=1: 2 vs 1) from"),
    "concat": ("dim N, H, d, D\ninput A: [N, H * d]\ninput B: [N, D]\nC = concat([A, B], axis=0)\n"
               "output C\n", "SC309", {"D": 2, "H": 1, "d": 1}, "differs (at D=2, H=1, d=1"),
    "broadcast": ("dim N, H, d, D\ninput A: [N, H * d]\ninput B: [N, D]\nC = A + B\noutput C\n",
                  # a broadcast fails only where neither size is 1 (issue 18)
                  "SC303", {"D": 3, "H": 2, "d": 1}, "differ at D=3, H=2, d=1 (2 vs 3)"),
}


@pytest.mark.parametrize("name", list(SPECS))
def test_refuted_diagnostics_carry_the_counterexample(name: str) -> None:
    source, code, values, fragment = SPECS[name]
    program = check_text(source)
    (diagnostic,) = [d for d in program.diagnostics if d.is_error]
    assert diagnostic.code == code
    assert fragment in diagnostic.message
    assert dict(diagnostic.counterexample) == values
    document = json.loads(render([file_result(program, "a.attn")], "json", color=False, fail_on="error"))
    assert document["files"][0]["diagnostics"][0]["counterexample"] == values


_ADD = re.compile(r"^(?:or: )?add (`dim [^`]+` and )?`constraint ([^`]+)`$")


@pytest.mark.parametrize("name", list(SPECS))
def test_pasting_the_suggested_constraint_verifies(name: str) -> None:
    """Differential: the `help: add ...` line, pasted as it stands, removes the error."""
    source, code, _, _ = SPECS[name]
    program = check_text(source)
    helps = [h for d in program.diagnostics for h in d.help if _ADD.match(h)]
    if name == "positive":
        assert helps == ["add `constraint N >= 2`"]
    assert helps, program.diagnostics
    match = _ADD.match(helps[0])
    assert match is not None
    new_dim = match.group(1)[len("`"):-len("` and ")] if match.group(1) else ""
    first_line, rest = source.split("\n", 1)
    pasted = "\n".join(filter(None, [first_line, new_dim, f"constraint {match.group(2)}", rest]))
    fixed = check_text(pasted)
    assert not [d for d in fixed.diagnostics if d.is_error], (pasted, fixed.diagnostics)


def test_undetermined_says_cannot_be_proved() -> None:
    """A*A == B*B makes A == B for positive sizes, beyond the checker's algebra: no
    counterexample exists, so the verdict is undetermined."""
    program = check_text("dim A, B\nconstraint A * A == B * B\ninput X: [A]\n"
                         "Y = X + ones([B])\noutput Y\n")
    (diagnostic,) = [d for d in program.diagnostics if d.is_error]
    assert "cannot be proved equal" in diagnostic.message
    assert diagnostic.counterexample == ()


def test_a_floor_inside_a_product_prints_as_it_reads() -> None:
    system = system_for("dim N", {})
    assert symbolic.to_text(dim(system, "2 * ((N + 1) // 2)")) == "2*((N + 1)//2)"
    assert symbolic.to_text(dim(system, "(N + 1) // 2")) == "(N + 1)//2"
