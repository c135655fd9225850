"""FlexAttention in real modules (issue 33): `flex_attention` calls and Hugging Face's mask
functions lowered to the language's functions of positions, each at its Python line;
attention-gym's masks and score changes clean, one-token mutants flagged at their line."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.nn.attention.flex_attention")

from shapecheck.pytorch.conform import conform  # noqa: E402
from shapecheck.pytorch.front import extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check  # noqa: E402

DATA = Path(__file__).parent / "data" / "flex"


def target(name: str) -> str:
    file, _, factory = name.partition(":")
    return f"{DATA / file}:{factory}"


def test_masks_are_written_as_functions_at_their_python_lines() -> None:
    """attention-gym's sliding window: `and_masks(sliding_window, causal_mask)` built by
    `create_block_mask` inside forward; each function a `def` at its `return` line, the
    window a dim (the module's attribute), the traced length symbolic."""
    extraction = extract(target("gym.py:sliding"))
    lines = {text.split("  # ")[0]: text.rsplit(":", 1)[-1] for text in
             extraction.text.splitlines() if text.startswith("def ")}
    assert lines == {
        "def sliding_window(b, h, q_idx, kv_idx) = q_idx - kv_idx <= window": "20",
        "def causal_mask_(b, h, q_idx, kv_idx) = q_idx >= kv_idx": "15",
        "def and_mask(b, h, q_idx, kv_idx) = sliding_window(b, h, q_idx, kv_idx) & "
        "causal_mask_(b, h, q_idx, kv_idx)": "22",  # torch's and_mask: where and_masks was called
    }
    assert "flex_attention(q_1, k_1, v_1, mask=and_mask)" in extraction.text
    assert "dim B, T" in extraction.text  # no block arithmetic pins the length
    assert not extraction.unknown


CLEAN = ["gym.py:causal", "gym.py:Attention", "gym.py:prefix", "gym.py:dilated",
         "gym.py:documents", "gym.py:Alibi", "gym.py:relative_table"]


@pytest.mark.slow
@pytest.mark.parametrize("name", CLEAN)
def test_attention_gym_modules_are_clean_and_conform(name: str) -> None:
    assert [(d.code, d.span.line) for r in check(target(name)) for d in r.diagnostics] == []
    extraction = extract(target(name))
    # ALiBi's slopes are computed in float32 inside the score_mod (`torch.exp2` of an int
    # position): judged at float32's tolerance, as conform's report says.
    tolerance = {"rtol": 1e-5, "atol": 1e-7} if "Alibi" in name else {}
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2, **tolerance)
    assert result.ok, result.report()


@pytest.mark.slow
def test_a_document_mask_reads_its_ids_as_an_input() -> None:
    text = extract(target("gym.py:documents")).text
    assert "input document_id: int[T]" in text
    assert "def doc_mask_mod(b, h, q_idx, kv_idx) = (document_id[q_idx] == " \
        "document_id[kv_idx]) & causal_mask_(b, h, q_idx, kv_idx)" in text
    # the cap is the module's `soft_cap` attribute, a dim of the factory's module
    assert "def tanh_softcap(score, b, h, q_idx, kv_idx) = soft_cap * tanh(score / soft_cap)" \
        in text


MUTANTS = [  # (factory, code, line of the wrong mask_mod)
    ("mutants.py:reversed_", "SC407", 9),   # q_idx <= kv_idx: each query sees the future
    ("mutants.py:strict_", "SC433", 13),    # q_idx > kv_idx: query 0 sees no key
]


@pytest.mark.slow
@pytest.mark.parametrize("name, code, line", MUTANTS)
def test_one_token_mutants_are_flagged_at_the_mask_mods_line(name: str, code: str,
                                                            line: int) -> None:
    results = check(target(name))
    found = [(d.code, d.span.line) for r in results for d in r.diagnostics]
    assert found == [(code, line)]
    assert results[0].path.endswith("mutants.py")
    diagnostic = results[0].diagnostics[0]
    assert any("traced as `def " in n.message for n in diagnostic.notes)
    if code == "SC407":
        assert "mask_mod" in diagnostic.help[0]


