"""The forms the fourth public corpus (x-transformers, diffusers, OLMo, DETR, torchvision,
flash-attention's torch classes) taught the front end, each in a small module: what
tests/test_torch_public_forms.py checks is lowered, clean and conforming."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class PartialRotary(nn.Module):
    # x-transformers: the rotary freqs [T, rot_dim] passed in, rot_dim the caller's (half
    # of the head here), the rest of each head left as it is
    def __init__(self, dim=48, heads=4):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x, freqs):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        rot_dim = freqs.shape[-1]

        def rotate(t):
            t, rest = t[..., :rot_dim], t[..., rot_dim:]
            t1, t2 = t.chunk(2, dim=-1)
            turned = torch.cat((-t2, t1), dim=-1)
            return torch.cat((t * freqs.cos() + turned * freqs.sin(), rest), dim=-1)

        q, k = rotate(q), rotate(k)
        att = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        y = att.softmax(dim=-1) @ v
        return y.transpose(1, 2).reshape(b, n, -1)


def partial_rotary():
    freqs = torch.randn(9, 6)
    return PartialRotary(), {"x": torch.randn(2, 9, 48), "freqs": freqs}


class PaddedKeyMask(nn.Module):
    # x-transformers' memory key/values: the kept-token mask padded with True for them
    def __init__(self, dim=48, heads=4, num_mem=3):
        super().__init__()
        self.heads, self.num_mem = heads, num_mem
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.mem_k = nn.Parameter(torch.randn(heads, num_mem, dim // heads))
        self.mem_v = nn.Parameter(torch.randn(heads, num_mem, dim // heads))

    def forward(self, x, mask):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        k = torch.cat((self.mem_k.expand(b, -1, -1, -1), k), dim=-2)
        v = torch.cat((self.mem_v.expand(b, -1, -1, -1), v), dim=-2)
        mask = F.pad(mask, (self.num_mem, 0), value=True)
        att = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        att = att.masked_fill(~mask[:, None, None, :], -torch.finfo(att.dtype).max)
        y = att.softmax(dim=-1) @ v
        return y.transpose(1, 2).reshape(b, n, -1)


def padded_key_mask():
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[1, 6:] = False
    return PaddedKeyMask(), {"x": torch.randn(2, 9, 48), "mask": mask}


class GroupNormed(nn.Module):
    # diffusers' VAE attention: group norm of the [B, C, H, W] map, one head, baddbmm with
    # alpha = the scale, the residual
    def __init__(self, channels=32, groups=8):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=1e-6)
        self.to_qkv = nn.Linear(channels, 3 * channels)
        self.scale = channels ** -0.5

    def forward(self, x):
        b, c, h, w = x.shape
        t = self.norm(x).view(b, c, h * w).transpose(1, 2)
        q, k, v = self.to_qkv(t).chunk(3, dim=-1)
        empty = torch.empty(b, h * w, h * w, dtype=q.dtype)
        att = torch.baddbmm(empty, q, k.transpose(-1, -2), beta=0, alpha=self.scale)
        y = att.softmax(dim=-1) @ v
        return y.transpose(1, 2).reshape(b, c, h, w) + x


def group_normed():
    return GroupNormed(), {"x": torch.randn(2, 32, 3, 5)}


class DictTables(nn.Module):
    # OLMo's rotary: sin and cos made once and kept in a dict (a cache that is no buffer)
    def __init__(self, dim=48, heads=4, max_len=32):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        head = dim // heads
        inv = 1.0 / (10000 ** (torch.arange(0, head, 2).float() / head))
        angles = torch.outer(torch.arange(max_len).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.cache = {"sin": angles.sin(), "cos": angles.cos()}

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        sin, cos = self.cache["sin"][:n], self.cache["cos"][:n]

        def rotate(t):
            t1, t2 = t.chunk(2, dim=-1)
            return t * cos + torch.cat((-t2, t1), dim=-1) * sin

        y = F.scaled_dot_product_attention(rotate(q), rotate(k), v, is_causal=True)
        return y.transpose(1, 2).reshape(b, n, -1)


def dict_tables():
    return DictTables(), {"x": torch.randn(2, 9, 48)}


class ScalarBias(nn.Module):
    # audiocraft's _get_mask: a causal bias made of two numbers made tensors of no axes
    def __init__(self, dim=48, heads=4):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        delta = torch.arange(n).view(-1, 1) - torch.arange(n).view(1, -1)
        bias = torch.where(delta >= 0, torch.zeros([], dtype=x.dtype),
                           torch.full([], float('-inf'), dtype=x.dtype))
        w = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5 + bias, dim=-1)
        return (w @ v).transpose(1, 2).reshape(b, n, -1)


def scalar_bias():
    return ScalarBias(), {"x": torch.randn(2, 9, 48)}
