"""Window attention as einops code writes it (Swin's and MaxViT's block-like windows): the
feature map cut into windows of 7 by `rearrange('b c (x w1) (y w2) -> ...')`. einops
refuses a map that is not a whole number of windows (its own check, an `EinopsError`), so
the sizes at which the traced spec's `T//7` is 0 are sizes this code rejects on purpose."""

import torch
from torch import nn
from einops import rearrange


class WindowAttention(nn.Module):
    def __init__(self, dim=32, heads=4, window=7):
        super().__init__()
        self.heads, self.window = heads, window
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.scale = (dim // heads) ** -0.5

    def forward(self, x):
        b, c, hh, ww = x.shape
        w = self.window
        x = rearrange(x, 'b c (x w1) (y w2) -> (b x y) (w1 w2) c', w1=w, w2=w)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, 'n l (h d) -> n h l d', h=self.heads), (q, k, v))
        attn = (q @ k.transpose(-2, -1) * self.scale).softmax(dim=-1)
        out = rearrange(attn @ v, 'n h l d -> n l (h d)')
        out = self.out(out)
        return rearrange(out, '(b x y) (w1 w2) c -> b c (x w1) (y w2)', b=b, x=hh // w, y=ww // w, w1=w, w2=w)


def make():
    return WindowAttention().eval(), {"x": torch.randn(2, 32, 14, 21)}


class AssertingAttention(WindowAttention):
    """The same windows, the precondition stated by the module itself."""

    def forward(self, x):
        assert x.shape[-1] % self.window == 0 and x.shape[-2] % self.window == 0, "whole windows"
        return super().forward(x)


def make_asserting():
    return AssertingAttention().eval(), {"x": torch.randn(2, 32, 14, 21)}
