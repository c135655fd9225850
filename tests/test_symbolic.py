"""Unit tables for shapecheck.symbolic: the verdicts of DimSystem.equal / positive /
divides for dim expressions under given declarations, constraints and bindings.

Each row is (declarations, bindings, expression(s), expected verdict). The
declarations are a spec fragment, checked with ``check_text`` (it must check
cleanly); the expressions are written in the spec's own notation and built by the
project's parser and DimBuilder, so these tests never build SymPy objects by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shapecheck.syntax import nodes
from shapecheck import symbolic
from shapecheck.api import check_text
from shapecheck.syntax.parser import parse
from shapecheck.symbolic import Dim, DimBuilder, DimSystem, Verdict

PROVED, DIFFERENT, UNPROVED = Verdict.PROVED, Verdict.DIFFERENT, Verdict.UNPROVED

CHAIN = "dim A, B, C, E\nconstraint A == B * C\nconstraint C == 2 * E"
DMODEL = "dim N, H, d, D\nconstraint D == H * d"
DERIVED = "dim N, H, d\ndim D = H * d"
RELATION = "dim F, G\nconstraint F * G == 12"
LOWER = "dim N, M, K\nconstraint N >= 2\nconstraint M > 3\nconstraint 2 <= K"
SYMPY = "dim E, I, S, N, O, Q, pi, beta, gamma, oo, zoo, nan"


def system_for(declarations: str, bindings: dict[str, int]) -> DimSystem:
    program = check_text(declarations, bindings)
    errors = [d for d in program.diagnostics if d.is_error]
    assert not errors, errors
    return program.dims


def dim(system: DimSystem, text: str) -> Dim:
    """A dim expression in the spec's notation, built as the checker builds it."""
    parsed = parse(f"constraint {text} == 1")
    assert not parsed.diagnostics, parsed.diagnostics
    statement = parsed.statements[0]
    assert isinstance(statement, nodes.Constraint)
    builder = DimBuilder(system, lambda name: system.symbol_of(name.name), [])
    built = builder.build(statement.left)
    assert built is not None and not builder.diagnostics, builder.diagnostics
    return built


EQUAL = [
    # (declarations, bindings, left, right, verdict)
    ("dim N, d", {}, "N", "N", PROVED),
    ("dim N, d", {}, "N", "d", DIFFERENT),  # distinct free dims are not equal (§1)
    ("dim N, d", {}, "N + N", "2 * N", PROVED),
    ("dim N, d", {}, "N * d", "d * N", PROVED),
    ("dim N, d", {}, "(N + 1) * d", "N * d + d", PROVED),
    ("dim N, d", {}, "N - 1 + 1", "N", PROVED),
    ("dim N, d", {}, "N ** 2", "N * N", PROVED),
    ("dim N, d", {}, "(N + d) ** 2", "N * N + 2 * N * d + d * d", PROVED),
    ("dim N, d", {}, "N * N", "N", UNPROVED),  # equal only at N = 1
    ("dim N, d", {}, "N", "1", UNPROVED),
    ("dim N, d", {}, "2 * N", "2 * N + 1", DIFFERENT),
    ("dim N, d", {}, "N * d", "2 * N * d", DIFFERENT),
    ("dim N, d", {}, "N + d", "N * d", UNPROVED),  # equal at N = d = 2
    ("dim N, d", {}, "N // 2 * 2", "N", UNPROVED),
    ("dim N, d", {"N": 4, "d": 4}, "N", "d", PROVED),
    ("dim N, d", {"N": 4, "d": 5}, "N", "d", DIFFERENT),
    ("dim N, d", {"N": 6}, "N", "2 * 3", PROVED),
    ("dim T = 128\ndim U = 2 * 64", {}, "T", "U", PROVED),
    ("dim T = 128", {}, "T", "127", DIFFERENT),
    (DERIVED, {}, "D", "H * d", PROVED),
    (DERIVED, {}, "D", "d", UNPROVED),
    (DERIVED, {"H": 8, "d": 64}, "D", "512", PROVED),
    (DMODEL, {}, "D", "d * H", PROVED),
    (DMODEL, {}, "N * D", "H * N * d", PROVED),
    (DMODEL, {}, "D", "2 * H * d", DIFFERENT),
    (DMODEL, {}, "D", "N", UNPROVED),
    ("dim N, H, d, D", {}, "D", "H * d", UNPROVED),  # no constraint: not provable
    (CHAIN, {}, "A", "2 * B * E", PROVED),
    (CHAIN, {}, "A", "B * C", PROVED),
    (CHAIN, {}, "A", "B", DIFFERENT),  # A is 2*B*E, at least 2*B
    (CHAIN, {}, "A", "B * B", UNPROVED),
    (CHAIN, {}, "A", "B * E", DIFFERENT),
    (RELATION, {}, "F * G", "12", PROVED),
    (RELATION, {}, "2 * F * G", "24", PROVED),
    (RELATION, {}, "F * G", "24", DIFFERENT),
    (RELATION, {}, "F", "G", UNPROVED),
    ("dim N\nconstraint N >= 2", {}, "N", "1", DIFFERENT),
    ("dim N\nconstraint N >= 2", {}, "N", "2", UNPROVED),
    (SYMPY, {}, "E * I", "I * E", PROVED),
    (SYMPY, {}, "E", "pi", DIFFERENT),
    (SYMPY, {}, "S + N", "N + S", PROVED),
    (SYMPY, {}, "oo", "zoo", DIFFERENT),
    (SYMPY, {}, "nan", "nan", PROVED),
    (SYMPY, {"pi": 3}, "pi", "3", PROVED),
    (SYMPY, {"E": 2, "I": 3}, "E * I", "6", PROVED),
]

