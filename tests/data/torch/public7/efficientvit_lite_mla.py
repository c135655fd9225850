# Copyright 2023 MIT Han Lab, licensed under the Apache License, Version 2.0
"""mit-han-lab/efficientvit (Apache-2.0), commit de7d7733cc0329f391b33f1f459271562ec27bd5,
`efficientvit/models/nn/ops.py`: `ConvLayer` and `LiteMLA` (ReLU linear attention with
multi-scale aggregation, and its quadratic path for maps of at most `dim` pixels) as written
there. The helpers it imports from `efficientvit/models/nn/act.py`, `norm.py` and
`efficientvit/models/utils/` are replaced by the few lines these configurations need
(`val2tuple`, `get_same_padding`, `build_act` for relu/None, `build_norm` for bn2d/None).
The factories call `LiteMLA` as `EfficientViTBlock` builds it (`norm=(None, "bn2d")`,
`scales=(5,)`) on a map [B, C, H, W]."""
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- the few lines of efficientvit/models/utils and nn/act.py, nn/norm.py used here
def val2tuple(x, min_len: int = 1, idx_repeat: int = -1) -> tuple:
    x = list(x) if isinstance(x, (list, tuple)) else [x]
    if len(x) > 0:
        x[idx_repeat:idx_repeat] = [x[idx_repeat] for _ in range(min_len - len(x))]
    return tuple(x)


def get_same_padding(kernel_size):
    assert kernel_size % 2 > 0, "kernel size should be odd number"
    return kernel_size // 2


def build_act(name, **kwargs):
    return nn.ReLU(**kwargs) if name == "relu" else None


def build_norm(name="bn2d", num_features=None, **kwargs):
    return nn.BatchNorm2d(num_features) if name == "bn2d" else None


# ---- efficientvit/models/nn/ops.py
class ConvLayer(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size=3,
        stride=1,
        dilation=1,
        groups=1,
        use_bias=False,
        dropout=0,
        norm="bn2d",
        act_func="relu",
    ):
        super(ConvLayer, self).__init__()

        padding = get_same_padding(kernel_size)
        padding *= dilation

        self.dropout = nn.Dropout2d(dropout, inplace=False) if dropout > 0 else None
        self.conv = nn.Conv2d(
            in_channels,
            out_channels,
            kernel_size=(kernel_size, kernel_size),
            stride=(stride, stride),
            padding=padding,
            dilation=(dilation, dilation),
            groups=groups,
            bias=use_bias,
        )
        self.norm = build_norm(norm, num_features=out_channels)
        self.act = build_act(act_func)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dropout is not None:
            x = self.dropout(x)
        x = self.conv(x)
        if self.norm:
            x = self.norm(x)
        if self.act:
            x = self.act(x)
        return x


