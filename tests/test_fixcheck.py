"""Verified fixes (issue 7): a `help:` with an edit is offered only when the edited spec
re-checks clean, and it is the right one for the mistakes that used to get a wrong one.

Every check here applies the offered edit itself (``fixes.apply_edits``) and checks the
result with the whole checker: a differential test of the slice the verifier re-checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from shapecheck.check import checker
from shapecheck.passes import fixcheck
from shapecheck.api import check_text
from shapecheck.messages.diagnostics import Diagnostic
from shapecheck.messages.fixes import apply_edits

CASES = sorted((Path(__file__).parent / "cases").glob("*.attn"))
EXAMPLES = sorted((Path(__file__).parent.parent / "examples").rglob("*.attn"))


def errors(text: str) -> Counter[str]:
    return Counter(d.code for d in check_text(text).diagnostics if d.is_error)


def the(code: str, text: str) -> Diagnostic:
    (found,) = [d for d in check_text(text).diagnostics if d.code == code]
    return found


def fixed(text: str, diagnostic: Diagnostic) -> str:
    (fix,) = diagnostic.fixes
    assert fix.help in diagnostic.help
    return apply_edits(text, fix.edits)


ATTENTION = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\nP = softmax(Q @ K.T)\n"
CROSS = "dim N, L, d\ninput Q: [N, d]\ninput K: [L, d]\ninput V: [N, d]\nP = softmax(Q @ K.T)\n"
HEADS = ("dim N, d, H\ndim D = H * d\ninput X: [N, D]\nparam W_Q: [D, D]\nparam W_O: [D, D]\n"
         "Q = split_heads(X @ W_Q, H)\nP = softmax(Q @ Q.T)\nO = P @ Q\n")
FFN = "dim N, D, d_ff\ninput X: [N, D]\nparam W_1: [D, d_ff]\nparam W_2: [D, d_ff]\nH1 = relu(X @ W_1)\n"

# (spec, code, the help that must be offered, the text it gives in the spec)
RIGHT = [
    (ATTENTION + "O = V @ P\noutput O\n", "SC301", "did you mean `P @ V`?", "O = P @ V"),
    (ATTENTION + "output O: [N, d] = V @ P\n", "SC301", "`P @ V`", "= P @ V"),
    ("dim N, d\ninput Q: [N, d]\ninput K: [N, d]\nS = Q @ K\noutput S\n", "SC301",
     "did you mean `Q @ K.T`?", "S = Q @ K.T"),
    (CROSS + "O = P @ V\noutput O\n", "SC301", "`input V: [L, d]`", "input V: [L, d]"),
    (HEADS + "Y = O @ W_O\noutput Y\n", "SC301", "`merge_heads(O) @ W_O`",
     "Y = merge_heads(O) @ W_O"),
    (FFN + "Y = H1 @ W_2\noutput Y\n", "SC301", "`param W_2: [d_ff, D]`", "param W_2: [d_ff, D]"),
    ("dim B, H, N, d\ninput Q: [B, H, N, d]\ninput K: [B, H, N, d]\n"
     "S = Q @ transpose(K, [3, 1, 2, 0])\noutput S\n", "SC301", "`Q @ K.T`", "S = Q @ K.T"),
    ("dim N, d_r\ninput X: [N, d_r]\nY = reshape(X, [N, 2, -1])\noutput Y\n", "SC202",
     "add `dim k` and `constraint d_r == 2 * k`", "dim N, d_r\ndim k\nconstraint d_r == 2 * k\n"),
    ("dim N, D, H\ninput X: [N, D]\nQ = split_heads(X, H)\noutput Q\n", "SC313",
     "constraint D == H * k", "dim k\nconstraint D == H * k"),
    ("dim N\ninput X: [N - 1]\noutput X\n", "SC201", "add `constraint N >= 2`",
     "dim N\nconstraint N >= 2\n"),
    ("dim N, d\ninput Query: [N, d]\nS = Querry @ Query.T\noutput S\n", "SC101",
     "did you mean `Query`?", "S = Query @ Query.T"),
    ("dim N\ninput S: [N, N]\ninput M: bool[N, N]\nP = softmax(S + M)\noutput P\n", "SC403",
     "`where(M, S, -inf)`", "softmax(where(M, S, -inf))"),
    ("dim N\ninput S: [N, N]\ninput M: [N, N]\nP = where(M, S, -inf)\noutput P\n", "SC311",
     "`input M: bool[N, N]`", "input M: bool[N, N]"),
    ("dim N\ninput X: [N]\nY = softmaxx(X)\noutput Y\n", "SC105", "`softmax`", "softmax(X)"),
    # The tensors in a list argument of an unknown call are checked too, so fixing the name
    # exposes no mistake that was there all along (fuzz seed 61 input 2116).
    ("dim N\ninput X: [N]\nY = stak([X, Z], axis=0)\noutput Y\n", "SC105", "`stack`",
     "stack([X, Z]"),
    ("dim N\ninput X: [N, N]\nY = softmax(X, axes=row)\noutput Y\n", "SC312", "`axis`", "axis=row"),
    # A dim statement is checked before any later constraint: the constraint goes above it.
    ("dim H, d\ndim Bad = d / H\ninput X: [Bad]\noutput X\n", "SC202",
     "constraint d == H * k", "dim H, d\ndim k\nconstraint d == H * k\ndim Bad = d / H"),
]


@pytest.mark.parametrize("text, code, help_text, result", RIGHT,
                         ids=[f"{r[1]} {r[2][:30]}" for r in RIGHT])
def test_the_right_fix_is_offered_and_it_works(text: str, code: str, help_text: str,
                                               result: str) -> None:
    diagnostic = the(code, text)
    assert any(help_text in h for h in diagnostic.help), diagnostic.help
    after = fixed(text, diagnostic)
    assert result in after, after
    assert code not in errors(after) or errors(after)[code] < errors(text)[code]
    assert not errors(after) - errors(text), check_text(after).diagnostics


# The helps that used to be wrong: never offered again.
WRONG = [
    (ATTENTION + "O = V @ P\noutput O\n", "V.T @ P"),
    (CROSS + "O = P @ V\noutput O\n", "P.T @ V"),
    (HEADS + "Y = O @ W_O\noutput Y\n", "param W_O: [d, D]"),
    (FFN + "Y = H1 @ W_2\noutput Y\n", "[d_ff, d_ff]"),
    ("dim B, H, N, d\ninput Q: [B, H, N, d]\ninput K: [B, H, N, d]\n"
     "S = Q @ transpose(K, [3, 1, 2, 0])\noutput S\n", "transpose(K, [3, 1, 2, 0]).T"),
]


@pytest.mark.parametrize("text, wrong", WRONG, ids=[w for _, w in WRONG])
def test_a_wrong_help_is_not_offered(text: str, wrong: str) -> None:
    for diagnostic in check_text(text).diagnostics:
        assert not any(wrong in h for h in diagnostic.help), diagnostic.help


def test_a_suggested_constraint_declares_the_dims_it_needs() -> None:
    """`constraint d_r == 2 * k` is pasteable as it stands: `k` is declared with it."""
    text = "dim N, d_r\ninput X: [N, d_r]\nY = reshape(X, [N, 2, -1])\noutput Y\n"
    (fix,) = the("SC202", text).fixes
    assert "dim k" in fix.edits[0].replacement
    assert errors(apply_edits(text, fix.edits)) == Counter()


def test_no_fix_is_offered_that_does_not_fix() -> None:
    """No edit could repair it: no help line at all (rather than one that fails)."""
    text = "dim N, d\ninput A: [N, d, d]\ninput B: [N, N, N]\nC = A @ B\noutput C\n"
    diagnostic = the("SC301", text)
    for fix in diagnostic.fixes:
        assert not errors(apply_edits(text, fix.edits)) - errors(text)


def _offered(paths: list[Path]) -> list[tuple[str, str, Diagnostic]]:
    found = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += [(path.name, text, d) for d in check_text(text).diagnostics if d.fixes]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name, text, diagnostic", _offered(CASES + EXAMPLES),
                         ids=lambda value: value if isinstance(value, str) and len(value) < 40 else "")
def test_every_fix_offered_in_the_cases_works_on_the_whole_spec(
        name: str, text: str, diagnostic: Diagnostic) -> None:
    """The verifier re-checks a slice; the whole spec agrees: the diagnostic is gone and
    no new error appears anywhere."""
    after = apply_edits(text, diagnostic.fixes[0].edits)
    program = check_text(after)
    assert not errors(after) - errors(text), [(d.code, d.span.line) for d in program.diagnostics]
    before = Counter((d.code, d.message) for d in check_text(text).diagnostics)
    remaining = Counter((d.code, d.message) for d in program.diagnostics)
    assert remaining[(diagnostic.code, diagnostic.message)] < before[(diagnostic.code, diagnostic.message)]


def test_many_errors_in_a_large_file_stay_within_the_work_budget(monkeypatch) -> None:
    """200 errors in a 2,000-statement spec: the statements re-checked to verify their
    fixes stay within the budget (linear in the file), not errors x statements."""
    block = ("S{i} = Q @ K / sqrt(d)\nP{i} = softmax(S{i})\nO{i} = P{i} @ V\n"
             "T{i} = O{i} + Q\nU{i} = T{i} * 2\n")
    text = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n" + "".join(
        block.format(i=i) for i in range(400))
    rechecked = []
    original = checker.Checker.check

    def counted(self: checker.Checker, statement: object) -> bool:
        rechecked.append(1)
        return original(self, statement)  # type: ignore[arg-type]

    monkeypatch.setattr(checker.Checker, "check", counted)
    program = check_text(text)
    statements = len(program.statements)
    offered = [d for d in program.diagnostics if d.fixes]
    assert len(offered) >= 150
    assert len(rechecked) <= statements + max(fixcheck.MIN_WORK,
                                              fixcheck.WORK_PER_STATEMENT * statements)


@pytest.mark.parametrize("text, line", [
    # after the last dim or constraint statement, at the end of its line
    ("dim N, D\ninput X: [N, D]\ndim H\nY = reshape(X, [N, H, -1])\noutput Y\n", 3),
    # a dim statement is checked before later constraints: on the line before it
    ("dim H, d\ndim Bad = d / H\ninput X: [Bad]\noutput X\n", 2),
])
def test_a_new_constraint_goes_where_it_is_checked_in_time(text: str, line: int) -> None:
    (fix,) = [d for d in check_text(text).diagnostics if d.fixes][0].fixes
    assert fix.edits[0].span.line == line
    assert errors(apply_edits(text, fix.edits)) == Counter()


def test_crlf_files_get_crlf_lines() -> None:
    text = "dim N\r\ninput X: [N - 1]\r\noutput X\r\n"
    (fix,) = the("SC201", text).fixes
    assert fix.edits[0].replacement == "\r\nconstraint N >= 2"


# --- end to end: `verify --fix`, `--diff`, SARIF (the LSP's code actions: test_lsp.py) -----

SCORES = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\noutput S = Q @ K / sqrt(d)\n"
SPLIT = "dim N, D, H\ninput X: [N, D]\noutput Y = split_heads(X, H)\n"
WEIGHT = "dim N, D, E\ninput X: [N, D]\nparam W: [E, D]\noutput Y = X @ W\n"


def cli(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shapecheck", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_verify_fix_applies_the_verified_fixes_through_the_cli(tmp_path: Path) -> None:
    """`Q @ K` -> `Q @ K.T` and a missing constraint with the dim it needs: the real
    command writes them and the file then verifies."""
    scores, split = tmp_path / "scores.attn", tmp_path / "split.attn"
    scores.write_text(SCORES, encoding="utf-8")
    split.write_text(SPLIT, encoding="utf-8")
    done = cli("verify", "--fix", scores, split)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Fixed 2 problem(s) in 2 file(s)" in done.stdout
    assert scores.read_text(encoding="utf-8") == SCORES.replace("Q @ K ", "Q @ K.T ")
    assert split.read_text(encoding="utf-8") == \
        "dim N, D, H\ndim k\nconstraint D == H * k\ninput X: [N, D]\noutput Y = split_heads(X, H)\n"
    assert cli("verify", scores, split).returncode == 0


@pytest.mark.slow  # seconds each; a lighter test of the same module stays in the fast tier
def test_verify_diff_shows_the_fix_and_an_unsafe_fix_is_not_applied(tmp_path: Path) -> None:
    scores, weight = tmp_path / "scores.attn", tmp_path / "weight.attn"
    scores.write_text(SCORES, encoding="utf-8")
    weight.write_text(WEIGHT, encoding="utf-8")
    done = cli("verify", "--diff", scores)
    assert "-output S = Q @ K / sqrt(d)" in done.stdout
    assert "+output S = Q @ K.T / sqrt(d)" in done.stdout
    assert scores.read_text(encoding="utf-8") == SCORES
    # A weight declared the other way round is offered (help, SARIF, editor), but
    # `--fix` does not redeclare a parameter by itself.
    [diagnostic] = [d for d in check_text(WEIGHT).diagnostics if d.code == "SC301"]
    assert diagnostic.fixes and not diagnostic.fixes[0].safe
    assert "`param W: [D, E]`" in diagnostic.fixes[0].help
    assert cli("verify", "--fix", weight).returncode == 1
    assert weight.read_text(encoding="utf-8") == WEIGHT


def test_sarif_carries_the_verified_fix(tmp_path: Path) -> None:
    scores = tmp_path / "scores.attn"
    scores.write_text(SCORES, encoding="utf-8")
    done = cli("verify", "--format", "sarif", scores)
    [result] = [r for r in json.loads(done.stdout)["runs"][0]["results"]
                if r["ruleId"] == "SC301"]
    [fix] = result["fixes"]
    assert fix["description"]["text"] == "did you mean `Q @ K.T`?"
    [change] = fix["artifactChanges"]
    [replacement] = change["replacements"]
    assert replacement["insertedContent"]["text"] == "Q @ K.T"
    assert replacement["deletedRegion"]["startLine"] == 4
    assert apply_edits(SCORES, check_text(SCORES).diagnostics[0].fixes[0].edits) == \
        SCORES.replace("Q @ K ", "Q @ K.T ")


def test_a_sketch_gets_fixes_checked_as_a_sketch() -> None:
    """A spec that declares nothing is re-checked with inference, as it was checked:
    the fix is not refused for the undeclared names the sketch is allowed."""
    text = "A = ones([4, 3])\nY = A @ A\nZ = Y @ Q\n"
    diagnostic = the("SC301", text)
    assert errors(fixed(text, diagnostic)) == Counter()
    assert "Y = A @ A.T" in fixed(text, diagnostic)


def test_an_invisible_character_in_a_comment_is_deleted_without_a_recheck() -> None:
    text = "dim N\n# a note\u200b here\ninput X: [N]\noutput X\n"
    [diagnostic] = [d for d in check_text(text).diagnostics if d.code == "SC005"]
    [fix] = diagnostic.fixes
    assert apply_edits(text, fix.edits) == text.replace("\u200b", "")
