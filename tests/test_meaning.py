"""The axis-meaning pass (issue 8): its interface, what it finds, and what it never does.

The diagnostics themselves are tested as data in ``tests/cases/meaning_*.attn``; here are
the pattern API the report and conformance build on, the builtin rows' axis maps, and the
properties (symbolic only, every format, never a traceback).
"""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from shapecheck.syntax import nodes
from shapecheck.api import check_text
from shapecheck.check.builtins import BUILTINS, AxisKind, AxisMap, Kind
from shapecheck.cli import cli
from shapecheck.meaning import Attention, Bias, Mask, Meaning, ScaleFactor, SoftCap, analyse

HEAD = "dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"


def meaning(text: str, bindings: dict[str, int] | None = None) -> Meaning:
    program = check_text(text, bindings)
    assert program.meaning is not None
    return program.meaning


def source(text: str, node: nodes.Expr | nodes.Stmt | None) -> str | None:
    if node is None:
        return None
    lines = text.split("\n")
    span = node.span
    assert span.line == span.end_line
    return lines[span.line - 1][span.column - 1: span.end_column - 1]


def only(text: str) -> Attention:
    found = meaning(text).patterns
    assert len(found) == 1, found
    return found[0]


def codes_of(text: str, bindings: dict[str, int] | None = None) -> list[str]:
    return [d.code for d in check_text(text, bindings).diagnostics]


# --- the builtin rows ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_row_says_how_its_axes_map(name: str) -> None:
    row = BUILTINS[name]
    assert isinstance(row.axes, AxisMap) and isinstance(row.axes.kind, AxisKind)
    params = {p.name: p for p in row.params}
    for tensor in row.axes.tensors:
        assert params[tensor].kind in (Kind.TENSOR, Kind.TENSORS), (name, tensor)
    for field in (row.axes.axis, row.axes.keepdims, row.axes.normalises):
        assert field is None or field in params, (name, field)
    # A reshape is followed by its result's shape (`flatten` has no shape argument); the
    # others read the argument their map names.
    if row.axes.kind in (AxisKind.PERMUTE, AxisKind.RESIZE, AxisKind.JOIN,
                         AxisKind.REDUCE, AxisKind.CONTRACT):
        assert row.axes.axis is not None, name


# --- the patterns --------------------------------------------------------------------------------


def test_single_head_pattern_names_every_part() -> None:
    text = HEAD + "S = Q @ K.T / sqrt(d)\nP = softmax(S, axis=row)\nO = P @ V\n"
    found = only(text)
    assert source(text, found.output) == "P @ V"
    assert source(text, found.weights) == "P" and found.weights_operand == 0
    assert source(text, found.softmax) == "softmax(S, axis=row)"
    assert source(text, found.scores) == "Q @ K.T"
    assert found.softmax_axis == 1 and found.summed_axes == (1,)
    assert found.weights_roles.axes == ("query", "key")
    assert found.softmax_roles is not None and found.softmax_roles.axes == ("query", "key")
    assert found.query is not None and found.key is not None
    assert source(text, found.query.node) == "Q" and found.query.axes == ("query", "feature")
    assert source(text, found.key.node) == "K" and found.key.axes == ("key", "feature")
    assert source(text, found.value.node) == "V" and found.value.axes == ("key", "value")
    assert found.output_roles.axes == ("query", "value")
    assert found.scale is not None and found.scale.verdict == "ok"
    assert [source(text, f.node) for f in found.scale.factors] == ["sqrt(d)"]
    assert found.scale.factors[0].divides and found.scale.factors[0].operand is None
    assert (found.axis_ok, found.scale_ok, found.mask_ok) == (True, True, None)
    assert found.statement.span.line == 7 and found.softmax_statement.span.line == 6


def test_roles_follow_the_layout_not_the_names() -> None:
    # [key, query] scores: the key is the first factor here, whatever it is called.
    text = HEAD + "S = K @ Q.T / sqrt(d)\nP = softmax(S, axis=col)\nO = P.T @ V\n"
    found = only(text)
    assert found.axis_ok is True
    assert source(text, found.query.node) == "Q" and source(text, found.key.node) == "K"
    assert found.weights_roles.axes == ("query", "key")  # P.T is [query, key]
    assert found.softmax_roles.axes == ("key", "query")  # S is [key, query]
    assert found.softmax_axis == 0


