"""The transformers zoo: attention modules as tiny models call them, checked by shapecheck.

Each case builds a tiny ``transformers`` model from its config class (random weights,
nothing downloaded), captures the real call of one attention module with a forward
pre-hook (its args and kwargs exactly as the model passes them: ``**kwargs``, ``None``s,
tuples, caches, flags — no per-family glue), and checks it: ``verify`` must be clean (no
diagnostic at all, SC602 included), and the spec ``extract`` writes must ``conform`` to
the module with no flag. The forms (issue 29, item 5):

- ``eager`` / ``sdpa``: the first self-attention module (the innermost module whose class
  is an attention), in the family's eager and SDPA implementations;
- ``decode``: the same module at a decode step (one new token, several cached, KV cache);
- ``cross``: the first cross-attention module of an encoder-decoder;
- ``flex`` (asked for by ``--forms flex``): the first self-attention module with
  ``attn_implementation="flex_attention"``, given the ``BlockMask`` its model builds from
  ``masking_utils``' mask functions (issue 33; decoders that support it); ``flex_decode``
  (``--forms flex_decode``): its decode step, the BlockMask offset by the cache.

A case is a factory of this file (``tools/zoo.py:llama__eager``), so any shapecheck command
takes it as a target::

    python tools/zoo.py                      # every case, a table
    python tools/zoo.py llama gpt2 --forms eager,decode
    shapecheck verify tools/zoo.py:llama__eager
"""

from __future__ import annotations

import argparse
import copy
import inspect
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any

FAMILIES = (
    "llama mistral mixtral qwen2 qwen2_moe qwen3 gemma gemma2 gemma3_text phi phi3 gpt2 gpt_neo "
    "gpt_neox gptj gpt_bigcode falcon opt bloom mpt codegen xglm bert roberta distilbert albert "
    "electra deberta-v2 t5 bart mbart pegasus marian m2m_100 whisper vit deit swin clip_text "
    "clip_vision siglip_vision starcoder2 olmo olmo2 olmoe cohere stablelm persimmon granite "
    "granitemoe nemotron glm glm4 helium smollm3 ministral exaone4 dbrx deepseek_v3 longformer"
).split()
FORMS = ("eager", "sdpa", "decode", "cross", "whole", "whole_decode", "flex", "flex_decode")
#: What a plain run checks: the flex form (attn_implementation="flex_attention", each layer
#: given the BlockMask its model builds) compiles HF's `create_block_mask` when the model
#: runs, minutes a family on CPU: asked for by `--forms flex`; the whole models (every
#: layer of each family's tiny model, issue 30; `whole_decode`: a decode step of the model
#: with the cache of its prefill) by `--forms whole,whole_decode` (about 15 minutes).
DEFAULT_FORMS = FORMS[:4]
#: The subset CI runs (tests/test_torch_real.py): one of each architecture kind.
CI_CASES = ("llama__eager", "llama__decode", "gpt2__eager", "bert__eager", "t5__cross",
            "falcon__eager")

