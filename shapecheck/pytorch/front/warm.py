"""What the worker server loads before it forks a trace: importing this module traces a
small attention module once, so that torch, ``torch.export`` and everything a trace imports
on first use (and every pass of the checker) are in memory in each worker it forks. A trace
then costs one export of the user's module, not the imports of a cold process
(the language server's workers, :mod:`shapecheck.lsp.python`)."""

from __future__ import annotations

import math

import torch
from torch import nn

from . import extract
from .sourcemap import check_extraction


class Attention(nn.Module):
    """Scores, scale, softmax, values, heads: the operators a user's module traces to."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).softmax(dim=-1)
        return (weights @ v).transpose(1, 2).reshape(B, T, C)


# The trace and the checks, not `traced`: that also runs the module for real (a whole model's
# layers are found so), and a real run here would start torch's thread pool in the fork
# server, where every forked worker then deadlocks on its first matrix product.
check_extraction(extract(f"{__name__}:Attention"), f"{__name__}:Attention")
