"""Score changes that read captured tensors, key-side padding lengths and a decode step,
written as FlexAttention users write them (the forms of the PyTorch FlexAttention blog,
pytorch.org/blog/flexattention, "Relative position encodings", "Soft-capping", "ALiBi";
and of decoders that keep a cache): modules written for this corpus."""

import math

import torch
from torch import nn
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


class BiasTable(nn.Module):
    """A learned per-head bias table, bias[h, q_idx, kv_idx], added by a score_mod under a
    causal mask."""

    def __init__(self, dim, n_heads, max_len=32):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads
        self.bias = nn.Parameter(torch.zeros(n_heads, max_len, max_len))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        bias = self.bias

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + bias[h, q_idx, kv_idx]

        block_mask = create_block_mask(causal, None, None, T, T, device=x.device)
        out = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def bias_table():
    return BiasTable(48, 4), {"x": torch.randn(2, 24, 48)}


class Slopes(nn.Module):
    """ALiBi with its slopes computed once and stored as a buffer, read by head."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads
        start = 2 ** (-8 / n_heads)
        self.register_buffer("slopes", torch.tensor([start ** (i + 1) for i in range(n_heads)]))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        slopes = self.slopes

        def alibi(score, b, h, q_idx, kv_idx):
            return score - slopes[h] * (q_idx - kv_idx)

        block_mask = create_block_mask(causal, None, None, T, T, device=x.device)
        out = flex_attention(q, k, v, score_mod=alibi, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def slopes():
    return Slopes(48, 4), {"x": torch.randn(2, 24, 48)}


class KeyLengths(nn.Module):
    """A padded batch: each sequence's length, keys past it masked; a soft-cap on scores."""

    def __init__(self, dim, n_heads, soft_cap=50.0):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads
        self.soft_cap = soft_cap

    def forward(self, x, lengths):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        soft_cap = self.soft_cap

        def padding(b, h, q_idx, kv_idx):
            return kv_idx < lengths[b]

        def softcap(score, b, h, q_idx, kv_idx):
            score = score / soft_cap
            score = torch.tanh(score)
            return score * soft_cap

        block_mask = create_block_mask(and_masks(causal, padding), B, None, T, T,
                                       device=x.device)
        out = flex_attention(q, k, v, score_mod=softcap, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def key_lengths():
    return KeyLengths(48, 4), {"x": torch.randn(2, 24, 48), "lengths": torch.tensor([24, 17])}


class DecodeStep(nn.Module):
    """One step of decoding against a cache: the new queries sit after the cached keys, so
    the causal mask compares q_idx + offset with kv_idx."""

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
            return q_idx + offset >= kv_idx

        block_mask = create_block_mask(causal_offset, None, None, S, k.shape[2],
                                       device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask,
                             scale=1.0 / math.sqrt(self.head_dim))
        return out.transpose(1, 2).reshape(B, S, C)


def decode_step():
    return DecodeStep(48, 4), {"x": torch.randn(2, 3, 48), "k_cache": torch.randn(2, 4, 20, 12),
                               "v_cache": torch.randn(2, 4, 20, 12)}


class EncoderLengths(nn.Module):
    """A bidirectional encoder over a padded batch: every real query sees every real key."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads

    def forward(self, x, lengths):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)

        def padding(b, h, q_idx, kv_idx):
            return kv_idx < lengths[b]

        block_mask = create_block_mask(padding, B, None, T, T, device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def encoder_lengths():
    return EncoderLengths(48, 4), {"x": torch.randn(2, 24, 48), "lengths": torch.tensor([24, 17])}
