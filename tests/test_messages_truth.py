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
