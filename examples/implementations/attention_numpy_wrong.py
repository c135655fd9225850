"""Multi-head self-attention in NumPy with a subtle mistake: the scores are scaled by
the model width, sqrt(D_model), instead of the head width, sqrt(d).

With one head the two agree (D_model = d), and with one token every softmax is 1
whatever the scale, so a test at a single hand-picked size can miss it.

    shapecheck conform examples/multi_head.attn examples/implementations/attention_numpy_wrong.py:attention

reports the mismatch and shrinks it to the smallest binding that shows it:
N=2, d=1, H=2 (two tokens, two heads).
"""

import numpy as np


def attention(X, W_Q, W_K, W_V, W_O, H):
    n, width = X.shape
    d = W_Q.shape[1] // H

    def heads(projected):  # [N, H*d] -> [H, N, d]
        return projected.reshape(n, H, d).transpose(1, 0, 2)

    q, k, v = heads(X @ W_Q), heads(X @ W_K), heads(X @ W_V)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(width)  # the mistake: sqrt(D_model), not sqrt(d)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    out = (weights @ v).transpose(1, 0, 2).reshape(n, H * d)
    return out @ W_O
