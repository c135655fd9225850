"""Modules calling FlexAttention with attention-gym's mask_mods and score_mods, as
attention-gym writes them (pytorch-labs/attention-gym, attn_gym/masks and attn_gym/mods)."""

import torch
from torch import nn
from torch.nn.attention.flex_attention import (
    and_masks,
    create_block_mask,
    flex_attention,
    or_masks,
)


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def generate_sliding_window(window_size):
    def sliding_window(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= window_size

    return and_masks(sliding_window, causal_mask)


def generate_prefix_lm_mask(prefix_length):
    def prefix_mask(b, h, q_idx, kv_idx):
        return kv_idx < prefix_length

    return or_masks(prefix_mask, causal_mask)


def generate_doc_mask_mod(mask_mod, document_id):
    def doc_mask_mod(b, h, q_idx, kv_idx):
        same_doc = document_id[q_idx] == document_id[kv_idx]
        inner_mask = mask_mod(b, h, q_idx, kv_idx)
        return same_doc & inner_mask

    return doc_mask_mod


def generate_alibi_bias(H):
    def alibi_mod(score, b, h, q_idx, kv_idx):
        scale = torch.exp2(-((h + 1) * 8.0 / H))
        bias = (kv_idx - q_idx) * scale
        return score + bias

    return alibi_mod


def generate_tanh_softcap(soft_cap):
    def tanh_softcap(score, b, h, q_idx, kv_idx):
        return soft_cap * torch.tanh(score / soft_cap)

    return tanh_softcap


def generate_dilated_sliding_window(window_size, dilation):
    def dilated_sliding_window(b, h, q_idx, kv_idx):
        diff = torch.abs(q_idx - kv_idx)
        in_window = diff <= window_size
        is_dilated = (diff % dilation) == 0
        return in_window & is_dilated

    return dilated_sliding_window


class Attention(nn.Module):
    """Multi-head attention whose mask and score are FlexAttention functions."""

    def __init__(self, n_embd, n_head, window=0, kind="causal"):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.window = window
        self.kind = kind

    def mask_mod(self):
        if self.kind == "sliding":
            return generate_sliding_window(self.window)
        if self.kind == "prefix":
            return generate_prefix_lm_mask(self.window)
        if self.kind == "dilated":
            return generate_dilated_sliding_window(self.window, 2)
        return causal_mask

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        block_mask = create_block_mask(self.mask_mod(), None, None, T, T, device=x.device)
        y = flex_attention(q, k, v, block_mask=block_mask)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


def causal():
    return Attention(35, 5), {"x": torch.randn(2, 16, 35)}


def sliding():
    return Attention(35, 5, window=7, kind="sliding"), {"x": torch.randn(2, 16, 35)}


def sliding():
    return Attention(35, 5, window=11, kind="sliding"), {"x": torch.randn(2, 16, 35)}


class Documents(nn.Module):
    """Packed documents: a causal mask within each document (attention-gym's document_mask),
    with a score change."""

    def __init__(self, n_embd, n_head, soft_cap=20):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.score_mod = generate_tanh_softcap(soft_cap)

    def forward(self, x, document_id):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        mask_mod = generate_doc_mask_mod(causal_mask, document_id)
        block_mask = create_block_mask(mask_mod, None, None, T, T, device=x.device)
        y = flex_attention(q, k, v, score_mod=self.score_mod, block_mask=block_mask)
        return y.transpose(1, 2).reshape(B, T, C)


def documents():
    ids = torch.tensor([0] * 6 + [1] * 5 + [2] * 5)
    return Documents(35, 5), {"x": torch.randn(2, 16, 35), "document_id": ids}


class Alibi(nn.Module):
    """ALiBi as a score_mod, causal, no block mask built (attention-gym's alibi)."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.alibi = generate_alibi_bias(n_head)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        block_mask = create_block_mask(causal_mask, None, None, T, T, device=x.device)
        y = flex_attention(q, k, v, score_mod=self.alibi, block_mask=block_mask)
        return y.transpose(1, 2).reshape(B, T, C)


def prefix():
    return Attention(35, 5, window=11, kind="prefix"), {"x": torch.randn(2, 16, 35)}


def dilated():
    return Attention(35, 5, window=11, kind="dilated"), {"x": torch.randn(2, 16, 35)}


def windowed(n_embd, n_head, window):
    """A factory taking its dims: the tool chooses the sizes, the window among them."""
    return Attention(n_embd, n_head, window, kind="sliding")


class RelativeTable(nn.Module):
    """A learned relative-position table read by a score_mod (a parameter the function
    reads, at a position computed from both)."""

    def __init__(self, n_embd, n_head, max_len=64):
        super().__init__()
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.n_head, self.n_embd = n_head, n_embd
        self.rel_bias = nn.Parameter(torch.randn(n_head, 2 * max_len - 1))
        self.max_len = max_len

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)

        def relative(score, b, h, q_idx, kv_idx):
            return score + self.rel_bias[h, kv_idx - q_idx + self.max_len - 1]

        block_mask = create_block_mask(causal_mask, B, None, T, T, device=x.device)
        y = flex_attention(q, k, v, score_mod=relative, block_mask=block_mask)
        return y.transpose(1, 2).reshape(B, T, C)


def relative_table():
    return RelativeTable(35, 5), {"x": torch.randn(2, 16, 35)}