HF = ["hf.py:llama", "hf.py:llama_padded", "hf.py:mistral"]


@pytest.mark.slow
@pytest.mark.parametrize("name", HF)
def test_hugging_face_flex_layers_take_their_block_mask_as_functions(name: str) -> None:
    """The BlockMask the model builds (masking_utils: causal, padding, sliding window,
    offsets) is traced as its mask functions; a padding mask is an input."""
    pytest.importorskip("transformers")
    extraction = extract(target(name))
    assert "def causal_mask_function(batch_idx, head_idx, q_idx, kv_idx) = kv_idx <= q_idx" \
        in extraction.text
    assert "masking_utils.py" in extraction.text
    if name.endswith("padded"):
        assert "input attention_mask_0: bool[B, T]" in extraction.text
    results = check(target(name))
    assert [(d.code, d.span.line) for r in results for d in r.diagnostics] == []
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2, rtol=1e-5, atol=1e-6)
    assert result.ok, result.report()


@pytest.mark.slow
def test_a_padded_flex_layer_conforms_to_the_spec_extract_writes() -> None:
    """A mask_mod reading a padding vector on the key side, left padding: a padded first
    query sees no key, which FlexAttention gives zeros and the spec's softmax NaN; the output
    projection's bias makes that row `c_proj_bias` in the module. Conformance reads the spec
    with such rows as zeros too (docs/conform.md), so the round trip needs no flag."""
    name = target("padded.py:keys")
    assert [(d.code, d.span.line) for r in check(name) for d in r.diagnostics] == []
    extraction = extract(name)
    assert "input pad: bool[B, T]" in extraction.text
    assert "c_proj_bias" in extraction.text
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=3)
    assert result.ok, result.report()


@pytest.mark.slow
def test_hugging_faces_sliding_window_is_a_stated_convention() -> None:
    """HF documents `sliding_window` as the keys a query sees, its own included: a dim read
    from a transformers config is stated `window exclusive`; HF's own mask proves it, a
    model's mask that sees one key more is SC432 at its line, with the counterexample."""
    pytest.importorskip("transformers")
    text = extract(target("hf.py:mistral_wide")).text
    assert "dim sliding_window window exclusive" in text
    assert "kv_idx > q_idx - sliding_window" in text
    assert [d.code for r in check(target("hf.py:mistral_wide")) for d in r.diagnostics] == []
    [result] = check(target("hf.py:windowed"))
    [diagnostic] = result.diagnostics
    assert (diagnostic.code, diagnostic.span.line) == ("SC432", 82)
    assert "query 1 sees key 0" in diagnostic.message


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "phi3", "dbrx"])
def test_the_zoos_flex_form_is_clean_and_conforms(family: str) -> None:
    """A tiny model in flex mode, its first layer called as the model calls it (minutes on a
    cold CPU: HF compiles create_block_mask when the model runs). Phi-3 (partial rotary:
    its cos/sin width was a free axis) and DBRX (not built at the zoo's sizes) were two of
    the five flex cases not clean, for the causes their eager forms shared."""
    pytest.importorskip("transformers")
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
    import zoo

    outcome = zoo.check(zoo.Case(family, "flex"))
    assert (outcome.verify, outcome.conform) == ("clean", "conforms"), outcome.detail


@pytest.mark.slow
def test_a_window_convention_stated_with_init_finds_a_one_token_change() -> None:
    """A window width with no documented meaning (attention-gym's `window_size`) is stated
    by the user: `--init "window=W window inclusive"` (or a `modules` entry's init); the
    correct module is clean, `<` for `<=` is SC432 once, at the mask_mod that has it."""
    assert [d.code for r in check(target("gym.py:windowed"), ["window=window window inclusive"])
            for d in r.diagnostics] == []
    found = [(d.code, d.span.line) for r in check(target("mutants.py:Windowed"),
                                                  ["window=W window inclusive"])
             for d in r.diagnostics]
    assert found == [("SC432", 46)]
    assert check(target("mutants.py:Windowed"))[0].diagnostics == []  # nothing stated


# --- Hugging Face's eager and SDPA masks, as their functions (tables.py) --------------------

