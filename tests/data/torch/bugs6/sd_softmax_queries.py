# BUG (one edit) of tests/data/torch/public/sd_cross_attention.py, line 60 there: softmax over the queries of [(b h), i, j].
# class: softmax
# edited line(s) here: 64
# the rest is the original, unchanged
"""CompVis/stable-diffusion `ldm/modules/attention.py` (CreativeML Open RAIL-M, Robin Rombach,
Patrick Esser and contributors): `CrossAttention` and the helpers it calls (`exists`,
`default`), as written there. Factories: `make` (self-attention, `attn1` of
`BasicTransformerBlock`), `make_cross` (`attn2`, on a context of another width),
`make_masked` (self-attention with a key padding mask [b, j])."""
from inspect import isfunction

import torch
from torch import nn, einsum
from einops import rearrange, repeat


def exists(val):
    return val is not None


def default(val, d):
    if exists(val):
        return val
    return d() if isfunction(d) else d


class CrossAttention(nn.Module):
    def __init__(self, query_dim, context_dim=None, heads=8, dim_head=64, dropout=0.):
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = default(context_dim, query_dim)

        self.scale = dim_head ** -0.5
        self.heads = heads

        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(context_dim, inner_dim, bias=False)

        self.to_out = nn.Sequential(
            nn.Linear(inner_dim, query_dim),
            nn.Dropout(dropout)
        )

    def forward(self, x, context=None, mask=None):
        h = self.heads

        q = self.to_q(x)
        context = default(context, x)
        k = self.to_k(context)
        v = self.to_v(context)

        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> (b h) n d', h=h), (q, k, v))

        sim = einsum('b i d, b j d -> b i j', q, k) * self.scale

        if exists(mask):
            mask = rearrange(mask, 'b ... -> b (...)')
            max_neg_value = -torch.finfo(sim.dtype).max
            mask = repeat(mask, 'b j -> (b h) () j', h=h)
            sim.masked_fill_(~mask, max_neg_value)

        # attention, what we cannot get enough of
        attn = sim.softmax(dim=1)

        out = einsum('b i j, b j d -> b i d', attn, v)
        out = rearrange(out, '(b h) n d -> b n (h d)', h=h)
        return self.to_out(out)


def make():
    attn = CrossAttention(query_dim=20, heads=4, dim_head=6).eval()
    return attn, {"x": torch.randn(2, 9, 20)}


def make_cross():
    attn = CrossAttention(query_dim=20, context_dim=12, heads=4, dim_head=6).eval()
    return attn, {"x": torch.randn(2, 9, 20), "context": torch.randn(2, 7, 12)}


def make_masked():
    attn = CrossAttention(query_dim=20, heads=4, dim_head=6).eval()
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[0, 6:] = False
    return attn, {"x": torch.randn(2, 9, 20), "mask": mask}
