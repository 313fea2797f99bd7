"""Import a Hugging Face config.json as a Model: one small handler per supported architecture.

Each handler reads only the keys its architecture defines and returns the Model fields; the shared
helpers check presence and type so that every failure is one SpecError line naming the config key.
A key that is absent takes the default of the matching transformers config class only where that
default is unambiguous (Gemma2Config ties embeddings; LlamaConfig and Phi3Config fall back to
num_key_value_heads = num_attention_heads); otherwise absence is an error, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from roofline.catalogue.hf_archs import ARCHITECTURES_2025
from roofline.catalogue.hf_archs_2024 import ARCHITECTURES_2024
from roofline.catalogue.hf_archs_gemma import ARCHITECTURES_GEMMA
from roofline.catalogue.hf_archs_hybrid import ARCHITECTURES_HYBRID
from roofline.catalogue.hf_archs_indexer import indexer_architectures, refuse_known
from roofline.catalogue.hf_archs_more import ARCHITECTURES_MORE
from roofline.catalogue.hf_archs_shared import ARCHITECTURES_SHARED
from roofline.catalogue.hf_archs_ssm import ARCHITECTURES_SSM
from roofline.catalogue.hf_archs_varied import ARCHITECTURES_VARIED
from roofline.catalogue.hf_families import FAMILIES, read
from roofline.catalogue.hf_positions import longrope_original, served_positions
from roofline.catalogue.hf_quant import from_hf_quant_config, read_quantization
from roofline.catalogue.hf_vision import read_encoders
from roofline.catalogue.hfconfig import (
    _Config,
    _core,
    _from_layer_types,
    _full,
    _qwen_windows,
    _sliding,
    _uniform_window,
)
from roofline.catalogue.loading import validate
from roofline.errors import SpecError
from roofline.specs import Model
from roofline.weight_schemes import check_experts


def _llama(cfg: _Config) -> dict[str, Any]:
    fields = _core(cfg, kv_default_heads=True)
    return fields | {"qkv_bias": cfg.flag("attention_bias", False), "attention": [_full()]}


def _mistral(cfg: _Config) -> dict[str, Any]:
    fields = _core(cfg)
    return fields | {"attention": _uniform_window(cfg, fields["num_layers"], key_required=True)}


def _mixtral(cfg: _Config) -> dict[str, Any]:
    fields = _core(cfg)
    moe = {
        "num_experts": cfg.integer("num_local_experts"),
        "experts_per_token": cfg.integer("num_experts_per_tok"),
        "expert_intermediate_size": fields["intermediate_size"],
    }
    attention = _uniform_window(cfg, fields["num_layers"], key_required=False)
    return fields | {"moe": moe, "attention": attention}


def _qwen2(cfg: _Config) -> dict[str, Any]:
    # Qwen2Attention hard-codes bias=True on q/k/v (config.json has no attention_bias key).
    fields = _core(cfg)
    return fields | {"qkv_bias": True, "attention": _qwen_windows(cfg, fields["num_layers"])}


def _qwen3(cfg: _Config) -> dict[str, Any]:
    fields = _core(cfg)
    return fields | {
        "qkv_bias": cfg.flag("attention_bias", False),
        "qk_norm": True,
        "attention": _qwen_windows(cfg, fields["num_layers"]),
    }


def _gemma2(cfg: _Config) -> dict[str, Any]:
    """Gemma-2: explicit head_dim, tied embeddings by default, 4 norms, sliding/global alternating.

    HF Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2), so layer 0 is sliding.
    """
    fields = _core(cfg, head_dim_required=True, tie_default=True)
    if cfg.has("layer_types"):
        attention = _from_layer_types(cfg, fields["num_layers"])
    else:
        attention = [_sliding(cfg.integer("sliding_window")), _full()]
    return fields | {
        "qkv_bias": cfg.flag("attention_bias", False),
        "norms_per_layer": 4,
        "attention": attention,
    }


def _phi3(cfg: _Config) -> dict[str, Any]:
    # Fused qkv_proj and gate_up_proj hold the same parameters as the split Llama layout.
    fields = _core(cfg, kv_default_heads=True)
    return fields | {"attention": _uniform_window(cfg, fields["num_layers"], key_required=False)}


def _deepseek_v3(cfg: _Config) -> dict[str, Any]:
    """MLA + DeepSeekMoE. head_dim = qk_nope + qk_rope; kv heads = heads (all read one latent).

    The MTP module (num_nextn_predict_layers) is not part of the decoder stack and is left out.
    """
    if cfg.has("moe_layer_freq") and cfg.integer("moe_layer_freq") != 1:
        raise cfg.error("moe_layer_freq", f"{cfg.data['moe_layer_freq']} not supported (only 1: every "
                                          "layer after first_k_dense_replace is MoE)")
    heads = cfg.integer("num_attention_heads")
    mla = {
        "q_lora_rank": cfg.optional_integer("q_lora_rank"),
        "kv_lora_rank": cfg.integer("kv_lora_rank"),
        "qk_nope_head_dim": cfg.integer("qk_nope_head_dim"),
        "qk_rope_head_dim": cfg.integer("qk_rope_head_dim"),
        "v_head_dim": cfg.integer("v_head_dim"),
    }
    moe = {
        "num_experts": cfg.integer("n_routed_experts"),
        "experts_per_token": cfg.integer("num_experts_per_tok"),
        "num_shared_experts": cfg.integer("n_shared_experts", minimum=0),
        "expert_intermediate_size": cfg.integer("moe_intermediate_size"),
        "first_dense_layers": cfg.integer("first_k_dense_replace", minimum=0),
    }
    return {
        "num_layers": cfg.integer("num_hidden_layers"),
        "hidden_size": cfg.integer("hidden_size"),
        "num_heads": heads,
        "num_kv_heads": heads,
        "head_dim": mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"],
        "intermediate_size": cfg.integer("intermediate_size"),
        "vocab_size": cfg.integer("vocab_size"),
        "tie_word_embeddings": cfg.flag("tie_word_embeddings", False),
        "max_position_embeddings": cfg.integer("max_position_embeddings"),
        "attention": [_full()],
        "mla": mla,
        "moe": moe,
    }


def _deepseek_v32(cfg: _Config) -> dict[str, Any]:
    """DeepSeek-V3.2: DeepSeek-V3 plus the DSA lightning indexer (index_n_heads, index_head_dim, index_topk)."""
    sparse = {"index_heads": cfg.integer("index_n_heads"), "index_head_dim": cfg.integer("index_head_dim"),
              "index_topk": cfg.integer("index_topk")}
    return _deepseek_v3(cfg) | {"sparse_attention": sparse}


HANDLERS: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "LlamaForCausalLM": _llama,
    "MistralForCausalLM": _mistral,
    "MixtralForCausalLM": _mixtral,
    "Qwen2ForCausalLM": _qwen2,
    "Qwen3ForCausalLM": _qwen3,
    "Gemma2ForCausalLM": _gemma2,
    "DeepseekV3ForCausalLM": _deepseek_v3,
    "Phi3ForCausalLM": _phi3,
    "DeepseekV2ForCausalLM": _deepseek_v3,
    "DeepseekV32ForCausalLM": _deepseek_v32,
    **ARCHITECTURES_2025,
    **ARCHITECTURES_2024,
    **ARCHITECTURES_SSM,
    **ARCHITECTURES_HYBRID,
    **ARCHITECTURES_GEMMA,
    **ARCHITECTURES_MORE,
    **indexer_architectures(_deepseek_v32),
    **ARCHITECTURES_SHARED,
    **ARCHITECTURES_VARIED,
}


def _architecture(data: dict[str, Any], where: str) -> str:
    """The single entry of `architectures` (the class transformers saved the config from)."""
    supported = ", ".join(HANDLERS)
    value = data.get("architectures")
    if value is None:
        raise SpecError(f"{where}: architectures: missing (it picks the importer); supported: {supported}")
    if not isinstance(value, list) or len(value) != 1 or not isinstance(value[0], str):
        raise SpecError(f"{where}: architectures: expected a list of one name, got {value!r}; "
                        f"supported: {supported}")
    return value[0]


def _family_fields(data: dict[str, Any], where: str, arch: str) -> dict[str, Any]:
    """An architecture without its own handler: the Family row of its model_type (a multimodal wrapper's
    text_config's), read by hf_families.read; else a one-line refusal naming the type."""
    text = data.get("text_config")
    sub, at = (text, f"{where}: text_config") if isinstance(text, dict) else (data, where)
    model_type = sub.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise SpecError(f"{at}: model_type: expected a string, got {type(model_type).__name__} {model_type!r}")
    if model_type in FAMILIES:
        return read(_Config(sub, at, arch), FAMILIES[model_type])
    refuse_known(_Config(data, where, arch))  # an indexer type whose mechanism is not modelled: named
    if isinstance(model_type, str):
        raise SpecError(f"{at}: model_type: {model_type!r} ({arch}) is not supported: no handler for the "
                        f"architecture and no row for the type in roofline.catalogue.hf_families.FAMILIES "
                        f"({len(HANDLERS)} architectures and {len(FAMILIES)} model types are)")
    raise SpecError(f"{where}: architectures: {arch!r} is not supported and model_type is missing; supported: "
                    f"{', '.join(HANDLERS)}")


def _default_name(data: dict[str, Any], where: str) -> str:
    """Basename of `_name_or_path`, else the file's own name when it is not `config.json` (a config saved as
    `SmolLM3-3B.json`), else the folder holding it (the Hugging Face layout, `SmolLM3-3B/config.json`)."""
    path = data.get("_name_or_path")
    if isinstance(path, str) and PurePath(path).name:
        return PurePath(path).name
    file = PurePath(where)
    if file.suffix == ".json" and file.stem and file.stem != "config":
        return file.stem
    folder = file.parent.name
    if folder:
        return folder
    raise SpecError(f"{where}: name: no _name_or_path and no parent folder to name the model; pass a name")


# a quantized checkpoint's name says so: Hugging Face repositories carry the scheme as a name part
# (Qwen3-235B-A22B-FP8, Llama-3.1-70B-Instruct-FP8, Qwen3-235B-A22B-NVFP4, ...-AWQ, ...-GPTQ-Int4, ...-W4A16)
QUANTIZED_NAME = re.compile(r"(?:^|[-_.])(fp8|fp4|nvfp4|mxfp4|int4|int8|awq|gptq|w4a16|w8a8|w4a8|w8a16|bnb|4bit|8bit)"
                            r"(?=$|[-_.])", re.IGNORECASE)


def _quantized_name(data: dict[str, Any], where: str) -> str | None:
    """The quantization a name part announces (the file's folder and stem, `_name_or_path`'s basename), or None."""
    path = data.get("_name_or_path")
    names = [PurePath(where).parent.name, PurePath(where).stem]
    if isinstance(path, str):
        names.append(PurePath(path).name)
    for part in names:
        found = QUANTIZED_NAME.search(part)
        if found:
            return f"{part!r} says {found.group(1)}"
    return None


def _with_quantization(data: dict[str, Any], where: str, hf_quant_config: dict[str, Any] | None) -> dict[str, Any]:
    """config.json with its quantization settings: its own quantization_config, else the ModelOpt
    hf_quant_config.json found beside it (hf_quant.from_hf_quant_config). Without either, a name that announces a
    quantized checkpoint is refused: planned at bf16 its weights would be 2x (FP8) to 3.6x (NVFP4) too large."""
    text = data.get("text_config")
    if data.get("quantization_config") is not None or (
            isinstance(text, dict) and text.get("quantization_config") is not None):
        return data
    if hf_quant_config is not None:
        sibling = str(PurePath(where).with_name("hf_quant_config.json"))
        return data | {"quantization_config": from_hf_quant_config(hf_quant_config, sibling)}
    mlx = data.get("quantization")  # mlx-lm's layout (ml-explore/mlx-lm mlx_lm/utils.py quantize_model)
    if isinstance(mlx, dict) and "bits" in mlx:
        raise SpecError(f"{where}: quantization: MLX's quantized layout ({mlx.get('bits')!r} bits, group "
                        f"{mlx.get('group_size')!r}) is not modelled (no GPU serving engine loads it); plan the "
                        "original checkpoint's config.json, with --weight-dtype int4 / int8 for the width")
    announced = _quantized_name(data, where)
    if announced:
        raise SpecError(f"{where}: quantization_config: missing, but the name {announced}: planned at bf16 the "
                        "weights would be wrong; NVIDIA ModelOpt exports keep the settings in hf_quant_config.json: "
                        "put it beside config.json (vLLM reads it there), or add its `quantization` object to "
                        "config.json as quantization_config with \"quant_method\": \"modelopt\"")
    return data


def model_from_hf_config(data: dict, where: str = "config.json", name: str | None = None,
                         hf_quant_config: dict[str, Any] | None = None) -> Model:
    """Map a Hugging Face config.json mapping to a Model; `source` records `where`. `hf_quant_config`: the
    checkpoint's hf_quant_config.json (ModelOpt), read when config.json has no quantization_config."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: (root): expected a JSON object, got {type(data).__name__}")
    data = _with_quantization(data, where, hf_quant_config)
    arch = _architecture(data, where)
    fields = HANDLERS[arch](_Config(data, where, arch)) if arch in HANDLERS else _family_fields(data, where, arch)
    spec = {"name": name or _default_name(data, where), "source": where, "architecture": arch} | fields
    text = data.get("text_config")
    text, at = (text, f"{where}: text_config") if isinstance(text, dict) else (data, where)
    if isinstance(spec.get("max_position_embeddings"), int):
        spec["max_position_embeddings"] = served_positions(text, at, spec["max_position_embeddings"])
        if (original := longrope_original(text, at)) is not None and original < spec["max_position_embeddings"]:
            spec["longrope_original_positions"] = original
    encoders = read_encoders(data, where, arch)
    if encoders:
        spec["encoders"] = encoders
    mtp = read_mtp_layers(data, where, arch)
    if mtp:
        spec["mtp_layers"] = mtp
    model = validate(Model, spec, where)
    quantization = read_quantization(data, where, has_experts=model.moe is not None, mlps_beside=_mlps_beside(model))
    if quantization is None:
        return model
    model = validate(Model, spec | {"quantization": quantization}, where)
    check_experts(model, where)
    return model


# The keys a config.json counts its MTP modules by, as vLLM reads them to build the `mtp` draft from the target's
# checkpoint (SpeculativeConfig.hf_config_override, vllm-project/vllm vllm/config/speculative.py at
# 002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443: n_predict = num_nextn_predict_layers for DeepSeek-V3 / V3.2, GLM-4.5,
# Ernie-4.5, Nemotron-H, Qwen3-Next; mtp_num_hidden_layers for Qwen3.5; num_mtp_modules for MiniMax).
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")
# Qwen3-Next's published config.json names no MTP key, yet its checkpoint ships the mtp.* module and vLLM's
# Qwen3NextMTP builds getattr(config, "num_nextn_predict_layers", 1) = 1 layer of it
# (vllm/model_executor/models/qwen3_next_mtp.py).
MTP_WITHOUT_KEY = {"Qwen3NextForCausalLM": 1}


def read_mtp_layers(data: dict[str, Any], where: str, arch: str) -> int:
    """Model.mtp_layers: the config's (or its text_config's) MTP module count (MTP_KEYS; MiniMax's num_mtp_modules
    when use_mtp is true), else MTP_WITHOUT_KEY's, else 0 (a checkpoint with no MTP module: Llama, Mistral, ...)."""
    text = data.get("text_config")
    for sub, at in ((data, where), *(((text, f"{where}: text_config"),) if isinstance(text, dict) else ())):
        cfg = _Config(sub, at, arch)
        for key in MTP_KEYS:
            if cfg.has(key):
                return cfg.integer(key, minimum=0)
        if sub.get("use_mtp") is True and cfg.has("num_mtp_modules"):
            return cfg.integer("num_mtp_modules", minimum=0)
    return MTP_WITHOUT_KEY.get(arch, 0)


def _mlps_beside(model: Model) -> bool:
    """The model has MLPs beside its routed experts: shared experts, or dense-MLP layers (DeepSeek's first_k_dense)."""
    if model.moe is None:
        return False
    return bool(model.moe.num_shared_experts) or any(model.layer_mlp(i) == "dense" for i in range(model.num_layers))
