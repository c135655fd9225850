"""torchtitan's sliding window with its causal half reversed: kv_idx >= q_idx for kv_idx <= q_idx."""
import math

import torch
from torch import nn
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention, or_masks



def make_mask_mod(window_size):
    def sliding_window_mod(b, h, q_idx, kv_idx):
        return (kv_idx >= q_idx) & (q_idx - kv_idx < window_size)

    return sliding_window_mod

class Attention(nn.Module):
    def __init__(self, dim, n_heads, setting=6):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads
        self.setting = setting

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        block_mask = create_block_mask(make_mask_mod(self.setting), None, None, T, T,
                                       device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def make():
    return Attention(48, 4), {"x": torch.randn(2, 24, 48)}