TABLES = ["hf_tables.py:llama_eager", "hf_tables.py:llama_eager_padded",
          "hf_tables.py:llama_eager_decode", "hf_tables.py:llama_chunked",
          "hf_tables.py:mistral_wide_padded",
          "hf_tables.py:llama_sdpa", "hf_tables.py:mistral_eager", "hf_tables.py:mistral_sdpa"]


def test_an_eager_table_is_written_as_its_masking_utils_functions() -> None:
    """The table `masking_utils.eager_mask` made (causal, and the padding mask and-ed in)
    is the function at every position, each `def` at masking_utils' line; eager's
    `where(m, zeros(()), min)` keeps where the mask is true (no SC408); the padding mask
    is an input."""
    pytest.importorskip("transformers")
    extraction = extract(target("hf_tables.py:llama_eager_padded"))
    text = extraction.text
    assert "def causal_mask_function(batch_idx, head_idx, q_idx, kv_idx) = kv_idx <= q_idx" \
        "  # transformers/masking_utils.py:" in text
    assert "input attention_mask_1: bool[B, T]" in text
    assert "attention_mask: bool[B, 1, T, T] = expand(and_mask(arange(B)[:, None, None, None]" \
        in text
    assert "where(attention_mask, 0, " in text
    assert "input attention_mask: " not in text  # the table itself is no input
    assert [d.code for r in check(target("hf_tables.py:llama_eager_padded"))
            for d in r.diagnostics] == []


def test_a_decode_steps_table_starts_after_the_cache() -> None:
    """One query after the cache: its position is the keys less the queries (`+ T` with
    `T + 1` keys), and the padding mask, read inside the operator, has the keys' length
    (it was a free `T`, and its flat read's stride `B * T + 1`: conformance read out of
    range)."""
    pytest.importorskip("transformers")
    text = extract(target("hf_tables.py:llama_eager_decode")).text
    assert "input attention_mask_1: bool[B, T + 1]" in text
    assert "reshape(attention_mask_1, [B * (T + 1)])[batch_idx * (T + 1) + kv_idx]" in text
    assert "arange(1)[None, None, :, None] + T, arange(T + 1)[None, None, None, :]" in text
    assert [d.code for r in check(target("hf_tables.py:llama_eager_decode"))
            for d in r.diagnostics] == []


def test_a_decode_table_runs_after_the_cache_at_every_size() -> None:
    """Run at other sizes (conformance, confirmation), a decode step's table puts its query
    after that run's cache, as the spec does (`+ T`), not after the traced cache."""
    pytest.importorskip("transformers")
    from transformers.masking_utils import causal_mask_function, eager_mask

    from shapecheck.pytorch.front import tables

    with tables.recorded():
        made = eager_mask(2, 1, 7, q_offset=6, mask_function=causal_mask_function)
    [mask] = tables.as_tables({"attention_mask": made}).values()
    tables.SIZES[mask.key] = (["B", "1", "T + 1"], {"B": ("x", 0), "T": ("x", 1)})
    run = mask.evaluated({"x": torch.zeros(3, 10)})
    assert torch.equal(run, eager_mask(3, 1, 11, q_offset=10, mask_function=causal_mask_function))


def test_a_table_changed_after_it_was_made_stays_a_tensor() -> None:
    """A table the model changed in place after `masking_utils` made it is not what its
    function says: it is traced as the tensor it is."""
    pytest.importorskip("transformers")
    from transformers.masking_utils import causal_mask_function, sdpa_mask

    from shapecheck.pytorch.front import tables

    with tables.recorded():
        made = sdpa_mask(2, 5, 5, mask_function=causal_mask_function, allow_is_causal_skip=False)
        changed = sdpa_mask(2, 5, 5, mask_function=causal_mask_function,
                            allow_is_causal_skip=False).clone()
    changed.__dict__.update(made.__dict__)  # a copy keeps the record; its values differ
    changed[0, 0, 4, 0] = False
    found = tables.as_tables({"kept": made, "changed": changed})
    assert type(found["kept"]) is tables.TableMask
    assert found["changed"] is changed


