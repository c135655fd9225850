"""Convolutions that are products (issue 29; docs/torch.md, "Convolutions"), written for
these tests in the style of the code they stand for: a ViT patch embedding feeding an
attention (`nn.Conv2d(3, D, kernel_size=P, stride=P)`, then `flatten(2).transpose(1, 2)`,
as ViT, CLIP's vision tower and Swin embed an image), the attention block of the VQGAN /
latent-diffusion autoencoders (q, k, v and the output as 1x1 `Conv2d`s over a `[B, C, H, W]`
map, `torch.bmm` of the flattened maps), other ranks, the convolutions that are no products
(padded, overlapping, depthwise, dilated: read by their taps since, tests/data/torch/
conv_windows.py has more) and adaptive max poolings, whose indices stay SC602. transformers' own
modules (SegFormer's spatially reduced attention, a one-layer ViT traced whole) are built
from their config classes: nothing downloaded, transformers imported where used."""
import torch
from torch import nn
from torch.nn import functional as F


class PatchAttention(nn.Module):
    # a ViT's patch embedding and its first attention: patches of P x P pixels, each a token
    def __init__(self, channels=3, dim=48, heads=4, patch=5):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.proj = nn.Conv2d(channels, dim, kernel_size=patch, stride=patch)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, images):
        x = self.proj(images).flatten(2).transpose(1, 2)
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.dim_head).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        attn = (q @ k.transpose(-2, -1)) * self.dim_head ** -0.5
        attn = attn.softmax(dim=-1)
        return self.out((attn @ v).transpose(1, 2).reshape(b, n, -1))


class PatchAttentionBug(PatchAttention):
    def forward(self, images):
        x = self.proj(images).flatten(2).transpose(1, 2)
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.dim_head).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        attn = (q @ k.transpose(-2, -1)) * (self.heads * self.dim_head) ** -0.5  # BUG
        attn = attn.softmax(dim=-1)
        return self.out((attn @ v).transpose(1, 2).reshape(b, n, -1))


def patch_attention():
    # a 30 x 27 image in patches of 5: a 6 x 5 map of 30 tokens (two columns dropped)
    return PatchAttention().eval(), {"images": torch.randn(2, 3, 30, 27)}


def patch_attention_bug():
    return PatchAttentionBug().eval(), {"images": torch.randn(2, 3, 30, 27)}


class PointwiseAttnBlock(nn.Module):
    # the autoencoders' single-head attention over the positions of a map: 1x1 convs
    def __init__(self, channels=40):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups=8, num_channels=channels, eps=1e-6, affine=True)
        self.q = nn.Conv2d(channels, channels, kernel_size=1, stride=1, padding=0)
        self.k = nn.Conv2d(channels, channels, kernel_size=1, stride=1, padding=0)
        self.v = nn.Conv2d(channels, channels, kernel_size=1, stride=1, padding=0)
        self.proj_out = nn.Conv2d(channels, channels, kernel_size=1, stride=1, padding=0)

    def forward(self, x):
        h_ = self.norm(x)
        q, k, v = self.q(h_), self.k(h_), self.v(h_)
        b, c, h, w = q.shape
        q = q.reshape(b, c, h * w).permute(0, 2, 1)
        k = k.reshape(b, c, h * w)
        w_ = torch.bmm(q, k) * (int(c) ** (-0.5))
        w_ = F.softmax(w_, dim=2)
        v = v.reshape(b, c, h * w)
        h_ = torch.bmm(v, w_.permute(0, 2, 1)).reshape(b, c, h, w)
        return x + self.proj_out(h_)


def pointwise_attn_block():
    # in float64: conformance compares the spec's products with torch's convolution kernels,
    # whose float32 roundings differ, and the sharp softmax of random weights magnifies that
    # past float32's tolerance in a few entries (float64 agrees to 1e-12)
    block = PointwiseAttnBlock().double().eval()
    return block, {"x": torch.randn(2, 40, 6, 5, dtype=torch.float64)}


class OtherShapes(nn.Module):
    # the same products in other ranks: a 1x1 Conv1d without bias, a Conv3d of 2 x 2 x 2
    # patches, a 2 x 3 kernel over an unbatched map (as a layer and as `F.conv2d(...,
    # padding="valid")`)
    def __init__(self):
        super().__init__()
        self.pointwise = nn.Conv1d(6, 10, kernel_size=1, bias=False)
        self.cubes = nn.Conv3d(3, 5, kernel_size=2, stride=2)
        self.tiles = nn.Conv2d(3, 7, kernel_size=(2, 3), stride=(2, 3))

    def forward(self, x, volume, image):
        return (self.pointwise(x), self.cubes(volume), self.tiles(image),
                F.conv2d(image, self.tiles.weight, stride=(2, 3), padding="valid"))


