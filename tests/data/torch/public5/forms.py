"""The forms the fifth public corpus (timm, Meta's llama, fairseq, espnet, detectron2's
ViTDet) taught the front end, each in a small module: what
tests/test_torch_public_forms.py checks is lowered, clean and conforming."""
import torch
from torch import nn


class NewFullCausal(nn.Module):
    # timm's resolve_self_attn_mask: an additive causal bias made from the scores' dtype,
    # `attn.new_full((N, N), -inf).triu_(1)`
    def __init__(self, dim=48, heads=4):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.dim_head).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        att = (q * self.dim_head ** -0.5) @ k.transpose(-2, -1)
        att = att + att.new_full((n, n), float('-inf')).triu_(1)
        y = att.softmax(dim=-1) @ v
        return y.transpose(1, 2).reshape(b, n, -1)


def new_full_causal():
    return NewFullCausal(), {"x": torch.randn(2, 9, 48)}
