""" Multi-Head Attention module """
"""PLANTED BUG (one edit, for tests/test_torch_public8.py): `nn.Softmax(dim=-2)`.

OpenNMT-py (MIT, Copyright (c) 2017-Present OpenNMT). `MultiHeadedAttention` from
OpenNMT/OpenNMT-py commit 0155d95740aad99f7d346df8ab7cd4768d10d6e6,
`onmt/modules/multi_headed_attn.py`, as written there (the layer cache a dict, Shaw et al.'s
clipped relative positions `max_relative_positions`), and the two helpers it imports from
`onmt/utils/misc.py` of the same release (`generate_relative_positions_matrix`,
`relative_matmul`, lines as a stored copy of that file carries them). The factories call it
as `onmt/encoders/transformer.py` and `onmt/decoders/transformer.py` do: the encoder's
`self_attn(input_norm, input_norm, input_norm, mask=mask, type="self")` (the mask True at a
pad), the decoder's `context_attn(memory_bank, memory_bank, query_norm, mask=src_pad_mask,
layer_cache=..., type="context")`, and one decoding step with the cache of the steps
before (`cache=True`: the positions of the last query only)."""
import math
import torch
import torch.nn as nn


# ---- onmt/utils/misc.py


def generate_relative_positions_matrix(length, max_relative_positions,
                                       cache=False):
    """Generate the clipped relative positions matrix
       for a given length and maximum relative positions"""
    if cache:
        distance_mat = torch.arange(-length+1, 1, 1).unsqueeze(0)
    else:
        range_vec = torch.arange(length)
        range_mat = range_vec.unsqueeze(-1).expand(-1, length).transpose(0, 1)
        distance_mat = range_mat - range_mat.transpose(0, 1)
    distance_mat_clipped = torch.clamp(distance_mat,
                                       min=-max_relative_positions,
                                       max=max_relative_positions)
    # Shift values to be >= 0
    final_mat = distance_mat_clipped + max_relative_positions
    return final_mat


def relative_matmul(x, z, transpose):
    """Helper function for relative positions attention."""
    batch_size = x.shape[0]
    heads = x.shape[1]
    length = x.shape[2]
    x_t = x.permute(2, 0, 1, 3)
    x_t_r = x_t.reshape(length, heads * batch_size, -1)
    if transpose:
        z_t = z.transpose(1, 2)
        x_tz_matmul = torch.matmul(x_t_r, z_t)
    else:
        x_tz_matmul = torch.matmul(x_t_r, z)
    x_tz_matmul_r = x_tz_matmul.reshape(length, batch_size, heads, -1)
    x_tz_matmul_r_t = x_tz_matmul_r.permute(1, 2, 0, 3)
    return x_tz_matmul_r_t


# ---- onmt/modules/multi_headed_attn.py


