"""Masks and score changes as functions of positions (issue 32, docs/language.md §10).

The attention-gym masks and score changes (causal, sliding window, prefix-LM, document,
dilated sliding window; soft-capping, ALiBi, relative bias), written in the language, are
proved or refuted; so is a one-token change of each. Each claim's outcome is read from the
mask model (`Program.masks.findings`), and the diagnostics the user sees are checked beside.
"""

from __future__ import annotations

import numpy as np
import pytest

from shapecheck.api import check_text
from shapecheck.backend.compiled import compile_spec

HEADER = """dim N, M, W, P, D, d, H
constraint N <= M
input doc: int[M]
input pad: bool[M]
input slopes: [H]
"""


def outcome(body: str, claim: str, header: str = HEADER, params: str = "q, k",
            lengths: str = "(N, M)") -> str:
    """The status of ``claim`` about `def f(params) = body`, claimed at the given lengths."""
    program = check_text(f"{header}def f({params}) = {body}\nassert f{lengths}: {claim}\n")
    assert not any(d.is_error for d in program.diagnostics), program.diagnostics
    findings = [f for f in program.masks.findings if f.function == "f"]
    assert findings, program.diagnostics
    statuses = {f.outcome.status for f in findings}
    # A claim of several checks (causal: no later key, its own key) fails at the first.
    for status in ("refuted", "undetermined"):
        if status in statuses:
            return status
    return "proved"


def codes_of(text: str) -> list[str]:
    return [d.code for d in check_text(text).diagnostics]


# (body, claim, outcome): attention-gym's definitions, then their one-token mutants.
GYM = [
    # causal: `q_idx >= kv_idx`, bottom right when the keys are longer (a KV cache)
    ("k <= q + M - N", "causal", "proved"),
    ("k <= q + M - N", "every_row", "proved"),
    ("k < q + M - N", "causal", "refuted"),        # the diagonal hidden
    ("k < q + M - N", "every_row", "refuted"),     # the first query sees nothing
    ("k <= q + M - N + 1", "causal", "refuted"),   # one key of the future
    ("k >= q + M - N", "causal", "refuted"),       # the other triangle
    ("k <= q", "causal", "refuted"),               # top left: the decode step misaligned
    ("k <= q + M - N - 1", "causal", "refuted"),   # the cache off by one
    # sliding window: `causal & (q_idx - kv_idx <= W)` (attention-gym's, inclusive)
    ("(k <= q + M - N) & (q + M - N - k <= W)", "window(W + 1)", "proved"),
    ("(k <= q + M - N) & (q + M - N - k <= W)", "window(W)", "refuted"),
    ("(k <= q + M - N) & (q + M - N - k < W)", "window(W)", "proved"),
    ("(k <= q + M - N) & (q + M - N - k < W + 1)", "window(W)", "refuted"),
    ("(k <= q + M - N) & (q + M - N - k < W - 1)", "window(W)", "refuted"),
    ("(k <= q + M - N) & (q + M - N - k < W)", "causal", "proved"),
    ("(k <= q + M - N) & (q + M - N - k < W)", "every_row", "proved"),
    ("(k < q + M - N) & (q + M - N - k < W)", "every_row", "refuted"),
    # prefix-LM: `(kv_idx < prefix) | causal`
    ("(k < P) | (k <= q + M - N)", "every_row", "proved"),
    ("(k < P) | (k <= q + M - N)", "causal", "refuted"),  # the prefix is bidirectional
    ("(k < P) | (k <= q + M - N)", "same_as(g)", "proved"),
    ("(k <= P) | (k <= q + M - N)", "same_as(g)", "refuted"),
    ("(k < P) & (k <= q + M - N)", "same_as(g)", "refuted"),
    # document: `document_id[q_idx] == document_id[kv_idx]` and causal
    ("(doc[q + M - N] == doc[k]) & (k <= q + M - N)", "causal", "proved"),
    ("(doc[q + M - N] == doc[k]) & (k <= q + M - N)", "every_row", "proved"),
    ("(doc[q + M - N] != doc[k]) & (k <= q + M - N)", "every_row", "refuted"),
    ("(doc[q + M - N] == doc[k]) & (k < q + M - N)", "every_row", "refuted"),
    # padding on the key side
    ("(k <= q + M - N) & pad[k]", "reads_keys(pad)", "proved"),
    ("(k <= q + M - N) & pad[q]", "reads_keys(pad)", "refuted"),
    ("(k <= q + M - N) & pad[k]", "every_row", "undetermined"),  # all padding: empty
    ("(k <= q + M - N) & pad[k]", "causal", "proved"),
    # dilated sliding window: `abs(q - kv) <= W & (abs(q - kv) % dilation == 0)`
    ("(abs(q - k) <= W) & ((q - k) % D == 0)", "every_row", "proved"),  # itself
    ("(abs(q - k) <= W) & ((q - k) % D == 0)", "window(W + 1)", "refuted"),  # holes
    ("(abs(q - k) <= W) & ((q - k) % D == 1)", "every_row", "refuted"),
    ("(abs(q - k) <= W) & ((q - k) % D == 0)", "causal", "refuted"),
]