def test_batched_einsum_roles_and_batch_labels() -> None:
    text = ("dim B, N, d, H\ninput Q: [B, N, H, d]\ninput K: [B, N, H, d]\ninput V: [B, N, H, d]\n"
            "S = einsum(\"bnhd,bmhd->bhnm\", Q, K) * d ** -0.5\n"
            "O = einsum(\"bhnm,bmhd->bnhd\", softmax(S), V)\n")
    found = only(text)
    assert found.query.axes == ("batch:0", "query", "batch:1", "feature")
    assert found.key.axes == ("batch:0", "key", "batch:1", "feature")
    assert found.value.axes == ("batch:0", "key", "batch:1", "value")
    assert found.output_roles.axes == ("batch:0", "query", "batch:1", "value")
    assert [str(size) for size in found.batch] == ["B", "H"]
    assert found.scale.verdict == "ok" and found.axis_ok


def test_scale_on_a_factor_is_found_and_the_tensor_is_unscaled() -> None:
    text = HEAD + "O = softmax((Q / sqrt(d)) @ K.T) @ V\n"
    found = only(text)
    assert source(text, found.query.node) == "Q"  # under the scale: what SDPA takes as q
    factor, = found.scale.factors
    assert source(text, factor.node) == "sqrt(d)" and source(text, factor.operand) == "(Q / sqrt(d))"
    program = check_text(text, {"d": 16})
    assert program.meaning.patterns[0].scale.value(program.dims) == pytest.approx(0.25)


def test_scale_value_and_constant_scales() -> None:
    text = HEAD + "O = softmax(Q @ K.T * 0.125) @ V\n"
    found = only(text)
    assert found.scale.verdict == "constant" and found.scale_ok is None
    assert found.scale.coefficient == 0.125 and found.scale.powers == ()
    unscaled = only(HEAD + "O = softmax(Q @ K.T) @ V\n")
    assert unscaled.scale.verdict == "none" and unscaled.scale.factors == ()


def test_a_sum_of_products_sums_over_both_widths() -> None:
    """`Qn @ Kn.T + Qr @ Kr.T` (content and rotary parts): the scale is judged against
    d_n + d_r, the part is kept as an added term (so a fused plan computes it)."""
    text = ("dim N, a, b\ninput Qn: [N, a]; input Qr: [N, b]; input Kn: [N, a]\n"
            "input Kr: [N, b]; input V: [N, a]\n"
            "O = softmax((Qn @ Kn.T + Qr @ Kr.T) / sqrt(a + b)) @ V\n")
    found = only(text)
    assert found.scale.verdict == "ok" and str(found.scale.expected) == "a + b"
    assert source(text, found.scores) == "Qn @ Kn.T"
    (bias,) = found.biases
    assert source(text, bias.node) == "Qr @ Kr.T" and bias.axes == ("query", "key")
    assert codes_of(text.replace("sqrt(a + b)", "sqrt(a)")) == ["SC404"]


def test_masks_with_kind_polarity_and_alignment() -> None:
    text = HEAD + ("input pad: bool[1, N]\n"
                   "S = where(causal_mask(N), Q @ K.T / sqrt(d), -inf)\n"
                   "Sp = where(pad, S, -1e9)\nO = softmax(Sp) @ V\n")
    found = only(text)
    causal, padding = found.masks
    assert causal.kind == "causal" and causal.alignment == "aligned" and causal.keeps
    assert causal.fill == -math.inf and not causal.after_softmax and not causal.additive
    assert causal.condition.axes == ("query", "key")
    assert padding.kind == "bool" and padding.alignment is None and padding.fill == -1e9
    assert padding.condition.axes == (None, "key")  # the 1 broadcasts over the queries
    assert found.mask_ok is True


