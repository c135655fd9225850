"""A ViT-style attention (lucidrains/vit-pytorch era, issue 65 in spirit): the heads are
merged with a reshape that never moves them back next to their features."""
import torch
from torch import nn


class Attention(nn.Module):

    def __init__(self, dim, heads=8, dim_head=64):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)

    def forward(self, x):
        b, n, _ = x.shape
        h = self.heads
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q = q.reshape(b, n, h, -1).transpose(1, 2)
        k = k.reshape(b, n, h, -1).transpose(1, 2)
        v = v.reshape(b, n, h, -1).transpose(1, 2)
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        attn = dots.softmax(dim=-1)
        out = torch.matmul(attn, v)
        out = out.reshape(b, n, -1)
        return self.to_out(out)
