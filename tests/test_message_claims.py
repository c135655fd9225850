"""Messages that tell the truth (issue 18, items 1-4): counterexamples where the claim
fails, constraints as facts about the whole spec, quotients printed with the names the
constraints give, and the real reason a pattern is not fused."""

from __future__ import annotations

import pytest

import shapecheck
from shapecheck.api import check_text

HEAD = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\nS = Q @ K.T / sqrt(d)\n"


def codes_of(text: str, **bindings: int) -> list[str]:
    return [d.code for d in check_text(text, bindings or None).diagnostics]


# --- item 4: why a pattern is not fused; SC408's help in the spec's words --------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("tail", [
    "P = softmax(S, axis=0)\noutput O: [N, d] = P @ V\n",      # the wrong axis
    "P = softmax(S, axis=-1)\noutput O: [N, d] = P.T @ V\n",   # the weights transposed
])
def test_a_pattern_summed_over_the_wrong_axis_is_not_fused_for_that_reason(backend, tail):
    spec = shapecheck.compile_spec(HEAD + tail, dims={"N": 4, "d": 2}, backend=backend)
    plan = "\n".join(spec.run({}, seed=0).plan)
    assert "not fused: the product with V does not sum the weights over the axis" in plan
    assert "changed" not in plan


def test_weights_really_changed_still_say_so():
    tail = "P = softmax(S, axis=-1)\nP2 = P * 2\noutput O: [N, d] = P2 @ V\n"
    spec = shapecheck.compile_spec(HEAD + tail, dims={"N": 4, "d": 2})
    assert "the weights are changed between the softmax" in "\n".join(spec.run({}, seed=0).plan)


@pytest.mark.parametrize("mask, fixed", [
    ("where(causal_mask(N), -inf, Q @ K.T / sqrt(d))",
     "where(causal_mask(N), Q @ K.T / sqrt(d), -inf)"),
    ("where(tril(ones([N, N])) > 0, -inf, Q @ K.T)", "where(tril(ones([N, N])) > 0, Q @ K.T, -inf)"),
])
def test_sc408_help_swaps_the_spec_s_own_branches(mask, fixed):
    text = (f"dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\nS = {mask}\n"
            "output O: [N, d] = softmax(S) @ V\n")
    (found,) = [d for d in check_text(text).diagnostics if d.code == "SC408"]
    assert f"swap the branches: `{fixed}`" in found.help
    assert not any("where(mask, S, -inf)" in line for line in found.help)


# --- item 1: a broadcasting counterexample is one where NumPy does not broadcast ------


@pytest.mark.parametrize("dims", [
    "dim B, N, d, G, R\ndim H = G * R\n",
    "dim B, N, d, G, R, H\nconstraint H == G * R\n",
])
def test_a_forgotten_repeat_kv_is_refuted_where_neither_size_is_1(dims):
    text = dims + "input Q: [B, H, N, d]\ninput K: [B, G, N, d]\nS = Q @ K.T\n"
    (found,) = [d for d in check_text(text).diagnostics if d.code == "SC303"]
    values = dict(found.counterexample)
    assert values["G"] != 1 and values["H"] != 1 and values["G"] != values["H"], found.message
    assert f"G={values['G']}" in found.message


def test_an_elementwise_broadcast_counterexample_has_no_size_1():
    text = "dim N, M\ninput A: [N]\ninput B: [M]\nC = A + B\n"
    (found,) = [d for d in check_text(text).diagnostics if d.code == "SC303"]
    assert 1 not in dict(found.counterexample).values() or not found.counterexample


# --- item 2: constraints are facts about the whole spec --------------------------------


def test_a_constraint_below_a_definition_proves_it_positive():
    text = "dim NB\ndim NBh = NB // 2\nconstraint NB >= 4\ninput X: [NBh]\noutput Y = X\n"
    assert codes_of(text) == []


def test_a_definition_the_constraints_do_not_help_is_refuted_within_them():
    text = "dim T\ndim Th = T // 3\nconstraint T >= 2\ninput Z: [Th]\noutput Z\n"
    (found,) = check_text(text).diagnostics
    assert found.code == "SC201" and "0 at T=2" in found.message


# --- item 3: a quotient is printed by the name the constraints give it, at any --dim ----

HEADS = """dim N, D, H, d
constraint D == H * d
input X: [N, D]
Q = split_heads(X, H)
K = split_heads(X, H)
S = Q @ K.T / sqrt(d)
output P = softmax(S) @ K
"""


@pytest.mark.parametrize("bindings", [{}, {"D": 8, "H": 2}, {"D": 8, "H": 2, "N": 3}])
def test_the_head_dim_is_d_with_or_without_bindings(bindings):
    shapes = check_text(HEADS, bindings).shapes()
    assert shapes["Q"] == ["H", "N", "d"] and shapes["P"] == ["H", "N", "d"]


def test_the_report_says_d_beside_sqrt_d(tmp_path):
    from shapecheck.report import build_report, render

    program = check_text(HEADS, {"D": 8, "H": 2, "N": 3})
    text = render(build_report(program, "h.attn", {"D": 8, "H": 2, "N": 3}, "float64"), "md")
    assert "D/H" not in text and "inner `d` = `d` ✓" in text


def test_sc404_names_the_contracted_size_as_the_spec_does():
    text = ("dim N, h\ndim hd = 2 * h\ninput A: [N, h]\ninput B: [N, h]\ninput K: [N, hd]\n"
            "input V: [N, hd]\nQ = concat([A, B], axis=-1)\nS = Q @ K.T / sqrt(N)\n"
            "output O = softmax(S) @ V\n")
    (found,) = [d for d in check_text(text).diagnostics if d.code == "SC404"]
    assert "sums over hd" in found.message and "`/ sqrt(hd)`" in found.help[0]
    assert "2*h (" not in found.message