#: Tiny sizes, under every name families give them: heads 6, kv heads 3, head width 10,
#: width 60 (sizes that do not coincide with each other, the batch or the lengths).
_SIZES = {
    "hidden_size": 60, "n_embd": 60, "d_model": 60, "dim": 60, "n_embed": 60, "embed_dim": 60,
    "num_attention_heads": 6, "n_head": 6, "n_heads": 6, "num_heads": 6, "encoder_attention_heads": 6,
    "decoder_attention_heads": 6, "num_key_value_heads": 3, "n_kv_heads": 3, "kv_n_heads": 3,
    "head_dim": 10, "d_kv": 10, "intermediate_size": 44, "n_inner": 44, "d_ff": 44, "ffn_dim": 44,
    "encoder_ffn_dim": 44, "decoder_ffn_dim": 44, "hidden_dim": 44, "moe_intermediate_size": 44,
    "num_hidden_layers": 2, "n_layer": 2, "n_layers": 2, "num_layers": 2, "encoder_layers": 1,
    "decoder_layers": 1, "num_decoder_layers": 1, "vocab_size": 99, "max_position_embeddings": 64,
    "n_positions": 64, "max_seq_len": 64, "num_experts": 4, "num_local_experts": 4,
    "n_routed_experts": 4, "image_size": 16, "patch_size": 4, "num_channels": 3,
    "max_source_positions": 8, "max_target_positions": 16, "num_mel_bins": 8,
    "attention_window": 4, "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 6, "v_head_dim": 10, "n_group": 1, "topk_group": 1,
    "first_k_dense_replace": 0, "num_experts_per_tok": 2, "partial_rotary_factor": 0.4,
    "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 0, "window_size": 2, "depths": [1], 
    "sliding_window": 16, "rotary_dim": 4, "type_vocab_size": 2, "embedding_size": 60,
    "n_shared_experts": 1, "num_conv_pos_embedding_groups": 2, "mamba_n_heads": 6,
    "num_encoder_attention_heads": 6, "num_decoder_attention_heads": 6,
}
#: Fields that count layers per stage (a list of them in hierarchical vision models): one
#: layer in each of the config's stages.
_LAYER_COUNTS = {"depths"}
#: An image's side: 16, or 32 where the config declares several stages (each halves the
#: map: a 32-pixel image keeps a map at every stage of a four-stage model).
IMAGE, STAGED_IMAGE = 16, 32
#: Settings a family's config truly requires beyond the sizes above (its own constraint
#: between fields, stated where the config or model checks it):
PER_FAMILY: dict[str, dict[str, Any]] = {
    # the differential attention splits the values along the key/value heads: an even count
    "diffllama": {"num_key_value_heads": 2},
    # block-sparse attention needs more tokens than (5 + 2 * random blocks) * block_size,
    # or the model swaps the module for full attention at its first call
    "big_bird": {"block_size": 1, "num_random_blocks": 1},
    # its last layers reuse the caches of earlier ones, of each layer type: none at two to
    # five layers (the model refuses a type whose cache no earlier layer makes)
    "gemma3n": {"num_kv_shared_layers": 0},
    # its layout stream is `hidden_size / channel_shrink_ratio` wide, split into the heads
    "lilt": {"channel_shrink_ratio": 2},
    # its hash embeddings split the width into `num_hashes` parts
    "canine": {"num_hash_functions": 4},
    # its default places no attention layer (`attn_layer_indices=None`): one, the second
    "bamba": {"attn_layer_indices": [1]},
    # the same, declared by layer type: its default makes every layer a Mamba layer
    "granitemoehybrid": {"layer_types": ["linear_attention", "full_attention"]},
    # its stem is four stride-2 convolutions (16 pixels a patch, whatever `patch_size`
    # says): the attention biases are sized by `image_size // patch_size`
    "levit": {"patch_size": 16, "image_size": 64},
    # its spectrogram is cut into 16 x 16 patches: one must fit
    "audio-spectrogram-transformer": {"num_mel_bins": 16, "max_length": 32},
    # its adapters are per language: a call without `lang_ids` needs the default one (the
    # config's first language, what `set_default_language` sets)
    "xmod": {"default_language": "en_XX"},
    # its attention runs at the bottleneck's width (`true_hidden_size`), split into the heads
    "mobilebert": {"intra_bottleneck_size": 60},
    # its box embeddings are a quarter of the width, split over the 8 coordinates, halved
    # for sin and cos: a width of 64 (four heads of 16)
    "bros": {"hidden_size": 64, "num_attention_heads": 4},
    # CLAP's audio tower folds its spectrogram into a `spec_size` square image (its time
    # axis cut in `spec_size / num_mel_bins` rows), its last map grouped by that ratio: a
    # 128-pixel one of 32 mel bins (a last map of 4, the ratio's)
    "clap": {"spec_size": 128, "num_mel_bins": 32},
    # NaFlex: its images come as patches padded to `num_patches` (a 4 x 4 grid at most)
    "siglip2_vision": {"num_patches": 16},
    # a video's frames are a batch of images to its vision tower (`[B * frames, C, H, W]`),
    # each layer's message attention across them: one video of the batch's 7 frames
    "xclip_vision": {"num_frames": 7},
    # its axial position embeddings split the width in two parts that must sum to it
    "reformer": {"axial_pos_embds_dim": [20, 40], "axial_pos_shape": [4, 16]},
}
#: A family whose config class is a composite (text, vision, audio towers): the zoo builds
#: its text model (the tower with the decoder's self-attention).
_MODEL_TYPES = {"clip_text": "clip_text_model", "clip_vision": "clip_vision_model",
                "siglip_vision": "siglip_vision_model", "gemma3n": "gemma3n_text",
                "siglip2": "siglip2_text_model", "xclip": "xclip_text_model",
                "siglip2_vision": "siglip2_vision_model", "xclip_vision": "xclip_vision_model",
                "clap": "clap_audio_model"}
