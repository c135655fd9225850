"""BUG (one edit, an offset left out: the continuations never see their prompt): `q_prefix_end = offsets[q_prefix_document + 1]` became `q_prefix_end = offsets[q_prefix_document]`.

attention-gym's newer masks and score changes, called from small modules the way its
examples call flex_attention with create_block_mask.

The mask_mod and score_mod bodies are those of meta-pytorch/attention-gym at commit
7fdb85d0b96668397adee48de54b6f1036497717 (BSD-3-Clause, Copyright (c) 2023, Driss
Guessous; the license's conditions kept: this notice and its disclaimer, see
tests/data/flex/public2/LICENSE.attention-gym), from
attn_gym/masks/{global_sliding_window,shared_prefix,flamingo,batchify,block_diffusion,
jetspec,document_mask}.py and attn_gym/mods/{sandwich,graphormer,activation}.py; the
modules around them are written for this corpus (tests/test_flex_public2.py)."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.flex_attention import (
    and_masks,
    create_block_mask,
    flex_attention,
    noop_mask,
    or_masks,
)


def causal_mask(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


# attn_gym/masks/global_sliding_window.py
def generate_global_sliding_window(window_size, is_global):
    def sliding_window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() <= window_size

    def global_attention(b, h, q_idx, kv_idx):
        return is_global[q_idx] | is_global[kv_idx]

    global_sliding_window_mask = or_masks(sliding_window, global_attention)
    global_sliding_window_mask.__name__ = f"global_sliding_window_{window_size}"
    return global_sliding_window_mask


# attn_gym/masks/document_mask.py
def _offsets_to_doc_ids_tensor(offsets):
    device = offsets.device
    counts = offsets[1:] - offsets[:-1]
    return torch.repeat_interleave(
        torch.arange(len(counts), device=device, dtype=torch.int32), counts
    )


def generate_packed_causal_doc_mask_mod(offsets, document_id):
    def doc_causal_mask_mod(b, h, q_idx, kv_idx):
        doc_start = offsets[document_id[q_idx]]
        return (kv_idx >= doc_start) & causal_mask(b, h, q_idx, kv_idx)

    return doc_causal_mask_mod


# attn_gym/masks/shared_prefix.py
def generate_shared_prefix_mask_mod(offsets, prefix_document_id, document_id):
    def shared_prefix_mask_mod(b, h, q_idx, kv_idx):
        q_document = document_id[q_idx]
        q_document_start = offsets[q_document]
        q_prefix_document = prefix_document_id[q_document]
        q_prefix_start = offsets[q_prefix_document]
        q_prefix_end = offsets[q_prefix_document]

        same_document_causal = (kv_idx >= q_document_start) & causal_mask(b, h, q_idx, kv_idx)
        prefix_document = (
            (q_document != q_prefix_document)
            & (kv_idx >= q_prefix_start)
            & (kv_idx < q_prefix_end)
        )
        return same_document_causal | prefix_document

    return shared_prefix_mask_mod


# attn_gym/masks/flamingo.py (the image boundaries made by the caller)
def generate_vision_cross_attention_mask_mod(intervals, image_boundaries):
    def vision_cross_attention_mask_mod(b, h, q_idx, kv_idx):
        image_idx = image_boundaries[kv_idx]
        interval = intervals[image_idx]
        return (q_idx >= interval[0]) & (q_idx < interval[1])

    return vision_cross_attention_mask_mod


# attn_gym/masks/batchify.py
def batchify_mask_mod(mask_mod, batchify_size):
    def batched_mask_mod(b, h, q_idx, kv_idx):
        q_batch = q_idx // batchify_size
        kv_batch = kv_idx // batchify_size
        same_batch = q_batch == kv_batch
        inner_mask = mask_mod(b, h, q_idx % batchify_size, kv_idx % batchify_size)
        return same_batch & inner_mask

    return batched_mask_mod


# attn_gym/masks/block_diffusion.py
def generate_block_diffusion_mask(seq_len, block_size):
    def block_diffusion_mask(b, h, q_idx, kv_idx):
        q_noised = q_idx < seq_len
        kv_noised = kv_idx < seq_len
        q_block = (q_idx % seq_len) // block_size
        kv_block = (kv_idx % seq_len) // block_size

        block_diagonal = (q_block == kv_block) & (q_noised == kv_noised)
        offset_block_causal = (q_block > kv_block) & q_noised & ~kv_noised
        block_causal = (q_block >= kv_block) & ~q_noised & ~kv_noised
        return block_diagonal | offset_block_causal | block_causal

    return block_diffusion_mask


# attn_gym/masks/jetspec.py
def generate_jetspec_training_mask_mod(prefix_length, block_size):
    def jetspec_training_mask_mod(b, h, q_idx, kv_idx):
        q_block = q_idx // block_size
        q_block_offset = q_idx % block_size
        kv_block_idx = kv_idx - prefix_length
        kv_block = kv_block_idx // block_size
        kv_block_offset = kv_block_idx % block_size
        same_block_causal = (
            (kv_idx >= prefix_length) & (q_block == kv_block) & (kv_block_offset <= q_block_offset)
        )
        return (kv_idx < prefix_length) | same_block_causal

    return jetspec_training_mask_mod


def generate_jetspec_tree_causal_mask_mod(prefix_length, ancestor_matrix):
    num_tree_nodes = ancestor_matrix.shape[0]
    tree_stop = prefix_length + num_tree_nodes

    def jetspec_tree_causal_mask_mod(b, h, q_idx, kv_idx):
        tree_idx = (kv_idx - prefix_length).clamp(min=0, max=num_tree_nodes - 1)
        tree_visible = (kv_idx >= prefix_length) & (kv_idx < tree_stop)
        return (kv_idx < prefix_length) | (tree_visible & ancestor_matrix[q_idx, tree_idx])

    return jetspec_tree_causal_mask_mod


# attn_gym/mods/sandwich.py (the tables made by the module)
def sandwich_tables(H, max_seq_len, d_bar=128):
    freqs = 1.0 / 10000 ** (2 * torch.arange(d_bar // 2, dtype=torch.float32) / d_bar)
    padded_len = -(-(2 * max_seq_len - 1) // 8) * 8
    distances = torch.arange(padded_len, dtype=torch.float32) - (max_seq_len - 1)
    rel_bias = torch.cos(distances.abs()[:, None] * freqs).sum(dim=-1)
    head_scale = H / (8.0 * torch.arange(1, H + 1, dtype=torch.float32))
    return rel_bias, head_scale


def generate_sandwich_bias(rel_bias, head_scale, max_seq_len):
    offset = max_seq_len - 1

    def sandwich_mod(score, b, h, q_idx, kv_idx):
        return score + rel_bias[q_idx - kv_idx + offset] * head_scale[h]

    return sandwich_mod


# attn_gym/mods/graphormer.py
def generate_graphormer_spatial_bias(spatial_bias, distances):
    def graphormer_spatial_bias(score, b, h, q_idx, kv_idx):
        return score + spatial_bias[h, distances[b, q_idx, kv_idx]]

    return graphormer_spatial_bias


# attn_gym/mods/activation.py
def generate_activation_score_mod(activation=F.gelu, offset=1.0):
    def activation_score_mod(score, b, h, q_idx, kv_idx):
        return torch.log(activation(score) + offset)

    return activation_score_mod


def _heads(x, n_heads):
    B, T, C = x.shape
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)


class Longformer(nn.Module):
    """A bidirectional encoder layer: a local window or-ed with global tokens, the global
    flags a forward argument."""

    def __init__(self, dim, n_heads, window):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.n_heads = n_heads
        self.window = window

    def forward(self, x, is_global):
        B, T, C = x.shape
        q, k, v = (_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))
        mask_mod = generate_global_sliding_window(self.window, is_global)
        block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=T, KV_LEN=T,
                                       device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return self.out(out.transpose(1, 2).reshape(B, T, C))


def longformer():
    is_global = torch.zeros(24, dtype=torch.bool)
    is_global[0] = True
    is_global[12] = True
    return Longformer(48, 4, 3), {"x": torch.randn(2, 24, 48), "is_global": is_global}


class Packed(nn.Module):
    """Documents packed into one sequence, the offsets and ids forward arguments: a causal
    document mask, or a shared prompt with its continuations."""

    def __init__(self, dim, n_heads, mask="causal"):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.n_heads = n_heads
        self.mask = mask

    def forward(self, x, offsets, document_id, prefix_document_id=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, -1).permute(2, 0, 3, 1, 4)
        if self.mask == "shared_prefix":
            mask_mod = generate_shared_prefix_mask_mod(offsets, prefix_document_id,
                                                       document_id)
        else:
            mask_mod = generate_packed_causal_doc_mask_mod(offsets, document_id)
        block_mask = create_block_mask(mask_mod, None, None, T, T, device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def packed_causal():
    offsets = torch.tensor([0, 5, 9, 14, 24], dtype=torch.int32)
    return Packed(48, 4), {"x": torch.randn(2, 24, 48), "offsets": offsets,
                           "document_id": _offsets_to_doc_ids_tensor(offsets)}


def shared_prefix():
    offsets = torch.tensor([0, 3, 5, 7, 9, 12, 14, 16, 18, 24], dtype=torch.int32)
    prefix = torch.tensor([0, 0, 0, 0, 4, 4, 4, 4, 4])
    return Packed(48, 4, "shared_prefix"), {
        "x": torch.randn(2, 24, 48), "offsets": offsets,
        "document_id": _offsets_to_doc_ids_tensor(offsets), "prefix_document_id": prefix}


class VisionCrossAttention(nn.Module):
    """Flamingo's text-to-image cross-attention: each text token sees the images whose
    interval holds it."""

    def __init__(self, dim, n_heads, image_token_length):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.n_heads = n_heads
        self.image_token_length = image_token_length

    def forward(self, x, images, intervals):
        B, T, C = x.shape
        S = images.shape[1]
        q = _heads(self.q(x), self.n_heads)
        k, v = (_heads(t, self.n_heads) for t in self.kv(images).chunk(2, dim=-1))
        num_images = intervals.shape[0]
        image_boundaries = torch.repeat_interleave(
            torch.arange(num_images, device=x.device), repeats=self.image_token_length)
        mask_mod = generate_vision_cross_attention_mask_mod(intervals, image_boundaries)
        block_mask = create_block_mask(mask_mod, None, None, T, S, device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def flamingo():
    intervals = torch.tensor([[0, 7], [1, 7], [7, 12], [7, 10], [10, 12]], dtype=torch.int32)
    return VisionCrossAttention(48, 4, 3), {
        "x": torch.randn(3, 12, 48), "images": torch.randn(3, 15, 48), "intervals": intervals}


class Blocked(nn.Module):
    """A mask made from the module's settings: batchify over causal, block diffusion over
    noised and clean halves, JetSpec's draft-head training mask."""

    def __init__(self, dim, n_heads, mask, size):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.n_heads = n_heads
        self.mask = mask
        self.size = size

    def forward(self, x, prefix=None):
        B, T, C = x.shape
        q, k, v = (_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))
        kv_len = T
        if self.mask == "batchify":
            mask_mod = batchify_mask_mod(causal_mask, self.size)
        elif self.mask == "batchify_noop":
            mask_mod = batchify_mask_mod(noop_mask, self.size)
        elif self.mask == "block_diffusion":
            mask_mod = generate_block_diffusion_mask(T // 2, self.size)
        else:
            mask_mod = generate_jetspec_training_mask_mod(prefix.shape[1], self.size)
            pk, pv = (_heads(t, self.n_heads) for t in prefix.chunk(2, dim=-1))
            k = torch.cat([pk, k], dim=2)
            v = torch.cat([pv, v], dim=2)
            kv_len = k.shape[2]
        block_mask = create_block_mask(mask_mod, None, None, T, kv_len, device=x.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def batchify():
    return Blocked(48, 4, "batchify", 4), {"x": torch.randn(2, 24, 48)}


def batchify_noop():
    return Blocked(48, 4, "batchify_noop", 6), {"x": torch.randn(2, 24, 48)}


def block_diffusion():
    return Blocked(48, 4, "block_diffusion", 4), {"x": torch.randn(2, 24, 48)}


def jetspec_training():
    return Blocked(48, 4, "jetspec", 4), {
        "x": torch.randn(2, 16, 48), "prefix": torch.randn(2, 8, 96)}


class TreeVerify(nn.Module):
    """JetSpec's tree verification: the draft tree's nodes attend to the verified prefix
    and to their ancestors, the ancestor matrix a forward argument."""

    def __init__(self, dim, n_heads, prefix_length):
        super().__init__()
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.n_heads = n_heads
        self.prefix_length = prefix_length

    def forward(self, tree, context, ancestor_matrix):
        B, N, C = tree.shape
        q = _heads(self.q(tree), self.n_heads)
        k, v = (_heads(t, self.n_heads)
                for t in self.kv(torch.cat([context, tree], dim=1)).chunk(2, dim=-1))
        mask_mod = generate_jetspec_tree_causal_mask_mod(self.prefix_length, ancestor_matrix)
        block_mask = create_block_mask(mask_mod, None, None, N, k.shape[2], device=tree.device)
        out = flex_attention(q, k, v, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, N, C)


def _ancestors(parent_indices):
    ancestor_matrix = torch.eye(len(parent_indices), dtype=torch.bool)
    for node, parent in enumerate(parent_indices[1:], start=1):
        ancestor_matrix[node] |= ancestor_matrix[parent]
    return ancestor_matrix


def jetspec_tree():
    ancestors = _ancestors([-1, 0, 0, 1, 1, 2, 3])
    return TreeVerify(48, 4, 10), {"tree": torch.randn(2, 7, 48),
                                   "context": torch.randn(2, 10, 48),
                                   "ancestor_matrix": ancestors}


class Sandwich(nn.Module):
    """Causal attention with Sandwich's relative bias, its tables buffers made for the
    module's longest sequence."""

    def __init__(self, dim, n_heads, max_seq_len):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.n_heads = n_heads
        self.max_seq_len = max_seq_len
        rel_bias, head_scale = sandwich_tables(n_heads, max_seq_len)
        self.register_buffer("rel_bias", rel_bias)
        self.register_buffer("head_scale", head_scale)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))
        score_mod = generate_sandwich_bias(self.rel_bias, self.head_scale, self.max_seq_len)
        block_mask = create_block_mask(causal_mask, None, None, T, T, device=x.device)
        out = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def sandwich():
    return Sandwich(48, 4, 32), {"x": torch.randn(2, 24, 48)}


