"""Planted size bugs, one edit each on the real modules beside this file (marked `# BUG`)."""
import torch
import torch.nn as nn

from annotated_transformer import clones
from timm_attention import Attention


class PositionTable(Attention):
    """timm's Attention with a learned position table of a fixed 64 rows: correct for
    sequences up to 64 long, wrong past them."""

    def __init__(self, dim, num_heads=8):
        super().__init__(dim, num_heads=num_heads)
        self.pos = nn.Parameter(torch.zeros(1, 64, dim))  # BUG: 64, not the longest sequence

    def forward(self, x):
        B, N, C = x.shape
        x = x + self.pos[:, :N]  # BUG: past 64 positions the table is shorter than x
        return super().forward(x)


def fixed():
    """The same module from a factory that fixes its sizes."""
    return PositionTable(35, num_heads=5), {"x": torch.randn(2, 9, 35)}


def cloned():
    """The module copied as the Annotated Transformer's `clones` copies layers: the copy was
    never constructed, so it cannot be built again at other sizes."""
    return clones(PositionTable(35, num_heads=5), 2)[0], {"x": torch.randn(2, 9, 35)}
