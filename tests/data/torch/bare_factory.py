"""Factories that return a module alone, as people write them (`return Attention(64, 4)`):
the tool makes forward's inputs as it does for a class."""
import sys
from pathlib import Path

from torch import nn

sys.path.insert(0, str(Path(__file__).parent / "public"))

from timm_attention import Attention  # noqa: E402


def make():
    return Attention(64, num_heads=4)


class Attention2(nn.Module):
    """Softmax over the queries (dim=-2): a planted bug."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1) * (C // self.heads) ** -0.5).softmax(dim=-2)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


def make_bug():
    return Attention2()


def make_identity():
    return nn.Identity()
