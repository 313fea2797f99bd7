"""A checkpoint's `quantization_config` read as the widths its weights are stored at.

transformers writes the quantizer's settings into config.json (src/transformers/utils/quantization_config.py
@ v5.24.0); the keys read here, per `quant_method`:

- fp8 (FineGrainedFP8Config): fp8 e4m3 weights, one fp32 scale per weight_block_size block (default 128 x 128);
  modules_to_not_convert stay at the model dtype.
- mxfp4 (Mxfp4Config, gpt-oss): OCP MXFP4, 32 fp4 values share one e8m0 scale; modules_to_not_convert (gpt-oss:
  attention, router, embeddings, LM head) stay bf16, so only the experts are 4-bit.
- modelopt (NVIDIA ModelOpt): quant_algo NVFP4 (16 fp4 values share one fp8 scale) or FP8; exclude_modules kept;
  kv_cache_quant_algo names the KV dtype.
- awq / gptq: bits (4 or 8) integers with one fp16 scale (and a zero point) per group_size weights;
  modules_to_not_convert kept.
- bitsandbytes: load_in_4bit (nf4 / fp4, one absmax per 64 weights) or load_in_8bit; llm_int8_skip_modules kept.
- compressed-tensors: config_groups[*].weights {num_bits, type int|float, strategy, group_size}; ignore kept;
  kv_cache_scheme {num_bits, type} names the KV dtype.

The Model keeps what was read (specs.model.Quantization); the planner stores the converted matrices at
`weight_dtype` (the routed experts at `expert_weight_dtype` when only they are converted, gpt-oss) unless the
user names a dtype. Scales are given per weight in `scale_bytes_per_weight` (exact) and stated in the plan's note;
the planner's dtypes (accounting.DTYPE_BYTES) include them for mxfp4 and nvfp4 only.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from roofline.errors import SpecError

KEEP_KEYS = ("modules_to_not_convert", "exclude_modules", "llm_int8_skip_modules", "ignore")
EXPERT_ONLY_HINTS = ("attn", "router", "embed", "lm_head", "gate")


def _kept(q: dict[str, Any]) -> list[str]:
    for key in KEEP_KEYS:
        value = q.get(key)
        if isinstance(value, list):
            return [str(v) for v in value]
    return []


def _int_width(bits: Any, where: str, key: str) -> str:
    if bits == 4:
        return "int4"
    if bits == 8:
        return "int8"
    raise SpecError(f"{where}: quantization_config.{key}: {bits!r} not supported (4 or 8)")


def _compressed(q: dict[str, Any], where: str) -> tuple[str, Fraction, str | None]:
    """compressed-tensors: the (one) weight scheme of config_groups; kv_cache_scheme's dtype."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise SpecError(f"{where}: quantization_config.config_groups: expected an object of weight schemes")
    schemes = {str(g.get("weights")) for g in groups.values() if isinstance(g, dict)}
    if len(schemes) != 1:
        raise SpecError(f"{where}: quantization_config.config_groups: {len(schemes)} weight schemes (one modelled)")
    weights = next(iter(groups.values())).get("weights") or {}
    bits, kind, group = weights.get("num_bits"), weights.get("type"), weights.get("group_size")
    if bits == 4 and kind == "float":
        dtype, scale = "nvfp4", Fraction(0)
    elif bits == 8 and kind == "float":
        dtype, scale = "fp8", Fraction(4, group) if isinstance(group, int) else Fraction(0)
    else:
        dtype = _int_width(bits, where, "config_groups.weights.num_bits")
        scale = Fraction(2, group) if isinstance(group, int) and group > 0 else Fraction(0)
    kv = q.get("kv_cache_scheme")
    kv_dtype = None
    if isinstance(kv, dict):
        kv_dtype = {(8, "float"): "fp8", (8, "int"): "int8"}.get((kv.get("num_bits"), kv.get("type")))
    return dtype, scale, kv_dtype