BATCH, LENGTH, CACHED = 7, 9, 8
#: Samples a frame of raw audio where the config declares no ratio (Moonshine's strided
#: convolutions, 384 samples a frame).
AUDIO_HOP = 400


@dataclass
class Case:
    family: str
    form: str

    @property
    def name(self) -> str:
        return f"{self.family.replace('-', '_')}__{self.form}"


def _config(family: str, implementation: str, layers: int | None = None) -> Any:
    from transformers import CONFIG_MAPPING

    cls = CONFIG_MAPPING[_MODEL_TYPES.get(family, family)]
    defaults = cls()
    declared = defaults.to_dict()
    known = set(declared) | set(getattr(cls, "attribute_map", {}))
    staged = _stages(declared) > 1
    aliases = getattr(cls, "attribute_map", {})
    sizes = {k: _as_declared(k, v, declared.get(aliases.get(k, k)), staged)
             for k, v in _SIZES.items() if k in known}
    if staged:  # a model of stages: its layer count and final width follow from them
        for derived in ("num_hidden_layers", "num_layers", "hidden_size"):
            sizes.pop(derived, None)
    sizes = {k: v for k, v in sizes.items() if v is not None}
    if layers is not None and "num_hidden_layers" in sizes:
        sizes["num_hidden_layers"] = layers
    layer_types = declared.get("layer_types")
    if isinstance(layer_types, list) and layer_types and "num_hidden_layers" in sizes:
        # hybrid models (full and linear or sliding attention by layer): enough layers that
        # each type the config declares appears once
        kinds = set(layer_types)
        sizes["num_hidden_layers"] = max(sizes["num_hidden_layers"], next(
            i + 1 for i in range(len(layer_types)) if set(layer_types[:i + 1]) == kinds))
    layers = declared.get("num_hidden_layers")
    if isinstance(layers, int) and "num_hidden_layers" in sizes:
        # a field declared per layer (a list as long as the layers: Gemma 3n's widths and
        # sparsity) follows the tiny layer count: the size given, or the config's first
        for name, default in declared.items():
            if isinstance(default, list) and len(default) == layers and name != "layer_types":
                given = _SIZES.get(name)
                sizes[name] = [given] * sizes["num_hidden_layers"] if isinstance(given, int) \
                    else default[:sizes["num_hidden_layers"]]
    if "kv_lora_rank" in declared:
        # multi-head latent attention (DeepSeek-V2/V3) expands its keys to every head
        sizes["num_key_value_heads"] = sizes.get("num_attention_heads", 6)
    sizes.update(PER_FAMILY.get(family, {}))
    if family in ("swin", "donut-swin"):  # its heads and depths are per stage (lists)
        for alias in ("num_attention_heads", "num_hidden_layers", "hidden_size"):
            sizes.pop(alias, None)
        sizes.update(embed_dim=20, depths=[1], num_heads=[2], window_size=2, image_size=16,
                     patch_size=2)
    if family == "dbrx":
        # transformers 5.24's DbrxAttention reads attn_config.rope_theta, which the attention
        # config class does not define, and clamps with clip_qkv unconditionally: both given,
        # as DBRX's checkpoint config carries them
        sizes.update(d_model=60, n_heads=6, attn_config={"kv_n_heads": 3, "rope_theta": 10000.0,
                                                     "clip_qkv": 8.0},
                     ffn_config={"ffn_hidden_size": 44, "moe_num_experts": 4, "moe_top_k": 1})
    rope = defaults.to_dict().get("rope_parameters")
    if isinstance(rope, dict) and "partial_rotary_factor" in rope:  # an even rotary width
        sizes["rope_parameters"] = {**rope, "partial_rotary_factor": 0.4}
    if family == "deepseek_v3":  # its head_dim is the rotary part's
        sizes.update(head_dim=4)
    if family == "gpt_neo":  # one attention type per layer
        sizes.update(attention_types=[[["global", "local"], 1]])
    if family == "mpt":
        sizes.update(attn_config={"attn_impl": "torch"})
    if family == "longformer":
        sizes.update(attention_window=[4] * sizes.get("num_hidden_layers", 2))
    config = cls(**sizes)
    config._attn_implementation = implementation
    return config


