"""FlexAttention layers whose mask_mod reads a padding vector (true = a real token): on the
key side (correct), on the query side (a bug: padded keys are attended), and on both sides
(correct: padded queries see nothing, and no query sees a padded key)."""

import math

import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


class Padded(nn.Module):
    """Causal attention over a padded batch, with an output projection that has a bias."""

    def __init__(self, n_embd, n_head, side="key"):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.side = side

    def forward(self, x, pad):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)

        def key_padding(b, h, q_idx, kv_idx):
            return (kv_idx <= q_idx) & pad[b, kv_idx]

        def query_padding(b, h, q_idx, kv_idx):
            return (kv_idx <= q_idx) & pad[b, q_idx]

        def both_padding(b, h, q_idx, kv_idx):
            return (kv_idx <= q_idx) & pad[b, q_idx] & pad[b, kv_idx]

        mask_mod = {"key": key_padding, "query": query_padding, "both": both_padding}[self.side]
        block_mask = create_block_mask(mask_mod, B, None, T, T, device=x.device)
        y = flex_attention(q, k, v, block_mask=block_mask)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


def _inputs():
    pad = torch.ones(2, 16, dtype=torch.bool)
    pad[0, :5] = False  # left padding of the first sequence
    return {"x": torch.randn(2, 16, 35), "pad": pad}


def keys():
    return Padded(35, 5), _inputs()


def queries():
    return Padded(35, 5, side="query"), _inputs()


def both():
    return Padded(35, 5, side="both"), _inputs()



class EagerPadded(nn.Module):
    """The same layer in eager mode, its bool padding mask (true = a real token) and-ed with
    the causal triangle on the scores: by key (correct), by query (a bug), or both."""

    def __init__(self, n_embd, n_head, side="key"):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.side = side

    def forward(self, x, pad):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if self.side == "key":
            keep = causal & pad[:, None, None, :]
        elif self.side == "query":
            keep = causal & pad[:, None, :, None]
        else:
            keep = causal & pad[:, None, None, :] & pad[:, None, :, None]
        att = att.masked_fill(~keep, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


def eager_keys():
    return EagerPadded(35, 5), _inputs()


def eager_queries():
    return EagerPadded(35, 5, side="query"), _inputs()


def eager_both():
    return EagerPadded(35, 5, side="both"), _inputs()