@pytest.mark.parametrize("mask, alignment, ok", [
    ("where(causal_mask(N), S, -inf)", "aligned", True),
    ("where(arange(N)[None, :] > arange(N)[:, None], -inf, S)", "aligned", True),
    ("where(tril(ones([N, N])) == 0, -inf, S)", "aligned", True),
    ("where(causal_mask(N).T, S, -inf)", "transposed", False),
    ("where(causal_mask(N), -inf, S)", "transposed", False),
    ("where(causal_mask(N).T, -inf, S)", "aligned", False),  # each query loses itself
    # keeping the strict past: each query loses itself, the first sees nothing (issue 31)
    ("where(arange(N)[:, None] > arange(N)[None, :], S, -inf)", "aligned", False),
])
def test_mask_alignment_is_what_the_mask_lets_through(mask: str, alignment: str, ok: bool) -> None:
    found = only(HEAD + f"S = Q @ K.T / sqrt(d)\nO = softmax({mask}) @ V\n")
    (applied,) = found.masks
    assert applied.kind == "causal" and applied.alignment == alignment
    assert found.mask_ok is ok


def test_additive_mask_and_bias() -> None:
    text = HEAD + ("input bias: [N, N]\n"
                   "S = Q @ K.T / sqrt(d) + bias + where(causal_mask(N), 0, -inf)\n"
                   "O = softmax(S) @ V\n")
    found = only(text)
    assert [source(text, b.node) for b in found.biases] == ["bias"]
    assert found.biases[0].axes == ("query", "key") and not found.biases[0].subtracts
    mask, = found.masks
    assert mask.additive and mask.keeps and mask.fill == -math.inf and mask.alignment == "aligned"


def test_ops_are_in_the_order_they_apply() -> None:
    text = HEAD + ("input bias: [N, N]\n"
                   "S = where(causal_mask(N), (Q * 0.5) @ K.T, -1e9) / sqrt(d) - bias\n"
                   "O = softmax(S - max(S, axis=-1, keepdims=true)) @ V\n")
    found = only(text)
    kinds = [type(op) for op in found.ops]
    assert kinds == [ScaleFactor, Mask, ScaleFactor, Bias]
    first, mask, second, bias = found.ops
    assert source(text, first.node) == "0.5" and source(text, first.operand) == "(Q * 0.5)"
    assert mask.fill == -1e9 and source(text, second.node) == "sqrt(d)" and second.divides
    assert bias.subtracts and source(text, bias.node) == "bias"
    # a soft-cap is an op of its own, between the factors around it (issue 32: it runs
    # fused, block by block); the scale is not judged through it (the cap's own factors)
    capped = only(HEAD + "O = softmax(30 * tanh(Q @ K.T / sqrt(d) / 30)) @ V\n")
    assert [type(op) for op in capped.ops] == [ScaleFactor, ScaleFactor, SoftCap, ScaleFactor]
    assert capped.scale.verdict == "capped" and capped.scale_ok is None
    assert capped.query is not None and capped.key is not None
    assert codes_of(HEAD + "O = softmax(30 * tanh(Q @ K.T / sqrt(N) / 30)) @ V\n") == []


def test_a_named_sum_normalises_too() -> None:
    text = HEAD + ("E = exp(Q @ K.T / sqrt(d))\nZ = sum(E, axis=-1, keepdims=true)\n"
                   "O = (E / Z) @ V\nW = (E / (2 * Z)) @ V\n")
    found = meaning(text).patterns
    assert len(found) == 1 and found[0].axis_ok and found[0].scale.verdict == "ok"
    assert codes_of(text.replace("(E / Z) @ V", "(E / Z).T @ V")) == ["SC402"]


def test_wrong_forms_have_false_verdicts() -> None:
    found = only(HEAD + "S = where(causal_mask(N).T, Q @ K.T / sqrt(N), -inf)\nO = softmax(S).T @ V\n")
    assert found.axis_ok is False and found.scale_ok is False
    changed = only(HEAD + "P = softmax(Q @ K.T / sqrt(d))\nO = where(causal_mask(N), P, 0) @ V\n")
    assert len(changed.changes) == 1 and changed.masks[0].after_softmax


