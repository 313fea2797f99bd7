"""The layout the planner stores a model's weights in at the workload's dtypes, and the bytes that layout places.

planned_quantization picks one of three:

- a quantized checkpoint (Model.quantization) at its stored widths (stored_bytes.dominant_dtypes, which
  stored_bytes.stored_widths gives the workload's bf16 default): its own quantization_config, exact;
- an unquantized model at a quantized `--weight-dtype` / `--expert-weight-dtype` (fp8, int8, int4, mxfp4, nvfp4:
  the what-if): the quantization_config the usual checkpoint format of that dtype writes (WHATIF_CONFIGS, read by
  catalogue.hf_quant as a real one is). No serving engine stores the embedding or the LM head at such a width:
  vLLM's online `--quantization fp8` and every format a user loads convert the decoder's linear matrices
  (stored_bytes.decoder_matrices) and keep the embedding, the LM head (VocabParallelEmbedding / ParallelLMHead are
  not LinearBase), norms, routers and biases at bf16;
- anything else (bf16 / fp16 / fp32; a GGUF preset, which gguf_quant counts per tensor; bare fp4, a width with no
  engine's format; fp32 beside a quantized expert dtype; a quantized checkpoint at dtypes the user names): None,
  every parameter at the dtypes as given.

The what-if's scheme per dtype (WHATIF_CONFIGS; vLLM vllm/model_executor/layers/quantization/, create_weights):

- fp8: vLLM's online fp8 (`--quantization fp8` on a bf16 checkpoint; fp8.py Fp8LinearMethod quantizes each weight
  with one fp32 per-tensor weight_scale, Fp8MoEMethod one per expert's matrix): quant_method fp8 without
  weight_block_size, dynamic activations;
- int8: compressed-tensors W8A8 int8 (llm-compressor's W8A8 preset; compressed_tensors_w8a8_int8.py: fp32
  weight_scale [out, 1]), symmetric per output channel;
- int4: compressed-tensors W4A16 (llm-compressor's W4A16 preset, the RedHatAI *-quantized.w4a16 checkpoints;
  compressed_tensors_wNa16.py: int32-packed weight_packed, weight_scale in the model dtype [out, in/128], int64
  weight_shape [2]), symmetric, group 128, so no zero points;
- mxfp4: OCP MXFP4 (mxfp4.py: two fp4 codes a uint8, one e8m0 scale byte per 32) on every converted matrix
  (vLLM's own Mxfp4Config converts the experts alone: --expert-weight-dtype mxfp4 with a bf16 --weight-dtype
  is that layout);
- nvfp4: ModelOpt NVFP4 (modelopt.py ModelOptNvFp4LinearMethod: fp8 weight_scale per 16, fp32 weight_scale_2
  and input_scale per matrix).

With --expert-weight-dtype the routed experts take their dtype's scheme and the other matrices the weight
dtype's (a bf16 / fp16 side stays unconverted). The mixers of recurrent layers stored_bytes does not name
(Mamba, short convolutions, Kimi Delta Attention, ...) stay at the chosen width without scales in the what-if,
as the decode step reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from roofline.accounting import NORM_PARAMS_PER_CHANNEL, dtype_size, linear_params_per_layer, parameter_count
from roofline.catalogue.hf_quant import stored_layout
from roofline.numbers.codegen import LRU
from roofline.specs import Model
from roofline.specs.model import Quantization, WeightScheme
from roofline.stored_bytes import (
    KV_NOTE,
    MODEL_DTYPE_BYTES,
    Matrix,
    decoder_matrices,
    dominant_dtypes,
    encoder_bytes,
    matrix_bytes,
    planned_bytes,
    scheme_for,
    stored_bytes,
    stored_matrices,
    uncounted_towers,
)


def _compressed(bits: int, strategy: str, **weights) -> dict:
    return {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": bits, "type": "int", "symmetric": True,
                                           "strategy": strategy, **weights}}}}


# the quantization_config a checkpoint of each dtype's usual format writes (module docstring)
WHATIF_CONFIGS: dict[str, dict] = {
    "fp8": {"quant_method": "fp8", "activation_scheme": "dynamic"},
    "int8": _compressed(8, "channel"),
    "int4": _compressed(4, "group", group_size=128),
    "mxfp4": {"quant_method": "mxfp4"},
    "nvfp4": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16},
}
WHATIF_SCHEMES = {
    "fp8": "vLLM online fp8 (--quantization fp8): one fp32 scale per matrix",
    "int8": "compressed-tensors W8A8 int8: one fp32 scale per output channel, symmetric",
    "int4": "compressed-tensors W4A16: one bf16 scale per 128 weights, symmetric, an int64 shape per matrix",
    "mxfp4": "OCP MXFP4: one e8m0 scale per 32 weights",
    "nvfp4": "ModelOpt NVFP4: one fp8 scale per 16 weights, two fp32 scales per matrix",
}
UNCONVERTED = ("bf16", "fp16")  # a side of the what-if left at the model dtype (MODEL_DTYPE_BYTES)


def _layout(dtype: str) -> dict:
    return stored_layout(WHATIF_CONFIGS[dtype], f"--weight-dtype {dtype}")[0]


def whatif_quantization(model: Model, weight_dtype: str, expert_dtype: str) -> Quantization | None:
    """The what-if layout (module docstring) of an unquantized `model` at these dtypes; None when the model is
    quantized or the dtypes are not a what-if."""
    if model.quantization is not None:
        return None
    kinds = {weight_dtype, expert_dtype}
    if not kinds & WHATIF_CONFIGS.keys() or not kinds <= WHATIF_CONFIGS.keys() | set(UNCONVERTED):
        return None
    if weight_dtype in UNCONVERTED:  # the routed experts alone (gpt-oss's layout)
        return Quantization(method=WHATIF_CONFIGS[expert_dtype]["quant_method"], **_layout(expert_dtype),
                            experts_only=True)
    method = WHATIF_CONFIGS[weight_dtype]["quant_method"]
    if expert_dtype == weight_dtype:
        return Quantization(method=method, **_layout(weight_dtype))
    if expert_dtype in UNCONVERTED:  # the routed experts stay at bf16 (stored_bytes: a kept scope's name)
        return Quantization(method=method, **_layout(weight_dtype), modules_not_converted=["experts"])
    groups = [WeightScheme(name=name, targets=[target], **_scheme(d))
              for name, d, target in (("experts", expert_dtype, "RoutedExperts"), ("linear", weight_dtype, "Linear"))]
    return Quantization(method=method, **_layout(weight_dtype), groups=groups)


def _scheme(dtype: str) -> dict:
    return {k: v for k, v in _layout(dtype).items() if k != "scale_bytes_per_weight"}


def planned_quantization(model: Model, weight_dtype: str, expert_dtype: str) -> Quantization | None:
    """The layout the planner stores `model` in at these dtypes (module docstring), None: every parameter at them."""
    q = model.quantization
    if q is None:
        return whatif_quantization(model, weight_dtype, expert_dtype)
    weight, expert = dominant_dtypes(model)
    return q if (weight_dtype, expert_dtype) == (weight, expert or weight) else None


def _with(model: Model, q: Quantization) -> Model:
    return model if model.quantization is q else model.model_copy(update={"quantization": q})


def head_dtype(model: Model, weight_dtype: str, expert_dtype: str) -> str:
    """The dtype the embedding gather and the LM head are read at: bf16 under a layout (the head at its group's
    dtype where a config_group names it), else the weight dtype."""
    q = planned_quantization(model, weight_dtype, expert_dtype)
    if q is None:
        return weight_dtype
    layout = _head_layout(_with(model, q))
    return "bf16" if layout is None else layout.weight_dtype


def _head_layout(model: Model):
    q = model.quantization
    if not q.groups or model.tie_word_embeddings:
        return None
    return scheme_for(Matrix("lm_head", model.vocab_size, model.hidden_size), model)


@dataclass(frozen=True)
class StoredParts:
    """Bytes of a model stored under a layout, by where the planner places them: the embedding (first pipeline
    stage), the LM head and the final norm (last stage), the layers' norms at bf16 (whole on every GPU), and what
    the layers' other parameters store beyond the workload dtypes' count (scales, zero points, kept modules at
    bf16; spread over the stages, split over tp), the routed experts' share of it apart (split over ep too)."""

    embedding: int
    head: int
    final_norm: int
    layers_extra: Fraction
    experts_extra: Fraction  # the routed experts' part of layers_extra
    # the whole layout's bytes less the workload dtypes' count of every parameter (the plan's JSON reports it)
    added: Fraction


