"""Modules called the way models call them (issue 29): arguments through **kwargs, a tuple
of rotary tables, a cache object the module writes into, SDPA with grouped-query heads,
and the operators of in-place cache writes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Cache:
    """A plain Python object holding tensors (as a library's KV cache does)."""

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def update(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys:
            key = torch.cat([self.keys[0], key], dim=-2)
            value = torch.cat([self.values[0], value], dim=-2)
        self.keys, self.values = [key], [value]
        return key, value


class Attention(nn.Module):
    def __init__(self, hidden: int = 42, heads: int = 6, kv_heads: int = 3) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x, position_embeddings=None, attention_mask=None, cache=None, **kwargs):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = q * cos + q * sin, k * cos + k * sin
        if cache is not None:
            k, v = cache.update(k, v)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask, enable_gqa=True)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


def _call(cached: int) -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    module = Attention()
    b, t = 3, 5
    cache = Cache()
    if cached:
        cache.update(torch.randn(b, 3, cached, 7), torch.randn(b, 3, cached, 7))
    mask = torch.zeros(b, 1, t, cached + t)
    return module, {"x": torch.randn(b, t, 42),
                    "position_embeddings": (torch.randn(1, 1, t, 7), torch.randn(1, 1, t, 7)),
                    "attention_mask": mask, "cache": cache,
                    "position_ids": torch.arange(t)[None], "use_cache": True}


def prefill() -> tuple[nn.Module, dict]:
    """The first call: an empty cache, flags and positions through **kwargs."""
    return _call(0)


def decode() -> tuple[nn.Module, dict]:
    """A later call: the cache holds earlier keys and values."""
    return _call(4)


class Writes(nn.Module):
    """A preallocated buffer written in slices, and an elementwise floor (HF's min-dtype)."""

    def forward(self, x):
        out = x.new_empty(x.shape[0], 2 * x.shape[1], x.shape[2])
        out[:, : x.shape[1]] = x
        out[:, x.shape[1]:] = x * 2
        scores = out @ out.transpose(-1, -2) / math.sqrt(x.shape[-1])
        scores = torch.max(scores, torch.tensor(torch.finfo(scores.dtype).min))
        return torch.softmax(scores, dim=-1)


def writes() -> tuple[nn.Module, dict]:
    return Writes(), {"x": torch.randn(3, 5, 7)}
