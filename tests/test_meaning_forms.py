"""Generated specs for the forms real attention code writes (issue 20): every form of
every family, correct and with each single mistake, in several layouts. A correct
variant gives no diagnostic at all; each mistake gives exactly its code, once.

Families: causal masks (where, additive float triangles, `log` of a triangle, a named
additive mask, a window of a max-size buffer, a soft-cap), key-padding masks, the whole
scale, rotary positions, grouped heads, parts of Q and K, causal linear attention and
views. Layouts: one head, heads first, batch and heads; scores as `@`, `transpose` or
`einsum`.
"""

from __future__ import annotations

import pytest

from shapecheck.api import check_text

LAYOUTS = {
    "single": ("dim N, d, L\nconstraint N <= L\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n", ""),
    "heads": ("dim N, d, H, L\nconstraint N <= L\ninput Q: [H, N, d]\ninput K: [H, N, d]\n"
              "input V: [H, N, d]\n", "h"),
    "batched": ("dim B, N, d, H, L\nconstraint N <= L\ninput Q: [B, H, N, d]\n"
                "input K: [B, H, N, d]\ninput V: [B, H, N, d]\n", "bh"),
}


def scores(form: str, batch: str) -> str:
    return {
        "matmul": "Q @ K.T / sqrt(d)",
        "transpose": "Q @ transpose(K) * d ** -0.5",
        "einsum": f'einsum("{batch}qd,{batch}kd->{batch}qk", Q, K) / sqrt(d)',
    }[form]


SCORE_FORMS = ("matmul", "transpose", "einsum")

# A causal mask applied to `S` (rows: queries), with `bias = tril(ones([L, L]))` declared;
# each form: the correct text and its single mistakes with their codes.
MASKS: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "where": ("where(causal_mask(N), S, -inf)", {
        "transposed": ("where(causal_mask(N).T, S, -inf)", "SC407"),
        "inverted": ("where(causal_mask(N), -inf, S)", "SC408"),
        "fill": ("where(causal_mask(N), S, 0)", "SC410"),
    }),
    "one_minus_tril": ("S + (1 - tril(ones([N, N]))) * -1e9", {
        "upper": ("S + (1 - triu(ones([N, N]))) * -1e9", "SC408"),
        "no_complement": ("S + tril(ones([N, N])) * -1e9", "SC408"),
    }),
    "one_minus_strict": ("S + (1 - tril(ones([N, N]), 0)) * -10000.0", {
        "transposed": ("S + (1 - tril(ones([N, N])).T) * -10000.0", "SC408"),
    }),
    "triu_inf": ("S + triu(ones([N, N]) * -inf, 1)", {
        "lower": ("S + tril(ones([N, N]) * -inf, -1)", "SC408"),
        "transposed": ("S + triu(ones([N, N]) * -inf, 1).T", "SC408"),
    }),
    "log": ("S + log(tril(ones([N, N])))", {
        "upper": ("S + log(triu(ones([N, N])))", "SC407"),
        "transposed": ("S + log(tril(ones([N, N])).T)", "SC407"),
    }),
    "named_additive": ("S + where(tril(ones([N, N])) == 1, 0.0, -inf)", {
        "negated": ("S + where(tril(ones([N, N])) == 0, 0.0, -inf)", "SC408"),  # the negation keeps the future (issue 31)
        "transposed": ("S + where(tril(ones([N, N])).T == 1, 0.0, -inf)", "SC407"),
    }),
    "window": ("where(bias[:N, :N] == 0, -inf, S)", {
        "polarity": ("where(bias[:N, :N] == 1, -inf, S)", "SC408"),
        "kept_transposed": ("where(bias[:N, :N].T == 1, S, -inf)", "SC407"),
    }),
    "window_additive": ("S + (1 - bias[:N, :N]) * -1e9", {
        "no_complement": ("S + bias[:N, :N] * -1e9", "SC408"),
    }),
    "soft_cap": ("where(causal_mask(N), 30.0 * tanh(S / 30.0), -inf)", {
        "cap_after_mask": ("30.0 * tanh(where(causal_mask(N), S, -inf) / 30.0)", "SC410"),
    }),
}