@pytest.mark.parametrize("body, claim, expected", GYM)
def test_attention_gym_masks_and_their_mutants(body: str, claim: str, expected: str) -> None:
    header = HEADER + "def g(q, k) = ~((k >= P) & (k > q + M - N))\n"
    assert outcome(body, claim, header) == expected


SCORES = [
    # soft-capping: `tanh(score / cap) * cap` turns a masked -inf into -cap
    ("W * tanh(s / W)", "keeps_masked", "refuted"),
    ("s + slopes[h] * (k - q)", "keeps_masked", "proved"),   # ALiBi
    ("s + (q - k)", "keeps_masked", "proved"),               # relative bias
    ("maximum(s, 0 - W)", "keeps_masked", "refuted"),        # a floor under the scores
    ("s + (k - q)", "decays", "proved"),                     # nearer keys favoured
    ("s + (q - k)", "decays", "refuted"),                    # the sign flipped
    pytest.param("s + slopes[h] * (k - q)", "decays", "undetermined",  # the slopes' sign
                 marks=pytest.mark.slow),  # decides; seconds of algebra
]


@pytest.mark.parametrize("body, claim, expected", SCORES)
def test_attention_gym_score_changes(body: str, claim: str, expected: str) -> None:
    assert outcome(body, claim, params="s, b, h, q, k") == expected


def test_a_refuted_claim_is_a_warning_with_its_counterexample() -> None:
    program = check_text("dim N, M\ndef f(q, k) = k <= q + M - N + 1\nassert f(N, M): causal\n")
    (found,) = program.diagnostics
    assert found.code == "SC430"
    assert "query 0 sees key" in found.message
    assert dict(found.counterexample)  # the sizes


def test_an_undecidable_claim_says_so_and_never_guesses() -> None:
    program = check_text("dim N\ndef f(q, k) = k * k <= q * q\nassert f(N, N): causal\n")
    assert [d.code for d in program.diagnostics] == ["SC431"]
    assert "--dim" in program.diagnostics[0].message


def test_unknown_claims_are_errors() -> None:
    assert codes_of("dim N\ndef f(q, k) = k <= q\nassert f(N, N): upper\n") == ["SC434"]
    assert codes_of("dim N\ndef f(q, k) = k <= q\nassert g(N, N): causal\n") == ["SC434"]
    assert codes_of("dim N\ndef f(q, k) = k <= q\nassert f(N, N): keeps_masked\n") == ["SC434"]


ATTENTION = """dim N, M, d
constraint N <= M
input Q: [N, d]
input K: [M, d]
input V: [M, d]
"""


def test_flex_attention_checks_every_row() -> None:
    spec = "dim N, M, d\ninput Q: [N, d]\ninput K: [M, d]\ninput V: [M, d]\n"
    bad = spec + "def c(q, k) = k <= q + M - N\nO = flex_attention(Q, K, V, mask=c)\n"
    assert codes_of(bad) == ["SC433"]
    assert codes_of("constraint N <= M\n".join(bad.split("input Q", 1)).replace(
        "constraint N <= M\n", "constraint N <= M\ninput Q", 1)) == []


INTERVALS = ("dim B, G, N, M, d\ninput Q: [B, G, N, d]\ninput K: [B, G, M, d]\n"
             "input V: [B, G, M, d]\ninput iv: int[M, 2]\ninput x: [M]\n")


