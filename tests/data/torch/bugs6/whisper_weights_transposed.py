# BUG (one edit) of tests/data/torch/public/whisper_attention.py, line 86 there: w.T @ v.
# class: pt_v
# edited line(s) here: 90
# the rest is the original, unchanged
"""openai/whisper `whisper/model.py` (MIT, OpenAI): `MultiHeadAttention`, as written there,
with the `Linear` it uses; the decoder's causal mask built as `TextDecoder` builds it
(`torch.empty(n_ctx, n_ctx).fill_(-np.inf).triu_(1)`). Factories: `make` (self-attention
with the mask, SDPA path), `make_manual` (the same, `use_sdpa = False`), `make_cross`
(cross-attention on the audio features `xa`)."""
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

try:
    from torch.nn.functional import scaled_dot_product_attention

    SDPA_AVAILABLE = True
except (ImportError, RuntimeError, OSError):
    scaled_dot_product_attention = None
    SDPA_AVAILABLE = False


class Linear(nn.Linear):
    def forward(self, x: Tensor) -> Tensor:
        return F.linear(
            x,
            self.weight.to(x.dtype),
            None if self.bias is None else self.bias.to(x.dtype),
        )


class MultiHeadAttention(nn.Module):
    use_sdpa = True

    def __init__(self, n_state: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.query = Linear(n_state, n_state)
        self.key = Linear(n_state, n_state, bias=False)
        self.value = Linear(n_state, n_state)
        self.out = Linear(n_state, n_state)

    def forward(
        self,
        x: Tensor,
        xa: Optional[Tensor] = None,
        mask: Optional[Tensor] = None,
        kv_cache: Optional[dict] = None,
    ):
        q = self.query(x)

        if kv_cache is None or xa is None or self.key not in kv_cache:
            # hooks, if installed (i.e. kv_cache is not None), will prepend the cached kv tensors;
            # otherwise, perform key/value projections for self- or cross-attention as usual.
            k = self.key(x if xa is None else xa)
            v = self.value(x if xa is None else xa)
        else:
            # for cross-attention, calculate keys and values once and reuse in subsequent calls.
            k = kv_cache[self.key]
            v = kv_cache[self.value]

        wv, qk = self.qkv_attention(q, k, v, mask)
        return self.out(wv), qk

    def qkv_attention(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        n_batch, n_ctx, n_state = q.shape
        scale = (n_state // self.n_head) ** -0.25
        q = q.view(*q.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        k = k.view(*k.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        v = v.view(*v.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)

        if SDPA_AVAILABLE and MultiHeadAttention.use_sdpa:
            a = scaled_dot_product_attention(
                q, k, v, is_causal=mask is not None and n_ctx > 1
            )
            out = a.permute(0, 2, 1, 3).flatten(start_dim=2)
            qk = None
        else:
            qk = (q * scale) @ (k * scale).transpose(-1, -2)
            if mask is not None:
                qk = qk + mask[:n_ctx, :n_ctx]
            qk = qk.float()

            w = F.softmax(qk, dim=-1).to(q.dtype)
            out = (w.transpose(-1, -2) @ v).permute(0, 2, 1, 3).flatten(start_dim=2)
            qk = qk.detach()

        return out, qk


class ManualAttention(MultiHeadAttention):
    """`whisper.model.disable_sdpa()` in effect: the manual path."""
    use_sdpa = False

    def qkv_attention(self, q, k, v, mask=None):
        MultiHeadAttention.use_sdpa = False
        try:
            return super().qkv_attention(q, k, v, mask)
        finally:
            MultiHeadAttention.use_sdpa = True


N_TEXT_CTX = 16


def text_mask() -> Tensor:
    return torch.empty(N_TEXT_CTX, N_TEXT_CTX).fill_(-np.inf).triu_(1)


def make():
    attn = MultiHeadAttention(24, 4).eval()
    return attn, {"x": torch.randn(2, 7, 24), "mask": text_mask()}


def make_manual():
    attn = ManualAttention(24, 4).eval()
    return attn, {"x": torch.randn(2, 7, 24), "mask": text_mask()}


def make_cross():
    attn = ManualAttention(24, 4).eval()
    return attn, {"x": torch.randn(2, 7, 24), "xa": torch.randn(2, 10, 24)}
