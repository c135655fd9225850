"""`torch.nn.MultiheadAttention` checked against examples/multi_head.attn.

    shapecheck conform examples/multi_head.attn examples/implementations/mha_torch.py:attention

This module imports torch, so conformance hands the function torch tensors. The spec
writes projections as `X @ W` with W stored [in, out]; PyTorch stores weights
[out, in] and computes `X @ W.T`. So the module's packed `in_proj_weight` holds the
transposes of W_Q, W_K, W_V stacked ([3·D_model, D_model]), and `out_proj.weight` is
W_O's transpose (docs/porting.md). The spec has no batch axis, PyTorch's module
(`batch_first=True`) wants one: it is added and removed here.
"""

import torch
from torch import nn


def attention(X, W_Q, W_K, W_V, W_O, H):
    width = X.shape[-1]
    module = nn.MultiheadAttention(width, H, bias=False, batch_first=True,
                                   dtype=X.dtype, device=X.device)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.cat([W_Q.T, W_K.T, W_V.T]))
        module.out_proj.weight.copy_(W_O.T)
    batch = X.unsqueeze(0)
    out, _ = module(batch, batch, batch, need_weights=False)
    return out.squeeze(0)
