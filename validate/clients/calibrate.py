"""python -m validate.clients.calibrate [--results FILE] [--probe FILE] --hardware-file FILE.yaml

The decoder clients' microbenchmarks (validate/clients/micro.py) -> the hardware spec's measured section
(its other fields kept; validate.calibrate writes those from the kernel families):

  kernel_overhead_s             per-kernel time of the 1 x 4096 add chain in a CUDA graph
  gemm_latency_s,               alpha, 1/beta of time = alpha + weight bytes / bw, relative least squares over
  gemm_stream_bytes_per_s       every GEMM case at M <= 64 (the decode shapes, memory-bound)
  gemm_shape_flops_per_s        median 2MNK / time over the GEMM cases at M >= 2048 (bf16)
  attention_flops_per_s         per head dim: FLOPs / time of the causal flash case at the longest prompt
  decode_attention_latency_s,   alpha, 1/beta of time = alpha + KV bytes / bw over the one-query SDPA cases
  decode_attention_bytes_per_s
  cuda_context_bytes            total - free right after CUDA init, nothing allocated: the `cuda_context` row, or
                                (runs before it existed) env memory_bytes - env free_at_start_bytes, the same
                                figure taken by `python -m validate.clients` before its first part
From the issue-13 probe (validate/clients/step_costs.py, --probe FILE):
  sustained_gemm_flops_per_s    median steady rate (back to back, past SETTLE_S) of the GEMMs at M >= 2048 (bf16)
  sustained_attention_flops_per_s  steady causal flash rate at the longest prompt (head dim 128)
  burst_sm_clock_hz,            median SM clock of those GEMMs' bursts and of their steady windows
  sustained_sm_clock_hz
  sustained_after_s             median over those GEMMs of the end of the first 50 ms bin from which every bin
                                stays within 2 % of the steady rate
  aten_kernel_s                 per-call time of the eager aten chains, weighted by the calls one eager decode
                                layer makes of each (EAGER_LAYER_CALLS, decoder.layer / fusion.py's table)
  grouped_gemm_latency_s,       alpha, 1/beta of time = alpha + active experts' weight bytes / bw, relative least
  grouped_gemm_stream_bytes_per_s  squares over the h3 rows' two torch._grouped_mm calls (w13, w2) at every batch
                                (bytes: the mean experts the two layers touched x bytes per expert)
  routing_kernel_s              median over the h3 rows of (moe_mlp - the two grouped calls - the router GEMM at
                                the section's GEMM law) / the kernels left (the census less the grouped GEMMs'
                                prepare + CUTLASS kernels and the router's cuBLAS ones); needs gemm_latency_s and
                                gemm_stream_bytes_per_s (from --results or already in the file)
Pure Python (no torch): runs where the results are committed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from validate import stored

SKINNY_TOKENS = 64
LARGE_TOKENS = 2048
SETTLED = 0.02
# calls one eager decode layer (decoder.layer, batch 1) makes of each probe13 chain kind: two RMSNorms of 8 aten ops,
# RoPE on q and k (neg, cat, 2 muls, add each), two residual adds, the K and V index_put, SiLU and its product
EAGER_LAYER_CALLS = {"to_fp32": 2, "pow2_fp32": 2, "mean_fp32": 2, "add_eps": 2, "rsqrt": 2, "mul_fp32_bcast": 2,
                     "to_bf16": 2, "mul_weight": 2, "neg_strided": 2, "cat_rope": 2, "mul_rope": 4, "add": 4,
                     "index_put_kv": 2, "silu_strided": 1, "mul_silu_up": 1}


def _rows(results: dict, kind: str) -> list[dict]:
    return [r for r in results["cases"] if r.get("family") == "client_ceilings" and r["params"].get("kind") == kind
            and r.get("ms")]


def latency_bandwidth(sizes: list[float], times: list[float]) -> tuple[float, float]:
    """(alpha_s, bytes_per_s) minimizing sum(((alpha + S/bw) - t) / t)^2 (linear in alpha and 1/bw)."""
    import numpy as np

    t = np.asarray(times, dtype=float)
    design = np.stack([1 / t, np.asarray(sizes, dtype=float) / t], axis=1)
    (alpha, inverse), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha <= 0 or inverse <= 0:
        raise ValueError(f"calibrate: latency-bandwidth fit is not physical (alpha {alpha}, 1/bw {inverse})")
    return float(alpha), float(1 / inverse)


def cuda_context_bytes(results: dict) -> int | None:
    """The CUDA context's device bytes: the `cuda_context` microbenchmark row, else total - free at start as the
    run's env recorded them (taken right after CUDA init, before any allocation); None when neither is there."""
    row = next((r for r in results["cases"] if r.get("family") == "client_ceilings"
                and r["params"].get("kind") == "cuda_context"), None)
    if row is not None:
        return int(row["bytes"])
    env = results.get("env", {})
    if env.get("free_at_start_bytes") and env.get("memory_bytes"):
        return int(env["memory_bytes"]) - int(env["free_at_start_bytes"])
    return None


