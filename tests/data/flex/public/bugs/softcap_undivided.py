"""A tanh soft-cap applied as tanh(score) * cap, without dividing the score by the cap first."""
import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention



def make_score_mod(n_heads, soft_cap=30.0):
    def tanh_softcap(score, b, h, q_idx, kv_idx):
        return soft_cap * torch.tanh(score)

    return tanh_softcap

def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads
        self.score_mod = make_score_mod(n_heads)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        block_mask = create_block_mask(causal_mask, None, None, T, T, device=x.device)
        out = flex_attention(q, k, v, score_mod=self.score_mod, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def make():
    return Attention(48, 4), {"x": torch.randn(2, 24, 48)}
