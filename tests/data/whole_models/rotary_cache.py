"""A small rotary decoder at a decode step (as research `model.py` files write one): the
model numbers the new tokens, makes the rotary tables once and passes them, with each
layer's cached keys and values, to every block. `RotaryDecoder` numbers the new tokens after
the cache; `FromZeroDecoder` numbers them from 0 again, ignoring the cache (issue 30: the
positions a model builds, checked where they feed attention)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin, past_k, past_v):
        B, T, C = x.shape
        q = self.wq(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        P = past_k.shape[2]
        keep = torch.tril(torch.ones(T, P + T, dtype=torch.bool, device=x.device), diagonal=P)
        scores = scores.masked_fill(~keep, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.wo(out.transpose(1, 2).reshape(B, T, C)), k, v


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.RMSNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.RMSNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 3 * dim), nn.SiLU(), nn.Linear(3 * dim, dim))

    def forward(self, x, cos, sin, past_k, past_v):
        h, k, v = self.attn(self.norm1(x), cos, sin, past_k, past_v)
        x = x + h
        return x + self.mlp(self.norm2(x)), k, v


class RotaryDecoder(nn.Module):
    def __init__(self, vocab=97, dim=36, heads=3, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        head_dim = dim // heads
        inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def positions(self, T, past_len, device):
        return torch.arange(past_len, past_len + T, device=device)

    def forward(self, idx, past_keys, past_values):
        T = idx.shape[1]
        pos = self.positions(T, past_keys.shape[3], idx.device)
        freqs = pos[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed(idx)
        for i, block in enumerate(self.blocks):
            x, _, _ = block(x, cos, sin, past_keys[i], past_values[i])
        return self.head(self.norm(x))


class FromZeroDecoder(RotaryDecoder):
    def positions(self, T, past_len, device):
        return torch.arange(T, device=device)


def _inputs():
    torch.manual_seed(0)
    idx = torch.randint(0, 97, (2, 3))
    past_keys = torch.randn(2, 2, 3, 5, 12)  # layers, batch, heads, cached tokens, head width
    past_values = torch.randn(2, 2, 3, 5, 12)
    return {"idx": idx, "past_keys": past_keys, "past_values": past_values}


def make_decode():
    torch.manual_seed(0)
    return RotaryDecoder().eval(), _inputs()


def make_decode_from_zero():
    torch.manual_seed(0)
    return FromZeroDecoder().eval(), _inputs()
