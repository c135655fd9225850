"""The forms the sixth public corpus (gpt-fast, llama2.c, CaiT, MaxViT, PVT
v2) taught the front end, each in a small module: what tests/test_torch_public6.py checks is
lowered, clean and conforming."""
import torch
from torch import nn
from torch.nn import functional as F


class PositionsCache(nn.Module):
    # gpt-fast's KVCache: `k_cache[:, :, input_pos] = k` writes the keys at a vector of
    # positions (index_put), then the whole cache is attended to under a mask
    def __init__(self, dim=48, heads=4, length=16):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.register_buffer("k_cache", torch.zeros(2, heads, length, dim // heads))
        self.register_buffer("v_cache", torch.zeros(2, heads, length, dim // heads))
        self.register_buffer("causal", torch.tril(torch.ones(length, length, dtype=torch.bool)))

    def forward(self, x, input_pos):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.dim_head).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        k_out, v_out = self.k_cache, self.v_cache
        k_out[:, :, input_pos] = k
        v_out[:, :, input_pos] = v
        mask = self.causal[None, None, input_pos]
        y = F.scaled_dot_product_attention(q, k_out, v_out, attn_mask=mask)
        return y.transpose(1, 2).reshape(b, n, -1)


def positions_cache():
    return PositionsCache().eval(), {"x": torch.randn(2, 6, 48), "input_pos": torch.arange(6)}


class HStackMask(nn.Module):
    # Meta's llama: the causal mask widened for the cache by
    # `torch.hstack([torch.zeros((T, start_pos)), mask])`
    def __init__(self, dim=48, heads=4):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.dim_head).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        mask = torch.hstack([torch.zeros((n, 0)), mask])
        att = (q @ k.transpose(-2, -1)) / self.dim_head ** 0.5 + mask
        y = att.softmax(dim=-1) @ v
        return y.transpose(1, 2).reshape(b, n, -1)


def hstack_mask():
    return HStackMask().eval(), {"x": torch.randn(2, 7, 48)}


class TalkingHeads(nn.Module):
    # CaiT: the heads' scores mixed by a learned [heads, heads] matrix before the softmax
    # (torch sizes the product `T**2 // T`) and the weight maps mixed again after it
    def __init__(self, dim=48, heads=4):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.pre = nn.Parameter(torch.randn(heads, heads))
        self.post = nn.Parameter(torch.randn(heads, heads))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.dim_head).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        dots = torch.einsum('b h i d, b h j d -> b h i j', q, k) * self.dim_head ** -0.5
        dots = torch.einsum('b h i j, h g -> b g i j', dots, self.pre)
        attn = dots.softmax(dim=-1)
        attn = torch.einsum('b h i j, h g -> b g i j', attn, self.post)
        out = torch.einsum('b h i j, b h j d -> b h i d', attn, v)
        return out.transpose(1, 2).reshape(b, n, -1)


def talking_heads():
    return TalkingHeads().eval(), {"x": torch.randn(2, 7, 48)}