def client_ceilings(results: dict, source: str) -> dict:
    """The measured fields above, from a clients results file."""
    chain = [r for r in _rows(results, "kernel") if r["params"]["tokens"] == 1]
    gemm = _rows(results, "gemm")
    skinny = [r for r in gemm if r["params"]["m"] <= SKINNY_TOKENS]
    weights = [2 * r["params"]["n"] * r["params"]["k"] for r in skinny]
    g_alpha, g_bw = latency_bandwidth(weights, [r["ms"] * 1e-3 for r in skinny])
    large = [r["flops"] / (r["ms"] * 1e-3) for r in gemm if r["params"]["m"] >= LARGE_TOKENS]
    flash: dict[int, dict] = {}
    for r in _rows(results, "flash"):
        d = r["params"]["head_dim"]
        if d not in flash or r["params"]["prompt"] > flash[d]["params"]["prompt"]:
            flash[d] = r
    dec = _rows(results, "decode_attention")
    d_alpha, d_bw = latency_bandwidth([r["bytes"] for r in dec], [r["ms"] * 1e-3 for r in dec])
    sig = lambda x: float(f"{x:.4g}")  # noqa: E731
    return {"kernel_overhead_s": sig(chain[0]["ms"] * 1e-3), "gemm_latency_s": sig(g_alpha),
            "gemm_stream_bytes_per_s": sig(g_bw), "gemm_shape_flops_per_s": {"bf16": sig(statistics.median(large))},
            "attention_flops_per_s": {d: sig(r["flops"] / (r["ms"] * 1e-3)) for d, r in sorted(flash.items())},
            "decode_attention_latency_s": sig(d_alpha), "decode_attention_bytes_per_s": sig(d_bw),
            **({"cuda_context_bytes": context} if (context := cuda_context_bytes(results)) else {}),
            "client_source": source}


GROUPED_KERNELS = ("prepare_grouped_gemm_data", "cutlass")  # a torch._grouped_mm call's two kernels
GEMM_KERNELS = ("nvjet", "splitKreduce", "gemm")  # cuBLAS / cuBLASLt kernels of the router's F.linear


def grouped_gemm_law(rows: list[dict]) -> tuple[float, float]:
    """(alpha_s, bytes_per_s) of the grouped GEMM calls of the h3 rows: time = alpha + active bytes / bw."""
    sizes, times = [], []
    for r in rows:
        active = statistics.mean(r["active_experts"])
        sizes += [active * r["w13_bytes_per_expert"], active * r["w2_bytes_per_expert"]]
        times += [r["grouped_w13_s"], r["grouped_w2_s"]]
    return latency_bandwidth(sizes, times)


def routing_kernels(row: dict) -> int:
    """Kernels of one moe_mlp call besides the grouped GEMMs and the router GEMM (named in its census)."""
    grouped = sum(n for name, n in row["top_kernels"] if any(k in name for k in GROUPED_KERNELS))
    gemm = sum(n for name, n in row["top_kernels"]
               if not any(k in name for k in GROUPED_KERNELS) and any(k in name for k in GEMM_KERNELS))
    return row["kernels"] - grouped - gemm


