"""Benchmarks for the PyTorch front end (issue 23). Prints figures; never a timed test.

1. Tracing a Llama-sized attention layer (hidden 4096, 32 heads, 8 kv heads, head_dim 128,
   Hugging Face `LlamaAttention`): the seconds `extract` takes (torch.export, lowering,
   writing) and the seconds `verify` takes on top (every pass on the traced spec). Target:
   seconds, not minutes.
2. The same for nanoGPT's `CausalSelfAttention` with the tool's chosen sizes.
3. `verify` of an `.attn` file, cold, with and without the front end installed in the
   command: the front end must not slow it (torch is never imported for it).
4. `--whole`: a whole nanoGPT `GPT` of 2 blocks and of 12 (docs/torch.md, "Whole models"),
   `verify` of each beside one block's attention traced alone: identical blocks are traced
   once, so 12 blocks should cost about what 2 do.
5. `--torchtyc`: install torchtyc (PyPI) in a scratch virtual environment that sees this
   one's torch, and run `torchtyc check` on the test corpus beside `shapecheck verify`.

Usage: python benchmarks/bench_torch.py [--runs N] [--whole] [--torchtyc]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "torch"

LLAMA = '''
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding


def make():
    config = LlamaConfig(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                         head_dim=128)
    config._attn_implementation = "eager"
    module = LlamaAttention(config, layer_idx=0)
    x = torch.randn(2, 16, 4096)
    positions = torch.arange(16)[None].expand(2, 16)
    cos, sin = LlamaRotaryEmbedding(config)(x, positions)
    return module, {"hidden_states": x, "position_embeddings": (cos, sin),
                    "attention_mask": None}
'''


def _time(function: object, runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = function()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def tracing(runs: int) -> None:
    from shapecheck.api import check_text
    from shapecheck.pytorch.front import extract

    with tempfile.TemporaryDirectory() as folder:
        llama = Path(folder) / "llama_layer.py"
        llama.write_text(LLAMA)
        for label, target in (("Llama attention (4096, 32 heads, 8 kv)", f"{llama}:make"),
                              ("nanoGPT CausalSelfAttention (chosen sizes)",
                               f"{DATA / 'nanogpt.py'}:CausalSelfAttention")):
            start = time.perf_counter()
            import torch  # noqa: F401  (the import is timed once, apart)
            imported = time.perf_counter() - start
            seconds, extraction = _time(lambda: extract(target), runs)
            checked, program = _time(lambda: check_text(extraction.text), runs)  # type: ignore[attr-defined]
            statements = len(extraction.lowered.statements)  # type: ignore[attr-defined]
            print(f"{label}: extract {seconds:.2f} s (median of {runs}), verify of the "
                  f"traced spec {checked * 1000:.0f} ms, {statements} statements, "
                  f"{len(program.diagnostics)} diagnostics; import torch {imported:.2f} s")  # type: ignore[attr-defined]


WHOLE = '''
import sys
sys.path.insert(0, {folder!r})
import torch
from nanogpt_model import GPT, GPTConfig


def _gpt(layers):
    torch.manual_seed(0)
    config = GPTConfig(block_size=16, vocab_size=97, n_layer=layers, n_head=5, n_embd=35)
    return GPT(config), {{"idx": torch.randint(0, 97, (2, 9))}}


def two():
    return _gpt(2)


def twelve():
    return _gpt(12)


def block():
    model, inputs = _gpt(1)
    return model.transformer.h[0].attn, {{"x": torch.randn(2, 9, 35)}}
'''


def whole_models(runs: int) -> None:
    import contextlib
    import io

    from shapecheck.pytorch.front.sourcemap import check

    with tempfile.TemporaryDirectory() as folder:
        module = Path(folder) / "gpts.py"
        module.write_text(WHOLE.format(folder=str(ROOT / "tests" / "data" / "whole_models")))
        times = {}
        with contextlib.redirect_stderr(io.StringIO()):
            check(f"{module}:block")  # the first trace pays torch.export's imports
        for name in ("block", "two", "twelve"):
            with contextlib.redirect_stderr(io.StringIO()):  # GPT prints its size
                times[name], _ = _time(lambda: check(f"{module}:{name}"), runs)
        print(f"nanoGPT GPT: verify of 2 blocks {times['two']:.2f} s, of 12 blocks "
              f"{times['twelve']:.2f} s; one block's attention alone {times['block']:.2f} s "
              f"(median of {runs})")


def cold_start(runs: int) -> None:
    spec = ROOT / "examples" / "multi_head.attn"
    command = [sys.executable, "-m", "shapecheck", "verify", str(spec)]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    check = subprocess.run([sys.executable, "-c", "import sys, shapecheck.cli as c\n"
                            "try:\n    c.main(['verify', %r])\nexcept SystemExit:\n    pass\n"
                            "print('torch' in sys.modules)" % str(spec)],
                           capture_output=True, text=True)
    print(f"verify {spec.name} cold: {statistics.median(times) * 1000:.0f} ms (median of {runs}); "
          f"torch imported: {check.stdout.strip().splitlines()[-1]}")


def torchtyc() -> None:
    with tempfile.TemporaryDirectory() as folder:
        venv = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       check=True)
        python = venv / "bin" / "python"
        installed = subprocess.run([str(python), "-m", "pip", "install", "-q", "torchtyc"],
                                   capture_output=True, text=True)
        if installed.returncode != 0:
            print(f"torchtyc could not be installed: {installed.stderr.strip()[-300:]}")
            return
        for path in sorted(DATA.glob("*.py")):
            ran = subprocess.run([str(venv / "bin" / "torchtyc"), "check", str(path)],
                                 capture_output=True, text=True, env={**os.environ})
            flagged = ran.stdout.count("error[")
            print(f"torchtyc {path.name}: exit {ran.returncode}, {flagged} error(s)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--torchtyc", action="store_true")
    parser.add_argument("--whole", action="store_true", help="whole models (nanoGPT GPT)")
    options = parser.parse_args()
    if options.whole:
        whole_models(options.runs)
        return
    tracing(options.runs)
    cold_start(options.runs)
    if options.torchtyc:
        torchtyc()


if __name__ == "__main__":
    main()
