"""More forms of public FlexAttention code: gpt-fast's decode (a mask built for the whole
cache, its queries moved by the input position), per-sample prefix lengths, a multimodal
mask (bidirectional within an image, causal text), a head-dependent score, cross-attention
over padded memory, the no-op mask, and create_block_mask with every length named.
Modules written for this corpus."""

import torch
from torch import nn
from torch.nn.attention.flex_attention import (
    create_block_mask,
    flex_attention,
    noop_mask,
    or_masks,
)


def causal_mask(b, h, q, kv):
    return q >= kv


def get_mask_mod(mask_mod, offset):
    def _mask_mod(b, h, q, kv):
        return mask_mod(b, h, q + offset, kv)

    return _mask_mod


class GptFastDecode(nn.Module):
    """gpt-fast's Attention at a decode step: the cache is full length, the new queries'
    positions are `input_pos`, the mask causal from the first of them."""

    def __init__(self, dim=48, n_head=4, max_seq_length=32):
        super().__init__()
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.n_head, self.head_dim = n_head, dim // n_head
        self.max_seq_length = max_seq_length

    def forward(self, x, input_pos, k_cache, v_cache):
        bsz, seqlen, dim = x.shape
        q, k, v = self.wqkv(x).split(dim, dim=-1)
        q = q.view(bsz, seqlen, self.n_head, self.head_dim).transpose(1, 2)
        k = k.view(bsz, seqlen, self.n_head, self.head_dim).transpose(1, 2)
        v = v.view(bsz, seqlen, self.n_head, self.head_dim).transpose(1, 2)
        k = torch.cat([k_cache, k], dim=2)
        v = torch.cat([v_cache, v], dim=2)
        mask_mod = get_mask_mod(causal_mask, k_cache.shape[2])
        block_mask = create_block_mask(mask_mod, None, None, seqlen, k.shape[2],
                                       device=x.device)
        y = flex_attention(q, k, v, block_mask=block_mask)
        return self.wo(y.transpose(1, 2).contiguous().view(bsz, seqlen, dim))


def gpt_fast_decode():
    return GptFastDecode(), {"x": torch.randn(2, 1, 48), "input_pos": torch.tensor([20]),
                             "k_cache": torch.randn(2, 4, 20, 12),
                             "v_cache": torch.randn(2, 4, 20, 12)}


class Base(nn.Module):
    def __init__(self, dim=48, heads=4):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.heads = heads

    def split(self, x):
        B, T, C = x.shape
        return self.qkv(x).view(B, T, 3, self.heads, -1).permute(2, 0, 3, 1, 4)


class PrefixLengths(Base):
    def forward(self, x, prefix_lengths):
        q, k, v = self.split(x)
        T = x.shape[1]

        def prefix(b, h, q_idx, kv_idx):
            return kv_idx < prefix_lengths[b]

        block_mask = create_block_mask(or_masks(prefix, causal_mask), x.shape[0], None, T, T)
        return flex_attention(q, k, v, block_mask=block_mask).transpose(1, 2).flatten(2)


def prefix_lengths():
    return PrefixLengths(), {"x": torch.randn(2, 24, 48),
                             "prefix_lengths": torch.tensor([5, 9])}


class Multimodal(Base):
    """Transfusion-style: text causal, each image's tokens see the whole image."""

    def forward(self, x, image_ids):
        q, k, v = self.split(x)
        B, T, _ = x.shape

        def mask_mod(b, h, q_idx, kv_idx):
            causal = q_idx >= kv_idx
            same_image = (image_ids[b, q_idx] == image_ids[b, kv_idx]) & (image_ids[b, q_idx] >= 0)
            return causal | same_image

        block_mask = create_block_mask(mask_mod, B, None, T, T, device=x.device)
        return flex_attention(q, k, v, block_mask=block_mask).transpose(1, 2).flatten(2)


def multimodal():
    ids = torch.full((2, 24), -1)
    ids[0, 4:12] = 0
    ids[1, 10:20] = 1
    return Multimodal(), {"x": torch.randn(2, 24, 48), "image_ids": ids}


class HeadScore(Base):
    def forward(self, x):
        q, k, v = self.split(x)
        T = x.shape[1]

        def score_mod(score, b, h, q_idx, kv_idx):
            return torch.where(h % 2 == 0, score, score * 0.5)

        block_mask = create_block_mask(causal_mask, B=None, H=None, Q_LEN=T, KV_LEN=T)
        out = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
        return out.transpose(1, 2).flatten(2)


def head_score():
    return HeadScore(), {"x": torch.randn(2, 24, 48)}


class CrossAttention(nn.Module):
    """Queries from the text, keys and values from a padded memory (its length per sample)."""

    def __init__(self, dim=48, heads=4):
        super().__init__()
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, 2 * dim, bias=False)
        self.heads = heads

    def forward(self, x, memory, memory_lengths):
        B, T, C = x.shape
        S = memory.shape[1]
        q = self.to_q(x).view(B, T, self.heads, -1).transpose(1, 2)
        k, v = self.to_kv(memory).view(B, S, 2, self.heads, -1).permute(2, 0, 3, 1, 4)

        def memory_padding(b, h, q_idx, kv_idx):
            return kv_idx < memory_lengths[b]

        block_mask = create_block_mask(memory_padding, B, None, T, S, device=x.device)
        return flex_attention(q, k, v, block_mask=block_mask).transpose(1, 2).reshape(B, T, C)


def cross_attention():
    return CrossAttention(), {"x": torch.randn(2, 24, 48), "memory": torch.randn(2, 10, 48),
                              "memory_lengths": torch.tensor([10, 6])}


class NoMask(Base):
    def forward(self, x):
        q, k, v = self.split(x)
        T = x.shape[1]
        block_mask = create_block_mask(noop_mask, None, None, T, T, device=x.device)
        return flex_attention(q, k, v, block_mask=block_mask).transpose(1, 2).flatten(2)


def no_mask():
    return NoMask(), {"x": torch.randn(2, 24, 48)}