def mask_spec(layout: str, score_form: str, masked: str) -> str:
    declarations, batch = LAYOUTS[layout]
    return (declarations + "bias = tril(ones([L, L]))\n"
            f"S = {scores(score_form, batch)}\nP = softmax({masked}, axis=-1)\n"
            f"output O = P @ V + 0 * bias[0, 0]\n")


def diagnostics(text: str) -> list[str]:
    return [d.code for d in check_text(text).diagnostics]


MASK_CORRECT = [(lay, form, name) for lay in LAYOUTS for form in SCORE_FORMS for name in MASKS]
MASK_WRONG = [(lay, form, name, mistake) for lay in LAYOUTS for form in SCORE_FORMS
              for name, (_, mistakes) in MASKS.items() for mistake in mistakes]


@pytest.mark.parametrize("layout,form,name", MASK_CORRECT)
def test_causal_mask_forms_are_clean(layout: str, form: str, name: str) -> None:
    text = mask_spec(layout, form, MASKS[name][0])
    assert diagnostics(text) == [], text


@pytest.mark.parametrize("layout,form,name,mistake", MASK_WRONG)
def test_each_causal_mask_mistake_gives_its_code(layout: str, form: str, name: str,
                                                 mistake: str) -> None:
    wrong, code = MASKS[name][1][mistake]
    text = mask_spec(layout, form, wrong)
    assert diagnostics(text) == [code], text


# --- key padding -----------------------------------------------------------------------

PAD_LAYOUTS = {
    "batched": ("dim B, H, N, M, d\ninput Q: [B, H, N, d]\ninput K: [B, H, M, d]\n"
                "input V: [B, H, M, d]\ninput keep: bool[B, M]\ninput am: [B, M]\n"
                "input keep_q: bool[B, N]\ninput am_q: [B, N]\n", "bh"),
    "square": ("dim B, H, N, d\ninput Q: [B, H, N, d]\ninput K: [B, H, N, d]\n"
               "input V: [B, H, N, d]\ninput keep: bool[B, N]\ninput am: [B, N]\n"
               "input keep_q: bool[B, N]\ninput am_q: [B, N]\n", "bh"),
}
PADDING = {
    "where": ("where(keep[:, None, None, :], S, -inf)", "where(keep_q[:, None, :, None], S, -inf)"),
    "additive": ("S + (1 - am[:, None, None, :]) * -1e9", "S + (1 - am_q[:, None, :, None]) * -1e9"),
    "bert": ("S + (1.0 - reshape(am, [B, 1, 1, -1])) * -10000.0",
             "S + (1.0 - reshape(am_q, [B, 1, -1, 1])) * -10000.0"),
    "fill_keep": ("where(keep[:, None, None, :] == false, -1e9, S)",
                  "where(keep_q[:, None, :, None] == false, -1e9, S)"),
}


def pad_spec(layout: str, form: str, masked: str) -> str:
    declarations, batch = PAD_LAYOUTS[layout]
    return (declarations + f"S = {scores(form, batch)}\nP = softmax({masked}, axis=-1)\n"
            "output O = P @ V\noutput U1 = where(keep, am, 0)\noutput U2 = where(keep_q, am_q, 0)\n")


@pytest.mark.parametrize("layout", PAD_LAYOUTS)
@pytest.mark.parametrize("form", SCORE_FORMS)
@pytest.mark.parametrize("name", PADDING)
def test_key_padding_masks(layout: str, form: str, name: str) -> None:
    right, wrong = PADDING[name]
    assert diagnostics(pad_spec(layout, form, right)) == [], pad_spec(layout, form, right)
    assert diagnostics(pad_spec(layout, form, wrong)) == ["SC412"], pad_spec(layout, form, wrong)


# --- the whole scale --------------------------------------------------------------------

