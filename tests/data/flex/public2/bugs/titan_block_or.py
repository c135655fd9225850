"""BUG (one edit, or for and: every earlier key, and the block's later ones): `return and_masks(get_causal_mask_mod(), get_fixed_block_mask_mod(self.size))` became `return or_masks(get_causal_mask_mod(), get_fixed_block_mask_mod(self.size))`.

torchtitan's FlexAttention masks, called as its models call them.

The mask_mod bodies are those of pytorch/torchtitan at commit
b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (BSD-3-Clause, (c) Meta Platforms, Inc. and
affiliates; the license's conditions kept: this notice and its disclaimer, see
tests/data/flex/public2/LICENSE.torchtitan), from
torchtitan/models/common/attention.py (get_causal_mask_mod, get_document_mask_mod,
get_efficient_causal_mask_mod_for_packed_document, get_fixed_block_mask_mod,
get_sliding_window_mask_mod) and torchtitan/models/common/vision_encoder.py
(create_block_diagonal_mask); the modules around them are written for this corpus."""

import torch
from torch import nn
from torch.nn.attention.flex_attention import or_masks
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention


def get_causal_mask_mod():
    def _causal_mask(b, h, q_idx, kv_idx):
        """Causal mask that prevents attention to future tokens."""
        return q_idx >= kv_idx

    return _causal_mask


def get_document_mask_mod(doc_ids):
    def document_mask(b, h, q_idx, kv_idx):
        return doc_ids[q_idx] == doc_ids[kv_idx]

    return document_mask


def get_efficient_causal_mask_mod_for_packed_document(offsets, document_id):
    def packed_document_mask(b, h, q_idx, kv_idx):
        return kv_idx >= offsets[document_id[q_idx]]

    return packed_document_mask


def get_fixed_block_mask_mod(fixed_block_size):
    def blocked_mask_mod(b, h, q_idx, kv_idx):
        # Get the block index of the query and key
        q_block = q_idx // fixed_block_size
        kv_block = kv_idx // fixed_block_size
        # Only allow attention within the same block
        return q_block == kv_block

    blocked_mask_mod.__name__ = f"blocked_mask_mod_fixed_block_size_{fixed_block_size}"
    return blocked_mask_mod


def get_sliding_window_mask_mod(window_size):
    if window_size < 1:
        raise ValueError(f"window_size must be >= 1, got {window_size}")

    def sliding_window_mod(b, h, q_idx, kv_idx):
        # q_idx - kv_idx < window_size ensures we look at most window_size-1 tokens back
        return (kv_idx <= q_idx) & (q_idx - kv_idx < window_size)

    return sliding_window_mod


class TitanAttention(nn.Module):
    """Grouped-query attention with the mask torchtitan's model config names."""

    def __init__(self, dim, n_heads, n_kv_heads, mask="causal", size=8):
        super().__init__()
        self.head_dim = dim // n_heads
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.mask = mask
        self.size = size

    def mask_mod(self, positions):
        if self.mask == "block_causal":
            doc_ids = torch.cumsum((positions == 0).int(), dim=0) - 1
            return and_masks(get_causal_mask_mod(), get_document_mask_mod(doc_ids))
        if self.mask == "fixed_block":
            return or_masks(get_causal_mask_mod(), get_fixed_block_mask_mod(self.size))
        if self.mask == "sliding_window":
            return get_sliding_window_mask_mod(self.size)
        return get_causal_mask_mod()

    def forward(self, x, positions=None):
        bs, seqlen, _ = x.shape
        xq = self.wq(x).view(bs, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        xk = self.wk(x).view(bs, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        xv = self.wv(x).view(bs, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        block_mask = create_block_mask(self.mask_mod(positions), bs, None, seqlen, seqlen)
        out = flex_attention(xq, xk, xv, block_mask=block_mask, enable_gqa=True,
                             scale=self.head_dim ** -0.5)
        return self.wo(out.transpose(1, 2).reshape(bs, seqlen, -1))


def _positions(lengths):
    return torch.cat([torch.arange(n) for n in lengths])


def block_causal():
    return TitanAttention(64, 8, 2, "block_causal"), {
        "x": torch.randn(2, 24, 64), "positions": _positions([5, 11, 8])}


def fixed_block():
    return TitanAttention(64, 8, 2, "fixed_block", 6), {"x": torch.randn(2, 24, 64)}


def sliding_window():
    return TitanAttention(64, 8, 2, "sliding_window", 5), {"x": torch.randn(2, 24, 64)}


class PackedCausal(nn.Module):
    """torchtitan's efficient packed-document mask (`kv_idx >= offsets[document_id[q_idx]]`)
    and-ed with causal, the document starts made by the data loader."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.n_heads = n_heads

    def forward(self, x, offsets, document_id):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        mask_mod = and_masks(get_causal_mask_mod(),
                             get_efficient_causal_mask_mod_for_packed_document(offsets,
                                                                               document_id))
        block_mask = create_block_mask(mask_mod, B, None, T, T)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def packed_causal():
    lengths = [5, 11, 8]
    offsets = torch.tensor([0, 5, 16, 24, 24], dtype=torch.int32)
    ids = torch.cat([torch.full((n,), i, dtype=torch.int32) for i, n in enumerate(lengths)])
    return PackedCausal(48, 4), {"x": torch.randn(2, 24, 48), "offsets": offsets,
                                 "document_id": ids}


class VisionEncoder(nn.Module):
    """Images of several sizes packed into one sequence: attention within each image's
    segment (create_block_diagonal_mask), one sample."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads

    def forward(self, patches, segment_ids):
        B, N, C = patches.shape

        def mask_mod(b, h, q_idx, kv_idx):
            return segment_ids[q_idx] == segment_ids[kv_idx]

        q, k, v = self.qkv(patches).view(B, N, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        block_mask = create_block_mask(mask_mod, 1, None, N, N)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, N, C)


def vision_segments():
    segment_ids = torch.repeat_interleave(torch.arange(3, dtype=torch.int32),
                                          torch.tensor([9, 6, 15]))
    return VisionEncoder(48, 4), {"patches": torch.randn(1, 30, 48),
                                  "segment_ids": segment_ids}


def make():
    return fixed_block()
