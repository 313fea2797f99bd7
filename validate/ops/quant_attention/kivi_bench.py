"""The fast kernel's KIVI variants (kivi_variants.VARIANTS: old, qall, qall-r128) timed on the GPU at the shapes of
kivi-variants-predicted.json: `python -m validate.ops.quant_attention.kivi_bench OUT.json`. Every variant is
launched with its own VAR bits and register cap, not LAUNCH's: "old" (VAR 0, no cap) is the kernel KIVI ran before
qall-r128 became LAUNCH's KIVI default, and was named "default" in the files written before
(nvidia-h{100,200}-kivi-variants.json), so this bench times the same kernels as it did then. Per method: a
reference check of every variant (one sequence of 4096 tokens, output pre-filled with NaN; relative RMS against the
torch reference), then per shape CUDA-graph medians over rotated inputs (validate.common.harness), achieved bytes/s
from the roofline op's bytes, the bf16 flash-decode time and the copy ceiling (rows_bench's), the prediction
committed before the run beside each time; environment as harness.environment (git SHA from ROOFLINE_GIT_SHA)."""

from __future__ import annotations

import json
import sys

from roofline.validation.families.quant_attention import work as case_work
from validate.common import harness
from validate.common.recipes import layout_bytes, recipe
from validate.common.testing import relative_rms
from validate.ops.quant_attention import tiled_launch
from validate.ops.quant_attention.cache import random_cache
from validate.ops.quant_attention.cases import HEAD_DIM, HEADS, KV_HEADS
from validate.ops.quant_attention.kivi_variants import FORMERLY, METHODS, OUT, SHAPES, VARIANTS
from validate.ops.quant_attention.reference import reference
from validate.ops.quant_attention.rows_bench import bf16_ms, copy_gbps


def _call(name: str):
    """decode(q, cache, out, work) of variant `name`: its VAR bits and register cap (None: no cap), never LAUNCH's."""
    var, cap = VARIANTS[name]
    return lambda q, c, out, work: tiled_launch.fast_decode(q, c, None, out, work, maxnreg=cap, variant=var)


def _check(method: str, call) -> float:
    import torch

    c = random_cache(recipe(method), 1, KV_HEADS, 4096, HEAD_DIM, "cuda", True)
    q = torch.randn(1, HEADS, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
    out = torch.full_like(q, float("nan"))
    got = call(q, c, out, {})
    return relative_rms(got, reference(q, c)) if torch.isfinite(got).all() else float("nan")


def _predicted(device: str) -> dict:
    """kivi-variants-predicted.json's rows of the device's catalogue entry ({} when it has none)."""
    name = "H200" if "H200" in device else "H100-SXM"
    return json.loads(OUT.read_text())["predicted"].get(name, {}) if OUT.exists() else {}


def main(path: str) -> None:
    import torch

    rows, env = [], harness.environment()
    ceiling = copy_gbps()
    predicted = _predicted(torch.cuda.get_device_name())
    print(f"{env}\ncopy ceiling {ceiling:.0f} GB/s", flush=True)
    errors = {(m, n): _check(m, _call(n)) for m in METHODS for n in VARIANTS}
    print("check rel RMS:", {f"{m}/{n}": f"{e:.1e}" for (m, n), e in errors.items()}, flush=True)
    for batch, context in SHAPES:
        ref = bf16_ms(batch, context)
        for method in METHODS:
            p = {"method": method, "batch": batch, "context": context, "num_heads": HEADS, "num_kv_heads": KV_HEADS,
                 "head_dim": HEAD_DIM}
            w = case_work(p)
            ratio = 2 * batch * KV_HEADS * context * HEAD_DIM * 2 / sum(layout_bytes(p).values())

            def make(batch=batch, method=method, context=context):
                q = torch.randn(batch, HEADS, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                return q, random_cache(recipe(method), batch, KV_HEADS, context, HEAD_DIM, "cuda")

            sets = harness.input_sets(make, sum(layout_bytes(p).values()))
            for name in VARIANTS:
                out, work, call = torch.empty_like(sets[0][0]), {}, _call(name)
                ms = harness.graph_ms(lambda q, c, call=call, out=out, work=work: call(q, c, out, work), sets)
                got = predicted.get(f"{method}_b{batch}_l{context}", {})
                pred = got.get(name, got.get(FORMERLY.get(name), {})).get("ms")
                row = {"method": method, "batch": batch, "context": context, "variant": name, "ms": ms,
                       "predicted_ms": pred, "bytes": w["bytes"], "gbps": w["bytes"] / ms / 1e6,
                       "of_copy": w["bytes"] / ms / 1e6 / ceiling, "bf16_ms": ref, "speedup": ref / ms,
                       "byte_ratio": ratio, "of_ratio": ref / ms / ratio, "splits": work.get("num_splits"),
                       "check_rel_rms": errors[(method, name)]}
                rows.append(row)
                print(f"{method:7s} b{batch:<3d} L{context:<7d} {name:10s} {ms:8.4f} ms (pred "
                      f"{pred or float('nan'):.4f}) {row['gbps']:6.0f} GB/s {row['of_copy']:5.0%} of copy  "
                      f"x{row['speedup']:.2f} bf16 = {row['of_ratio']:4.0%} of {ratio:.2f}  splits {row['splits']}",
                      flush=True)
            del sets
            torch.cuda.empty_cache()
        with open(path, "w") as f:  # after each shape: a run cut short keeps what it measured
            json.dump({"env": {**env, "copy_gbps": ceiling}, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
