"""vLLM 0.24.0's profile run: the "torch peak memory increase" and the CUDA-graph estimate its worker subtracts
from the KV budget, term by term from the source (the wheel of vllm 0.24.0; paths below are inside it).

determine_available_memory (v1/worker/gpu_worker.py:400-511) wraps model_runner.profile_run() in memory_profiling
(utils/mem_utils.py:229-306: reset_peak_memory_stats, then torch_peak_increase = allocated_bytes.all.peak during the
run - allocated at its start), reads the peak before any CUDA-graph profiling (gpu_worker.py:440-458) and subtracts
requested - (weights + torch peak + non-torch) - the CUDA-graph estimate when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
(default 1, envs.py:1894) is on (gpu_worker.py:467-493).

profile_run is a forward of max_num_batched_tokens tokens spread over min(tokens, max_num_seqs) dummy requests, then
a sampler run over one logits row per request (V1 runner: v1/worker/gpu_model_runner.py:6239-6322, _dummy_run and
_dummy_sampler_run:6045; V2 runner: v1/worker/gpu/model_runner.py:509-682). Which runner: V2 for the architectures
of DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (config/vllm.py:68-77, use_v2_model_runner:522-548), V1 otherwise.

The peak is the largest of three moments (every tensor in bytes on one rank, T tokens, B = min(T, max_num_seqs)
rows, d hidden, V the whole vocabulary - under tp every rank all-gathers the logits and samples,
model_executor/layers/logits_processor.py:75-87 with platforms/interface.py:963-967 use_all_gather True - act = 2 B):
- a layer's attention projections, T x (3 d + qkv) x act, or its dense MLP, T x (3 d + 3 I) x act (the planner's
  generic activation_width: the allocator history of a compiled Llama-3.1-8B chunk, planner/memory.py), plus the
  MoE workspace once an earlier MoE layer has allocated it;
- an MoE layer: the fused-MoE modular kernel's workspace (fused_moe/modular_kernel.py:1235-1246 _fused_experts
  calls _allocate_buffers with M_chunk = M_full: no chunking; :1093-1100 one common buffer for workspace13 and the
  output, max(M k max(N/2, K), M K), and workspace2 M k max(N, K), experts/triton_moe.py:181-196 workspace_shapes,
  N = 2 I_expert, K = d, each rounded up to 256 B, v1/worker/workspace.py:92-117) - a WorkspaceManager buffer that
  is never freed, so it stays live to the end of the profile run - plus the residual stream and the shared
  expert's MLP, T x (3 d + 3 I_shared) x act;
- the sampler, after the forward: the persistent MoE workspace, the forward's hidden states (T x d x act, held by
  profile_run) and B rows of it (the sampled positions; V1 also a torch.rand_like copy, gpu_model_runner.py:6058),
  the logits (B x V x act, compute_logits) and
  V1: their fp32 copy (v1/sample/sampler.py:96), the second, seeded sampler call (gpu_model_runner.py:6086-6105)
      through forward_native (v1/sample/ops/topk_topp_sampler.py:123-145): softmax probs fp32 and the exponential
      noise q fp32 (random_sample:446-468), and the Triton top-k/top-p kernel's cached per-program buffer,
      min(B, SMs) x V fp32 (v1/sample/ops/topk_topp_triton.py:906-916);
  V2: one fp32 copy (v1/worker/gpu/sample/sampler.py:157); the dummy batch has no top-k / top-p (the note at
      v1/worker/gpu/model_runner.py:640-642) and gumbel_sample writes no vocabulary-wide tensor.

CUDA-graph estimate (V1 runner only: the V2 runner's profile_cudagraph_memory returns 0, v1/worker/gpu/
model_runner.py:684-686): per capture mode, the first capture's measured growth plus max(second capture's growth,
1 MiB) x (graphs - 1), the modes' first captures overlaid (max) (gpu_model_runner.py:6447-6592). Its terms, measured
alone by validate/engines/profile_mem.py (runs 16 / 16b: the model runner's per-mode DEBUG split on narrow and 2-layer
models, validate/results/engines/nvidia-h200-vllm-2026-11-29-run16b/ and the run-16 transcript in
h200-profile-mem-run16b-predicted.json):
- FULL first capture, FlashAttention-3 (Hopper): the split-KV accumulators FA3 allocates inside the largest FULL
  capture (T = the largest capture size <= max_num_seqs) once vLLM caps its splits for CUDA graphs: out_accum fp32
  [32 splits (config/attention.py:30), q heads / tp, T, head_size] and lse_accum fp32 [32, q heads / tp, T] in one
  2 MiB allocator block (v1/attention/backends/flash_attn.py:382-391, 448-458): 256 + 2 MiB for 32 heads of 128 at
  T = 512 (measured 256-258 on three models), 194 for Phi-3's 32 x 96, 226 for Qwen2.5-7B's 28 x 128, 18 for 4 x 64;
- PIECEWISE first capture: 40-44 MiB on narrow models, 94-136 MiB at full widths, not derived; below the FULL first
  on every full-width model measured, so the rule takes 40 MiB (the narrow floor) as the PIECEWISE first;
- per graph (the second capture's growth, the driver's graph memory in 2 MiB pages): PIECEWISE 0.125 MiB and FULL
  1/24 MiB a layer, each at least 1 MiB (the narrow 48-layer Qwen3-MoE's 6 and 2 MiB; 28-32 layers measured 4 and 1,
  2-14 layers 1 and 1).
Elsewhere (no FA3: other GPUs, MLA backends) the FULL first capture is not measured: the rule keeps the PIECEWISE
floor alone, a lower bound.

Persistent beside the three moments: PyTorch's cuBLAS workspace, allocated through the caching allocator at the
profile run's first GEMM (aten/src/ATen/cuda/CublasHandlePool.cpp, one per handle and stream), 32 MiB (cuBLAS's
recommended cublasSetWorkspace size on Hopper): the first profile run's peak exceeds the second's by the modelled
persistent buffers plus 33-35 MB on every V1 case of runs 16 / 16b; the rule adds 32 MiB on every GPU (pre-Hopper
GPUs not measured).

The non-torch increase (CUDA's own allocations during the profile run, outside torch: kernels' modules, NCCL's
buffers at tp > 1) is the engine's measurement, not derived: 249,561,088 B at tp 1 (the narrow tiny-llama-32's
worker figure, run 16b; 0.22-0.24 GiB logged on every tp 1 model of runs 3-16b) and 0.54 GiB at tp 2 (tiny-llama-32
at tp 2, run 14; 0.54 on the 8B and 70B too); tp 4 and 8 not measured: tp 2's figure is used.

Not derived: MLA's "weights memory" above the checkpoint (0.21 GiB on DeepSeek-V2-Lite): W_UK / W_UV are views of
kv_b_proj in the unquantized path (model_executor/layers/attention/mla_attention.py:879-962), so the source read does
not explain it.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.costmodel.blocks import Shard
from roofline.specs import Model

# config/vllm.py:68-77 DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (vllm 0.24.0)
V2_RUNNER_ARCHITECTURES = frozenset({"Qwen3ForCausalLM", "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM",
                                     "GraniteMoeForCausalLM", "LlamaForCausalLM", "MistralForCausalLM"})
WORKSPACE_ALIGN_BYTES = 256  # v1/worker/workspace.py:104 round_up(actual, 256)
GRAPH_FLOOR_BYTES = 1 << 20  # gpu_model_runner.py:6531-6534 max(second capture, 1 << 20)
CAPTURE_MODES = 2  # FULL_AND_PIECEWISE: the log's "PIECEWISE=51 (largest=512), FULL=51 (largest=512)"
MIB = 1 << 20
FA3_SPLITS = 32  # config/attention.py:30 flash_attn_max_num_splits_for_cuda_graph
ALLOCATOR_BLOCK_BYTES = 2 * MIB  # lse_accum's block (runs 16 / 16b: out_accum + 2 MiB)
PIECEWISE_FIRST_BYTES = 40 * MIB  # run 16b, tiny-llama-32 (V1): the narrow floor of the PIECEWISE first capture
PIECEWISE_PER_LAYER_BYTES = 6 * MIB / 48  # run 16, the narrow 48-layer Qwen3-MoE's per-graph PIECEWISE growth
FULL_PER_LAYER_BYTES = 2 * MIB / 48  # the same case's per-graph FULL growth
CUBLAS_WORKSPACE_BYTES = 32 * MIB  # PyTorch's cuBLAS workspace (module docstring)
NON_TORCH_TP1_BYTES = 249_561_088  # run 16b, tiny-llama-32's worker.non_torch_memory at tp 1
NON_TORCH_TP2_BYTES = round(0.54 * (1 << 30))  # run 14, tiny-llama-32 at tp 2: "non-torch forward increase 0.54GiB"


@dataclass(frozen=True)
class ProfilePeak:
    """The profile run's torch peak increase on one rank and its parts, in bytes."""

    runner: str  # 'v1' or 'v2'
    dense_forward_bytes: float
    moe_forward_bytes: float
    moe_workspace_bytes: float
    sampler_bytes: float
    triton_buffer_bytes: float  # the V1 sampler's cached Triton top-k/top-p buffer (persistent), 0 for V2
    transient_bytes: float  # the peak increase of a second profile run, the persistent buffers already allocated
    cudagraph_bytes: float  # the CUDA-graph estimate (V1 runner; cudagraph_estimate_bytes), 0 for V2
    cudagraph_measured: bool = False  # whether its FULL first capture is FA3's (measured), else a lower bound
    cublas_workspace_bytes: float = CUBLAS_WORKSPACE_BYTES
    non_torch_bytes: float = NON_TORCH_TP1_BYTES  # the engine's non-torch increase at this tp (module docstring)
    tp: int = 1

    @property
    def peak_bytes(self) -> float:
        """torch peak memory increase: the largest of the three moments, plus the cuBLAS workspace allocated before
        any of them (the profile run's first GEMM)."""
        return max(self.dense_forward_bytes, self.moe_forward_bytes, self.sampler_bytes) + self.cublas_workspace_bytes

    def rule(self) -> str:
        """One line for `capacity`'s rules: the runner, each moment, the CUDA-graph estimate and non-torch in GiB."""
        g = float(1 << 30)
        graphs = "" if self.cudagraph_measured else ">= "
        return (f"vllm: profile-run peak {self.peak_bytes / g:.2f} GiB ({self.runner} runner; attention / dense MLP "
                f"{self.dense_forward_bytes / g:.2f}, MoE forward {self.moe_forward_bytes / g:.2f} incl. workspace "
                f"{self.moe_workspace_bytes / g:.2f}, sampler {self.sampler_bytes / g:.2f}, cuBLAS workspace "
                f"{self.cublas_workspace_bytes / g:.2f}); CUDA-graph estimate {graphs}{self.cudagraph_bytes / g:.2f} "
                f"GiB; non-torch increase {self.non_torch_bytes / g:.2f} GiB"
                f"{' (tp 2 measured; tp > 2 not)' if self.tp > 2 else ''} (vllm_profile.py)")


