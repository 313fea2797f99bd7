"""A checkpoint's `quantization_config` read as the layout its weights are stored in.

transformers writes the quantizer's settings into config.json (src/transformers/utils/quantization_config.py
@ v5.24.0); the keys read here, per `quant_method`, and the layout each loader allocates (vLLM
vllm/model_executor/layers/quantization/<method>.py, create_weights):

- fp8 (FineGrainedFP8Config, DeepSeek / Qwen FP8): fp8 e4m3 weights, one fp32 weight_scale_inv per
  weight_block_size block (default 128 x 128); without a block size one fp32 scale per matrix.
- mxfp4 (Mxfp4Config, gpt-oss): OCP MXFP4, 32 fp4 values share one e8m0 byte; vLLM converts the experts only.
- modelopt (NVIDIA ModelOpt hf_quant_config): quant_algo NVFP4 (16 fp4 values share one fp8 byte, plus fp32
  weight_scale_2 and input_scale per matrix) or FP8 (fp32 weight and input scale per matrix);
  kv_cache_quant_algo names the KV dtype.
- awq / gptq: bits-wide integers packed in int32, one fp16 scale and one packed zero point per group_size
  weights of a column (AWQ qweight [in, out/8], qzeros [in/g, out/8], scales [in/g, out]); GPTQ adds an int32
  g_idx per input channel.
- bitsandbytes: load_in_4bit (two codes a byte, one fp32 absmax per 64 weights, or one uint8 with double quant)
  or load_in_8bit (one fp32 SCB per output row).
- compressed-tensors: config_groups[*].weights {num_bits, type int|float, strategy, group_size, symmetric};
  kv_cache_scheme {num_bits, type} names the KV dtype.

The kept modules (modules_to_not_convert / exclude_modules / llm_int8_skip_modules / ignore) are kept as written;
roofline.stored_bytes matches them against the decoder's module names and counts the bytes exactly. The planner
stores the converted matrices at `weight_dtype` (the routed experts at `expert_weight_dtype` when only they are
converted, gpt-oss) unless the user names a dtype, and adds what that dtype leaves out (scales, zero points,
modules kept at bf16).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from roofline.errors import SpecError

KEEP_KEYS = ("modules_to_not_convert", "exclude_modules", "llm_int8_skip_modules", "ignore")
# scale bytes per weight the planner's dtype already holds (accounting.DTYPE_BYTES: mxfp4 17/32, nvfp4 9/16)
IN_DTYPE = {"mxfp4": Fraction(1, 32), "nvfp4": Fraction(1, 16)}


# multimodal wrappers' prefixes before the decoder's own module names (`model.layers.N...`): vLLM's ModelOpt
# is_layer_excluded matches an excluded name with its `language_model.` prefix removed (vllm-project/vllm
# vllm/model_executor/layers/quantization/modelopt.py, ModelOptFp8Config.is_layer_excluded); SGLang maps nvidia/
# Kimi-K2.5-NVFP4's `language_model.model.layers.N.self_attn*` the same way (sglang modelopt_quant.py,
# apply_weight_name_mapper). Longest first; a prefix that leaves `layers.` gets `model.` back.
WRAPPER_PREFIXES = ("model.language_model.", "language_model.model.", "language_model.")


# Nemotron-H names its stack `backbone.layers.N.mixer` (transformers NemotronHModel); an attention layer's mixer
# holds q_proj ... o_proj, which roofline.stored_bytes names `model.layers.N.self_attn.q_proj`
NEMOTRON_ATTENTION = re.compile(r"^backbone\.layers\.(\d+|\*)\.mixer\.([qkvo]_proj)$")


def _unwrapped(pattern: str) -> str:
    """A kept-module pattern with a multimodal wrapper's prefix removed (`language_model.model.layers.0.self_attn*`
    -> `model.layers.0.self_attn*`, `language_model.lm_head` -> `lm_head`), and Nemotron-H's attention projections
    under the names stored_bytes gives them; `re:` patterns as written."""
    nemotron = NEMOTRON_ATTENTION.match(pattern)
    if nemotron:
        return f"model.layers.{nemotron.group(1)}.self_attn.{nemotron.group(2)}"
    for prefix in WRAPPER_PREFIXES:
        if pattern.startswith(prefix):
            rest = pattern[len(prefix):]
            return "model." + rest if rest.startswith("layers.") else rest
    return pattern


def _patterns(values: list[str], where: str, key: str) -> list[str]:
    """Module patterns as written, each `re:` one a regular expression Python compiles (else one line naming
    `key`: vLLM's compressed_tensors matching would fail on it too)."""
    for value in values:
        if value.startswith("re:"):
            try:
                re.compile(value[3:])
            except re.error as err:
                raise SpecError(f"{where}: quantization_config.{key}: {value!r} is not a regular expression "
                                f"({err})") from None
    return values


def _kept(q: dict[str, Any], where: str) -> list[str]:
    """The kept (unconverted) module patterns, the decoder's names (_unwrapped)."""
    for key in KEEP_KEYS:
        value = q.get(key)
        if isinstance(value, list):
            return _patterns([_unwrapped(str(v)) for v in value], where, key)
    return []


# the last scope of a pattern naming a whole attention block (not one of its sub-modules: GLM-5-FP8 keeps
# `model.layers.N.self_attn.indexer.k_norm` and converts q_a_proj ... o_proj)
ATTENTION_BLOCKS = ("self_attn", "attn", "attention", "linear_attn", "mixer")
ROUTERS = ("router", "gate")


def _last_scope(pattern: str) -> str:
    return pattern.rstrip("*").rstrip(".").rsplit(".", 1)[-1]


def _experts_only(kept: list[str], dtype: str, has_experts: bool, mlps_beside: bool) -> bool:
    """Only the routed experts are converted: gpt-oss's mxfp4 (vLLM's Mxfp4Config converts FusedMoE alone), or a
    kept list naming whole attention blocks (`model.layers.*.self_attn`, `...self_attn*`) and either the router
    (`mlp.router`, `mlp.gate`, `block_sparse_moe.gate`: MiniMax-M2.5-NVFP4) or, when the model has MLPs beside the
    routed experts (`mlps_beside`: shared experts or dense layers), the shared experts (`mlp.shared_expert*`:
    Qwen3.5-122B-A10B-NVFP4). A kept sub-module of the attention (a norm, the indexer's projection: GLM-5-FP8) leaves
    the projections converted; attention kept but shared experts not (Kimi-K2.5-NVFP4) converts the shared experts
    and the dense layers' MLP, so not experts-only (roofline.stored_bytes.converted then matches matrix by matrix)."""
    if not has_experts:
        return False
    if dtype == "mxfp4":
        return True
    scopes = {_last_scope(k) for k in kept if not k.startswith("re:")}
    if not scopes & set(ATTENTION_BLOCKS):
        return False
    shared_kept = any(s.startswith("shared_expert") and not s.endswith("gate") for s in scopes)
    return shared_kept if mlps_beside else bool(scopes & set(ROUTERS))


def _int_width(bits: Any, where: str, key: str) -> str:
    if bits == 4:
        return "int4"
    if bits == 8:
        return "int8"
    raise SpecError(f"{where}: quantization_config.{key}: {bits!r} not supported (4 or 8)")


def _group(value: Any, where: str, key: str) -> int:
    """A group size: a positive integer, or -1 (one group over the whole input: per output channel) -> 0."""
    if value == -1 or value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{where}: quantization_config.{key}: {value!r} is not a positive group size (or -1)")
    return value


def _layout(dtype: str, group: int = -1, scale_bytes: int = 0, **rest: int) -> dict[str, Any]:
    return {"weight_dtype": dtype, "scale_group": group, "scale_bytes": scale_bytes, **rest}


def _compressed_weights(weights: dict[str, Any], where: str, key: str) -> dict[str, Any]:
    """One compressed-tensors weight scheme: vLLM compressed_tensors/schemes/ (W8A8Fp8: fp32 weight_scale per
    channel [out, 1] or per tensor; WNA16: int32-packed weight_packed, weight_scale in the model dtype per group,
    int64 weight_shape [2], weight_zero_point when asymmetric; W4A4Fp4 (NVFP4): fp8 weight_scale per 16, fp32
    weight_global_scale and input_global_scale)."""
    bits, kind, strategy = weights.get("num_bits"), weights.get("type"), weights.get("strategy")
    if bits == 4 and kind == "float":
        return _layout("nvfp4", 16, 1, matrix_extra_bytes=8)
    if strategy not in ("tensor", "channel", "group", "block"):
        raise SpecError(f"{where}: quantization_config.{key}.strategy: {strategy!r} not supported "
                        "(tensor, channel, group, block)")
    if kind == "float" and bits == 8:
        if strategy == "block":
            block = weights.get("block_structure") or [128, 128]
            if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)):
                raise SpecError(f"{where}: quantization_config.{key}.block_structure: {block!r} is not [rows, columns]")
            return _layout("fp8", block[1], 4, scale_rows=block[0])
        return _layout("fp8", -1 if strategy == "tensor" else 0, 4)
    dtype = _int_width(bits, where, f"{key}.num_bits")
    zero = 0 if weights.get("symmetric", True) else bits
    if dtype == "int8" and strategy in ("channel", "tensor"):  # W8A8 int8: fp32 scales
        return _layout(dtype, -1 if strategy == "tensor" else 0, 4, zero_point_bits=zero)
    group = _group(weights.get("group_size"), where, f"{key}.group_size") if strategy == "group" else 0
    return _layout(dtype, group, 2, zero_point_bits=zero, matrix_extra_bytes=16)


