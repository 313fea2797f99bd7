"""Import a Hugging Face config.json as a Model: one small handler per supported architecture.

Each handler reads only the keys its architecture defines and returns the Model fields; the shared
helpers check presence and type so that every failure is one SpecError line naming the config key.
A key that is absent takes the default of the matching transformers config class only where that
default is unambiguous (Gemma2Config ties embeddings; LlamaConfig and Phi3Config fall back to
num_key_value_heads = num_attention_heads); otherwise absence is an error, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from roofline.catalogue.loading import validate
from roofline.errors import SpecError
from roofline.specs import Model

_MISSING = object()


class _Config:
    """Typed access to one config.json mapping; errors name `where`, the key and the architecture."""

    def __init__(self, data: dict[str, Any], where: str, arch: str):
        self.data, self.where, self.arch = data, where, arch

    def error(self, key: str, rule: str) -> SpecError:
        return SpecError(f"{self.where}: {key}: {rule}")

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def _get(self, key: str, default: Any) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING or value is None:
            if default is _MISSING:
                raise self.error(key, f"missing (required for {self.arch})")
            return default
        return value

    def integer(self, key: str, default: Any = _MISSING, minimum: int = 1) -> int:
        """An integer >= minimum (bools and floats are refused: 4096.0 is not a layer count)."""
        value = self._get(key, default)
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected {kind}, got {type(value).__name__} {value!r}")
        if value < minimum:
            raise self.error(key, f"expected {kind}, got {value}")
        return value

    def optional_integer(self, key: str) -> int | None:
        """A positive integer, or None where the key is absent or null (e.g. q_lora_rank)."""
        return self.integer(key) if self.has(key) else None

    def flag(self, key: str, default: Any = _MISSING) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {type(value).__name__} {value!r}")
        return value


def _head_dim(cfg: _Config, hidden: int, heads: int, required: bool) -> int:
    """Config head_dim when present, else hidden_size / num_attention_heads (which must divide)."""
    if cfg.has("head_dim") or required:
        return cfg.integer("head_dim")
    if hidden % heads:
        raise cfg.error("head_dim", f"missing, and hidden_size {hidden} is not divisible by "
                                    f"num_attention_heads {heads}")
    return hidden // heads


def _core(cfg: _Config, *, kv_default_heads: bool = False, head_dim_required: bool = False,
          tie_default: bool = False) -> dict[str, Any]:
    """The fields every decoder shares: depth, widths, heads, vocabulary, context, tying."""
    hidden, heads = cfg.integer("hidden_size"), cfg.integer("num_attention_heads")
    kv_heads = cfg.integer("num_key_value_heads", heads if kv_default_heads else _MISSING)
    if heads % kv_heads:
        raise cfg.error("num_key_value_heads", f"{kv_heads} does not divide num_attention_heads {heads}")
    return {
        "num_layers": cfg.integer("num_hidden_layers"),
        "hidden_size": hidden,
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": _head_dim(cfg, hidden, heads, head_dim_required),
        "intermediate_size": cfg.integer("intermediate_size"),
        "vocab_size": cfg.integer("vocab_size"),
        "tie_word_embeddings": cfg.flag("tie_word_embeddings", tie_default),
        "max_position_embeddings": cfg.integer("max_position_embeddings"),
    }


def _full() -> dict[str, Any]:
    return {"kind": "full"}


def _sliding(window: int) -> dict[str, Any]:
    return {"kind": "sliding", "window": window}


def _shortest_cycle(layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The shortest prefix that, repeated, reproduces the per-layer list (Model.attention is cyclic)."""
    for period in range(1, len(layers) + 1):
        if all(layers[i] == layers[i % period] for i in range(len(layers))):
            return layers[:period]
    return layers


def _from_layer_types(cfg: _Config, num_layers: int) -> list[dict[str, Any]]:
    """Newer configs list every layer: 'full_attention' or 'sliding_attention' (window: sliding_window)."""
    types = cfg.data["layer_types"]
    if not isinstance(types, list) or len(types) != num_layers:
        raise cfg.error("layer_types", f"expected a list of {num_layers} layer kinds, got {types!r}")
    layers = []
    for kind in types:
        if kind == "full_attention":
            layers.append(_full())
        elif kind == "sliding_attention":
            layers.append(_sliding(cfg.integer("sliding_window")))
        else:
            raise cfg.error("layer_types", f"unsupported kind {kind!r} (full_attention, sliding_attention)")
    return _shortest_cycle(layers)


def _uniform_window(cfg: _Config, num_layers: int, *, key_required: bool) -> list[dict[str, Any]]:
    """Mistral, Mixtral, Phi-3: sliding_window (int) applies to every layer; null means full.

    Mistral needs the key present: MistralConfig's default is 4096, so absence is ambiguous.
    """
    if cfg.has("layer_types"):
        return _from_layer_types(cfg, num_layers)
    if key_required and "sliding_window" not in cfg.data:
        raise cfg.error("sliding_window", f"missing (required for {cfg.arch}); null means full attention")
    return [_sliding(cfg.integer("sliding_window"))] if cfg.has("sliding_window") else [_full()]


def _qwen_windows(cfg: _Config, num_layers: int) -> list[dict[str, Any]]:
    """Qwen2/Qwen3: with use_sliding_window, layers from max_window_layers on use sliding_window."""
    if cfg.has("layer_types"):
        return _from_layer_types(cfg, num_layers)
    if not cfg.flag("use_sliding_window", False):
        return [_full()]
    window, first = cfg.integer("sliding_window"), cfg.integer("max_window_layers")
    return _shortest_cycle([_full() if i < first else _sliding(window) for i in range(num_layers)])


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


HANDLERS: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "LlamaForCausalLM": _llama,
    "MistralForCausalLM": _mistral,
    "MixtralForCausalLM": _mixtral,
    "Qwen2ForCausalLM": _qwen2,
    "Qwen3ForCausalLM": _qwen3,
    "Gemma2ForCausalLM": _gemma2,
    "DeepseekV3ForCausalLM": _deepseek_v3,
    "Phi3ForCausalLM": _phi3,
}


def _architecture(data: dict[str, Any], where: str) -> str:
    """The single supported entry of `architectures`."""
    supported = ", ".join(HANDLERS)
    value = data.get("architectures")
    if value is None:
        raise SpecError(f"{where}: architectures: missing (it picks the importer); supported: {supported}")
    if not isinstance(value, list) or len(value) != 1 or not isinstance(value[0], str):
        raise SpecError(f"{where}: architectures: expected a list of one name, got {value!r}; "
                        f"supported: {supported}")
    if value[0] not in HANDLERS:
        raise SpecError(f"{where}: architectures: {value[0]!r} is not supported; supported: {supported}")
    return value[0]


def _default_name(data: dict[str, Any], where: str) -> str:
    """Basename of `_name_or_path`, else the folder holding the config file."""
    path = data.get("_name_or_path")
    if isinstance(path, str) and PurePath(path).name:
        return PurePath(path).name
    folder = PurePath(where).parent.name
    if folder:
        return folder
    raise SpecError(f"{where}: name: no _name_or_path and no parent folder to name the model; pass a name")


def model_from_hf_config(data: dict, where: str = "config.json", name: str | None = None) -> Model:
    """Map a Hugging Face config.json mapping to a Model; `source` records `where`."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: (root): expected a JSON object, got {type(data).__name__}")
    arch = _architecture(data, where)
    fields = HANDLERS[arch](_Config(data, where, arch))
    spec = {"name": name or _default_name(data, where), "source": where, "architecture": arch} | fields
    return validate(Model, spec, where)
