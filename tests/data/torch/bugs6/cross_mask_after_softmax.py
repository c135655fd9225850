# BUG (one edit) of examples/python/cross_attention.py, line 33 there: masked_fill of the weights after the softmax.
# class: mask_after_softmax
# edited line(s) here: 37, 38
# the rest is the original, unchanged
"""Cross-attention as encoder-decoder models write it: queries from the decoder's states,
keys and values from the encoder's (the context); a padding mask over the context's
positions. A case of the bug benchmark (benchmarks/bench_bugs.py, docs/bugs.md)::

    shapecheck verify examples/python/cross_attention.py:make
"""

import torch
from torch import nn


class CrossAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.scale = self.head_dim ** -0.5
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, hidden_states, context, context_mask):
        b, n, _ = hidden_states.shape
        m = context.shape[1]
        q = self.q_proj(hidden_states)
        k = self.k_proj(context)
        v = self.v_proj(context)
        q = q.reshape(b, n, self.heads, self.head_dim).transpose(1, 2)
        k = k.reshape(b, m, self.heads, self.head_dim).transpose(1, 2)
        v = v.reshape(b, m, self.heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        weights = scores.softmax(dim=-1)
        weights = weights.masked_fill(~context_mask[:, None, None, :], float("-inf"))
        out = torch.matmul(weights, v)
        out = out.transpose(1, 2).reshape(b, n, -1)
        return self.out_proj(out)


def make():
    torch.manual_seed(0)
    module = CrossAttention(dim=60, heads=6)
    hidden = torch.randn(7, 9, 60)
    context = torch.randn(7, 11, 60)
    mask = torch.ones(7, 11, dtype=torch.bool)
    mask[:, 8:] = False
    return module, {"hidden_states": hidden, "context": context, "context_mask": mask}