def other_shapes():
    # float64 for conformance, as above
    torch.manual_seed(0)
    return OtherShapes().double().eval(), {
        "x": torch.randn(2, 6, 12, dtype=torch.float64),
        "volume": torch.randn(2, 3, 4, 6, 10, dtype=torch.float64),
        "image": torch.randn(3, 8, 9, dtype=torch.float64)}


class NotProducts(nn.Module):
    # convolutions whose patches overlap, are padded, grouped or dilated: no products of
    # patches, each an einsum with a selection of its taps per spatial axis (they stayed
    # SC602 before)
    def __init__(self, channels=8):
        super().__init__()
        self.padded = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.depthwise = nn.Conv2d(channels, channels, kernel_size=1, groups=channels)
        self.dilated = nn.Conv1d(channels, channels, kernel_size=2, stride=2, dilation=2)
        self.overlapping = nn.Conv2d(channels, channels, kernel_size=4, stride=2)

    def forward(self, x):
        a = self.padded(x).flatten(2)
        b = self.depthwise(x).flatten(2)
        c = self.dilated(x.flatten(2))
        d = self.overlapping(x).flatten(2)
        return a, b, c, d


def not_products():
    # float64 for conformance, as above
    torch.manual_seed(0)
    return NotProducts().double().eval(), {"x": torch.randn(2, 8, 10, 6, dtype=torch.float64)}


class MaxOfEachMap(nn.Module):
    # an adaptive max pooling: each output the maximum of torch's bin (bins that overlap
    # where the map is not a multiple of 3: 5 rows)
    def forward(self, x):
        y = F.adaptive_max_pool2d(x, 3).flatten(2)
        return y.softmax(dim=-1)


def adaptive_max():
    return MaxOfEachMap().eval(), {"x": torch.randn(2, 8, 5, 6)}


class MaxOfEachSpan(nn.Module):
    # a sequence's adaptive max pooling to 4 spans (`nn.AdaptiveMaxPool1d`), keys and
    # values of the pooled tokens, and a global one (the maximum of each channel) added
    def __init__(self, dim=12):
        super().__init__()
        self.pool, self.whole = nn.AdaptiveMaxPool1d(4), nn.AdaptiveMaxPool1d(1)
        self.q, self.kv = nn.Linear(dim, dim), nn.Linear(dim, 2 * dim)

    def forward(self, x):
        pooled = self.pool(x.transpose(1, 2)) + self.whole(x.transpose(1, 2))
        k, v = self.kv(pooled.transpose(1, 2)).chunk(2, dim=-1)
        scores = self.q(x) @ k.transpose(1, 2) / k.shape[-1] ** 0.5
        return scores.softmax(dim=-1) @ v


def adaptive_max_spans():
    return MaxOfEachSpan().eval(), {"x": torch.randn(2, 10, 12)}


class MaxAndWhere(nn.Module):
    # an adaptive max pooling's indices (`return_indices=True`) have no lowering: they stay
    # an input of their traced shape (SC602), and the rest is checked
    def forward(self, x):
        y, where = F.adaptive_max_pool2d(x, 3, return_indices=True)
        return y.flatten(2).softmax(dim=-1) + where.flatten(2).float()


def adaptive_max_indices():
    return MaxAndWhere().eval(), {"x": torch.randn(2, 8, 5, 6)}


def segformer_attention():
    # SegFormer's second stage: width 30, 3 heads, keys and values of a 4 x 6 map reduced by
    # a Conv2d(30, 30, kernel_size=2, stride=2) to 2 x 3
    from transformers import SegformerConfig
    from transformers.models.segformer.modeling_segformer import SegformerAttention

    torch.manual_seed(0)
    config = SegformerConfig(num_channels=3, num_encoder_blocks=2, depths=[1, 1],
                             sr_ratios=[4, 2], hidden_sizes=[20, 30], patch_sizes=[7, 3],
                             strides=[4, 2], num_attention_heads=[2, 3], mlp_ratios=[2, 2])
    config._attn_implementation = "eager"
    attention = SegformerAttention(config, hidden_size=30, num_attention_heads=3,
                                   sequence_reduction_ratio=2).eval()
    return attention, {"hidden_states": torch.randn(2, 24, 30), "height": 4, "width": 6}


def vit_one_layer():
    # a ViT of one layer holds one attention layer: a block, traced whole with its patch
    # embedding (a 20 x 20 image in patches of 4: 25 tokens and the class token)
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(hidden_size=60, num_attention_heads=6, intermediate_size=44,
                       num_hidden_layers=1, image_size=20, patch_size=4, num_channels=3)
    config._attn_implementation = "eager"
    return ViTModel(config).eval(), {"pixel_values": torch.randn(2, 3, 20, 20)}
