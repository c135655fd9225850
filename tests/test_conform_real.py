"""Conformance against real PyTorch modules with no glue code: Hugging Face's attention
layers built from their config classes (tiny sizes, nothing downloaded), and faithful
small copies of other public implementations (tests/data/real_modules/), each conformed
from a factory that only constructs the module, plus command-line flags."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402,F401  (the test extra pins both: these tests never skip)
import transformers  # noqa: E402,F401

from shapecheck.cli import main  # noqa: E402
from shapecheck.pytorch.conform import UsageError, conform, load_function  # noqa: E402
from shapecheck.testing import assert_conforms  # noqa: E402

pytestmark = pytest.mark.slow  # real transformers modules, exported and run

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "examples" / "real"
HF = ROOT / "examples" / "implementations" / "hugging_face.py"
DATA = ROOT / "tests" / "data" / "real"
MODULES = ROOT / "tests" / "data" / "real_modules"

LLAMA_FLAGS = ["--name", "X=hidden_states", "--arg", "position_embeddings=(cos_table,sin_table)",
               "--mask", "keep=additive-min", "--name", "keep=attention_mask",
               "--output", "Y=0", "--output", "P=1"]
GPT2_FLAGS = ["--name", "X=hidden_states", "--output", "Y=0", "--output", "P=1"]
BERT_FLAGS = ["--name", "X=hidden_states", "--mask", "keep=additive-min",
              "--name", "keep=attention_mask", "--output", "O=0", "--output", "P=1"]


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stopped:
        main(["conform", *map(str, args)])
    captured = capsys.readouterr()
    code = stopped.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


# --- Hugging Face ------------------------------------------------------------------------------


def test_llama_attention_conforms_in_float32(capsys):
    """GQA, rotary tables as a `position_embeddings=(cos, sin)` tuple, an additive 4-D mask
    with the dtype's minimum, two outputs; nn.Linear weights matched by name, transposed."""
    code, out, err = run(capsys, REAL / "llama_attention.attn", f"{HF}:llama", *LLAMA_FLAGS,
                         "--dtype", "float32", "--cases", "3")
    assert code == 0, out + err
    assert "W_Q -> q_proj.weight.T (Linear stores [out, in])" in out
    assert "W_K -> k_proj.weight.T" in out and "W_O -> o_proj.weight.T" in out


def test_llama_computes_in_float32_inside_and_the_report_says_so(capsys):
    # softmax(dtype=torch.float32): a float64 comparison misses by float32's rounding
    code, out, _ = run(capsys, REAL / "llama_attention.attn", f"{HF}:llama", *LLAMA_FLAGS,
                       "--cases", "1", "--no-shrink")
    assert code == 1
    assert "computes in float32 inside" in out and "--dtype float32" in out


def test_gpt2_attention_conforms_with_its_packed_conv1d(capsys):
    code, out, err = run(capsys, REAL / "gpt2_attention.attn", f"{HF}:gpt2", *GPT2_FLAGS,
                         "--cases", "3")
    assert code == 0, out + err
    # Conv1D stores [in, out]: Q, K, V side by side in c_attn, not transposed
    assert "W_Q -> c_attn.weight[:, 0:14] (packed: W_Q, W_K, W_V)" in out
    assert "W_V -> c_attn.weight[:, 28:42]" in out and "b_K -> c_attn.bias[14:28]" in out
    assert "W_O -> c_proj.weight\n" in out


def test_bert_self_attention_conforms_with_a_padding_mask(capsys):
    code, out, err = run(capsys, REAL / "bert_self_attention.attn", f"{HF}:bert", *BERT_FLAGS,
                         "--cases", "3")
    assert code == 0, out + err
    assert "W_Q -> query.weight.T" in out and "b_V -> value.bias" in out