def _method(q: dict[str, Any], where: str) -> tuple[str, Fraction, str | None]:
    """(stored dtype, scale bytes per weight beyond the dtype, KV cache dtype or None) of one quantization_config."""
    method = q.get("quant_method")
    if method == "fp8":
        block = q.get("weight_block_size") or [128, 128]
        return "fp8", Fraction(4, block[0] * block[1]), None
    if method == "mxfp4":
        return "mxfp4", Fraction(0), None
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        kv = "fp8" if str(q.get("kv_cache_quant_algo", "")).upper() == "FP8" else None
        if algo == "NVFP4":
            return "nvfp4", Fraction(0), kv
        if algo == "FP8":
            return "fp8", Fraction(0), kv
        raise SpecError(f"{where}: quantization_config.quant_algo: {algo!r} not supported (NVFP4, FP8)")
    if method in ("awq", "gptq"):
        group = q.get("group_size", 128)
        dtype = _int_width(q.get("bits", 4), where, "bits")
        # one fp16 scale and one packed zero point (bits wide) per group
        per_group = Fraction(2) + Fraction(q.get("bits", 4), 8)
        return dtype, per_group / group if isinstance(group, int) and group > 0 else Fraction(0), None
    if method == "bitsandbytes":
        if q.get("load_in_4bit"):
            return "int4", Fraction(4, 64), None  # one fp32 absmax per 64 weights (bnb blocksize 64)
        if q.get("load_in_8bit"):
            return "int8", Fraction(0), None
        raise SpecError(f"{where}: quantization_config: bitsandbytes without load_in_4bit or load_in_8bit")
    if method == "compressed-tensors":
        return _compressed(q, where)
    raise SpecError(f"{where}: quantization_config.quant_method: {method!r} not supported (fp8, mxfp4, modelopt, "
                    "awq, gptq, bitsandbytes, compressed-tensors)")


def read_quantization(data: dict[str, Any], where: str, has_experts: bool) -> dict[str, Any] | None:
    """The Model's `quantization` field from config.json's quantization_config (None when absent). When the kept
    modules name attention and the router (gpt-oss's mxfp4 layout), only the routed experts are converted."""
    q = data.get("quantization_config")
    if q is None:
        return None
    if not isinstance(q, dict):
        raise SpecError(f"{where}: quantization_config: expected an object, got {type(q).__name__}")
    dtype, scale, kv_dtype = _method(q, where)
    kept = _kept(q)
    experts_only = has_experts and any("attn" in k for k in kept) and any("router" in k or "gate" in k for k in kept)
    return {"method": str(q.get("quant_method")), "weight_dtype": dtype,
            "scale_bytes_per_weight": f"{scale.numerator}/{scale.denominator}", "experts_only": experts_only,
            "modules_not_converted": kept, "kv_cache_dtype": kv_dtype}


def stored_widths(model, workload) -> tuple[Any, dict[str, Any] | None]:
    """(workload, note): a quantized model's weights at their stored width when the workload keeps the bf16
    default (weight_dtype bf16, no expert dtype): the converted matrices at Quantization.weight_dtype, or only the
    routed experts when experts_only. The note (for the plan's JSON) says what was read and applied; (workload,
    None) for an unquantized model or a user-chosen dtype."""
    q = model.quantization
    if q is None or workload.weight_dtype != "bf16" or workload.expert_weight_dtype is not None:
        return workload, None
    change = {"expert_weight_dtype": q.weight_dtype} if q.experts_only else {"weight_dtype": q.weight_dtype}
    note = {"read": f"quantization_config: {q.method}", **change,
            "scale_bytes_per_weight": q.scale_bytes_per_weight, "modules_not_converted": q.modules_not_converted,
            "kv_cache_dtype": q.kv_cache_dtype,
            "note": "scales are not in the fp8 / int4 / int8 dtypes the planner applies (mxfp4 and nvfp4 include "
                    "theirs); modules_not_converted are planned at the converted width unless experts_only"}
    return workload.model_copy(update=change), note
