"""Real code as it is shaped (issue 29 items 1 and 2): classes taking a config object
(a dataclass, a Hugging Face PretrainedConfig), plain functions, factories, files importing
their siblings -- each traces and verifies clean; a size or shape error on a traced spec is
shown only as PyTorch confirms it (a planted bug is confirmed, a lowering defect dropped,
one that cannot be run a note)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import shapecheck.pytorch.front as front  # noqa: E402
from shapecheck.api import check_text  # noqa: E402
from shapecheck.messages.diagnostics import Severity  # noqa: E402
from shapecheck.pytorch.front import ExtractError, extract  # noqa: E402
from shapecheck.pytorch.front.sourcemap import check, traced  # noqa: E402
from shapecheck.pytorch.front.target import parse_init  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = ROOT / "tests" / "data" / "torch" / "public"
NANOGPT = ROOT / "tests" / "data" / "real_modules" / "nanogpt.py"


def codes_of(target: str, init: tuple[str, ...] = ()) -> list[str]:
    return [d.code for r in check(target, init) for d in r.diagnostics]


# --- every way real code is shaped is a target ----------------------------------------------

FAST = [
    f"{PUBLIC / 'timm_attention.py'}:Attention",                  # Attention(dim, num_heads=8)
]
SLOW = [
    f"{PUBLIC / 'annotated_transformer.py'}:attention",          # a plain function
    f"{PUBLIC / 'annotated_transformer.py'}:MultiHeadedAttention",  # (h, d_model)
    f"{PUBLIC / 'siblings' / 'block.py'}:Block",                  # `from model import ...`
    f"{NANOGPT}:CausalSelfAttention",                             # a GPTConfig dataclass
    "transformers.models.llama.modeling_llama:LlamaAttention",    # (LlamaConfig, layer_idx)
    "transformers.models.bert.modeling_bert:BertSelfAttention",   # (BertConfig)
]


@pytest.mark.parametrize("target", FAST)
def test_real_code_traces_and_verifies_clean(target: str) -> None:
    assert codes_of(target) == []


BARE = ROOT / "tests" / "data" / "torch" / "bare_factory.py"


def test_a_factory_returning_a_module_alone_gets_inputs_as_a_class_does() -> None:
    # `return Attention(64, num_heads=4)`: a [B, T, 64] input, the constructor's sizes as
    # dims (told apart by a retrace), and a planted softmax axis flagged at its line
    assert codes_of(f"{BARE}:make") == []
    assert [(d.code, d.span.line) for r in check(f"{BARE}:make_bug")
            for d in r.diagnostics] == [("SC402", 29)]
    # a module with no layer to read an input width from: what to write instead
    [result] = check(f"{BARE}:make_identity")
    assert [d.code for d in result.diagnostics] == ["SC603"]
    assert "(module, inputs)" in result.diagnostics[0].message


@pytest.mark.slow
@pytest.mark.parametrize("target", SLOW)
def test_more_real_code_traces_and_verifies_clean(target: str) -> None:
    if target.startswith("transformers"):
        pytest.importorskip("transformers")
    assert codes_of(target) == []


@pytest.mark.slow
def test_a_pretrained_config_is_built_with_the_tools_sizes() -> None:
    pytest.importorskip("transformers")
    text = extract("transformers.models.llama.modeling_llama:LlamaAttention").text
    # grouped-query heads, a rotary head width made even, the width their product
    assert "dim num_attention_heads = num_key_value_heads * group" in text
    assert "dim head_dim = 2 * head_dim_half" in text
    assert "input position_embeddings_0: [B, T, head_dim]" in text  # the (cos, sin) tables


@pytest.mark.slow
def test_a_function_takes_its_argument_shapes_from_init() -> None:
    target = f"{PUBLIC / 'annotated_transformer.py'}:attention"
    text = extract(target, ["query=[B, H, T, d_k]", "key=[B, H, S, d_k]",
                            "value=[B, H, S, d_k]", "mask=[B, 1, T, S]"]).text
    assert "input query: [B, H, T, d_k]" in text
    assert "scores: [B, H, T, S] = query @ key.T / sqrt(d_k)" in text
    assert "annotated_transformer.py:20" in text  # the function's own line (masked_fill)
    with pytest.raises(ExtractError, match="keys"):
        extract(target, ["keys=[B, T, d]"])


def test_init_reads_sizes_dims_shapes_and_none() -> None:
    init = parse_init(["n_head=4", "n_embd=D", "query=[B, H, T, 64]", "mask=None"])
    assert (init.given, init.rename) == ({"n_head": 4}, {"n_embd": "D"})
    assert init.shapes == {"query": "B H T 64", "mask": None}
    with pytest.raises(ExtractError, match="NAME=\\[SHAPE\\]"):
        parse_init(["query=[B, T+1]"])


def test_a_config_whose_class_cannot_be_told_says_what_to_write(tmp_path: Path) -> None:
    source = tmp_path / "opaque.py"
    source.write_text("import torch\n\nclass Attention(torch.nn.Module):\n"
                      "    def __init__(self, config):\n        super().__init__()\n")
    with pytest.raises(ExtractError, match="annotate it") as raised:
        extract(f"{source}:Attention")
    assert "def make()" in str(raised.value)


def test_a_file_imports_its_siblings_and_the_path_is_restored() -> None:
    before = list(sys.path)
    from shapecheck.pytorch.front.target import load

    assert load(f"{PUBLIC / 'siblings' / 'block.py'}:Block").__name__ == "Block"
    assert sys.path == before


# --- no false alarm by construction -----------------------------------------------------------

def test_a_planted_size_bug_is_flagged_and_confirmed_by_torch() -> None:
    results = check(f"{PUBLIC / 'planted.py'}:PositionTable")
    found = [d for r in results for d in r.diagnostics]
    assert [(d.code, d.span.line, d.severity) for d in found] == [("SC317", 19, Severity.ERROR)]
    notes = " ".join(n.message for n in found[0].notes)
    assert "confirmed by PyTorch" in notes and "T=65" in notes and "RuntimeError" in notes


def _corrupt(monkeypatch: pytest.MonkeyPatch, old: str, new: str) -> None:
    """A lowering defect, provoked: the spec's text with ``old`` written as ``new``."""
    render = front.render

    def corrupted(*args: object) -> tuple[str, dict[int, object]]:
        text, lines = render(*args)  # type: ignore[arg-type]
        assert old in text
        return text.replace(old, new), lines

    monkeypatch.setattr(front, "render", corrupted)