def test_grouped_query_through_repeat() -> None:
    text = ("dim N, d, G, R\ninput Q: [G*R, N, d]\ninput Kg: [G, N, d]\ninput Vg: [G, N, d]\n"
            "K = repeat(Kg, R, axis=0)\nV = repeat(Vg, R, axis=0)\n"
            "O = softmax(Q @ K.T / sqrt(d)) @ V\n")
    found = only(text)
    assert source(text, found.key.node) == "K" and found.key.axes == ("batch:0", "key", "feature")
    assert found.axis_ok and found.scale.verdict == "ok"


def test_no_softmax_no_pattern() -> None:
    assert meaning(HEAD + "O = relu(Q) @ (relu(K).T @ V)\n").patterns == []


def test_axes_of_any_node_are_exposed() -> None:
    text = HEAD + "S = Q @ K.T\nT = S.T\n"
    program = check_text(text)
    define_s, define_t = program.statements[-2:]
    s_axes = program.meaning.axes(define_s.value)
    t_axes = program.meaning.axes(define_t.value)
    assert s_axes is not None and t_axes == (s_axes[1], s_axes[0])
    assert s_axes[0] is not s_axes[1]  # two axes of size N are two axes


def test_analyse_is_the_entry_point() -> None:
    program = check_text(HEAD + "O = softmax(Q @ K.T / sqrt(d)).T @ V\n")
    again = analyse(program)
    assert [d.code for d in again.diagnostics] == ["SC402"]
    assert len(again.patterns) == 1


# --- properties ----------------------------------------------------------------------------------


def test_bindings_that_make_sizes_equal_do_not_silence_the_scale() -> None:
    text = HEAD + "O = softmax(Q @ K.T / sqrt(N)) @ V\n"
    assert codes_of(text) == ["SC404"]
    assert codes_of(text, {"N": 8, "d": 8}) == ["SC404"]
    multi = ("dim N, d, H\ndim D_model\nconstraint D_model == H * d\n"
             "input Q: [H, N, d]\ninput K: [H, N, d]\ninput V: [H, N, d]\n"
             "O = softmax(Q @ K.T / sqrt(D_model)) @ V\n")
    assert codes_of(multi, {"H": 1, "d": 4}) == ["SC404"]


def test_equal_under_the_constraints_is_equal() -> None:
    text = ("dim N, d_k, d_head\nconstraint d_k == d_head\n"
            "input Q: [N, d_k]\ninput K: [N, d_k]\ninput V: [N, d_k]\n"
            "O = softmax(Q @ K.T / sqrt(d_head)) @ V\n")
    assert codes_of(text) == []


def test_reshape_matching_is_symbolic_only() -> None:
    # N == d at the bindings must not make `[N, d] -> [d, N]` keep its axes.
    text = "dim N, d\ninput M: [N, d]\nY = reshape(M, [d, N])\n"
    assert codes_of(text, {"N": 4, "d": 4}) == ["SC411"]


def test_meaning_diagnostics_reach_every_format(tmp_path) -> None:
    spec = tmp_path / "wrong.attn"
    spec.write_text(HEAD + "O = softmax(Q @ K.T / sqrt(d)).T @ V\n")
    runner = CliRunner()
    result = runner.invoke(cli, ["verify", "--format", "json", str(spec)])
    diagnostics = json.loads(result.output)["files"][0]["diagnostics"]
    # a formula bug fails the run (issue 34); `--no-strict` (fail-on = "error") lets it pass
    assert [d["code"] for d in diagnostics] == ["SC402"] and result.exit_code == 1
    loose = runner.invoke(cli, ["verify", "--no-strict", str(spec)])
    assert loose.exit_code == 0 and "SC402" in loose.output
    for fmt in ("sarif", "github"):
        assert "SC402" in runner.invoke(cli, ["verify", "--format", fmt, str(spec)]).output


