"""Modules the front end must report, not pass: data-dependent control flow, an operator it
does not lower."""
import torch
from torch import nn


class Branchy(nn.Module):

    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        y = self.proj(x)
        if y.sum() > 0:
            return y
        return -y


class Unlowered(nn.Module):
    """An operator without a lowering (a running maximum): one SC602, the rest checked."""

    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        y = torch.cummax(self.proj(x), dim=1).values
        return torch.softmax(y, dim=-1)