def test_a_subtly_wrong_spec_is_caught_and_shrunk(capsys):
    code, out, _ = run(capsys, DATA / "gpt2_wrong_scale.attn", f"{HF}:gpt2", *GPT2_FLAGS)
    assert code == 1
    # sqrt(D) and sqrt(d) agree with one head; one token hides every scale
    assert "does not match the spec at B=1, N=2, d=1, H=2, D=2 (the smallest failing" in out
    code, out, _ = run(capsys, DATA / "llama_wrong_rotation.attn", f"{HF}:llama", *LLAMA_FLAGS,
                       "--dtype", "float32")
    # one token has weight 1 whatever its scores; two tokens of one head show the rotation
    assert code == 1 and "output `P` does not match the spec at B=1, N=2, G=1, R=1, h=1, H=1, " \
        "d=2, E=1, D=1 (the smallest failing binding" in out


def test_the_python_api_takes_the_same_things():
    hugging_face = load_function(f"{HF}:bert")
    result = assert_conforms(REAL / "bert_self_attention.attn", hugging_face, cases=2,
                             names={"X": "hidden_states", "keep": "attention_mask"},
                             masks={"keep": "additive-min"}, outputs={"O": 0, "P": 1})
    assert len(result.passed) == 2 and any("query.weight" in line for line in result.bound)
    with pytest.raises(AssertionError, match="does not match the spec"):
        assert_conforms(DATA / "gpt2_wrong_scale.attn", load_function(f"{HF}:gpt2"),
                        names={"X": "hidden_states"}, outputs={"Y": 0, "P": 1}, cases=2)


def test_kwargs_never_swallow_the_spec_params(capsys):
    """Hugging Face's forward takes **kwargs: without --name the spec's input is not passed
    into it, and the error says which flag passes it."""
    code, _, err = run(capsys, REAL / "bert_self_attention.attn", f"{HF}:bert",
                       "--output", "O=0", "--output", "P=1")
    assert code == 2
    assert "parameter `hidden_states` has no value" in err and "--name X=hidden_states" in err


def test_only_the_named_outputs_are_compared_and_the_others_listed(capsys, tmp_path):
    code, out, err = run(capsys, REAL / "gpt2_attention.attn", f"{HF}:gpt2",
                         "--name", "X=hidden_states", "--output", "Y=0", "--cases", "1")
    assert code == 0, out + err
    assert "not compared: returned entry 1, the spec's output `P`" in out
    text = (REAL / "gpt2_attention.attn").read_text(encoding="utf-8")
    for bias in ("b_Q", "b_K", "b_V", "b_O"):
        text = text.replace(f" + {bias}", "").replace(f"param {bias}:", f"# {bias}:")
    no_biases = tmp_path / "no_biases.attn"
    no_biases.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, no_biases, f"{MODULES}/nanogpt.py:factory", "--name", "X=x",
                         "--output", "Y=0", "--cases", "1")
    assert code == 1  # the spec has no biases: the module keeps its own, and the report says so
    assert "(kept as the module built them, no spec param: c_attn.bias, c_proj.bias)" in out



def test_a_result_of_the_wrong_form_fails_at_once_unshrunk(capsys, tmp_path):
    one_output = tmp_path / "bert_one_output.attn"
    one_output.write_text((REAL / "bert_self_attention.attn").read_text(encoding="utf-8")
                          .replace("output P = softmax", "P = softmax"), encoding="utf-8")
    code, out, _ = run(capsys, one_output, f"{HF}:bert", "--name", "X=hidden_states",
                       "--mask", "keep=additive-min", "--name", "keep=attention_mask")
    assert code == 1
    assert "the function returned 2 value(s); the spec has 1 output(s): `O`" in out
    assert out.count("  FAIL  ") == 1 and "smallest failing" not in out


# --- faithful copies of other public implementations -------------------------------------------