class LiteMLA(nn.Module):
    r"""Lightweight multi-scale linear attention"""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        heads: Optional[int] = None,
        heads_ratio: float = 1.0,
        dim=8,
        use_bias=False,
        norm=(None, "bn2d"),
        act_func=(None, None),
        kernel_func="relu",
        scales: tuple[int, ...] = (5,),
        eps=1.0e-15,
    ):
        super(LiteMLA, self).__init__()
        self.eps = eps
        heads = int(in_channels // dim * heads_ratio) if heads is None else heads

        total_dim = heads * dim

        use_bias = val2tuple(use_bias, 2)
        norm = val2tuple(norm, 2)
        act_func = val2tuple(act_func, 2)

        self.dim = dim
        self.qkv = ConvLayer(
            in_channels,
            3 * total_dim,
            1,
            use_bias=use_bias[0],
            norm=norm[0],
            act_func=act_func[0],
        )
        self.aggreg = nn.ModuleList(
            [
                nn.Sequential(
                    nn.Conv2d(
                        3 * total_dim,
                        3 * total_dim,
                        scale,
                        padding=get_same_padding(scale),
                        groups=3 * total_dim,
                        bias=use_bias[0],
                    ),
                    nn.Conv2d(3 * total_dim, 3 * total_dim, 1, groups=3 * heads, bias=use_bias[0]),
                )
                for scale in scales
            ]
        )
        self.kernel_func = build_act(kernel_func, inplace=False)

        self.proj = ConvLayer(
            total_dim * (1 + len(scales)),
            out_channels,
            1,
            use_bias=use_bias[1],
            norm=norm[1],
            act_func=act_func[1],
        )

    @torch.autocast(device_type="cuda", enabled=False)
    def relu_linear_att(self, qkv: torch.Tensor) -> torch.Tensor:
        B, _, H, W = list(qkv.size())

        if qkv.dtype == torch.float16:
            qkv = qkv.float()

        qkv = torch.reshape(
            qkv,
            (
                B,
                -1,
                3 * self.dim,
                H * W,
            ),
        )
        q, k, v = (
            qkv[:, :, 0 : self.dim],
            qkv[:, :, self.dim : 2 * self.dim],
            qkv[:, :, 2 * self.dim :],
        )

        # lightweight linear attention
        q = self.kernel_func(q)
        k = self.kernel_func(k)

        # linear matmul
        trans_k = k.transpose(-1, -2)

        v = F.pad(v, (0, 0, 0, 1), mode="constant", value=1)
        vk = torch.matmul(v, trans_k)
        out = torch.matmul(vk, q)
        if out.dtype == torch.bfloat16:
            out = out.float()
        out = out[:, :, :-1] / (out[:, :, -1:] + self.eps)

        out = torch.reshape(out, (B, -1, H, W))
        return out

    @torch.autocast(device_type="cuda", enabled=False)
    def relu_quadratic_att(self, qkv: torch.Tensor) -> torch.Tensor:
        B, _, H, W = list(qkv.size())

        qkv = torch.reshape(
            qkv,
            (
                B,
                -1,
                3 * self.dim,
                H * W,
            ),
        )
        q, k, v = (
            qkv[:, :, 0 : self.dim],
            qkv[:, :, self.dim : 2 * self.dim],
            qkv[:, :, 2 * self.dim :],
        )

        q = self.kernel_func(q)
        k = self.kernel_func(k)

        att_map = torch.matmul(k.transpose(-1, -2), q)  # b h n n
        original_dtype = att_map.dtype
        if original_dtype in [torch.float16, torch.bfloat16]:
            att_map = att_map.float()
        att_map = att_map / (torch.sum(att_map, dim=2, keepdim=True) + self.eps)  # b h n n
        att_map = att_map.to(original_dtype)
        out = torch.matmul(v, att_map)  # b h d n

        out = torch.reshape(out, (B, -1, H, W))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # generate multi-scale q, k, v
        qkv = self.qkv(x)
        multi_scale_qkv = [qkv]
        for op in self.aggreg:
            multi_scale_qkv.append(op(qkv))
        qkv = torch.cat(multi_scale_qkv, dim=1)

        H, W = list(qkv.size())[-2:]
        if H * W > self.dim:
            out = self.relu_linear_att(qkv).to(qkv.dtype)
        else:
            out = self.relu_quadratic_att(qkv)
        out = self.proj(out)

        return out



# ---- factories: as EfficientViTBlock builds it (context module), sizes scaled down


def make():
    # efficientvit-b1's stage: in_channels 64, dim 16 (4 heads), a 6 x 6 map (36 > 16 pixels:
    # the linear path)
    m = LiteMLA(in_channels=64, out_channels=64, heads_ratio=1.0, dim=16,
                norm=(None, "bn2d"), scales=(5,))
    return m.eval(), {"x": torch.randn(2, 64, 6, 6)}


def make_no_aggregation():
    # scales=() (no multi-scale branch), which the signature admits
    m = LiteMLA(in_channels=64, out_channels=64, heads_ratio=1.0, dim=16,
                norm=(None, "bn2d"), scales=())
    return m.eval(), {"x": torch.randn(2, 64, 6, 6)}


def make_quadratic():
    # a 3 x 3 map: 9 <= dim pixels takes relu_quadratic_att
    m = LiteMLA(in_channels=64, out_channels=64, heads_ratio=1.0, dim=16,
                norm=(None, "bn2d"), scales=())
    return m.eval(), {"x": torch.randn(2, 64, 3, 3)}
