"""Forms of the transformers zoo's other families (tools/zoo.py, docs/torch.md "Families
beyond the list"), written small in the style of the code they come from; each factory
returns the module and its call."""

from __future__ import annotations

import math

import torch
from torch import nn


class PartialRotary(nn.Module):
    """GPT-NeoX-Japanese's attention (transformers' modeling_gpt_neox_japanese.py): a fused
    qkv projection split per head, the first `rotary_ndims` of each head rotated and the rest
    passed through (`query[..., self.rotary_ndims:]`). At heads 6, head width 10 and rotary
    width 4 the pass-through is 6 wide, as wide as the heads are many."""

    def __init__(self, hidden: int = 60, heads: int = 6, rotary_ndims: int = 4) -> None:
        super().__init__()
        self.heads, self.head_size, self.rotary_ndims = heads, hidden // heads, rotary_ndims
        self.query_key_value = nn.Linear(hidden, 3 * hidden, bias=False)
        self.dense = nn.Linear(hidden, hidden, bias=False)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        b, t, _ = hidden_states.shape
        qkv = self.query_key_value(hidden_states).view(b, t, self.heads, 3 * self.head_size)
        query = qkv[..., : self.head_size].permute(0, 2, 1, 3)
        key = qkv[..., self.head_size: 2 * self.head_size].permute(0, 2, 1, 3)
        value = qkv[..., 2 * self.head_size:].permute(0, 2, 1, 3)
        query_rot, query_pass = query[..., : self.rotary_ndims], query[..., self.rotary_ndims:]
        key_rot, key_pass = key[..., : self.rotary_ndims], key[..., self.rotary_ndims:]
        query = torch.cat((-query_rot, query_pass), dim=-1)
        key = torch.cat((-key_rot, key_pass), dim=-1)
        scores = query @ key.transpose(-1, -2) / math.sqrt(self.head_size)
        out = scores.softmax(dim=-1) @ value
        return self.dense(out.transpose(1, 2).reshape(b, t, -1))


def partial_rotary() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return PartialRotary().eval(), {"hidden_states": torch.randn(7, 9, 60)}


class GridCall(nn.Module):
    """BEiT's and Data2Vec-Vision's self-attention (transformers' modeling_beit.py) is called
    with its patch grid as a `torch.Size` (`resolution`), beside its hidden states."""

    def __init__(self, hidden: int = 60, heads: int = 6) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)

    def forward(self, hidden_states: torch.Tensor, interpolate_pos_encoding: bool = False,
                resolution: torch.Size | None = None) -> torch.Tensor:
        b, t, c = hidden_states.shape
        q, k, v = self.qkv(hidden_states).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        out = (q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))).softmax(dim=-1) @ v
        return out.transpose(1, 2).reshape(b, t, c)


def grid_call() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return GridCall().eval(), {"hidden_states": torch.randn(7, 17, 60),
                               "interpolate_pos_encoding": False,
                               "resolution": torch.Size([4, 4])}


class BlockWrites(nn.Module):
    """BigBird's block-sparse attention (transformers' modeling_big_bird.py) fills its
    per-block tensors entry by entry (`second_seq_pad[:, :, 0] = ...`, `[:, :, -1]`): the
    first and last query block attend to everything, the middle ones to their band."""

    def __init__(self, hidden: int = 60, heads: int = 6) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        b, t, c = hidden_states.shape
        q, k, v = self.qkv(hidden_states).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
        band = torch.zeros_like(scores)
        band[:, :, 0] = scores[:, :, 0]
        band[:, :, -1] = scores[:, :, -1]
        band[:, :, 1:-1] = scores[:, :, 1:-1] * 0.5
        return (band.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, c)


def block_writes() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return BlockWrites().eval(), {"hidden_states": torch.randn(7, 9, 60)}