CORPUS = [
    ("nanogpt", REAL / "gpt2_attention.attn", "factory", ["--name", "X=x", "--output", "Y=0"]),
    ("meta_llama", DATA / "meta_llama.attn", "factory", ["--name", "X=x", "--dtype", "float32"]),
    ("mistral", DATA / "meta_llama.attn", "factory", ["--name", "X=x", "--dtype", "float32"]),
    # float32 rotary and softmax inside, and its view_as_complex needs the copy that
    # .float() makes of a float64 tensor: float64 inputs at float32's tolerance
    ("deepseek_mla", DATA / "deepseek_mla.attn", "factory",
     ["--name", "X=x", "--rtol", "1e-4", "--atol", "1e-5"]),
    # a float32 rotary table (inv_freq) inside: compared in float32
    ("palm", DATA / "palm.attn", "ParallelTransformerBlock",
     ["--init", "dim=D", "--init", "dim_head=d", "--init", "heads=H", "--init", "ff_mult=M",
      "--name", "X=x", "--dtype", "float32"]),
    # the random projection is a buffer: the spec's input Omega is written into it
    ("performer", DATA / "performer.attn", "FastAttention",
     ["--init", "dim_heads=d", "--init", "nb_features=M", "--name", "Q=q", "--name", "K=k",
      "--name", "V=v", "--param", "Omega=projection_matrix"]),
    ("gemma", DATA / "gemma.attn", "factory", ["--name", "X=hidden_states", "--dtype", "float32"]),
    ("t5", DATA / "t5.attn", "factory", ["--name", "X=hidden_states", "--name",
                                         "Bias=position_bias", "--output", "Y=0",
                                         "--dtype", "float32"]),
    ("whisper", DATA / "whisper.attn", "WhisperAttention",
     ["--init", "embed_dim=D", "--init", "num_heads=H", "--name", "X=hidden_states",
      "--output", "Y=0", "--output", "P=1"]),
    ("vit", DATA / "vit.attn", "factory", ["--name", "X=hidden_states", "--arg",
                                           "output_attentions=True", "--output", "O=0",
                                           "--output", "P=1", "--dtype", "float32"]),
]


@pytest.mark.parametrize(("name", "spec", "target", "flags"), CORPUS, ids=[c[0] for c in CORPUS])
def test_a_real_implementation_conforms_from_flags_alone(capsys, name, spec, target, flags):
    code, out, err = run(capsys, spec, f"{MODULES / name}.py:{target}", *flags, "--cases", "3")
    assert code == 0, out + err
    assert "the module's state, matched at the first binding" in out


def test_a_module_class_takes_init_and_forward_takes_constants(capsys):
    """nn.MultiheadAttention itself, no wrapper: built by --init, its packed in_proj_weight
    ([3D, D], rows: out) sliced and transposed, key and value passed as the spec's X."""
    code, out, err = run(capsys, ROOT / "examples" / "multi_head.attn",
                         "torch.nn:MultiheadAttention", "--init", "embed_dim=D_model",
                         "--init", "num_heads=H", "--init", "bias=False", "--name", "X=query",
                         "--arg", "key=X", "--arg", "value=X", "--arg", "need_weights=False",
                         "--output", "Y=0", "--cases", "3")
    assert code == 0, out + err
    assert "W_K -> in_proj_weight[35:70].T (packed: W_Q, W_K, W_V)" in out
    assert "not compared: returned entry 1" in out  # the (None) weights


def test_a_planted_bug_in_a_real_module_is_caught_and_shrunk(capsys, tmp_path):
    # repeat_kv tiling the key/value heads (head h reads group h % G, not h // R)
    source = (MODULES / "meta_llama.py").read_text(encoding="utf-8")
    planted = source.replace("x[:, :, :, None, :]\n        .expand(bs, slen, n_kv_heads, n_rep, head_dim)",
                             "x[:, :, None, :, :]\n        .expand(bs, slen, n_rep, n_kv_heads, head_dim)")
    assert planted != source
    (tmp_path / "llama_tiled.py").write_text(planted, encoding="utf-8")
    code, out, _ = run(capsys, DATA / "meta_llama.attn", f"{tmp_path}/llama_tiled.py:factory",
                       "--name", "X=x", "--dtype", "float32")
    assert code == 1
    assert "G=2, R=2" in out.split("does not match the spec at ")[1].split("(")[0]