_PARTS = LRU(64)  # a big MoE's matrices take milliseconds to count; a sweep asks again per workload


def stored_parts(model: Model, weight_dtype: str, expert_dtype: str) -> StoredParts | None:
    """The parts of `model` (Model.stored already applied) under planned_quantization; None without a layout.
    Kept per content (specs are frozen: their JSON names them exactly)."""
    if model.quantization is None and whatif_quantization(model, weight_dtype, expert_dtype) is None:
        return None
    return _PARTS.get_or((model.model_dump_json(), weight_dtype, expert_dtype),
                         lambda: _stored_parts(model, weight_dtype, expert_dtype))


def _stored_parts(model: Model, weight_dtype: str, expert_dtype: str) -> StoredParts | None:
    q = planned_quantization(model, weight_dtype, expert_dtype)
    if q is None:
        return None
    stored_model = _with(model, q)
    pc, d = parameter_count(model), model.hidden_size
    final = NORM_PARAMS_PER_CHANNEL[model.norm] * d * model.final_norm
    embedding, head = MODEL_DTYPE_BYTES * pc.embedding, MODEL_DTYPE_BYTES * pc.lm_head
    if (layout := _head_layout(stored_model)) is not None:  # a config_group converts the head
        codes, scales = matrix_bytes(Matrix("lm_head", model.vocab_size, d), layout)
        head += codes + scales - MODEL_DTYPE_BYTES * model.vocab_size * d
    # what weights_per_gpu places itself: the embedding, the head and every norm (bf16, replicated over tp)
    placed = embedding + head + MODEL_DTYPE_BYTES * pc.norms
    placed_at_dtype = dtype_size(weight_dtype) * (pc.embedding + pc.lm_head + pc.norms)
    extra = stored_bytes(stored_model).decoder - placed - (planned_bytes(model, weight_dtype, expert_dtype)
                                                           - placed_at_dtype)
    if model.quantization is None and not any(".linear_attn." in m.name for m in decoder_matrices(stored_model)):
        # the what-if: recurrent mixers no matrix names stay at the chosen width (module docstring)
        extra -= model.state_layers() * linear_params_per_layer(model) * (MODEL_DTYPE_BYTES - dtype_size(weight_dtype))
    experts = [(m, layout) for m, layout in stored_matrices(stored_model) if m.expert]
    experts_extra = sum(sum(matrix_bytes(m, layout)) if layout else MODEL_DTYPE_BYTES * m.out_features
                        * m.in_features * m.copies for m, layout in experts) - dtype_size(expert_dtype) * sum(
                            m.out_features * m.in_features * m.copies for m, _ in experts)
    return StoredParts(embedding=embedding, head=head, final_norm=MODEL_DTYPE_BYTES * final, layers_extra=extra,
                       experts_extra=experts_extra, added=extra + placed - placed_at_dtype)


