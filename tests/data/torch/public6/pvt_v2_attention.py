"""whai362/PVT `classification/pvt_v2.py` (Apache-2.0, Wenhai Wang et al.), commit
57e2dfaa5a46f9050d76f306a4fcd9a7c061f520, lines 1-167 as written there: PVT v2's spatial
reduction attention, the keys and values of a map `[B, C, H, W]` shrunk by a strided
`Conv2d(dim, dim, kernel_size=sr_ratio, stride=sr_ratio)` and a LayerNorm (or, in the
linear `-li` models, by `AdaptiveAvgPool2d(7)`, a 1x1 conv and GELU), then
`kv.reshape(B, -1, 2, heads, C // heads).permute(2, 0, 3, 1, 4)`. From timm (the file's
imports): `DropPath` is never built (drop_path=0), `to_2tuple` and `trunc_normal_` are
timm's; `register_model` and `_cfg` are not used by these lines. The factories build the
layers as `PyramidVisionTransformerV2` does (stage 1 of pvt_v2_b0: dim 32, one head,
sr_ratio 8; stage 2: dim 64, two heads, sr_ratio 4; stage 3: dim 160, five heads, sr_ratio 2).
The strided conv is lowered as patches times its weight, the `-li` models' pooling and the
MLP's DWConv (a depthwise 3x3 padded conv) by their taps (docs/torch.md, "Convolutions"):
every factory verifies clean. `make_mlp` (after the copied lines) builds the MLP alone."""
import collections.abc
from itertools import repeat
import torch
import torch.nn as nn
import torch.nn.functional as F
from functools import partial


# timm.models.layers as these lines use it
def to_2tuple(x):
    if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
        return tuple(x)
    return tuple(repeat(x, 2))


trunc_normal_ = nn.init.trunc_normal_
DropPath = None
import math


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features=None, out_features=None, act_layer=nn.GELU, drop=0., linear=False):
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.dwconv = DWConv(hidden_features)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, out_features)
        self.drop = nn.Dropout(drop)
        self.linear = linear
        if self.linear:
            self.relu = nn.ReLU(inplace=True)
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.LayerNorm):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)
        elif isinstance(m, nn.Conv2d):
            fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
            fan_out //= m.groups
            m.weight.data.normal_(0, math.sqrt(2.0 / fan_out))
            if m.bias is not None:
                m.bias.data.zero_()

    def forward(self, x, H, W):
        x = self.fc1(x)
        if self.linear:
            x = self.relu(x)
        x = self.dwconv(x, H, W)
        x = self.act(x)
        x = self.drop(x)
        x = self.fc2(x)
        x = self.drop(x)
        return x


