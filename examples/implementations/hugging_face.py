"""Hugging Face attention layers as `shapecheck conform` targets: each factory only builds
the real module from the spec's dims (a config with tiny sizes; nothing is downloaded).
The flags on each spec's first lines do the rest: which input is which argument, the
mask's convention, which returned entry is which output (docs/conform.md, "Real modules").
"""

import torch
from transformers import BertConfig, GPT2Config, LlamaConfig
from transformers.models.bert.modeling_bert import BertSelfAttention
from transformers.models.gpt2.modeling_gpt2 import GPT2Attention
from transformers.models.llama.modeling_llama import LlamaAttention


def llama(D, H, G, d):
    config = LlamaConfig(hidden_size=D, num_attention_heads=H, num_key_value_heads=G,
                         head_dim=d, attn_implementation="eager")
    return LlamaAttention(config, layer_idx=0)


def gpt2(D, H, N, dtype):
    config = GPT2Config(n_embd=D, n_head=H, attn_implementation="eager")
    causal = torch.full((N, N), torch.finfo(dtype).min, dtype=dtype).triu(1)  # as GPT2Model builds it
    return GPT2Attention(config, layer_idx=0), {"attention_mask": causal[None, None]}


def bert(D, H):
    config = BertConfig(hidden_size=D, num_attention_heads=H, attn_implementation="eager")
    return BertSelfAttention(config)
