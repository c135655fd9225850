"""One-token mutants of FlexAttention masks: each flagged at its own line."""

import torch
from torch import nn
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx <= kv_idx


def strict(b, h, q_idx, kv_idx):
    return q_idx > kv_idx


class Attention(nn.Module):
    def __init__(self, n_embd, n_head, which=0):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.which = which

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        mask = strict if self.which else causal_mask
        block_mask = create_block_mask(mask, None, None, T, T, device=x.device)
        y = flex_attention(q, k, v, block_mask=block_mask)
        return y.transpose(1, 2).reshape(B, T, C)


def reversed_():
    return Attention(35, 5), {"x": torch.randn(2, 16, 35)}


def strict_():
    return Attention(35, 5, 1), {"x": torch.randn(2, 16, 35)}


def sliding_window_lt(window_size):
    def sliding_window(b, h, q_idx, kv_idx):
        return q_idx - kv_idx < window_size

    return sliding_window


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


class Windowed(Attention):
    """attention-gym's sliding window with `<` for `<=`: one key fewer than its width."""

    def __init__(self, n_embd, n_head, window):
        super().__init__(n_embd, n_head)
        self.window = window

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        mask = and_masks(sliding_window_lt(self.window), causal)
        y = flex_attention(q, k, v, block_mask=create_block_mask(mask, None, None, T, T))
        return y.transpose(1, 2).reshape(B, T, C)
