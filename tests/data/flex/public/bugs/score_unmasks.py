"""A causal mask written as a score_mod, with 0 where -inf was meant: the future keys keep a score of 0 and are attended."""
import torch
from torch import nn
from torch.nn.attention.flex_attention import flex_attention



def make_score_mod(n_heads):
    def causal_score(score, b, h, q_idx, kv_idx):
        return torch.where(q_idx >= kv_idx, score, 0.0)

    return causal_score

class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads
        self.score_mod = make_score_mod(n_heads)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        out = flex_attention(q, k, v, score_mod=self.score_mod)
        return out.transpose(1, 2).reshape(B, T, C)


def make():
    return Attention(48, 4), {"x": torch.randn(2, 24, 48)}
