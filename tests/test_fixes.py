"""Fixes: `help:` suggestions that are exact edits (shapecheck/messages/fixes.py), `verify --fix`
and `--diff`.

The machinery is tested with fixes built here, and end to end with the fixes the
checker attaches (a suppression that suppresses nothing is removed; the verified
`help:` fixes of the checker when it offers them).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from shapecheck.api import check_text
from shapecheck.cli import main
from shapecheck.messages.diagnostics import Diagnostic, Edit, Fix, Severity, Span
from shapecheck.messages.fixes import MAX_ROUNDS, apply_edits, chosen, fix_text, unified_diff

UNUSED_NOQA = "dim N, d\ninput Q: [N, d]\noutput S = Q @ Q.T  # noqa: SC401\n"
FIXED = "dim N, d\ninput Q: [N, d]\noutput S = Q @ Q.T\n"


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stopped:
        main([str(a) for a in args])
    captured = capsys.readouterr()
    code = stopped.value.code
    return (code if isinstance(code, int) else 1 if code else 0), captured.out, captured.err


def diag(*fixes: Fix, line: int = 1) -> Diagnostic:
    return Diagnostic("SC301", Severity.ERROR, "m", Span(line, 1, line, 2),
                      help=tuple(f.help for f in fixes), fixes=fixes)


def edit(line: int, column: int, end_line: int, end_column: int, text: str) -> Edit:
    return Edit(Span(line, column, end_line, end_column), text)


# --- applying edits -----------------------------------------------------------------------


def test_apply_edits_replaces_inserts_and_deletes_by_line_and_column():
    text = "S = Q @ K\nT = S\n"
    assert apply_edits(text, [edit(1, 9, 1, 10, "K.T")]) == "S = Q @ K.T\nT = S\n"
    assert apply_edits(text, [edit(2, 1, 2, 1, "constraint a == b\n")]) == \
        "S = Q @ K\nconstraint a == b\nT = S\n"
    assert apply_edits(text, [edit(2, 1, 3, 1, "")]) == "S = Q @ K\n"  # a whole line
    # Several edits, given in any order, apply to the original positions.
    assert apply_edits(text, [edit(2, 5, 2, 6, "X"), edit(1, 1, 1, 2, "R")]) == \
        "R = Q @ K\nT = X\n"
    # Columns count characters, not bytes; a position past a line's end stays on that line.
    assert apply_edits("注意 = Q\n", [edit(1, 6, 1, 7, "K")]) == "注意 = K\n"
    assert apply_edits("ab\ncd", [edit(1, 9, 1, 9, "!")]) == "ab!\ncd"
    assert apply_edits("ab", [edit(1, 1, 2, 1, "")]) == ""  # a last line without "\n"
    with pytest.raises(ValueError):
        apply_edits(text, [edit(1, 1, 1, 5, "x"), edit(1, 3, 1, 6, "y")])


def test_one_round_takes_no_overlapping_fixes_and_only_safe_ones():
    text = "S = Q @ K\n"
    first = Fix("a", (edit(1, 9, 1, 10, "K.T"),))
    overlapping = Fix("b", (edit(1, 5, 1, 10, "Q"),))
    unsafe = Fix("c", (edit(1, 1, 1, 2, "T"),), safe=False)
    same_point = Fix("d", (edit(1, 9, 1, 10, "K.T"),))
    taken = chosen(text, [diag(overlapping), diag(first), diag(unsafe), diag(same_point)])
    assert taken == [overlapping]  # the first by position; the others overlap it or are unsafe
    assert chosen(text, [diag(unsafe)], safe_only=False) == [unsafe]
    inserts = [diag(Fix("x", (edit(1, 1, 1, 1, "a"),))), diag(Fix("y", (edit(1, 1, 1, 1, "b"),)))]
    assert len(chosen(text, inserts)) == 1  # two insertions at one point: one per round


def test_fix_text_rechecks_and_stops_at_a_fixed_point():
    calls: list[str] = []

    def check(text: str) -> list[Diagnostic]:
        calls.append(text)
        if "K.T" in text:
            return []
        return [diag(Fix("t", (edit(1, 9, 1, 10, "K.T"),)))]

    fixed = fix_text("S = Q @ K\n", check)
    assert (fixed.text, fixed.applied, fixed.rounds) == ("S = Q @ K.T\n", 1, 1)
    assert calls == ["S = Q @ K\n", "S = Q @ K.T\n"]  # the result was checked again


def test_fix_text_is_bounded_when_fixes_never_settle():
    counter = {"n": 0}

    def check(text: str) -> list[Diagnostic]:  # every text asks for one more character,
        counter["n"] += 1                       # each one with one problem fewer
        return [diag(Fix("grow", (edit(1, 1, 1, 1, "x"),)), line=5)] + [
            diag(line=5) for _ in range(100 - len(text))]

    fixed = fix_text("", check)
    assert fixed.rounds == MAX_ROUNDS and fixed.text == "x" * MAX_ROUNDS

    def same(text: str) -> list[Diagnostic]:  # a fix that leaves as many problems is not applied
        return [diag(Fix("grow", (edit(1, 1, 1, 1, "x"),)))]

    assert fix_text("", same).text == ""

    def flip(text: str) -> list[Diagnostic]:  # two fixes that undo each other
        return [diag(Fix("f", (edit(1, 1, 1, 2, "b" if text.startswith("a") else "a"),)))]

    assert fix_text("a\n", flip).rounds <= 2


def test_unified_diff():
    out = unified_diff("a.attn", "x\ny\n", "x\nz")
    assert out.splitlines() == ["--- a.attn", "+++ a.attn", "@@ -1,2 +1,2 @@", " x", "-y", "+z",
                                "\\ No newline at end of file"]


# --- the checker's own fixes, end to end ------------------------------------------------------


def test_an_unused_noqa_carries_a_fix_that_removes_it():
    [diagnostic] = check_text(UNUSED_NOQA).diagnostics
    assert diagnostic.code == "SC501" and diagnostic.fixes[0].safe
    assert fix_text(UNUSED_NOQA, lambda t: check_text(t).diagnostics).text == FIXED


def test_diff_shows_and_writes_nothing(capsys, tmp_path):
    path = tmp_path / "a.attn"
    path.write_text(UNUSED_NOQA, encoding="utf-8")
    status, out, err = run(capsys, "verify", "--diff", path)
    assert status == 1  # it would change the file (issue 18)
    assert f"--- {path}" in out and "-output S = Q @ Q.T  # noqa: SC401" in out
    assert "+output S = Q @ Q.T" in out and "Would fix 1 problem(s) in 1 file(s)." in err
    assert path.read_text(encoding="utf-8") == UNUSED_NOQA
    assert run(capsys, "verify", "--fix", "--diff", path)[0] == 2


def test_fix_reads_stdin_and_prints_the_fixed_spec(tmp_path):
    done = subprocess.run([sys.executable, "-m", "shapecheck", "verify", "--fix", "-"],
                          input=UNUSED_NOQA, capture_output=True, text=True, timeout=120,
                          check=False, cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout == FIXED
    assert "Fixed 1 problem(s)" in done.stderr and "1 file verified" in done.stderr


@pytest.fixture
def fileio() -> object:
    return pytest.importorskip("shapecheck.fileio")


def test_fix_rewrites_the_file_keeping_mode_bom_and_the_other_lines(capsys, tmp_path, fileio):
    path = tmp_path / "a.attn"
    path.write_bytes(b"\xef\xbb\xbf" + UNUSED_NOQA.replace("\n", "\r\n").encode("utf-8"))
    path.chmod(0o640)
    status, out, _ = run(capsys, "verify", "--fix", path)
    assert status == 0 and "Fixed 1 problem(s) in 1 file(s)." in out and "1 file verified" in out
    assert path.read_bytes() == b"\xef\xbb\xbf" + FIXED.replace("\n", "\r\n").encode("utf-8")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["a.attn"]  # no temporary left behind


def test_fix_writes_through_a_symlink_to_its_target(capsys, tmp_path, fileio):
    target = tmp_path / "real" / "a.attn"
    target.parent.mkdir()
    target.write_text(UNUSED_NOQA, encoding="utf-8")
    link = tmp_path / "link.attn"
    link.symlink_to(target)
    assert run(capsys, "verify", "--fix", link)[0] == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text(encoding="utf-8") == FIXED


def test_fix_reports_what_remains(capsys, tmp_path, fileio):
    path = tmp_path / "a.attn"
    # `d` vs `d + 1` can never be equal: no edit is offered for it
    path.write_text(UNUSED_NOQA + "output T = Q + ones([d + 1])\n", encoding="utf-8")
    status, out, _ = run(capsys, "verify", "--fix", path)
    assert status == 1 and "error[SC303]" in out and "SC501" not in out
    assert path.read_text(encoding="utf-8") == FIXED + "output T = Q + ones([d + 1])\n"


_SCORES = "dim N, M, d\ninput Q: [N, d]; input K: [KEYS, d]; input V: [KEYS, d]\n"


@pytest.mark.parametrize(("body", "keys", "line"), [
    # self-attention: `Q.T @ K` is [d, d] and fails only at `P @ V`; the repair is the
    # scores' own statement, not `P @ V.T` (another formula)
    ("S = Q.T @ K / sqrt(d)\nP = softmax(S)\nO = P @ V\n", "N", 3),
    ("O = softmax(Q.T @ K / sqrt(d)) @ V\n", "N", 3),
    ("S = Q.T @ K\nP = dropout(softmax(S / sqrt(d), axis=-1), 0.1)\nO = P @ V\n",
     "N", 3),
    # cross-attention: the product itself fails, and is repaired where it is
    ("S = Q.T @ K / sqrt(d)\nO = softmax(S) @ V\n", "M", 3),
])
def test_scores_with_the_query_transposed_are_repaired_where_they_are_made(
        body: str, keys: str, line: int) -> None:
    text = _SCORES.replace("KEYS", keys) + body
    [found] = [d for d in check_text(text).diagnostics if d.code != "SC401"]  # M unused
    assert found.code == "SC301" and found.help[0].endswith("`Q @ K.T` there?") or \
        found.help[0] == "did you mean `Q @ K.T`?", found.help
    fixed = apply_edits(text, found.fixes[0].edits)
    assert fixed == text.replace("Q.T @ K", "Q @ K.T")
    assert [d.code for d in check_text(fixed).diagnostics if d.code != "SC401"] == []
    assert found.fixes[0].edits[0].span.line == line