POSITIVE = [
    # (declarations, bindings, expression, verdict)
    ("dim N, d", {}, "N", PROVED),
    ("dim N, d", {}, "N * d", PROVED),
    ("dim N, d", {}, "N + d - 1", PROVED),
    ("dim N, d", {}, "N * d - N + 1", PROVED),
    ("dim N, d", {}, "N ** 3", PROVED),
    ("dim N, d", {}, "2 ** 3", PROVED),
    ("dim N, d", {}, "N - 1", UNPROVED),  # 0 at N = 1
    ("dim N, d", {}, "N * d - 1", UNPROVED),
    ("dim N, d", {}, "N - d", UNPROVED),
    ("dim N, d", {}, "0", DIFFERENT),
    ("dim N, d", {}, "-3", DIFFERENT),
    ("dim N, d", {}, "N - N", DIFFERENT),
    ("dim N, d", {}, "N // 2", UNPROVED),  # 0 at N = 1
    ("dim N, d", {}, "(N + 1) // 2", PROVED),
    ("dim N, d", {}, "(N + d) // 2", PROVED),
    ("dim N, d", {"N": 1}, "N - 1", DIFFERENT),
    ("dim N, d", {"N": 2}, "N - 1", PROVED),
    ("dim N, d", {"N": 3}, "N // 2", PROVED),
    ("dim N, d", {"N": 3, "d": 5}, "N - d", DIFFERENT),
    ("dim T = 128", {}, "T - 127", PROVED),
    ("dim T = 128", {}, "T - 128", DIFFERENT),
    (LOWER, {}, "N - 1", PROVED),
    (LOWER, {}, "N - 2", UNPROVED),
    (LOWER, {}, "M - 3", PROVED),
    (LOWER, {}, "M - 4", UNPROVED),
    (LOWER, {}, "K - 1", PROVED),
    (LOWER, {}, "(N - 1) * (M - 3)", PROVED),
    # a map cut into patches of 5, flattened (issue 29): each floor positive, so the product
    ("dim T, S\nconstraint T >= 5\nconstraint S >= 5", {}, "(T // 5) * (S // 5)", PROVED),
    # Hiera's windows counted from the tokens (`N // 64`), each window's tokens the rest
    # (`N // (N // 64)`), read back as their product: a floor by a size is at most its
    # numerator, so `N - N // (N // 64) + 1` is positive (issue 31)
    ("dim T\nconstraint T >= 64", {}, "(T // (T // 64)) * (T // (T // (T // 64)))", PROVED),
    ("dim T\nconstraint T >= 64", {}, "T - T // (T // 64)", UNPROVED),  # 0 at T = 64
    ("dim T, S\nconstraint T >= 5", {}, "(T // 5) * (S // 5)", UNPROVED),  # 0 at S = 1
    # a square map pooled by 2 and flattened (SAM 2's hiera q-pooling): a power of a positive
    ("dim T\nconstraint T >= 2", {}, "(T // 2) ** 2", PROVED),
    ("dim T", {}, "(T // 2) ** 2", UNPROVED),  # 0 at T = 1
    (DERIVED, {}, "D - d + 1", PROVED),
    (DERIVED, {}, "D - d", UNPROVED),  # 0 when H = 1
    (DMODEL, {}, "D - H * d + 1", PROVED),
    (SYMPY, {}, "E - I", UNPROVED),
    (SYMPY, {}, "pi * beta + gamma", PROVED),
]

