"""Forms the public3 modules use, each in a few lines as their authors write them (the tool
fixes of issue 29 they needed): a cyclic shift `torch.roll` along two axes (Swin's shifted
windows), and a key/value cache passed in and written with `index_copy_` (Gemma)."""
import torch
from torch import nn


def attend(q, k, v):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    return scores.softmax(dim=-1) @ v


class Shifted(nn.Module):
    """Attention over a [B, H, W, C] map cyclically shifted by `shift` along both axes, and
    shifted back."""

    def __init__(self, dim, shift=2):
        super().__init__()
        self.shift = shift
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, H, W, C = x.shape
        shifted = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))
        q, k, v = self.qkv(shifted.reshape(B, H * W, C)).chunk(3, dim=-1)
        out = attend(q, k, v).reshape(B, H, W, C)
        return torch.roll(out, shifts=(self.shift, self.shift), dims=(1, 2))


def shifted():
    return Shifted(35), {"x": torch.randn(2, 8, 8, 35)}


class GivenCache(nn.Module):
    """The caller's cache, written in place at the given positions, then read whole."""

    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, positions, kv_cache):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        k_cache, v_cache = kv_cache
        k_cache.index_copy_(1, positions, k)
        v_cache.index_copy_(1, positions, v)
        return attend(q, k_cache, v_cache)


def given_cache():
    cache = (torch.zeros(2, 11, 35), torch.zeros(2, 11, 35))
    return GivenCache(35), {"x": torch.randn(2, 5, 35), "positions": torch.arange(5),
                            "kv_cache": cache}


class Injected(nn.Module):
    """Projections built by the caller and passed in (torchtune's builders): rebuilt at
    sizes apart, the module keeps the caller's layers, and torch's trace fails there."""

    def __init__(self, *, embed_dim, num_heads, num_kv_heads, q_proj, kv_proj):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj, self.kv_proj = q_proj, kv_proj

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k, v = self.kv_proj(x).view(b, s, 2 * self.num_kv_heads, self.head_dim) \
            .transpose(1, 2).chunk(2, dim=1)
        group = self.num_heads // self.num_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return attend(q, k, v).transpose(1, 2).reshape(b, s, -1)


def injected():
    module = Injected(embed_dim=48, num_heads=4, num_kv_heads=2, q_proj=nn.Linear(48, 48),
                      kv_proj=nn.Linear(48, 48))
    return module, {"x": torch.randn(2, 7, 48)}


class Prefill(nn.Module):
    """A prefill step, and a decode step for one token (Mistral's and Meta's Llama's
    `if seqlen > 1:`): the decode step reads the cache of earlier keys and values."""

    def __init__(self, dim, max_len=16):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.register_buffer("cache_k", torch.zeros(1, max_len, dim))
        self.register_buffer("cache_v", torch.zeros(1, max_len, dim))

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if x.shape[1] > 1:
            return attend(q, k, v)
        return attend(q, self.cache_k, self.cache_v)


def prefill():
    return Prefill(35), {"x": torch.randn(1, 7, 35)}


class Rolling(nn.Module):
    """Mistral's rolling cache: the last `window` keys written at `positions % window` of a
    plain tensor attribute, for the batch's rows (`cache[:bsz]`)."""

    def __init__(self, dim, window=16, max_batch=2):
        super().__init__()
        self.window = window
        self.qkv = nn.Linear(dim, 3 * dim)
        self.cache_k = torch.zeros(max_batch, window, dim)

    def forward(self, x, positions):
        bsz = x.shape[0]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        slots = (positions[-self.window:] % self.window)[None, :, None]
        slots = slots.repeat(bsz, 1, k.shape[-1])
        self.cache_k[:bsz].scatter_(dim=1, index=slots, src=k[:, -self.window:])
        return attend(q, k, v)


def rolling():
    return Rolling(35), {"x": torch.randn(2, 7, 35), "positions": torch.arange(7)}


class Linear(nn.Module):
    """Linear attention (Performer's `linear_attention`): no score matrix; each query's
    output divided by its product with the keys' sum."""

    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        q, k, v = self.qkv(x).softmax(dim=-1).chunk(3, dim=-1)
        D_inv = 1. / torch.einsum('...nd,...d->...n', q, k.sum(dim=-2))
        context = torch.einsum('...nd,...ne->...de', k, v)
        return torch.einsum('...de,...nd,...n->...ne', context, q, D_inv)


def linear():
    return Linear(35), {"x": torch.randn(2, 7, 35)}
