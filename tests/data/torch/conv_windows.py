"""Convolutions and poolings read by their taps (issue 29; docs/torch.md, "Convolutions"):
padded, overlapping, strided, dilated, grouped and depthwise convolutions, average, adaptive
and max poolings and `nn.Unfold`, as attention code around them writes them. Written for
these tests in the style of the code they stand for (each names it); transformers' own
modules (Nyströmformer, ConvBERT, CvT, SqueezeBERT) are built from their config classes:
nothing downloaded, transformers imported where used. Modules run in float64 where their
spec is conformed: torch's convolution kernels round differently from the spec's einsum,
and a softmax can magnify that past float32's tolerance."""
import torch
from torch import nn
from torch.nn import functional as F


class ChannelAttention(nn.Module):
    # Restormer-style multi-Dconv head transposed attention (MDTA), written from the paper's
    # description: q, k, v by a 1x1 conv then a depthwise 3x3 padded conv, an attention
    # over the channels of each head (the positions are the contracted axis), scaled by a
    # learned temperature per head
    def __init__(self, dim=12, heads=3):
        super().__init__()
        self.heads = heads
        self.temperature = nn.Parameter(torch.ones(heads, 1, 1))
        self.qkv = nn.Conv2d(dim, dim * 3, kernel_size=1, bias=False)
        self.qkv_dwconv = nn.Conv2d(dim * 3, dim * 3, kernel_size=3, padding=1,
                                    groups=dim * 3, bias=False)
        self.project_out = nn.Conv2d(dim, dim, kernel_size=1, bias=False)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv_dwconv(self.qkv(x)).chunk(3, dim=1)
        q = q.reshape(b, self.heads, c // self.heads, h * w)
        k = k.reshape(b, self.heads, c // self.heads, h * w)
        v = v.reshape(b, self.heads, c // self.heads, h * w)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        attn = (q @ k.transpose(-2, -1)) * self.temperature
        attn = attn.softmax(dim=-1)
        return self.project_out((attn @ v).reshape(b, c, h, w))


class ChannelAttentionBug(ChannelAttention):
    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv_dwconv(self.qkv(x)).chunk(3, dim=1)
        q = q.reshape(b, self.heads, c // self.heads, h * w)
        k = k.reshape(b, self.heads, c // self.heads, h * w)
        v = v.reshape(b, self.heads, c // self.heads, h * w)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        attn = (q @ k.transpose(-2, -1)) * self.temperature
        attn = attn.softmax(dim=-2)  # BUG
        return self.project_out((attn @ v).reshape(b, c, h, w))


def channel_attention():
    torch.manual_seed(0)
    return ChannelAttention().double().eval(), {"x": torch.randn(2, 12, 7, 9, dtype=torch.float64)}


def channel_attention_bug():
    return ChannelAttentionBug().eval(), {"x": torch.randn(2, 12, 7, 9)}


class OverlapEmbedAttention(nn.Module):
    # SegFormer's overlapping patch embedding (Conv2d kernel 7, stride 4, padding 3, then
    # flatten(2).transpose(1, 2) and a LayerNorm) feeding a multi-head attention
    def __init__(self, channels=3, dim=32, heads=4):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.proj = nn.Conv2d(channels, dim, kernel_size=7, stride=4, padding=3)
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, images):
        x = self.norm(self.proj(images).flatten(2).transpose(1, 2))
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.dim_head).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        attn = (q @ k.transpose(-2, -1)) * self.dim_head ** -0.5
        attn = attn.softmax(dim=-1)
        return self.out((attn @ v).transpose(1, 2).reshape(b, n, -1))


class OverlapEmbedAttentionBug(OverlapEmbedAttention):
    def forward(self, images):
        x = self.norm(self.proj(images).flatten(2).transpose(1, 2))
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.dim_head).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        attn = (q @ k.transpose(-2, -1)) * self.dim_head ** -0.5
        attn = attn.softmax(dim=-2)  # BUG
        return self.out((attn @ v).transpose(1, 2).reshape(b, n, -1))


def overlap_embed_attention():
    # a 30 x 27 image: an 8 x 7 map of 56 tokens
    torch.manual_seed(0)
    return OverlapEmbedAttention().double().eval(), {
        "images": torch.randn(2, 3, 30, 27, dtype=torch.float64)}


def overlap_embed_attention_bug():
    return OverlapEmbedAttentionBug().eval(), {"images": torch.randn(2, 3, 30, 27)}


class PooledKeysAttention(nn.Module):
    # keys and values of a map average-pooled with padding (PoolFormer's
    # `AvgPool2d(3, 1, 1, count_include_pad=False)` made strided, as pooling attention
    # reduces its keys), the queries of the map itself
    def __init__(self, dim=24, heads=2):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.pool = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)

    def forward(self, x, H, W):
        B, N, C = x.shape
        q = self.q(x).reshape(B, N, self.heads, self.dim_head).permute(0, 2, 1, 3)
        x_ = self.pool(x.transpose(1, 2).reshape(B, C, H, W)).flatten(2).transpose(1, 2)
        kv = self.kv(x_).reshape(B, -1, 2, self.heads, self.dim_head).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]
        attn = (q @ k.transpose(-2, -1)) * self.dim_head ** -0.5
        attn = attn.softmax(dim=-1)
        return (attn @ v).transpose(1, 2).reshape(B, N, C)


class PooledKeysAttentionBug(PooledKeysAttention):
    def forward(self, x, H, W):
        B, N, C = x.shape
        q = self.q(x).reshape(B, N, self.heads, self.dim_head).permute(0, 2, 1, 3)
        x_ = self.pool(x.transpose(1, 2).reshape(B, C, H, W)).flatten(2).transpose(1, 2)
        kv = self.kv(x_).reshape(B, -1, 2, self.heads, self.dim_head).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]
        attn = (q @ k.transpose(-2, -1)) * self.dim_head ** -0.5
        attn = attn.softmax(dim=-2)  # BUG
        return (attn @ v).transpose(1, 2).reshape(B, N, C)


