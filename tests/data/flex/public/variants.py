"""Other ways FlexAttention is called in public code: a causal mask as a score_mod (no
BlockMask), functools.partial over document ids, a compiled flex_attention, a per-head
scale table, chunked (block-diagonal) attention, register tokens with a NATTEN-like local
window, Gemma 2's soft-capped sliding window with grouped heads, and a BlockMask with the
heads given. Modules written for this corpus, in the forms of lucidrains' and
gpt-fast's FlexAttention code and of the PyTorch FlexAttention blog."""

import functools

import torch
from torch import nn
from torch.nn.attention.flex_attention import (
    and_masks,
    create_block_mask,
    flex_attention,
    or_masks,
)

compiled_flex_attention = torch.compile(flex_attention, dynamic=False)


class Base(nn.Module):
    def __init__(self, dim=48, heads=4):
        super().__init__()
        self.to_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)
        self.heads = heads

    def split(self, x):
        b, n, d = x.shape
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        return [t.reshape(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v)]

    def merge(self, out):
        b, h, n, d = out.shape
        return self.to_out(out.transpose(1, 2).reshape(b, n, h * d))


class ScoreCausal(Base):
    def forward(self, x):
        q, k, v = self.split(x)

        def causal(score, b, h, q_idx, kv_idx):
            return torch.where(q_idx >= kv_idx, score, -float("inf"))

        return self.merge(flex_attention(q, k, v, score_mod=causal))


def score_causal():
    return ScoreCausal(), {"x": torch.randn(2, 24, 48)}


def document_causal(document_ids, b, h, q_idx, kv_idx):
    return (document_ids[q_idx] == document_ids[kv_idx]) & (q_idx >= kv_idx)


class PartialDocuments(Base):
    def forward(self, x, document_ids):
        q, k, v = self.split(x)
        n = x.shape[1]
        mask_mod = functools.partial(document_causal, document_ids)
        block_mask = create_block_mask(mask_mod, None, None, n, n, device=x.device)
        return self.merge(compiled_flex_attention(q, k, v, block_mask=block_mask))


def partial_documents():
    ids = torch.tensor([0] * 10 + [1] * 14)
    return PartialDocuments(), {"x": torch.randn(2, 24, 48), "document_ids": ids}


class HeadScale(Base):
    def __init__(self, dim=48, heads=4):
        super().__init__(dim, heads)
        self.head_scale = nn.Parameter(torch.ones(heads))

    def forward(self, x):
        q, k, v = self.split(x)
        n = x.shape[1]
        head_scale = self.head_scale

        def scaled(score, b, h, q_idx, kv_idx):
            return score * head_scale[h]

        def causal(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx

        block_mask = create_block_mask(causal, None, self.heads, n, n, device=x.device)
        return self.merge(flex_attention(q, k, v, score_mod=scaled, block_mask=block_mask))


def head_scale():
    return HeadScale(), {"x": torch.randn(2, 24, 48)}


class Chunked(Base):
    """Llama 4's chunked attention: causal within fixed chunks."""

    def __init__(self, dim=48, heads=4, chunk_size=8):
        super().__init__(dim, heads)
        self.chunk_size = chunk_size

    def forward(self, x):
        q, k, v = self.split(x)
        n = x.shape[1]
        chunk_size = self.chunk_size

        def chunked_causal(b, h, q_idx, kv_idx):
            same_chunk = (q_idx // chunk_size) == (kv_idx // chunk_size)
            return same_chunk & (kv_idx <= q_idx)

        block_mask = create_block_mask(chunked_causal, None, None, n, n, device=x.device)
        return self.merge(flex_attention(q, k, v, block_mask=block_mask))


def chunked():
    return Chunked(), {"x": torch.randn(2, 24, 48)}


class Registers(Base):
    """Vision tokens with register tokens in front: every token sees the registers, and
    the image tokens see a local window of image tokens."""

    def __init__(self, dim=48, heads=4, num_registers=4, radius=3):
        super().__init__(dim, heads)
        self.num_registers = num_registers
        self.radius = radius

    def forward(self, x):
        q, k, v = self.split(x)
        n = x.shape[1]
        num_registers, radius = self.num_registers, self.radius

        def register_mask(b, h, q_idx, kv_idx):
            return kv_idx < num_registers

        def local_mask(b, h, q_idx, kv_idx):
            return (q_idx - kv_idx).abs() <= radius

        block_mask = create_block_mask(or_masks(register_mask, local_mask), None, None, n, n,
                                       device=x.device)
        return self.merge(flex_attention(q, k, v, block_mask=block_mask))


def registers():
    return Registers(), {"x": torch.randn(2, 24, 48)}


class Gemma2Local(nn.Module):
    """Gemma 2's local layers: soft-capped scores, a causal sliding window, grouped heads."""

    def __init__(self, dim=64, heads=4, kv_heads=2, sliding_window=6, softcap=50.0):
        super().__init__()
        self.head_dim = dim // heads
        self.heads, self.kv_heads = heads, kv_heads
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.sliding_window = sliding_window
        self.softcap = softcap

    def forward(self, x):
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        softcap, window = self.softcap, self.sliding_window

        def soft_cap(score, b, h, q_idx, kv_idx):
            return torch.tanh(score / softcap) * softcap

        def causal(b, h, q_idx, kv_idx):
            return q_idx >= kv_idx

        def local(b, h, q_idx, kv_idx):
            return q_idx - kv_idx < window

        block_mask = create_block_mask(and_masks(causal, local), None, None, n, n,
                                       device=x.device)
        out = flex_attention(q, k, v, score_mod=soft_cap, block_mask=block_mask,
                             enable_gqa=True)
        return out.transpose(1, 2).reshape(b, n, -1)


def gemma2_local():
    return Gemma2Local(), {"x": torch.randn(2, 24, 64)}


class LogicalAnd(Base):
    """A mask written with torch's logical functions and a relative bias in the score."""

    def forward(self, x):
        q, k, v = self.split(x)
        n = x.shape[1]

        def mask_mod(b, h, q_idx, kv_idx):
            return torch.logical_and(q_idx >= kv_idx, q_idx - kv_idx < 16)

        def relative(score, b, h, q_idx, kv_idx):
            return score - 0.1 * (q_idx - kv_idx)

        block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=n, KV_LEN=n,
                                       device=x.device, BLOCK_SIZE=128)
        return self.merge(flex_attention(q, k, v, score_mod=relative, block_mask=block_mask))


def logical_and():
    return LogicalAnd(), {"x": torch.randn(2, 24, 48)}