def _targets(group: dict[str, Any], name: str, where: str) -> list[str]:
    """A group's targets, the decoder's names (_unwrapped); a group that names none targets every Linear."""
    targets = group.get("targets", ["Linear"])
    if not (isinstance(targets, list) and targets and all(isinstance(t, str) and t for t in targets)):
        raise SpecError(f"{where}: quantization_config.config_groups.{name}.targets: {targets!r} is not a list of "
                        "module names, `re:` patterns or a class (Linear)")
    return _patterns([_unwrapped(t) for t in targets], where, f"config_groups.{name}.targets")


def _compressed(q: dict[str, Any], where: str) -> tuple[dict[str, Any], str | None]:
    """compressed-tensors: the layout of the first config_group (the checkpoint's one scheme), and all groups with
    their targets when there are several schemes or a target other than `Linear` (llm-compressor's non-uniform
    recipes: NVFP4 with fp8 down_proj, int4 with int8 down_proj; unsloth's NVFP4 releases: fp8 per channel for the
    attention and nvfp4 for the MLPs); kv_cache_scheme's dtype."""
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise SpecError(f"{where}: quantization_config.config_groups: expected an object of weight schemes")
    schemes = []
    for name, group in groups.items():
        if not isinstance(group, dict) or not isinstance(group.get("weights"), dict):
            raise SpecError(f"{where}: quantization_config.config_groups.{name}.weights: expected an object "
                            "(num_bits, type, strategy, group_size)")
        layout = _compressed_weights(group["weights"], where, f"config_groups.{name}.weights")
        schemes.append({**layout, "name": str(name), "targets": _targets(group, str(name), where)})
    layout = {k: v for k, v in schemes[0].items() if k not in ("name", "targets")}
    if len(schemes) > 1 or schemes[0]["targets"] != ["Linear"]:
        layout["groups"] = schemes
    kv = q.get("kv_cache_scheme")
    kv_dtype = None
    if isinstance(kv, dict):
        kv_dtype = {(8, "float"): "fp8", (8, "int"): "int8"}.get((kv.get("num_bits"), kv.get("type")))
    return layout, kv_dtype


