"""The forms the seventh corpus taught the front end, each in a small module written for this
test (no project's code): eval-mode batch norm (EfficientViT's ConvLayer), `x.data` in
`forward` (the annotated transformer's `type_as(tgt_mask.data)`), an input axis read at a
constant index (Flux's rotation matrices `pe[..., 1]`), the relative shift of Transformer-XL
(labml's `shift_right`; espnet's `rel_shift` below), a literal table of relative positions
sliced by the sizes (`table[P - k:P + q]`), and `torch.pow` of a number by a tensor (ALiBi's
slopes). `swapped_view_bug` keeps the bug the relative shift must not hide: a swapped view of
a value that is not padded."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class _Heads(nn.Module):
    def __init__(self, dim: int = 48, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def split(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return [y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v)]

    def merge(self, y):
        b, h, t, d = y.shape
        return self.proj(y.transpose(1, 2).reshape(b, t, h * d))


class BatchNormOut(_Heads):
    def __init__(self, dim: int, heads: int):
        super().__init__(dim, heads)
        self.norm = nn.BatchNorm1d(dim)

    def forward(self, x):
        q, k, v = self.split(x)
        y = self.merge(F.scaled_dot_product_attention(q, k, v))
        return self.norm(y.transpose(1, 2))  # [B, C, T], normalised per channel


def batch_norm_eval(dim: int = 35, heads: int = 5):
    return BatchNormOut(dim, heads).eval(), {"x": torch.randn(2, 9, dim)}


class DataMask(_Heads):
    def forward(self, x, tokens):
        q, k, v = self.split(x)
        keep = (tokens != 0).unsqueeze(-2)
        keep = keep & (torch.triu(torch.ones(1, x.size(1), x.size(1)), diagonal=1) == 0).type_as(keep.data)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        scores.data.masked_fill_(~keep.unsqueeze(1), float("-inf"))
        return self.merge(scores.softmax(dim=-1) @ v)


def data_detached():
    return DataMask().eval(), {"x": torch.randn(2, 9, 48), "tokens": torch.randint(1, 9, (2, 9))}


class RotationInput(_Heads):
    def forward(self, x, pe):
        # pe: [B, 1, T, d / 2, 2, 2], a rotation per position and pair (made by the model)
        q, k, v = self.split(x)
        q_ = q.reshape(*q.shape[:-1], -1, 1, 2)
        k_ = k.reshape(*k.shape[:-1], -1, 1, 2)
        q = (pe[..., 0] * q_[..., 0] + pe[..., 1] * q_[..., 1]).reshape(*q.shape)
        k = (pe[..., 0] * k_[..., 0] + pe[..., 1] * k_[..., 1]).reshape(*k.shape)
        return self.merge(F.scaled_dot_product_attention(q, k, v))


def index_into_input():
    return RotationInput().eval(), {"x": torch.randn(3, 10, 48),
                                    "pe": torch.randn(3, 1, 10, 6, 2, 2)}


class RelativeShift(_Heads):
    """Relative positions as espnet writes them: scores against a table of 2T - 1 relative
    positions [B, H, T, 2T - 1], the column of zeros in front, viewed [2T, T], the first row
    dropped, viewed back, the first T columns kept."""

    def __init__(self, dim: int, heads: int):
        super().__init__(dim, heads)
        self.pos = nn.Parameter(torch.randn(64, dim // heads))

    def rel_shift(self, x):
        zero_pad = torch.zeros((*x.size()[:3], 1), device=x.device, dtype=x.dtype)
        x_padded = torch.cat([zero_pad, x], dim=-1)
        x_padded = x_padded.view(*x.size()[:2], x.size(3) + 1, x.size(2))
        x = x_padded[:, :, 1:].view_as(x)[:, :, :, : x.size(-1) // 2 + 1]
        return x

    def forward(self, x):
        q, k, v = self.split(x)
        t = x.size(1)
        pos = self.pos[32 - t:32 + t - 1]  # [2T - 1, d], relative positions -(T-1)..T-1
        ac = q @ k.transpose(-2, -1)
        bd = self.rel_shift(q @ pos.transpose(0, 1))
        scores = (ac + bd) / math.sqrt(q.size(-1))
        return self.merge(scores.softmax(dim=-1) @ v)


def relative_shift(dim: int = 35, heads: int = 5):
    return RelativeShift(dim, heads).eval(), {"x": torch.randn(2, 9, dim)}


class SwappedView(_Heads):
    def forward(self, x):
        q, k, v = self.split(x)
        b, h, t, d = q.shape
        scores = (q @ k.transpose(-2, -1) / math.sqrt(d)).softmax(dim=-1)
        y = scores @ v                                   # [b, h, t, d]
        return self.proj(y.reshape(b, t, h * d))         # the heads' axis moved by a view


def swapped_view_bug():
    return SwappedView().eval(), {"x": torch.randn(2, 9, 48)}


class Slopes(_Heads):
    def forward(self, x):
        q, k, v = self.split(x)
        t = x.size(1)
        slopes = torch.pow(2.0 ** (-8.0 / self.heads), torch.arange(1, 1 + self.heads))
        distance = torch.arange(t)[None, :] - torch.arange(t)[:, None]
        bias = slopes[:, None, None] * distance[None, :, :]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + bias
        return self.merge(scores.softmax(dim=-1) @ v)


def pow_of_number():
    return Slopes().eval(), {"x": torch.randn(2, 9, 48)}
