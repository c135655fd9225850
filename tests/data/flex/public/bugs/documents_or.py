"""torchtitan's document-causal mask combined with or_masks where and_masks was meant: each
query sees every key of its own document, the later ones included."""

import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention, or_masks


def get_causal_mask_mod():
    def causal_mask(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    return causal_mask


def get_document_mask_mod(batch):
    def document_mask(b, h, q_idx, kv_idx):
        return batch[b, q_idx] == batch[b, kv_idx]

    return document_mask


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads

    def forward(self, x, document_ids):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        mask_mod = or_masks(get_causal_mask_mod(), get_document_mask_mod(document_ids))
        block_mask = create_block_mask(mask_mod, B, None, T, T, device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def make():
    ids = torch.tensor([[0] * 7 + [1] * 9 + [2] * 8, [0] * 12 + [1] * 12])
    return Attention(48, 4), {"x": torch.randn(2, 24, 48), "document_ids": ids}