def what_if_note(model: Model, weight_dtype: str, expert_dtype: str) -> dict | None:
    """The what-if's note (the plan's JSON `quantization`): which scheme each side is planned as, what stays at
    bf16; None when the dtypes are not a what-if of `model`."""
    if whatif_quantization(model, weight_dtype, expert_dtype) is None:
        return None
    sides = [f"--weight-dtype {weight_dtype} as {WHATIF_SCHEMES[weight_dtype]}"] if weight_dtype in WHATIF_SCHEMES \
        else [f"the non-expert matrices unconverted at {weight_dtype}"]
    if expert_dtype != weight_dtype and model.moe is not None:
        sides.append(f"the routed experts as {WHATIF_SCHEMES[expert_dtype]}" if expert_dtype in WHATIF_SCHEMES
                     else f"the routed experts unconverted at {expert_dtype}")
    return {"what_if": f"{model.name} has no quantization_config: planned as an engine stores it, "
                       f"{'; '.join(sides)}; the embedding, the LM head, norms, routers and biases at bf16, "
                       "as vLLM's online quantization and the checkpoint formats keep them (roofline.planned_weights)",
            "weight_dtype": weight_dtype, "expert_weight_dtype": expert_dtype,
            "quantization_config": {d: WHATIF_CONFIGS[d] for d in (weight_dtype, expert_dtype) if d in WHATIF_CONFIGS}}


