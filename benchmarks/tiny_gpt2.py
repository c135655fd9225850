"""A whole tiny model for `bench_python_target.py --target benchmarks/tiny_gpt2.py:make`
(issue 36 item 4): Hugging Face's `GPT2Model`, two layers, width 64, no cache."""

import torch
from transformers import GPT2Config, GPT2Model


def make():
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64,
                        use_cache=False, bos_token_id=0, eos_token_id=0,
                        attn_implementation="eager")
    return GPT2Model(config), {"input_ids": torch.randint(0, 128, (2, 16))}
