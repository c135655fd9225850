"""A padded batch in a bidirectional encoder whose padding mask compares the query with
each sequence's length (q_idx < lengths[b]) where the key was meant: every real query
attends to the padded keys."""

import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


class KeyLengths(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads

    def forward(self, x, lengths):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)

        def padding(b, h, q_idx, kv_idx):
            return q_idx < lengths[b]

        block_mask = create_block_mask(padding, B, None, T, T, device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def make():
    return KeyLengths(48, 4), {"x": torch.randn(2, 24, 48), "lengths": torch.tensor([24, 17])}