def _fp8(q: dict[str, Any], where: str) -> dict[str, Any]:
    """FineGrainedFP8 / DeepSeek / Qwen FP8: fp32 weight_scale_inv per weight_block_size block (vLLM fp8.py
    Fp8LinearMethod.create_weights: float32 [ceil(out/bo), ceil(in/bi)]); without a block size, one fp32
    weight_scale per matrix (and an input_scale when activation_scheme is static)."""
    block = q.get("weight_block_size")
    if block is None:
        static = q.get("activation_scheme") == "static"
        return _layout("fp8", -1, 4, matrix_extra_bytes=4 if static else 0)
    if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)):
        raise SpecError(f"{where}: quantization_config.weight_block_size: {block!r} is not [rows, columns]")
    return _layout("fp8", block[1], 4, scale_rows=block[0])


def _bits_and_bytes(q: dict[str, Any], where: str) -> dict[str, Any]:
    """bitsandbytes (vLLM bitsandbytes.py): 4-bit packs two codes a byte with one absmax per 64 weights (fp32, or
    one uint8 with bnb_4bit_use_double_quant, whose second-level fp32 absmax per 256 blocks is left out) and a
    16-entry fp32 code map per matrix; 8-bit (LLM.int8) keeps one fp32 SCB per output row."""
    if q.get("load_in_4bit"):
        return _layout("int4", 64, 1 if q.get("bnb_4bit_use_double_quant") else 4, matrix_extra_bytes=64)
    if q.get("load_in_8bit"):
        return _layout("int8", 0, 4)
    raise SpecError(f"{where}: quantization_config: bitsandbytes without load_in_4bit or load_in_8bit")