def test_the_pass_is_silent_where_identity_is_lost() -> None:
    # A reshape that regroups the weights' axes loses the softmax axis: no opinion.
    text = HEAD + "P = softmax(Q @ K.T / sqrt(d))\nO = reshape(P, [N * N, 1]).T @ reshape(V, [N * N, d // N])\n"
    assert "SC402" not in codes_of(text)


@pytest.mark.parametrize("text", [
    HEAD + "O = softmax(Q @ K.T @ V\n",
    HEAD + "O = softmax(Q @ K) @ V\n",
    HEAD + "O = softmax(undefined) @ V\n",
    HEAD + "P = softmax(Q @ K.T)\nP = where(causal_mask(N), P, 0)\nO = P @ V\n",
    HEAD + "O = einsum(\"ij,jk->ik\", softmax(Q @ K.T), V, V)\n",
    HEAD + "O = softmax(sqrt(d)) @ V\n",
    HEAD + "S: [N, d] = Q @ K.T\nO = softmax(S) @ V\n",
    HEAD + "s = 1 / sqrt(d)\nt = s * s\nO = softmax(Q @ K.T * t ** 0.25 / 0) @ V\n",
    # found by tools/fuzz.py: a dim minus inf as a fill, a scale past a float at the bindings
    HEAD + "O = softmax(where(causal_mask(N), Q @ K.T, d - inf)) @ V\n",
    HEAD.replace("dim N, d", "dim N, d = 1000000") + "O = softmax(Q @ K.T * d ** 60) @ V\n",
    # found by tools/fuzz.py: a reshape whose sizes are past the algebra budget (SC003)
    "dim a0, a1\nconstraint a1 < 768\ninput X: [a0, a1 ** 64 * a0]\nZ = reshape(X, [-1])\n",
])
def test_broken_specs_get_no_meaning_traceback(text: str) -> None:
    program = check_text(text)
    assert program.meaning is not None


def test_sketches_have_patterns_and_no_opinion_on_inferred_dims() -> None:
    found = only("S = Q @ K.T; P = softmax(S, axis=row); O = P @ V\n")
    assert found.query.axes == ("query", "feature") and found.scale.verdict == "none"
    multi = ("Q = split_heads(X @ W_Q, H)\nK = split_heads(X @ W_K, H)\n"
             "V = split_heads(X @ W_V, H)\nO = softmax(Q @ K.T / sqrt(d)) @ V\n")
    assert only(multi).scale.verdict == "inferred"
    assert "SC404" not in codes_of(multi)


_TALKING_HEADS = """dim B, T, heads, d
input q: [B, heads, T, d]
input k: [B, heads, T, d]
input v: [B, heads, T, d]
param pre: [heads, heads]
param post: [heads, heads]
dots: [B, heads, T, T] = einsum("b h i d, b h j d -> b h i j", q, k) / sqrt(SCALE)
mixed: [B, heads, T, T] = einsum("b h i j, h g -> b g i j", dots, pre)
attn: [B, heads, T, T] = softmax(mixed, axis=AXIS)
attn2: [B, heads, T, T] = einsum("b h i j, h g -> b g i j", attn, post)
out: [B, heads, T, d] = einsum("b h i j, b h j d -> b h i d", attn2, v)
"""


@pytest.mark.parametrize(("scale", "axis", "expected"), [
    ("d", "-1", []),              # CaiT: the heads' maps mixed after the softmax (was SC402)
    ("d", "-2", ["SC402"]),       # the softmax over the queries, read through the mix
    ("heads * d", "-1", ["SC404"]),  # the scale of all heads, read through the mix before
])
def test_talking_heads_mix_whole_maps_and_scores(scale: str, axis: str,
                                                 expected: list[str]) -> None:
    text = _TALKING_HEADS.replace("SCALE", scale).replace("AXIS", axis)
    assert [d.code for d in check_text(text, {}).diagnostics] == expected