# --- the binding: decided once, reported, and every param matched -------------------------------


MODULE_SOURCE = """
    import torch
    from torch import nn

    class Two(nn.Module):
        def __init__(self, D):
            super().__init__()
            self.first = nn.Linear(D, D, bias=False)
            self.second = nn.Linear(D, D, bias=False)

        def forward(self, x):
            return self.second(self.first(x))

    def factory(D):
        return Two(D)

    built = Two(4)
"""


def test_an_unmatched_or_ambiguous_param_exits_2_with_candidates_and_the_flag(capsys, tmp_path):
    import textwrap

    (tmp_path / "two.py").write_text(textwrap.dedent(MODULE_SOURCE), encoding="utf-8")
    spec = tmp_path / "two.attn"
    spec.write_text("dim N, D\ninput X: [N, D]\nparam A: [D, D]\nparam Q: [D, D]\n"
                    "output Y: [N, D] = X @ A @ Q\n", encoding="utf-8")
    code, _, err = run(capsys, spec, f"{tmp_path}/two.py:factory", "--name", "X=x")
    assert code == 2
    assert "the spec's param `A` [5, 5] could be any of `first.weight` [5, 5], " \
           "`second.weight` [5, 5]; choose with --param A=first.weight.T" in err
    code, out, err = run(capsys, spec, f"{tmp_path}/two.py:factory", "--name", "X=x",
                         "--param", "A=first.weight.T", "--param", "Q=second.weight.T")
    assert code == 0, out + err
    assert "A -> first.weight.T (--param)" in out
    code, _, err = run(capsys, spec, f"{tmp_path}/two.py:factory", "--name", "X=x",
                       "--param", "A=third.weight")
    assert code == 2 and "the module has no parameter, buffer or tensor attribute `third.weight`" \
        in err and "first.weight" in err
    spec.write_text("dim N, D\ninput X: [N, D]\nparam A: [D, D]\nparam B: [D, D]\nparam C: [D]\n"
                    "output Y: [N, D] = X @ A @ B + C\n", encoding="utf-8")
    code, _, err = run(capsys, spec, f"{tmp_path}/two.py:factory", "--name", "X=x",
                       "--param", "A=first.weight.T", "--param", "B=second.weight.T")
    assert code == 2
    assert "the spec's param `C` [5] matches no tensor of the module" in err
    assert "--param C=KEY" in err


def test_an_instance_keeps_its_sizes(capsys, tmp_path):
    import textwrap

    (tmp_path / "two_instance.py").write_text(textwrap.dedent(MODULE_SOURCE), encoding="utf-8")
    spec = tmp_path / "two.attn"
    spec.write_text("dim N, D\ninput X: [N, D]\nparam W_first: [D, D]\nparam W_second: [D, D]\n"
                    "output Y: [N, D] = X @ W_first @ W_second\n", encoding="utf-8")
    flags = ["--name", "X=x", "--param", "W_first=first.weight.T", "--param",
             "W_second=second.weight.T"]
    code, out, err = run(capsys, spec, f"{tmp_path}/two_instance.py:built", *flags)
    assert code == 0, out + err  # D is read from the weights: 4 in every case
    assert all(", D=4" in line for line in out.splitlines() if line.startswith("  ok"))
    code, out, err = run(capsys, spec, f"{tmp_path}/two_instance.py:built", "--name", "X=x",
                         "--param", "W_first=first.weight.T", "--param", "W_second=second.weight.T",
                         "--dim", "D=5")
    assert code == 2 and "`first.weight` has shape [4, 4], but the spec's `W_first` is [5, 5]" in err


