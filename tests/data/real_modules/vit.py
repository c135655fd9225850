"""transformers models/vit/modeling_vit.py: ViTSelfAttention, as written there (the eager
attention function inlined)."""

import math

import torch
from torch import nn


class ViTConfig:
    def __init__(self, hidden_size=768, num_attention_heads=12, qkv_bias=True,
                 attention_probs_dropout_prob=0.0):
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.qkv_bias = qkv_bias
        self.attention_probs_dropout_prob = attention_probs_dropout_prob


class ViTSelfAttention(nn.Module):
    def __init__(self, config: ViTConfig):
        super().__init__()
        if config.hidden_size % config.num_attention_heads != 0:
            raise ValueError(
                f"The hidden size {config.hidden_size} is not a multiple of the number of attention "
                f"heads {config.num_attention_heads}."
            )

        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = int(config.hidden_size / config.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.dropout_prob = config.attention_probs_dropout_prob
        self.scaling = self.attention_head_size**-0.5

        self.query = nn.Linear(config.hidden_size, self.all_head_size, bias=config.qkv_bias)
        self.key = nn.Linear(config.hidden_size, self.all_head_size, bias=config.qkv_bias)
        self.value = nn.Linear(config.hidden_size, self.all_head_size, bias=config.qkv_bias)

    def forward(self, hidden_states, head_mask=None, output_attentions: bool = False):
        batch_size = hidden_states.shape[0]
        new_shape = batch_size, -1, self.num_attention_heads, self.attention_head_size

        key_layer = self.key(hidden_states).view(*new_shape).transpose(1, 2)
        value_layer = self.value(hidden_states).view(*new_shape).transpose(1, 2)
        query_layer = self.query(hidden_states).view(*new_shape).transpose(1, 2)

        attn_weights = torch.matmul(query_layer, key_layer.transpose(-1, -2)) * self.scaling
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_layer.dtype)
        attn_weights = nn.functional.dropout(attn_weights, p=self.dropout_prob, training=self.training)
        if head_mask is not None:
            attn_weights = attn_weights * head_mask
        context_layer = torch.matmul(attn_weights, value_layer).transpose(1, 2).contiguous()

        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.reshape(new_context_layer_shape)

        outputs = (context_layer, attn_weights) if output_attentions else (context_layer,)
        return outputs


def factory(D, H):
    return ViTSelfAttention(ViTConfig(hidden_size=D, num_attention_heads=H))
