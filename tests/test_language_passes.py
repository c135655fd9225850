"""Issue 10's constructs as the other passes see them: the axis-meaning analysis, the
report's cost, and inference (the NumPy and torch backends are tested by the example and
differential tests)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shapecheck.syntax import nodes
from shapecheck.api import check_path, check_text
from shapecheck.check.builtins import BUILTINS, ELEMENTWISE
from shapecheck.meaning import analyse
from shapecheck.check.program import Program
from shapecheck.report.cost import PER_ELEMENT

ROOT = Path(__file__).resolve().parent.parent
NEW_EXAMPLES = ["rotary_half", "rotary_interleaved", "sliding_window", "kv_cache_decode",
                "alibi", "key_padding", "latent_attention"]
HEAD = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"


@pytest.mark.parametrize("path", [ROOT / "tests" / "cases" / "language_runs.attn"]
                         + [ROOT / "examples" / f"{name}.attn" for name in NEW_EXAMPLES],
                         ids=lambda p: p.stem)
def test_every_value_has_as_many_axes_as_its_shape(path: Path) -> None:
    """The axis map of every new builtin and of `x[...]` gives each value one axis per
    entry of its shape (a `stack` inserts one, a subscript drops and adds some)."""
    program = check_path(path)
    found = analyse(program)
    checked = 0
    for node in _expressions(program):
        axes, value = found.axes(node), program.type_of(node)
        if axes is None or value.shape is None:
            continue
        assert len(axes) == len(value.shape), (path.name, node.span, value.text())
        checked += 1
    assert checked > 10


def _expressions(program: Program) -> Iterator[nodes.Expr]:
    pending = [s.value for s in program.statements
               if isinstance(s, (nodes.Define, nodes.Output)) and s.value is not None]
    while pending:
        node = pending.pop()
        yield node
        pending.extend(nodes.children(node))


@pytest.mark.parametrize("name", NEW_EXAMPLES)
def test_the_attention_of_every_new_example_is_found_and_right(name: str) -> None:
    (pattern,) = analyse(check_path(ROOT / "examples" / f"{name}.attn")).patterns
    assert pattern.axis_ok and pattern.scale_ok
    assert pattern.query is not None and "query" in pattern.query.axes
    assert pattern.key is not None and "key" in pattern.key.axes


def test_a_new_axis_keeps_the_softmax_facts_and_a_cut_drops_them() -> None:
    whole = check_text(HEAD + "P = softmax(Q @ K.T / sqrt(d))\nO = P[None] @ V[None]\n")
    (pattern,) = analyse(whole).patterns
    assert pattern.axis_ok
    # Rows of the weights cut away: the pass stays silent rather than guess.
    cut = check_text(HEAD + "constraint N >= 2\nP = softmax(Q @ K.T / sqrt(d))\n"
                     "O = P[1:] @ V\n")
    assert not [d for d in cut.diagnostics if d.code.startswith("SC4")]


def test_a_softmax_over_the_wrong_axis_is_still_seen_through_a_subscript() -> None:
    text = HEAD + "P = softmax(Q @ K.T / sqrt(d), axis=col)\nO = P[None, ...] @ V\n"
    assert "SC402" in [d.code for d in check_text(text).diagnostics]


def test_every_elementwise_builtin_costs_one_per_element() -> None:
    assert {"exp", "gelu", "elu", "rsqrt"} <= ELEMENTWISE and "softmax" not in ELEMENTWISE
    assert all(PER_ELEMENT[name] == 1 for name in ELEMENTWISE)
    assert PER_ELEMENT == {name: row.cost for name, row in BUILTINS.items() if row.cost}


POSITIONS = HEAD + "i = arange(N)[:, None]\nj = arange(N)[None, :]\n"


@pytest.mark.parametrize(("mask", "right"), [
    ("where(j <= i, S, -inf)", True), ("where(i >= j + 0, S, -inf)", True),
    ("S + where(i < j, -inf, 0)", True), ("where((i - j < 3) & (j <= i), S, -inf)", True),
    ("where(i <= j, S, -inf)", False), ("where(j <= i, -inf, S)", False),
    ("where(triu(i + j >= 0), S, -inf)", False), ("where(tril(i + j >= 0), S, -inf)", True),
    ("where(triu(i + j >= 0, k=1), -inf, S)", True),  # PyTorch's masked_fill(triu(.., 1))
    ("where(tril(i + j >= 0, k=-1), -inf, S)", False),
])
def test_a_mask_written_with_comparisons_is_a_causal_mask(mask: str, right: bool) -> None:
    """Positions from `arange` compared on two axes build a causal mask whose direction
    the pass knows: the pattern's mask is judged, and a wrong one warns."""
    program = check_text(POSITIONS + f"S = Q @ K.T / sqrt(d)\nO = softmax({mask}) @ V\n")
    (pattern,) = analyse(program).patterns
    assert pattern.mask_ok is right
    warned = {d.code for d in program.diagnostics} & {"SC407", "SC408"}
    assert bool(warned) is not right


def test_a_transposed_comparison_is_fixed_by_comparing_the_other_way() -> None:
    program = check_text(POSITIONS + "O = softmax(where(i <= j, Q @ K.T / sqrt(d), -inf)) @ V\n")
    (found,) = [d for d in program.diagnostics if d.code == "SC407"]
    assert "the other way round" in found.help[0]
    assert "`i <= j`" in found.notes[0].message


def test_a_threshold_in_a_sketch_comparison_is_inferred_as_a_dim() -> None:
    program = check_text("i = arange(T)[:, None]; j = arange(T)[None, :]\n"
                         "k = (j <= i) & (i - j < W)\nS = where(k, Q @ K.T, -inf)\n")
    assert program.inferred is not None
    assert "W" in [name for name, _ in program.inferred.dims]
    assert program.inferred.tensor("W") is None