@pytest.mark.parametrize("name", ["hf_tables.py:reversed_eager", "hf_tables.py:reversed_sdpa"])
def test_a_future_mask_in_an_hf_table_is_flagged_at_its_line(name: str) -> None:
    """A model's mask function that lets each query see the keys after it, made into a
    table by HF's eager_mask/sdpa_mask: SC407 at the function's line (as a tensor input the
    table said nothing)."""
    pytest.importorskip("transformers")
    source = (DATA / "hf_tables.py").read_text().splitlines()
    line = source.index("    return q_idx <= kv_idx") + 1
    found = [(r.path, d.code, d.span.line) for r in check(target(name)) for d in r.diagnostics]
    assert [(code, at) for _, code, at in found] == [("SC407", line)]
    assert found[0][0].endswith("hf_tables.py")


def test_hugging_faces_window_is_checked_on_an_sdpa_table() -> None:
    """HF's `sliding_window` convention (window exclusive) on the SDPA form: HF's own
    window proves it; a model's window that sees one key more is SC432 at its line, in SDPA
    and eager modes alike."""
    pytest.importorskip("transformers")
    text = extract(target("hf_tables.py:mistral_wide")).text
    assert "dim sliding_window window exclusive" in text
    assert "= kv_idx > q_idx - sliding_window  # transformers/masking_utils.py:" in text
    # and-ed with the padding mask (every eager table given an attention_mask): still proved
    for name in ("hf_tables.py:mistral_wide", "hf_tables.py:mistral_wide_padded"):
        assert [d.code for r in check(target(name)) for d in r.diagnostics] == [], name
    source = (DATA / "hf_tables.py").read_text().splitlines()
    line = source.index("        return q_idx - kv_idx <= sliding_window") + 1
    for name in ("hf_tables.py:windowed_sdpa", "hf_tables.py:windowed_eager"):
        found = [(r.path, d) for r in check(target(name)) for d in r.diagnostics]
        assert [(d.code, d.span.line) for _, d in found] == [("SC432", line)], name
        assert found[0][0].endswith("hf_tables.py")
        assert "query 1 sees key 0" in found[0][1].message


@pytest.mark.slow
@pytest.mark.parametrize("name", TABLES)
def test_hugging_face_tables_are_clean_and_conform(name: str) -> None:
    """Conformance runs the layer with the table evaluated from its function at the sizes
    it chooses, reading the padding mask it passes."""
    pytest.importorskip("transformers")
    assert [d.code for r in check(target(name)) for d in r.diagnostics] == []
    extraction = extract(target(name))
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2, rtol=1e-5, atol=1e-6)
    assert result.ok, result.report()


def test_a_size_the_spec_writes_is_evaluated_from_its_syntax() -> None:
    from shapecheck.pytorch.front.tables import size_at

    assert size_at("P + T", {"P": 8, "T": 1}) == 9
    assert size_at("2 * W - 1", {"W": 3}) == 5
    assert size_at("T", {}) is None
    assert size_at("__import__('os')", {}) is None  # never run as code


@pytest.mark.parametrize("window, expected", [("q - k < W", "proved"), ("q - k <= W", "refuted")])
def test_a_read_of_a_flattened_input_is_an_input_read_in_the_proofs(window: str,
                                                                    expected: str) -> None:
    """HF's padding mask is read by two positions, written `reshape(pad, [B * N])[b * N +
    k]`: an entry of `pad` like `pad[k]`, so a window and-ed with it is still decided (it was
    'undetermined: no formula', SC431 on every padded HF window)."""
    from shapecheck.api import check_text

    program = check_text("dim B, N, W\ninput pad: bool[B, N]\n"
                         f"def f(b, h, q, k) = (k <= q) & ({window}) & "
                         "reshape(pad, [B * N])[b * N + k]\nassert f: window(W)\n")
    assert {f.outcome.status for f in program.masks.findings if f.function == "f"} == {expected}