@pytest.mark.parametrize("body, expected", [
    # one entry read twice is one value: an interval from it to itself holds no query
    ("(q >= iv[:, 0][k]) & (q < iv[:, 0][k])", ["SC433"]),
    # ... the chain `iv[:, 0][k]` read as `iv[k, 0]`, whose `:` the later index fills
    ("(q > iv[:, 0][k]) & (q < iv[:, 0][k] + 1)", ["SC433"]),
    # ... through a value the spec defines, not declares (Flamingo's image of each key)
    ("(q >= iv[:, 0][ids[k]]) & (q < iv[:, 0][ids[k]])", ["SC433"]),
    # two entries: an interval that holds the queries between them
    ("(q >= iv[:, 0][k]) & (q < iv[:, 1][k])", []),
    # a real entry: `x < q < x + 1` holds a query when x is not an integer
    ("(q > x[k]) & (q < x[k] + 1)", []),
])
def test_an_entry_read_twice_is_one_value(body: str, expected: list[str]) -> None:
    """A mask's rows are empty when no value of the integer inputs it reads lets a key
    through (each entry an unknown integer, one entry read twice one unknown): Flamingo's
    interval read at one end twice (tests/test_flex_public2.py, `flamingo_same_bound`)."""
    spec = f"{INTERVALS}ids = arange(M)\ndef m(b, h, q, k) = {body}\n" \
           "O = flex_attention(Q, K, V, mask=m)\n"
    assert [c for c in codes_of(spec) if c != "SC401"] == expected


@pytest.mark.parametrize("body, expected", [
    ("(k <= q) | (k >= iv[:, 0][q]) & (k < iv[:, 0][q])", ["SC436"]),  # one entry, twice
    ("(k <= q) | (k > q) & (k < q + 1)", ["SC436"]),            # no integer between
    ("(k <= q) | (k >= iv[:, 0][q]) & (k < iv[:, 1][q])", []),  # two entries: may hold
    ("(k <= q) | (k > x[q]) & (k < x[q] + 1)", []),             # a real entry: may hold
    ("False | (k <= q)", []),                                   # a constant side: left alone
    ("(k < k) | (k <= q)", ["SC435"]),                          # said once, by SC435
    ("(k <= q) & (k <= q) | (k <= q) & (k <= q)", ["SC435"]),   # the outer `|`, not inside
])
def test_a_side_of_an_or_that_is_never_true(body: str, expected: list[str]) -> None:
    """SC436: the `|` adds nothing (attention-gym's shared prefix with `offsets[p]` for
    `offsets[p + 1]`, tests/test_flex_public2.py); the rows are not empty, so not SC433."""
    spec = f"{INTERVALS}def m(b, h, q, k) = {body}\nO = flex_attention(Q, K, V, mask=m)\n"
    assert [c for c in codes_of(spec) if c != "SC401"] == expected


def test_the_builtin_causal_masks_are_these_functions() -> None:
    """`causal_mask(N, M)` and `causal_mask(N, M, window=W)` give the same tables as the
    functions, and so do the attentions run with each (NumPy backend)."""
    spec = ATTENTION + """dim W
def causal(q, k) = k <= q + M - N
def sliding(q, k) = causal(q, k) & (q + M - N - k < W)
i = arange(N)[:, None]
j = arange(M)[None, :]
output A = causal(i, j)
output B = causal_mask(N, M)
output C = sliding(i, j)
output E = causal_mask(N, M, window=W)
output O1 = flex_attention(Q, K, V, mask=sliding)
output O2 = softmax(where(causal_mask(N, M, window=W), Q @ K.T / sqrt(d), -inf), axis=-1) @ V
"""
    program = check_text(spec)
    assert program.ok and not program.diagnostics, program.diagnostics
    rng = np.random.default_rng(0)
    for n, m, w in ((3, 5, 2), (4, 4, 1), (2, 7, 3)):
        arrays = {"Q": rng.standard_normal((n, 4)), "K": rng.standard_normal((m, 4)),
                  "V": rng.standard_normal((m, 4))}
        out = compile_spec(spec, dims={"W": w})(**arrays)
        np.testing.assert_array_equal(out["A"], out["B"])
        np.testing.assert_array_equal(out["C"], out["E"])
        np.testing.assert_allclose(out["O1"], out["O2"])