def _stages(declared: dict[str, Any]) -> int:
    """How many stages the config declares (the length of its per-stage layer counts)."""
    counts = [v for k, v in declared.items() if k in _LAYER_COUNTS and isinstance(v, list)]
    return max((len(v) for v in counts), default=1)


def _as_declared(name: str, value: Any, default: Any, staged: bool) -> Any:
    """A tiny size in the form the config declares the field: an image's side for each of
    its axes, one layer for each stage; a field declared per stage (widths, heads, strides)
    keeps the config's own values (None: not given)."""
    if name == "image_size":
        value = STAGED_IMAGE if staged else value
    if name in _LAYER_COUNTS and isinstance(default, (list, tuple)):
        return [1] * len(default)
    if not isinstance(default, (list, tuple)) or isinstance(value, (list, tuple)):
        return value
    if name == "image_size":
        return [value] * len(default)
    return None


def _model(family: str, implementation: str) -> Any:
    model, config = _built(family, implementation)
    layers = getattr(config, "num_hidden_layers", None)
    while not _attention_modules(model) and isinstance(layers, int) and layers < 16:
        # a hybrid model whose attention layers come every few (Jamba's every 8th from the
        # 4th, Zamba's shared block): enough layers that one is there
        layers *= 2
        try:
            model, config = _built(family, implementation, layers)
        except ValueError as error:
            # Zamba ties every use of its shared attention block to the first: a model with
            # one use fails transformers' check that the tie finds its copies ("to tie into
            # []"); more layers, more uses
            if "tie into []" not in str(error):
                raise
    return model, config


def _built(family: str, implementation: str, layers: int | None = None) -> Any:
    import torch
    from transformers import AutoModel

    torch.manual_seed(0)
    config = _config(family, implementation, layers)
    if getattr(config, "architectures", []) is None:
        # transformers' AutoModel iterates the config's architectures where a config class
        # maps to several models (Funnel's base and full model): none given is none to try
        config.architectures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = AutoModel.from_config(config, attn_implementation=implementation)
        except ValueError as error:  # a tower of a composite model (OWL-ViT's vision
            if "Unrecognized configuration" not in str(error):  # model): no auto class,
                raise                                           # its config's model
            model = _tower(config)(config)
    return model.eval(), config


def _tower(config: Any) -> Any:
    """The model class its modeling module declares for the config's class
    (`OwlViTVisionModel.config_class` is `OwlViTVisionConfig`): a tower AutoModel lacks."""
    import importlib

    module = importlib.import_module(type(config).__module__.replace(".configuration_",
                                                                     ".modeling_"))
    found = [c for c in vars(module).values() if isinstance(c, type)
             and getattr(c, "config_class", None) is type(config) and c.__name__.endswith("Model")]
    if not found:
        raise LookupError(f"no model class for {type(config).__name__}")
    return min(found, key=lambda c: len(c.__name__))


