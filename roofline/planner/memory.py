"""The memory budget of one GPU (the fullest pipeline stage) and what a sequence needs.

usable   = capacity x utilization     (the workload's, else the engine's default: roofline.engines.default_utilization)
kv_pool  = usable - runtime reserve - weights (sharded) - method parameters (sharded)
           - activation workspace at the prefill peak
With an engine (Workload.engine), kv_pool follows that engine's budget rule instead (roofline.engines); with
Workload.kv_cache_memory_bytes (vLLM --kv-cache-memory-bytes) it is that figure, whatever the engine.
per sequence: the method's reserved KV bytes at the context, rounded up to whole pages of `page_tokens`
(vLLM block size 16), times this GPU's share of the KV heads and of the layers, plus any per-sequence
workspace (XQuant-CL's accumulator, AQUA-KV's reconstructed layer): one per sequence on every pipeline stage,
since it serves one layer (or carries across the stage's layers) at a time, so it is not split over stages.

Defaults and their sources (each overridable through the Workload):
- runtime reserve: 1 GiB (CUDA context ~0.3-0.5 GiB, cuBLAS workspaces, allocator slack, CUDA graphs; vLLM
  profiles this as "non-torch" memory) + 0.5 GiB of NCCL buffers when more than one GPU; an estimate. When the
  device's measured section has the CUDA context (cuda_context_bytes, total - free after CUDA init), that figure
  replaces the context's 0.5 GiB share of the estimate; the other 0.5 GiB (workspaces, module code loaded after
  init, graphs, allocator slack) stays an estimate.
- prefill chunk: the Workload's prefill_chunk_tokens (None: 8192, vLLM's default max_num_batched_tokens
  with chunked prefill).
- activation peak: chunk tokens x (residual, normed input, attention output, QKV and the gated MLP
  intermediate of this shard) at activation dtype, plus fp32 logits of the sequences finishing prefill.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.accounting import NORM_PARAMS_PER_CHANNEL, dtype_size, parameter_count, routed_expert_params
from roofline.costmodel.blocks import Shard, check_ep
from roofline.engines import BudgetParts, EngineOptions, default_utilization, kv_pool
from roofline.errors import SpecError
from roofline.gguf_quant import preset_of, weights_on_fullest_gpu
from roofline.lazy import sp
from roofline.methods import CacheModel
from roofline.planned_weights import stored_parts
from roofline.specs import Hardware, Model, Workload
from roofline.stored_bytes import MODEL_DTYPE_BYTES, encoder_bytes
from roofline.units import GIB, ceildiv, window_occupancy

RESERVE_SINGLE_BYTES = GIB
RESERVE_CONTEXT_BYTES = GIB // 2  # the CUDA context's share of RESERVE_SINGLE_BYTES when it is not measured
RESERVE_NCCL_BYTES = GIB // 2
DEFAULT_PREFILL_CHUNK = 8192


@dataclass(frozen=True)
class MemoryBudget:
    """Bytes on the fullest GPU; `kv_pool` is what is left for KV pages."""

    capacity: int
    usable: float
    reserve: int
    weights: float
    method_params: float
    activations: float
    # the KV budget by a serving engine's rule (roofline.engines.kv_pool); None: the planner's own
    engine_pool: float | None = None

    @property
    def kv_pool(self) -> float:
        """Bytes left for KV pages: usable - reserve - weights - method_params - activations, or the engine's
        own pool (engines.kv_pool) less the method's parameters."""
        if self.engine_pool is not None:
            return self.engine_pool - self.method_params
        return self.usable - self.reserve - self.weights - self.method_params - self.activations

    def as_dict(self) -> dict[str, float]:
        """Every field and `kv_pool`, in bytes, keyed '<name>_bytes' (JSON output)."""
        return {"capacity_bytes": self.capacity, "usable_bytes": self.usable, "reserve_bytes": self.reserve,
                "weights_bytes": self.weights, "method_params_bytes": self.method_params,
                "activations_bytes": self.activations, "kv_pool_bytes": self.kv_pool}