def test_the_cache_alignment_of_a_decode_step_is_proved() -> None:
    """N new queries after P cached keys: query q is at position P + q."""
    header = "dim N, P, d\ninput Q: [N, d]\ninput K: [P + N, d]\ninput V: [P + N, d]\n"
    good = header + "def step(q, k) = k <= q + P\nassert step: causal, every_row\n" \
        "O = flex_attention(Q, K, V, mask=step)\n"
    assert codes_of(good) == []
    for wrong in ("k <= q", "k <= q + P - 1", "k <= q + P + 1", "k < q + P"):
        found = codes_of(good.replace("k <= q + P", wrong))
        assert "SC430" in found, wrong


def test_a_stated_window_convention_is_checked() -> None:
    body = "def sw(q, k) = (k <= q) & (q - k {op} W)\n"
    for convention, right, wrong in (("exclusive", "<", "<="), ("inclusive", "<=", "<")):
        header = f"dim W window {convention}\n"
        assert codes_of(header + body.format(op=right)) == []
        assert codes_of(header + body.format(op=wrong)) == ["SC432"]
    # unstated: silent either way
    assert codes_of("dim W\n" + body.format(op="<=")) == []


def test_a_function_called_with_moved_positions_reads_them_as_its_own() -> None:
    """A decode step's mask moves the query positions past the cache and calls the window
    function with them (Hugging Face's `q_idx + q_offset`): the callee sees absolute
    positions, so it does not take the step's lengths (1 query, T + 1 keys) and their
    bottom-right offset a second time (a false SC432 "1 positions back" at W = 1)."""
    step = ("dim B, H, T, d\ndim W window exclusive\ninput q: [B, H, 1, d]\n"
            "input k: [B, H, T + 1, d]\ninput v: [B, H, T + 1, d]\n"
            "def win(b, h, q_idx, kv_idx) = (kv_idx <= q_idx) & (kv_idx > q_idx - W)\n"
            "def step(b, h, q_idx, kv_idx) = win(b, h, q_idx + {offset}, kv_idx)\n"
            "out = flex_attention(q, k, v, mask=step)\n")
    assert codes_of(step.format(offset="T")) == []
    assert codes_of(step.format(offset="(T - 0)")) == []
    # no offset: the new token placed at position 0 (top left) sees a key T back
    assert codes_of(step.format(offset="0")) == ["SC432"]


def test_a_stated_mask_convention_is_checked() -> None:
    for convention, right, wrong in (("keep", "pad[k]", "~pad[k]"), ("drop", "~pad[k]", "pad[k]")):
        header = f"dim N\ninput pad: bool[N] {convention}\n"
        assert codes_of(header + f"def f(q, k) = (k <= q) & {right}\n") == []
        assert codes_of(header + f"def f(q, k) = (k <= q) & {wrong}\n") == ["SC432"]
    assert codes_of("dim N\ninput pad: bool[N]\ndef f(q, k) = (k <= q) & ~pad[k]\n") == []


def test_conventions_take_no_name_away() -> None:
    """`mask`, `keep`, `window` stay names; only `def` (Python's keyword) is reserved."""
    spec = ("dim N, keep\ninput mask: bool[N, N]\ninput window: [N, N]\n"
            "output drop = where(mask, window, -inf)\n")
    assert not any(d.is_error for d in check_text(spec).diagnostics)


def test_an_unknown_convention_word_is_a_syntax_error() -> None:
    found = check_text("dim N\ninput pad: bool[N] kept\n").diagnostics
    assert found[0].code == "SC001" and "`kept`" in found[0].message


def test_a_call_with_the_wrong_arguments_is_an_error() -> None:
    assert "SC350" in codes_of("dim N\ndef c(q, k) = k <= q\nm = c(arange(N))\n")
    assert "SC351" in codes_of("dim N, d\ninput Q: [N, d]\nO = flex_attention(Q, Q)\n")


def test_a_drop_mask_is_generated_keeping_a_key_in_every_row() -> None:
    """`run` and `conform` generate masks with a kept key in every row: for a mask stated
    `drop`, a false entry (the spec hides where it is true)."""
    spec = ("dim N, d\ninput S: [N, N]\ninput hide: bool[N, N] drop\n"
            "output P = softmax(where(hide, -inf, S), axis=-1)\n")
    for size in (1, 2, 5):
        out = compile_spec(spec, dims={"N": size, "d": 1}).run(seed=3).outputs
        assert np.isfinite(out["P"]).all()
    stated = spec.replace(" drop", "")  # unstated: true keeps, and rows may all be hidden
    assert any(not np.isfinite(compile_spec(stated, dims={"N": n, "d": 1}).run(seed=3).outputs["P"]).all()
               for n in (1, 2))