@pytest.mark.slow
def test_a_whole_models_layers_take_their_tables_as_functions() -> None:
    """A whole Gemma 2 in eager mode: the tables the model builds reach each layer as their
    functions, the local layers' window and the global layers' causal mask."""
    pytest.importorskip("transformers")
    from shapecheck.pytorch.front.model import analyse
    from shapecheck.pytorch.front.target import build

    name = f"{Path(__file__).parent / 'data' / 'whole_models' / 'hf_models.py'}:gemma2"
    whole = analyse(build(name), name)
    texts = {item.group.label: item.extraction.text for item in whole.checked}
    local, global_ = texts["model.layers.{0,2}.self_attn"], texts["model.layers.{1,3}.self_attn"]
    assert "def inner_mask(batch_idx, head_idx, q_idx, kv_idx) = kv_idx > q_idx - " in local
    assert "def causal_mask_function(batch_idx, head_idx, q_idx, kv_idx) = kv_idx <= q_idx" \
        in global_
    assert "inner_mask" not in global_


def _in_a_fresh_process(code: str) -> str:
    import subprocess
    import sys

    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=DATA.parent.parent.parent)
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran.stdout


def test_a_factory_that_does_not_use_transformers_does_not_import_it() -> None:
    """Recording HF's mask tables imports `transformers.masking_utils`: seconds of a Python
    target's start-up (issue 36) that a module not using transformers must not pay."""
    out = _in_a_fresh_process(
        "import sys\n"
        "from shapecheck.pytorch.front.target import build\n"
        "build('tests/data/torch/nanogpt.py:CausalSelfAttention')\n"
        "print('transformers' in sys.modules)\n")
    assert out.strip().splitlines()[-1] == "False"


@pytest.mark.slow
def test_a_factory_importing_transformers_in_its_body_still_records_the_tables(
        tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    module = tmp_path / "lazy.py"
    module.write_text(
        "import sys\n"
        "def make():\n"
        "    from transformers.masking_utils import causal_mask_function  # noqa: F401\n"
        f"    sys.path.insert(0, {str(DATA)!r})\n"
        "    import hf_tables\n"
        "    return hf_tables.llama_eager()\n")
    out = _in_a_fresh_process(
        "from shapecheck.pytorch.front import extract\n"
        f"print(extract({str(module) + ':make'!r}).text)\n")
    assert "def causal_mask_function(batch_idx, head_idx, q_idx, kv_idx) = kv_idx <= q_idx" \
        in out


def _line_of(file: str, text: str) -> int:
    lines = (DATA / file).read_text(encoding="utf-8").splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


@pytest.mark.slow
@pytest.mark.parametrize("name, expected", [
    ("padded.py:queries", "return (kv_idx <= q_idx) & pad[b, q_idx]"),
    ("padded.py:keys", None),
    ("padded.py:both", None),  # padded queries see nothing and no query a padded key
    ("hf_tables.py:query_padded_sdpa", "return padding_mask[batch_idx, q_idx]"),
    ("hf_tables.py:query_padded_eager", "return padding_mask[batch_idx, q_idx]"),
    ("hf_tables.py:both_padded_sdpa", None),  # HF's own padding and-ed in: read at the key too
    ("padded.py:eager_queries", "keep = causal & pad[:, None, :, None]"),  # a tensor, eager
    ("padded.py:eager_keys", None),
    ("padded.py:eager_both", None),
])
def test_a_padding_mask_read_by_query_is_flagged_at_its_line(name: str,
                                                            expected: str | None) -> None:
    """Issue 33 item 2: a mask_mod (or a model's mask function made into HF's eager or SDPA
    table) that reads a padding vector at `q_idx` and never at `kv_idx` lets every query see
    the padded keys: SC412 at the function's `return` line; read at both, it is clean."""
    if name.startswith("hf"):
        pytest.importorskip("transformers")
    results = check(target(name))
    found = [(d.code, d.span.line) for r in results for d in r.diagnostics]
    if expected is None:
        assert found == []
        return
    assert found == [("SC412", _line_of(name.split(":")[0], expected))]
    diagnostic = next(d for r in results for d in r.diagnostics)
    if "eager" not in name:  # a mask_mod's: the read as the code writes it, the fix
        assert "q_idx]`" in diagnostic.message and "kv_idx" in diagnostic.help[-1]


@pytest.mark.slow
def test_a_table_made_by_vmap_is_followed_as_its_function() -> None:
    """Issue 33 item 3: `use_vmap=True` (a model's own `and_mask_function`/`or_mask_function`
    in `create_causal_mask`) made the same table by `vmap`; where the function broadcasts
    too and gives that very table, it is followed as its function, like any other table."""
    pytest.importorskip("transformers")
    name = target("hf_vmap.py:llama_vmap_sdpa")
    extraction = extract(name)
    assert "def causal_mask_function(batch_idx, head_idx, q_idx, kv_idx) = kv_idx <= q_idx" \
        in extraction.text
    assert "def inner_mask(batch_idx, head_idx, q_idx, kv_idx) = kv_idx > q_idx - " \
        in extraction.text
    assert [(d.code, d.span.line) for r in check(name) for d in r.diagnostics] == []
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2, rtol=1e-5, atol=1e-6)
    assert result.ok, result.report()


