"""The forms the eighth corpus taught the front end, each in a small module written for this
test (no project's code): `torch.arange` from a traced start (OpenNMT-py's cached relative
positions `arange(-length + 1, 1)`), a bool mask of the leading axes written into (the
wav2vec2 encoder's `x[mask] = 0.0`, mask [B, T] of x [B, T, C]), `weight_norm`'s
parametrization (its positional convolution), and the weights masked again after the
softmax by the same mask computed a second time (SpeechBrain's `key_padding_mask.view(...)`
written at both places)."""
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


class TracedStart(_Heads):
    def forward(self, x, past):
        q, k, v = self.split(x)
        k = torch.cat([past, k], dim=2)
        n = k.size(2)
        distance = torch.arange(-n + 1, 1, 1).clamp(min=-4, max=4) + 4  # [n]
        bias = distance.to(x.dtype)[None, None, None, :] / 8.0
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)) + bias
        return self.merge(scores.softmax(dim=-1) @ torch.cat([past, v], dim=2))


def arange_traced_start():
    return TracedStart().eval(), {"x": torch.randn(2, 1, 48), "past": torch.randn(2, 4, 6, 12)}


class LeadingMask(_Heads):
    def forward(self, x, lengths):
        b, t, _ = x.shape
        pad = torch.arange(t).expand(b, t) >= lengths[:, None]
        x = x.clone()
        x[pad] = 0.0
        q, k, v = self.split(x)
        return self.merge(F.scaled_dot_product_attention(q, k, v))


def leading_mask_put():
    return LeadingMask().eval(), {"x": torch.randn(2, 9, 48), "lengths": torch.tensor([9, 6])}


class WeightNormed(_Heads):
    def __init__(self):
        super().__init__()
        conv = nn.Conv1d(48, 48, kernel_size=3, padding=1, groups=4)
        self.conv = nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)

    def forward(self, x):
        x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)
        q, k, v = self.split(x)
        return self.merge(F.scaled_dot_product_attention(q, k, v))


def weight_norm_conv():
    return WeightNormed().eval(), {"x": torch.randn(2, 9, 48)}


class Remasked(_Heads):
    def forward(self, x, pad):
        b, t, _ = x.shape
        q, k, v = self.split(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        scores = scores.masked_fill(
            pad.view(b, 1, 1, t),  # on a line of its own, as SpeechBrain writes it:
            float("-inf"),         # the spec names the view
        )
        weights = scores.softmax(dim=-1)
        weights = weights.masked_fill(
            pad.view(b, 1, 1, t),  # the same mask, again, under another name
            0.0,
        )
        return self.merge(weights @ v)


def remasked_weights():
    pad = torch.zeros(2, 9, dtype=torch.bool)
    pad[-1, 6:] = True
    return Remasked().eval(), {"x": torch.randn(2, 9, 48), "pad": pad}
