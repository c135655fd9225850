"""Multi-head self-attention in NumPy, written as a model would be: a correct
implementation of examples/multi_head.attn.

    shapecheck conform examples/multi_head.attn examples/implementations/attention_numpy.py:attention

The function takes the spec's inputs and params by name, and `H`, a dim of the spec
(conformance passes a dim to a parameter of its name).
"""

import numpy as np


def attention(X, W_Q, W_K, W_V, W_O, H):
    n, width = X.shape[0], W_Q.shape[1]
    d = width // H

    def heads(projected):  # [N, H*d] -> [H, N, d]: head h owns columns h*d ... h*d+d-1
        return projected.reshape(n, H, d).transpose(1, 0, 2)

    q, k, v = heads(X @ W_Q), heads(X @ W_K), heads(X @ W_V)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    out = (weights @ v).transpose(1, 0, 2).reshape(n, width)
    return out @ W_O