@pytest.mark.slow
def test_a_whole_models_vmap_tables_are_followed_as_functions() -> None:
    """A whole tiny Gemma 3 with bidirectional attention (built from its config class): the
    model's `or_mask_function`s make its tables with `use_vmap=True`; the sliding layer's
    (`_bidirectional_window_overlay`, a comparison of positions) is written as its
    functions, and so is the full layer's `lambda *args: torch.tensor(True)`."""
    pytest.importorskip("transformers")
    from shapecheck.pytorch.front.model import analyse
    from shapecheck.pytorch.front.target import build

    name = target("hf_vmap.py:gemma3_bidirectional")
    whole = analyse(build(name), name)
    texts = {item.group.label: item.extraction.text for item in whole.checked}
    sliding, full = texts["model.layers.0.self_attn"], texts["model.layers.1.self_attn"]
    defs = [line for line in sliding.splitlines() if line.startswith("def ")]
    assert any("= abs(q_idx - kv_idx) < " in line and "modeling_gemma3.py" in line
               for line in defs)  # Gemma 3's own overlay, at its line
    assert any(line.startswith("def or_mask(") for line in defs)
    # the full layers' `lambda *args: torch.tensor(True)`: a truth value of the function
    assert "def or_mask(batch_idx, head_idx, q_idx, kv_idx) = causal_mask_function(batch_idx, " \
        "head_idx, q_idx, kv_idx) | true" in full
    assert "bool[]" not in full


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hf_vmap.py:gemma3_full_sdpa", "hf_vmap.py:gemma3_full_eager"])
def test_gemma3s_full_layer_overlay_is_part_of_its_function(name: str) -> None:
    """Gemma 3's full (global) layers with bidirectional attention (issue 33): the overlay
    `lambda *args: torch.tensor(True)` makes a tensor at each call, a constant of the graph,
    so it is written as `true` inside the function (neither a `bool[]` param of unknown
    value nor an input that nothing reads); clean, and the layer conforms."""
    pytest.importorskip("transformers")
    extraction = extract(target(name))
    assert "def or_mask(batch_idx, head_idx, q_idx, kv_idx) = causal_mask_function(batch_idx, " \
        "head_idx, q_idx, kv_idx) | true" in extraction.text
    assert "bool[]" not in extraction.text, extraction.text
    assert [(d.code, d.span.line) for r in check(target(name)) for d in r.diagnostics] == []
    result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                     framework="torch", cases=2, rtol=1e-5, atol=1e-6)
    assert result.ok, result.report()


@pytest.mark.slow
def test_a_decode_steps_block_mask_reads_its_offset_as_the_cache() -> None:
    """HF's decode step in flex mode offsets the queries by the cache's length, a number
    when the BlockMask is made: written as the keys less the queries (`q_idx + T`), and the
    window function it calls proved in its own positions. Both gave false alarms (SC433 at
    T = 1; SC432 at W = 1); without the offset the step is top left, flagged at the offset."""
    pytest.importorskip("transformers")
    extraction = extract(target("hf.py:mistral_decode"))
    assert "q_idx + T, kv_idx + 0)" in extraction.text
    assert [(d.code, d.span.line) for r in check(target("hf.py:mistral_decode"))
            for d in r.diagnostics] == []
    found = [(Path(r.path).name, d.code) for r in check(target("hf.py:mistral_decode_top_left"))
             for d in r.diagnostics]
    assert found == [("masking_utils.py", "SC432")]