class TrainOverride(nn.Module):
    """LeViT's attention (transformers' modeling_levit.py) overrides `train` to clear its
    cache of biases, and returns nothing: `module.eval()` is then None."""

    def __init__(self, hidden: int = 60, heads: int = 6) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.attention_bias_cache: dict = {}

    @torch.no_grad()
    def train(self, mode: bool = True) -> None:
        super().train(mode)
        if mode and self.attention_bias_cache:
            self.attention_bias_cache = {}

    def forward(self, hidden_state: torch.Tensor) -> torch.Tensor:
        b, t, c = hidden_state.shape
        q, k, v = self.qkv(hidden_state).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        out = (q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))).softmax(dim=-1) @ v
        return out.transpose(1, 2).reshape(b, t, c)


def train_override() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    module = TrainOverride()
    module.eval()
    return module, {"hidden_state": torch.randn(7, 9, 60)}


class RelativeRepeat(nn.Module):
    """SEW-D's disentangled attention (transformers' modeling_sew_d.py, DeBERTa's): the
    relative-position projections, one per head, are repeated over the batch to meet the
    queries folded as [B * heads, T, d] (`pos_query_layer.repeat(q.size(0) // heads, 1, 1)`),
    a count torch traces."""

    def __init__(self, hidden: int = 60, heads: int = 6, span: int = 9) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.pos = nn.Linear(hidden, hidden)
        self.rel_embeddings = nn.Parameter(torch.randn(span, hidden))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        b, t, c = hidden_states.shape
        q, k, v = (y.reshape(b, t, self.heads, -1).transpose(1, 2).reshape(b * self.heads, t, -1)
                   for y in self.qkv(hidden_states).split(c, dim=-1))
        pos = self.pos(self.rel_embeddings[:t]).view(t, self.heads, -1).transpose(0, 1)
        pos = pos.repeat(q.size(0) // self.heads, 1, 1)
        scores = (q @ k.transpose(-1, -2) + q @ pos.transpose(-1, -2)) / math.sqrt(2 * q.size(-1))
        out = scores.softmax(dim=-1) @ v
        return out.view(b, self.heads, t, -1).transpose(1, 2).reshape(b, t, c)


def relative_repeat() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return RelativeRepeat().eval(), {"hidden_states": torch.randn(7, 9, 60)}


class LinearWithBatchNorm(nn.Module):
    """LeViT's projections (transformers' modeling_levit.py, `MLPLayerWithBN`): a linear
    layer then a `BatchNorm1d` over the flattened tokens, at inference."""

    def __init__(self, hidden: int = 60, out: int = 60) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, out, bias=False)
        self.batch_norm = nn.BatchNorm1d(out)

    def forward(self, hidden_state: torch.Tensor) -> torch.Tensor:
        hidden_state = self.linear(hidden_state)
        return self.batch_norm(hidden_state.flatten(0, 1)).reshape_as(hidden_state)


class NormedProjections(nn.Module):
    def __init__(self, hidden: int = 60, heads: int = 6) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = LinearWithBatchNorm(hidden, 3 * hidden)
        self.activation = nn.Hardswish()  # LeViT's, before its projection
        self.proj = LinearWithBatchNorm(hidden, hidden)

    def forward(self, hidden_state: torch.Tensor) -> torch.Tensor:
        b, t, c = hidden_state.shape
        q, k, v = self.qkv(hidden_state).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        out = (q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))).softmax(dim=-1) @ v
        return self.proj(self.activation(out.transpose(1, 2).reshape(b, t, c)))


def normed_projections() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    module = NormedProjections()
    for norm in (module.qkv.batch_norm, module.proj.batch_norm):  # statistics of its own
        norm.running_mean.normal_()
        norm.running_var.uniform_(0.5, 2.0)
    return module.eval(), {"hidden_state": torch.randn(7, 9, 60)}


