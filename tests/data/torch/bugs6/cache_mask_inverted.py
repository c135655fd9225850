# BUG (one edit) of examples/python/causal_cache.py, line 36 there: fill where the tril keeps.
# class: mask_inverted
# edited line(s) here: 40
# the rest is the original, unchanged
"""Causal self-attention at a decode step with a KV cache, written as nanoGPT writes it.

The new queries are the last ``T`` of ``T_k = cached + T`` keys: the causal mask is the
lower triangle aligned bottom-right (``diagonal=T_k - T``). A case of the bug benchmark
(benchmarks/bench_bugs.py, docs/bugs.md); ``make`` is a factory target::

    shapecheck verify examples/python/causal_cache.py:make
"""

import math

import torch
from torch import nn
from torch.nn import functional as F


class CachedCausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.n_embd = n_embd
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x, k_cache, v_cache):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = torch.cat([k_cache, k], dim=2)
        v = torch.cat([v_cache, v], dim=2)
        T_k = k.size(2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(T, T_k, dtype=torch.bool, device=x.device).tril(diagonal=T_k - T)
        att = att.masked_fill(mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


def make():
    torch.manual_seed(0)
    module = CachedCausalSelfAttention(n_embd=60, n_head=6)
    x = torch.randn(7, 3, 60)
    cache = torch.randn(7, 6, 5, 10), torch.randn(7, 6, 5, 10)
    return module, {"x": x, "k_cache": cache[0], "v_cache": cache[1]}
