"""torchtune's packed block-causal mask with the document ids compared at one index:
document_ids[b, q_idx] == document_ids[b, q_idx] is always true, so every query sees the
earlier documents of its pack."""

import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads

    def forward(self, x, document_ids):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)

        def mask_mod(b, h, q_idx, kv_idx):
            causal_mask = q_idx >= kv_idx
            document_mask = document_ids[b, q_idx] == document_ids[b, q_idx]
            return causal_mask & document_mask

        block_mask = create_block_mask(mask_mod, B, None, T, T, device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def make():
    ids = torch.tensor([[0] * 7 + [1] * 9 + [2] * 8, [0] * 12 + [1] * 12])
    return Attention(48, 4), {"x": torch.randn(2, 24, 48), "document_ids": ids}
