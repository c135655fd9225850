"""transformers models/t5/modeling_t5.py: T5Attention, as written there, without the
relative-position bucket table (a layer past the first takes the bias as an argument)."""

import torch
from torch import nn


class T5Config:
    def __init__(self, d_model=512, d_kv=64, num_heads=8, dropout_rate=0.0):
        self.d_model = d_model
        self.d_kv = d_kv
        self.num_heads = num_heads
        self.dropout_rate = dropout_rate


class T5Attention(nn.Module):
    def __init__(self, config: T5Config, layer_idx=None):
        super().__init__()
        self.d_model = config.d_model
        self.key_value_proj_dim = config.d_kv
        self.n_heads = config.num_heads
        self.dropout = config.dropout_rate
        self.inner_dim = self.n_heads * self.key_value_proj_dim
        self.layer_idx = layer_idx

        # Mesh TensorFlow initialization to avoid scaling before softmax
        self.q = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, self.d_model, bias=False)

    def forward(self, hidden_states, mask=None, key_value_states=None, position_bias=None,
                output_attentions=False):
        batch_size, seq_length = hidden_states.shape[:2]
        shape = (batch_size, -1, self.n_heads, self.key_value_proj_dim)

        query_states = self.q(hidden_states).view(shape).transpose(1, 2)
        current_states = key_value_states if key_value_states is not None else hidden_states
        key_states = self.k(current_states).view(shape).transpose(1, 2)
        value_states = self.v(current_states).view(shape).transpose(1, 2)

        # compute scores, equivalent of torch.einsum("bnqd,bnkd->bnqk", query_states, key_states)
        scores = torch.matmul(query_states, key_states.transpose(3, 2))

        if position_bias is None:
            key_length = key_states.shape[-2]
            position_bias = torch.zeros(
                (1, self.n_heads, seq_length, key_length), device=scores.device, dtype=scores.dtype
            )
            if mask is not None:
                position_bias = position_bias + mask[:, :, :, : key_states.shape[-2]]

        position_bias_masked = position_bias
        scores += position_bias_masked

        # (batch_size, n_heads, seq_length, key_length)
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_weights = nn.functional.dropout(attn_weights, p=self.dropout, training=self.training)

        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.view(batch_size, -1, self.inner_dim)
        attn_output = self.o(attn_output)

        outputs = (attn_output, position_bias)
        if output_attentions:
            outputs = outputs + (attn_weights,)
        return outputs


def factory(D, H, d):
    return T5Attention(T5Config(d_model=D, d_kv=d, num_heads=H))
