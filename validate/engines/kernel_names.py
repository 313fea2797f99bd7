"""What each CUDA kernel of a vLLM step is, from its name: the rules attribute.py maps a profile (prof.py) with.

A rule is a regular expression on the kernel's name, the kind of work it is, the planner ops (roofline's op graph,
costmodel.blocks names) that kind is compared with in preference order (the first one the graph has), and where the
kernel comes from. Rules are tried in order; the first that matches wins, so the specific ones come first (a
compiled kernel named after both the embedding and a norm is the embedding's). Sources (vLLM 0.24.0, the version
the runs used: /work/vllm-src, vllm/_version.py commit ee0da84ab; its FlashAttention fork is
github.com/vllm-project/flash-attention, hopper/):

- FlashAttention-3: `FlashAttnFwdSm90` (hopper/flash_fwd_kernel_sm90.h, the main kernel, split over KV chunks in
  decode), `FlashAttnFwdCombine` (hopper/flash_fwd_combine_kernel.h, merges the splits), and
  `prepare_varlen_num_blocks` (hopper/flash_prepare_scheduler.cu, the varlen scheduler's metadata); the older
  `flash_fwd*` names are FlashAttention-2's (csrc/flash_attn/src/flash_fwd_kernel.h).
- The KV write: `reshape_and_cache_flash_kernel` (vllm csrc/cache_kernels.cu), called by the FLASH_ATTN backend's
  do_kv_cache_update (vllm/v1/attention/backends/flash_attn.py).
- GEMMs: cuBLAS(Lt)'s Hopper kernels `nvjet_sm90_*` (tile MxN_KxStages in the name) and `sm90_xmma_gemm_*`,
  CUTLASS `cutlass*gemm*` / `Gemm*`, and cuBLASLt's `splitKreduce_kernel`, the second kernel of a split-K GEMM
  (its time belongs to the splitK GEMMs of the same step: attribute.split_k_share).
- Compiled pieces: vLLM compiles each decoder layer with torch.compile (Inductor) between attention calls
  (vllm/compilation/backends.py, piecewise); Inductor names a kernel `triton_{poi,red,per}_fused_<ops>_<n>` after
  the ops it fused (torch/_inductor/codegen/triton.py, descriptive names). vLLM's RMSNorm with a residual is the
  custom op `fused_add_rms_norm` (vllm/model_executor/layers/layernorm.py), SiluAndMul is `mul_silu_slice` once
  compiled (vllm/model_executor/layers/activation.py forward_native: silu(x[..., :d]) * x[..., d:]).
  A compiled kernel with no op in its name is inferred from where it sits in the layer: the only pointwise work
  left between the QKV GEMM and attention is the rotary embedding (RotaryEmbedding.forward_native, index_select,
  slices, mul, cat: vllm/model_executor/layers/rotary_embedding/base.py), and the only reduction left there is the
  Q/K RMSNorm of models that have one (Qwen3: vllm/model_executor/models/qwen3_moe.py Qwen3MoeAttention.forward).
  Those two rules are marked `inferred`.
- Fused MoE (vllm/model_executor/layers/fused_moe/fused_moe.py fused_experts_impl): `moe_align_block_size_kernel`
  and `count_and_sort_expert_tokens_kernel` (csrc/moe/moe_align_sum_kernels.cu), the Triton `fused_moe_kernel`
  twice (w13, w2), `act_and_mul_kernel` (csrc/activation_kernels.cu, silu_and_mul), and ops.moe_sum, which for
  top-k above 4 is at::sum_out (csrc/moe/moe_align_sum_kernels.cu moe_sum): torch's bf16 `reduce_kernel` with
  `sum_functor`. The router's top-k: `topkGatingSoftmax` / `topk_softmax` (csrc/moe/topk_softmax_kernels.cu), or
  under vLLM's routing simulator (VLLM_MOE_ROUTING_SIMULATION_STRATEGY, the MoE runs 3 and 4 set it) torch.randint
  (`random_from_to_kernel`: fused_moe/router/routing_simulator_router.py _sample_expert_ids).
- The sampler (vllm/v1/sample/: temperature division, softmax, the Gumbel-max `_gumbel_sample_kernel`, argmax)
  and the V2 model runner's Triton input kernels (`_gather_block_tables_kernel`, `_compute_slot_mapping(s)_kernel`,
  `_prepare_pos_seq_lens_kernel`, `_post_update_kernel`, `_combine_sampled_and_draft_tokens_kernel`,
  `_get_num_sampled_and_rejected_kernel`, `_apply_write_kernel`, `_prepare_prefill_inputs_kernel`: vllm/v1/worker/
  gpu/) have no op in the planner's graph. The sampler's kernels, with the logits' fp32 cast (a bf16 -> float
  `direct_copy_kernel`), map to the pseudo-row `sampler` that attribute.py adds where the engine's profile has a
  sampler law on the device (roofline.engines.timing mechanism 9, measured by micro4); the input kernels stay
  without an op.
- Copies, fills, index and gather kernels of torch (aten/src/ATen/native/cuda/) and the driver's memcpy / memset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """A kernel-name pattern, the kind of work it names, the planner ops it compares with (first present wins; none:
    no op in the graph), and whether the kind is inferred from the kernel's place rather than read from its name."""

    pattern: str
    kind: str
    ops: tuple[str, ...]
    inferred: bool = False

    def matches(self, name: str) -> bool:
        """Whether `name` matches the rule's pattern (re.search)."""
        return re.search(self.pattern, name) is not None