def test_the_report_draws_each_mask_as_its_function_and_its_table() -> None:
    from shapecheck.report.html import render_html
    from shapecheck.report.markdown import render_markdown
    from shapecheck.report.model import build_report

    spec = ATTENTION + """dim W
def sliding(q, k) = (k <= q + M - N) & (q + M - N - k < W)
assert sliding: causal, window(W)
O = flex_attention(Q, K, V, mask=sliding)
"""
    report = build_report(check_text(spec), "s.attn", {"N": 3, "M": 5, "W": 2})
    (card,) = report.masks
    assert card.source.startswith("def sliding(q, k) =")
    # query 0 is at position 2 of 5 keys: it sees keys 1 and 2
    assert card.picture == ("·■■··", "··■■·", "···■■")
    assert card.findings == (("causal", "proved"), ("a window of width W", "proved"),
                             ("seen by every query", "proved"))  # flex_attention's own check
    assert card.rows == ("query 0 may see keys 1–2", "query 1 may see keys 2–3",
                         "query 2 may see keys 3–4")
    markdown = render_markdown(report)
    assert "## Masks" in markdown and "· ■ ■ · ·" in markdown
    assert "may see key j" in markdown
    assert "· ■ ■ · ·" in render_html(report)


MASKED = """dim B, N, d
input X: [B, N, d]
input m: {kind}[B, N] {convention}
S = X @ X.transpose(1, 2) / sqrt(d)
O = softmax({masked}, axis=-1) @ X
"""


@pytest.mark.parametrize("kind, masked, keeps", [
    ("bool", "where(m[:, None, :], S, -inf)", True),
    ("bool", "where(m[:, None, :], -inf, S)", False),
    ("bool", "where(~m[:, None, :], -inf, S)", True),
    ("bool", 'S.masked_fill(m[:, None, :], float("-inf"))', False),
    ("int", 'S.masked_fill(m[:, None, :] == 0, float("-inf"))', True),
    ("int", "S + (1 - m[:, None, :]) * -1e9", True),
    ("int", "S + m[:, None, :] * -1e9", False),
    ("int", "S + (1.0 - m[:, None, :]) * -10000.0", True),
])
def test_a_stated_input_mask_is_read_the_stated_way_in_tensor_code(kind: str, masked: str,
                                                                     keeps: bool) -> None:
    for convention in ("keep", "drop"):
        found = codes_of(MASKED.format(kind=kind, convention=convention, masked=masked))
        assert found == ([] if keeps == (convention == "keep") else ["SC432"]), convention
    assert codes_of(MASKED.format(kind=kind, convention="", masked=masked)) == []


WINDOWED = """dim N, d
dim W window {convention}
input Q: [N, d]
input K: [N, d]
input V: [N, d]
i = arange(N)[:, None]
j = arange(N)[None, :]
S = Q @ K.T / sqrt(d)
O = softmax({masked}, axis=-1) @ V
"""


@pytest.mark.parametrize("masked, inclusive", [
    ("where((j <= i) & (i - j < W), S, -inf)", False),
    ("where((j <= i) & (i - j <= W), S, -inf)", True),
    ("where((j <= i) & (i - j < W + 1), S, -inf)", True),
    ("where(causal_mask(N, window=W), S, -inf)", False),
    ("where(causal_mask(N, window=W + 1), S, -inf)", True),
    ("where((j > i) | (i - j >= W), -inf, S)", False),
    ("where((j > i) | (i - j > W), -inf, S)", True),
    ("where(((i <= j) & (j - i < W)).T, S, -inf)", False),  # built transposed, then .T
])
def test_a_stated_window_is_checked_in_tensor_code(masked: str, inclusive: bool) -> None:
    for convention in ("exclusive", "inclusive"):
        found = codes_of(WINDOWED.format(convention=convention, masked=masked))
        assert found == ([] if inclusive == (convention == "inclusive") else ["SC432"]), convention