class RelativeShift(nn.Module):
    """XLNet's relative attention (transformers' modeling_xlnet.py, `XLNetRelativeAttention`,
    Apache-2.0), time first ([qlen, bsz, d]): content scores against the memory and the
    tokens, position scores against `pos_emb` (klen + qlen relative positions, the model's),
    the latter shifted with `rel_shift_bnij` as written there: viewed with the two lengths
    swapped, the first row dropped, viewed back, the first `klen` columns kept."""

    def __init__(self, d_model: int = 60, n_head: int = 6, d_head: int = 10) -> None:
        super().__init__()
        self.scale = 1 / (d_head**0.5)
        self.q = nn.Parameter(torch.randn(d_model, n_head, d_head) * 0.1)
        self.k = nn.Parameter(torch.randn(d_model, n_head, d_head) * 0.1)
        self.v = nn.Parameter(torch.randn(d_model, n_head, d_head) * 0.1)
        self.o = nn.Parameter(torch.randn(d_model, n_head, d_head) * 0.1)
        self.r = nn.Parameter(torch.randn(d_model, n_head, d_head) * 0.1)
        self.r_r_bias = nn.Parameter(torch.randn(n_head, d_head) * 0.1)
        self.r_w_bias = nn.Parameter(torch.randn(n_head, d_head) * 0.1)

    @staticmethod
    def rel_shift_bnij(x, klen=-1):
        x_size = x.shape

        x = x.reshape(x_size[0], x_size[1], x_size[3], x_size[2])
        x = x[:, :, 1:, :]
        x = x.reshape(x_size[0], x_size[1], x_size[2], x_size[3] - 1)
        x = torch.index_select(x, 3, torch.arange(klen, device=x.device, dtype=torch.long))
        return x

    def rel_attn_core(self, q_head, k_head_h, v_head_h, k_head_r):
        ac = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_w_bias, k_head_h)
        bd = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_r_bias, k_head_r)
        bd = self.rel_shift_bnij(bd, klen=ac.shape[3])
        attn_score = (ac + bd) * self.scale
        attn_prob = nn.functional.softmax(attn_score, dim=3)
        return torch.einsum("bnij,jbnd->ibnd", attn_prob, v_head_h)

    def forward(self, h: torch.Tensor, pos_emb: torch.Tensor,
                mems: torch.Tensor | None = None) -> torch.Tensor:
        cat = torch.cat([mems, h], dim=0) if mems is not None else h
        q_head_h = torch.einsum("ibh,hnd->ibnd", h, self.q)
        k_head_h = torch.einsum("ibh,hnd->ibnd", cat, self.k)
        v_head_h = torch.einsum("ibh,hnd->ibnd", cat, self.v)
        k_head_r = torch.einsum("ibh,hnd->ibnd", pos_emb, self.r)
        attn_vec = self.rel_attn_core(q_head_h, k_head_h, v_head_h, k_head_r)
        return torch.einsum("ibnd,hnd->ibh", attn_vec, self.o) + h


def _positions(klen: int, qlen: int, bsz: int, d_model: int = 60) -> torch.Tensor:
    """XLNet's `relative_positional_encoding` (bidirectional): klen down to -qlen + 1."""
    inv_freq = 1 / torch.pow(10000, torch.arange(0, d_model, 2.0) / d_model)
    sinusoid = torch.arange(klen, -qlen, -1.0)[:, None] * inv_freq
    return torch.cat([sinusoid.sin(), sinusoid.cos()], dim=-1)[:, None].expand(-1, bsz, -1)


def relative_shift() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return RelativeShift().eval(), {"h": torch.randn(9, 7, 60), "pos_emb": _positions(9, 9, 7)}


def relative_shift_memory() -> tuple[nn.Module, dict]:
    """With a memory of 5 positions before the 9 tokens: klen = mlen + qlen = 14."""
    torch.manual_seed(0)
    return RelativeShift().eval(), {"h": torch.randn(9, 7, 60), "pos_emb": _positions(14, 9, 7),
                                    "mems": torch.randn(5, 7, 60)}