def runner(model: Model) -> str:
    """'v2' when vLLM 0.24.0 runs the model on Model Runner V2 by default, else 'v1' (config/vllm.py:522-561;
    hybrids with mamba_cache_mode 'align' fall back to V1, :2000-2005, which the V2 list's models are not)."""
    return "v2" if model.architecture in V2_RUNNER_ARCHITECTURES else "v1"


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def moe_workspace_bytes(model: Model, tokens: int, tp: int, act_bytes: int) -> int:
    """The fused-MoE modular kernel's WorkspaceManager buffer at M = `tokens` (module docstring): workspace13
    shared with the output, max(M k max(N/2, K), M K), plus workspace2 M k max(N, K), N = 2 I_expert / tp, K = d."""
    if model.moe is None:
        return 0
    k, d = model.moe.experts_per_token, model.hidden_size
    n = 2 * Shard.of(model, tp).expert_intermediate
    w13 = max(tokens * k * max(n // 2, d), tokens * d) * act_bytes
    w2 = tokens * k * max(n, d) * act_bytes
    return _round_up(w13, WORKSPACE_ALIGN_BYTES) + _round_up(w2, WORKSPACE_ALIGN_BYTES)


def _forward_moments(model: Model, shard: Shard, tokens: int, tp: int, act_bytes: int,
                     workspace: int) -> tuple[float, float]:
    """(attention-or-dense-MLP peak, MoE-layer peak) over the layers in order: a layer's attention projections
    hold T x (3 d + qkv / tp), a dense MLP T x (3 d + 3 I), an MoE MLP the workspace + T x (3 d + 3 I_shared); from
    the first MoE layer on the workspace stays allocated under every later layer."""
    d = model.hidden_size
    qkv = max(2 * model.at_layer(a).q_dim + 2 * model.at_layer(a).kv_dim for a in model.attention) / tp
    attention, dense, moe, held = 3 * d + qkv, 3 * d + 3 * shard.intermediate, 0.0, 0
    other = 0.0
    for layer in range(model.num_layers):
        other = max(other, held + tokens * attention * act_bytes)
        if model.moe is not None and model.moe.is_moe_layer(layer):
            moe = max(moe, workspace + tokens * (3 * d + 3 * shard.shared_intermediate) * act_bytes)
            held = workspace
        else:
            other = max(other, held + tokens * dense * act_bytes)
    return other, moe


def cudagraph_floor_bytes(model: Model, capture_sizes: int, kind: str | None = None) -> int:
    """The CUDA-graph estimate's source-derived floor: (graphs - 1) x 1 MiB per capture mode, V1 runner only
    (`kind`: the runner, None for vLLM's default choice)."""
    if (kind or runner(model)) == "v2" or capture_sizes == 0:
        return 0
    return CAPTURE_MODES * (capture_sizes - 1) * GRAPH_FLOOR_BYTES


def fa3_full_first_bytes(model: Model, tokens: int, tp: int) -> int:
    """FA3's split-KV accumulators in the largest FULL capture of `tokens` (module docstring): out_accum fp32
    [32, q heads / tp, tokens, head_size] + one 2 MiB block for lse_accum."""
    heads = max(1, model.num_heads // tp)
    return FA3_SPLITS * heads * tokens * model.head_dim * 4 + ALLOCATOR_BLOCK_BYTES


def cudagraph_estimate_bytes(model: Model, sizes: tuple[int, ...], max_num_seqs: int, tp: int = 1,
                             fa3: bool = False, kind: str | None = None) -> tuple[int, bool]:
    """vLLM's CUDA-graph estimate (V1 runner; 0 for V2) for PIECEWISE capture `sizes` and FULL sizes <= max_num_seqs:
    max(PIECEWISE first, FULL first) + (graphs - 1) x per-graph growth per mode (module docstring), and whether
    the FULL first capture is the measured FA3 law (`fa3`: FlashAttention-3 on Hopper, a non-MLA model) or left out
    (a lower bound)."""
    if (kind or runner(model)) == "v2" or not sizes:
        return 0, True
    full = [s for s in sizes if s <= max_num_seqs]
    measured = fa3 and model.mla is None
    first = max(PIECEWISE_FIRST_BYTES, fa3_full_first_bytes(model, max(full), tp) if measured and full else 0)
    layers = model.num_layers
    per_pw = max(GRAPH_FLOOR_BYTES, layers * PIECEWISE_PER_LAYER_BYTES)
    per_full = max(GRAPH_FLOOR_BYTES, layers * FULL_PER_LAYER_BYTES)
    return int(first + (len(sizes) - 1) * per_pw + max(len(full) - 1, 0) * per_full), measured


def non_torch_bytes(tp: int) -> int:
    """vLLM's non-torch increase during the profile run at `tp` (module docstring): tp 1's, else tp 2's."""
    return NON_TORCH_TP1_BYTES if tp == 1 else NON_TORCH_TP2_BYTES


def profile_peak(model: Model, tokens: int, max_num_seqs: int, tp: int = 1, sm_count: int | None = None,
                 capture_sizes: int = 0, act_bytes: int = 2, kind: str | None = None,
                 sizes: tuple[int, ...] | None = None, fa3: bool = False) -> ProfilePeak:
    """vLLM 0.24.0's profile-run torch peak increase on one rank for `tokens` = max_num_batched_tokens and
    `max_num_seqs` (the module docstring's three moments); `sm_count` sizes the V1 Triton sampler buffer (None:
    B programs), `capture_sizes` the number of captured sizes per mode (the CUDA-graph floor) or `sizes` the sizes
    themselves (the CUDA-graph estimate, cudagraph_estimate_bytes; `fa3` when the GPU runs FlashAttention-3);
    `kind` the runner ('v1' / 'v2', as VLLM_USE_V2_MODEL_RUNNER forces it), None for vLLM's default choice."""
    shard, d = Shard.of(model, tp), model.hidden_size
    rows, vocab, kind = min(tokens, max_num_seqs), model.vocab_size, kind or runner(model)
    workspace = moe_workspace_bytes(model, tokens, tp, act_bytes)
    other, moe = _forward_moments(model, shard, tokens, tp, act_bytes, workspace)
    hidden = tokens * d * act_bytes + rows * d * act_bytes * (2 if kind == "v1" else 1)
    triton = 0
    if kind == "v1":
        triton = (min(rows, sm_count) if sm_count else rows) * vocab * 4
        logits = rows * vocab * (act_bytes + 4 + 4 + 4) + triton
    else:
        logits = rows * vocab * (act_bytes + 4)
    # a second run finds the workspace and the Triton buffer allocated: its increase is the rest
    transient = max(_forward_moments(model, shard, tokens, tp, act_bytes, 0)[0], moe - workspace,
                    hidden + logits - triton)
    if sizes is not None:
        graphs, measured = cudagraph_estimate_bytes(model, sizes, max_num_seqs, tp, fa3, kind)
    else:
        graphs, measured = cudagraph_floor_bytes(model, capture_sizes, kind), False
    return ProfilePeak(runner=kind, dense_forward_bytes=other, moe_forward_bytes=moe, moe_workspace_bytes=workspace,
                       sampler_bytes=workspace + hidden + logits, triton_buffer_bytes=triton,
                       transient_bytes=transient, cudagraph_bytes=graphs, cudagraph_measured=measured or kind == "v2",
                       non_torch_bytes=non_torch_bytes(tp), tp=tp)


def engine_peak(model: Model, hardware, tp: int, chunk: int, max_num_seqs: int | None = None) -> ProfilePeak:
    """vLLM's profile-run peak (profile_peak) at `chunk` tokens on this GPU: its SM count sizes the sampler's Triton
    buffer, the default capture sizes (scheduling.vllm_capture_sizes) and its architecture (FA3 on Hopper) the
    CUDA-graph estimate, max_num_seqs the
    engine's offline default for the GPU when not given (capacity, plan and simulate share it)."""
    from roofline.engines.scheduling import scheduling, vllm_capture_sizes

    seqs = min(max_num_seqs or scheduling("vllm", hardware, entry="offline", tp=tp).max_num_seqs, chunk)
    return profile_peak(model, chunk, seqs, tp=tp, sm_count=hardware.sm_count,
                        sizes=vllm_capture_sizes(seqs, chunk), fa3=hardware.architecture == "hopper")
