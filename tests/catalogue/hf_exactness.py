"""The exactness harness: tiny random-initialised transformers models against roofline's accounting.

For one transformers model type, `measure` builds the type's config shrunk to a toy (hidden 40, 4 layers, 4 heads of
16, vocabulary 250: TINY, sizes chosen so that no two parameter groups coincide in count, e.g. q + kv widths 96 vs
2 x hidden 80; plus the type's own keys in TINY_BY_TYPE), instantiates the model class on the CPU in fp32, runs one
forward of PROMPT_TOKENS tokens with a cache, and returns what transformers holds next to what roofline
computes from the same config.json:

- parameters: sum of numel over model.parameters() (tied matrices counted once) vs accounting.parameter_count's
  total;
- cache bytes: every tensor reachable from the returned past_key_values (numel x element size; each storage once)
  vs accounting.kv_bytes at PROMPT_TOKENS tokens in fp32, recurrent state in fp32 (transformers' cache keeps the
  model dtype, here fp32). PROMPT_TOKENS stays below every window of the toy configs, where transformers' sliding
  layers (cache_utils.DynamicSlidingWindowLayer, which keeps the last W - 1 tokens) and roofline's min(L, W)
  agree.

Independent of roofline's import: the reference numbers come from the instantiated torch modules.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from hf_gemma_tiny import GEMMA_TINY
from hf_hybrid_tiny import HYBRID_TINY, module_state_bytes
from hf_shared_tiny import SHARED_TINY
from hf_varied_tiny import VARIED_TINY

PROMPT_TOKENS = 6

# Shrink keys wherever the default config has them (the toy keeps every mechanism, only smaller).
TINY: dict[str, Any] = {
    "hidden_size": 40, "n_embd": 40, "d_model": 40,
    "num_hidden_layers": 4, "n_layer": 4, "num_layers": 4, "n_layers": 4,
    "num_attention_heads": 4, "n_head": 4, "attention_heads": 4, "n_heads": 4,
    "num_key_value_heads": 2, "num_kv_heads": 2, "head_dim": 16,
    "intermediate_size": 88, "n_inner": 88, "ffn_dim": 88, "ffn_hidden_size": 88,
    "moe_intermediate_size": 40, "shared_expert_intermediate_size": 56, "expert_intermediate_size": 40,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_k": 2, "top_k": 2, "n_group": 1, "topk_group": 1,
    "vocab_size": 250, "max_position_embeddings": 512, "n_positions": 512, "max_seq_len": 512,
    "kv_lora_rank": 32, "q_lora_rank": 24, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
    "first_k_dense_replace": 1,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "sliding_window": 16, "attention_chunk_size": 16,
}
TINY_BY_TYPE: dict[str, dict[str, Any]] = {
    "mamba": {"state_size": 8, "intermediate_size": 128},
    "falcon_mamba": {"state_size": 8, "intermediate_size": 128},
    "mamba2": {"num_heads": 5, "head_dim": 16, "state_size": 8, "n_groups": 1, "expand": 2},
    "jamba": {"mamba_d_state": 8, "attn_layer_period": 2, "attn_layer_offset": 1},
    "falcon_h1": {"mamba_n_heads": 8, "mamba_d_head": 16, "mamba_d_ssm": 128, "mamba_d_state": 8},
    "deepseek_v32": {"index_n_heads": 2, "index_head_dim": 16, "index_topk": 4},
    # every other layer from the third reuses the last indexer layer's top-k (GlmMoeDsaConfig's index_topk_freq)
    "glm_moe_dsa": {"index_n_heads": 2, "index_head_dim": 16, "index_topk": 4, "index_topk_freq": 2},
    # 40 // 3 = 13: head_dim floored as Glm4MoeAttention derives it
    "glm4_moe": {"num_attention_heads": 3, "num_key_value_heads": 1}, "glm4v_moe_text": {"hidden_size": 64},
    "step3p5": {"share_expert_dim": 56},
    "cohere_compass_text": {"rope_parameters": {kind: {"rope_theta": 10000.0, "rope_type": "default"}
                                                for kind in ("full_attention", "sliding_attention")}},
    "codegen": {"rotary_dim": 4}, "gptj": {"rotary_dim": 4}, "ctrl": {"dff": 88},
    "phi": {"hidden_size": 64}, "persimmon": {"hidden_size": 64},
    "jetmoe": {"kv_channels": 16},
    "gpt_neo": {"attention_types": [[["global", "local"], 2]], "window_size": 16, "num_heads": 4},
    "gemma3": {}, "gpt_oss": {"head_dim": 16}, "helium": {"head_dim": 10}, "stablelm": {"hidden_size": 64},
}
TINY_BY_TYPE |= HYBRID_TINY  # the hybrid recurrent types' keys (tests/catalogue/hf_hybrid_tiny.py)
TINY_BY_TYPE |= GEMMA_TINY  # Gemma-3n's (tests/catalogue/hf_gemma_tiny.py)
TINY_BY_TYPE |= SHARED_TINY  # Inkling's (tests/catalogue/hf_shared_tiny.py)
TINY_BY_TYPE |= VARIED_TINY  # hf_archs_varied's types (tests/catalogue/hf_varied_tiny.py)


MROPE_TYPES = ("qwen2_vl_text", "qwen2_5_vl_text", "glm4v_text", "glm4v_moe_text", "glm_ocr_text", "hunyuan_vl_text",
               "qwen2_5_omni_text", "paddleocr_vl_text")


def _shrunk(defaults: dict[str, Any], model_type: str) -> dict[str, Any]:
    """TINY (and TINY_BY_TYPE) applied to the keys the default config has; layer_types rebuilt by the class."""
    kwargs = {k: v for k, v in TINY.items() if k in defaults}
    kwargs |= {k: v for k, v in TINY_BY_TYPE.get(model_type, {}).items()}
    if "kv_lora_rank" in defaults and "head_dim" in defaults:  # MLA: head_dim is the RoPE part (DeepseekV3Config)
        kwargs["head_dim"] = TINY["qk_rope_head_dim"]
    if "kv_lora_rank" in defaults and "num_key_value_heads" in defaults:  # MLA: every head reads the latent
        kwargs["num_key_value_heads"] = TINY["num_attention_heads"]
    rope = defaults.get("rope_parameters")
    if isinstance(rope, dict) and (rope.get("mrope_section") or model_type in MROPE_TYPES):
        # multimodal RoPE: its (t, h, w) sections must sum to the rotary half of the toy's head_dim
        head_dim = kwargs.get("head_dim") or kwargs["hidden_size"] // kwargs["num_attention_heads"]
        half = int(head_dim * rope.get("partial_rotary_factor", 1.0)) // 2
        kwargs["rope_parameters"] = rope | {"mrope_section": [half - 2 * (half // 3), half // 3, half // 3]}
    if "layer_types" in defaults and "layer_types" not in TINY_BY_TYPE.get(model_type, {}):
        kwargs["layer_types"] = None
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(defaults.get(key), int):
            kwargs[key] = 0
    return kwargs


def tiny_config(model_type: str):
    """The type's config class at TINY sizes; multimodal wrappers shrink their text_config (and a vision or audio
    tower's out_hidden_size or text_hidden_size, which some wrappers require to equal the text hidden size)."""
    from transformers import CONFIG_MAPPING

    cls = CONFIG_MAPPING[model_type]
    defaults = cls().to_dict()
    if isinstance(defaults.get("text_config"), dict):
        text = defaults["text_config"]
        kwargs = {"text_config": _shrunk(text, text.get("model_type", "")) | {"model_type": text.get("model_type")}}
        for tower in ("vision_config", "audio_config"):
            sub = defaults.get(tower)
            for key in ("out_hidden_size", "text_hidden_size"):  # Inkling-2's vision tower: text_hidden_size
                if isinstance(sub, dict) and key in sub:
                    kwargs[tower] = kwargs.get(tower, sub) | {key: kwargs["text_config"]["hidden_size"]}
        return cls(**kwargs)
    return cls(**_shrunk(defaults, model_type))