class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False, qk_scale=None, attn_drop=0., proj_drop=0., sr_ratio=1, linear=False):
        super().__init__()
        assert dim % num_heads == 0, f"dim {dim} should be divided by num_heads {num_heads}."

        self.dim = dim
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = qk_scale or head_dim ** -0.5

        self.q = nn.Linear(dim, dim, bias=qkv_bias)
        self.kv = nn.Linear(dim, dim * 2, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

        self.linear = linear
        self.sr_ratio = sr_ratio
        if not linear:
            if sr_ratio > 1:
                self.sr = nn.Conv2d(dim, dim, kernel_size=sr_ratio, stride=sr_ratio)
                self.norm = nn.LayerNorm(dim)
        else:
            self.pool = nn.AdaptiveAvgPool2d(7)
            self.sr = nn.Conv2d(dim, dim, kernel_size=1, stride=1)
            self.norm = nn.LayerNorm(dim)
            self.act = nn.GELU()
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.LayerNorm):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)
        elif isinstance(m, nn.Conv2d):
            fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
            fan_out //= m.groups
            m.weight.data.normal_(0, math.sqrt(2.0 / fan_out))
            if m.bias is not None:
                m.bias.data.zero_()

    def forward(self, x, H, W):
        B, N, C = x.shape
        q = self.q(x).reshape(B, N, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)

        if not self.linear:
            if self.sr_ratio > 1:
                x_ = x.permute(0, 2, 1).reshape(B, C, H, W)
                x_ = self.sr(x_).reshape(B, C, -1).permute(0, 2, 1)
                x_ = self.norm(x_)
                kv = self.kv(x_).reshape(B, -1, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
            else:
                kv = self.kv(x).reshape(B, -1, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        else:
            x_ = x.permute(0, 2, 1).reshape(B, C, H, W)
            x_ = self.sr(self.pool(x_)).reshape(B, C, -1).permute(0, 2, 1)
            x_ = self.norm(x_)
            x_ = self.act(x_)
            kv = self.kv(x_).reshape(B, -1, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]

        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn)

        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        x = self.proj(x)
        x = self.proj_drop(x)

        return x


class Block(nn.Module):

    def __init__(self, dim, num_heads, mlp_ratio=4., qkv_bias=False, qk_scale=None, drop=0., attn_drop=0.,
                 drop_path=0., act_layer=nn.GELU, norm_layer=nn.LayerNorm, sr_ratio=1, linear=False):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = Attention(
            dim,
            num_heads=num_heads, qkv_bias=qkv_bias, qk_scale=qk_scale,
            attn_drop=attn_drop, proj_drop=drop, sr_ratio=sr_ratio, linear=linear)
        # NOTE: drop path for stochastic depth, we shall see if this is better than dropout here
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()
        self.norm2 = norm_layer(dim)
        mlp_hidden_dim = int(dim * mlp_ratio)
        self.mlp = Mlp(in_features=dim, hidden_features=mlp_hidden_dim, act_layer=act_layer, drop=drop, linear=linear)

        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.LayerNorm):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)
        elif isinstance(m, nn.Conv2d):
            fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
            fan_out //= m.groups
            m.weight.data.normal_(0, math.sqrt(2.0 / fan_out))
            if m.bias is not None:
                m.bias.data.zero_()

    def forward(self, x, H, W):
        x = x + self.drop_path(self.attn(self.norm1(x), H, W))
        x = x + self.drop_path(self.mlp(self.norm2(x), H, W))

        return x


class DWConv(nn.Module):
    def __init__(self, dim=768):
        super(DWConv, self).__init__()
        self.dwconv = nn.Conv2d(dim, dim, 3, 1, 1, bias=True, groups=dim)

    def forward(self, x, H, W):
        B, N, C = x.shape
        x = x.transpose(1, 2).view(B, C, H, W)
        x = self.dwconv(x)
        x = x.flatten(2).transpose(1, 2)

        return x




def make():
    # pvt_v2_b0 stage 1: a 64-pixel image, patches of 4 -> a 16 x 16 map, sr_ratio 8
    attn = Attention(32, num_heads=1, qkv_bias=True, sr_ratio=8).eval()
    return attn, {"x": torch.randn(2, 256, 32), "H": 16, "W": 16}


def make_stage2():
    attn = Attention(64, num_heads=2, qkv_bias=True, sr_ratio=4).eval()
    return attn, {"x": torch.randn(2, 96, 64), "H": 8, "W": 12}


def make_sr2():
    # pvt_v2_b0 stage 3 on a 64 x 96 image: a 4 x 6 map, keys and values of its 2 x 3 reduction
    attn = Attention(160, num_heads=5, qkv_bias=True, sr_ratio=2).eval()
    return attn, {"x": torch.randn(2, 24, 160), "H": 4, "W": 6}


def make_linear():
    # pvt_v2_b2_li: linear=True, keys and values pooled to 7 x 7
    attn = Attention(64, num_heads=2, qkv_bias=True, sr_ratio=4, linear=True).eval()
    return attn, {"x": torch.randn(2, 196, 64), "H": 14, "W": 14}


def make_last():
    # the last stage: sr_ratio 1, keys and values of the map itself
    attn = Attention(64, num_heads=2, qkv_bias=True, sr_ratio=1).eval()
    return attn, {"x": torch.randn(2, 49, 64), "H": 7, "W": 7}


def make_block():
    block = Block(64, num_heads=2, mlp_ratio=8, qkv_bias=True,
                  norm_layer=partial(nn.LayerNorm, eps=1e-6), sr_ratio=4).eval()
    return block, {"x": torch.randn(2, 96, 64), "H": 8, "W": 12}


def make_mlp():
    # the feed-forward of every PVT v2 block: fc1, DWConv (a depthwise 3x3 padded conv of
    # the [B, N, C] sequence as its H x W map), GELU, fc2
    mlp = Mlp(64, hidden_features=128).eval()
    return mlp, {"x": torch.randn(2, 96, 64), "H": 8, "W": 12}
