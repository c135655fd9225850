# BUG (one edit) of tests/data/torch/public2/perceiver_attention.py, line 48 there: the scale left out.
# class: scale
# edited line(s) here: 52
# the rest is the original, unchanged
"""lucidrains/perceiver-pytorch `perceiver_pytorch/perceiver_pytorch.py` (MIT, Phil Wang):
`Attention` (with the helpers `exists`, `default`, `l1norm` it calls), as written there.
The factory calls it as `Perceiver` does: cross attention from the latents to the data,
with the data's boolean padding mask."""
from __future__ import annotations

import torch
from torch import nn, einsum
import torch.nn.functional as F

from einops import rearrange, repeat


def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

def l1norm(t, dim = -1, eps = 1e-8):
    return F.normalize(t, p = 1, dim = dim, eps = eps)


class Attention(nn.Module):
    def __init__(self, query_dim, context_dim = None, heads = 8, dim_head = 64, dropout = 0.):
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = default(context_dim, query_dim)

        self.scale = dim_head ** -0.5
        self.heads = heads

        self.to_q = nn.Linear(query_dim, inner_dim, bias = False)
        self.to_kv = nn.Linear(context_dim, inner_dim * 2, bias = False)

        self.dropout = nn.Dropout(dropout)
        self.to_out = nn.Linear(inner_dim, query_dim)

    def forward(self, x, context = None, mask = None, inverted_attention = False):
        h = self.heads

        q = self.to_q(x)
        context = default(context, x)
        k, v = self.to_kv(context).chunk(2, dim = -1)

        q, k, v = (rearrange(t, 'b n (h d) -> (b h) n d', h = h) for t in (q, k, v))

        sim = einsum('b i d, b j d -> b i j', q, k)

        if exists(mask):
            mask = rearrange(mask, 'b ... -> b (...)')
            max_neg_value = -torch.finfo(sim.dtype).max
            mask = repeat(mask, 'b j -> (b h) () j', h = h)
            sim.masked_fill_(~mask, max_neg_value)

        # attention, what we cannot get enough of

        if inverted_attention:
            attn = sim.softmax(dim = -2)

            if exists(mask):
                attn = attn.masked_fill(~mask, 0.)

            attn = l1norm(attn)
        else:
            attn = sim.softmax(dim = -1)

        attn = self.dropout(attn)

        # aggregate

        out = einsum('b i j, b j d -> b i d', attn, v)
        out = rearrange(out, '(b h) n d -> b n (h d)', h = h)
        return self.to_out(out)


def make():
    module = Attention(query_dim=24, context_dim=20, heads=2, dim_head=8).eval()
    latents = torch.randn(2, 5, 24)
    data = torch.randn(2, 9, 20)
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[1, 6:] = False
    return module, {"x": latents, "context": data, "mask": mask}