def pooled_keys_attention():
    torch.manual_seed(0)
    return PooledKeysAttention().double().eval(), {
        "x": torch.randn(2, 63, 24, dtype=torch.float64), "H": 7, "W": 9}


def pooled_keys_attention_bug():
    return PooledKeysAttentionBug().eval(), {"x": torch.randn(2, 63, 24), "H": 7, "W": 9}


class Windows(nn.Module):
    # the other forms, one of each: a 'same' conv1d of an even kernel (torch pads one
    # before, two after), a dilated padded conv1d, a grouped conv (2 groups), a depthwise
    # conv with two filters per channel, a padded conv3d, an unbatched padded conv2d, the
    # poolings (avg 1d/2d/3d with and without counting the padding, ceil_mode, a divisor
    # override; adaptive 1d/2d with overlapping bins and global; max 1d/2d/3d padded,
    # ceil_mode, dilated, MViT's (1, 3, 3) of stride (1, 2, 2); a window of one on an axis
    # where the padding is not counted or the size kept), an unfold with stride
    # and dilation, a batch norm in eval, transposed convs (padded with an output padding,
    # grouped and dilated, depthwise)
    def __init__(self, channels=6):
        super().__init__()
        self.same = nn.Conv1d(channels, channels, kernel_size=4, padding="same")
        self.dilated = nn.Conv1d(channels, 10, kernel_size=3, padding=2, dilation=2, bias=False)
        self.grouped = nn.Conv2d(channels, 4, kernel_size=3, padding=1, groups=2)
        self.multiplier = nn.Conv2d(channels, 2 * channels, kernel_size=(3, 1), padding=(1, 0),
                                    groups=channels)
        self.volume = nn.Conv3d(3, 5, kernel_size=3, stride=(1, 2, 2), padding=1)
        self.norm = nn.BatchNorm2d(channels)
        self.up = nn.ConvTranspose2d(channels, 4, kernel_size=3, stride=2, padding=1,
                                     output_padding=1)
        self.up_grouped = nn.ConvTranspose1d(channels, 4, kernel_size=3, stride=2, groups=2,
                                             dilation=2)
        self.up_depthwise = nn.ConvTranspose2d(channels, channels, kernel_size=2, stride=2,
                                               groups=channels, bias=False)

    def forward(self, x, seq, vol, image):
        return (self.same(seq), self.dilated(seq), self.grouped(x), self.multiplier(x),
                self.volume(vol), F.conv2d(image, self.grouped.weight[:2, :3], padding=(2, 1)),
                F.avg_pool1d(seq, 3, stride=2, padding=1),
                F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
                F.avg_pool2d(x, 2, ceil_mode=True, count_include_pad=False),
                F.avg_pool2d(x, 3, stride=1, padding=1, divisor_override=4),
                F.avg_pool3d(vol, 2, stride=2, padding=1, count_include_pad=False),
                F.adaptive_avg_pool1d(seq, 4), F.adaptive_avg_pool2d(x, (3, 4)),
                F.adaptive_avg_pool2d(x, 1),
                F.unfold(x, kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
                self.norm(x), F.max_pool2d(x, 3, stride=2, padding=1), F.max_pool1d(seq, 2),
                F.max_pool2d(x, 2, ceil_mode=True),
                F.max_pool3d(vol, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
                F.max_pool2d(image, (2, 3), stride=1, dilation=(2, 1)),
                F.avg_pool2d(x, (3, 1), stride=1, padding=(1, 0), count_include_pad=False),
                F.adaptive_avg_pool2d(x, (3, None)), self.up(x), self.up_grouped(seq),
                self.up_depthwise(x),
                # the operator a second pass over the graph writes, transposed or not
                torch.ops.aten.convolution(x, self.up.weight, None, [2, 2], [1, 1], [1, 1],
                                           True, [1, 1], 1),
                torch.ops.aten.convolution(x, self.grouped.weight, None, [1, 2], [1, 0],
                                           [2, 1], False, [0, 0], 2))


def windows():
    torch.manual_seed(0)
    module = Windows().double().eval()
    module.norm.running_mean.normal_()
    module.norm.running_var.uniform_(0.5, 2.0)
    return module, {"x": torch.randn(2, 6, 7, 10, dtype=torch.float64),
                    "seq": torch.randn(2, 6, 13, dtype=torch.float64),
                    "vol": torch.randn(2, 3, 4, 6, 5, dtype=torch.float64),
                    "image": torch.randn(3, 8, 9, dtype=torch.float64)}


def _bert_config(config_class, **extra):
    config = config_class(hidden_size=48, num_attention_heads=4, intermediate_size=40,
                          num_hidden_layers=1, vocab_size=50, **extra)
    config._attn_implementation = "eager"
    return config


def nystromformer():
    # Nyströmformer's depthwise conv on the values (a (3, 1) kernel, padding (1, 0), a
    # group per head), added to the attention's output; as many landmarks as positions
    # (its exact softmax path: the Nyström approximation's pseudo-inverse is another
    # matter, docs/torch.md "Convolutions")
    from transformers import NystromformerConfig
    from transformers.models.nystromformer.modeling_nystromformer import (
        NystromformerSelfAttention,
    )

    torch.manual_seed(0)
    config = _bert_config(NystromformerConfig, num_landmarks=16, segment_means_seq_len=16,
                          conv_kernel_size=3)
    return NystromformerSelfAttention(config).double().eval(), {
        "hidden_states": torch.randn(2, 16, 48, dtype=torch.float64)}


def convbert():
    # ConvBERT's span-based dynamic convolution: a separable conv1d (depthwise, padded,
    # then pointwise) of the keys, a softmax over its kernel's taps, `nn.Unfold` of the
    # values' projection
    from transformers import ConvBertConfig
    from transformers.models.convbert.modeling_convbert import ConvBertSelfAttention

    torch.manual_seed(0)
    config = _bert_config(ConvBertConfig, conv_kernel_size=5, head_ratio=2, embedding_size=48)
    return ConvBertSelfAttention(config).double().eval(), {
        "hidden_states": torch.randn(2, 11, 48, dtype=torch.float64)}


def cvt():
    # CvT's convolutional projection: each of q, k, v a depthwise 3x3 padded conv (the
    # keys' and values' of stride 2) and a BatchNorm2d, then linear; a class token first.
    # One head, as CvT-13's first stage: CvT scales by `embed_dim ** -0.5`, the model's
    # width, which is the head's only with one head (SC404 with more, as the code is)
    from transformers.models.cvt.modeling_cvt import CvtSelfAttention

    torch.manual_seed(0)
    attention = CvtSelfAttention(num_heads=1, embed_dim=16, kernel_size=3, padding_q=1,
                                 padding_kv=1, stride_q=1, stride_kv=2,
                                 qkv_projection_method="dw_bn", qkv_bias=True,
                                 attention_drop_rate=0.0, with_cls_token=True).double().eval()
    return attention, {"hidden_state": torch.randn(2, 1 + 7 * 6, 16, dtype=torch.float64),
                       "height": 7, "width": 6}


def squeezebert():
    # SqueezeBERT's grouped 1x1 conv1d projections (q, k, v in 2 groups) around the
    # attention, over `[B, C, T]`
    from transformers import SqueezeBertConfig
    from transformers.models.squeezebert.modeling_squeezebert import SqueezeBertSelfAttention

    torch.manual_seed(0)
    config = _bert_config(SqueezeBertConfig, q_groups=2, k_groups=2, v_groups=2)
    attention = SqueezeBertSelfAttention(config, cin=48, q_groups=2, k_groups=2, v_groups=2)
    return attention.double().eval(), {
        "hidden_states": torch.randn(2, 48, 9, dtype=torch.float64),
        "attention_mask": torch.zeros(2, 1, 1, 9, dtype=torch.float64),
        "output_attentions": False}
