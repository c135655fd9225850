# MIT License, Copyright (c) Suno, Inc
"""suno-ai/bark (MIT), commit 15606ed12fd07bfea79bed6413615adf002da983, `bark/model.py`
lines 5-120 as written there, after its docstring crediting nanoGPT (`LayerNorm`, `CausalSelfAttention`, `MLP`, `Block`; the `GPT`
around them left out): nanoGPT's attention with a key/value cache passed in (`layer_past`,
concatenated before the new keys: `torch.cat((past_key, k), dim=-2)`) and returned
(`present`), SDPA `is_causal` only without a past, and the manual path's causal buffer cut
`self.bias[:,:,FULL_T-T:FULL_T,:FULL_T]`. The factories call `Block` as `GPT.forward`
does: a prompt with `use_cache=True`, then one step (`t == 1`) with the cache."""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

class LayerNorm(nn.Module):
    """ LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False """

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        # regularization
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        # flash attention make GPU go brrrrr but support is only in PyTorch nightly and still a bit scary
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        if not self.flash:
            # print("WARNING: using slow attention. Flash Attention atm needs PyTorch nightly and dropout=0.0")
            # causal mask to ensure that attention is only applied to the left in the input sequence
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                        .view(1, 1, config.block_size, config.block_size))

    def forward(self, x, layer_past=None, use_cache=False):
        B, T, C = x.size() # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k ,v  = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)

        if layer_past is not None:
            past_key = layer_past[0]
            past_value = layer_past[1]
            k = torch.cat((past_key, k), dim=-2)
            v = torch.cat((past_value, v), dim=-2)

        FULL_T = k.shape[-2]

        if use_cache is True:
            present = (k, v)
        else:
            present = None

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        if self.flash:
            # efficient attention using Flash Attention CUDA kernels
            if layer_past is not None:
                # in theory the attention is still causal but because we're computing it incrementally,
                # the last query can attend on all previous keys/values, which which is equivalent to non-causal 
                is_causal = False
            else:
                is_causal = True

            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout, is_causal=is_causal)
        else:
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:,:,FULL_T-T:FULL_T,:FULL_T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C) # re-assemble all head outputs side by side

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return (y, present)

class MLP(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.c_fc    = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj  = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)
        self.gelu = nn.GELU()

    def forward(self, x):
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x

class Block(nn.Module):

    def __init__(self, config, layer_idx):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)
        self.layer_idx = layer_idx

    def forward(self, x, layer_past=None, use_cache=False):
        attn_output, prev_kvs = self.attn(self.ln_1(x), layer_past=layer_past, use_cache=use_cache)
        x = x + attn_output
        x = x + self.mlp(self.ln_2(x))
        return (x, prev_kvs)

@dataclass
class GPTConfig:
    block_size: int = 1024
    input_vocab_size: int = 10_048
    output_vocab_size: int = 10_048
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True # True: bias in Linears and LayerNorms, like GPT-2. False: a bit better and faster


# ---- factories: Block as GPT.forward calls it (n_embd 768, 12 heads; here 48, 4 heads,
# block_size 32)


def _config():
    return GPTConfig(block_size=32, n_layer=1, n_head=4, n_embd=48)


class _Layer(nn.Module):
    def __init__(self, manual: bool = False):
        super().__init__()
        self.block = Block(_config(), 0)
        if manual:
            # the path a torch without scaled_dot_product_attention takes, as __init__ sets it
            self.block.attn.flash = False
            self.block.attn.register_buffer("bias", torch.tril(torch.ones(32, 32)).view(1, 1, 32, 32))

    def forward(self, x):
        # the prompt: no past, use_cache=True
        x, present = self.block(x, layer_past=None, use_cache=True)
        return x, present[0], present[1]


class _Step(_Layer):
    def forward(self, x, past_key, past_value):
        # one step after the prompt: t == 1, the past of every layer passed in
        x, present = self.block(x, layer_past=(past_key, past_value), use_cache=True)
        return x, present[0], present[1]


def make():
    return _Layer().eval(), {"x": torch.randn(2, 11, 48)}


def make_manual():
    return _Layer(manual=True).eval(), {"x": torch.randn(2, 11, 48)}


def make_step():
    return _Step().eval(), {"x": torch.randn(2, 1, 48), "past_key": torch.randn(2, 4, 11, 12),
                            "past_value": torch.randn(2, 4, 11, 12)}


def make_step_manual():
    return _Step(manual=True).eval(), {
        "x": torch.randn(2, 1, 48), "past_key": torch.randn(2, 4, 11, 12),
        "past_value": torch.randn(2, 4, 11, 12)}