def weights_per_gpu(model: Model, workload: Workload) -> float:
    """Weight bytes on the fullest GPU: matrices split over tp, norms replicated; layers split over pp
    with the embedding on the first stage and the LM head on the last (the larger stage counts). The routed
    experts are stored at the workload's expert dtype and split over ep as well (E/ep whole experts per replica,
    each over tp: costmodel.blocks.check_ep); shared experts and the router stay at the weight dtype, whole on
    every replica. The encoders (vision / audio towers) sit on the first stage, split over tp. Under a quantization
    layout (planned_weights.planned_quantization: a checkpoint at its stored widths, or an unquantized model's
    what-if at a quantized dtype) the embedding, the LM head and the final norm are their stored bytes (bf16), and
    the layers add what the dtypes leave out (scales, zero points, modules kept at bf16:
    planned_weights.stored_parts), spread over the stages and split over tp (the routed experts' share over ep
    too). A GGUF preset
    (`gguf:Q4_K_M`) counts llama-quantize's per-tensor types exactly (gguf_quant.weights_on_fullest_gpu)."""
    check_ep(model, workload.ep)
    if (preset := preset_of(workload.weight_dtype)) is not None:  # llama-quantize's per-tensor types, exact
        return float(weights_on_fullest_gpu(model, preset, workload.pp, workload.tp))
    model = model.stored()  # layers reusing others' weights store none (Model.reused_layers)
    pc = parameter_count(model)
    wb, web = float(dtype_size(workload.weight_dtype)), float(dtype_size(workload.expert_dtype))
    tp, pp = workload.tp, workload.pp
    routed = routed_expert_params(model)
    per_layer = (wb * (pc.attention + pc.mlp_dense + pc.mlp_experts_total - routed + pc.router)
                 + web * routed / workload.ep) / model.num_layers
    norm_width = NORM_PARAMS_PER_CHANNEL[model.norm] * model.hidden_size
    norms_per_layer = model.norms_per_layer * norm_width
    layers = -(-model.num_layers // pp)
    parts = stored_parts(model, workload.weight_dtype, workload.expert_dtype)
    norm_bytes = wb if parts is None else MODEL_DTYPE_BYTES  # a layout keeps the norms at bf16
    body = layers * (per_layer / tp + norm_bytes * norms_per_layer) + encoder_bytes(model) / tp
    if parts is None:  # every parameter at the dtypes given
        embedding, head, final = wb * pc.embedding, wb * pc.lm_head, wb * norm_width
    else:
        embedding, head, final = parts.embedding, parts.head, parts.final_norm
        experts = float(parts.experts_extra)
        body += (float(parts.layers_extra) - experts + experts / workload.ep) / pp / tp
    if pp == 1:
        return body + (embedding + head) / tp + final
    return body + max(embedding, head + final) / tp


def activation_width(model: Model, tp: int) -> tuple[float, int]:
    """(live elements per prefill token, this shard's vocabulary) on one GPU at `tp`, for activation_peak: the
    larger of a layer's two stages' live tensors per token: attention, the residual stream (3 d: residual, layer
    input, normed input) + qkv + its output (2 q + 2 kv) / tp; MLP, the residual stream + gate/up (2 I) +
    SiLU x up (I) = 3 d + 3 I. Fixed for a model and tp (a planner computes it once)."""
    shard = Shard.of(model, tp)
    inter = shard.expert_intermediate * model.moe.experts_per_token if model.moe else shard.intermediate
    d = model.hidden_size
    qkv = max(2 * model.at_layer(a).q_dim + 2 * model.at_layer(a).kv_dim for a in model.attention)
    return max(3 * d + qkv / tp, 3 * d + 3 * inter), int(shard.vocab)


def activation_peak(model: Model, workload: Workload, width: tuple[float, int] | None = None) -> float:
    """Prefill activation workspace on one GPU: chunk x width x act bytes, plus the fp32 logits of `batch` last
    positions over this shard of the vocabulary (`width`: activation_width(model, tp), computed when None).
    (The allocator's history of a compiled Llama-3.1-8B prefill chunk of 8192 tokens holds exactly the MLP stage
    at its peak: gate/up 469.8 MB, SiLU x up 234.9 MB, 3 x 67.1 MB; validate/results/clients/experiments/
    nvidia-h100-memprofile-prefill8192.json.)"""
    chunk = min(workload.prefill_chunk_tokens or DEFAULT_PREFILL_CHUNK, workload.batch * workload.prompt)
    per_token, vocab = width or activation_width(model, workload.tp)
    return chunk * per_token * workload.activation_bytes + workload.batch * vocab * 4


def default_reserve(workload: Workload, hardware: Hardware | None = None) -> int:
    """Runtime reserve in bytes: the workload's `runtime_reserve_bytes` if set (all of it, context included), else
    1 GiB, plus 0.5 GiB for NCCL buffers when it spans more than one GPU; with `hardware` whose measured section has
    cuda_context_bytes, that measured context stands in for the context's 0.5 GiB share of the 1 GiB (counted once)."""
    if workload.runtime_reserve_bytes is not None:
        return workload.runtime_reserve_bytes
    single = RESERVE_SINGLE_BYTES
    context = hardware.measured.cuda_context_bytes if hardware is not None and hardware.measured else None
    if context is not None:
        single = RESERVE_SINGLE_BYTES - RESERVE_CONTEXT_BYTES + context
    return single + (RESERVE_NCCL_BYTES if workload.gpus > 1 else 0)


def context_bytes(workload: Workload, hardware: Hardware | None = None) -> int:
    """The CUDA context's share of default_reserve: the measured cuda_context_bytes, else RESERVE_CONTEXT_BYTES;
    0 when the workload sets its own reserve (then it is all the user's figure)."""
    if workload.runtime_reserve_bytes is not None:
        return 0
    context = hardware.measured.cuda_context_bytes if hardware is not None and hardware.measured else None
    return RESERVE_CONTEXT_BYTES if context is None else context


def memory_budget(model: Model, hardware: Hardware, workload: Workload, cache, weights: float | None = None,
                  width: tuple[float, int] | None = None) -> MemoryBudget:
    """The fullest GPU's budget for this workload and method (`cache`: a CacheModel, or anything with the
    method's `fixed_total` bytes, e.g. a compiled planner.capacity.CapacityKernel); `weights`: the weight bytes
    per GPU and `width` activation_width(model, tp), when already known for this model, tp, pp and dtypes."""
    fixed = cache.fixed_total / workload.tp / workload.pp
    weights = weights_per_gpu(model, workload) if weights is None else weights
    activations, reserve = activation_peak(model, workload, width), default_reserve(workload, hardware)
    # what CUDA reports when the catalogue has it (a program allocates from that), else the datasheet figure
    capacity = hardware.driver_memory_bytes or hardware.memory_bytes
    # the user's fraction, else the engine's own default (vLLM's release default, SGLang's rule by memory, ...)
    util = workload.gpu_memory_utilization or default_utilization(workload.engine, capacity, workload.tp,
                                                                  workload.pp)
    engine_pool, cudagraph = None, 0.0
    if workload.engine == "vllm":  # the engine's own profile run sizes its budget (engines.vllm_profile)
        from roofline.engines.scheduling import scheduling
        from roofline.engines.vllm_profile import engine_peak

        chunk = workload.prefill_chunk_tokens or scheduling("vllm", hardware, entry="api",
                                                            tp=workload.tp).max_num_batched_tokens
        peak = engine_peak(model, hardware, workload.tp, chunk)
        activations, cudagraph = peak.peak_bytes, peak.cudagraph_bytes
    non_torch, context = reserve, context_bytes(workload, hardware)
    if workload.engine == "vllm" and workload.runtime_reserve_bytes is None:  # the engine's measured non-torch
        non_torch, context = peak.non_torch_bytes, 0
        reserve = non_torch + cudagraph  # what vLLM sets beside weights and activations (the shown reserve)
    if workload.kv_cache_memory_bytes is not None:  # the user's pool (vLLM worker.determine_available_memory)
        engine_pool = float(workload.kv_cache_memory_bytes)
        if engine_pool + weights + activations > capacity:
            raise SpecError(f"--kv-cache-memory-bytes: {workload.kv_cache_memory_bytes:,} bytes of KV beside "
                            f"{(weights + activations) / 2**30:.1f} GiB of weights and activations exceed "
                            f"{hardware.name}'s {capacity / 2**30:.1f} GiB per GPU")
    elif workload.engine != "ideal":
        options = EngineOptions(tp=workload.tp, pp=workload.pp, gpu_memory_utilization=util)
        if workload.engine == "llamacpp":  # -c holds the batch's contexts in one unified cache, -np the batch
            from roofline.engines.llamacpp import compute_budget, refuse_ep

            refuse_ep(workload.ep)
            options = EngineOptions(tp=workload.tp, pp=workload.pp, max_model_len=workload.batch *
                                    workload.context_tokens, parallel=workload.batch)
            activations = compute_budget(model, options, options.model_len(model), activations)
        engine_pool = kv_pool(workload.engine, BudgetParts(capacity, weights, activations, non_torch, context,
                                                           cudagraph), options, model)
    return MemoryBudget(
        capacity=capacity,
        usable=capacity * util,
        reserve=reserve,
        weights=weights,
        method_params=fixed,
        activations=activations,
        engine_pool=engine_pool,
    )


def sequence_kv_expr(model: Model, workload: Workload, cache: CacheModel) -> sp.Expr:
    """KV bytes one sequence needs on the fullest GPU at context L: the method's peak reservation at L
    rounded up to whole pages, this GPU's share of KV heads (tp; of the recurrent heads for the recurrent
    layers' state) and layers (pp), plus its workspace (this GPU's share of KV heads; whole on every stage)."""
    from roofline.units import L

    shard = Shard.of(model, workload.tp)
    paged = ceildiv(L, workload.page_tokens) * workload.page_tokens
    state = cache.reserved_parts().get("state", sp.Integer(0))  # recurrent layers: their own head split
    per_seq = (cache.reserved_bytes - state).subs(L, paged) * shard.kv_fraction + state * shard.state_fraction
    stage_share = sp.Rational(-(-model.num_layers // workload.pp), model.num_layers)
    workspace = window_occupancy(cache.workspace_bytes, "peak").subs(L, paged) * shard.kv_fraction
    return per_seq * stage_share + workspace