SCALES = {
    "product": ("Q", "K", " / sqrt(d)"),
    "on_q": ("(Q / sqrt(d))", "K", ""),
    "both_quarter": ("(Q * d ** -0.25)", "(K * d ** -0.25)", ""),
    "named_constant": ("(Q * qs ** -0.5)", "K", ""),  # Gemma's query_pre_attn_scalar
    # T5's `self.scaling = 1.0` (its scale folded into the initialisation): a constant
    # factor is a model's choice, also at 1 (so a decode step's `q.shape[-2] ** -0.5`,
    # traced at one query as `* 1`, is not flagged: docs/bugs.md)
    "times_one": ("Q", "K", " * 1"),
}
SCALE_MISTAKES = {
    "one_quarter_q": ("(Q * d ** -0.25)", "K", "", "SC404"),
    "one_quarter_k": ("Q", "(K * d ** -0.25)", "", "SC404"),
    "sequence": ("Q", "K", " / sqrt(N)", "SC404"),
    "both_and_product": ("(Q * d ** -0.25)", "(K * d ** -0.25)", " / sqrt(d)", "SC404"),
}


def scale_spec(layout: str, q: str, k: str, after: str) -> str:
    declarations, batch = LAYOUTS[layout]
    return (declarations.replace("dim ", "dim qs, ", 1) +
            f"S = {q} @ {k}.T{after}\noutput O = softmax(S) @ V + 0 * (qs + L)\n")


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", SCALES)
def test_scales_are_clean(layout: str, name: str) -> None:
    text = scale_spec(layout, *SCALES[name])
    assert diagnostics(text) == [], text


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", SCALE_MISTAKES)
def test_scale_mistakes(layout: str, name: str) -> None:
    *parts, code = SCALE_MISTAKES[name]
    text = scale_spec(layout, *parts)
    assert diagnostics(text) == [code], text


HALVES = "dim N, h\ndim d = 2 * h\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"


def test_a_scale_by_the_width_squared_through_its_definition_is_flagged() -> None:
    # Llama's `scaling ** 2`, traced with the rotary half as a dim: `4 * h * h` is d * d
    text = HALVES + "S = Q @ K.T / sqrt(4 * h * h)\noutput O = softmax(S) @ V\n"
    found = check_text(text).diagnostics
    assert [d.code for d in found] == ["SC404"], text
    assert "it divides by d, not by sqrt(d)" in found[0].message
    assert diagnostics(HALVES + "S = Q @ K.T / sqrt(2 * h)\noutput O = softmax(S) @ V\n") == []


# --- rotary positions -------------------------------------------------------------------

ROT_LAYOUTS = {
    "single": ("dim N, h\ndim d = 2 * h\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n",
               "[N, d]"),
    "heads": ("dim N, h, H\ndim d = 2 * h\ninput Q: [H, N, d]\ninput K: [H, N, d]\n"
              "input V: [H, N, d]\n", "[H, N, d]"),
    "batched": ("dim B, N, h, H\ndim d = 2 * h\ninput Q: [B, H, N, d]\ninput K: [B, H, N, d]\n"
                "input V: [B, H, N, d]\n", "[B, H, N, d]"),
}
TABLES = ("input cos_t: [N, d]\ninput sin_t: [N, d]\n"
          "theta = 10000 ** (-arange(h) / h)\nangle = arange(N)[:, None] * theta\n"
          "c = cos(angle)\ns = sin(angle)\n")


def rotate(form: str, x: str, shape: str) -> str:
    if form == "rotate_half":
        return f"{x} * cos_t + concat([-{x}[..., h:], {x}[..., :h]], axis=-1) * sin_t"
    if form == "halves":
        return (f"concat([{x}[..., :h] * c - {x}[..., h:] * s, "
                f"{x}[..., h:] * c + {x}[..., :h] * s], axis=-1)")
    return (f"reshape(stack([{x}[..., ::2] * c - {x}[..., 1::2] * s, "
            f"{x}[..., 1::2] * c + {x}[..., ::2] * s], axis=-1), {shape})")


