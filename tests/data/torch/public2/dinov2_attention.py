"""facebookresearch/dinov2 `dinov2/layers/attention.py` (Apache-2.0, Meta Platforms):
`Attention` and `MemEffAttention`, as written there; xFormers is taken as not installed
(the file's own fallback: `XFORMERS_AVAILABLE = False`), so `MemEffAttention` calls
`Attention.forward`. `init_weights` and the logging/warnings at import are left out."""
import torch
from torch import nn, Tensor

XFORMERS_AVAILABLE = False


class Attention(nn.Module):
    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        qkv_bias: bool = False,
        proj_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
    ) -> None:
        super().__init__()
        self.dim = dim
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim**-0.5

        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = attn_drop
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: Tensor, is_causal: bool = False) -> Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads)
        q, k, v = torch.unbind(qkv, 2)
        q, k, v = [t.transpose(1, 2) for t in [q, k, v]]
        x = nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=self.attn_drop if self.training else 0, is_causal=is_causal
        )
        x = x.transpose(1, 2).contiguous().view(B, N, C)
        x = self.proj_drop(self.proj(x))
        return x


class MemEffAttention(Attention):
    def forward(self, x: Tensor, attn_bias=None) -> Tensor:
        if not XFORMERS_AVAILABLE:
            if attn_bias is not None:
                raise AssertionError("xFormers is required for using nested tensors")
            return super().forward(x)
        raise AssertionError("unreachable without xFormers")


def make():
    return Attention(dim=32, num_heads=4, qkv_bias=True).eval(), {"x": torch.randn(2, 7, 32)}


def make_causal():
    module = Attention(dim=32, num_heads=4, qkv_bias=True).eval()
    return module, {"x": torch.randn(2, 7, 32), "is_causal": True}


def make_memeff():
    return MemEffAttention(dim=32, num_heads=4, qkv_bias=True).eval(), {"x": torch.randn(2, 7, 32)}
