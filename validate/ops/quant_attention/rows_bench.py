"""Old (tiled_kernel) against new (rows) quant_attention kernel on the GPU, at the family's large cases:
`python -m validate.ops.quant_attention.rows_bench OUT.json`. Per method and shape: a correctness check of
every variant against the torch reference (one sequence of 4096 tokens, output pre-filled with NaN), CUDA-graph
medians over rotated inputs (validate.common.harness), achieved bytes/s from the roofline op's bytes
(validate.model.families.quant_attention.work), the bf16 flash-decode time at the same shape, and the
device-to-device copy ceiling; environment as harness.environment (git SHA from ROOFLINE_GIT_SHA)."""

from __future__ import annotations

import json
import sys

from validate.common import harness
from validate.common.recipes import layout_bytes, recipe
from validate.common.testing import relative_rms
from validate.model.families.quant_attention import work as case_work
from validate.ops.quant_attention import rows_launch, tiled_launch
from validate.ops.quant_attention.cache import permute_channels, random_cache, unpermute_channels
from validate.ops.quant_attention.cases import HEAD_DIM, HEADS, KV_HEADS, METHODS
from validate.ops.quant_attention.reference import reference

SHAPES = ((8, 65536), (32, 16384), (8, 131072))
VARIANTS = {"old": None, "rows-w2s2": (2, 2, 4), "rows-w2s3": (2, 3, 4)}


def _call(name: str):
    """decode(q, cache, out, work) of variant `name` (stored channel order)."""
    if VARIANTS[name] is None:
        return lambda q, c, out, work: tiled_launch.fast_decode(q, c, None, out, work)
    warps, stages, nsub = VARIANTS[name]
    return lambda q, c, out, work: rows_launch.rows_decode(q, c, None, out, work, warps, stages, nsub)


def check(method: str, call) -> float:
    """Relative RMS of `call` (decode(q, cache, out, work)) against the torch reference on one sequence of 4096
    tokens of `method`'s cache, output pre-filled with NaN (NaN where any output is not finite)."""
    import torch

    c = random_cache(recipe(method), 1, KV_HEADS, 4096, HEAD_DIM, "cuda", True)
    q = torch.randn(1, HEADS, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
    qs = q if c.perm_k is None else permute_channels(q, c.perm_k).contiguous()
    out = torch.full_like(q, float("nan"))
    got = call(qs, c, out, {})
    got = got if c.perm_v is None else unpermute_channels(got, c.perm_v)
    return relative_rms(got, reference(q, c)) if torch.isfinite(got).all() else float("nan")


def copy_gbps() -> float:
    """Device-to-device copy of 4 GiB: bytes read plus written over the median time."""
    import torch

    a = torch.empty(1 << 31, dtype=torch.int16, device="cuda").random_()
    b = torch.empty_like(a)
    ms = harness.median_ms(lambda: b.copy_(a))
    return 2 * (1 << 32) / ms / 1e6


def bf16_ms(batch: int, context: int) -> float:
    import torch

    from validate.common.flash_decode import decode_attention, decode_splits

    def make():
        kv = torch.randn(2, batch, KV_HEADS, context, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
        return torch.randn(batch, HEADS, HEAD_DIM, dtype=torch.bfloat16, device="cuda"), kv[0], kv[1]

    sets = harness.input_sets(make, 2 * batch * KV_HEADS * context * HEAD_DIM * 2)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    splits = decode_splits(batch * KV_HEADS, context, sms, 128)
    return harness.graph_ms(lambda q, k, v: decode_attention(q, k, v, splits), sets)


def bench(path: str, methods, shapes, variants, call_of, predicted=None) -> None:
    """Time every variant (call_of(name): decode(q, cache, out, work)) of every method at every (batch, context) of
    `shapes` (module docstring), writing {"env", "rows"} to `path` after each shape; `predicted(method, batch,
    context, variant)`: the ms committed before the run, printed and kept beside each time (None: none)."""
    import torch

    rows, env = [], harness.environment()
    ceiling = copy_gbps()
    print(f"{env}\ncopy ceiling {ceiling:.0f} GB/s", flush=True)
    errors = {(m, n): check(m, call_of(n)) for m in methods for n in variants}
    print("check rel RMS:", {f"{m}/{n}": f"{e:.1e}" for (m, n), e in errors.items()}, flush=True)
    for batch, context in shapes:
        ref = bf16_ms(batch, context)
        for method in methods:
            p = {"method": method, "batch": batch, "context": context, "num_heads": HEADS, "num_kv_heads": KV_HEADS,
                 "head_dim": HEAD_DIM}
            w = case_work(p)
            ratio = 2 * batch * KV_HEADS * context * HEAD_DIM * 2 / sum(layout_bytes(p).values())

            def make(batch=batch, method=method, context=context):
                q = torch.randn(batch, HEADS, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                return q, random_cache(recipe(method), batch, KV_HEADS, context, HEAD_DIM, "cuda")

            sets = harness.input_sets(make, sum(layout_bytes(p).values()))
            for name in variants:
                out, work, call = torch.empty_like(sets[0][0]), {}, call_of(name)
                ms = harness.graph_ms(lambda q, c, call=call, out=out, work=work: call(q, c, out, work), sets)
                pred = predicted(method, batch, context, name) if predicted else None
                row = {"method": method, "batch": batch, "context": context, "variant": name, "ms": ms,
                       **({"predicted_ms": pred} if predicted else {}), "bytes": w["bytes"],
                       "gbps": w["bytes"] / ms / 1e6, "of_copy": w["bytes"] / ms / 1e6 / ceiling, "bf16_ms": ref,
                       "speedup": ref / ms, "byte_ratio": ratio, "of_ratio": ref / ms / ratio,
                       "splits": work.get("num_splits"), "check_rel_rms": errors[(method, name)]}
                rows.append(row)
                shown = f" (pred {pred or float('nan'):.4f})" if predicted else ""
                print(f"{method:14s} b{batch:<3d} L{context:<7d} {name:10s} {ms:8.4f} ms{shown} {row['gbps']:6.0f} "
                      f"GB/s {row['of_copy']:5.0%} of copy  x{row['speedup']:.2f} bf16 = {row['of_ratio']:4.0%} of "
                      f"{ratio:.2f}  splits {row['splits']}", flush=True)
            del sets
            torch.cuda.empty_cache()
        with open(path, "w") as f:  # after each shape: a run cut short keeps what it measured
            json.dump({"env": {**env, "copy_gbps": ceiling}, "rows": rows}, f, indent=1)


def main(path: str) -> None:
    """The old kernel against the rows variants at SHAPES (module docstring)."""
    bench(path, METHODS, SHAPES, VARIANTS, _call)


if __name__ == "__main__":
    main(sys.argv[1])