class MultiHeadedAttention(nn.Module):
    """
    Multi-Head Attention module from
    "Attention is All You Need"
    :cite:`DBLP:journals/corr/VaswaniSPUJGKP17`.

    Similar to standard `dot` attention but uses
    multiple attention distributions simulataneously
    to select relevant items.

    Also includes several additional tricks.

    Args:
       head_count (int): number of parallel heads
       model_dim (int): the dimension of keys/values/queries,
           must be divisible by head_count
       dropout (float): dropout parameter
    """

    def __init__(self, head_count, model_dim, dropout=0.1,
                 max_relative_positions=0):
        assert model_dim % head_count == 0
        self.dim_per_head = model_dim // head_count
        self.model_dim = model_dim

        super(MultiHeadedAttention, self).__init__()
        self.head_count = head_count

        self.linear_keys = nn.Linear(model_dim,
                                     head_count * self.dim_per_head)
        self.linear_values = nn.Linear(model_dim,
                                       head_count * self.dim_per_head)
        self.linear_query = nn.Linear(model_dim,
                                      head_count * self.dim_per_head)
        self.softmax = nn.Softmax(dim=-2)
        self.dropout = nn.Dropout(dropout)
        self.final_linear = nn.Linear(model_dim, model_dim)

        self.max_relative_positions = max_relative_positions

        if max_relative_positions > 0:
            vocab_size = max_relative_positions * 2 + 1
            self.relative_positions_embeddings = nn.Embedding(
                vocab_size, self.dim_per_head)

    def forward(self, key, value, query, mask=None,
                layer_cache=None, type=None):
        """
        Compute the context vector and the attention vectors.

        Args:
           key (`FloatTensor`): set of `key_len`
                key vectors `[batch, key_len, dim]`
           value (`FloatTensor`): set of `key_len`
                value vectors `[batch, key_len, dim]`
           query (`FloatTensor`): set of `query_len`
                 query vectors  `[batch, query_len, dim]`
           mask: binary mask indicating which keys have
                 non-zero attention `[batch, query_len, key_len]`
        Returns:
           (`FloatTensor`, `FloatTensor`) :

           * output context vectors `[batch, query_len, dim]`
           * one of the attention vectors `[batch, query_len, key_len]`
        """

        # CHECKS
        # batch, k_len, d = key.size()
        # batch_, k_len_, d_ = value.size()
        # aeq(batch, batch_)
        # aeq(k_len, k_len_)
        # aeq(d, d_)
        # batch_, q_len, d_ = query.size()
        # aeq(batch, batch_)
        # aeq(d, d_)
        # aeq(self.model_dim % 8, 0)
        # if mask is not None:
        #    batch_, q_len_, k_len_ = mask.size()
        #    aeq(batch_, batch)
        #    aeq(k_len_, k_len)
        #    aeq(q_len_ == q_len)
        # END CHECKS

        batch_size = key.size(0)
        dim_per_head = self.dim_per_head
        head_count = self.head_count
        key_len = key.size(1)
        query_len = query.size(1)
        device = key.device

        def shape(x):
            """  projection """
            return x.view(batch_size, -1, head_count, dim_per_head) \
                .transpose(1, 2)

        def unshape(x):
            """  compute context """
            return x.transpose(1, 2).contiguous() \
                    .view(batch_size, -1, head_count * dim_per_head)

        # 1) Project key, value, and query.
        if layer_cache is not None:
            if type == "self":
                query, key, value = self.linear_query(query),\
                                    self.linear_keys(query),\
                                    self.linear_values(query)
                key = shape(key)
                value = shape(value)
                if layer_cache["self_keys"] is not None:
                    key = torch.cat(
                        (layer_cache["self_keys"].to(device), key),
                        dim=2)
                if layer_cache["self_values"] is not None:
                    value = torch.cat(
                        (layer_cache["self_values"].to(device), value),
                        dim=2)
                layer_cache["self_keys"] = key
                layer_cache["self_values"] = value
            elif type == "context":
                query = self.linear_query(query)
                if layer_cache["memory_keys"] is None:
                    key, value = self.linear_keys(key),\
                                 self.linear_values(value)
                    key = shape(key)
                    value = shape(value)
                else:
                    key, value = layer_cache["memory_keys"],\
                               layer_cache["memory_values"]
                layer_cache["memory_keys"] = key
                layer_cache["memory_values"] = value
        else:
            key = self.linear_keys(key)
            value = self.linear_values(value)
            query = self.linear_query(query)
            key = shape(key)
            value = shape(value)

        if self.max_relative_positions > 0 and type == "self":
            key_len = key.size(2)
            # 1 or key_len x key_len
            relative_positions_matrix = generate_relative_positions_matrix(
                key_len, self.max_relative_positions,
                cache=True if layer_cache is not None else False)
            #  1 or key_len x key_len x dim_per_head
            relations_keys = self.relative_positions_embeddings(
                relative_positions_matrix.to(device))
            #  1 or key_len x key_len x dim_per_head
            relations_values = self.relative_positions_embeddings(
                relative_positions_matrix.to(device))

        query = shape(query)

        key_len = key.size(2)
        query_len = query.size(2)

        # 2) Calculate and scale scores.
        query = query / math.sqrt(dim_per_head)
        # batch x num_heads x query_len x key_len
        query_key = torch.matmul(query, key.transpose(2, 3))

        if self.max_relative_positions > 0 and type == "self":
            scores = query_key + relative_matmul(query, relations_keys, True)
        else:
            scores = query_key
        scores = scores.float()

        if mask is not None:
            mask = mask.unsqueeze(1)  # [B, 1, 1, T_values]
            scores = scores.masked_fill(mask, -1e18)

        # 3) Apply attention dropout and compute context vectors.
        attn = self.softmax(scores).to(query.dtype)
        drop_attn = self.dropout(attn)

        context_original = torch.matmul(drop_attn, value)

        if self.max_relative_positions > 0 and type == "self":
            context = unshape(context_original
                              + relative_matmul(drop_attn,
                                                relations_values,
                                                False))
        else:
            context = unshape(context_original)

        output = self.final_linear(context)
        # CHECK
        # batch_, q_len_, d_ = output.size()
        # aeq(q_len, q_len_)
        # aeq(batch, batch_)
        # aeq(d, d_)

        # Return one attn
        top_attn = attn \
            .view(batch_size, head_count,
                  query_len, key_len)[:, 0, :, :] \
            .contiguous()

        return output, top_attn


