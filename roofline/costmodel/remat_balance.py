"""Cost-model quantities behind the closed-form limits: the remat balance of XQuant-like methods and the
model's own FLOPs per token (what AQUA-KV's predictor overhead is measured against).

Rematerialization limit (XQuant §3.4, Eq. 3-4): per layer and decode step, remat does F·l FLOPs
(F per cached token) while the step moves B·C·l bytes of cache plus W bytes of layer weights (overlapped
with the remat, as the paper assumes). Remat stays memory-bound while its intensity is under the ridge R:

    B F l / (B C l + W) <= R   =>   l* = R W / (B (F - R C))     (infinite when F <= R C)

F, C and W come from the op graph of the method's config on the model (quantization metadata and SVD factors
included, every weight of the layer) and R from the device's ridge for the compute dtype.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any

from roofline.costmodel.device import Roofline
from roofline.costmodel.graph import build_graph, method_cache
from roofline.lazy import sp
from roofline.methods import MethodConfig
from roofline.numbers import codegen
from roofline.specs import Hardware, Model


@lru_cache(maxsize=4096)
def solve_balance(flops_per_token, cache_bytes_per_token, weight_bytes, ridge, batch) -> sp.Expr:
    """The l solving B F l / (B C l + W) = R; oo when remat never crosses the ridge (exact, memoized)."""
    if flops_per_token <= ridge * cache_bytes_per_token:
        return sp.oo
    return sp.nsimplify(ridge * weight_bytes / (batch * (flops_per_token - ridge * cache_bytes_per_token)))


def per_token_slope(expr) -> sp.Expr:
    """d expr / d L for large L, exactly: the expressions are affine in L once L passes every window and
    sink, and L = 2^40, 2^41 are multiples of every group and window size (so Mod terms vanish)."""
    from roofline.units import L
    lo, hi = sp.Integer(2) ** 40, sp.Integer(2) ** 41
    expr = sp.sympify(expr)
    return sp.nsimplify((expr.subs(L, hi) - expr.subs(L, lo)) / (hi - lo))


def remat_terms(model: Model, config: MethodConfig, tp: int = 1, weight_dtype: str = "bf16") -> dict[str, Fraction]:
    """F (remat FLOPs per cached token), C (cache bytes read per token) and W (weight bytes) of one
    full-attention layer (else the first attending one) of a rematerializing method (its decode op named "remat"),
    from the op graph; exact rationals, kept by content (roofline.numbers.codegen, as 'p/q' texts) so a plan neither
    rebuilds the graph nor imports sympy."""
    def compute() -> dict[str, str]:
        from roofline.units import B

        cache = method_cache(config, model)
        # a full-attention layer, else the first that attends (RecurrentGemma: sliding layers after recurrent ones)
        attending = [lay for lay in cache.layers if lay.attention.attends] or list(cache.layers)
        layer = next((lay for lay in attending if lay.attention.kind == "full"), attending[0])
        remat = next(op for op in layer.decode_ops if op.name == "remat")
        graph = build_graph(model, config, "decode", tp=tp, weight_dtype=weight_dtype)
        per_layer_ops = [op for op in graph.ops if op.group not in ("model",)]
        # the remat op (fused into attention or not) already carries its weights (W_k, W_v or Σ B^T)
        weights = sp.Add(*(op.count * op.traffic.get("weights", 0) for op in per_layer_ops)) / model.num_layers
        return {"flops": str(per_token_slope(remat.matmul_flops)), "cache": str(per_token_slope(layer.read_bytes)),
                "weights": str(sp.nsimplify(weights.subs(B, 1)))}

    key = codegen.content_key("remat", model, config, tp, weight_dtype)
    return {k: Fraction(v) for k, v in codegen.cached_json(key, compute).items()}


GENERAL = "l* = R*W/(B*(-C*R + F))"  # the general form, as sympy prints it


def remat_limit(model: Model, hardware: Hardware, config: MethodConfig, batch: int = 1,
                compute_dtype: str = "bf16") -> dict[str, Any]:
    """The catalogue form: l* = R W / (B (F - R C)) with F, C, W from the graph and R from the hardware (the
    float ridge as its exact rational). Exact rationals of the standard library, not sympy: a plan on a new device
    reads the terms from the cache and imports no sympy."""
    terms = remat_terms(model, config)
    ridge = Fraction(Roofline(hardware).ridge_point(compute_dtype))
    f, c, w = terms["flops"], terms["cache"], terms["weights"]
    limit = ridge * w / (batch * (f - ridge * c)) if f > ridge * c else None
    return {"model": model.name, "hardware": hardware.name, "mode": "catalogue", "bits": config.bits, "batch": batch,
            "compute_dtype": compute_dtype, "ridge_flops_per_byte": float(ridge),
            "remat_flops_per_token": float(terms["flops"]), "cache_bytes_per_token": float(terms["cache"]),
            "weight_bytes_per_layer": float(terms["weights"]),
            "limit_tokens": float(limit) if limit is not None else float("inf"), "formula": GENERAL}


def model_flops_per_token(model: Model, baseline: MethodConfig) -> sp.Expr:
    """FLOPs (matrix + vector) of one decode step of `model` with an uncompressed cache (`baseline`), batch 1,
    as a function of the context L."""
    from roofline.units import B
    graph = build_graph(model, baseline, "decode")
    return (graph.total("matmul_flops") + graph.total("vector_flops")).subs(B, 1)
