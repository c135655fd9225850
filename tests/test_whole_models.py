"""Whole models (docs/torch.md, "Whole models"): every attention layer of a tiny model
checked in one run, as the model calls it; layers that share code checked once; the masks
the model builds checked against the layers that read them.

The models are built from config classes (nothing downloaded) or are nanoGPT's `model.py`
as written (tests/data/whole_models/). Each case traces a model: the torch ones are slow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shapecheck.pytorch.front.layers import span_of_names

torch = pytest.importorskip("torch")

DATA = Path(__file__).parent / "data" / "whole_models"


def test_layer_names_are_shortened_where_they_differ_in_one_number() -> None:
    assert span_of_names(["model.layers.0.self_attn", "model.layers.1.self_attn",
                          "model.layers.2.self_attn"]) == "model.layers.0–2.self_attn"
    assert span_of_names(["h.0.attn", "h.2.attn"]) == "h.{0,2}.attn"
    assert span_of_names(["encoder.attn", "decoder.attn"]) == "encoder.attn, decoder.attn"
    assert span_of_names(["attn"]) == "attn"


def test_a_block_holding_attention_is_no_kind_of_its_own() -> None:
    """A decoder layer whose class name says MoE holds the attention and its MLP: the MLP
    and the norms are summarised, not the block (it read "MLPs (layers.0–1)" for Qwen2-MoE,
    hiding its norms)."""
    from types import SimpleNamespace

    from shapecheck.pytorch.front.model import _others

    class Attention(torch.nn.Module):
        pass

    class Qwen2MoeSparseMoeBlock(torch.nn.Module):
        pass

    class Qwen2MoeDecoderLayer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.self_attn, self.mlp = Attention(), Qwen2MoeSparseMoeBlock()
            self.input_layernorm = torch.nn.LayerNorm(4)

    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList([Qwen2MoeDecoderLayer(), Qwen2MoeDecoderLayer()])
    found = [SimpleNamespace(name=f"layers.{i}.self_attn") for i in range(2)]
    assert _others(model, found) == {  # type: ignore[arg-type]
        "MLPs": ["layers.0.mlp", "layers.1.mlp"],
        "norms": ["layers.0.input_layernorm", "layers.1.input_layernorm"]}


def _whole(target: str):
    from shapecheck.pytorch.front.model import analyse
    from shapecheck.pytorch.front.target import build

    built = build(target)
    return analyse(built, target)


def _diagnostics(target: str) -> list[tuple[str, int, str, str]]:
    from shapecheck.pytorch.front.sourcemap import check

    return [(Path(r.path).name, d.span.line, d.code, " ".join(n.message for n in d.notes))
            for r in check(target) for d in r.diagnostics]


def _groups(target: str) -> list[tuple[str, str]]:
    whole = _whole(target)
    assert whole is not None
    return [(item.group.label, type(item.group.first.module).__name__) for item in whole.checked]


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from shapecheck.cli import main

    try:
        main(list(args))
    except SystemExit as exit:
        code = int(exit.code or 0)
    else:
        code = 0
    return code, capsys.readouterr().out


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.slow
def test_nanogpt_is_clean_and_its_identical_blocks_are_checked_once() -> None:
    target = f"{DATA / 'nanogpt_model.py'}:make"
    assert _groups(target) == [("transformer.h.0–3.attn", "CausalSelfAttention")]
    assert _diagnostics(target) == []


@pytest.mark.slow
def test_a_bug_in_one_layer_is_flagged_at_its_line_once() -> None:
    path = DATA / "nanogpt_model.py"
    target = f"{path}:make_one_bad_layer"
    assert _groups(target) == [("transformer.h.{0,1,3}.attn", "CausalSelfAttention"),
                               ("transformer.h.2.attn", "SlowSelfAttention")]
    found = _diagnostics(target)
    assert [(f, line, code) for f, line, code, _ in found] == [
        ("nanogpt_model.py", _line(path, "att = F.softmax(att, dim=-2)"), "SC402")]
    assert "in transformer.h.2.attn" in found[0][3]


@pytest.mark.slow
def test_a_mask_the_model_builds_wrong_is_flagged_at_its_line() -> None:
    path = DATA / "decoder.py"
    assert _diagnostics(f"{path}:make") == []
    assert _diagnostics(f"{path}:make_drop_mask") == []  # `triu(.., 1)` read as the dropped part
    found = _diagnostics(f"{path}:make_transposed_mask")
    assert [(f, line, code) for f, line, code, _ in found] == [
        ("decoder.py", _line(path, "torch.triu(torch.ones(T, T"), "SC610")]


@pytest.mark.slow
@pytest.mark.parametrize("factory, text, code, reason", [
    ("make_shifted_mask", "torch.tril(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)",
     "SC610", "shifted by 1"),
    ("make_strict_mask", "diagonal=-1)", "SC611", "without its diagonal"),
    ("make_inverted_padding", "mask = causal + self.additive", "SC611", "hides every key"),
])
def test_other_masks_the_model_builds_wrong_are_flagged_at_their_line(
        factory: str, text: str, code: str, reason: str) -> None:
    """A triangle one key too wide, one without its diagonal, a padding mask inverted on a
    batch with no padding: each once, at the line that built it, confirmed by its contents."""
    from shapecheck.pytorch.front.sourcemap import check

    path = DATA / "decoder.py"
    found = [d for r in check(f"{path}:{factory}") for d in r.diagnostics]
    assert [(d.span.line, d.code) for d in found] == [(_line(path, text), code)]
    assert reason in found[0].message


@pytest.mark.slow
def test_positions_numbered_from_zero_at_a_decode_step_are_flagged_at_their_arange() -> None:
    """The model numbers the new tokens, makes the rotary tables and passes them with each
    layer's cache: numbered after the cache is clean; from 0 again is SC612 at the
    `arange`, once for both layers (issue 30: the positions a model builds)."""
    path = DATA / "rotary_cache.py"
    assert _diagnostics(f"{path}:make_decode") == []
    found = _diagnostics(f"{path}:make_decode_from_zero")
    assert [(f, line, code) for f, line, code, _ in found] == [
        ("rotary_cache.py", _line(path, "return torch.arange(T, device=device)"), "SC612")]


_LLAMA_TARGET = """
import importlib.util, sys
import torch
from transformers import LlamaConfig