FLEX = """dim B, H, N, d
input Q: [B, H, N, d]
input K: [B, H, N, d]
input V: [B, H, N, d]
input slopes: [H]
input doc: int[N]
def document(b, h, q, k) = (k <= q) & (doc[q] == doc[k])
def alibi(s, b, h, q, k) = s + slopes[h] * (k - q)
output O = flex_attention(Q, K, V, mask=document, score=alibi)
"""


def test_flex_attention_runs_the_same_on_both_backends() -> None:
    """A mask and a score change as functions (FlexAttention's signatures): the call is its
    body, so NumPy (fused) and torch run it with the same numbers."""
    pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    arrays = {name: rng.standard_normal((2, 3, 5, 4)) for name in "QKV"}
    arrays.update(slopes=rng.random(3), doc=np.array([0, 0, 1, 1, 1]))
    numpy_out = compile_spec(FLEX)(**arrays)["O"]
    torch_out = compile_spec(FLEX, backend="torch")(**arrays)["O"]
    np.testing.assert_allclose(numpy_out, np.asarray(torch_out), rtol=1e-12, atol=1e-12)
    # against the formula written out by hand
    q = np.arange(5)[:, None]
    k = np.arange(5)[None, :]
    scores = arrays["Q"] @ arrays["K"].swapaxes(-1, -2) / 2 + arrays["slopes"][:, None, None] * (k - q)
    keep = (k <= q) & (arrays["doc"][q] == arrays["doc"][k])
    scores = np.where(keep, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    expected = weights / weights.sum(-1, keepdims=True) @ arrays["V"]
    np.testing.assert_allclose(numpy_out, expected, rtol=1e-12)


@pytest.mark.parametrize("masked, inclusive", [
    # Mistral's reference: tril, then triu(mask, diagonal=-W): W + 1 keys
    ("where(triu(tril(ones([N, N])), k=0 - W) == 1, S, -inf)", True),
    ("S.masked_fill(triu(tril(ones([N, N])), k=0 - W) == 0, float('-inf'))", True),
    ("where(triu(tril(ones([N, N])), k=1 - W) > 0, S, -inf)", False),
])
def test_a_stated_window_is_checked_in_triangles(masked: str, inclusive: bool) -> None:
    for convention in ("exclusive", "inclusive"):
        found = codes_of(WINDOWED.format(convention=convention, masked=masked))
        assert found == ([] if inclusive == (convention == "inclusive") else ["SC432"]), convention


def test_a_window_claim_reads_the_stated_convention() -> None:
    """attention-gym's sliding window (`q_idx - kv_idx <= W`) is inclusive."""
    gym = "def sw(b, h, q_idx, kv_idx) = (q_idx >= kv_idx) & (q_idx - kv_idx <= W)\n" \
          "assert sw: causal, window(W)\n"
    assert codes_of("dim W window inclusive\n" + gym) == []
    assert codes_of("dim W window exclusive\n" + gym) == ["SC430", "SC432"]
    assert codes_of("dim W\n" + gym) == ["SC430"]  # unstated: W keys, as causal_mask's


RELATIVE = """dim H, N, d
input Q: [H, N, d]
input K: [H, N, d]
input V: [H, N, d]
input slopes: [H]
i = arange(N)[:, None]
j = arange(N)[None, :]
rel: int[N, N] {convention} = {rel}
S = Q @ K.transpose(1, 2) / sqrt(d) + slopes[:, None, None] * rel
O = softmax(S, axis=-1) @ V
"""


@pytest.mark.parametrize("rel, direction", [
    ("j - i", "key_minus_query"),          # ALiBi's distances, T5's memory - context
    ("i - j", "query_minus_key"),
    ("(j - i) + N - 1", "key_minus_query"),  # an index into a table of 2N - 1 entries
    ("N - 1 - (i - j)", "key_minus_query"),
    ("arange(N)[:, None] - arange(N)[None, :]", "query_minus_key"),
])
def test_a_stated_relative_direction_is_checked(rel: str, direction: str) -> None:
    for convention in ("key_minus_query", "query_minus_key"):
        found = codes_of(RELATIVE.format(convention=convention, rel=rel))
        assert found == ([] if convention == direction else ["SC432"]), convention
    assert codes_of(RELATIVE.format(convention="", rel=rel)) == []


def test_a_relative_direction_follows_the_roles_not_the_layout() -> None:
    """With the scores written keys by queries (`K @ Q.T`), rows are the keys."""
    spec = RELATIVE.format(convention="key_minus_query", rel="i - j").replace(
        "Q @ K.transpose(1, 2)", "K @ Q.transpose(1, 2)").replace(
        "softmax(S, axis=-1) @ V", "softmax(S, axis=-2).transpose(1, 2) @ V")
    assert codes_of(spec) == []


CACHED = """dim B, H, N, P, d
input q: [B, H, N, d]
input k: [B, H, N, d]
input v: [B, H, N, d]
input k_cache: [B, H, P, d] {convention}
input v_cache: [B, H, P, d] {convention}
K = {keys}
V = torch.cat([v_cache, v], dim=-2)
O = softmax(where(causal_mask(N, P + N), q @ K.transpose(-2, -1) / sqrt(d), -inf), axis=-1) @ V
"""


@pytest.mark.parametrize("keys, cache_first", [
    ("torch.cat([k_cache, k], dim=-2)", True),
    ("torch.cat([k, k_cache], dim=-2)", False),
    ("concat([k_cache, k], axis=2)", True),
    ("concat([k, k_cache], axis=2)", False),
])
def test_a_stated_cache_order_is_checked(keys: str, cache_first: bool) -> None:
    # V is cache first throughout: keys written cache last are also SC419 (K and V joined in
    # different orders), which needs no convention
    other_order = [] if cache_first else ["SC419"]
    found = codes_of(CACHED.format(convention="cache_first", keys=keys))
    assert found == other_order + ([] if cache_first else ["SC432"])
    found = codes_of(CACHED.format(convention="cache_last", keys=keys))
    assert found.count("SC432") == (2 if cache_first else 1)
    assert codes_of(CACHED.format(convention="", keys=keys)) == other_order


def test_same_as_matches_positions_by_role_not_by_name() -> None:
    spec = ("dim N, P\ndef gym(b, h, q_idx, kv_idx) = (kv_idx < P) | (kv_idx <= q_idx)\n"
            "def g(q, k) = ~((k >= P) & (k > q))\n")
    assert codes_of(spec + "assert gym(N, N): same_as(g)\n") == []
    assert codes_of(spec.replace("k > q", "k >= q") + "assert gym(N, N): same_as(g)\n") == ["SC430"]


def test_a_window_of_a_number_is_still_a_comparison_of_positions() -> None:
    """`i - j < 3` compares positions with a number; it is not a 0/1 mask tested."""
    spec = WINDOWED.format(convention="exclusive", masked="where((j <= i) & (i - j < W) & "
                           "(i - j < 3 * W), S, -inf)")
    assert codes_of(spec) == []
    spec = WINDOWED.format(convention="exclusive", masked="where((j <= i) & (i - j <= W) & "
                           "(i - j < 100), S, -inf)")
    assert codes_of(spec) == ["SC432"]


PADDED = """dim B, H, N, d{more}
input Q: [B, H, N, d]
input K: [B, H, {keys}, d]
input V: [B, H, {keys}, d]
input pad: bool[B, {length}]
def f(b, h, q, k) = {body}
O = flex_attention(Q, K, V, mask=f)
"""
AT_Q, AT_K = "reshape(pad, [B * N])[b * N + q]", "reshape(pad, [B * N])[b * N + k]"


@pytest.mark.parametrize("body, keys, expected", [
    (f"(k <= q) & {AT_Q}", "N", ["SC412"]),      # padded keys still seen by every query
    (f"(k <= q) & ~{AT_Q}", "N", ["SC412"]),     # a drop vector, on the query side too
    (f"(k <= q) & {AT_K}", "N", []),             # key padding
    (f"(k <= q) & {AT_Q} & {AT_K}", "N", []),    # both sides: padded queries see nothing
    (f"{AT_Q} | (k <= q)", "N", []),             # a flag that lets a query see more
    (f"(k <= q + M - N) & {AT_Q}", "M", []),     # as long as the queries, not the keys
])
def test_a_padding_vector_read_at_the_query_is_sc412(body: str, keys: str,
                                                    expected: list[str]) -> None:
    """A bool input as long as the keys, read at the query position and never at the key's,
    one value of which hides the query's whole row: a key padding read on the wrong side
    (issue 33 item 2), at the function's line; the other forms say nothing of it. (A read
    by two positions is written flattened, as the language gathers by one tensor.)"""
    text = PADDED.format(more=", M" if keys == "M" else "", keys=keys, body=body,
                         length="N")
    program = check_text(text)
    found = [(d.code, d.span.line) for d in program.diagnostics if d.code != "SC433"]
    assert found == [(code, 6) for code in expected], program.diagnostics
    if expected:
        diagnostic = next(d for d in program.diagnostics if d.code == "SC412")
        assert "`pad[b, q]`" in diagnostic.message  # as the code reads it, not flattened
        assert any("`k`" in h for h in diagnostic.help)


def test_a_padding_read_is_reported_at_the_function_that_reads_it() -> None:
    text = PADDED.format(more="", keys="N", length="N", body="k <= q").replace(
        "O = flex_attention", f"def padding(b, h, q, k) = {AT_Q}\n"
        "def both(b, h, q, k) = f(b, h, q, k) & padding(b, h, q, k)\n"
        "O = flex_attention").replace("mask=f", "mask=both")
    assert [(d.code, d.span.line) for d in check_text(text).diagnostics] == [("SC412", 7)]


TENSOR_PADDED = """dim B, H, N, d
input Q: [B, H, N, d]
input K: [B, H, N, d]
input V: [B, H, N, d]
input pad: bool[B, N]
i = arange(N)[:, None]
j = arange(N)[None, :]
keep = (j <= i) & {read}
O = softmax(where(keep, Q @ transpose(K, [0, 1, 3, 2]) / sqrt(d), -inf), axis=-1) @ V
"""


@pytest.mark.parametrize("read, expected", [
    ("pad[:, None, :, None]", ["SC412"]),                        # by query: the bug
    ("pad[:, None, None, :]", []),                               # by key
    ("pad[:, None, :, None] & pad[:, None, None, :]", []),       # both sides
])
def test_a_padding_vector_and_ed_with_a_triangle_by_query_is_sc412(read: str,
                                                                   expected: list[str]) -> None:
    """The tensor form of the same mistake: the meaning pass's SC412 needs the whole mask
    constant along the keys, which a causal triangle and-ed in hides (issue 33 item 2)."""
    found = [(d.code, d.span.line) for d in check_text(TENSOR_PADDED.format(read=read)).diagnostics]
    assert found == [(code, 8) for code in expected]


@pytest.mark.parametrize("added", ["S + where(keep, 0.0, -inf)", "S + where(keep, 0.0, -1e9)",
                                   "S + where(~keep, -inf, 0.0)"])
@pytest.mark.parametrize("read, expected", [
    ("pad[:, None, :, None]", ["SC412"]),                        # by query: the bug
    ("pad[:, None, None, :]", []),                               # by key
    ("pad[:, None, :, None] & pad[:, None, None, :]", []),       # both sides
])
def test_a_padding_vector_and_ed_with_a_triangle_in_an_added_mask_is_sc412(
        added: str, read: str, expected: list[str]) -> None:
    """The additive form of the same mask (issue 33): `where(keep, 0, -inf)` added to the
    scores hides what `where(keep, S, -inf)` hides, so a padding vector read by query and
    and-ed with a triangle there is the same mistake (the padded keys are still seen; with
    a finite fill the padded queries' rows only shift, which the softmax ignores)."""
    text = TENSOR_PADDED.format(read=read).replace(
        "O = softmax(where(keep, Q @ transpose(K, [0, 1, 3, 2]) / sqrt(d), -inf), axis=-1) @ V",
        "S = Q @ transpose(K, [0, 1, 3, 2]) / sqrt(d)\n"
        f"O = softmax({added}, axis=-1) @ V")
    found = [(d.code, d.span.line) for d in check_text(text).diagnostics]
    assert found == [(code, 8) for code in expected]


def test_a_padding_vector_alone_by_query_is_reported_once() -> None:
    """Alone, the meaning pass says it (the mask is constant along the keys); not twice."""
    text = TENSOR_PADDED.format(read="pad[:, None, :, None]").replace("(j <= i) & ", "")
    assert [d.code for d in check_text(text).diagnostics] == ["SC412"]