class RelativeShiftLastRow(RelativeShift):
    """A one-edit bug: the shift drops the last row of the swapped view, not the first."""

    @staticmethod
    def rel_shift_bnij(x, klen=-1):
        x_size = x.shape

        x = x.reshape(x_size[0], x_size[1], x_size[3], x_size[2])
        x = x[:, :, :-1, :]
        x = x.reshape(x_size[0], x_size[1], x_size[2], x_size[3] - 1)
        x = torch.index_select(x, 3, torch.arange(klen, device=x.device, dtype=torch.long))
        return x


def relative_shift_last_row() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return RelativeShiftLastRow().eval(), {"h": torch.randn(9, 7, 60),
                                           "pos_emb": _positions(9, 9, 7)}


class RelativeShiftQueries(RelativeShift):
    """A one-edit bug: the softmax over the queries (`dim=2`), not the keys."""

    def rel_attn_core(self, q_head, k_head_h, v_head_h, k_head_r):
        ac = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_w_bias, k_head_h)
        bd = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_r_bias, k_head_r)
        bd = self.rel_shift_bnij(bd, klen=ac.shape[3])
        attn_score = (ac + bd) * self.scale
        attn_prob = nn.functional.softmax(attn_score, dim=2)
        return torch.einsum("bnij,jbnd->ibnd", attn_prob, v_head_h)


def relative_shift_queries() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return RelativeShiftQueries().eval(), {"h": torch.randn(9, 7, 60),
                                           "pos_emb": _positions(9, 9, 7)}


class InPlaceShift(nn.Module):
    """Funnel's relative attention (transformers' modeling_funnel.py,
    `FunnelRelMultiheadAttention` with `attention_type="relative_shift"`, Apache-2.0), one
    block: position scores against `2 * T` relative positions, shifted by
    `_relative_shift_gather` as written there, then multiplied in place by the `cls_mask`
    (`positional_attn *= cls_mask`, on the view the shift returns)."""

    def __init__(self, d_model: int = 60, n_head: int = 6, d_head: int = 10) -> None:
        super().__init__()
        self.n_head, self.d_head = n_head, d_head
        self.scale = 1.0 / (d_head**0.5)
        self.q_head = nn.Linear(d_model, n_head * d_head, bias=False)
        self.k_head = nn.Linear(d_model, n_head * d_head)
        self.v_head = nn.Linear(d_model, n_head * d_head)
        self.r_w_bias = nn.Parameter(torch.randn(n_head, d_head) * 0.1)
        self.r_r_bias = nn.Parameter(torch.randn(n_head, d_head) * 0.1)
        self.r_kernel = nn.Parameter(torch.randn(d_model, n_head, d_head) * 0.1)
        self.post_proj = nn.Linear(n_head * d_head, d_model)

    @staticmethod
    def relative_shift_gather(positional_attn, context_len, shift):
        batch_size, n_head, seq_len, max_rel_len = positional_attn.shape

        positional_attn = torch.reshape(positional_attn, [batch_size, n_head, max_rel_len, seq_len])
        positional_attn = positional_attn[:, :, shift:, :]
        positional_attn = torch.reshape(positional_attn, [batch_size, n_head, seq_len, max_rel_len - shift])
        positional_attn = positional_attn[..., :context_len]
        return positional_attn

    def relative_positional_attention(self, r, q_head, context_len, cls_mask):
        v = self.r_r_bias * self.scale
        r_head = torch.einsum("td,dnh->tnh", r, self.r_kernel)
        positional_attn = torch.einsum("binh,tnh->bnit", q_head + v, r_head)
        positional_attn = self.relative_shift_gather(positional_attn, context_len, 1)

        positional_attn *= cls_mask
        return positional_attn

    def forward(self, hidden: torch.Tensor, r: torch.Tensor, cls_mask: torch.Tensor) -> torch.Tensor:
        batch_size, seq_len, _ = hidden.shape
        q_head = self.q_head(hidden).view(batch_size, seq_len, self.n_head, self.d_head)
        k_head = self.k_head(hidden).view(batch_size, seq_len, self.n_head, self.d_head)
        v_head = self.v_head(hidden).view(batch_size, seq_len, self.n_head, self.d_head)
        q_head = q_head * self.scale
        content_score = torch.einsum("bind,bjnd->bnij", q_head + self.r_w_bias * self.scale, k_head)
        positional_attn = self.relative_positional_attention(r, q_head, seq_len, cls_mask)
        attn_prob = torch.softmax(content_score + positional_attn, dim=-1)
        attn_vec = torch.einsum("bnij,bjnd->bind", attn_prob, v_head)
        return self.post_proj(attn_vec.reshape(batch_size, seq_len, -1)) + hidden


