"""The positions a config.json serves: max_position_embeddings scaled by its RoPE scaling, as vLLM derives them.

A checkpoint extended by YaRN or linear / dynamic RoPE scaling serves past its max_position_embeddings: Qwen3's
model cards tell users to add `"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
"original_max_position_embeddings": 32768}` to config.json for 131,072 tokens, and its max_position_embeddings stays
40,960. vLLM's `_get_and_verify_max_len` (vllm-project/vllm vllm/config/model.py) derives the model's length as:
for each RoPE parameter set whose rope_type is not su, longrope or llama3 (their max_position_embeddings already
counts the extension), the length times its `factor`, where YaRN's length is its original_max_position_embeddings
(transformers' YaRN falls back to max_position_embeddings without it); a Gemma 3 config is left as it is (its
128K is already scaled). That length is vLLM's default --max-model-len and the most it accepts without
VLLM_ALLOW_LONG_MAX_MODEL_LEN.
"""

from __future__ import annotations

from typing import Any

from roofline.errors import SpecError

# rope types whose max_position_embeddings already includes the extension (vLLM: not scaled)
UNSCALED_TYPES = ("su", "longrope", "llama3")


def _parameter_sets(rope: Any) -> list[dict[str, Any]]:
    """One rope parameter mapping, or transformers v5's mapping of one per layer type ({"full_attention": {...}})."""
    if not isinstance(rope, dict) or not rope:
        return []
    if all(isinstance(v, dict) for v in rope.values()):
        return list(rope.values())
    return [rope]


def _number(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1 << 30:
        shown = value if not isinstance(value, int) or abs(value) < 1 << 64 else "an integer past 2^64"
        raise SpecError(f"{where}: {key}: expected a positive number up to 2^30, got {shown!r}")
    return float(value)


def served_positions(config: dict[str, Any], where: str, positions: int) -> int:
    """`positions` (the handler's max_position_embeddings) as vLLM derives the model's length from `config`'s
    rope_parameters (else rope_scaling): int(base x factor), base = YaRN's original_max_position_embeddings, else
    `positions`. Unchanged without scaling, for su / longrope / llama3, and for Gemma 3."""
    if "gemma3" in str(config.get("model_type", "")) or positions > 1 << 30:  # past 2^30: the spec refuses it
        return positions
    key = "rope_parameters" if isinstance(config.get("rope_parameters"), dict) else "rope_scaling"
    base, factor = positions, 1.0
    for rope in _parameter_sets(config.get(key)):
        kind = rope.get("rope_type", rope.get("type"))
        if kind in UNSCALED_TYPES:
            continue
        if rope.get("factor") is not None:
            factor = _number(rope["factor"], f"{key}.factor", where)
        if kind == "yarn" and rope.get("original_max_position_embeddings") is not None:
            base = _number(rope["original_max_position_embeddings"], f"{key}.original_max_position_embeddings",
                           where)
    if factor == 1.0 and base == positions:
        return positions
    derived = base * factor
    if not 1 <= derived <= 1 << 30:
        raise SpecError(f"{where}: {key}.factor: {factor:g} scales the positions to {derived:g}, outside 1 .. 2^30")
    return int(derived)


def longrope_original(config: dict[str, Any], where: str) -> int | None:
    """A LongRoPE config's original_max_position_embeddings (vLLM reads it on the config itself; "su" is its old
    name): vLLM's default max_model_len for it, "to avoid performance degradation for shorter sequences"
    (_get_and_verify_max_len). None for any other rope, or a LongRoPE config without the key."""
    key = "rope_parameters" if isinstance(config.get("rope_parameters"), dict) else "rope_scaling"
    kinds = [rope.get("rope_type", rope.get("type")) for rope in _parameter_sets(config.get(key))]
    if not any(kind in ("longrope", "su") for kind in kinds):
        return None
    value = config.get("original_max_position_embeddings")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{where}: original_max_position_embeddings: expected a positive integer, got {value!r}")
    return value