def rotary_spec(layout: str, form: str, rotated: str) -> str:
    declarations, shape = ROT_LAYOUTS[layout]
    lines = [declarations + TABLES]
    for name in "QKV":
        lines.append(f"{name.lower()} = {rotate(form, name, shape) if name in rotated else name}\n")
    lines.append("output O = softmax(q @ k.T / sqrt(d)) @ v + 0 * (cos_t + sin_t)[0, 0] "
                 "+ 0 * (c + s)[0, 0]\n")
    return "".join(lines)


@pytest.mark.parametrize("layout", ROT_LAYOUTS)
@pytest.mark.parametrize("form", ("rotate_half", "halves", "interleaved"))
def test_rotary_positions(layout: str, form: str) -> None:
    assert diagnostics(rotary_spec(layout, form, "QK")) == [], rotary_spec(layout, form, "QK")
    for rotated in ("QKV", "V", "QV"):
        text = rotary_spec(layout, form, rotated)
        assert diagnostics(text) == ["SC413"], text


# --- grouped heads ----------------------------------------------------------------------

GQA = ("dim B, N, d, Hkv, G\ninput Q: [B, Hkv * G, N, d]\ninput K: [B, Hkv, N, d]\n"
       "input V: [B, Hkv, N, d]\n")
EXPANDS = {
    "repeat": "repeat({x}, G, axis=1)",
    "repeat_kv": "reshape(repeat({x}[:, :, None], G, axis=2), [B, Hkv * G, N, d])",
    "expand": "reshape({x}[:, :, None] * ones([B, Hkv, G, N, d]), [B, Hkv * G, N, d])",
}
TILES = {
    "tiled_copies": "reshape(repeat({x}[:, None], G, axis=1), [B, G * Hkv, N, d])",
    "tiled_expand": "reshape({x}[:, None] * ones([B, G, Hkv, N, d]), [B, G * Hkv, N, d])",
}


def gqa_spec(k: str, v: str, score_form: str) -> str:
    product = {"matmul": "Q @ Kx.T", "einsum": 'einsum("bhqd,bhkd->bhqk", Q, Kx)'}[score_form]
    return GQA + f"Kx = {k.format(x='K')}\nVx = {v.format(x='V')}\n" \
        f"output O = softmax({product} / sqrt(d)) @ Vx\n"


@pytest.mark.parametrize("score_form", ("matmul", "einsum"))
@pytest.mark.parametrize("k", EXPANDS)
@pytest.mark.parametrize("v", EXPANDS)
def test_grouped_heads_repeated(score_form: str, k: str, v: str) -> None:
    text = gqa_spec(EXPANDS[k], EXPANDS[v], score_form)
    assert diagnostics(text) == [], text


@pytest.mark.parametrize("score_form", ("matmul", "einsum"))
@pytest.mark.parametrize("side", ("k", "v"))
@pytest.mark.parametrize("tile", TILES)
def test_grouped_heads_tiled(score_form: str, side: str, tile: str) -> None:
    k, v = (TILES[tile], EXPANDS["repeat"]) if side == "k" else (EXPANDS["repeat"], TILES[tile])
    text = gqa_spec(k, v, score_form)
    assert diagnostics(text) == ["SC414"], text


@pytest.mark.parametrize("score_form", ("matmul", "einsum"))
@pytest.mark.parametrize("k", TILES)
@pytest.mark.parametrize("v", TILES)
def test_grouped_heads_tiled_alike_are_a_relabelling(score_form: str, k: str, v: str) -> None:
    # K and V both tiled (x-transformers' `repeat(t, 'b kvh n d -> b (r kvh) n d')`):
    # query head i meets key and value head i mod Hkv; only trained weights say which
    # grouping is meant (docs/language.md, SC414)
    text = gqa_spec(TILES[k], TILES[v], score_form)
    assert diagnostics(text) == [], text


def test_grouped_heads_concatenated_with_itself() -> None:
    text = ("dim B, N, d, Hkv\ninput Q: [B, 2 * Hkv, N, d]\ninput K: [B, Hkv, N, d]\n"
            "input V: [B, Hkv, N, d]\nKx = concat([K, K], axis=1)\n"
            "output O = softmax(Q @ Kx.T / sqrt(d)) @ repeat(V, 2, axis=1)\n")
    assert diagnostics(text) == ["SC414"]


