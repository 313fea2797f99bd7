"""Shared helpers of the Hugging Face import: typed access to a config mapping and the layer patterns.

Every failure is one SpecError line naming the config key and the rule.
"""

from __future__ import annotations

from typing import Any

from roofline.errors import SpecError

_MISSING = object()

# transformers' legacy layer-type names and the names its configs use now (configuration_utils.py
# _LEGACY_LAYER_TYPE_REMAP, applied to every config's layer_types and mtp_layer_types by PreTrainedConfig,
# remap_legacy_layer_types; transformers 5.24): a published Granite-4.0-H config.json lists 'mamba' / 'attention'
LEGACY_LAYER_TYPES = {"mamba": "linear_attention", "attention": "full_attention",
                      "deepseek_sparse_attention": "indexed_attention", "qwen_sparse_attention": "indexed_attention"}


def _remapped(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with its layer_types / mtp_layer_types in transformers' current names (LEGACY_LAYER_TYPES)."""
    out = data
    for key in ("layer_types", "mtp_layer_types"):
        kinds = data.get(key)
        if isinstance(kinds, list) and any(isinstance(k, str) and k in LEGACY_LAYER_TYPES for k in kinds):
            out = {**out, key: [LEGACY_LAYER_TYPES.get(k, k) if isinstance(k, str) else k for k in kinds]}
    return out


class _Config:
    """Typed access to one config.json mapping; errors name `where`, the key and the architecture."""

    def __init__(self, data: dict[str, Any], where: str, arch: str):
        self.data, self.where, self.arch = _remapped(data), where, arch

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

    def layer_integer(self, key: str, default: Any = _MISSING, minimum: int = 1) -> int:
        """integer(), or a list of one value per layer that is the same for every layer (HunYuanMoEV1Config's
        `moe_topk: int | list[int]`, and Hunyuan-A13B's config.json lists moe_intermediate_size and
        num_shared_expert per layer too); lists that differ between layers are refused (one value is modelled)."""
        value = self._get(key, default)
        if isinstance(value, list) and value:
            if len(set(map(repr, value))) != 1:
                raise self.error(key, f"per-layer values differ ({sorted(set(map(repr, value)))}); one value for "
                                      f"every layer is modelled")
            return _Config({key: value[0]}, self.where, self.arch).integer(key, minimum=minimum)
        return self.integer(key, default, minimum)

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


LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")


def _from_layer_types(cfg: _Config, num_layers: int, sinks: bool = False) -> list[dict[str, Any]]:
    """Newer configs list every layer: 'full_attention', 'sliding_attention' (window: sliding_window),
    'chunked_attention' (chunk: attention_chunk_size) or 'linear_attention' (a recurrent layer)."""
    types = cfg.data["layer_types"]
    if not isinstance(types, list) or len(types) != num_layers:
        raise cfg.error("layer_types", f"expected a list of {num_layers} layer kinds, got {types!r}")
    layers = []
    for kind in types:
        if kind == "full_attention":
            layers.append(_full())
        elif kind == "sliding_attention":
            layers.append(_sliding(cfg.integer("sliding_window")))
        elif kind == "chunked_attention":
            layers.append({"kind": "chunked", "window": cfg.integer("attention_chunk_size")})
        elif kind == "linear_attention":
            layers.append({"kind": "linear"})
            continue
        else:
            raise cfg.error("layer_types", f"unsupported kind {kind!r} ({', '.join(LAYER_TYPES)})")
        if sinks:
            layers[-1]["sinks"] = True
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


def text_of(cfg: _Config) -> _Config:
    """The decoder's sub-config of a multimodal checkpoint (its text_config), or the config itself; a text_config
    that is not an object is an error naming it."""
    text = cfg.data.get("text_config")
    if text is None:
        return cfg
    if not isinstance(text, dict):
        raise cfg.error("text_config", f"expected an object, got {type(text).__name__}")
    return _Config(text, f"{cfg.where}: text_config", cfg.arch)
