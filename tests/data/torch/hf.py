"""Hugging Face attention layers (transformers), built from configs with tiny sizes."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from transformers import BertConfig, GPT2Config, LlamaConfig
from transformers.models.bert.modeling_bert import BertSelfAttention
from transformers.models.gpt2.modeling_gpt2 import GPT2Attention
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding


def gpt2():
    config = GPT2Config(n_embd=35, n_head=5, n_positions=64, attn_pdrop=0.0, resid_pdrop=0.0)
    config._attn_implementation = "eager"
    return GPT2Attention(config, layer_idx=0), {"hidden_states": torch.randn(3, 11, 35)}


def bert():
    config = BertConfig(hidden_size=35, num_attention_heads=5, attention_probs_dropout_prob=0.0)
    config._attn_implementation = "eager"
    return BertSelfAttention(config), {"hidden_states": torch.randn(3, 11, 35)}


def llama():
    config = LlamaConfig(hidden_size=70, num_attention_heads=5, num_key_value_heads=1,
                         head_dim=14)
    config._attn_implementation = "eager"
    module = LlamaAttention(config, layer_idx=0)
    x = torch.randn(3, 11, 70)
    positions = torch.arange(11)[None].expand(3, 11)
    cos, sin = LlamaRotaryEmbedding(config)(x, positions)
    return module, {"hidden_states": x, "position_embeddings": (cos, sin), "attention_mask": None}


def gpt2_small_powers():
    """Sizes as people write them (powers of two): the dims still come out right."""
    config = GPT2Config(n_embd=32, n_head=4, n_positions=16, attn_pdrop=0.0, resid_pdrop=0.0)
    config._attn_implementation = "eager"
    return GPT2Attention(config, layer_idx=0), {"hidden_states": torch.randn(2, 8, 32)}


def llama_small_powers():
    config = LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=8)
    config._attn_implementation = "eager"
    module = LlamaAttention(config, layer_idx=0)
    x = torch.randn(2, 8, 32)
    positions = torch.arange(8)[None].expand(2, 8)
    cos, sin = LlamaRotaryEmbedding(config)(x, positions)
    return module, {"hidden_states": x, "position_embeddings": (cos, sin), "attention_mask": None}


def bert_sdpa():
    config = BertConfig(hidden_size=32, num_attention_heads=4, attention_probs_dropout_prob=0.0)
    config._attn_implementation = "sdpa"
    return BertSelfAttention(config), {"hidden_states": torch.randn(2, 8, 32)}
