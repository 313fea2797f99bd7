"""The `roofline kv` numbers: resident KV bytes, bytes per token and effective bits for a method."""

from __future__ import annotations

import math
from typing import Any

import sympy as sp

from roofline.methods import MethodConfig, build_cache
from roofline.methods.layout import PARTS
from roofline.specs import Model
from roofline.symbols import L


def _num(expr: sp.Expr, context: int) -> sp.Expr:
    value = sp.sympify(expr).subs(L, context)
    if value.free_symbols:
        raise ValueError(f"kv: expression still depends on {sorted(map(str, value.free_symbols))}")
    return value


def kv_report(model: Model, method: MethodConfig, context: int, batch: int = 1) -> dict[str, Any]:
    """KV cache of `batch` sequences at `context` tokens under `method` (exact, no page rounding).

    kv_bytes rounds the (possibly fractional-bit) total up to whole bytes; bytes_per_token divides by
    batch x context; effective_bits is resident bits per uncompressed K/V element.
    """
    cache = build_cache(method, model)
    per_seq = _num(cache.resident_bytes, context)
    parts = {p: _num(v, context) for p, v in cache.resident_parts().items()}
    total = per_seq * batch
    elements = _num(cache.baseline_elements, context)
    return {
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
    }
