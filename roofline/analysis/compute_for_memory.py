"""Closed-form limits of the compute-for-memory methods (the cost-model side: roofline/costmodel/remat_balance.py).

Rematerialization limit (XQuant §3.4, Eq. 3-4): per layer and decode step, remat does F·l FLOPs
(F per cached token) while the step moves B·C·l bytes of cache plus W bytes of layer weights (overlapped
with the remat, as the paper assumes). Remat stays memory-bound while its intensity is under the ridge R:

    B F l / (B C l + W) <= R   =>   l* = R W / (B (F - R C))     (infinite when F <= R C)

The paper's batch-1 analysis (Eq. 3 MHA, Eq. 4 GQA) uses R = 756 TFLOP/s / 2 TB/s = 378, d = 4096, e = 2,
C = e/8·d (MHA) or e/8·d/g (GQA, one latent as printed), W = 2·12·d^2 or 2·13·d^2 + 2·2·(d/g)^2 bytes,
F = 4 d^2 or 4 (d/g)^2: 2.3K for Llama-2-7B and 40.6K for Llama-3.1-8B. The catalogue form takes F, C and
W from the op graph of XQuant at `bits` on the model (quantization metadata and SVD factors included,
every weight of the layer) and R from the hardware's dense peak of the compute dtype.
"""

from __future__ import annotations

from typing import Any

from roofline.costmodel import remat_balance as costmodel_limits
from roofline.lazy import sp
from roofline.methods.aquakv import AquaKV, predictor_flops_per_token, reference_predictor_flops
from roofline.methods.baseline import Baseline
from roofline.methods.xquant import XQuant
from roofline.specs import Hardware, Model

PAPER_RIDGE = (756, 2)  # XQuant §3.4: "756 TFLOPs / 2 TB/s = 378" (H100 PCIe figures); a sympy Rational where used
PAPER_D = 4096


def remat_limit_paper(model: Model, bits: float = 2) -> dict[str, Any]:
    """Eq. 3 (MHA) or Eq. 4 (GQA) exactly as printed, with the paper's constants; d and g from the model's
    attention type, d = 4096 as the paper."""
    d, e, ridge = sp.Integer(PAPER_D), sp.nsimplify(bits), sp.Rational(*PAPER_RIDGE)
    g = model.gqa_group
    if g == 1:
        flops, cache, weights, eq = 4 * d**2, e / 8 * d, 2 * 12 * d**2, "Eq. 3"
    else:
        dg = d / g
        flops, cache, weights, eq = 4 * dg**2, e / 8 * dg, 2 * 13 * d**2 + 2 * 2 * dg**2, "Eq. 4"
    limit = costmodel_limits.solve_balance(flops, cache, weights, ridge, 1)
    return {"model": model.name, "mode": "paper", "equation": eq, "bits": float(e), "batch": 1,
            "ridge_flops_per_byte": float(ridge), "remat_flops_per_token": int(flops),
            "cache_bytes_per_token": float(cache), "weight_bytes_per_layer": int(weights),
            "limit_tokens": float(limit), "assumptions": "P = 756 TFLOP/s / 2 TB/s = 378, d = 4096, batch 1, "
            "weights overlapped, numerator = remat FLOPs only, no quantization metadata"}


def remat_limit(model: Model, hardware: Hardware, bits: float = 2, batch: int = 1,
                compute_dtype: str = "bf16") -> dict[str, Any]:
    """XQuant at `bits` on the model: l* = R W / (B (F - R C)) (costmodel.limits.remat_limit), and whether
    the model caches SVD latents (GQA) or X (MHA)."""
    config = XQuant(bits=bits)
    result = costmodel_limits.remat_limit(model, hardware, config, batch, compute_dtype)
    return {**result, "svd": config.uses_svd(model)}


def model_flops_per_token(model: Model) -> sp.Expr:
    """FLOPs (matrix + vector) of one bf16 decode step, batch 1, as a function of the context L."""
    return costmodel_limits.model_flops_per_token(model, Baseline())


def predictor_overhead_ratio(model: Model, config: AquaKV, context: int) -> float:
    """Base-model FLOPs per token at `context` over predictor FLOPs per token (§3.2's "at least 500x").

    Llama-3.1-70B (linear): base(L) = 139,023,695,872 + 2,647,040 L FLOPs over 6 x 1024^2 x 79 =
    497,025,024, so 279.7x at L = 1 (the notes' 284x also counts the 1.05 G embedding parameters, which
    cost no FLOPs). The claim holds from L = 41,348 tokens (`context_for_overhead_ratio`; Qwen2.5-72B:
    287.6x, 39,870), or at any context if a predictor MAC is counted as 1 FLOP (~560x). Per new token
    only: the reference decode also reruns the predictors over all l_q cached tokens every step.
    """
    from roofline.units import L
    return float(model_flops_per_token(model).subs(L, context)) / predictor_flops_per_token(model, config)


def context_for_overhead_ratio(model: Model, config: AquaKV, target: float = 500, limit: int = 1 << 30) -> int:
    """Smallest context at which `predictor_overhead_ratio` reaches `target` (bisection; the base cost
    never falls as the context grows)."""
    from roofline.units import L
    need = target * predictor_flops_per_token(model, config)
    base = model_flops_per_token(model)

    def reaches(context: int) -> bool:
        return base.subs(L, context) >= need

    if not reaches(limit):
        raise ValueError(f"target: the ratio stays below {target} up to {limit} tokens on {model.name}")
    lo, hi = 0, limit  # reaches(hi) holds; reaches(lo) does not (or lo = 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi


def reference_step_ratio(model: Model, config: AquaKV, context: int) -> float:
    """Predictor FLOPs of a reference decode step over the model's own FLOPs of that step (batch 1): the cost
    the "500x less per token" (§3.2) leaves out. Llama-3.1-70B: 134x at 131,072 tokens."""
    from roofline.units import L
    return reference_predictor_flops(model, config, context) / float(model_flops_per_token(model).subs(L, context))
