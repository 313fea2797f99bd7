"""The bytes a checkpoint occupies on the GPU as a serving engine's loader stores it, exactly.

A quantized checkpoint (Model.quantization, read by catalogue.hf_quant) converts the decoder's linear matrices
and keeps everything else at the model dtype. Per converted matrix of `out x in` weights the loader allocates
(vLLM vllm/model_executor/layers/quantization/, the create_weights of each method):

- the codes: out x in x bits / 8 bytes (int4 packed eight to an int32, fp4 two to a uint8, fp8 / int8 one byte);
- scales: one of `scale_bytes` per scale_rows x scale_group block, ceil-divided on both sides (fp8 blocks:
  fp8.py weight_scale_inv float32 [ceil(out/128), ceil(in/128)]; AWQ awq.py scales [in/g, out] in the model's
  fp16/bf16; MXFP4 mxfp4.py one e8m0 byte per 32; NVFP4 modelopt.py one fp8 byte per 16), one per output row for
  a channel scheme (scale_group 0) and one per matrix for a tensor scheme (-1);
- zero points where the scheme is asymmetric: zero_point_bits per scale (AWQ qzeros / GPTQ qzeros, int32-packed
  [in/g, out/8]);
- fixed extras per matrix (NVFP4's fp32 weight_scale_2 and input_scale; compressed-tensors' int64 weight_shape)
  and per input channel (GPTQ's int32 g_idx, gptq.py).

Which matrices are converted: the attention projections, the dense and expert MLPs and the shared experts (the
LinearBase / FusedMoE layers a quantization config claims), unless a modules_to_not_convert / ignore /
exclude_modules pattern names the module or one of its parents (transformers' should_convert_module: a plain name
matches the module or a parent, `*` a glob, `re:` a regular expression as compressed-tensors writes it); only the
experts for an expert-only checkpoint (vLLM's Mxfp4Config quantizes FusedMoE alone). Never converted, kept at the
model dtype (2 bytes, bf16): embeddings and the LM head (not LinearBase in vLLM; the head only where a
compressed-tensors config_group names it, roofline.weight_schemes), norms, biases, sinks, routers (ReplicatedLinear
with quant_config=None in vLLM's MoE models) and the mixers of linear-attention layers other than Qwen3-Next's and
Qwen3.5's Gated DeltaNet (whose projections are matrices here: _gated_deltanet). Vision / audio towers
(Model.encoders) are added whole, at their own dtype.

For gpt-oss-20b this gives 13,761,264,768 bytes, the total_size of its published model.safetensors.index.json.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from roofline.accounting import dtype_size, parameter_count, routed_expert_params
from roofline.specs import Model
from roofline.specs.model import StoredLayout
from roofline.weight_schemes import expert_scheme, scheme_of

MODEL_DTYPE_BYTES = 2  # bf16: the dtype every catalogue model and transformers config here is loaded in
DTYPE_BITS = {"fp8": 8, "int8": 8, "int4": 4, "mxfp4": 4, "nvfp4": 4}


@dataclass(frozen=True)
class Matrix:
    """One linear weight of the decoder under its transformers module name, `copies` times (the experts)."""

    name: str
    out_features: int
    in_features: int
    copies: int = 1
    expert: bool = False


def _attention(model: Model, prefix: str, indexer: bool = True) -> list[Matrix]:
    d = model.hidden_size
    if model.mla is not None:
        m, h = model.mla, model.num_heads
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = [Matrix(f"{prefix}.q_proj", h * qk, d)] if m.q_lora_rank is None else [
            Matrix(f"{prefix}.q_a_proj", m.q_lora_rank, d), Matrix(f"{prefix}.q_b_proj", h * qk, m.q_lora_rank)]
        if m.q_gate:  # A.X-K2's fused query-and-gate projection from [norm(c_q), c_q]
            q[-1] = Matrix(f"{prefix}.q_gate_proj", h * (qk + m.v_head_dim), 2 * m.q_lora_rank)
        out = q + [Matrix(f"{prefix}.kv_a_proj_with_mqa", m.kv_lora_rank + m.qk_rope_head_dim, d),
                   Matrix(f"{prefix}.kv_b_proj", h * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank),
                   Matrix(f"{prefix}.o_proj", d, h * m.v_head_dim)]
        if model.attn_output_gate:
            out.append(Matrix(f"{prefix}.gate_proj", h * m.v_head_dim, d))
        dsa = model.sparse_attention
        if dsa is not None and indexer:  # a layer reusing another's top-k has no indexer (indexer_layers)
            q_in = m.q_lora_rank or d
            out += [Matrix(f"{prefix}.indexer.wq_b", dsa.index_heads * dsa.index_head_dim, q_in),
                    Matrix(f"{prefix}.indexer.wk", dsa.index_head_dim, d),
                    Matrix(f"{prefix}.indexer.weights_proj", dsa.index_heads, d)]
        return out
    q_out = model.q_dim * (2 if model.attn_output_gate else 1)
    return [Matrix(f"{prefix}.q_proj", q_out, d), Matrix(f"{prefix}.k_proj", model.kv_dim, d),
            Matrix(f"{prefix}.v_proj", model.kv_dim, d), Matrix(f"{prefix}.o_proj", d, model.q_dim)]


def _mlp(model: Model, prefix: str, width: int, copies: int = 1, expert: bool = False) -> list[Matrix]:
    if model.mlp == "none":
        return []
    d = model.hidden_size
    gate = [Matrix(f"{prefix}.gate_proj", width, d, copies, expert)] if model.mlp == "gated" else []
    return gate + [Matrix(f"{prefix}.up_proj", width, d, copies, expert),
                   Matrix(f"{prefix}.down_proj", d, width, copies, expert)]


def _gated_deltanet(model: Model, prefix: str) -> list[Matrix]:
    """A Gated DeltaNet layer's linear matrices under the checkpoint's names (accounting.linear_params_per_layer's
    shapes): Qwen3-Next's fused in_proj_qkvz / in_proj_ba, Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
    (vLLM fuses them back: weight_schemes); out_proj. Other Gated DeltaNet families' names are not known here:
    none (their mixers stay at the model dtype)."""
    la, d = model.linear_attention, model.hidden_size
    inner, heads = la.value_heads * la.value_head_dim, la.value_heads
    out = [Matrix(f"{prefix}.out_proj", d, inner)]
    if "Qwen3Next" in model.architecture:
        return [Matrix(f"{prefix}.in_proj_qkvz", la.conv_channels + inner, d),
                Matrix(f"{prefix}.in_proj_ba", 2 * heads, d)] + out
    if "Qwen3_5" in model.architecture:
        return [Matrix(f"{prefix}.in_proj_qkv", la.conv_channels, d), Matrix(f"{prefix}.in_proj_z", inner, d),
                Matrix(f"{prefix}.in_proj_b", heads, d), Matrix(f"{prefix}.in_proj_a", heads, d)] + out
    return []


def decoder_matrices(model: Model) -> list[Matrix]:
    """Every linear weight matrix of the decoder layers a quantization config can convert (names as transformers'
    Llama / DeepSeek / Qwen-MoE modules: model.layers.{i}.self_attn.q_proj, .mlp.experts.gate_proj, ...)."""
    model = model.stored()  # layers reusing others' weights (Model.reused_layers) hold no matrices
    kinds = model.attention
    out: list[Matrix] = []
    for i in range(model.num_layers):
        layer = f"model.layers.{i}"
        kind = kinds[i % len(kinds)]
        if kind.kind == "linear" and model.linear_attention.kind == "gated_deltanet":
            out += _gated_deltanet(model, f"{layer}.linear_attn")
        if kind.kind not in ("linear", "none"):
            matrices = _attention(model.at_layer(kind), f"{layer}.self_attn", model.runs_indexer(i))
            if i >= model.num_layers - model.kv_shared_layers:  # no k_proj / v_proj (Model.kv_shared_layers)
                matrices = [m for m in matrices if not m.name.endswith(("k_proj", "v_proj"))]
            out += matrices
        moe, mlp = model.moe, model.layer_mlp(i)  # mlp_layers' 'none' blocks (Nemotron-H's mamba) have no MLP
        if mlp == "moe" and moe is not None:
            out += _mlp(model, f"{layer}.mlp.experts", moe.expert_intermediate_size, moe.num_experts, expert=True)
            if moe.num_shared_experts:  # Qwen-MoE's one gated shared_expert, DeepSeek's shared_experts
                shared = "shared_expert" if moe.shared_expert_intermediate_size is not None else "shared_experts"
                out += _mlp(model, f"{layer}.mlp.{shared}", moe.shared_width)
        elif mlp == "dense":
            out += _mlp(model, f"{layer}.mlp", model.intermediate_size)
    return out


def _matches(name: str, pattern: str) -> bool:
    """A kept-module pattern against a module name or any of its parents (see the module docstring)."""
    parts = name.split(".")
    scopes = [".".join(parts[:k]) for k in range(1, len(parts) + 1)]
    if pattern.startswith("re:"):
        return any(re.fullmatch(pattern[3:], s) for s in scopes)
    if "*" in pattern or "?" in pattern:
        return any(fnmatch.fnmatchcase(s, pattern) for s in scopes)
    return any(s == pattern or s.endswith("." + pattern) for s in scopes)


def _ignored(matrix: Matrix, q) -> bool:
    names = [matrix.name]
    if matrix.expert:  # vLLM matches the experts under the first expert's names (weight_schemes)
        scope, proj = matrix.name.rsplit(".", 1)
        names.append(f"{scope}.0.{proj}")
    return any(_matches(n, p) for n in names for p in q.modules_not_converted)


def scheme_for(matrix: Matrix, model: Model):
    """The layout this matrix is stored in (Model.quantization, or the config_group that claims it:
    roofline.weight_schemes), or None when it stays at the model dtype."""
    q = model.quantization
    if q is None or _ignored(matrix, q):
        return None
    if q.groups:
        if matrix.expert:
            scope = matrix.name.rsplit(".", 1)[0]
            projections = ("gate_proj", "up_proj", "down_proj") if model.mlp == "gated" else ("up_proj", "down_proj")
            return expert_scheme(scope, projections, q.groups)
        return scheme_of(matrix.name, q.groups)
    if q.experts_only and not matrix.expert:
        return None
    return q


def converted(matrix: Matrix, model: Model) -> bool:
    """The quantization config converts this matrix (its scheme's targets, less the kept modules)."""
    return scheme_for(matrix, model) is not None


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def matrix_bytes(matrix: Matrix, q: StoredLayout) -> tuple[int, int]:
    """(code bytes, scale + zero-point + fixed bytes) of one matrix stored in layout `q`, all copies."""
    o, i = matrix.out_features, matrix.in_features
    codes = _ceil(o * i * DTYPE_BITS[q.weight_dtype], 8)
    if q.scale_group == -1:
        scales = 1 if q.scale_bytes else 0
    elif q.scale_group == 0:
        scales = o
    else:
        scales = _ceil(o, q.scale_rows) * _ceil(i, q.scale_group)
    extra = scales * q.scale_bytes + _ceil(scales * q.zero_point_bits, 8) + q.matrix_extra_bytes \
        + i * q.input_index_bytes
    return codes * matrix.copies, extra * matrix.copies


def stored_matrices(model: Model) -> list[tuple[Matrix, StoredLayout | None]]:
    """Every matrix a quantization config can claim with the layout it is stored in (None: the model dtype): the
    decoder's, and the untied LM head when a config_group names it."""
    matrices = decoder_matrices(model)
    q = model.quantization
    if q is not None and q.groups and not model.tie_word_embeddings:
        matrices.append(Matrix("lm_head", model.vocab_size, model.hidden_size))
    return [(m, scheme_for(m, model)) for m in matrices]


@dataclass(frozen=True)
class StoredBytes:
    """A checkpoint's bytes on the GPU by part: converted codes, their scales, everything kept at the model dtype,
    the encoders (vision / audio towers)."""

    codes: int
    scales: int
    kept: int
    encoders: int

    @property
    def decoder(self) -> int:
        """The text decoder alone: what a model.safetensors.index.json of a text-only checkpoint totals."""
        return self.codes + self.scales + self.kept

    @property
    def total(self) -> int:
        """Everything the engine loads: the decoder and its encoders."""
        return self.decoder + self.encoders


def encoder_bytes(model: Model) -> int:
    """Bytes of the vision / audio towers as loaded (parameters x their dtype)."""
    return sum(e.parameters * e.dtype_bytes for e in model.encoders)


def stored_bytes(model: Model) -> StoredBytes:
    """The checkpoint's bytes as the loader stores them (module docstring); an unquantized model is all kept."""
    total_params = parameter_count(model).total
    codes = scales = converted_params = 0
    if model.quantization is not None:
        for m, layout in stored_matrices(model):
            if layout is not None:
                c, s = matrix_bytes(m, layout)
                codes, scales = codes + c, scales + s
                converted_params += m.out_features * m.in_features * m.copies
    kept = (total_params - converted_params) * MODEL_DTYPE_BYTES
    return StoredBytes(codes=codes, scales=scales, kept=kept, encoders=encoder_bytes(model))


def dominant_dtypes(model: Model) -> tuple[str, str | None]:
    """(weight dtype, routed-expert dtype or None) the planner stores the checkpoint at: Quantization.weight_dtype
    for every matrix, or bf16 with the experts at it when only they are converted (gpt-oss); with several schemes
    (Quantization.groups) the dtype holding most of the non-expert matrices' weights (bf16 for those no group
    claims) and, where it differs, the one holding most of the routed experts'. What the other matrices store
    beyond or below that width, planned_weights.stored_parts adds; the decode step reads them at it."""
    q = model.quantization
    if q is None:
        return "bf16", None
    if not q.groups:
        return ("bf16", q.weight_dtype) if q.experts_only else (q.weight_dtype, None)
    weights: dict[bool, dict[str, int]] = {False: {}, True: {}}
    for m, layout in stored_matrices(model):
        dtype = "bf16" if layout is None else layout.weight_dtype
        share = weights[m.expert]
        share[dtype] = share.get(dtype, 0) + m.out_features * m.in_features * m.copies
    weight = max(weights[False], key=weights[False].get, default="bf16")
    expert = max(weights[True], key=weights[True].get, default=weight)
    return weight, (expert if expert != weight else None)


def mixed_reads(model: Model) -> str | None:
    """For a checkpoint of several schemes, what the decode step reads at a width other than the matrix's own (the
    cost model reads every non-expert matrix at one dtype and the routed experts at another: dominant_dtypes), as
    one clause; None when every matrix is read at its own width."""
    q = model.quantization
    if q is None or not q.groups:
        return None
    weight, expert = dominant_dtypes(model)
    total = off = 0
    other: dict[str, int] = {}
    for m, layout in stored_matrices(model):
        n = m.out_features * m.in_features * m.copies
        dtype, read = ("bf16" if layout is None else layout.weight_dtype), (expert or weight) if m.expert else weight
        total += n
        if dtype != read:
            off += n
            other[dtype] = other.get(dtype, 0) + n
    if not off:
        return None
    kinds = ", ".join(f"{d} {n / total:.0%}" for d, n in sorted(other.items(), key=lambda kv: -kv[1]))
    read = f"every non-expert matrix at {weight}" + (f" and the routed experts at {expert}" if expert else "")
    return (f"the checkpoint stores {len(q.groups)} weight schemes: memory counts each matrix at its own width, but "
            f"the decode step reads {read}, so {off / total:.0%} of the linear weights are read at another width "
            f"than stored ({kinds})")


def stored_widths(model, workload) -> tuple[Any, dict[str, Any] | None]:
    """(workload, note): a quantized model's weights at their stored width when the workload keeps the bf16
    default (weight_dtype bf16, no expert dtype): the converted matrices at dominant_dtypes' widths; the planner then
    adds the scales, the unconverted modules' full width and, for a checkpoint of several schemes, the matrices
    stored at another width (planned_weights.stored_parts). The note (for the plan's JSON) says what was read and
    applied; (workload, None) for an unquantized model or a user-chosen dtype."""
    q = model.quantization
    if q is None or workload.weight_dtype != "bf16" or workload.expert_weight_dtype is not None:
        return workload, None
    weight, expert = dominant_dtypes(model)
    change = {"weight_dtype": weight} | ({"expert_weight_dtype": expert} if expert else {})
    note = {"read": f"quantization_config: {q.method}", **change,
            "scale_bytes_per_weight": q.scale_bytes_per_weight, "modules_not_converted": q.modules_not_converted,
            "kv_cache_dtype": q.kv_cache_dtype}
    if q.groups:
        note["groups"] = [f"{g.name}: {g.weight_dtype} <- {', '.join(g.targets)}" for g in q.groups]
        note["decode_reads"] = mixed_reads(model)
    return workload.model_copy(update=change), note


def planned_bytes(model: Model, weight_dtype: str, expert_dtype: str) -> Fraction:
    """What the planner's dtypes give on one GPU (tp = pp = ep = 1): the routed experts' matrices at
    `expert_dtype`, every other parameter at `weight_dtype` (planner.memory.weights_per_gpu)."""
    routed = routed_expert_params(model)
    return dtype_size(weight_dtype) * (parameter_count(model).total - routed) + dtype_size(expert_dtype) * routed


KV_NOTE = ("read from quantization_config ({key}); vLLM's --kv-cache-dtype auto stores this checkpoint's KV cache "
           "in {dtype} (vllm-project/vllm PR #30141: a compressed-tensors kv_cache_scheme sets cache_dtype; ModelOpt's "
           "kv_cache_quant_algo likewise): the plan's '{dtype}' method row is that cache, `roofline capacity "
           "--engine vllm` applies it, and an explicit --method / --kv-cache-dtype overrides it")


def uncounted_towers(model: Model) -> str | None:
    """The towers of a multimodal config left out of the weights (no parameter rule for their wrapper or type in
    roofline.catalogue.hf_vision), as one clause the text outputs print as a warning; None when every tower is
    counted (or the model has none). An engine loads them all the same: the weights memory is low by their size
    and the KV pool high by as much."""
    missing = [f"{e.modality} tower {e.kind}" for e in model.encoders if not e.counted]
    if not missing:
        return None
    return (f"{', '.join(missing)} NOT counted (no parameter rule in roofline.catalogue.hf_vision) -- the weights "
            "memory is low by its size (and the KV pool high by as much)")
