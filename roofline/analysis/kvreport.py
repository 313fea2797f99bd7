"""The `roofline kv` numbers: resident KV bytes, bytes per token and effective bits for a method."""

from __future__ import annotations

import math
from typing import Any

from roofline.costmodel import Roofline, build_graph
from roofline.kv.layout import PARTS
from roofline.lazy import sp
from roofline.methods import MethodConfig, build_cache
from roofline.specs import Hardware, Model


def _num(expr: sp.Expr, context: int) -> sp.Expr:
    from roofline.units import L
    value = sp.sympify(expr).subs(L, context)
    if value.free_symbols:
        raise ValueError(f"kv: expression still depends on {sorted(map(str, value.free_symbols))}")
    return value


def decode_op_costs(model: Model, method: MethodConfig, hardware: Hardware, context: int, batch: int = 1,
                    tp: int = 1, fusion: str = "typical", weight_dtype: str = "bf16",
                    expert_weight_dtype: str | None = None) -> list[dict[str, Any]]:
    """Per-op decode costs at (batch, context): FLOPs, bytes by class, intensity, ridge, bound, time, and the
    kernels each op launches at `fusion`, with the weights at `weight_dtype` (the routed experts at
    `expert_weight_dtype`, None: weight_dtype). Rows are per layer instance; `count` says how many layers run each."""
    from roofline.units import B, L
    graph = build_graph(model, method, "decode", tp=tp, fusion=fusion, weight_dtype=weight_dtype,
                        expert_weight_dtype=expert_weight_dtype)
    rows = Roofline(hardware, tp=tp).evaluate(graph, {B: batch, L: context})
    return [{**row, "kernels": op.kernels} for row, op in zip(rows, graph.ops, strict=True)]


def kv_report(model: Model, method: MethodConfig, context: int, batch: int = 1,
              hardware: Hardware | None = None, fusion: str = "typical") -> dict[str, Any]:
    """KV cache of `batch` sequences at `context` tokens under `method` (exact, no page rounding).

    kv_bytes rounds the (possibly fractional-bit) total up to whole bytes; bytes_per_token divides by
    batch x context; effective_bits is resident bits per uncompressed K/V element. With `hardware`, the decode
    step's weights are read at the widths the checkpoint stores (stored_bytes.dominant_dtypes: a
    quantization_config's converted matrices at its dtype, bf16 otherwise), as `roofline plan` reads them;
    `decode_weights` says which.
    """
    cache = build_cache(method, model)
    per_seq = _num(cache.resident_bytes, context)
    parts = {p: _num(v, context) for p, v in cache.resident_parts().items()}
    total = per_seq * batch
    elements = _num(cache.baseline_elements, context)
    report = {
        "model": model.name,
        "method": method.label(),
        "context": context,
        "batch": batch,
        "kv_bytes": int(math.ceil(total)),
        "bytes_per_token": float(per_seq / context),
        "effective_bits": float(8 * per_seq / elements) if elements else 0.0,
        "parts_bytes": {p: float(parts[p] * batch) for p in PARTS if p in parts and parts[p] != 0},
        "fixed_bytes": {k: int(v) for k, v in cache.fixed_bytes.items()},
        "read_bytes_per_step": float(_num(cache.read_bytes, context) * batch),
        "layers": [
            {
                "count": layer.count,
                "attention": layer.attention.kind,
                "window": layer.attention.window,
                "bytes_per_layer": float(_num(layer.resident_bytes, context) * batch),
            }
            for layer in cache.layers
        ],
        "asymptotic_bits": float(cache.asymptotic_bits()),
        "reserved_bytes": int(math.ceil(_num(cache.reserved_bytes, context) * batch)),
    }
    if hardware is not None:
        from roofline.stored_bytes import dominant_dtypes
        weight, expert = dominant_dtypes(model)
        rows = decode_op_costs(model, method, hardware, context, batch, fusion=fusion, weight_dtype=weight,
                               expert_weight_dtype=expert)
        q = model.quantization
        read = f"quantization_config: {q.method}" if q is not None else "no quantization_config"
        report["decode_weights"] = {"weight_dtype": weight, "expert_weight_dtype": expert, "read": read}
        report["hardware"] = hardware.name
        report["decode_ops"] = rows
        report["decode_step_s"] = sum(r["count"] * r["time_s"] for r in rows)
        report["decode_kernels"] = sum(r["count"] * r["kernels"] for r in rows)
    return report