class Graphormer(nn.Module):
    """Graph attention over all node pairs with a learned bias per head and shortest-path
    distance, the distances a forward argument."""

    def __init__(self, dim, n_heads, max_distance):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.n_heads = n_heads
        self.spatial_bias = nn.Parameter(torch.randn(n_heads, max_distance + 2))

    def forward(self, nodes, distances):
        B, N, C = nodes.shape
        q, k, v = (_heads(t, self.n_heads) for t in self.qkv(nodes).chunk(3, dim=-1))
        score_mod = generate_graphormer_spatial_bias(self.spatial_bias, distances)
        out = flex_attention(q, k, v, score_mod=score_mod)
        return out.transpose(1, 2).reshape(B, N, C)


def graphormer():
    distances = torch.randint(0, 6, (2, 10, 10), dtype=torch.int32)
    return Graphormer(48, 4, 4), {"nodes": torch.randn(2, 10, 48), "distances": distances}


class ActivationAttention(nn.Module):
    """Softmax replaced by an activation through the log-space score change."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.n_heads = n_heads

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))
        score_mod = generate_activation_score_mod(torch.sigmoid, 1.0)
        block_mask = create_block_mask(causal_mask, None, None, T, T, device=x.device)
        out = flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
        return out.transpose(1, 2).reshape(B, T, C)


def activation():
    return ActivationAttention(48, 4), {"x": torch.randn(2, 24, 48)}


def make():
    return shared_prefix()
