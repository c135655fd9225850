# MIT License, Copyright (c) 2018 Alexander Rush
"""harvardnlp/annotated-transformer (MIT), commit debc9fd747bb2123160a98046ad1c2d4da44a567,
`the_annotated_transformer.py`: `clones`, `subsequent_mask`, the plain function
`attention(query, key, value, mask=None, dropout=None)`, `MultiHeadedAttention` (one list of
four linears, the projections by a list comprehension over `zip(self.linears, ...)`) and
`Batch.make_std_mask`, as written there. The factories call the layer as `EncoderLayer`
(`self_attn(x, x, x, mask)` with the source mask `(src != pad).unsqueeze(-2)`) and
`DecoderLayer` (`self_attn(x, x, x, tgt_mask)`, `src_attn(x, m, m, src_mask)`) do."""
import copy
import math

import torch
import torch.nn as nn


def clones(module, N):
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


def subsequent_mask(size):
    "Mask out subsequent positions."
    attn_shape = (1, size, size)
    subsequent_mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(
        torch.uint8
    )
    return subsequent_mask == 0


def attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        "Take in model size and number of heads."
        super(MultiHeadedAttention, self).__init__()
        assert d_model % h == 0
        # We assume d_v always equals d_k
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        "Implements Figure 2"
        if mask is not None:
            # Same mask applied to all h heads.
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)

        # 1) Do all the linear projections in batch from d_model => h x d_k
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]

        # 2) Apply attention on all the projected vectors in batch.
        x, self.attn = attention(
            query, key, value, mask=mask, dropout=self.dropout
        )

        # 3) "Concat" using a view and apply a final linear.
        x = (
            x.transpose(1, 2)
            .contiguous()
            .view(nbatches, -1, self.h * self.d_k)
        )
        del query
        del key
        del value
        return self.linears[-1](x)


def make_std_mask(tgt, pad):  # Batch.make_std_mask, a staticmethod there
    "Create a mask to hide padding and future words."
    tgt_mask = (tgt != pad).unsqueeze(-2)
    tgt_mask = tgt_mask & subsequent_mask(tgt.size(-1)).type_as(
        tgt_mask.data
    )
    return tgt_mask


# ---- factories: the model's layers as EncoderLayer and DecoderLayer call them
# (make_model's d_model 512, h 8; here d_model 48, h 4); pad id 2 as in Batch


class _Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = MultiHeadedAttention(4, 48)

    def forward(self, src, x):
        src_mask = (src != 2).unsqueeze(-2)
        return self.self_attn(x, x, x, src_mask)


class _Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = MultiHeadedAttention(4, 48)
        self.src_attn = MultiHeadedAttention(4, 48)

    def forward(self, src, tgt, x, memory):
        src_mask = (src != 2).unsqueeze(-2)
        tgt_mask = make_std_mask(tgt, 2)
        x = x + self.self_attn(x, x, x, tgt_mask)
        return x + self.src_attn(x, memory, memory, src_mask)


class _Function(nn.Module):
    # the function alone, on heads already split: `attention(query, key, value, mask)`
    def forward(self, query, key, value, tgt):
        x, _ = attention(query, key, value, mask=make_std_mask(tgt, 2).unsqueeze(1))
        return x


def make():
    return _Encoder().eval(), {"src": torch.randint(0, 11, (2, 9)), "x": torch.randn(2, 9, 48)}


def make_decoder():
    return _Decoder().eval(), {
        "src": torch.randint(0, 11, (2, 9)), "tgt": torch.randint(0, 11, (2, 7)),
        "x": torch.randn(2, 7, 48), "memory": torch.randn(2, 9, 48)}


def make_function():
    return _Function().eval(), {
        "query": torch.randn(2, 4, 7, 12), "key": torch.randn(2, 4, 7, 12),
        "value": torch.randn(2, 4, 7, 12), "tgt": torch.randint(0, 11, (2, 7))}