def _inputs(model: Any, config: Any, length: int) -> dict[str, Any]:
    import torch

    main = getattr(model, "main_input_name", "input_ids")
    generator = torch.Generator().manual_seed(1)
    if main == "pixel_values" and "spatial_shapes" in inspect.signature(model.forward).parameters:
        return _patches(config, generator)
    if main == "pixel_values":
        side = getattr(config, "image_size", STAGED_IMAGE)  # no image size declared: a
        height, width = (side, side) if isinstance(side, int) else side  # staged model's
        return {main: torch.randn(BATCH, getattr(config, "num_channels", 3), height, width,
                                  generator=generator)}
    if main == "input_values" and hasattr(config, "max_length") and hasattr(config,
                                                                               "num_mel_bins"):
        # a spectrogram of the config's length (the Audio Spectrogram Transformer's)
        return {main: torch.randn(BATCH, config.max_length, config.num_mel_bins,
                                  generator=generator)}
    if main == "input_values":  # raw audio: enough samples for `length` frames (a
        ratio = getattr(config, "inputs_to_logits_ratio", None) or AUDIO_HOP  # hop of
        audio = {main: torch.randn(BATCH, ratio * (length + 1), generator=generator)}
        if getattr(config, "is_encoder_decoder", False):  # Moonshine: a decoder too
            audio["decoder_input_ids"] = torch.randint(3, 90, (BATCH, length))
        return audio
    if main == "input_features" and hasattr(config, "spec_size"):
        # CLAP's audio tower: [B, 1, frames, mel] of as many frames as its square image of
        # the spectrogram folds (`spec_size * freq_ratio`, no interpolation)
        frames = config.spec_size * (config.spec_size // config.num_mel_bins)
        return {main: torch.randn(BATCH, 1, frames, config.num_mel_bins, generator=generator)}
    if main == "input_features":  # [B, mel, frames] (Whisper) or [B, frames, features]
        bins = getattr(config, "num_mel_bins", None)  # (Speech2Text's filter bank)
        frames = 2 * config.max_source_positions
        features = torch.randn(BATCH, bins, frames, generator=generator) if bins else \
            torch.randn(BATCH, frames, config.input_feat_per_channel * getattr(
                config, "input_channels", 1), generator=generator)
        return {main: features, "decoder_input_ids": torch.randint(3, 90, (BATCH, length))}
    ids = torch.randint(3, 90, (BATCH, length), generator=generator)
    inputs = {"input_ids": ids, "attention_mask": torch.ones(BATCH, length, dtype=torch.long)}
    if type(model).__name__ == "BrosModel":  # each token's box, required: its four
        inputs["bbox"] = torch.rand(BATCH, length, 4, generator=generator)  # corners in [0, 1]
    if getattr(config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = ids
    return inputs


def _patches(config: Any, generator: Any) -> dict[str, Any]:
    """NaFlex inputs (SigLIP 2's vision tower): each image already cut into its patches,
    flattened, padded to the config's `num_patches`, a mask of its real ones and each
    image's grid of patches (images of different sizes: some padding in every batch)."""
    import torch

    grids = [(4, 4), (3, 4), (2, 3)]
    shapes = torch.tensor([grids[b % len(grids)] for b in range(BATCH)])
    width = config.num_channels * config.patch_size ** 2
    mask = (torch.arange(config.num_patches)[None, :] < shapes.prod(-1)[:, None]).long()
    return {"pixel_values": torch.randn(BATCH, config.num_patches, width, generator=generator),
            "pixel_attention_mask": mask, "spatial_shapes": shapes}


_ATTENTION = re.compile(r"Attention$|Attention\d*$|SelfAttention|Attn$")
_CROSS = re.compile(r"cross|encoder_attn|EncDecAttention", re.IGNORECASE)


def _attention_modules(model: Any) -> list[tuple[str, Any]]:
    """The innermost attention modules, in order (a BertAttention holds a BertSelfAttention:
    the inner one computes attention)."""
    found = []
    for name, module in model.named_modules():
        if not _ATTENTION.search(type(module).__name__):
            continue
        inner = [m for n, m in module.named_modules() if n and _ATTENTION.search(type(m).__name__)]
        if not inner:
            found.append((name, module))
    return found


def _named_call(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call as the forward's arguments by name (what a factory returns): positional
    arguments get their parameter's name, ``**kwargs`` are spread as the model passed them."""
    bound = inspect.signature(module.forward).bind_partial(*args, **kwargs)
    named: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        parameter = inspect.signature(module.forward).parameters[name]
        if parameter.kind is parameter.VAR_KEYWORD:
            named.update(value)
        else:
            named[name] = value
    return named


def capture(family: str, form: str) -> tuple[Any, dict[str, Any]]:
    """The attention module of FAMILY in FORM and its call as the model makes it; for the
    forms ``whole`` and ``whole_decode``, the whole model (eager) and its inputs (issue 30:
    every layer checked), for a decode step the last token with its prefill's cache."""
    import torch

    if form == "whole":
        model, config = _model(family, "eager")
        return model, _inputs(model, config, LENGTH)
    if form == "whole_decode":
        model, config = _model(family, "eager")
        inputs = _inputs(model, config, CACHED)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first = model(**inputs, use_cache=True)
        keyword, cache = _cache(first, model)
        return model, {"input_ids": inputs["input_ids"][:, -1:], "attention_mask": torch.ones(
                           BATCH, 1 if keyword == "mems" else CACHED + 1, dtype=torch.long),
                       keyword: cache, "use_cache": True}
    implementation = {"sdpa": "sdpa", "flex": "flex_attention",
                      "flex_decode": "flex_attention"}.get(form, "eager")
    decoding = form in ("decode", "flex_decode")
    model, config = _model(family, implementation)
    inputs = _inputs(model, config, LENGTH if not decoding else CACHED)
    first = None
    if decoding:  # the prefill first: a model may swap a layer's module for its cache
        with torch.no_grad(), warnings.catch_warnings():  # (BigBird's block-sparse one)
            warnings.simplefilter("ignore")
            first = model(**inputs, use_cache=True)
    modules = _attention_modules(model)
    if form == "cross":
        modules = [(n, m) for n, m in modules if _CROSS.search(n) or _CROSS.search(type(m).__name__)]
    else:
        modules = [(n, m) for n, m in modules if not _CROSS.search(n)]
    if not modules:
        raise LookupError(f"{family}: no {form} attention module")
    name, module = modules[0]
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def hook(_: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        # A copy: the layer then writes this call's keys into the cache object it was given.
        calls.append(copy.deepcopy((args, dict(kwargs))))

    for _ in range(2):  # again if the call swapped the module for another (BigBird's
        handle = module.register_forward_pre_hook(hook, with_kwargs=True)  # block-sparse
        try:  # attention, replaced by full attention for a step too short for its blocks)
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if first is not None:
                    step = {k: v[:, -1:] for k, v in inputs.items() if k.endswith("input_ids")}
                    keyword, cache = _cache(first, model)
                    if "attention_mask" in inputs:  # the cached tokens' and the new one's
                        # (XLNet's mask is the new tokens', its memory's columns its own)
                        step["attention_mask"] = torch.ones(
                            BATCH, 1 if keyword == "mems" else CACHED + 1, dtype=torch.long)
                    model(**step, **{keyword: copy.deepcopy(cache)}, use_cache=True)
                else:
                    model(**inputs)
        finally:
            handle.remove()
        if calls or model.get_submodule(name) is module:
            break
        module = model.get_submodule(name)
    if not calls:
        raise LookupError(f"{family}: the {form} attention module was not called")
    args, kwargs = calls[0]
    return module, _named_call(module, args, kwargs)


def _cache(output: Any, model: Any = None) -> tuple[str, Any]:
    """The cache a prefill returned and the keyword its model takes it back by: the field
    of the output that the model's forward takes by its name (``past_key_values``, XLNet's
    ``mems``: each layer's hidden states, which the next step's attention reads before its
    own, `klen = mlen + qlen`; Reformer's ``past_buckets_states``)."""
    taken = set(inspect.signature(model.forward).parameters) if model is not None else set()
    for keyword in output.keys():
        if keyword in taken and (keyword.startswith("past") or keyword == "mems"):
            return keyword, output[keyword]
    if getattr(output, "mems", None) is not None:
        return "mems", output.mems
    return "past_key_values", output.past_key_values


def _generates(config_type: str) -> bool:
    """Whether the family has a causal language model: a decode step is its form."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return config_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES


def _tower_of(config_type: str) -> Any:
    from transformers import CONFIG_MAPPING

    try:
        return _tower(CONFIG_MAPPING[config_type]())
    except (LookupError, ImportError):
        return None


def _has_sdpa(config_type: str) -> bool:
    from transformers import CONFIG_MAPPING, MODEL_MAPPING

    model = MODEL_MAPPING.get(CONFIG_MAPPING[config_type], None) or _tower_of(config_type)
    return bool(getattr(model, "_supports_sdpa", False))


def _has_flex(config_type: str) -> bool:
    from transformers import CONFIG_MAPPING, MODEL_MAPPING

    model = MODEL_MAPPING.get(CONFIG_MAPPING[config_type], None) or _tower_of(config_type)
    return bool(getattr(model, "_supports_flex_attn", False))


def cases(families: list[str] | None = None,
          forms: tuple[str, ...] = DEFAULT_FORMS) -> list[Case]:
    from transformers import CONFIG_MAPPING

    found = []
    for family in families or FAMILIES:
        config_type = _MODEL_TYPES.get(family, family)
        encoder_decoder = getattr(CONFIG_MAPPING[config_type](), "is_encoder_decoder", False)
        decoder = not encoder_decoder and family not in _ENCODERS and _generates(config_type)
        for form in forms:
            if form == "cross" and not encoder_decoder \
                    or form in ("decode", "whole_decode") and not decoder \
                    or form == "sdpa" and not _has_sdpa(config_type) \
                    or form.startswith("flex") and not (decoder and _has_flex(config_type)):
                continue
            found.append(Case(family, form))
    return found


_ENCODERS = {"bert", "roberta", "distilbert", "albert", "electra", "deberta-v2", "vit", "deit",
             "swin", "clip_text", "clip_vision", "siglip_vision", "longformer"}


def _others() -> list[str]:
    """Every other family transformers knows (`python tools/zoo.py biogpt roformer`): the
    issue's list is the test, the rest is there to try."""
    from transformers import CONFIG_MAPPING

    return [*CONFIG_MAPPING.keys(), *(k for k in _MODEL_TYPES if k not in CONFIG_MAPPING)]


def __getattr__(name: str) -> Any:
    """``llama__eager`` and the like: a factory (module, inputs) for shapecheck."""
    family, separator, form = name.partition("__")
    if not separator or form not in FORMS:
        raise AttributeError(name)
    family = next((f for f in (*FAMILIES, *_others()) if f.replace("-", "_") == family), None)
    if family is None:
        raise AttributeError(name)

    def make() -> tuple[Any, dict[str, Any]]:
        return capture(family, form)

    make.__name__ = name
    return make


# --- checking a case -----------------------------------------------------------------------


#: Findings that are true of a family's code, expected in place of "clean" (docs/torch.md):
#: GPT-Neo does not scale its scores by 1/sqrt(head_dim), by design (the model was trained
#: so), and SC405 says exactly that; a linter that hid it would be wrong about the code.
#: LongT5's local attention (an einsum of its blocks) writes no scale at all, as T5 was
#: trained (T5's own eager path now passes `scaling=1.0`, a constant the check accepts).
#: OpenAI GPT's attention cuts its causal buffer of `n_positions` rows to the scores
#: (`self.bias[:, :, :T, :T]`): past 64 positions the module fails, and SC317 says so,
#: confirmed by PyTorch (as tests/data/torch/public/planted.py's position table).
EXPECTED = {"gpt_neo": "SC405", "longt5": "SC405", "openai-gpt": "SC317"}


@dataclass
class Outcome:
    case: Case
    verify: str          # "clean", or the diagnostics' codes
    conform: str         # "conforms", "differs", or why not
    detail: str = ""
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        """No diagnostic, or exactly the true finding the family is known for."""
        return self.verify in ("clean", EXPECTED.get(self.case.family))


def check(case: Case, target_file: str = __file__) -> Outcome:
    """verify (clean = no diagnostic), then conform the spec extract writes, with no flag:
    one trace serves both (what `shapecheck verify` and `extract` + `conform` do)."""
    from shapecheck.pytorch.front import ExtractError, Untraceable, extract
    from shapecheck.pytorch.front.sourcemap import check as verify, check_extraction

    target = f"{target_file}:{case.name}"
    start = time.perf_counter()
    try:
        try:  # a whole model is verified layer by layer (its layers conform in other forms)
            extraction = None if case.form.startswith("whole") else extract(target)
        except (ExtractError, Untraceable):  # verify says why, as a diagnostic
            extraction = None
        traced = None if extraction is None else check_extraction(extraction, target)
        results = verify(target) if traced is None else traced.results
        diagnostics = [d for r in results for d in r.diagnostics]
        # a diagnostic PyTorch contradicts is never shown, but it is a lowering defect: the
        # case is not clean (docs/torch.md, "No false alarm")
        contradicted = [] if traced is None else traced.contradicted
        verdict = "clean" if not diagnostics and not contradicted else " ".join(
            [*sorted({d.code for d in diagnostics}),
             *sorted({f"contradicted-{d.code}" for d in contradicted})])
        detail = "; ".join(f"{d.code} {d.message}"[:160] for d in [*diagnostics,
                                                                   *contradicted][:3])
    except Exception as error:  # a shapecheck bug: the table says so
        return Outcome(case, "crash", "-", f"{type(error).__name__}: {error}"[:200],
                       time.perf_counter() - start)
    conformed = "-" if extraction is None else _conform(extraction)
    return Outcome(case, verdict, conformed, detail, time.perf_counter() - start)


def _conform(extraction: Any) -> str:
    """What `shapecheck conform SPEC TARGET` does for a spec extract wrote (cli/conform.py)."""
    from shapecheck.backend import SpecError
    from shapecheck.pytorch.conform import ConformanceError, conform

    try:
        result = conform(extraction.text, extraction.function(), dims=extraction.bindings,
                         framework="torch", cases=2,
                         dtype="float32" if extraction.float32 else "float64")
    except SpecError:
        return "spec does not verify"
    except ConformanceError as error:
        return f"error: {error}"[:140]
    except Exception as error:  # a shapecheck bug
        return f"crash: {type(error).__name__}: {error}"[:140]
    if result.ok:
        return "conforms"
    lines = [line for line in result.report().splitlines() if line.strip()]
    return "differs: " + (lines[-1].strip()[:120] if lines else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help="families (default: all)")
    parser.add_argument("--forms", default=",".join(DEFAULT_FORMS))
    parser.add_argument("-v", "--verbose", action="store_true", help="each case's diagnostics")
    parser.add_argument("--markdown", action="store_true",
                        help="also a table by family (docs/torch.md's)")
    options = parser.parse_args(argv)
    chosen = cases(options.families or None, tuple(options.forms.split(",")))
    outcomes = []
    print(f"{'case':28} {'verify':24} conform")
    for case in chosen:
        try:
            outcome = check(case)
        except Exception as error:  # a family that cannot be built at these sizes
            outcome = Outcome(case, "not built", "-", f"{type(error).__name__}: {error}"[:200])
        outcomes.append(outcome)
        print(f"{case.name:28} {outcome.verify:24} {outcome.conform[:70]}", flush=True)
        if options.verbose and outcome.detail:
            print(f"    {outcome.detail}")
    clean = [o for o in outcomes if o.clean]
    families = {o.case.family for o in outcomes}
    clean_families = families - {o.case.family for o in outcomes if not o.clean}
    conforming = [o for o in outcomes if o.conform == "conforms"]
    layers = [o for o in outcomes if not o.case.form.startswith("whole")]  # a model: no spec
    print(f"\n{len(clean)}/{len(outcomes)} cases verify clean; "
          f"{len(clean_families)}/{len(families)} families clean in every form; "
          f"{len(conforming)}/{len(layers)} conform")
    if options.markdown:
        print("\n" + markdown(outcomes))
    return 0 if len(clean) == len(outcomes) else 1


def markdown(outcomes: list[Outcome]) -> str:
    """One row per family: each form's verify result, and whether it conforms."""
    lines = ["| family | " + " | ".join(FORMS) + " |", "| --- |" + " --- |" * len(FORMS)]
    for family in dict.fromkeys(o.case.family for o in outcomes):
        cells = []
        for form in FORMS:
            found = next((o for o in outcomes if o.case.family == family
                          and o.case.form == form), None)
            cells.append("" if found is None else found.verify + (
                ", conforms" if found.conform == "conforms" else ""))
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
