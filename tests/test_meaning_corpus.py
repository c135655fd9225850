"""A realistic corpus (issue 20): the attention of thirteen public implementations
transcribed into `.attn` (tests/meaning_corpus/), each checked clean (no warning or
error; T5's unscaled scores are a note), and realistic bugs planted in them, one at a
time, each giving exactly its code.

A bug is an edit of one line of the transcription (`old` -> `new`, which must occur);
the codes are the meaning pass's. The bugs whose wrongness depends on a convention the
formula does not state (which value of an input mask means "keep", a window's
off-by-one, a relative position's sign) are not planted: the pass cannot see them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from shapecheck.api import check_text

CORPUS = Path(__file__).parent / "meaning_corpus"

BUGS: dict[str, list[tuple[str, str, str]]] = {
    "nanogpt": [
        ("* (1.0 / sqrt(hs))", "* (1.0 / sqrt(C))", "SC404"),  # scaled by n_embd
        ("bias[:, :, :T, :T] == 0, -inf", "bias[:, :, :T, :T] == 1, -inf", "SC408"),
        ("att_masked, dim=-1", "att_masked, dim=-2", "SC402"),
        ("reshape(transpose(y, [0, 2, 1, 3]), [B, T, C])", "reshape(y, [B, T, C])", "SC411"),
        ("reshape(tril(ones([L, L])), [1, 1, L, L])", "reshape(triu(ones([L, L])), [1, 1, L, L])",
         "SC408"),
        # issue 31: the negated mask kept (inverted, not transposed); the weights transposed
        ("where(bias[:, :, :T, :T] == 0, -inf, att)", "where(bias[:, :, :T, :T] == 0, att, -inf)",
         "SC408"),
        ("y = att_weights @ v", "y = transpose(att_weights, [0, 1, 3, 2]) @ v", "SC402"),
    ],
    "llama": [
        ("reshape(repeat(keys[:, :, :, None, :], G, axis=3), [B, P + T, Hkv * G, hd])",
         "reshape(repeat(keys[:, :, None, :, :], G, axis=2), [B, P + T, G * Hkv, hd])", "SC414"),
        ("mask = concat([zeros([T, P]), triu(ones([T, T]) * -inf, 1)], axis=1)",
         "mask = concat([triu(ones([T, T]) * -inf, 1), zeros([T, P])], axis=1)", "SC416"),
        ("values = concat([cache_v, xv], axis=1)",
         "values = concat([cache_v, reshape(stack([xv[..., ::2] * c - xv[..., 1::2] * s, "
         "xv[..., ::2] * s + xv[..., 1::2] * c], axis=-1), [B, T, Hkv, hd])], axis=1)", "SC413"),
        ("/ sqrt(hd)", "/ sqrt(D)", "SC404"),
    ],
    "mistral": [
        ("mask = log(triu(tril(ones([T, T])), -W))", "mask = log(tril(triu(ones([T, T])), W))",
         "SC407"),
        ("scores + mask[None, None, :, :]", "scores + mask.T[None, None, :, :]", "SC407"),
        ("* hd ** -0.5", "* H ** -0.5", "SC404"),
    ],
    "gemma2": [
        ("capped = 50.0 * tanh(scores / 50.0)\nprobs = softmax(capped + full_mask[None, None, :T, :T], dim=-1)",
         "capped = 50.0 * tanh((scores + full_mask[None, None, :T, :T]) / 50.0)\n"
         "probs = softmax(capped, dim=-1)", "SC410"),
        ("full_mask = triu(ones([L, L]) * -2.3819763e38, 1)",
         "full_mask = tril(ones([L, L]) * -2.3819763e38, -1)", "SC408"),
        ("value = repeat(xv, G, axis=2)",
         "value = reshape(repeat(xv[:, :, None], G, axis=2), [B, T, G * Hkv, hd])", "SC414"),
    ],
    "gemma3": [
        ("local = (j <= i) & (i - j < W)", "local = (j >= i) & (j - i < W)", "SC407"),
        ("probs = softmax(where(local, scores, -3.4028235e38), dim=-1)",
         "probs = softmax(where(local, -3.4028235e38, scores), dim=-1)", "SC408"),
        ("v = transpose(repeat(xv, G, axis=2), [0, 2, 1, 3])",
         "v = transpose(repeat(xv * cos_t[:, None, :] + concat([-xv[..., h:], xv[..., :h]], "
         "axis=-1) * sin_t[:, None, :], G, axis=2), [0, 2, 1, 3])", "SC413"),
    ],
    "deepseek_mla_naive": [
        ("kf = concat([k_nope, repeat(k_rot[:, :, None, :], H, axis=2)], axis=-1)",
         "kf = concat([repeat(k_rot[:, :, None, :], H, axis=2), k_nope], axis=-1)", "SC415"),
        ("* (dn + dr) ** -0.5", "* dn ** -0.5", "SC404"),
        ("scores + mask[:, None, :]", "scores + mask.T[:, None, :]", "SC408"),
    ],
    "deepseek_mla_absorb": [
        ("* (dn + dr) ** -0.5", "* (c + dr) ** 0.5", "SC404"),
        ("scores + mask[:, None, :]", "scores + mask.T[:, None, :]", "SC408"),
        ('probs = softmax(scores + mask[:, None, :], dim=-1)',
         'probs = softmax(scores + mask[:, None, :], dim=-3)', "SC402"),
    ],
    "t5": [
        # cross-attention: the mask on the query axis no longer broadcasts (a shape error)
        ("attention_mask[:, None, None, :]", "attention_mask[:, None, :, None]", "SC303"),
        ("(1.0 - attention_mask[:, None, None, :]) * -3.4028235e38",
         "(1.0 - attention_mask[:, None, None, :]) * 1.0", None),  # a bias, no longer a mask
    ],
    "t5_encoder": [
        ("attention_mask[:, None, None, :]", "attention_mask[:, None, :, None]", "SC412"),
        ("+ position_bias + extended", "+ position_bias + extended.T", "SC412"),
    ],
    "whisper": [
        ("[0, 2, 3, 1]) * scale", "[0, 2, 3, 1])", "SC404"),
        ("mask[:T, :T]", "mask[:T, :T].T", "SC408"),
    ],
    "bert": [
        ("/ sqrt(hs)", "/ sqrt(D)", "SC404"),
        ("attention_mask[:, None, None, :]", "attention_mask[:, None, :, None]", "SC412"),
        ("context = transpose(probs @ v, [0, 2, 1, 3])", "context = probs @ v", "SC411"),
    ],
    "vit": [
        ("reshape(transpose(reshape(img, [B, C, h, P, w, P]), [0, 2, 4, 3, 5, 1]), [B, h * w, P * P * C])",
         "reshape(reshape(img, [B, C, h, P, w, P]), [B, h * w, P * P * C])", "SC411"),
        ("attn = softmax(dots, dim=-1)", "attn = softmax(dots, dim=-2)", "SC402"),
        ("* dh ** -0.5", "* D ** -0.5", "SC404"),
    ],
    "performer": [
        ("num = tril(A) @ V", "num = triu(A) @ V", "SC407"),
    ],
    "palm": [
        ("causal = triu(ones([N, N]), 1) == 1", "causal = tril(ones([N, N]), -1) == 1", "SC408"),
        ("v = x @ Wv", "v = (x @ Wv) * cos_t + concat([-(x @ Wv)[..., h:], (x @ Wv)[..., :h]], "
         "axis=-1) * sin_t", None),  # two different expressions: not seen as one rotated value
        ('o = einsum("bhij,bjd->bhid", attn, v)', 'o = einsum("bhij,bjd->bhid", attn, v * cos_t '
         '+ concat([-v[..., h:], v[..., :h]], axis=-1) * sin_t)', "SC413"),
    ],
    "flash_ref": [
        ("where(kpos > qpos + (Tk - Tq), -inf, scores)", "where(kpos < qpos + (Tk - Tq), -inf, scores)",
         "SC408"),
        ("kr = repeat(k, G, axis=2)", "kr = reshape(repeat(k[:, :, None], G, axis=2), [B, Tk, G * Hkv, d])",
         "SC414"),
        ("q / sqrt(d)", "q / sqrt(Tk)", "SC404"),
    ],
}


def warnings(text: str) -> list[str]:
    return [d.code for d in check_text(text).diagnostics if d.severity.value != "note"]


def source(name: str) -> str:
    return (CORPUS / f"{name}.attn").read_text(encoding="utf-8")


def test_the_corpus_is_complete() -> None:
    assert sorted(p.stem for p in CORPUS.glob("*.attn")) == sorted(BUGS)


@pytest.mark.parametrize("name", sorted(BUGS))
def test_the_transcription_is_clean(name: str) -> None:
    assert warnings(source(name)) == []


@pytest.mark.parametrize("name,number", [(n, i) for n, bugs in sorted(BUGS.items())
                                         for i in range(len(bugs))])
def test_each_planted_bug_gives_its_code(name: str, number: int) -> None:
    old, new, code = BUGS[name][number]
    text = source(name)
    assert old in text, old
    planted = text.replace(old, new, 1)
    assert warnings(planted) == ([code] if code else []), planted


@pytest.mark.parametrize("name,number", [(n, i) for n, bugs in sorted(BUGS.items())
                                         for i, bug in enumerate(bugs) if bug[2]])
def test_each_planted_bug_is_flagged_at_a_line_it_wrote(name: str, number: int) -> None:
    """Issue 31: the warning, or one of its notes, stands at a line the edit wrote (where
    the fix goes), not only somewhere in the file."""
    old, new, _code = BUGS[name][number]
    text = source(name)
    first = text[:text.index(old)].count("\n") + 1
    lines = set(range(first, first + new.count("\n") + 1))
    found = [{d.span.line} | {n.span.line for n in d.notes if n.span}
             for d in check_text(text.replace(old, new, 1)).diagnostics
             if d.severity.value != "note"]
    assert any(at & lines for at in found), (found, lines)