def test_bad_flags_are_usage_errors(capsys):
    base = [REAL / "bert_self_attention.attn", f"{HF}:bert", "--name", "X=hidden_states",
            "--name", "keep=attention_mask"]
    for flags, expected in [
        (["--mask", "keep=inverted"], "use one of additive, additive-min, keep, drop"),
        (["--mask", "X=keep"], "`X` is not a bool input of the spec"),
        (["--arg", "head_mask=__import__('os')"], "is not a value conformance can pass"),
        (["--arg", "head_mask=Z"], "`Z` in `Z` is not a input, param or dim of the spec"),
        (["--output", "Z=0"], "`Z` is not an output of the spec"),
        (["--param", "Z=query.weight"], "`Z` is not an input or param of the spec"),
        (["--init", "nothing=1"], "--init `nothing`: the factory has no parameter"),
        (["--layout", "W_Q=transpose"], "`W_Q` is written into the module's state, not passed"),
    ]:
        code, _, err = run(capsys, *base, *flags)
        assert code == 2 and expected in err, (flags, err)


def test_a_spec_input_can_be_module_state(capsys, tmp_path):
    """A fixed memory buffer (as a KV cache is) is the spec's input `Mem`: written in place
    from the seed, like a param, because forward does not take it."""
    (tmp_path / "memory.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "class Memory(nn.Module):\n"
        "    def __init__(self, M, D):\n"
        "        super().__init__()\n"
        "        self.register_buffer('memory', torch.empty(M, D))\n\n"
        "    def forward(self, x):\n"
        "        weights = torch.softmax(x @ self.memory.T / self.memory.shape[1] ** 0.5, -1)\n"
        "        return weights @ self.memory\n", encoding="utf-8")
    spec = tmp_path / "memory.attn"
    spec.write_text("dim N, M, D\ninput X: [N, D]\ninput Mem: [M, D]\n"
                    "output Y: [N, D] = softmax(X @ Mem.T / sqrt(D)) @ Mem\n", encoding="utf-8")
    code, out, err = run(capsys, spec, f"{tmp_path}/memory.py:Memory", "--name", "X=x",
                         "--param", "Mem=memory", "--cases", "3")
    assert code == 0, out + err
    assert "Mem -> memory (--param)" in out
    code, out, err = run(capsys, spec, f"{tmp_path}/memory.py:Memory", "--name", "X=x",
                         "--cases", "2")
    assert code == 0 and "Mem -> memory (by shape)" in out, out + err


def test_a_function_takes_arg_and_keyword_only_parameters(capsys, tmp_path):
    (tmp_path / "scaled.py").write_text(
        "import numpy as np\n\n"
        "def attention(Q, K, V, *, scale, causal=True, window=(None, None)):\n"
        "    assert causal is False and window == (None, 3)\n"
        "    S = Q @ K.T * scale\n"
        "    P = np.exp(S - S.max(axis=1, keepdims=True))\n"
        "    return (P / P.sum(axis=1, keepdims=True)) @ V\n", encoding="utf-8")
    spec = ROOT / "examples" / "single_head.attn"
    code, out, err = run(capsys, spec, f"{tmp_path}/scaled.py:attention", "--arg", "scale=d**-0.5",
                         "--arg", "causal=False", "--arg", "window=(None, 3)", "--cases", "3")
    assert code == 0, out + err
    code, _, err = run(capsys, spec, f"{tmp_path}/scaled.py:attention")
    assert code == 2 and "parameter `scale` has no value" in err and "--arg scale=VALUE" in err


def test_a_complex_buffer_survives_the_cast(capsys, tmp_path):
    (tmp_path / "rotary_buffer.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "class Rotate(nn.Module):\n"
        "    def __init__(self, N, h):\n"
        "        super().__init__()\n"
        "        angle = torch.arange(N)[:, None] * 10000 ** (-torch.arange(h) / h)\n"
        "        self.register_buffer('freqs_cis', torch.polar(torch.ones(N, h), angle.float()))\n\n"
        "    def forward(self, x):\n"
        "        z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())\n"
        "        return torch.view_as_real(z * self.freqs_cis).flatten(-2)\n", encoding="utf-8")
    spec = tmp_path / "rotate.attn"
    spec.write_text("dim N, h\ndim d = 2 * h\ninput X: [N, d]\n"
                    "angle = arange(N)[:, None] * 10000 ** (-arange(h) / h)\n"
                    "c = cos(angle)\ns = sin(angle)\n"
                    "output Y: [N, d] = reshape(stack([X[:, ::2] * c - X[:, 1::2] * s, "
                    "X[:, 1::2] * c + X[:, ::2] * s], axis=-1), [N, d])\n", encoding="utf-8")
    code, out, err = run(capsys, spec, f"{tmp_path}/rotary_buffer.py:Rotate", "--name", "X=x",
                         "--dtype", "float32", "--cases", "3")
    assert code == 0, out + err