@pytest.mark.parametrize(("change", "expected"), [
    # a term added to the weights belongs to the scores: the repair puts it inside the
    # softmax, as written (its axis kept), whichever side it was added on
    ("P + B", "`softmax(S + B, axis=-1)`"),
    ("B + P", "`softmax(S + B, axis=-1)`"),
    ("P - B", "`softmax(S - B, axis=-1)`"),
    # a mask hides scores: before the softmax, as `where(..., -inf)`
    ("where(causal_mask(N), P, 0)", "`softmax(where(mask, S, -inf))`"),
    ("P * causal_mask(N)", "`softmax(where(mask, S, -inf))`"),
    # a scale, copies, the weights subtracted from a tensor: no repair is evident
    ("P * 2", None),
    ("B - P", None),
])
def test_a_change_to_the_weights_gets_the_repair_its_form_names(change: str,
                                                                 expected: str | None) -> None:
    text = HEAD + f"input B: [N, N]\nS = Q @ K.T / sqrt(d)\nP = softmax(S, axis=-1)\nO = ({change}) @ V\n"
    [found] = [d for d in check_text(text).diagnostics if d.code == "SC406"]
    if expected is None:
        assert found.help == ()
    else:
        assert len(found.help) == 1 and found.help[0].endswith(expected), found.help


NYSTROM = """dim B, N, L, d
constraint N == 4 * L
input X: [B, N, d]
param W_Q: [d, d]
param W_K: [d, d]
Q = X @ W_Q / d ** 0.25
K = X @ W_K / d ** 0.25
Q_l = mean(reshape(Q, [B, L, 4, d]), axis=2)
K_l = mean(reshape(K, [B, L, 4, d]), axis=2)
A1 = softmax(Q @ K_l.T, axis=-1)
A2 = softmax(Q_l @ K_l.T, axis=-1)
Z = A2.T / max(sum(A2, axis=-2))
AZ = A2 @ Z
Z2 = (0.25 * Z) @ (13 * AZ - AZ @ AZ)
O = A1 @ Z2
"""


def test_landmarks_averaged_keep_their_scale_and_the_pseudo_inverse_is_algebra() -> None:
    # Nyströmformer: the landmarks are means of scaled queries and keys (each side by
    # d ** -0.25: the product by d ** -0.5), and the Newton iteration multiplies the
    # landmark kernel by its own transpose, scaled: matrix algebra, no sum of values
    assert codes_of(NYSTROM) == []


def test_a_sum_divided_by_a_count_per_row_keeps_the_scale() -> None:
    text = HEAD.replace("dim N, d", "dim N, L, d\nconstraint N == 4 * L") + \
        "input M: [L, 1]\nQ_l = sum(reshape(Q / sqrt(d), [L, 4, d]), axis=1) / (M + 1)\n" \
        "O = softmax(Q_l @ K.T, axis=-1) @ V\n"
    assert codes_of(text) == []
    unscaled = text.replace("Q / sqrt(d)", "Q")
    assert "SC405" in codes_of(unscaled)


def test_weights_times_another_softmax_still_sum_values() -> None:
    # the exemption is for weights met by their own softmax's: two softmaxes' weights
    # multiplied are still checked (here the second is summed over its queries)
    text = HEAD + "P = softmax(Q @ K.T / sqrt(d), axis=-1)\nR = softmax(K @ Q.T / sqrt(d), axis=-1)\n" \
        "O = (P @ R) @ V\n"
    assert "SC402" in codes_of(text)
def test_a_table_name_is_what_the_pattern_finds() -> None:
    # Issue 36: TABLE_NAME reads an ASCII name by hand (no compile at start-up); every name
    # built from these pieces gets the pattern's answer (re.IGNORECASE).
    import itertools
    import re

    from shapecheck.meaning import facts

    pattern = re.compile(facts.TABLE_PATTERN, re.IGNORECASE)
    pieces = ["", "_", "x", "2", "cos", "COS", "Sin", "freq", "freqs", "fReQs", "rope", "rotary",
              "ropes", "cis", "ſin", "K", "\n", "_cached", "cosine"]
    for parts in itertools.product(pieces, repeat=3):
        name = "".join(parts)
        assert bool(facts.TABLE_NAME.search(name)) == bool(pattern.search(name)), repr(name)
