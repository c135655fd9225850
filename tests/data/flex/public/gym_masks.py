"""attention-gym's masks and score changes, called as its users call them.

The mask_mod and score_mod bodies follow pytorch-labs/attention-gym (BSD-3-Clause),
attn_gym/masks/{causal,sliding_window,prefix_lm,sink_attn,natten,dilated_sliding_window,
document_mask}.py and attn_gym/mods/{alibi,softcapping}.py (commits 455e8f4, b5cab10,
49882d2, e1c3363, 5e0d1b8, 1e80986, 630cae2, 290c1e7, 1492706): the same expressions, in
modules written for this corpus (the BlockMask built in forward, or once and stored, or
passed in)."""

import torch
from torch import nn
from torch.nn.attention.flex_attention import (
    and_masks,
    create_block_mask,
    flex_attention,
    or_masks,
)


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def generate_sliding_window(window_size):
    def sliding_window(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= window_size

    return and_masks(sliding_window, causal_mask)


def generate_prefix_lm_mask(prefix_length):
    def prefix_mask(b, h, q_idx, kv_idx):
        return kv_idx < prefix_length

    return or_masks(prefix_mask, causal_mask)


def generate_sink_mask(window_size, sink_size=4):
    def sink_mask(b, h, q_idx, kv_idx):
        return kv_idx < sink_size

    def sliding_window(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= window_size

    return and_masks(or_masks(sliding_window, sink_mask), causal_mask)


def generate_natten(canvas_w, canvas_h, kernel_w, kernel_h):
    def get_x_y(idx):
        return idx // canvas_w, idx % canvas_w

    def natten_mask_mod(b, h, q_idx, kv_idx):
        q_x, q_y = get_x_y(q_idx)
        kv_x, kv_y = get_x_y(kv_idx)
        kernel_center_x = q_x.clamp(kernel_w // 2, (canvas_w - 1) - kernel_w // 2)
        kernel_center_y = q_y.clamp(kernel_h // 2, (canvas_h - 1) - kernel_h // 2)
        hori_mask = (kernel_center_x - kv_x).abs() <= kernel_w // 2
        vert_mask = (kernel_center_y - kv_y).abs() <= kernel_h // 2
        return hori_mask & vert_mask

    return natten_mask_mod


def generate_dilated_sliding_window(window_size, dilation):
    def dilated_sliding_window(b, h, q_idx, kv_idx):
        diff = torch.abs(q_idx - kv_idx)
        in_window = diff <= window_size
        is_dilated = (diff % dilation) == 0
        return in_window & is_dilated

    return dilated_sliding_window


def generate_alibi_bias(H):
    def alibi_mod(score, b, h, q_idx, kv_idx):
        scale = torch.exp2(-((h + 1) * 8.0 / H))
        bias = (kv_idx - q_idx) * scale
        return score + bias

    return alibi_mod


def generate_tanh_softcap(soft_cap, approx=False):
    def tanh_softcap(score, b, h, q_idx, kv_idx):
        return soft_cap * torch.tanh(score / soft_cap)

    return tanh_softcap


class SelfAttention(nn.Module):
    """A block whose mask is made in forward from the module's own settings."""

    def __init__(self, dim, n_heads, mask="causal", window=8):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.n_heads = n_heads
        self.mask = mask
        self.window = window

    def mask_mod(self):
        if self.mask == "sliding":
            return generate_sliding_window(self.window)
        if self.mask == "prefix":
            return generate_prefix_lm_mask(self.window)
        if self.mask == "sink":
            return generate_sink_mask(self.window)
        if self.mask == "dilated":
            return generate_dilated_sliding_window(self.window, 2)
        return causal_mask

    def forward(self, x):
        B, T, C = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.n_heads, C // self.n_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        block_mask = create_block_mask(self.mask_mod(), B=None, H=None, Q_LEN=T, KV_LEN=T,
                                       device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return self.proj(out.transpose(1, 2).reshape(B, T, C))


def causal():
    return SelfAttention(48, 4), {"x": torch.randn(2, 24, 48)}


def sliding_window():
    return SelfAttention(48, 4, "sliding", 5), {"x": torch.randn(2, 24, 48)}


def prefix_lm():
    return SelfAttention(48, 4, "prefix", 6), {"x": torch.randn(2, 24, 48)}


def sink():
    return SelfAttention(48, 4, "sink", 6), {"x": torch.randn(2, 24, 48)}


def dilated():
    return SelfAttention(48, 4, "dilated", 6), {"x": torch.randn(2, 24, 48)}


class Natten2d(nn.Module):
    """Neighbourhood attention over a flattened canvas, the BlockMask built once in
    __init__ and stored (the canvas is fixed)."""

    def __init__(self, dim, n_heads, canvas=(6, 4), kernel=3):
        super().__init__()
        self.to_qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads
        width, height = canvas
        mask_mod = generate_natten(width, height, kernel, kernel)
        self.block_mask = create_block_mask(mask_mod, None, None, width * height,
                                            width * height, device="cpu")

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(B, N, self.n_heads, -1).transpose(1, 2) for t in (q, k, v))
        out = flex_attention(q, k, v, block_mask=self.block_mask)
        return out.transpose(1, 2).reshape(B, N, C)


def natten():
    return Natten2d(48, 4), {"x": torch.randn(2, 24, 48)}


class AlibiSoftcap(nn.Module):
    """Causal attention with a score change: ALiBi slopes, or a tanh soft-cap."""

    def __init__(self, dim, n_heads, score="alibi", soft_cap=30.0):
        super().__init__()
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.n_heads = n_heads
        if score == "alibi":
            self.score_mod = generate_alibi_bias(n_heads)
        else:
            self.score_mod = generate_tanh_softcap(soft_cap)

    def forward(self, x):
        B, T, C = x.shape
        q = self.wq(x).view(B, T, self.n_heads, -1).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_heads, -1).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_heads, -1).transpose(1, 2)
        block_mask = create_block_mask(causal_mask, None, None, T, T, device=x.device)
        out = flex_attention(q, k, v, score_mod=self.score_mod, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def alibi():
    return AlibiSoftcap(48, 4), {"x": torch.randn(2, 24, 48)}


def softcap():
    return AlibiSoftcap(48, 4, "softcap"), {"x": torch.randn(2, 24, 48)}


def _offsets_to_doc_ids_tensor(offsets):
    counts = offsets[1:] - offsets[:-1]
    return torch.repeat_interleave(torch.arange(len(counts), dtype=torch.int32), counts)


def generate_doc_mask_mod(mask_mod, offsets, document_id):
    def doc_mask_mod(b, h, q_idx, kv_idx):
        same_doc = document_id[q_idx] == document_id[kv_idx]
        q_logical = q_idx - offsets[document_id[q_idx]]
        kv_logical = kv_idx - offsets[document_id[kv_idx]]
        inner_mask = mask_mod(b, h, q_logical, kv_logical)
        return same_doc & inner_mask

    return doc_mask_mod


class PackedDocuments(nn.Module):
    """Documents stacked into one sequence: the offsets and ids are forward arguments, the
    BlockMask built in forward (attention-gym's document_mask with a causal inner mask)."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads

    def forward(self, x, offsets, document_id):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        mask_mod = generate_doc_mask_mod(causal_mask, offsets, document_id)
        block_mask = create_block_mask(mask_mod, None, None, T, T, device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def documents():
    offsets = torch.tensor([0, 7, 15, 24], dtype=torch.int32)
    ids = _offsets_to_doc_ids_tensor(offsets)
    return PackedDocuments(48, 4), {"x": torch.randn(2, 24, 48), "offsets": offsets,
                                    "document_id": ids}
