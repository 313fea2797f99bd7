"""Fusion levels: how many kernels each op of the graph launches, and the activation traffic they move.

    none     eager PyTorch: every aten op of the usual formulation (Hugging Face / gpt-fast) its own kernel
    typical  what vLLM and SGLang run: the residual add fused into the next RMSNorm (fused_add_rms_norm),
             RoPE one kernel, the cache write one kernel (reshape_and_cache), SiLU x up one kernel
    full     torch.compile (Inductor): as typical, and RoPE, the per-head q/k norm and the cache write in one
             kernel
Ops not named launch one kernel whatever the level (GEMMs, attention, embedding, all-reduce); a GEMM call counts
one kernel (its split-K reduce or grouped-GEMM setup kernel is inside the measured GEMM laws).

Eager kernel counts are the aten ops of the reference code (validate/clients/decoder.py; tests count them):
  RMSNorm   x.float(), pow(2), mean(-1), + eps, rsqrt, x * r, .type_as(x), * weight             8 kernels
            activation bytes per element: reads 2+4+4+4+4+2 = 20, writes 4+4+4+2+2 = 16: 36 = 9 x (2 + 2)
  RoPE      per tensor (q, k): -x2, cat, x cos, rot sin, add                                   2 x 5 kernels
            bytes per element: (1+1)/2 + (2+2) + (2+2) + (2+2) + (4+2) = 19 ~ 5 x (2 + 2)
  q/k norm  an RMSNorm on q and one on k                                                      2 x 8 kernels
  SiLU x up silu(gate), gate * up: reads 2 + 4, writes 2 + 2 per element = 10 = 10/6 x (4 + 2)    2 kernels
  KV write  one index_put for K and one for V                                                     2 kernels
  experts   (MoE) two grouped GEMM calls (torch._grouped_mm: each a prepare_grouped_gemm_data and a CUTLASS
            kernel, one call here as a split-K GEMM is one call: the grouped-GEMM law's alpha is per call)   2
  routing   (MoE, decoder.moe_mlp) the routed MLP's kernels besides the router GEMM and the grouped GEMMs: topk
            (gather + bitonic sort), fp32 cast, softmax, cast back, stable argsort (radix sort, arange, copies),
            floor-div, count fill/ones/scatter_add, cumsum, the token gather, SiLU, mul, gate gather and scale,
            zeros + index_add, device copies. Eager 23: the probe's census of one moe_mlp call is 29 kernels
            (validate/results/clients/nvidia-h100-probe13.json and nvidia-h200-probe13.json, part h3, moe_b1 ..
            moe_b64, `kernels`), less the router's 2 (nvjet + cublasLt splitKreduce) and 2 x 2 grouped GEMM
            kernels; the eager client agrees: Mixtral's eager layer launches (2073 - 1049) / 16 = 64 kernels
            against the dense Llama layer's (1306 - 1146) / 4 = 40, whose MLP is 5 of them, so 64 - 35 = 29.
            Inductor 18: the compiled client's Mixtral layer is (1113 - 569) / 16 = 34 kernels (nvidia-h200.json
            32 layers, nvidia-h100.json 16), the dense Llama layer (474 - 418) / 4 = 14 with a 4-kernel MLP
            (nvjet gate/up, triton silu-mul, split-K down + reduce: its top_kernels), so the routed MLP is 24 =
            router 2 + grouped 4 + routing 18 (sort, topk, scans, scatters and gathers stay their own kernels).
            vLLM's fused_moe path: topk_softmax, moe_align_block_size, silu_and_mul: 3 (+ 2 fused GEMMs)
A kernel moving its bytes costs `kernels` x the device's per-kernel time on top of its roofline time
(Roofline._op_times); an op fused into a neighbour (0 kernels) keeps its bytes and FLOPs. At level none the
ops other than GEMMs, attention and routing are marked `aten` (their kernels are eager aten kernels: the device's
aten_kernel_s, when measured, is their per-kernel time); routing kernels cost the measured routing_kernel_s at every
level (sort, topk and the scatters stay their own kernels under Inductor too).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from roofline.costmodel.ops import Op
from roofline.lazy import sp

LEVELS = ("none", "typical", "full")
NORMS = ("attn_norm", "mlp_norm", "final_norm", "q_a_norm", "kv_a_norm")
RESIDUALS = ("attn_residual", "mlp_residual")

EXPERT_CALLS = 2  # the routed experts' grouped GEMM calls (w13, w2) at every level: each pays the per-call latency
# op name -> (kernels, factor on its activation bytes) per level
_EAGER = {**{n: (8, Fraction(9)) for n in NORMS}, "qk_norm": (16, Fraction(9)), "rope": (10, Fraction(19, 4)),
          "mlp_act": (2, Fraction(10, 6)), "shared_expert_act": (2, Fraction(10, 6)), "kv_update": (2, Fraction(1)),
          "experts": (EXPERT_CALLS, Fraction(1)), "routing": (23, Fraction(1))}
_TYPICAL = {**{n: (0, Fraction(1)) for n in RESIDUALS}, "experts": (EXPERT_CALLS, Fraction(1)),
            "routing": (3, Fraction(1))}
# kv_update 1 under torch.compile: the compiled client's census (validate/results/clients/nvidia-h{100,200}.json,
# compiled decode top_kernels; validate/results/clients/experiments/*-profile-*.json) has per layer one Triton
# kernel writing K with RoPE (fused into 'rope') and one more writing V (triton_poi_..._index_put_..._2)
_FULL = {**_TYPICAL, "qk_norm": (0, Fraction(1)), "kv_update": (1, Fraction(1)), "routing": (18, Fraction(1))}
FUSION: dict[str, dict[str, tuple[int, Fraction]]] = {"none": _EAGER, "typical": _TYPICAL, "full": _FULL}


def check_level(level: str) -> str:
    """`level` if it is a fusion level (none, typical, full); ValueError naming `fusion` otherwise."""
    if level not in FUSION:
        raise ValueError(f"fusion: {level!r} is not one of {', '.join(LEVELS)}")
    return level


def apply_fusion(ops: list[Op], level: str, overrides: tuple[tuple[str, int], ...] = ()) -> list[Op]:
    """`ops` with the kernel counts (and, eagerly, the extra activation bytes) of fusion `level`; `overrides`
    (op name, kernels) replace the level's counts where an engine runs its own fused calls
    (roofline.engines.timing.EngineTiming.op_kernels_on)."""
    table = FUSION[check_level(level)]
    if overrides:
        table = {**table, **{name: (kernels, table.get(name, (1, Fraction(1)))[1]) for name, kernels in overrides}}
    out = []
    for op in ops:
        kernels, factor = table.get(op.name, (1, Fraction(1)))
        if factor != 1:
            scale = {k: v * sp.Rational(factor.numerator, factor.denominator) if k in ("act_read", "act_write") else v
                     for k, v in op.traffic.items()}
            op = replace(op, traffic=scale)
        aten = level == "none" and op.kind == "" and not op.is_comm
        # Inductor generates the elementwise and normalization kernels (the ops the eager table splits into aten
        # kernels); the embedding gather and the attention library's split-K reduce are not its kernels
        fused = level == "full" and op.kind == "" and op.name in _EAGER and kernels > 0 and not op.is_comm
        changed = (kernels, aten, fused) != (op.kernels, op.aten, op.fused)
        out.append(replace(op, kernels=kernels, aten=aten, fused=fused) if changed else op)
    return out