def _load(name):
    spec = importlib.util.spec_from_file_location(
        f"transformers.models.llama.{{name}}", f"{folder}/{{name}}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module

def _make(name):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=99, hidden_size=60, intermediate_size=44,
                         num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=3,
                         head_dim=10)
    config._attn_implementation = "eager"
    model = _load(name).LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 99, (2, 5))
    with torch.no_grad():
        first = model(input_ids=ids, use_cache=True)
    return model, {{"input_ids": ids[:, -1:], "attention_mask": torch.ones(2, 6, dtype=torch.long),
                   "past_key_values": first.past_key_values, "use_cache": True}}

def make_as_it_is():
    return _make("modeling_llama_copy")

def make_from_zero():
    return _make("modeling_llama_from_zero")
"""


@pytest.mark.slow
def test_transformers_llama_copied_with_its_cache_offset_dropped(tmp_path: Path) -> None:
    """transformers' own modeling_llama.py, copied as a user copies it (loaded as a module of
    its package), at a decode step: as it is, clean; with `+ past_seen_tokens` dropped from
    its `position_ids`, SC612 at that line."""
    import transformers.models.llama.modeling_llama as llama

    source = Path(llama.__file__).read_text()
    offset = " + past_seen_tokens"
    line = next(i for i, text in enumerate(source.splitlines(), 1)
                if "position_ids = torch.arange(" in text and text.endswith(offset))
    (tmp_path / "modeling_llama_copy.py").write_text(source)
    (tmp_path / "modeling_llama_from_zero.py").write_text(
        "\n".join(text[:-len(offset)] if i == line else text
                  for i, text in enumerate(source.splitlines(), 1)) + "\n")
    (tmp_path / "target.py").write_text(_LLAMA_TARGET.format(folder=tmp_path))
    assert _diagnostics(f"{tmp_path / 'target.py'}:make_as_it_is") == []
    found = _diagnostics(f"{tmp_path / 'target.py'}:make_from_zero")
    assert [(f, at, code) for f, at, code, _ in found] == [
        ("modeling_llama_from_zero.py", line, "SC612")]


@pytest.mark.slow
def test_a_padding_mask_is_no_opinion_where_a_sequence_could_be_all_padding() -> None:
    path = DATA / "decoder.py"
    assert _diagnostics(f"{path}:make_padded") == []
    # inverted, it hides the whole first sequence: that could be a sequence of padding
    assert _diagnostics(f"{path}:make_inverted_padding_padded") == []


@pytest.mark.slow
def test_llama_layers_are_one_group_and_a_wrong_scale_in_one_is_its_own() -> None:
    target = f"{DATA / 'hf_models.py'}:llama"
    assert _groups(target) == [("model.layers.0–3.self_attn", "LlamaAttention")]
    assert _diagnostics(target) == []


@pytest.mark.slow
def test_bert_with_one_wrongly_scaled_layer() -> None:
    target = f"{DATA / 'hf_models.py'}:bert"
    assert _groups(target) == [("encoder.layer.0–2.attention.self", "BertSelfAttention")]
    assert _diagnostics(target) == []
    bad = f"{DATA / 'hf_models.py'}:bert_one_bad_layer"
    found = _diagnostics(bad)
    assert [(f, code) for f, _, code, _ in found] == [("modeling_bert.py", "SC404")]
    assert "in encoder.layer.1.attention.self" in found[0][3]


@pytest.mark.slow
def test_gemma2_local_and_global_layers_are_checked_each_on_its_own() -> None:
    target = f"{DATA / 'hf_models.py'}:gemma2"
    assert _groups(target) == [("model.layers.{0,2}.self_attn", "Gemma2Attention"),
                               ("model.layers.{1,3}.self_attn", "Gemma2Attention")]
    assert _diagnostics(target) == []


@pytest.mark.slow
@pytest.mark.parametrize("family, groups", [
    ("bart", [("encoder.layers.0–1.self_attn", "BartAttention"),
              ("decoder.layers.0–1.self_attn", "BartAttention"),
              ("decoder.layers.0–1.encoder_attn", "BartAttention")]),
    ("vit", [("layers.0–2.attention", "ViTAttention")]),
    ("whisper", [("encoder.layers.0–1.self_attn", "WhisperAttention"),
                 ("decoder.layers.0–1.self_attn", "WhisperAttention"),
                 ("decoder.layers.0–1.encoder_attn", "WhisperAttention")]),
    ("llama_decode", [("model.layers.0–3.self_attn", "LlamaAttention")]),
    ("mistral_sdpa", [("model.layers.0–1.self_attn", "MistralAttention")]),
    ("qwen2_left_padded", [("model.layers.0–1.self_attn", "Qwen2Attention")]),
    # the first layer of each stack computes the relative bias, the others are passed it
    ("t5", [("encoder.block.0.layer.0.SelfAttention", "T5Attention"),
            ("encoder.block.1.layer.0.SelfAttention", "T5Attention"),
            ("decoder.block.0.layer.0.SelfAttention", "T5Attention"),
            ("decoder.block.0.layer.1.EncDecAttention", "T5Attention"),
            ("decoder.block.1.layer.0.SelfAttention", "T5Attention"),
            ("decoder.block.1.layer.1.EncDecAttention", "T5Attention")]),
])
def test_whole_models_of_every_shape_are_clean(family: str, groups: list) -> None:
    target = f"{DATA / 'hf_models.py'}:{family}"
    assert _groups(target) == groups
    assert _diagnostics(target) == []


@pytest.mark.slow
def test_a_cross_attention_block_checks_each_attention(tmp_path: Path) -> None:
    target = f"{DATA / 'decoder.py'}:cross_block"
    assert _groups(target) == [("attn1", "Attention"), ("attn2", "Attention")]
    assert _diagnostics(target) == []


@pytest.mark.slow
def test_verify_and_report_of_a_whole_model_from_the_command_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = f"{DATA / 'nanogpt_model.py'}:make_one_bad_layer"
    code, out = _run(capsys, "verify", target, "--format", "json")
    assert code == 1, out
    found = json.loads(out)  # what GPT prints as it is built is not in the output
    assert [d["code"] for f in found["files"] for d in f["diagnostics"]] == ["SC402"]
    page = tmp_path / "model.md"
    code, out = _run(capsys, "report", target, "-o", str(page))
    text = page.read_text()
    assert "`transformer.h.{0,1,3}.attn`" in text and "`transformer.h.2.attn`" in text
    assert text.count("| `n_embd` |") == 1  # the model's dims named once
    assert "SC402" in text and "Attention 1" in text
    code, out = _run(capsys, "report", target, "-o", str(tmp_path / "model.html"))
    assert code == 0 and "transformer.h.2.attn" in (tmp_path / "model.html").read_text()


@pytest.mark.slow
def test_verify_says_which_layers_it_checked_and_what_it_did_not_trace(
        capsys: pytest.CaptureFixture[str]) -> None:
    target = f"{DATA / 'nanogpt_model.py'}:make_one_bad_layer"
    code, out = _run(capsys, "verify", target)
    assert code == 1, out  # the warning fails the run, as for a spec
    covered, verdict = out.splitlines()[-2:]
    assert covered == (
        f"`{target}`: 4 attention layers checked (2 groups traced once each: "
        "transformer.h.{0,1,3}.attn; transformer.h.2.attn); not traced: embeddings "
        "(transformer.wte, transformer.wpe), norms (transformer.h.0–3.ln_1, "
        "transformer.h.0–3.ln_2, transformer.ln_f), MLPs (transformer.h.0–3.mlp), "
        "heads (lm_head)")
    assert verdict.startswith("Found 0 errors and 1 warning")
    code, out = _run(capsys, "verify", "-q", target)
    assert "not traced" not in out and "warning[SC402]" in out
    code, out = _run(capsys, "verify", "--format", "json", target)
    assert json.loads(out)["files"][0]["covered"] == covered
    # one attention module is the target itself: nothing to summarise
    code, out = _run(capsys, "verify", f"{DATA.parent / 'torch' / 'nanogpt.py'}:CausalSelfAttention")
    assert code == 0 and "not traced" not in out and "checked (" not in out


@pytest.mark.slow
def test_a_configured_model_factory_is_checked_with_the_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "model.py").write_text((DATA / "decoder.py").read_text())
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shapecheck]\nmodules = ["model.py:make_transposed_mask"]\n')
    code, out = _run(capsys, "verify", str(tmp_path))
    assert code == 1, out
    line = _line(DATA / "decoder.py", "torch.triu(torch.ones(T, T")
    assert "error[SC610]" in out and f"model.py:{line}" in out


@pytest.mark.slow
@pytest.mark.parametrize("factory", ["make", "make_shifted"])
def test_a_swin_block_is_checked_whole_and_its_window_partition_too(factory: str) -> None:
    """A block holding one attention layer is traced as one module: Swin's block cuts the
    image into the windows its attention reads, and a partition without its permute (each
    "window" a strip of rows) is SC411 at the `view`, with a help that is right for windows
    too (it said "move the heads back" only)."""
    from shapecheck.pytorch.front.sourcemap import check

    assert _diagnostics(f"{DATA / 'swin_block.py'}:{factory}") == []
    found = [d for r in check(f"{DATA / 'swin_block_bug.py'}:{factory}") for d in r.diagnostics]
    line = _line(DATA / "swin_block_bug.py", "windows = x.contiguous().view(")
    assert [(d.span.line, d.code) for d in found] == [(line, "SC411")], found
    assert found[0].help[0].startswith("put the axes in their order with `.permute(...)`")

