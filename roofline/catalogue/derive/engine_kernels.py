"""vLLM's own kernels per GPU from aiconfigurator's vLLM tables: the laws roofline/engines/profiles/vllm.json holds
for the H200 (measured there by validate/engines/micro.py), derived with the same definitions for every GPU the
database has, into roofline/engines/profiles/vllm-derived.json.

    python -m roofline.catalogue.derive.engine_kernels --package PATH [--write]

Each law is validate/engines/derive.py's, on the database rows nearest to micro.py's shapes:

    attn_decode_latency, attn_decode_bw   t = alpha + KV bytes / rate (derive.fit_affine: relative least squares,
                        alpha clipped at 0) over generation attention at micro.py's (batch, context) pairs with 32
                        query / 8 KV heads, head dim 128, bf16 cache, no window (context = isl + step; the tables
                        have no 32-KV-head rows, so micro's MHA cases are left out), the kernel vLLM's FLASH_ATTN
                        backend runs there (FA3 where the table has it: Hopper; the table's one kernel elsewhere)
    grouped_gemm_latency, grouped_gemm_bw t = alpha + active experts' weight bytes / rate over the bf16 fused-MoE
                        rows (vLLM's unquantized Triton `fused_experts`, tp = ep = 1) of micro.py's shape E 128,
                        top-8, hidden 2048, intermediate 768 at M in (1, 4, 16, 64), routing 'balanced', the one
                        whose active experts are known exactly: min(E, M k) (micro.py counted its own). A system
                        with only power-law rows (A100: aiconfigurator 0.12 measured no balanced routing there) gets
                        no such law: how many experts a power-law draw touches is not in the table
    grouped_gemm_flops  FLOP/s of that kernel at M = 4096 (micro.py's largest batch): 2 M k 3 H I / t, FLOPs that do
                        not depend on the routing, under 'power_law_1.01' (every system has it; on the H200 its time
                        is micro's uniform-random routing's within 7 %, balanced routing's 22 % faster). The planner
                        otherwise prices the routed experts' FLOPs at the dense GEMM rate, which the fused Triton
                        kernel does not reach where vLLM ships no tuned config for the GPU (it falls back to
                        get_default_config: vllm/model_executor/layers/fused_moe/fused_moe.py,
                        try_get_optimal_moe_config)
    attention_flops     per head dim: 4 P^2 hq d / 2 / t of context attention at batch 1, 32 / 8 heads, bf16, no
                        window, the longest prompt the table has (micro.py fa3_prefill's FLOP count)

`check(db)` compares the H200's derived laws with the lead's measured ones (vllm.json) — the conversion's own test.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from roofline.catalogue import load_hardware
from roofline.catalogue.derive.tables import Database, DatabaseError, open_database
from roofline.catalogue.derive.write import SYSTEMS

PROFILE = Path(__file__).resolve().parents[2] / "engines" / "profiles" / "vllm-derived.json"
MEASURED = PROFILE.with_name("vllm.json")
DECODE = ((1, 1024), (1, 16384), (8, 1024), (8, 8192), (32, 1024), (64, 1024), (128, 512), (256, 256), (32, 16384))
HQ, HK, HEAD_DIM = 32, 8, 128  # micro.py's GQA case
MOE = {"num_experts": 128, "topk": 8, "hidden_size": 2048, "inter_size": 768}  # micro.py fused_moe, first shape
MOE_SMALL_M = (1, 4, 16, 64)
MOE_LARGE_M = 4096
DISTRIBUTION, BALANCED = "power_law_1.01", "balanced"
MS = 1e-3


def fit_affine(xs, ts) -> tuple[float, float]:
    """(alpha, rate) of t = alpha + x / rate by relative least squares, alpha clipped at 0 (validate/engines/
    derive.py fit_affine, the lead's fit of vllm.json, restated here: the planner never imports validate/)."""
    w = [1 / t ** 2 for t in ts]
    sw, sx = sum(w), sum(wi * x for wi, x in zip(w, xs, strict=True))
    st = sum(wi * t for wi, t in zip(w, ts, strict=True))
    sxx = sum(wi * x * x for wi, x in zip(w, xs, strict=True))
    sxt = sum(wi * x * t for wi, x, t in zip(w, xs, ts, strict=True))
    beta = (sw * sxt - sx * st) / (sw * sxx - sx * sx)
    alpha = (st - beta * sx) / sw
    if alpha < 0:
        alpha, beta = 0.0, sxt / sxx
    return alpha, 1.0 / beta


def _table(db: Database, system: str, family: str, table: str, used: list[str]):
    path = db.table_path(system, family, "vllm", table)
    used.append(db.relative(path))
    return db.read(path)


def _attention(frame):
    """32 / 8 heads, bf16 cache, no window, and the FA3 kernel where the table has several."""
    rows = frame[(frame.num_heads == HQ) & (frame.num_key_value_heads == HK) & (frame.kv_cache_dtype == "bfloat16")]
    if "window_size" in rows.columns:
        rows = rows[rows.window_size == 0]
    if "vllm_flash_attn_fa3" in set(rows.kernel_source):
        rows = rows[rows.kernel_source == "vllm_flash_attn_fa3"]
    return rows


def decode_law(db: Database, system: str, used: list[str], l2_bytes: int = 0) -> dict:
    """attn_decode_latency / attn_decode_bw at micro.py's decode shapes whose KV exceeds the device's L2 (the
    tables replay one KV cache, so a smaller one is read from the L2: on the L40S's 96 MB most of micro's shapes;
    module docstring)."""
    a = _attention(_table(db, system, "attention", "generation_attention_perf", used))
    a = a[a.head_dim == HEAD_DIM]
    xs, ts = [], []
    for batch, context in DECODE:
        row = a[(a.batch_size == batch) & (a.isl + a.step == context)]
        kv_bytes = 2 * batch * context * HK * HEAD_DIM * 2
        if len(row) and kv_bytes > l2_bytes:
            xs.append(kv_bytes)
            ts.append(float(row.latency.min()) * MS)
    if len(set(xs)) < 2:
        raise DatabaseError(f"{system}: generation attention has fewer than two of micro.py's decode shapes")
    alpha, rate = fit_affine(xs, ts)
    return {"attn_decode_latency": alpha, "attn_decode_bw": rate, "decode_shapes": len(xs)}


def moe_laws(db: Database, system: str, used: list[str], dram_bytes_per_s: float = float("inf")) -> dict:
    """grouped_gemm_latency / _bw at M <= 64 (left out when the fit streams faster than the device's datasheet DRAM
    bandwidth: small expert sets the table replays from the L2) and grouped_gemm_flops at M = 4096 (module
    docstring); {} when the table has no bf16 rows of micro.py's shape."""
    m = _table(db, system, "moe", "moe_perf", used)
    m = m[(m.moe_dtype == "bfloat16") & (m.moe_tp_size == 1) & (m.moe_ep_size == 1)]
    for key, value in MOE.items():
        m = m[m[key] == value]
    if m.empty:
        return {}
    e, k, h, i = MOE["num_experts"], MOE["topk"], MOE["hidden_size"], MOE["inter_size"]
    out = {"moe_kernel": sorted(set(m.kernel_source))}
    balanced = m[m.distribution == BALANCED].groupby("num_tokens").latency.min()
    small = [(t, balanced[t] * MS) for t in MOE_SMALL_M if t in balanced.index]
    if len(small) >= 2:
        alpha, rate = fit_affine([min(e, t * k) * 3 * h * i * 2 for t, _ in small], [s for _, s in small])
        if rate <= dram_bytes_per_s:  # faster than the DRAM: rows read from the L2, not the law of a stream
            out |= {"grouped_gemm_latency": alpha, "grouped_gemm_bw": rate}
    skewed = m[m.distribution == DISTRIBUTION].groupby("num_tokens").latency.min()
    if MOE_LARGE_M in skewed.index:
        out["grouped_gemm_flops"] = 2 * MOE_LARGE_M * k * 3 * h * i / (skewed[MOE_LARGE_M] * MS)
    return out


def prefill_rates(db: Database, system: str, used: list[str]) -> dict[int, float]:
    """attention_flops per head dim at batch 1, the longest prompt (module docstring)."""
    c = _attention(_table(db, system, "attention", "context_attention_perf", used))
    c = c[c.batch_size == 1]
    out = {}
    for head_dim, rows in sorted(c.groupby("head_dim")):
        longest = rows[rows.isl == rows.isl.max()]
        p = int(longest.isl.iloc[0])
        out[int(head_dim)] = 4 * p * p * HQ * int(head_dim) / 2 / (float(longest.latency.min()) * MS)
    return out


def derive_system(db: Database, system: str, l2_bytes: int = 0, dram_bytes_per_s: float = float("inf")) -> dict:
    """{kernels, attention_flops, source} of one aiconfigurator system; `l2_bytes`, `dram_bytes_per_s`: the
    catalogue device's L2 and datasheet bandwidth."""
    used: list[str] = []
    kernels = decode_law(db, system, used, l2_bytes)
    kernels |= moe_laws(db, system, used, dram_bytes_per_s)
    rates = prefill_rates(db, system, used)
    notes = {"decode_shapes": kernels.pop("decode_shapes"), "moe_kernel": kernels.pop("moe_kernel", None)}
    return {"kernels": kernels, "attention_flops": rates, "notes": notes,
            "source": f"aiconfigurator-core {db.version}: " + "; ".join(dict.fromkeys(used))}


def check(derived: dict, measured: dict, gpu: str = "H200") -> dict:
    """Derived / measured - 1 for each law the lead measured on `gpu` (vllm.json), the conversion's check."""
    out = {}
    for key, value in measured.get("kernels", {}).get(gpu, {}).items():
        if key in derived["kernels"]:
            out[key] = derived["kernels"][key] / value - 1
    for head_dim, value in measured.get("attention_flops", {}).get(gpu, {}).items():
        if int(head_dim) in derived["attention_flops"]:
            out[f"attention_flops:{head_dim}"] = derived["attention_flops"][int(head_dim)] / value - 1
    return out


def derive_all(db: Database) -> dict:
    """The sibling profile: every catalogue GPU of SYSTEMS whose vLLM tables give the laws, with the H200 check."""
    gpus, sources, notes, skipped = {}, {}, {}, {}
    for system, name in SYSTEMS.items():
        try:
            hw = load_hardware(name)
            d = derive_system(db, system, hw.l2_cache_bytes or 0, hw.memory_bytes_per_s)
        except DatabaseError as err:
            skipped[name] = str(err)
            continue
        gpus[name] = d
        sources[name], notes[name] = d["source"], d["notes"]
    measured = json.loads(MEASURED.read_text())
    return {"engine": "vllm", "kind": "derived", "date": str(dt.date.today()),
            "definitions": " ".join(__doc__.split("Each law is", 1)[1].split("`check(db)`")[0].split()),
            "kernels": {g: {k: _sig(v) for k, v in d["kernels"].items()} for g, d in gpus.items()},
            "attention_flops": {g: {str(h): _sig(r) for h, r in d["attention_flops"].items()} for g, d in gpus.items()},
            "sources": sources, "notes": notes, "skipped": skipped,
            "check_h200_derived_over_measured_minus_1": {k: round(v, 4) for k, v in
                                                         check(gpus["H200"], measured).items()} if "H200" in gpus
            else {}}


def _sig(x: float) -> float:
    return float(f"{x:.4g}")


def main(argv=None) -> int:
    """Derive, print one line per GPU and the H200 check; --write stores the sibling profile."""
    p = argparse.ArgumentParser(prog="python -m roofline.catalogue.derive.engine_kernels",
                                description="vLLM kernel laws per GPU from aiconfigurator's vLLM tables")
    p.add_argument("--package", type=Path, required=True, help="aiconfigurator-core wheel or unpacked folder")
    p.add_argument("--write", action="store_true", help=f"write {PROFILE.relative_to(PROFILE.parents[3])}")
    args = p.parse_args(argv)
    try:
        out = derive_all(open_database(args.package))
    except ImportError as err:
        print(f"error: {err.name or err}: the converter reads parquet tables; pip install 'roofline[aic]'",
              file=sys.stderr)
        return 2
    except (DatabaseError, OSError, KeyError, ValueError) as err:
        print(f"error: --package: {err}", file=sys.stderr)
        return 2
    for gpu, k in out["kernels"].items():
        print(f"{gpu}: " + ", ".join(f"{key} {value:.4g}" for key, value in k.items())
              + f"; attention_flops {out['attention_flops'][gpu]}")
    print("H200 derived / measured - 1:", json.dumps(out["check_h200_derived_over_measured_minus_1"]))
    if args.write:
        tmp = PROFILE.with_suffix(".tmp")
        tmp.write_text(json.dumps(out, indent=1) + "\n")
        tmp.replace(PROFILE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
