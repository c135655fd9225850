"""Generated attention specs: every correct combination of layout, score form, scale,
mask and output form is clean, and each one mistake put into one of them gives exactly
its code (issue 8 §3: "write many more wrong and right variants").

A variant is built from parts: the layout declares Q, K, V (single head, heads first,
batch and heads, tokens then heads); a *score form* writes the Q·K product in some
layout (rows = queries or rows = keys), with the softmax axis and the output form that
go with that layout; a *scale* form; a *mask*. Mistakes are single edits of one part.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from shapecheck.api import check_text

# layout: declarations, batch letters for einsum, rank
LAYOUTS = {
    "single": ("dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n", ""),
    "heads": ("dim N, d, H\ninput Q: [H, N, d]\ninput K: [H, N, d]\ninput V: [H, N, d]\n", "h"),
    "batched": ("dim B, N, d, H\ninput Q: [B, H, N, d]\ninput K: [B, H, N, d]\n"
                "input V: [B, H, N, d]\n", "bh"),
}


@dataclass(frozen=True)
class Form:
    """Scores in one layout; `{s}` is where the scale goes on the product, `{q}`/`{k}` the
    factors (so a scale can sit on them), and the softmax axis and output that fit."""

    scores: str
    axis: str
    output: str


def forms(batch: str) -> dict[str, Form]:
    b = batch
    perm = {"": "[1, 0]", "h": "[0, 2, 1]", "bh": "[0, 1, 3, 2]"}[b]
    return {
        "QKt": Form("{q} @ {k}.T{s}", "row", "P @ V"),
        "QKt_transpose": Form("{q} @ transpose({k}){s}", "-1", "P @ V"),
        "QKt_perm": Form("{q} @ transpose({k}, " + perm + "){s}", "row", "P @ V"),
        "KQt_T": Form("({k} @ {q}.T).T{s}", "row", "P @ V"),
        "KQt_col": Form("{k} @ {q}.T{s}", "col", "P.T @ V"),
        "KQt_col_einsum": Form("{k} @ {q}.T{s}", "col",
                               f'einsum("{b}kq,{b}kd->{b}qd", P, V)'),
        "einsum": Form(f'einsum("{b}qd,{b}kd->{b}qk", {{q}}, {{k}}){{s}}', "row",
                       f'einsum("{b}qk,{b}kd->{b}qd", P, V)'),
        "einsum_kq": Form(f'einsum("{b}qd,{b}kd->{b}kq", {{q}}, {{k}}){{s}}', "col",
                          f'einsum("{b}kq,{b}kd->{b}qd", P, V)'),
        "einsum_matmul": Form(f'einsum("{b}id,{b}jd->{b}ij", {{q}}, {{k}}){{s}}', "-1", "P @ V"),
        "transposed_out": Form("{q} @ {k}.T{s}", "row", "(V.T @ P.T).T"),
    }


# scale: (on the product, on q, on k)
SCALES = {
    "div_sqrt": (" / sqrt(d)", "Q", "K"),
    "mul_pow": (" * d ** -0.5", "Q", "K"),
    "mul_inverse": (" * (1 / sqrt(d))", "Q", "K"),
    "div_pow": (" / d ** 0.5", "Q", "K"),
    "on_q": ("", "(Q / sqrt(d))", "K"),
    "on_both": ("", "(Q * d ** -0.25)", "(K * d ** -0.25)"),
    "constant": (" * 0.125", "Q", "K"),
}

MASKS = {
    "none": "S",
    "causal": "where(causal_mask(N), S, -inf)",
    "additive": "S + where(causal_mask(N), 0, -inf)",
    "finite": "where(causal_mask(N), S, -1e9)",
}


def spec(layout: str, form_name: str, scale: str, mask: str, *, mistake: str | None = None) -> str:
    declarations, batch = LAYOUTS[layout]
    form = forms(batch)[form_name]
    on_product, q, k = SCALES[scale]
    axis = form.axis
    output = form.output
    masked = MASKS[mask]
    rows_are_keys = form_name.startswith("KQt_col") or form_name == "einsum_kq"
    if rows_are_keys and mask != "none":
        masked = masked.replace("causal_mask(N)", "causal_mask(N).T")  # the layout's own
    if mistake == "scale_N":
        on_product, q, k = " / sqrt(N)", "Q", "K"
    elif mistake == "scale_times":
        on_product, q, k = " * sqrt(d)", "Q", "K"
    elif mistake == "scale_twice":
        on_product, q = " / sqrt(d)", "(Q / sqrt(d))"
    elif mistake == "axis":
        axis = {"row": "col", "-1": "-2", "col": "row"}[axis]
    elif mistake == "mask_transposed":
        masked = MASKS["causal"].replace("causal_mask(N)", "causal_mask(N).T" if not rows_are_keys
                                         else "causal_mask(N)")
    elif mistake == "mask_inverted":
        masked = "where(causal_mask(N), -inf, S)"
        if rows_are_keys:
            masked = masked.replace("causal_mask(N)", "causal_mask(N).T")
    elif mistake == "mask_zero":
        masked = MASKS["causal"].replace("-inf", "0")
        if rows_are_keys:
            masked = masked.replace("causal_mask(N)", "causal_mask(N).T")
    scores = form.scores.format(q=q, k=k, s=on_product)
    weights = f"P = softmax({masked}, axis={axis})\n"
    if mistake == "mask_after":
        cond = "causal_mask(N).T" if rows_are_keys else "causal_mask(N)"
        weights += f"P = where({cond}, P, 0)\n".replace("P = where", "Pm = where")
        output = output.replace("P", "Pm")
    return declarations + f"S = {scores}\n" + weights + f"O = {output}\noutput O\n"


def codes(text: str) -> list[str]:
    program = check_text(text)
    return sorted(d.code for d in program.diagnostics)


ALL = list(itertools.product(LAYOUTS, forms("").keys(), SCALES, MASKS))


@pytest.mark.parametrize("layout, form, scale, mask", ALL)
def test_correct_variants_are_clean(layout: str, form: str, scale: str, mask: str) -> None:
    text = spec(layout, form, scale, mask)
    found = codes(text)
    assert found == [], text
    program = check_text(text)
    (attention,) = program.meaning.patterns
    assert attention.axis_ok is True
    assert attention.scale.verdict == ("constant" if scale == "constant" else "ok"), text
    if mask != "none":
        assert attention.mask_ok is True, text


MISTAKES = {
    "scale_N": "SC404",
    "scale_times": "SC404",
    "scale_twice": "SC404",
    "axis": "SC402",
    "mask_transposed": "SC407",
    "mask_inverted": "SC408",
    "mask_zero": "SC410",
    "mask_after": "SC406",
}

WRONG = [(layout, form, mistake) for layout, form, mistake in
         itertools.product(LAYOUTS, forms("").keys(), MISTAKES)]


@pytest.mark.parametrize("layout, form, mistake", WRONG)
def test_each_mistake_gives_its_code(layout: str, form: str, mistake: str) -> None:
    text = spec(layout, form, "div_sqrt", "none", mistake=mistake)
    assert codes(text) == [MISTAKES[mistake]], text


def test_the_corpus_is_large() -> None:
    assert len(ALL) + len(WRONG) >= 1000
