"""Whole tiny transformers models built from their config classes (random weights, nothing
downloaded), each with its example inputs: targets of tests/test_whole_models.py."""

import math

import torch
from transformers import (BartConfig, BartModel, BertConfig, BertModel, Gemma2Config,
                          Gemma2ForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM, T5Config, T5Model,
                          ViTConfig, ViTModel, WhisperConfig, WhisperModel)

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


def whisper():
    """An encoder-decoder on audio features: three groups (encoder, decoder, cross)."""
    torch.manual_seed(0)
    config = _eager(WhisperConfig(
        d_model=64, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48,
        decoder_ffn_dim=48, encoder_layers=2, decoder_layers=2, vocab_size=99, num_mel_bins=8,
        max_source_positions=16, max_target_positions=32, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, decoder_start_token_id=1, suppress_tokens=None,
        begin_suppress_tokens=None))
    features = torch.randn(BATCH, 8, 32, generator=torch.Generator().manual_seed(1))
    return WhisperModel(config).eval(), {"input_features": features,
                                         "decoder_input_ids": _ids(length=5)}


def llama_decode():
    """One new token after a prompt: the layers read the cache the model passes them."""
    model, inputs = llama()
    with torch.no_grad():
        cache = model(**inputs, use_cache=True).past_key_values
    return model, {"input_ids": _ids(length=1), "past_key_values": cache, "use_cache": True}


def mistral_sdpa():
    """SDPA (the default implementation) with a sliding window shorter than the prompt."""
    torch.manual_seed(0)
    config = MistralConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                           intermediate_size=48, num_hidden_layers=2, vocab_size=99,
                           sliding_window=4, max_position_embeddings=64)
    return MistralForCausalLM(config).eval(), {"input_ids": _ids()}


def qwen2_left_padded():
    """SDPA with a left-padded batch: the model's mask hides the padding from every query."""
    torch.manual_seed(0)
    config = Qwen2Config(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                         intermediate_size=48, num_hidden_layers=2, vocab_size=99,
                         max_position_embeddings=64)
    mask = torch.ones(BATCH, LENGTH, dtype=torch.long)
    mask[0, :2] = 0
    return Qwen2ForCausalLM(config).eval(), {"input_ids": _ids(), "attention_mask": mask}
