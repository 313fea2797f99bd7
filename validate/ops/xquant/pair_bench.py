"""What the two-variant device scripts share (variant_bench: fused vs shared; deq_bench: fp32 vs pairs dequant):
the committed prediction rows of the device, one case's row (checks, graph medians, speedup, TFLOP/s, predictions)
and its printed line. Imports no torch: the scripts pass their own `check` and `time_case`."""

from __future__ import annotations

import json
from pathlib import Path


def predictions(path: Path, device: str) -> dict:
    """case name -> the committed prediction row in `path` for this device (H100 / H200), {} when none matches."""
    doc = json.loads(path.read_text()) if path.exists() else {"devices": {}}
    key = "H200" if "H200" in device else "H100-SXM"
    return {r["case"]: r for r in doc["devices"].get(key, {}).get("rows", [])}


def check_inputs(p: dict):
    """(q, layer, out) of a reference check of case `p` on the GPU: CHECK_TOKENS latent tokens (channels spread
    log-normally for K), random up-projections, one query, a NaN-filled output (seeded; the same in every script)."""
    import torch

    from validate.ops.xquant import cases
    from validate.ops.xquant import launch as xk

    g = torch.Generator(device="cuda").manual_seed(0)
    n, r = min(p["context"], cases.CHECK_TOKENS), p["latent"]
    spread = torch.exp(0.5 * torch.randn(1, 1, r, device="cuda", generator=g))
    x_k = torch.randn(1, n, r, device="cuda", generator=g) * spread
    x_v = None if p["variant"] == "mha_fused" else torch.randn(1, n, r, device="cuda", generator=g)
    w = [torch.randn(r, p["num_kv_heads"] * p["head_dim"], device="cuda", generator=g) * r ** -0.5 for _ in "kv"]
    layer = xk.build_layer(x_k, x_v, *w, p["num_kv_heads"], p["bits"], p["group_size"])
    q = torch.randn(1, p["num_heads"], p["head_dim"], device="cuda", generator=g).to(torch.bfloat16)
    return q, layer, torch.full_like(q, float("nan"))


def pair_row(p: dict, case: tuple[str, int, int], name: str, pair: tuple[str, str], check, time_case,
             guess: dict, predicted: dict[str, str]) -> dict:
    """Row of one case: "case", "variant", "batch", "context", check_<v> = check(p, v) for both variants of `pair`
    (old, new), time_case(p) (with <v>_ms and "flops"), "speedup" = old / new ms, <v>_tflops, and each key of
    `predicted` set to the field it names of the case's prediction row `guess` (None where it has none)."""
    variant, batch, context = case
    row = {"case": name, "variant": variant, "batch": batch, "context": context,
           **{f"check_{v}": check(p, v) for v in pair}, **time_case(p)}
    old, new = pair
    row["speedup"] = row[f"{old}_ms"] / row[f"{new}_ms"]
    row.update({f"{v}_tflops": row["flops"] / row[f"{v}_ms"] / 1e9 for v in pair})
    row.update({key: guess.get(field) for key, field in predicted.items()})
    return row


def pair_line(row: dict, pair: tuple[str, str], predicted_key: str, elapsed: float, width: int,
              speedup_digits: int) -> str:
    """The printed line of `pair_row`'s row: both times, the speedup, TFLOP/s, the new variant's prediction and the
    checks."""
    old, new = pair
    return (f"{row['case']:{width}s} {old} {row[f'{old}_ms']:9.4f} ms  {new} {row[f'{new}_ms']:9.4f} ms  "
            f"x{row['speedup']:.{speedup_digits}f}  ({row[f'{old}_tflops']:.0f} -> {row[f'{new}_tflops']:.0f} TFLOP/s)"
            f"  predicted {new} {row[predicted_key] or float('nan'):.4f} ms  check {row[f'check_{old}']:.1e} / "
            f"{row[f'check_{new}']:.1e}  [{elapsed:.0f} s]")