def _quant_method(q: dict[str, Any]) -> Any:
    """quant_method; a ModelOpt export that leaves it out but names its producer (nvidia's Qwen3-32B-FP8-Static-
    PerTensor: producer {name: modelopt}, quant_algo FP8) is "modelopt", as vLLM's ModelOpt config reads it."""
    method = q.get("quant_method")
    producer = q.get("producer")
    if method is None and isinstance(producer, dict) and producer.get("name") == "modelopt" and "quant_algo" in q:
        return "modelopt"
    return method


def _fp8_scheme(q: dict[str, Any]) -> bool:
    """A ModelOpt config.json's kv_cache_scheme naming fp8 ({num_bits 8, type float}, or "FP8"): the form newer
    ModelOpt exports write for kv_cache_quant_algo FP8 (nvidia/Kimi-K2.6-NVFP4 ships both files: config.json's
    kv_cache_scheme {num_bits 8, type float} beside hf_quant_config.json's kv_cache_quant_algo FP8)."""
    kv = q.get("kv_cache_scheme")
    if isinstance(kv, str):
        return kv.upper() == "FP8"
    return isinstance(kv, dict) and kv.get("num_bits") == 8 and kv.get("type") == "float"


def _method(q: dict[str, Any], where: str) -> tuple[dict[str, Any], str | None]:
    """(the stored layout: Quantization's weight_dtype and scale fields; the KV cache dtype or None)."""
    method = _quant_method(q)
    if method == "fp8":
        return _fp8(q, where), None
    if method == "mxfp4":  # gpt-oss: uint8 blocks (two fp4) + one e8m0 scale byte per 32 (vLLM mxfp4.py)
        return _layout("mxfp4", 32, 1), None
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        kv = "fp8" if str(q.get("kv_cache_quant_algo", "")).upper() == "FP8" or _fp8_scheme(q) else None
        if algo == "NVFP4":  # modelopt.py: fp8 weight_scale per 16, fp32 weight_scale_2 and input_scale
            return _layout("nvfp4", _group(q.get("group_size", 16), where, "group_size"), 1,
                           matrix_extra_bytes=8), kv
        if algo == "FP8":  # ModelOptFp8LinearMethod: fp32 weight_scale and input_scale per matrix
            return _layout("fp8", -1, 4, matrix_extra_bytes=4), kv
        raise SpecError(f"{where}: quantization_config.quant_algo: {algo!r} not supported (NVFP4, FP8)")
    if method in ("awq", "gptq"):
        bits = q.get("bits", q.get("w_bit", 4))
        dtype = _int_width(bits, where, "bits")
        group = _group(q.get("group_size", q.get("q_group_size", 128)), where, "group_size")
        zero = bits if method == "gptq" or q.get("zero_point", True) else 0
        return _layout(dtype, group, 2, zero_point_bits=zero, input_index_bytes=4 if method == "gptq" else 0), None
    if method == "bitsandbytes":
        return _bits_and_bytes(q, where), None
    if method == "compressed-tensors":
        return _compressed(q, where)
    raise SpecError(f"{where}: quantization_config.quant_method: {method!r} not supported (fp8, mxfp4, modelopt, "
                    "awq, gptq, bitsandbytes, compressed-tensors)")