def _cache_bytes(cache: Any) -> int:
    """Bytes of every tensor reachable from a cache object (attributes, lists, dicts), each storage once."""
    import torch

    seen: set[int] = set()
    total, stack, visited = 0, [cache], set()
    while stack:
        obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            ptr = obj.untyped_storage().data_ptr()
            if obj.numel() and ptr not in seen:
                seen.add(ptr)
                total += obj.numel() * obj.element_size()
            continue
        if id(obj) in visited or isinstance(obj, (str, int, float, bool, type(None))):
            continue
        visited.add(id(obj))
        if isinstance(obj, (list, tuple)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif hasattr(obj, "__dict__"):  # private attributes are bookkeeping (_sliding_window_tensor)
            stack.extend(v for k, v in vars(obj).items() if not k.startswith("_"))
    return total


def _returned_cache(out: Any) -> Any:
    """The cache a forward returned: past_key_values, or `cache` (the v5.40 name some models already return), or
    RWKV's `state` (a list of tensors outside any Cache object)."""
    for name in ("past_key_values", "cache", "state"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    return None


def decoder_class(text_type: str) -> tuple[str, bool]:
    """(class, has an LM head) for a wrapper's text_config model type: its causal-LM class, else its base model
    class (the decoder without the head: the head's vocab x hidden is added to the count when untied)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

    if text_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[text_type], True
    if text_type in MODEL_MAPPING_NAMES:
        return MODEL_MAPPING_NAMES[text_type], False
    return _text_class(text_type)


def _text_class(text_type: str) -> tuple[str, bool]:
    """A text type the auto mappings do not list (Emu3's emu3_text_model): the class of its modeling module whose
    config_class is that type's, a causal-LM class first, else its base model."""
    import importlib

    from transformers import CONFIG_MAPPING

    config_class, found = CONFIG_MAPPING[text_type], {}
    module = importlib.import_module(config_class.__module__.replace(".configuration_", ".modeling_"))
    for name, obj in vars(module).items():
        if name.endswith(("ForCausalLM", "Model")) and getattr(obj, "config_class", None) is config_class:
            found[name.endswith("ForCausalLM")] = name
    if not found:
        raise KeyError(f"no transformers class of config {config_class.__name__} ({text_type})")
    return (found[True], True) if True in found else (found[False], False)


def measure(model_type: str, architecture: str, context: int = PROMPT_TOKENS) -> dict[str, int]:
    """{hf_params, hf_cache_bytes, roofline_params, roofline_cache_bytes} for one model type's toy; for a
    multimodal wrapper, of its text decoder alone (roofline counts the vision tower apart: not here)."""
    import torch
    import transformers

    from roofline.accounting import kv_bytes, parameter_count
    from roofline.catalogue.hf import model_from_hf_config

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    config = wrapper = tiny_config(model_type)
    saved_as = architecture
    text, head = getattr(config, "text_config", None), True
    if text is not None:  # a multimodal wrapper: measure its decoder, the model the text_config describes
        architecture, head = decoder_class(text.model_type)
        config = text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(transformers, architecture)(config).eval()
        ids = torch.randint(0, 200, (1, context))
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True)
            cache = _returned_cache(out)
            if cache is None:  # none returned (RecurrentGemma), or its wrapper hands one in (Granite4VisionText)
                cache = transformers.DynamicCache(config=config)
                out = model(input_ids=ids, cache=cache, use_cache=True)
                cache = _returned_cache(out) or cache
    # roofline reads the config.json as saved: the wrapper's, text_config inside
    data = json.loads(json.dumps(wrapper.to_dict(), default=str)) | {"architectures": [saved_as]}
    spec = model_from_hf_config(data, where=f"{model_type}/config.json", name=model_type)
    if spec.linear_attention is not None:
        spec = spec.model_copy(update={"linear_attention": spec.linear_attention.model_copy(
            update={"state_dtype": "fp32"})})
    head_params = 0 if head or spec.tie_word_embeddings else spec.vocab_size * spec.hidden_size
    return {
        "hf_params": sum(p.numel() for p in model.parameters()) + head_params,
        "hf_cache_bytes": _cache_bytes(cache) + module_state_bytes(model),
        "roofline_params": parameter_count(spec).total,
        "roofline_cache_bytes": int(kv_bytes(spec, "fp32", context, convention="transformers")),
    }


def transformers_error(model_type: str, architecture: str) -> str | None:
    """Why transformers itself cannot build and run `model_type` from its own default config, or None when it can.

    Two attempts, and the type fails only when both fail with the same error (type and first line), so that neither
    the shrinking nor the meta device is blamed on the config: (1) the harness's toy (TINY sizes on the keys the
    default has) in which a key the default leaves null stays null (DeepseekV2Config's num_experts_per_tok), one
    forward of PROMPT_TOKENS tokens on the CPU; (2) the full-size default model on torch's meta device, one forward.
    A ValueError is never counted: transformers raises it for a missing input (IDEFICS' pixel_values) or a toy's
    layer pattern, not for a config it cannot run. A multimodal wrapper is tried through its text decoder, the model
    `measure` checks."""
    import torch
    from transformers import CONFIG_MAPPING

    def shrunk():
        defaults = CONFIG_MAPPING[model_type]().to_dict()
        text = defaults.get("text_config")
        if isinstance(text, dict):
            text_type = text["model_type"]
            return CONFIG_MAPPING[text_type](**_non_null_shrunk(text, text_type)), decoder_class(text_type)[0]
        return CONFIG_MAPPING[model_type](**_non_null_shrunk(defaults, model_type)), architecture

    def full():
        config = CONFIG_MAPPING[model_type]()
        text = getattr(config, "text_config", None)
        return (config, architecture) if text is None else (text, decoder_class(text.model_type)[0])

    on_cpu = _forward_error(shrunk, torch.device("cpu"))
    if on_cpu is None or on_cpu.startswith("ValueError"):
        return None
    return on_cpu if _forward_error(full, torch.device("meta")) == on_cpu else None


def _forward_error(build: Any, device: Any) -> str | None:
    """The first line of the exception that building (config, model class name) = `build()`, the model on `device`
    and one forward raise, or None."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    try:
        with warnings.catch_warnings(), device:
            warnings.simplefilter("ignore")
            config, cls = build()
            model = getattr(transformers, cls)(config).eval()
            with torch.no_grad():
                model(input_ids=torch.randint(0, 200, (1, PROMPT_TOKENS)), use_cache=True)
    except Exception as exc:  # noqa: BLE001 - the failure is the answer
        return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
    return None


def _non_null_shrunk(defaults: dict[str, Any], model_type: str) -> dict[str, Any]:
    """`_shrunk` without the keys whose default value is null (they stay as transformers' default leaves them)."""
    return {k: v for k, v in _shrunk(defaults, model_type).items() if defaults.get(k) is not None}