WRONG_WIDTH = ("[B, T, dim_])  #", "[B, T, 5 * head_dim])  #")  # right only at num_heads = 5


def test_a_diagnostic_torch_contradicts_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    target = f"{PUBLIC / 'timm_attention.py'}:Attention"
    _corrupt(monkeypatch, *WRONG_WIDTH)
    spec = extract(target).text
    # the spec alone is wrong: a reshape that changes the number of elements at other heads
    assert "SC307" in [d.code for d in check_text(spec).diagnostics]
    # but the module, built with other heads and run, returns the shape the spec says
    checked = traced(target)
    assert [d.code for r in checked.results for d in r.diagnostics] == []
    assert [d.code for d in checked.contradicted] == ["SC307"]  # the zoo fails on these


@pytest.mark.slow
@pytest.mark.parametrize("factory", ["make", "make_asserting"])
def test_sizes_the_module_refuses_by_its_own_check_are_no_counterexample(factory: str) -> None:
    """einops' windows (`(x w1)` with w1 = 7): the spec's `T//7` is 0 at T = 1, and einops
    raises there on purpose (as does the module's own `assert`): that is no bug of the code,
    and nothing is shown (four SC201 errors and notes before)."""
    assert codes_of(f"{ROOT / 'tests' / 'data' / 'torch' / 'einops_windows.py'}:{factory}") == []


@pytest.mark.slow
def test_a_diagnostic_false_at_the_traced_sizes_is_dropped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = f"{PUBLIC / 'timm_attention.py'}:Attention"
    _corrupt(monkeypatch, "x_3: [B, T, dim_]", "x_3: [B, T, head_dim]")
    assert "SC304" in [d.code for d in check_text(extract(target).text).diagnostics]
    assert codes_of(target) == []


@pytest.mark.slow
def test_a_diagnostic_that_cannot_be_run_is_an_unconfirmed_note(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a copied module: it cannot be built again with other heads
    _corrupt(monkeypatch, "[B, T, head_dim * num_heads])  #", "[B, T, 5 * head_dim])  #")
    found = [d for r in check(f"{PUBLIC / 'planted.py'}:cloned") for d in r.diagnostics
             if d.code == "SC307"]
    assert [d.severity for d in found] == [Severity.NOTE]
    notes = " ".join(n.message for n in found[0].notes)
    assert "unconfirmed" in notes and "num_heads=" in notes


@pytest.mark.slow
def test_a_factory_rebuilt_with_other_heads_drops_a_contradicted_diagnostic(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _corrupt(monkeypatch, "[B, T, dim_])  #", "[B, T, 5 * head_dim])  #")
    assert codes_of(f"{PUBLIC / 'planted.py'}:fixed") == ["SC317"]  # the planted bug alone


@pytest.mark.slow
def test_sizes_that_coincide_at_a_factory_are_traced_apart(tmp_path: Path) -> None:
    source = tmp_path / "make.py"
    source.write_text(f"import sys\nsys.path.insert(0, {str(PUBLIC)!r})\nimport torch\n"
                      "from timm_attention import Attention\n\n"
                      "def make():\n    module = Attention(64, num_heads=8)\n"
                      "    module.fused_attn = False\n"
                      "    return module, {'x': torch.randn(2, 16, 64)}\n")
    extraction = extract(f"{source}:make")
    assert "traced again at sizes that do not" in extraction.text
    assert "dim dim_ = num_heads * head_dim" in extraction.text
    assert len(set(extraction.bindings.values())) == len(extraction.bindings)  # apart
    assert codes_of(f"{source}:make") == []


@pytest.mark.slow
def test_verify_shows_a_confirmed_error_and_exits_1() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "shapecheck", "verify",
                           f"{PUBLIC / 'planted.py'}:PositionTable"],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "confirmed by PyTorch" in done.stdout
