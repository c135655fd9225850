"""Packed samples and grouped-query attention as training libraries call FlexAttention.

The mask_mods follow pytorch/torchtune (BSD-3-Clause), torchtune/modules/attention_utils.py
(`_flex_block_causal_mask_mod`, the mask `packed_block_causal_mask` builds from per-sample
document ids), and pytorch/torchtitan (BSD-3-Clause), torchtitan/models/attention.py
(`get_causal_mask_mod`, `get_document_mask_mod`, `get_sliding_window_mask_mod`): the same
expressions, in modules written for this corpus. The BlockMask is made by the caller and
passed to forward, as torchtune's collate and torchtitan's model do."""

import torch
from torch import nn
from torch.nn.attention.flex_attention import (
    AuxRequest,
    and_masks,
    create_block_mask,
    flex_attention,
)


def _flex_block_causal_mask_mod(document_ids, b, h, q_idx, kv_idx):
    causal_mask = q_idx >= kv_idx
    document_mask = document_ids[b, q_idx] == document_ids[b, kv_idx]
    return causal_mask & document_mask


def _get_document_ids_from_seq_lens(seq_lens):
    return torch.stack([torch.repeat_interleave(torch.arange(len(lens)), lens)
                        for lens in seq_lens])


def packed_block_causal_mask(seq_lens):
    document_ids = _get_document_ids_from_seq_lens(seq_lens)
    batch_size, max_seq_len = document_ids.shape

    def mask_mod(b, h, q_idx, kv_idx):
        return _flex_block_causal_mask_mod(document_ids, b, h, q_idx, kv_idx)

    return create_block_mask(mask_mod, batch_size, None, max_seq_len, max_seq_len,
                             device="cpu")


def get_causal_mask_mod():
    def causal_mask(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    return causal_mask


def get_document_mask_mod(batch):
    def document_mask(b, h, q_idx, kv_idx):
        return batch[b, q_idx] == batch[b, kv_idx]

    return document_mask


def get_sliding_window_mask_mod(window_size):
    def sliding_window_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (q_idx - kv_idx < window_size)

    return sliding_window_mod


class GQAttention(nn.Module):
    """Grouped-query attention taking its BlockMask as an argument (FlexAttention repeats
    each key/value head for its group: enable_gqa=True), scaled explicitly."""

    def __init__(self, dim, n_heads, n_kv_heads):
        super().__init__()
        self.head_dim = dim // n_heads
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x, block_mask):
        bs, seqlen, _ = x.shape
        xq = self.wq(x).view(bs, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        xk = self.wk(x).view(bs, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        xv = self.wv(x).view(bs, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        output = flex_attention(xq, xk, xv, block_mask=block_mask, enable_gqa=True,
                                scale=self.head_dim ** -0.5)
        output = output.transpose(1, 2).contiguous().view(bs, seqlen, -1)
        return self.wo(output)


def torchtune_packed():
    seq_lens = [torch.tensor([5, 9, 10]), torch.tensor([12, 12])]
    return GQAttention(64, 4, 2), {"x": torch.randn(2, 24, 64),
                                   "block_mask": packed_block_causal_mask(seq_lens)}


def titan_document_causal():
    batch = _get_document_ids_from_seq_lens([torch.tensor([8, 16]), torch.tensor([24])])
    mask_mod = and_masks(get_causal_mask_mod(), get_document_mask_mod(batch))
    block_mask = create_block_mask(mask_mod, 2, None, 24, 24, device="cpu")
    return GQAttention(64, 4, 2), {"x": torch.randn(2, 24, 64), "block_mask": block_mask}


def titan_sliding_window():
    block_mask = create_block_mask(get_sliding_window_mask_mod(6), None, None, 24, 24,
                                   device="cpu")
    return GQAttention(64, 4, 1), {"x": torch.randn(2, 24, 64), "block_mask": block_mask}


class WithLse(nn.Module):
    """A causal layer that also returns the log-sum-exp of each row (return_lse=True), as
    ring/context-parallel code does to merge partial results."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        block_mask = create_block_mask(get_causal_mask_mod(), None, None, T, T,
                                       device=x.device)
        out, lse = flex_attention(q, k, v, block_mask=block_mask, return_lse=True)
        return out.transpose(1, 2).reshape(B, T, C), lse


def lse():
    return WithLse(48, 4), {"x": torch.randn(2, 24, 48)}


class WithAux(WithLse):
    """The same through torch's newer request object, `return_aux=AuxRequest(lse=True)`."""

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        block_mask = create_block_mask(get_causal_mask_mod(), None, None, T, T,
                                       device=x.device)
        out, aux = flex_attention(q, k, v, block_mask=block_mask,
                                  return_aux=AuxRequest(lse=True))
        return out.transpose(1, 2).reshape(B, T, C), aux.lse


def aux_lse():
    return WithAux(48, 4), {"x": torch.randn(2, 24, 48)}