def routing_kernel_time(rows: list[dict], gemm_latency_s: float, gemm_bytes_per_s: float) -> float:
    """Median over `rows` of (moe_mlp - grouped calls - router GEMM) / routing kernels; the router [E, d] bf16 at
    the GEMM law gemm_latency_s + bytes / gemm_bytes_per_s."""
    from validate.clients.step_costs_core import MOE_EXPERTS, MOE_INTER

    out = []
    for r in rows:
        d = r["w2_bytes_per_expert"] // (2 * MOE_INTER)
        router = gemm_latency_s + MOE_EXPERTS * d * 2 / gemm_bytes_per_s
        out.append((r["moe_mlp_s"] - r["grouped_w13_s"] - r["grouped_w2_s"] - router) / routing_kernels(r))
    return statistics.median(out)


# Inductor's fused kernels one compiled decode layer launches besides GEMMs and attention (the compiled client's
# census: triton_red_fused ..._rsqrt_0 and _4, the two RMSNorms, one with the residual add; triton_poi_fused ...
# cat_index_put (RoPE + K write), ..._index_put_2 (V write), ..._sdpa_... (attention inputs); ..._mul_silu_5)
FUSED_LAYER_CALLS = {"rms_norm": 1, "add_rms_norm": 1, "rope": 3, "silu_mul": 1}


def fused_kernel_time(fused: dict) -> float | None:
    """fused_kernel_s from a probe_fused results file: the per-kernel times of its chains weighted by
    FUSED_LAYER_CALLS (None unless it has every kind)."""
    per = {r["name"].removeprefix("fused_"): r["per_kernel_s"] for r in fused["rows"]}
    if not all(k in per for k in FUSED_LAYER_CALLS):
        return None
    return sum(n * per[k] for k, n in FUSED_LAYER_CALLS.items()) / sum(FUSED_LAYER_CALLS.values())


def settling_time(series: list[list[float]], steady: float, bin_s: float) -> float:
    """End of the first bin of `series` ([[start_s, rate], ...]) from which every bin is within SETTLED of `steady`."""
    settled = len(series)
    for i in range(len(series) - 1, -1, -1):
        if abs(series[i][1] - steady) > SETTLED * steady:
            break
        settled = i
    return series[min(settled, len(series) - 1)][0] + bin_s


def probe_ceilings(probe: dict, source: str, section: dict | None = None) -> dict:
    """The Measured fields above from a probe13 results file (only those whose cases it has); `section` (the
    measured section so far) gives the GEMM law the router is priced at."""
    from validate.clients.step_costs_core import BIN_S

    sig = lambda x: float(f"{x:.4g}")  # noqa: E731
    gemms = [c for c in probe["cases"] if c.get("kind") == "gemm" and c["m"] >= LARGE_TOKENS and c.get("steady_tflops")]
    flash = [c for c in probe["cases"] if c.get("kind") == "flash" and c.get("steady_tflops")]
    chains = {c["kind"]: c["per_call_s"] for c in probe["cases"] if c.get("part") == "h2" and "per_call_s" in c}
    out: dict = {}
    if gemms:
        out["sustained_gemm_flops_per_s"] = {"bf16": sig(statistics.median(c["steady_tflops"] for c in gemms) * 1e12)}
        out["sustained_after_s"] = sig(statistics.median(
            settling_time(c["sustained"]["series"], c["sustained"]["steady"], BIN_S) for c in gemms))
        burst = [c["burst_clocks"]["sm_mhz"] for c in gemms if (c.get("burst_clocks") or {}).get("sm_mhz")]
        steady = [c["sustained"]["clocks"]["steady"]["sm_mhz"] for c in gemms
                  if (c["sustained"]["clocks"].get("steady") or {}).get("sm_mhz")]
        if burst and steady:
            out["burst_sm_clock_hz"] = sig(statistics.median(burst) * 1e6)
            out["sustained_sm_clock_hz"] = sig(statistics.median(steady) * 1e6)
    if flash:
        longest = max(flash, key=lambda c: c["prompt"])
        out["sustained_attention_flops_per_s"] = {128: sig(longest["steady_tflops"] * 1e12)}
    if all(k in chains for k in EAGER_LAYER_CALLS):
        calls = sum(EAGER_LAYER_CALLS.values())
        out["aten_kernel_s"] = sig(sum(n * chains[k] for k, n in EAGER_LAYER_CALLS.items()) / calls)
    moe = [c for c in probe["cases"] if c.get("part") == "h3" and c.get("moe_mlp_s")]
    if moe:
        alpha, bw = grouped_gemm_law(moe)
        out["grouped_gemm_latency_s"], out["grouped_gemm_stream_bytes_per_s"] = sig(alpha), sig(bw)
        law = (section or {}).get("gemm_latency_s"), (section or {}).get("gemm_stream_bytes_per_s")
        if all(law):
            out["routing_kernel_s"] = sig(routing_kernel_time(moe, *law))
    if out:
        out["probe_source"] = source
    return out


