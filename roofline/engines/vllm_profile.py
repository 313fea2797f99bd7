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
1 MiB) x (graphs - 1), the modes' first captures overlaid (max) (gpu_model_runner.py:6447-6592). The first capture's
growth is a driver measurement the source does not determine; this rule counts the 1 MiB-per-graph floor only, so it
is a lower bound (a pool estimate above the engine's by the first capture, ~0.55 GiB on Qwen3-30B-A3B; notes in
docs/engines.md).

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
    cudagraph_bytes: float  # the derivable floor of the CUDA-graph estimate (V1 runner), 0 for V2

    @property
    def peak_bytes(self) -> float:
        """torch peak memory increase: the largest of the three moments."""
        return max(self.dense_forward_bytes, self.moe_forward_bytes, self.sampler_bytes)

    def rule(self) -> str:
        """One line for `capacity`'s rules: the runner, each moment and the CUDA-graph floor in GiB."""
        g = float(1 << 30)
        return (f"vllm: profile-run peak {self.peak_bytes / g:.2f} GiB ({self.runner} runner; attention / dense MLP "
                f"{self.dense_forward_bytes / g:.2f}, MoE forward {self.moe_forward_bytes / g:.2f} incl. workspace "
                f"{self.moe_workspace_bytes / g:.2f}, sampler {self.sampler_bytes / g:.2f}); CUDA-graph estimate "
                f">= {self.cudagraph_bytes / g:.2f} GiB (vllm_profile.py)")


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
    """The CUDA-graph estimate's derivable part: (graphs - 1) x 1 MiB per capture mode, V1 runner only (`kind`:
    the runner, None for vLLM's default choice)."""
    if (kind or runner(model)) == "v2" or capture_sizes == 0:
        return 0
    return CAPTURE_MODES * (capture_sizes - 1) * GRAPH_FLOOR_BYTES


def profile_peak(model: Model, tokens: int, max_num_seqs: int, tp: int = 1, sm_count: int | None = None,
                 capture_sizes: int = 0, act_bytes: int = 2, kind: str | None = None) -> ProfilePeak:
    """vLLM 0.24.0's profile-run torch peak increase on one rank for `tokens` = max_num_batched_tokens and
    `max_num_seqs` (the module docstring's three moments); `sm_count` sizes the V1 Triton sampler buffer (None:
    B programs), `capture_sizes` the number of captured sizes per mode (the CUDA-graph floor); `kind` the runner
    ('v1' / 'v2', as VLLM_USE_V2_MODEL_RUNNER forces it), None for vLLM's default choice."""
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
    return ProfilePeak(runner=kind, dense_forward_bytes=other, moe_forward_bytes=moe, moe_workspace_bytes=workspace,
                       sampler_bytes=workspace + hidden + logits, triton_buffer_bytes=triton,
                       transient_bytes=transient,
                       cudagraph_bytes=cudagraph_floor_bytes(model, capture_sizes, kind))


def engine_peak(model: Model, hardware, tp: int, chunk: int, max_num_seqs: int | None = None) -> ProfilePeak:
    """vLLM's profile-run peak (profile_peak) at `chunk` tokens on this GPU: its SM count sizes the sampler's Triton
    buffer, the default capture sizes (scheduling.vllm_capture_sizes) the CUDA-graph floor, max_num_seqs the
    engine's offline default for the GPU when not given (capacity, plan and simulate share it)."""
    from roofline.engines.scheduling import scheduling, vllm_capture_sizes

    seqs = min(max_num_seqs or scheduling("vllm", hardware, entry="offline", tp=tp).max_num_seqs, chunk)
    return profile_peak(model, chunk, seqs, tp=tp, sm_count=hardware.sm_count,
                        capture_sizes=len(vllm_capture_sizes(seqs, chunk)))
