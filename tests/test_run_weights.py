"""`run` confirms the meaning checks on numbers (issue 8 §5): the weights each attention's
contraction consumes must sum to 1 along the axes it sums over. A violation is the spec's
doing, so it is a warning naming the statement, never a checker bug."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from shapecheck.backend import compile_spec
from shapecheck.cli import cli

HEAD = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"


def run_warnings(text: str, dtype: str = "float64") -> tuple[list[str], list[str]]:
    result = compile_spec(text, dims={"N": 7, "d": 3}, dtype=dtype).run(seed=1, check_invariants=True)
    return result.warnings, result.checks


@pytest.mark.parametrize("body", [
    "P = softmax(Q @ K.T / sqrt(d))\nO = P @ V\n",
    "P = softmax(K @ Q.T / sqrt(d), axis=col)\nO = P.T @ V\n",
    "O = einsum(\"kq,kd->qd\", softmax(K @ Q.T / sqrt(d), axis=0), V)\n",
    "O = dropout(softmax(Q @ K.T / sqrt(d)), 0.1) @ V\n",
    "O = V.T @ softmax(Q @ K.T / sqrt(d)).T\n",
    "E = exp(Q @ K.T)\nO = (E / sum(E, axis=-1, keepdims=true)) @ V\n",
])
def test_correct_weights_are_checked_and_pass(body: str) -> None:
    warnings, checks = run_warnings(HEAD + body)
    assert warnings == []
    assert any("sum to 1 along the axis it sums over" in c for c in checks), checks


@pytest.mark.parametrize("body, weights", [
    ("P = softmax(Q @ K.T / sqrt(d))\nPm = where(causal_mask(N), P, 0)\nO = Pm @ V\n", "`Pm`"),
    ("P = softmax(Q @ K.T / sqrt(d))\nO = P.T @ V\n", "`P.T`"),
    ("O = softmax(Q @ K.T / sqrt(d), axis=col) @ V\n", "`softmax(Q @ K.T / sqrt(d), axis=col)`"),
    ("P = softmax(Q @ K.T / sqrt(d))\nO = (P * 2) @ V\n", "`(P * 2)`"),
])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_weights_that_do_not_sum_to_one_are_a_warning(body: str, weights: str, dtype: str) -> None:
    text = HEAD + body
    warnings, checks = run_warnings(text, dtype)
    (warning,) = warnings
    line = text.count("\n")  # the contraction is on the last line
    assert f"sums weights {weights}" in warning and f"(line {line})" in warning
    assert "do not add up to 1" in warning
    assert not any("sum to 1 along the axis it sums over" in c for c in checks)


def test_fully_masked_rows_are_left_to_the_softmax_warning() -> None:
    text = ("dim N, d\ninput S: [N, N]\ninput keep: bool[N, N]\ninput V: [N, d]\n"
            "O = softmax(where(keep, S, -inf)) @ V\n")
    keep = np.ones((4, 4), dtype=bool)
    keep[1] = False
    result = compile_spec(text).run({"keep": keep}, dims={"d": 2}, seed=0, check_invariants=True)
    assert ["entirely -inf" in w or "non-finite" in w for w in result.warnings] == [True, True]
    assert any("that are not NaN or all zero sum to 1" in c for c in result.checks)


def test_run_prints_the_warning_and_exits_0(tmp_path) -> None:
    spec = tmp_path / "masked_after.attn"
    spec.write_text(HEAD + "P = softmax(Q @ K.T / sqrt(d))\nO = where(causal_mask(N), P, 0) @ V\n")
    result = CliRunner().invoke(cli, ["run", str(spec), "--dim", "N=5", "--dim", "d=2"])
    assert result.exit_code == 0, result.output
    assert "warning: `where(causal_mask(N), P, 0) @ V` (line 6) sums weights" in result.output
    assert "SC406" in result.output  # the static check said so first
    assert "checker bug" not in result.output


def test_zeroing_whole_query_rows_is_not_a_change() -> None:
    # A query-padding mask after the softmax: constant along the keys, it zeroes rows.
    text = HEAD + ("input keep_q: bool[N, 1]\nP = softmax(Q @ K.T / sqrt(d))\n"
                   "O = where(keep_q, P, 0) @ V\n")
    keep = np.ones((7, 1), dtype=bool)
    keep[2] = False
    result = compile_spec(text, dims={"N": 7, "d": 3}).run({"keep_q": keep}, seed=0,
                                                            check_invariants=True)
    assert result.warnings == []
    assert any("or all zero sum to 1" in c for c in result.checks)
