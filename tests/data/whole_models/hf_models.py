"""Whole tiny transformers models built from their config classes (random weights, nothing
downloaded), each with its example inputs: targets of tests/test_whole_models.py."""

import math

import torch
from transformers import (BartConfig, BartModel, BertConfig, BertModel, Gemma2Config,
                          Gemma2ForCausalLM, LlamaConfig, LlamaForCausalLM, T5Config, T5Model,
                          ViTConfig, ViTModel)

BATCH, LENGTH = 2, 9


def _ids(vocab=99, length=LENGTH):
    return torch.randint(3, vocab, (BATCH, length), generator=torch.Generator().manual_seed(1))


def _eager(config):
    config._attn_implementation = "eager"
    return config


def llama():
    torch.manual_seed(0)
    config = _eager(LlamaConfig(hidden_size=60, num_attention_heads=6, num_key_value_heads=3,
                                head_dim=10, intermediate_size=44, num_hidden_layers=4,
                                vocab_size=99, max_position_embeddings=64))
    return LlamaForCausalLM(config).eval(), {"input_ids": _ids()}


def llama_one_bad_layer():
    """Layer 2 scales its scores by the model width, not the head width."""
    model, inputs = llama()
    model.model.layers[2].self_attn.scaling = 1 / math.sqrt(model.config.hidden_size)
    return model, inputs


def gemma2():
    """Gemma 2: sliding-window and global layers alternate."""
    torch.manual_seed(0)
    config = _eager(Gemma2Config(hidden_size=60, num_attention_heads=6, num_key_value_heads=3,
                                 head_dim=10, intermediate_size=44, num_hidden_layers=4,
                                 vocab_size=99, max_position_embeddings=64, sliding_window=4))
    return Gemma2ForCausalLM(config).eval(), {"input_ids": _ids()}


def bert():
    torch.manual_seed(0)
    config = _eager(BertConfig(hidden_size=60, num_attention_heads=6, intermediate_size=44,
                               num_hidden_layers=3, vocab_size=99, max_position_embeddings=64))
    mask = torch.ones(BATCH, LENGTH, dtype=torch.long)
    mask[0, -2:] = 0
    return BertModel(config).eval(), {"input_ids": _ids(), "attention_mask": mask}


def bart():
    torch.manual_seed(0)
    config = _eager(BartConfig(d_model=60, encoder_attention_heads=6, decoder_attention_heads=6,
                               encoder_ffn_dim=44, decoder_ffn_dim=44, encoder_layers=2,
                               decoder_layers=2, vocab_size=99, max_position_embeddings=64))
    return BartModel(config).eval(), {"input_ids": _ids(), "decoder_input_ids": _ids(length=7)}


def t5():
    torch.manual_seed(0)
    config = _eager(T5Config(d_model=60, num_heads=6, d_kv=10, d_ff=44, num_layers=2,
                             num_decoder_layers=2, vocab_size=99))
    return T5Model(config).eval(), {"input_ids": _ids(), "decoder_input_ids": _ids(length=7)}


def vit():
    torch.manual_seed(0)
    config = _eager(ViTConfig(hidden_size=60, num_attention_heads=6, intermediate_size=44,
                              num_hidden_layers=3, image_size=16, patch_size=4, num_channels=3))
    pixels = torch.randn(BATCH, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return ViTModel(config).eval(), {"pixel_values": pixels}


def bert_one_bad_layer():
    """Layer 1 scales its scores by the model width, not the head width."""
    model, inputs = bert()
    model.encoder.layer[1].attention.self.scaling = 1 / math.sqrt(model.config.hidden_size)
    return model, inputs