def calibrate(results_path: Path | None, hardware_file: Path, probe_path: Path | None = None,
              fused_path: Path | None = None) -> dict:
    """Merge the client ceilings (`results_path`) and the probe's (`probe_path`) into `hardware_file`'s measured
    section (validated before it is written)."""
    import json

    import yaml

    from roofline.catalogue.loading import parse_text, validate
    from roofline.specs import Hardware
    from roofline.validation.calibrate import replace_measured_block

    text = Path(hardware_file).read_text()
    current = yaml.safe_load(text).get("measured")
    if not current:
        raise SystemExit(f"{hardware_file}: measured: calibrate the kernel families first (python -m validate "
                         "calibrate)")
    section = dict(current)
    if results_path is not None:
        section.update(client_ceilings(json.loads(Path(results_path).read_text()), str(results_path)))
    if probe_path is not None:
        section.update(probe_ceilings(json.loads(stored.read_text(probe_path)), str(probe_path), section))
    if fused_path is not None:
        value = fused_kernel_time(json.loads(Path(fused_path).read_text()))
        if value is None:
            raise SystemExit(f"{fused_path}: rows: needs every kind of {sorted(FUSED_LAYER_CALLS)}")
        section["fused_kernel_s"] = float(f"{value:.4g}")
    sources = " and ".join(str(x) for x in (section.get("client_source"), section.get("probe_source"), fused_path)
                           if x)
    note = (f"Measured by `python -m validate calibrate` from {current['source']} and `python -m validate.clients"
            f".calibrate` from {sources}; datasheet figures above stand.")
    new_text = replace_measured_block(text, section, note)
    validate(Hardware, parse_text(new_text, str(hardware_file)), str(hardware_file))
    Path(hardware_file).write_text(new_text)
    return section


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="validate.clients.calibrate")
    p.add_argument("--results", type=Path, help="client results (python -m validate.clients)")
    p.add_argument("--probe", type=Path, help="issue-13 probe results (python -m validate.clients.step_costs)")
    p.add_argument("--fused", type=Path, help="fused-kernel chains (python -m validate.clients.probe_fused)")
    p.add_argument("--hardware-file", type=Path, required=True)
    args = p.parse_args(argv)
    if args.results is None and args.probe is None and args.fused is None:
        p.error("--results, --probe or --fused: give at least one results file")
    section = calibrate(args.results, args.hardware_file, args.probe, args.fused)
    keys = ("kernel_overhead_s", "gemm_latency_s", "gemm_stream_bytes_per_s", "gemm_shape_flops_per_s",
            "attention_flops_per_s", "decode_attention_latency_s", "decode_attention_bytes_per_s", "cuda_context_bytes",
            "sustained_gemm_flops_per_s", "sustained_attention_flops_per_s", "burst_sm_clock_hz",
            "sustained_sm_clock_hz", "sustained_after_s", "aten_kernel_s", "grouped_gemm_latency_s",
            "grouped_gemm_stream_bytes_per_s", "routing_kernel_s", "fused_kernel_s")
    print("\n".join(f"{k}: {section[k]}" for k in keys if k in section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