def _funnel_call(seq_len: int = 9) -> dict:
    """Funnel's relative positions (`2 * T` of them at one block) and its `cls_mask`: ones
    but for the first row and column (the <cls> token attends apart)."""
    cls_mask = nn.functional.pad(torch.ones([seq_len - 1, seq_len - 1]), (1, 0, 1, 0))
    return {"hidden": torch.randn(7, seq_len, 60), "r": torch.randn(2 * seq_len, 60),
            "cls_mask": cls_mask}


def in_place_shift() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return InPlaceShift().eval(), _funnel_call()


class InPlaceShiftLastRow(InPlaceShift):
    """A one-edit bug: the shift drops the last row of the swapped view, not the first."""

    @staticmethod
    def relative_shift_gather(positional_attn, context_len, shift):
        batch_size, n_head, seq_len, max_rel_len = positional_attn.shape

        positional_attn = torch.reshape(positional_attn, [batch_size, n_head, max_rel_len, seq_len])
        positional_attn = positional_attn[:, :, :-shift, :]
        positional_attn = torch.reshape(positional_attn, [batch_size, n_head, seq_len, max_rel_len - shift])
        positional_attn = positional_attn[..., :context_len]
        return positional_attn


def in_place_shift_last_row() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return InPlaceShiftLastRow().eval(), _funnel_call()


class InPlaceShiftQueries(InPlaceShift):
    """A one-edit bug: the softmax of the masked, shifted scores over the queries."""

    def forward(self, hidden: torch.Tensor, r: torch.Tensor, cls_mask: torch.Tensor) -> torch.Tensor:
        batch_size, seq_len, _ = hidden.shape
        q_head = self.q_head(hidden).view(batch_size, seq_len, self.n_head, self.d_head)
        k_head = self.k_head(hidden).view(batch_size, seq_len, self.n_head, self.d_head)
        v_head = self.v_head(hidden).view(batch_size, seq_len, self.n_head, self.d_head)
        q_head = q_head * self.scale
        content_score = torch.einsum("bind,bjnd->bnij", q_head + self.r_w_bias * self.scale, k_head)
        positional_attn = self.relative_positional_attention(r, q_head, seq_len, cls_mask)
        attn_prob = torch.softmax(content_score + positional_attn, dim=2)
        attn_vec = torch.einsum("bnij,bjnd->bind", attn_prob, v_head)
        return self.post_proj(attn_vec.reshape(batch_size, seq_len, -1)) + hidden


def in_place_shift_queries() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return InPlaceShiftQueries().eval(), _funnel_call()


