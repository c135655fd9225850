"""The forms the fifth public corpus (timm, Meta's llama, fairseq, espnet, detectron2's
ViTDet) taught the front end, each in a small module: what
tests/test_torch_public_forms.py checks is lowered, clean and conforming."""
import torch
from torch import nn


class NewFullCausal(nn.Module):
    # timm's resolve_self_attn_mask: an additive causal bias made from the scores' dtype,
    # `attn.new_full((N, N), -inf).triu_(1)`
    def __init__(self, dim=48, heads=4):
        super().__init__()
        self.heads, self.dim_head = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.dim_head).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        att = (q * self.dim_head ** -0.5) @ k.transpose(-2, -1)
        att = att + att.new_full((n, n), float('-inf')).triu_(1)
        y = att.softmax(dim=-1) @ v
        return y.transpose(1, 2).reshape(b, n, -1)


def new_full_causal():
    return NewFullCausal(), {"x": torch.randn(2, 9, 48)}


class TimeFirstPadded(nn.Module):
    # fairseq's MultiheadAttention: [T, B, C] in, heads folded into the batch, a [B, S]
    # bool key padding mask (True at a pad) filled with -inf
    def __init__(self, dim=48, heads=6):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask):
        tgt_len, bsz, dim = x.size()
        q = self.q_proj(x) * self.head_dim ** -0.5
        q, k, v = (t.contiguous().view(-1, bsz * self.heads, self.head_dim).transpose(0, 1)
                   for t in (q, self.k_proj(x), self.v_proj(x)))
        w = torch.bmm(q, k.transpose(1, 2)).view(bsz, self.heads, tgt_len, -1)
        w = w.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        w = w.view(bsz * self.heads, tgt_len, -1).softmax(dim=-1)
        return torch.bmm(w, v).transpose(0, 1).contiguous().view(tgt_len, bsz, dim)


def time_first_padded():
    key_padding_mask = torch.zeros(2, 9, dtype=torch.bool)
    key_padding_mask[1, 6:] = True
    return TimeFirstPadded(), {"x": torch.randn(9, 2, 48), "key_padding_mask": key_padding_mask}


class ChunkMask(nn.Module):
    # wenet's (espnet's) streaming chunk: the keys and values of the chunks before passed
    # in, a [1, 1, time2] bool mask cut to the keys' length (`mask[..., :scores.size(-1)]`)
    def __init__(self, dim=48, heads=6):
        super().__init__()
        self.heads, self.d_k = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, mask, key_cache, value_cache):
        b = x.size(0)
        q, k, v = (t.view(b, -1, self.heads, self.d_k).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        k, v = torch.cat([key_cache, k], dim=-2), torch.cat([value_cache, v], dim=-2)
        scores = q @ k.transpose(-2, -1) / self.d_k ** 0.5
        mask = mask.unsqueeze(-3).eq(0)[..., :scores.size(-1)]
        attn = scores.masked_fill(mask, -float('inf')).softmax(dim=-1).masked_fill(mask, 0.0)
        return (attn @ v).transpose(1, 2).reshape(b, -1, self.heads * self.d_k)


def chunk_mask():
    return ChunkMask(), {"x": torch.randn(1, 4, 48), "mask": torch.ones(1, 1, 20, dtype=torch.bool),
                         "key_cache": torch.randn(1, 6, 16, 8),
                         "value_cache": torch.randn(1, 6, 16, 8)}


class FusedOrNot(nn.Module):
    # timm's Attention: `fused_attn` set in __init__ from the library's config, turned off
    # by the caller after building it (`attn.fused_attn = False`)
    def __init__(self, dim=48, num_heads=6):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.attn_dim = num_heads * self.head_dim
        self.fused_attn = True
        self.qkv = nn.Linear(dim, self.attn_dim * 3)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(
            2, 0, 3, 1, 4).unbind(0)
        if self.fused_attn:
            x = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            attn = torch.einsum("bhqd,bhkd->bhqk", q * self.head_dim ** -0.5, k)
            x = attn.softmax(dim=-1) @ v
        return x.transpose(1, 2).reshape(B, N, self.attn_dim)


def fused_off():
    attn = FusedOrNot()
    attn.fused_attn = False
    return attn, {"x": torch.randn(2, 9, 48)}


class ResizedTable(nn.Module):
    # ViTDet's and SAM's get_rel_pos: a table of relative positions made for another length,
    # resized by F.interpolate(mode="linear") to 2 * T - 1 and gathered by offset
    def __init__(self, dim=48, heads=6, made_for=6):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.rel_pos = nn.Parameter(torch.randn(2 * made_for - 1, heads))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, self.heads, self.head_dim).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        table = torch.nn.functional.interpolate(
            self.rel_pos.T[None], size=2 * n - 1, mode="linear")[0].T
        offsets = torch.arange(n)[:, None] - torch.arange(n)[None, :] + n - 1
        bias = table[offsets].permute(2, 0, 1)
        att = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5 + bias
        y = att.softmax(dim=-1) @ v
        return y.transpose(1, 2).reshape(b, n, -1)


def resized_table():
    return ResizedTable(), {"x": torch.randn(2, 9, 48)}
