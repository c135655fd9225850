"""Fully masked rows in conformance (issue 33 item 1, docs/conform.md): a query that sees no
key is NaN in the spec's softmax and zeros in SDPA and FlexAttention. The target conforms if
it matches the spec read either way in every output — the statements after the attention
(an output projection's bias) computed from that reading — and nothing else is let through."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from shapecheck.pytorch.conform import conform, load_function

SPEC = """\
dim B, N, d
input X: [B, N, d]
input pad: bool[B, N]
param W: [d, d]
param c: [d]
i = arange(N)[:, None]
j = arange(N)[None, :]
S = X @ transpose(X, [0, 2, 1]) / sqrt(d)
A = softmax(where((j <= i) & pad[:, None, :], S, -inf), axis=-1) @ X
O = A @ W + c
output O
"""

IMPLEMENTATION = """\
import numpy as np


def _attention(X, pad, fill):
    n = X.shape[1]
    S = X @ X.transpose(0, 2, 1) / np.sqrt(X.shape[-1])
    keep = np.tril(np.ones((n, n), bool))[None] & pad[:, None, :]
    S = np.where(keep, S, -np.inf)
    peak = S.max(-1, keepdims=True)
    dead = np.isneginf(peak)  # a query that sees no key (a padded first position)
    P = np.exp(S - np.where(dead, 0, peak))
    P = P / np.where(dead, 1, P.sum(-1, keepdims=True))
    if fill == "nan":
        P = np.where(dead, np.nan, P)
    elif fill == "uniform":
        P = np.where(dead, 1 / n, P)
    return P @ X, dead


def zeros(X, pad, W, c):  # SDPA's and FlexAttention's row
    return _attention(X, pad, "zero")[0] @ W + c


def nans(X, pad, W, c):  # the eager softmax's row
    return _attention(X, pad, "nan")[0] @ W + c


def uniform(X, pad, W, c):  # every key equally: not "no key"
    return _attention(X, pad, "uniform")[0] @ W + c


def no_bias_there(X, pad, W, c):  # zeros after the projection: its bias left out
    A, dead = _attention(X, pad, "zero")
    return A @ W + np.where(dead, 0, c)
"""


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    spec = tmp_path / "padded.attn"
    spec.write_text(SPEC, encoding="utf-8")
    implementation = tmp_path / "padded_impl.py"
    implementation.write_text(textwrap.dedent(IMPLEMENTATION), encoding="utf-8")
    return spec, implementation


@pytest.mark.parametrize("name", ["zeros", "nans"])
def test_a_padded_row_conforms_as_nan_or_as_zeros_through_the_projection(
        files: tuple[Path, Path], name: str) -> None:
    """The bias after the attention makes a zero row `c`, not zeros: the spec's second
    reading computes it so (the rows agreed only where the attention was the output)."""
    spec, implementation = files
    result = conform(spec, load_function(f"{implementation}:{name}"), cases=8)
    assert result.ok, result.report()


@pytest.mark.parametrize("name", ["uniform", "no_bias_there"])
def test_a_padded_row_of_other_values_does_not_conform(files: tuple[Path, Path],
                                                        name: str) -> None:
    spec, implementation = files
    result = conform(spec, load_function(f"{implementation}:{name}"), cases=8)
    assert not result.ok
    report = result.report()
    assert "fully masked rows as zeros" in report  # the closer reading, named
    assert "the spec gives NaN" not in report