def test_the_flash_attention_reference_function_conforms_and_a_wrong_flag_is_caught(capsys):
    flags = ["--name", "Q=q", "--name", "K=k", "--name", "V=v", *(
        f"--layout={name}=0,2,1,3" for name in "QKVO"), "--output", "O=0", "--output", "P=1",
        "--dtype", "float32"]
    target = f"{MODULES}/flash_attn_ref.py:attention_ref"
    code, out, err = run(capsys, DATA / "flash_attn_ref.attn", target, *flags,
                         "--arg", "causal=True", "--cases", "3")
    assert code == 0, out + err
    code, out, _ = run(capsys, DATA / "flash_attn_ref.attn", target, *flags)  # causal=False
    assert code == 1 and "at B=1, N=2, G=1, R=1, d=1, H=1 (the smallest failing" in out


def test_a_square_mask_table_is_lifted_as_queries_by_keys(capsys, tmp_path):
    (tmp_path / "masked.py").write_text(
        "import torch\n\n"
        "def attention(q, k, v, mask):\n"
        "    assert mask.shape == (1, 1, q.shape[-2], k.shape[-2]), mask.shape\n"
        "    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + mask\n"
        "    return torch.softmax(scores, -1) @ v\n", encoding="utf-8")
    spec = tmp_path / "masked.attn"
    spec.write_text("dim B, H, N, d\ninput Q: [B, H, N, d]\ninput K: [B, H, N, d]\n"
                    "input V: [B, H, N, d]\ninput keep: bool[N, N]\n"
                    "output O = softmax(where(keep, Q @ K.T / sqrt(d), -inf)) @ V\n",
                    encoding="utf-8")
    code, out, err = run(capsys, spec, f"{tmp_path}/masked.py:attention", "--name", "Q=q",
                         "--name", "K=k", "--name", "V=v", "--name", "keep=mask",
                         "--mask", "keep=additive", "--cases", "3")
    assert code == 0, out + err


PLANTED = [
    ("nanogpt", "is_causal=True", "is_causal=False"),
    ("gemma", "q.mul_(self.scaling)", "q.mul_(self.head_dim ** -0.5 * 1.01)"),
    ("whisper", "self.q_proj(hidden_states) * self.scaling", "self.q_proj(hidden_states)"),
    ("vit", "key_layer.transpose(-1, -2)", "key_layer.transpose(-1, -2).flip(-1)"),
    ("t5", "scores += position_bias_masked", "scores += position_bias_masked.transpose(-1, -2)"),
    ("palm", "torch.cat((-x2, x1), dim=-1)", "torch.cat((x2, -x1), dim=-1)"),
    ("performer", "dim=(-1, -2), keepdim=True).detach()) + eps)",
     "dim=-1, keepdim=True).detach()) + eps)"),
    ("deepseek_mla", "self.kv_norm(kv)", "kv"),
]


@pytest.mark.parametrize(("name", "old", "new"), PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_bug_is_caught(capsys, tmp_path, name, old, new):
    _, spec, target, flags = next(c for c in CORPUS if c[0] == name)
    source = (MODULES / f"{name}.py").read_text(encoding="utf-8")
    assert source.count(old) == 1
    (tmp_path / f"{name}_planted.py").write_text(source.replace(old, new), encoding="utf-8")
    code, out, err = run(capsys, spec, f"{tmp_path}/{name}_planted.py:{target}", *flags,
                         "--cases", "3")
    assert code == 1, out + err
    assert "does not match the spec at" in out
