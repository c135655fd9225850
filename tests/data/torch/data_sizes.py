"""Sizes the data decides (issue 29): two boolean selections of the same condition are as
long as each other, which torch knows only at run time (two unbacked sizes, `U` and `U2`).
A shape diagnostic between them cannot be confirmed by running the module at chosen sizes,
so it is an unconfirmed note, never an error (MoE routing does this: JetMoE's experts)."""

import torch
from torch import nn


class Routed(nn.Module):
    def __init__(self, dim=12):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, gates):
        picked = self.proj(x[gates > 0])
        weights = gates[gates > 0]
        return picked * weights[:, None]


def make():
    torch.manual_seed(0)
    gates = torch.tensor([0.5, -1.0, 0.25, 2.0, -0.5, 1.0, 0.0])
    return Routed(), {"x": torch.randn(7, 12), "gates": gates}
