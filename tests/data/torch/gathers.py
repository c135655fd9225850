"""Modules built on gathers, running sums, bounds and complex numbers (the operators of the
language's §6.1): each must extract to a spec that verifies clean and conforms."""
import torch
from torch import nn


class Embed(nn.Module):
    """A token lookup: `nn.Embedding` (aten.embedding), then a projection."""

    def __init__(self, vocab, dim):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, ids):
        x = self.wte(ids)
        return self.proj(x)


def embed():
    return Embed(11, 7), {"ids": torch.randint(0, 11, (2, 5))}


class Lookups(nn.Module):
    """`E[ids]` (aten.index.Tensor), `index_select` and `gather` of a score table."""

    def __init__(self, rows, dim):
        super().__init__()
        self.table = nn.Parameter(torch.randn(rows, dim))

    def forward(self, x, ids, pick):
        rows = self.table[ids]
        chosen = torch.index_select(x, 1, pick)
        scores = chosen @ rows.transpose(-2, -1)
        best = (chosen[..., :2] > 0).long() * 6
        return torch.gather(chosen, -1, best) + scores[..., :1]


def lookups():
    return Lookups(13, 7), {"x": torch.randn(2, 5, 7), "ids": torch.randint(0, 5, (3,)),
                            "pick": torch.randint(0, 5, (4,))}


class Running(nn.Module):
    """`cumsum`, `minimum`/`maximum` and `clamp`."""

    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        y = self.proj(x)
        total = torch.cumsum(y, dim=1)
        low = torch.minimum(total, y)
        high = torch.maximum(low, torch.zeros_like(y))
        return torch.clamp(high, min=-1.0, max=2.0) + y.clamp(max=0.5)


def running():
    return Running(7), {"x": torch.randn(2, 5, 7)}


class Rotary(nn.Module):
    """Meta's complex rotary: `polar`, `view_as_complex`, a complex product, `view_as_real`."""

    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, angles):
        freqs = torch.polar(torch.ones_like(angles), angles)
        y = self.proj(x)
        z = torch.view_as_complex(y.reshape(*y.shape[:-1], -1, 2))
        out = torch.view_as_real(z * freqs).flatten(2)
        return out + z.real.sum(-1, keepdim=True) + z.imag.sum(-1, keepdim=True)


def rotary():
    return Rotary(10), {"x": torch.randn(2, 5, 10), "angles": torch.randn(5, 5)}