DIVIDES = [
    # (declarations, bindings, numerator, denominator, verdict)
    ("dim N, H, d, D", {}, "H * d", "H", PROVED),
    ("dim N, H, d, D", {}, "N * d * H", "H * N", PROVED),
    ("dim N, H, d, D", {}, "D", "H", UNPROVED),
    ("dim N, H, d, D", {}, "N * N", "N", PROVED),
    ("dim N, H, d, D", {}, "N + N", "2", PROVED),
    ("dim N, H, d, D", {}, "N * (N + 1)", "N + 1", PROVED),
    # True for every N, but beyond the engine (quotient N*(N+1)/2 has rational
    # coefficients): conservative, so it is not proved.
    ("dim N, H, d, D", {}, "N * (N + 1)", "2", UNPROVED),
    ("dim N, H, d, D", {}, "N", "2", UNPROVED),
    ("dim N, H, d, D", {}, "128", "4", PROVED),
    ("dim N, H, d, D", {}, "128", "3", DIFFERENT),
    ("dim N, H, d, D", {"D": 512, "H": 8}, "D", "H", PROVED),
    ("dim N, H, d, D", {"D": 500, "H": 8}, "D", "H", DIFFERENT),
    ("dim T = 128", {}, "T", "3", DIFFERENT),
    ("dim T = 128", {}, "T", "64", PROVED),
    (DMODEL, {}, "D", "H", PROVED),
    (DMODEL, {}, "D", "d", PROVED),
    (DMODEL, {}, "N * D", "H * N", PROVED),
    (DMODEL, {}, "D", "N", UNPROVED),
    (DERIVED, {}, "D", "H", PROVED),
    (CHAIN, {}, "A", "E", PROVED),
    (CHAIN, {}, "A", "2", PROVED),
    (CHAIN, {}, "A", "4", UNPROVED),
    (CHAIN, {}, "A", "C", PROVED),
    ("dim N", {}, "N * ((N + 1) // 2)", "N", PROVED),
    (SYMPY, {}, "E * I * S", "I * S", PROVED),
    (SYMPY, {}, "pi", "beta", UNPROVED),
]


def _ids(rows: list[tuple[object, ...]]) -> list[str]:
    return [" ".join(str(part) for part in row[2:-1]) + f" -> {row[-1].name}" for row in rows]


@pytest.mark.parametrize("declarations, bindings, left, right, verdict", EQUAL, ids=_ids(EQUAL))
def test_equal(declarations: str, bindings: dict[str, int], left: str, right: str,
               verdict: Verdict) -> None:
    system = system_for(declarations, bindings)
    assert system.equal(dim(system, left), dim(system, right)) is verdict
    # Equality is symmetric.
    assert system.equal(dim(system, right), dim(system, left)) is verdict


@pytest.mark.parametrize("declarations, bindings, expression, verdict", POSITIVE,
                         ids=_ids(POSITIVE))
def test_positive(declarations: str, bindings: dict[str, int], expression: str,
                  verdict: Verdict) -> None:
    system = system_for(declarations, bindings)
    assert system.positive(dim(system, expression)) is verdict


@pytest.mark.parametrize("declarations, bindings, numerator, denominator, verdict", DIVIDES,
                         ids=_ids(DIVIDES))
def test_divides(declarations: str, bindings: dict[str, int], numerator: str, denominator: str,
                 verdict: Verdict) -> None:
    system = system_for(declarations, bindings)
    assert system.divides(dim(system, numerator), dim(system, denominator)) is verdict


def test_verdict_truth() -> None:
    """Only PROVED is truthy, so `if not verdict:` catches both failures."""
    assert bool(PROVED) and not bool(DIFFERENT) and not bool(UNPROVED)


def test_answers_do_not_go_stale_when_constraints_arrive() -> None:
    """A memoised answer must not survive a constraint that changes it."""
    system = system_for("dim N, H, d, D", {})
    before = system.equal(dim(system, "D"), dim(system, "H * d"))
    check = check_text("dim N, H, d, D\nconstraint D == H * d")
    after = check.dims.equal(dim(check.dims, "D"), dim(check.dims, "H * d"))
    assert (before, after) == (UNPROVED, PROVED)
    system.add_constraint(dim(system, "D"), "==", dim(system, "H * d"), "D == H*d",
                          check.statements[1].span)
    assert system.equal(dim(system, "D"), dim(system, "H * d")) is PROVED