def checkpoint_notes(model: Model, weight_dtype: str, expert_dtype: str,
                     quantization: dict | None) -> dict[str, dict]:
    """The plan's JSON fields for how the weights are stored beyond the dtypes: `quantization` (the stored-width note
    of stored_bytes.stored_widths, or for a what-if what_if_note's) completed with the stored bytes by part and the KV
    dtype read, and `encoders` (the towers counted into the weights); empty for a plain model at its dtypes."""
    out: dict[str, dict] = {}
    q = model.quantization
    if q is not None and quantization is None:  # the user named the dtypes: say what the checkpoint is all the same
        quantization = {"read": f"quantization_config: {q.method}", "weight_dtype": q.weight_dtype,
                        "experts_only": q.experts_only, "kv_cache_dtype": q.kv_cache_dtype,
                        "planned_at": "the dtypes given on the command line"}
    quantization = quantization or what_if_note(model, weight_dtype, expert_dtype)
    if quantization is not None:
        layout = planned_quantization(model, weight_dtype, expert_dtype) or q
        parts, applied = stored_bytes(_with(model, layout)), stored_parts(model.stored(), weight_dtype, expert_dtype)
        quantization = {**quantization, "stored_bytes": {
            "codes": parts.codes, "scales_and_zero_points": parts.scales, "kept_at_bf16": parts.kept,
            "decoder_total": parts.decoder, "added_to_the_dtype_estimate": int(applied.added) if applied else 0}}
        quantization["note"] = ("weights are planned at the stored bytes (roofline.stored_bytes: codes, scales, zero "
                                "points, modules kept at bf16) when the dtypes are the checkpoint's stored ones or a "
                                "what-if, else at the dtypes given (added_to_the_dtype_estimate 0); the decode-time "
                                "model reads the converted matrices at their dtype, the embedding and the LM head at "
                                "theirs, and leaves the scales out")
        if q is not None and q.kv_cache_dtype is not None:
            key = "kv_cache_scheme" if q.method == "compressed-tensors" else "kv_cache_quant_algo"
            quantization["kv_cache"] = KV_NOTE.format(key=key, dtype=q.kv_cache_dtype)
        out["quantization"] = quantization
    if model.encoders:
        note = ("vision / audio towers the engine loads beside the decoder, added to the weights memory of the first "
                "pipeline stage (split over tp); not in the decode step's weight reads")
        missing = uncounted_towers(model)
        if missing:
            note += f"; {missing}"
        out["encoders"] = {"towers": [e.model_dump(mode="json") for e in model.encoders],
                           "bytes": encoder_bytes(model), "note": note, "uncounted": missing}
    return out
