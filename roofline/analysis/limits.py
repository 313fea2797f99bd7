"""Closed-form limits of the compute-for-memory methods.

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

import sympy as sp

from roofline.costmodel import Roofline, build_graph
from roofline.methods import build_cache
from roofline.methods.xquant import XQuant
from roofline.specs import Hardware, Model
from roofline.units import B, L

PAPER_RIDGE = sp.Rational(756, 2)  # XQuant §3.4: "756 TFLOPs / 2 TB/s = 378" (H100 PCIe figures)
PAPER_D = 4096


def _solve(flops_per_token, cache_bytes_per_token, weight_bytes, ridge, batch) -> sp.Expr:
    """The l solving B F l / (B C l + W) = R; oo when remat never crosses the ridge."""
    l = sp.Symbol("l", positive=True)
    if flops_per_token <= ridge * cache_bytes_per_token:
        return sp.oo
    balance = sp.Eq(batch * flops_per_token * l, ridge * (batch * cache_bytes_per_token * l + weight_bytes))
    (root,) = sp.solve(balance, l)
    return sp.nsimplify(root)


def remat_limit_paper(model: Model, bits: float = 2) -> dict[str, Any]:
    """Eq. 3 (MHA) or Eq. 4 (GQA) exactly as printed, with the paper's constants; d and g from the model's
    attention type, d = 4096 as the paper."""
    d, e = sp.Integer(PAPER_D), sp.nsimplify(bits)
    g = model.gqa_group
    if g == 1:
        flops, cache, weights, eq = 4 * d**2, e / 8 * d, 2 * 12 * d**2, "Eq. 3"
    else:
        dg = d / g
        flops, cache, weights, eq = 4 * dg**2, e / 8 * dg, 2 * 13 * d**2 + 2 * 2 * dg**2, "Eq. 4"
    limit = _solve(flops, cache, weights, PAPER_RIDGE, 1)
    return {"model": model.name, "mode": "paper", "equation": eq, "bits": float(e), "batch": 1,
            "ridge_flops_per_byte": float(PAPER_RIDGE), "remat_flops_per_token": int(flops),
            "cache_bytes_per_token": float(cache), "weight_bytes_per_layer": int(weights),
            "limit_tokens": float(limit), "assumptions": "P = 756 TFLOP/s / 2 TB/s = 378, d = 4096, batch 1, "
            "weights overlapped, numerator = remat FLOPs only, no quantization metadata"}


def per_token_slope(expr) -> sp.Expr:
    """d expr / d L for large L, exactly: the expressions are affine in L once L passes every window and
    sink, and L = 2^40, 2^41 are multiples of every group and window size (so Mod terms vanish)."""
    lo, hi = sp.Integer(2) ** 40, sp.Integer(2) ** 41
    expr = sp.sympify(expr)
    return sp.nsimplify((expr.subs(L, hi) - expr.subs(L, lo)) / (hi - lo))


def layer_terms(model: Model, bits: float, tp: int = 1, weight_dtype: str = "bf16") -> dict[str, sp.Expr]:
    """F (remat FLOPs per cached token), C (cache bytes read per token) and W (weight bytes) of one
    full-attention layer of XQuant at `bits`, from the op graph."""
    config = XQuant(bits=bits)
    cache = build_cache(config, model)
    layer = next((lay for lay in cache.layers if lay.attention.kind == "full"), cache.layers[0])
    remat = next(op for op in layer.decode_ops if op.name == "remat")
    per_token = per_token_slope
    graph = build_graph(model, cache, "decode", tp=tp, weight_dtype=weight_dtype)
    per_layer_ops = [op for op in graph.ops if op.group not in ("model",)]
    # the remat op (fused into attention or not) already carries its weights (W_k, W_v or Σ B^T)
    weights = sp.Add(*(op.count * op.traffic.get("weights", 0) for op in per_layer_ops)) / model.num_layers
    return {"flops": per_token(remat.matmul_flops), "cache": per_token(layer.read_bytes),
            "weights": sp.nsimplify(weights.subs(B, 1))}


def remat_limit(model: Model, hardware: Hardware, bits: float = 2, batch: int = 1,
                compute_dtype: str = "bf16") -> dict[str, Any]:
    """The catalogue form: l* = R W / (B (F - R C)) with F, C, W from the graph and R from the hardware."""
    terms = layer_terms(model, bits)
    ridge = sp.nsimplify(Roofline(hardware).ridge_point(compute_dtype), rational=True)
    limit = _solve(terms["flops"], terms["cache"], terms["weights"], ridge, batch)
    general = sp.Symbol("R") * sp.Symbol("W") / (B * (sp.Symbol("F") - sp.Symbol("R") * sp.Symbol("C")))
    return {"model": model.name, "hardware": hardware.name, "mode": "catalogue", "bits": bits, "batch": batch,
            "compute_dtype": compute_dtype, "ridge_flops_per_byte": float(ridge),
            "remat_flops_per_token": float(terms["flops"]), "cache_bytes_per_token": float(terms["cache"]),
            "weight_bytes_per_layer": float(terms["weights"]),
            "limit_tokens": float(limit) if limit != sp.oo else float("inf"),
            "formula": f"l* = {general}", "svd": XQuant(bits=bits).uses_svd(model)}