@pytest.mark.parametrize("declarations, bindings, constraint, status", [
    ("dim N", {}, "N == N", "trivial"),
    ("dim H, d\ndim D = H * d", {}, "D == d * H", "trivial"),
    ("dim T = 128", {}, "T == 128", "trivial"),
    ("dim N, M", {}, "N == M", "ok"),
    ("dim N", {}, "2 == 3", "violated"),
    ("dim N", {"N": 4}, "N == 5", "violated"),
    ("dim N", {"N": 4}, "N < 4", "violated"),
    ("dim N", {"N": 4}, "N <= 4", "ok"),
    ("dim N", {"N": 4}, "N != 4", "violated"),
    # Satisfied only because of the `--dim` values: not "trivial" (no SC205 warning
    # that would fail `--strict` only when sizes are given).
    ("dim H, d", {"H": 8, "d": 64}, "H * d == 512", "ok"),
    ("dim N, M", {"N": 5, "M": 6}, "M == N + 1", "ok"),
])
def test_constraint_outcome(declarations: str, bindings: dict[str, int], constraint: str,
                            status: str) -> None:
    system = system_for(declarations, bindings)
    parsed = parse(f"constraint {constraint}")
    statement = parsed.statements[0]
    assert isinstance(statement, nodes.Constraint)
    builder = DimBuilder(system, lambda name: system.symbol_of(name.name), [])
    left, right = builder.build(statement.left), builder.build(statement.right)
    assert left is not None and right is not None
    outcome = system.add_constraint(left, statement.op, right, constraint, statement.span)
    assert outcome.status == status


@pytest.mark.parametrize("text, printed", [
    ("H * d", "H*d"),
    ("d * H", "H*d"),
    ("N - 1", "N - 1"),
    ("d + 1", "d + 1"),
    ("N ** 2", "N**2"),
    ("(N + 1) * (d + 1)", "(N + 1)*(d + 1)"),
    ("N // 2", "N//2"),
    ("(N + 1) // 2", "(N + 1)//2"),
    ("E * I", "E*I"),  # Euler's number and the imaginary unit are not involved
    ("pi + 1", "pi + 1"),
])
def test_dims_print_in_the_spec_notation(text: str, printed: str) -> None:
    system = system_for("dim N, d, H, E, I, pi", {})
    assert symbolic.to_text(dim(system, text)) == printed


def test_only_symbolic_imports_sympy() -> None:
    """Heavy dependencies behind one door (style.md, 6)."""
    package = Path(symbolic.__file__).parent.parent
    importers = sorted(
        path.relative_to(package).as_posix() for path in package.rglob("*.py")
        if any(line.lstrip().startswith(("import sympy", "from sympy"))
               for line in path.read_text(encoding="utf-8").splitlines())
    )
    assert importers and all(name.startswith("symbolic/") for name in importers), importers


# --- quotients are shown by the names the spec gives them (issue 12) ----------------------------

NAMED = "input X: [N, D]\nQ = split_heads(X, H)\nR = reshape(X, [N, H, -1])\n"


@pytest.mark.parametrize(("declarations", "bindings", "per_head"), [
    ("dim d\ndim D = H * d", {}, "d"),                      # a definition says D = H·d
    ("dim d, D\nconstraint D == H * d", {}, "d"),           # so does a constraint
    ("dim d, D\nconstraint D == H * d", {"H": 8}, "d"),     # still, with the head count bound
    ("dim k, D\nconstraint D == H * k\ndim d = D / H", {}, "d"),  # a derived dim's own name
    ("dim D\nconstraint D == 8 * H", {}, "D/H"),            # no name for it: the spec's notation
    ("dim D\nconstraint D == 8 * H", {"H": 2}, "D/H"),      # never a bare number
])
def test_a_quotient_is_named_as_the_spec_names_it(declarations: str, bindings: dict[str, int],
                                                   per_head: str) -> None:
    program = check_text("dim N, H\n" + declarations + "\n" + NAMED, bindings)
    assert not [d for d in program.diagnostics if d.is_error], program.diagnostics
    assert program.shapes()["Q"] == ["H", "N", per_head]
    assert program.shapes()["R"] == ["N", "H", per_head]