# --- parts of Q and K -------------------------------------------------------------------

PARTS = ("dim N, a, b, d\ninput qa: [N, a]\ninput qb: [N, b]\ninput ka: [N, a]\n"
         "input kb: [N, b]\ninput V: [N, d]\n")


@pytest.mark.parametrize("product", ("q @ k.T", 'einsum("id,jd->ij", q, k)', "(k @ q.T).T"))
@pytest.mark.parametrize("q_parts,k_parts,code", [
    ("qa, qb", "ka, kb", None), ("qb, qa", "kb, ka", None),
    ("qa, qb", "kb, ka", "SC415"), ("qb, qa", "ka, kb", "SC415")])
def test_parts_line_up(product: str, q_parts: str, k_parts: str, code: str | None) -> None:
    text = PARTS + f"q = concat([{q_parts}], axis=-1)\nk = concat([{k_parts}], axis=-1)\n" \
        f"output O = softmax({product} / sqrt(a + b)) @ V\n"
    assert diagnostics(text) == ([code] if code else []), text


# --- causal linear attention --------------------------------------------------------------

LINEAR = {
    "tril": ("tril(S) @ V", "triu(S) @ V"),
    "times_ones": ("(S * tril(ones([N, N]))) @ V", "(S * triu(ones([N, N]))) @ V"),
    "ones_times": ("(tril(ones([N, N])) * S) @ V", "(tril(ones([N, N])).T * S) @ V"),
    "keys_first": ("triu(St).T @ V", "tril(St).T @ V"),
    "einsum": ('einsum("ij,jd->id", tril(S), V)', 'einsum("ij,jd->id", triu(S), V)'),
}


@pytest.mark.parametrize("name", LINEAR)
def test_causal_linear_attention(name: str) -> None:
    head = ("dim N, d\ninput Q: [N, d]\ninput K: [N, d]\ninput V: [N, d]\n"
            "S = elu(Q) @ elu(K).T\nSt = elu(K) @ elu(Q).T\noutput U = St\n")
    right, wrong = LINEAR[name]
    assert diagnostics(head + f"output O = {right}\n") == []
    assert diagnostics(head + f"output O = {wrong}\n") == ["SC407"]


# --- views --------------------------------------------------------------------------------

VIEWS = {
    "patchify": ("dim B, C, h, w, P\ninput img: [B, C, h * P, w * P]\n"
                 "x = reshape(img, [B, C, h, P, w, P])\n",
                 "reshape(transpose(x, [0, 2, 4, 3, 5, 1]), [B, h * w, P * P * C])",
                 ["reshape(x, [B, h * w, P * P * C])",
                  "reshape(transpose(x, [0, 2, 3, 4, 5, 1]), [B, h * w, P * P * C])"]),
    "merge_heads": ("dim B, H, N, d\ninput x: [B, H, N, d]\n",
                    "reshape(transpose(x, [0, 2, 1, 3]), [B, N, H * d])",
                    ["reshape(x, [B, N, H * d])"]),
    "merge_heads_3d": ("dim H, N, d\ninput x: [H, N, d]\n",
                       "reshape(transpose(x, [1, 0, 2]), [N, H * d])", ["reshape(x, [N, H * d])"]),
}


@pytest.mark.parametrize("name", VIEWS)
def test_views(name: str) -> None:
    head, right, wrongs = VIEWS[name]
    assert diagnostics(head + f"output y = {right}\n") == []
    for wrong in wrongs:
        assert diagnostics(head + f"output y = {wrong}\n") == ["SC411"], wrong


# --- KV-cache masks assembled from parts ----------------------------------------------------

CACHE = ("dim B, N, M, d\ninput Q: [B, N, d]\ninput K: [B, M + N, d]\ninput V: [B, M + N, d]\n"
         "S = Q @ K.T / sqrt(d)\n")