def _per_weight(layout: dict[str, Any]) -> Fraction:
    """Scale and zero-point bytes per converted weight beyond what the planner's dtype holds (the block / group
    share; 0 for channel / tensor scales, and for mxfp4 / nvfp4 whose dtypes include their scales)."""
    group, rows = layout["scale_group"], layout.get("scale_rows", 1)
    if group <= 0:
        return Fraction(0)
    share = Fraction(layout["scale_bytes"] * 8 + layout.get("zero_point_bits", 0), 8 * group * rows)
    return max(share - IN_DTYPE.get(layout["weight_dtype"], Fraction(0)), Fraction(0))


def read_quantization(data: dict[str, Any], where: str, has_experts: bool,
                      mlps_beside: bool = False) -> dict[str, Any] | None:
    """The Model's `quantization` field from config.json's quantization_config (None when absent); whether only the
    routed experts are converted is _experts_only's rule (`mlps_beside`: the model has shared experts or dense MLP
    layers beside its routed experts)."""
    q = data.get("quantization_config")
    text = data.get("text_config")
    if q is None and isinstance(text, dict):  # moonshotai/Kimi-K2.5 writes it in its text_config only
        q, where = text.get("quantization_config"), f"{where}: text_config"
    if q is None:
        return None
    if not isinstance(q, dict):
        raise SpecError(f"{where}: quantization_config: expected an object, got {type(q).__name__}")
    layout, kv_dtype = stored_layout(q, where)
    kept = _kept(q, where)
    # several groups: each matrix's group decides (roofline.stored_bytes.scheme_for)
    experts_only = not layout.get("groups") and _experts_only(kept, layout["weight_dtype"], has_experts, mlps_beside)
    return {"method": str(_quant_method(q)), **layout, "experts_only": experts_only,
            "modules_not_converted": kept, "kv_cache_dtype": kv_dtype}


def stored_layout(q: dict[str, Any], where: str) -> tuple[dict[str, Any], str | None]:
    """(the layout a quantization_config `q` stores its converted matrices in, with scale_bytes_per_weight; the KV
    cache dtype it declares or None): Quantization's layout fields, which matrices aside."""
    layout, kv_dtype = _method(q, where)
    scale = _per_weight(layout)
    return {**layout, "scale_bytes_per_weight": f"{scale.numerator}/{scale.denominator}"}, kv_dtype


def from_hf_quant_config(data: Any, where: str) -> dict[str, Any]:
    """A ModelOpt checkpoint's hf_quant_config.json ({"producer": {...}, "quantization": {quant_algo,
    kv_cache_quant_algo, group_size, exclude_modules}}) as the quantization_config its config.json leaves out.
    NVIDIA's ModelOpt exports (nvidia/Llama-3.1-70B-Instruct-FP8, nvidia/Qwen3-235B-A22B-NVFP4,
    nvidia/DeepSeek-V3.1-NVFP4, ...) write the settings only there; vLLM reads that file for the modelopt method
    (vllm-project/vllm vllm/model_executor/layers/quantization/modelopt.py: get_config_filenames returns
    ["hf_quant_config.json"]; from_config reads config["quantization"]["quant_algo"])."""
    inner = data.get("quantization") if isinstance(data, dict) else None
    if not isinstance(inner, dict):
        raise SpecError(f"{where}: quantization: expected an object (ModelOpt's hf_quant_config.json layout)")
    if not isinstance(inner.get("quant_algo"), str):
        raise SpecError(f"{where}: quantization.quant_algo: expected a string (NVFP4, FP8), "
                        f"got {inner.get('quant_algo')!r}")
    return {"quant_method": "modelopt", **inner}
