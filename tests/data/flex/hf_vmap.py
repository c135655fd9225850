"""Hugging Face masks built with `use_vmap=True` (a model's own `or_mask_function` /
`and_mask_function`: `create_causal_mask` then evaluates the function by `vmap`), whose tables
reach the layer as their functions when the function broadcasts too (nothing downloaded)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig
from transformers.masking_utils import and_masks, causal_mask_function, sdpa_mask, \
    sliding_window_overlay
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

BATCH, LENGTH = 2, 9


def llama_vmap_sdpa():
    """A window table made by `vmap` (as `create_causal_mask` makes it for a model's own
    `and_mask_function`)."""
    config = LlamaConfig(hidden_size=70, num_attention_heads=5, num_key_value_heads=1, head_dim=14)
    config._attn_implementation = "sdpa"
    module = LlamaAttention(config, layer_idx=0)
    x = torch.randn(BATCH, LENGTH, config.hidden_size)
    positions = torch.arange(LENGTH)[None].expand(BATCH, LENGTH)
    cos, sin = LlamaRotaryEmbedding(config)(x, positions)
    table = sdpa_mask(BATCH, LENGTH, LENGTH, allow_is_causal_skip=False, use_vmap=True,
                      mask_function=and_masks(causal_mask_function, sliding_window_overlay(4)))
    return module, {"hidden_states": x, "position_embeddings": (cos, sin), "attention_mask": table}


def gemma3_bidirectional():
    """A whole tiny Gemma 3 (text) with bidirectional attention: its model passes an
    `or_mask_function` to `create_causal_mask` (`use_vmap=True`): the sliding layers'
    `_bidirectional_window_overlay`, the full layers' `lambda *args: torch.tensor(True)`."""
    torch.manual_seed(0)
    config = Gemma3TextConfig(hidden_size=60, num_attention_heads=6, num_key_value_heads=3,
                              head_dim=10, intermediate_size=44, num_hidden_layers=2,
                              vocab_size=99, max_position_embeddings=64, sliding_window=4,
                              layer_types=["sliding_attention", "full_attention"],
                              use_bidirectional_attention=True)
    config._attn_implementation = "eager"
    ids = torch.randint(3, 99, (BATCH, LENGTH), generator=torch.Generator().manual_seed(1))
    return Gemma3ForCausalLM(config).eval(), {"input_ids": ids}


def _full_layer_call(implementation):
    """The full (global) layer of `gemma3_bidirectional` and its call as the model makes it
    (a forward pre-hook): the table its `lambda *args: torch.tensor(True)` overlay makes."""
    model, inputs = gemma3_bidirectional()
    model.config._attn_implementation = implementation
    module = model.model.layers[1].self_attn
    calls = []
    handle = module.register_forward_pre_hook(
        lambda _, args, kwargs: calls.append((args, dict(kwargs))), with_kwargs=True)
    try:
        with torch.no_grad():
            model(**inputs, use_cache=False)
    finally:
        handle.remove()
    args, kwargs = calls[0]
    call = dict(zip(("hidden_states", "position_embeddings", "attention_mask"), args))
    call.update(kwargs)
    return module, call


def gemma3_full_sdpa():
    return _full_layer_call("sdpa")


def gemma3_full_eager():
    return _full_layer_call("eager")