CACHE_MASKS = {
    "bool": ("where(concat([ones([N, M]), tril(ones([N, N]))], axis=-1) == 1, S, -inf)",
             "where(concat([tril(ones([N, N])), ones([N, M])], axis=-1) == 1, S, -inf)"),
    "additive": ("S + concat([zeros([N, M]), triu(ones([N, N]) * -inf, 1)], axis=1)",
                 "S + concat([triu(ones([N, N]) * -inf, 1), zeros([N, M])], axis=1)"),
    "complement": ("S + (1 - concat([ones([N, M]), tril(ones([N, N]))], axis=-1)) * -1e9",
                   "S + (1 - concat([tril(ones([N, N])), ones([N, M])], axis=-1)) * -1e9"),
}


@pytest.mark.parametrize("name", CACHE_MASKS)
def test_cache_masks_from_parts(name: str) -> None:
    right, wrong = CACHE_MASKS[name]
    assert diagnostics(CACHE + f"output O = softmax({right}) @ V\n") == []
    assert diagnostics(CACHE + f"output O = softmax({wrong}) @ V\n") == ["SC416"]


# --- the registry's fixes, applied to its examples ------------------------------------------

from shapecheck.messages import codes  # noqa: E402

# code -> (text of the example, what its `fix` says to write instead)
FIXES = {
    "SC412": ("keep[:, None, :, None]", "keep[:, None, None, :]"),
    "SC413": ("@ Vr", "@ V"),
    "SC414": ("Kt = reshape(repeat(K[:, None], G, axis=1), [B, G * Hkv, N, d])",
              "Kt = repeat(K, G, axis=1)"),
    "SC415": ("K = concat([kb, ka], axis=-1)", "K = concat([ka, kb], axis=-1)"),
    "SC416": ("concat([tril(ones([N, N])), ones([N, M])], axis=-1)",
              "concat([ones([N, M]), tril(ones([N, N]))], axis=-1)"),
}


@pytest.mark.parametrize("code", sorted(FIXES))
def test_the_documented_fix_removes_the_warning(code: str) -> None:
    example = codes.REGISTRY[code].example
    old, new = FIXES[code]
    assert old in example
    fixed = "\n".join(line for line in example.replace(old, new).splitlines()
                      if not line.startswith("# "))
    assert [d.code for d in check_text(example).diagnostics if d.code != "SC401"] == [code]
    assert [d.code for d in check_text(fixed).diagnostics if d.code != "SC401"] == []


@pytest.mark.parametrize("code", ("SC415", "SC416"))
def test_reordering_parts_is_a_verified_fix(code: str) -> None:
    from shapecheck.messages.fixes import apply_edits

    example = codes.REGISTRY[code].example
    [diagnostic] = [d for d in check_text(example).diagnostics if d.code == code]
    [fix] = diagnostic.fixes
    assert fix.help in diagnostic.help
    fixed = apply_edits(example, fix.edits)
    assert [d.code for d in check_text(fixed).diagnostics] == []


# --- PyTorch spellings (issue 21, landed): they are the same builtins, so the same checks ----

SPELLED = ("dim B, T, H, hs, L\nconstraint T <= L\ninput q: [B, H, T, hs]\ninput k: [B, H, T, hs]\n"
           "input v: [B, H, T, hs]\nbias = tril(ones([L, L]))\n"
           "att = q @ k.transpose(-2, -1) / math.sqrt(hs)\n")


@pytest.mark.parametrize("mask,code", [
    ("att.masked_fill(bias[:T, :T] == 0, float('-inf'))", None),
    ("att.masked_fill(bias[:T, :T] == 1, float('-inf'))", "SC408"),
    ("att.masked_fill(bias[:T, :T].T == 0, float('-inf'))", "SC408"),
    ("att + (1 - bias[:T, :T]) * -1e9", None),
])
def test_pytorch_spellings(mask: str, code: str | None) -> None:
    text = SPELLED + f"y = F.softmax({mask}, dim=-1) @ v\n"
    assert diagnostics(text) == ([code] if code else []), text
