"""Hugging Face attention layers in flex mode (attn_implementation="flex_attention"), each
called with the BlockMask its model builds from `masking_utils`' mask functions (built here
without compiling; nothing downloaded)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from torch.nn.attention.flex_attention import create_block_mask
from transformers import LlamaConfig, MistralConfig
from transformers.masking_utils import (
    add_offsets_to_mask_function,
    and_masks,
    causal_mask_function,
    padding_mask_function,
    sliding_window_causal_mask_function,
)
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding
from transformers.models.mistral.modeling_mistral import MistralAttention

BATCH, LENGTH = 2, 9


def _call(config, module, mask_function):
    """The layer's call as its model makes it in flex mode (masking_utils.flex_attention_mask)."""
    x = torch.randn(BATCH, LENGTH, config.hidden_size)
    positions = torch.arange(LENGTH)[None].expand(BATCH, LENGTH)
    cos, sin = LlamaRotaryEmbedding(config)(x, positions)
    mask = create_block_mask(add_offsets_to_mask_function(mask_function, 0, 0), BATCH, None,
                             LENGTH, LENGTH, device="cpu")
    return module, {"hidden_states": x, "position_embeddings": (cos, sin), "attention_mask": mask}


def llama():
    config = LlamaConfig(hidden_size=70, num_attention_heads=5, num_key_value_heads=1, head_dim=14)
    config._attn_implementation = "flex_attention"
    return _call(config, LlamaAttention(config, layer_idx=0), causal_mask_function)


def llama_padded():
    config = LlamaConfig(hidden_size=70, num_attention_heads=5, num_key_value_heads=1, head_dim=14)
    config._attn_implementation = "flex_attention"
    padding = torch.ones(BATCH, LENGTH, dtype=torch.bool)
    padding[0, :3] = False  # left padding of the first sequence
    mask = and_masks(causal_mask_function, padding_mask_function(padding))
    return _call(config, LlamaAttention(config, layer_idx=0), mask)


def mistral():
    config = MistralConfig(hidden_size=70, num_attention_heads=5, num_key_value_heads=1,
                           head_dim=14, sliding_window=4)
    config._attn_implementation = "flex_attention"
    mask = sliding_window_causal_mask_function(config.sliding_window)
    return _call(config, MistralAttention(config, layer_idx=0), mask)


def mistral_wide():
    """A window the size chooser can tell from the other sizes: a dim, HF's convention."""
    config = MistralConfig(hidden_size=70, num_attention_heads=5, num_key_value_heads=1,
                           head_dim=14, sliding_window=11)
    config._attn_implementation = "flex_attention"
    mask = sliding_window_causal_mask_function(config.sliding_window)
    return _call(config, MistralAttention(config, layer_idx=0), mask)


class WindowedAttention(MistralAttention):
    """A model's own flex layer on HF's config: its window read as `q_idx - kv_idx <=
    sliding_window` sees sliding_window + 1 keys, against HF's documented meaning."""

    def forward(self, hidden_states, position_embeddings, attention_mask=None, **kwargs):
        from torch.nn.attention.flex_attention import flex_attention

        B, T, _ = hidden_states.shape
        shape = (B, T, -1, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        window = self.config.sliding_window

        def sliding(b, h, q_idx, kv_idx):
            return (kv_idx <= q_idx) & (q_idx - kv_idx <= window)

        block_mask = create_block_mask(sliding, None, None, T, T, device=q.device)
        y = flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1)), None


def windowed():
    config = MistralConfig(hidden_size=70, num_attention_heads=5, num_key_value_heads=1,
                           head_dim=14, sliding_window=11)
    module, inputs = _call(config, WindowedAttention(config, layer_idx=0),
                           causal_mask_function)
    inputs.pop("attention_mask")
    return module, inputs


CACHED = 8


def mistral_decode(offset=CACHED):
    """A decode step in flex mode: one new token after CACHED cached ones. The BlockMask the
    model builds offsets the query positions by the cache (masking_utils' `q_offset`, the
    cache's length, a number when the mask is made)."""
    from transformers import DynamicCache

    config = MistralConfig(hidden_size=70, num_attention_heads=5, num_key_value_heads=1,
                           head_dim=14, sliding_window=11)
    config._attn_implementation = "flex_attention"
    cache = DynamicCache(config=config)
    past = torch.randn(BATCH, 1, CACHED, 14)
    cache.update(past, torch.randn_like(past), 0)
    x = torch.randn(BATCH, 1, config.hidden_size)
    cos, sin = LlamaRotaryEmbedding(config)(x, torch.full((BATCH, 1), CACHED))
    mask_function = add_offsets_to_mask_function(
        sliding_window_causal_mask_function(config.sliding_window), offset, 0)
    mask = create_block_mask(mask_function, BATCH, None, 1, CACHED + 1, device="cpu")
    return MistralAttention(config, layer_idx=0), {
        "hidden_states": x, "position_embeddings": (cos, sin), "attention_mask": mask,
        "cache": cache}


def mistral_decode_top_left():
    """The same step with the queries' offset left out (top-left: the new token placed at
    position 0, seeing only the first cached key)."""
    return mistral_decode(offset=0)
