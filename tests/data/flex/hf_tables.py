"""Hugging Face attention layers in eager and SDPA modes, each called with the mask table its
model builds from `masking_utils`' mask functions (`eager_mask`, `sdpa_mask`: the function
evaluated over every position, then 0/min for eager), so that the mask is followed as those
functions (nothing downloaded)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
from transformers import DynamicCache, LlamaConfig, MistralConfig
from transformers.masking_utils import (
    and_masks,
    causal_mask_function,
    chunked_causal_mask_function,
    eager_mask,
    sdpa_mask,
    sliding_window_causal_mask_function,
)
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding
from transformers.models.mistral.modeling_mistral import MistralAttention

BATCH, LENGTH, CACHED = 2, 9, 6


def _call(config, module, table):
    """The layer's call as its model makes it (masking_utils.create_causal_mask)."""
    x = torch.randn(BATCH, LENGTH, config.hidden_size)
    positions = torch.arange(LENGTH)[None].expand(BATCH, LENGTH)
    cos, sin = LlamaRotaryEmbedding(config)(x, positions)
    return module, {"hidden_states": x, "position_embeddings": (cos, sin), "attention_mask": table}


def _llama(implementation):
    config = LlamaConfig(hidden_size=70, num_attention_heads=5, num_key_value_heads=1, head_dim=14)
    config._attn_implementation = implementation
    return config, LlamaAttention(config, layer_idx=0)


def llama_eager():
    config, module = _llama("eager")
    table = eager_mask(BATCH, LENGTH, LENGTH, mask_function=causal_mask_function)
    return _call(config, module, table)


def llama_eager_padded():
    config, module = _llama("eager")
    padding = torch.ones(BATCH, LENGTH, dtype=torch.bool)
    padding[0, :3] = False  # left padding of the first sequence
    table = eager_mask(BATCH, LENGTH, LENGTH, mask_function=causal_mask_function,
                       attention_mask=padding)
    return _call(config, module, table)


def llama_sdpa():
    config, module = _llama("sdpa")
    table = sdpa_mask(BATCH, LENGTH, LENGTH, mask_function=causal_mask_function,
                      allow_is_causal_skip=False)
    return _call(config, module, table)


def llama_eager_decode():
    """A decode step: one query after CACHED keys (`q_offset`), the padding mask as long as
    the keys."""
    config, module = _llama("eager")
    cache = DynamicCache(config=config)
    cache.update(torch.randn(BATCH, 1, CACHED, 14), torch.randn(BATCH, 1, CACHED, 14), 0)
    padding = torch.ones(BATCH, CACHED + 1, dtype=torch.bool)
    table = eager_mask(BATCH, 1, CACHED + 1, q_offset=CACHED, mask_function=causal_mask_function,
                       attention_mask=padding)
    x = torch.randn(BATCH, 1, config.hidden_size)
    cos, sin = LlamaRotaryEmbedding(config)(x, torch.full((BATCH, 1), CACHED))
    return module, {"hidden_states": x, "position_embeddings": (cos, sin),
                    "attention_mask": table, "cache": cache}


def llama_chunked():
    """Llama 4's chunked attention (`chunked_overlay`): a query sees the keys of its chunk
    up to itself, the chunks counted from each sequence's left padding."""
    config, module = _llama("eager")
    table = eager_mask(BATCH, LENGTH, LENGTH, mask_function=chunked_causal_mask_function(
        4, torch.zeros(BATCH, dtype=torch.long)))
    return _call(config, module, table)


def _mistral(implementation, mask_function=None, window=4, padding=None):
    config = MistralConfig(hidden_size=70, num_attention_heads=5, num_key_value_heads=1,
                           head_dim=14, sliding_window=window)
    config._attn_implementation = implementation
    module = MistralAttention(config, layer_idx=0)
    mask_function = mask_function or sliding_window_causal_mask_function(config.sliding_window)
    build = eager_mask if implementation == "eager" else sdpa_mask
    table = build(BATCH, LENGTH, LENGTH, mask_function=mask_function, attention_mask=padding,
                  **({} if implementation == "eager" else {"allow_is_causal_skip": False}))
    return _call(config, module, table)


def mistral_eager():
    return _mistral("eager")


def mistral_sdpa():
    return _mistral("sdpa")


def wide_window(sliding_window):
    """A model's own window on HF's config that sees one key more than `sliding_window`."""

    def inner_mask(batch_idx, head_idx, q_idx, kv_idx):
        return q_idx - kv_idx <= sliding_window

    return inner_mask


def mistral_wide():
    """A window the size chooser can tell from the other sizes: a dim, HF's convention."""
    return _mistral("sdpa", window=11)


def mistral_wide_padded():
    """HF's window and-ed with the padding mask (as every eager table with an
    `attention_mask` is): still a window of `sliding_window` keys."""
    padding = torch.ones(BATCH, LENGTH, dtype=torch.bool)
    padding[0, :3] = False
    return _mistral("eager", window=11, padding=padding)


def windowed_sdpa():
    return _mistral("sdpa", and_masks(causal_mask_function, wide_window(11)), window=11)


def windowed_eager():
    return _mistral("eager", and_masks(causal_mask_function, wide_window(11)), window=11)


def future_mask_function(batch_idx, head_idx, q_idx, kv_idx):
    """A model's own causal mask, one token off: each query sees the keys after it."""
    return q_idx <= kv_idx


def reversed_eager():
    config, module = _llama("eager")
    return _call(config, module, eager_mask(BATCH, LENGTH, LENGTH,
                                            mask_function=future_mask_function))


def reversed_sdpa():
    config, module = _llama("sdpa")
    return _call(config, module, sdpa_mask(BATCH, LENGTH, LENGTH, allow_is_causal_skip=False,
                                           mask_function=future_mask_function))


def query_padding_mask_function(padding_mask):
    """A model's own padding mask read at the query (HF's `padding_mask_function` reads it at
    `kv_idx`): padded queries see nothing, every query still sees the padded keys."""

    def inner_mask(batch_idx, head_idx, q_idx, kv_idx):
        return padding_mask[batch_idx, q_idx]

    return inner_mask


def _query_padded(implementation, both=False):
    config, module = _llama(implementation)
    padding = torch.ones(BATCH, LENGTH, dtype=torch.bool)
    padding[0, :3] = False
    mask_function = and_masks(causal_mask_function, query_padding_mask_function(padding))
    build = eager_mask if implementation == "eager" else sdpa_mask
    # both sides: HF's own padding (at the key) and-ed in too, as a table with an
    # attention_mask is: padded queries see nothing and no query sees a padded key
    table = build(BATCH, LENGTH, LENGTH, mask_function=mask_function,
                  attention_mask=padding if both else None,
                  **({} if implementation == "eager" else {"allow_is_causal_skip": False}))
    return _call(config, module, table)


def query_padded_sdpa():
    return _query_padded("sdpa")


def query_padded_eager():
    return _query_padded("eager")


def both_padded_sdpa():
    return _query_padded("sdpa", both=True)