class LogSumExpAttention(nn.Module):
    """Reformer's local attention (transformers' modeling_reformer.py,
    `LocalSelfAttention._attend` and its callers, Apache-2.0), unchunked: the probabilities
    written with `logsumexp` (`exp(dots - logsumexp(dots))`), the keys scaled, padding
    masked with a large negative value."""

    def __init__(self, hidden: int = 60, heads: int = 6, head_size: int = 10) -> None:
        super().__init__()
        self.heads, self.head_size = heads, head_size
        self.query = nn.Linear(hidden, heads * head_size, bias=False)
        self.key = nn.Linear(hidden, heads * head_size, bias=False)
        self.value = nn.Linear(hidden, heads * head_size, bias=False)
        self.register_buffer("mask_value_float32", torch.tensor(-1e9))

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.heads, self.head_size).transpose(2, 1)

    def _attend(self, query_vectors, key_vectors, value_vectors, attention_mask):
        query_key_dots = torch.matmul(query_vectors, key_vectors.transpose(-1, -2))
        mask = attention_mask.to(torch.bool)[:, None, None, :]
        query_key_dots = torch.where(mask, query_key_dots, self.mask_value_float32)

        logits = torch.logsumexp(query_key_dots, dim=-1, keepdim=True)
        attention_probs = torch.exp(query_key_dots - logits)
        return torch.matmul(attention_probs, value_vectors)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        b, t, _ = hidden_states.shape
        query_vectors = self._split_heads(self.query(hidden_states))
        key_vectors = self._split_heads(self.key(hidden_states))
        value_vectors = self._split_heads(self.value(hidden_states))
        key_vectors = key_vectors / torch.sqrt(torch.tensor(self.head_size, dtype=torch.float32))
        out_vectors = self._attend(query_vectors, key_vectors, value_vectors, attention_mask)
        return out_vectors.transpose(2, 1).reshape(b, t, -1)


def _reformer_call() -> dict:
    mask = torch.ones(7, 9, dtype=torch.long)
    mask[:, -2:] = 0
    return {"hidden_states": torch.randn(7, 9, 60), "attention_mask": mask}


def logsumexp_attention() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return LogSumExpAttention().eval(), _reformer_call()


class LogSumExpQueries(LogSumExpAttention):
    """A one-edit bug: the normaliser taken over the queries (`dim=-2`), not the keys."""

    def _attend(self, query_vectors, key_vectors, value_vectors, attention_mask):
        query_key_dots = torch.matmul(query_vectors, key_vectors.transpose(-1, -2))
        mask = attention_mask.to(torch.bool)[:, None, None, :]
        query_key_dots = torch.where(mask, query_key_dots, self.mask_value_float32)

        logits = torch.logsumexp(query_key_dots, dim=-2, keepdim=True)
        attention_probs = torch.exp(query_key_dots - logits)
        return torch.matmul(attention_probs, value_vectors)


def logsumexp_queries() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return LogSumExpQueries().eval(), _reformer_call()


class HashesCombined(nn.Module):
    """Reformer's LSH attention combining its hash rounds (modeling_reformer.py,
    `LSHSelfAttention.forward`, Apache-2.0): each round's output weighted by the softmax of
    the rounds' `logsumexp` logits, `exp(logits - logsumexp(logits, dim=2))`, and summed
    over the rounds; the logits are also returned."""

    def __init__(self, hidden: int = 60, heads: int = 6, head_size: int = 10,
                 num_hashes: int = 2) -> None:
        super().__init__()
        self.heads, self.head_size, self.num_hashes = heads, head_size, num_hashes
        self.query_key = nn.Linear(hidden, num_hashes * heads * head_size, bias=False)
        self.value = nn.Linear(hidden, heads * head_size, bias=False)

    def forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, t, _ = hidden_states.shape
        qk = self.query_key(hidden_states).view(b, t, self.heads, self.num_hashes, self.head_size)
        qk = qk.permute(0, 2, 3, 1, 4)
        value = self.value(hidden_states).view(b, t, self.heads, 1, self.head_size).permute(0, 2, 3, 1, 4)
        dots = torch.matmul(qk, qk.transpose(-1, -2)) / self.head_size**0.5
        logits = torch.logsumexp(dots, dim=-1, keepdim=True)
        out_vectors = torch.matmul(torch.exp(dots - logits), value)

        probs_vectors = torch.exp(logits - torch.logsumexp(logits, dim=2, keepdim=True))
        out_vectors = torch.sum(out_vectors * probs_vectors, dim=2)
        return out_vectors.transpose(2, 1).reshape(b, t, -1), logits


def hashes_combined() -> tuple[nn.Module, dict]:
    torch.manual_seed(0)
    return HashesCombined().eval(), {"hidden_states": torch.randn(7, 9, 60)}
