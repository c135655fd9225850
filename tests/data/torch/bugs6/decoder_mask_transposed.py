# BUG (one edit) of tests/data/whole_models/decoder.py, line 70 there: the model's causal mask transposed.
# class: mask_transposed
# edited line(s) here: 74
# the rest is the original, unchanged
"""A small decoder whose model builds the causal mask once and passes it to every block (as
many research `model.py` files do), and a diffusion-style block with cross-attention."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim, heads, context_dim=None):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(context_dim or dim, dim, bias=False)
        self.to_v = nn.Linear(context_dim or dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, context=None, mask=None):
        B, T, C = x.shape
        context = x if context is None else context
        q = self.to_q(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = self.to_k(context).view(B, -1, self.heads, C // self.heads).transpose(1, 2)
        v = self.to_v(context).view(B, -1, self.heads, C // self.heads).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.softmax(scores, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)
        return self.to_out(out)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        x = x + self.attn(self.norm1(x), mask=mask)
        return x + self.mlp(self.norm2(x))


class DropAttention(Attention):
    """The other convention: the mask is true where a score is dropped."""

    def forward(self, x, context=None, mask=None):
        B, T, C = x.shape
        q = self.to_q(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = self.to_k(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = self.to_v(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
        scores = scores.masked_fill(mask, float("-inf"))
        out = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.to_out(out)


class Decoder(nn.Module):
    def __init__(self, vocab=97, dim=35, heads=5, layers=3, block_size=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def causal_mask(self, T, device):
        return torch.tril(torch.ones(T, T, dtype=torch.bool, device=device)).transpose(0, 1)

    def forward(self, idx):
        x = self.embed(idx)
        mask = self.causal_mask(idx.shape[1], idx.device)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))


class TransposedMaskDecoder(Decoder):
    def causal_mask(self, T, device):
        return torch.triu(torch.ones(T, T, dtype=torch.bool, device=device))


class DropMaskDecoder(Decoder):
    """Correct: `triu(..., diagonal=1)` is the future, and the blocks drop it."""

    def __init__(self):
        super().__init__()
        for block in self.blocks:
            block.attn = DropAttention(35, 5)

    def causal_mask(self, T, device):
        return torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)


def make():
    torch.manual_seed(0)
    return Decoder().eval(), {"idx": torch.randint(0, 97, (2, 9))}


def make_drop_mask():
    torch.manual_seed(0)
    return DropMaskDecoder().eval(), {"idx": torch.randint(0, 97, (2, 9))}


def make_transposed_mask():
    torch.manual_seed(0)
    return TransposedMaskDecoder().eval(), {"idx": torch.randint(0, 97, (2, 9))}


class CrossAttentionBlock(nn.Module):
    """A diffusion-style transformer block: self-attention over the image tokens, then
    cross-attention to the text context, then a feed-forward."""

    def __init__(self, dim=35, heads=5, context_dim=22):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn1 = Attention(dim, heads)
        self.attn2 = Attention(dim, heads, context_dim)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, context):
        x = x + self.attn1(self.norm1(x))
        x = x + self.attn2(self.norm2(x), context=context)
        return x + self.ff(self.norm3(x))


def cross_block():
    torch.manual_seed(0)
    return CrossAttentionBlock().eval(), {"x": torch.randn(2, 16, 35), "context": torch.randn(2, 7, 22)}