GEMM_OPS = ("gemm",)  # stands for every op of the graph attribute.gemm_ops lists (weights x activations)
RULES: tuple[Rule, ...] = (
    Rule(r"FlashAttnFwdCombine", "attention_combine", ("attention_reduce", "attention")),
    Rule(r"FlashAttnFwdSm\d+|flash_fwd|prepare_varlen_num_blocks", "attention", ("attention",)),
    Rule(r"reshape_and_cache", "kv_write", ("kv_update",)),
    Rule(r"splitKreduce", "gemm_splitk_reduce", GEMM_OPS),
    Rule(r"^nvjet_|sm90_xmma_gemm|cutlass.*[Gg]emm|^ampere_.*gemm|cublasLt::.*[Gg]emm", "gemm", GEMM_OPS),
    Rule(r"fused_moe_kernel|moe_align_block_size|count_and_sort_expert_tokens", "moe_experts", ("experts",)),
    Rule(r"ReduceOp<c10::BFloat16.*sum_functor", "moe_sum", ("experts",)),
    Rule(r"topkGatingSoftmax|topk_softmax|random_from_to", "moe_topk", ("routing",)),
    Rule(r"embedding", "embedding", ("embedding",)),
    Rule(r"rms_norm|layer_norm|layernorm", "norm", ("norm",)),
    Rule(r"silu|gelu|act_and_mul", "activation", ("mlp_act", "experts")),
    Rule(r"rotary", "rope", ("rope",)),
    Rule(r"^triton_poi_fused_\d+$", "rope", ("rope",), inferred=True),
    Rule(r"^triton_(red|per)_fused_\d+$", "qk_norm", ("qk_norm",), inferred=True),
    Rule(r"_gumbel_sample|ArgMaxOps|SoftMaxForward|DivFunctor|uniform_and_transform", "sampler", ("sampler",)),
    # the sampler's fp32 cast of the logits (sampler.py v0.24.0: logits.to(torch.float32)), a bf16 -> float copy:
    # micro4's sampler law times it with the rest (engines.timing mechanism 9)
    Rule(r"direct_copy_kernel_cuda.*\{lambda\(float\)#1\}.*LoadWithCast", "sampler", ("sampler",)),
    Rule(r"^_(gather_block_tables|compute_slot_mappings?|prepare_pos_seq_lens|post_update|combine_sampled_and_draft"
         r"_tokens|get_num_sampled_and_rejected|apply_write|prepare_prefill_inputs)_kernel", "engine_inputs", ()),
    Rule(r"^Memcpy|^Memset|^memcpy\d|direct_copy_kernel|FillFunctor|index_elementwise|gather_kernel|scatter_gather|"
         r"arange|CUDAFunctor_add|CUDAFunctorOnSelf_add", "copies", ()),
)
# the planner ops a norm kernel stands for: vLLM's fused_add_rms_norm adds the residual in the same kernel
NORM_OPS = ("attn_norm", "mlp_norm", "final_norm", "attn_residual", "mlp_residual", "input_norm", "post_norm")


def classify(name: str) -> Rule | None:
    """The first rule whose pattern `name` matches (None: unmapped)."""
    return next((r for r in RULES if r.matches(name)), None)