# ---- factories: as onmt's transformer layers call it (d_model 512, 8 heads; here 48, 4)


class _Encoder(nn.Module):
    def __init__(self, max_relative_positions: int = 0):
        super().__init__()
        self.layer_norm = nn.LayerNorm(48, eps=1e-6)
        self.self_attn = MultiHeadedAttention(4, 48, dropout=0.1,
                                              max_relative_positions=max_relative_positions)

    def forward(self, inputs, mask):
        input_norm = self.layer_norm(inputs)
        context, _ = self.self_attn(input_norm, input_norm, input_norm, mask=mask, type="self")
        return context + inputs


class _Context(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer_norm_2 = nn.LayerNorm(48, eps=1e-6)
        self.context_attn = MultiHeadedAttention(4, 48, dropout=0.1)

    def forward(self, query, memory_bank, src_pad_mask):
        query_norm = self.layer_norm_2(query)
        mid, attn = self.context_attn(memory_bank, memory_bank, query_norm, mask=src_pad_mask,
                                      layer_cache=None, type="context")
        return mid + query, attn


class _Step(nn.Module):
    """One step of `translate`: the decoder's state holds `self_keys`, `self_values` of the
    steps before; the step's own mask is all False (a step sees every key before it)."""

    def __init__(self):
        super().__init__()
        self.self_attn = MultiHeadedAttention(4, 48, dropout=0.1, max_relative_positions=4)

    def forward(self, input_norm, self_keys, self_values):
        layer_cache = {"self_keys": self_keys, "self_values": self_values,
                       "memory_keys": None, "memory_values": None}
        query, attn = self.self_attn(input_norm, input_norm, input_norm, mask=None,
                                     layer_cache=layer_cache, type="self")
        return query, layer_cache["self_keys"], layer_cache["self_values"]


def _src_pad_mask(b: int, s: int) -> torch.Tensor:
    # `~sequence_mask(lengths).unsqueeze(1)`: True at a pad, [B, 1, S]
    mask = torch.zeros(b, 1, s, dtype=torch.bool)
    mask[-1, :, s - 3:] = True
    return mask


def make():
    return _Encoder().eval(), {"inputs": torch.randn(2, 11, 48), "mask": _src_pad_mask(2, 11)}


def make_relative():
    return _Encoder(max_relative_positions=4).eval(), {
        "inputs": torch.randn(2, 11, 48), "mask": _src_pad_mask(2, 11)}


def make_context():
    return _Context().eval(), {"query": torch.randn(2, 7, 48), "memory_bank": torch.randn(2, 11, 48),
                               "src_pad_mask": _src_pad_mask(2, 11)}


def make_step():
    return _Step().eval(), {"input_norm": torch.randn(2, 1, 48),
                            "self_keys": torch.randn(2, 4, 6, 12),
                            "self_values": torch.randn(2, 4, 6, 12)}
