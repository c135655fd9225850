"""A decode step whose causal mask lost the cache offset: q_idx >= kv_idx with the new
queries after the cached keys lets them see only the first keys of the cache."""

import math

import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


class DecodeStep(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wkv = nn.Linear(dim, 2 * dim, bias=False)
        self.n_heads = n_heads
        self.head_dim = dim // n_heads

    def forward(self, x, k_cache, v_cache):
        B, S, C = x.shape
        q = self.wq(x).view(B, S, self.n_heads, self.head_dim).transpose(1, 2)
        k_new, v_new = self.wkv(x).view(B, S, 2, self.n_heads, self.head_dim).unbind(2)
        k = torch.cat([k_cache, k_new.transpose(1, 2)], dim=2)
        v = torch.cat([v_cache, v_new.transpose(1, 2)], dim=2)
        offset = k_cache.shape[2]

        def causal_offset(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx

        block_mask = create_block_mask(causal_offset, None, None, S, k.shape[2],
                                       device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask,
                             scale=1.0 / math.sqrt(self.head_dim))
        return out.transpose(1, 2).reshape(B, S, C)


def make():
    return DecodeStep(48, 4), {"x": torch.randn(2, 3, 48), "k_cache": torch.randn(2, 4, 20, 12),
                               "v_cache": torch.randn(2, 4, 20, 12)}
