"""A raw calibration JSON (roofline.calibrate.measure) -> the `measured` mapping of a hardware spec (standard
library only, so the measuring run prints the same figures it will be converted to).

Each figure is the lab's definition, so a calibrated file compares field by field with the catalogue's sections:
  read_bytes_per_s, copy_bytes_per_s   median bytes/s of the LARGEST_SIZES largest read / copy rows
                                       (roofline/validation/calibrate.py stream_bandwidth)
  memory_latency_s, stream_bytes_per_s alpha and 1/beta of time = alpha + bytes / bw over every read row (fit.py;
                                       a fit that is not physical, alpha or beta <= 0, is left out with a note)
  bandwidth_curve                      every read row as (bytes, bytes/s)
  gemm_flops_per_s                     2 size^3 / time per dtype of the square GEMMs
  launch_latency_s                     the empty-kernel launch row
  kernel_overhead_s                    the 1 x 4096 add chain's per-kernel time (validate/clients/calibrate.py)
  gemm_latency_s, gemm_stream_bytes_per_s   the fit over weight bytes 2 N K of every bf16 GEMM row at M <= 64
  gemm_shape_flops_per_s               median 2 M N K / time of the GEMM rows at M >= 2048
  attention_flops_per_s                per head dim: the causal flash row at the longest prompt
  decode_attention_latency_s, _bytes_per_s  the fit over KV bytes of the one-query rows
  cuda_context_bytes                   total - free right after CUDA init
  sustained_gemm_flops_per_s, burst_sm_clock_hz, sustained_sm_clock_hz, sustained_after_s   the sustained rows
                                       at M >= LARGE_TOKENS (validate/clients/calibrate.py probe_ceilings: median
                                       steady rate, median clocks, median settling time of the 50 ms bins within
                                       SETTLED of steady)
  sustained_attention_flops_per_s      the steady rate of the sustained flash row at the longest prompt, per head
                                       dim (probe_ceilings)
  aten_kernel_s                        the "aten" chains (each timed after its kernel census, as the lab's probe)
                                       weighted by EAGER_LAYER_CALLS; the same weighting of the "aten_bare" chains
                                       (no profiler yet in the process) goes to the raw file's notes
  grouped_gemm_latency_s, grouped_gemm_stream_bytes_per_s   the fit over active experts' bytes of the grouped rows
  routing_kernel_s                     median per-kernel time of the routing rows (bench_routing.py)
A figure whose rows are missing (a skipped part) is left out: the planner then uses its next ceiling. A --device cpu
toy run leaves out GEMM rates under the spec's 0.1 TFLOP/s floor (a CPU is no GPU; the datasheet peak stands).
"""

from __future__ import annotations

import datetime as dt

from roofline.calibrate.fit import FitError, latency_bandwidth, median, sig

LARGEST_SIZES = 3
SKINNY_TOKENS, LARGE_TOKENS = 64, 2048
SETTLED, BIN_S = 0.02, 0.05
PEAK_FLOOR_FLOPS_PER_S = 1e11  # roofline/specs/bounds.py PEAK's hard floor (that module needs pydantic's package)
# calls one eager decode layer (batch 1) makes of each aten op (validate/clients/calibrate.py EAGER_LAYER_CALLS)
EAGER_LAYER_CALLS = {"to_fp32": 2, "pow2_fp32": 2, "mean_fp32": 2, "add_eps": 2, "rsqrt": 2, "mul_fp32_bcast": 2,
                     "to_bf16": 2, "mul_weight": 2, "neg_strided": 2, "cat_rope": 2, "mul_rope": 4, "add": 4,
                     "index_put_kv": 2, "silu_strided": 1, "mul_silu_up": 1}


class SectionError(ValueError):
    """A raw file the section cannot be made from (the message names the field and the rule)."""


def _rows(raw: dict, kind: str) -> list[dict]:
    return [r for r in raw.get("rows", []) if r.get("kind") == kind and (r.get("s") or kind == "cuda_context")]


def _rate(row: dict, what: str = "bytes") -> float:
    return row[what] / row["s"]


def _settling_s(series: list[list[float]], steady: float) -> float:
    """End of the first bin from which every bin stays within SETTLED of `steady` (calibrate.settling_time)."""
    settled = len(series)
    for i in range(len(series) - 1, -1, -1):
        if abs(series[i][1] - steady) > SETTLED * steady:
            break
        settled = i
    return series[min(settled, len(series) - 1)][0] + BIN_S


def _optional_fit(sizes: list, times: list, law: str, out: dict) -> tuple[float, float] | None:
    """(alpha, bw) rounded, or None with the reason kept in out['_notes'] (a law the planner can do without: it
    falls back to the streaming bandwidth and the per-kernel time; the read law is required and raises)."""
    try:
        alpha, bw = latency_bandwidth(sizes, times, law)
    except FitError as err:
        out.setdefault("_notes", []).append(str(err))
        return None
    return sig(alpha), sig(bw)


def _stream(raw: dict, out: dict) -> None:
    reads = sorted(_rows(raw, "read"), key=lambda r: r["bytes"])
    copies = sorted(_rows(raw, "copy"), key=lambda r: r["bytes"])
    if not reads or not copies:
        raise SectionError("rows: the raw file has no read or copy rows (read_bytes_per_s is required)")
    out["read_bytes_per_s"] = sig(median([_rate(r) for r in reads[-LARGEST_SIZES:]]))
    out["copy_bytes_per_s"] = sig(median([_rate(r) for r in copies[-LARGEST_SIZES:]]))
    fitted = _optional_fit([r["bytes"] for r in reads], [r["s"] for r in reads], "read rows", out)
    if fitted:
        out["memory_latency_s"], out["stream_bytes_per_s"] = fitted
    out["bandwidth_curve"] = [[int(r["bytes"]), sig(_rate(r))] for r in reads]


def _gemm(raw: dict, out: dict) -> None:
    peak = {r["dtype"]: sig(_rate(r, "flops")) for r in _rows(raw, "gemm_peak")}
    if not peak:
        raise SectionError("rows: the raw file has no square GEMM rows (gemm_flops_per_s is required)")
    if raw["env"].get("device_kind") == "cpu":  # a toy run: a CPU's rate may sit under a GPU spec's floor
        low = sorted(d for d, v in peak.items() if v < PEAK_FLOOR_FLOPS_PER_S)
        if low:
            out.setdefault("_notes", []).append(f"cpu toy run: gemm_flops_per_s {low} under the spec's "
                                                f"{PEAK_FLOOR_FLOPS_PER_S:g} FLOP/s floor, left out")
        peak = {d: v for d, v in peak.items() if v >= PEAK_FLOOR_FLOPS_PER_S}
        if not peak:  # a hardware file needs one GEMM rate: write none that `plan` would refuse
            raise SectionError(f"rows: cpu toy run: every square GEMM rate ({', '.join(low)}) is under the spec's "
                               f"{PEAK_FLOOR_FLOPS_PER_S:g} FLOP/s floor, so gemm_flops_per_s has no figure and no "
                               "hardware file is written (the raw timings are kept)")
    out["gemm_flops_per_s"] = dict(sorted(peak.items()))
    grid = _rows(raw, "gemm")
    skinny = [r for r in grid if r["m"] <= SKINNY_TOKENS]
    if len({r["n"] * r["k"] for r in skinny}) >= 2:
        fitted = _optional_fit([2 * r["n"] * r["k"] for r in skinny], [r["s"] for r in skinny], "gemm rows", out)
        if fitted:
            out["gemm_latency_s"], out["gemm_stream_bytes_per_s"] = fitted
    large = [_rate(r, "flops") for r in grid if r["m"] >= LARGE_TOKENS]
    if large:
        out["gemm_shape_flops_per_s"] = {"bf16": sig(median(large))}


def _attention(raw: dict, out: dict) -> None:
    longest: dict[int, dict] = {}
    for r in _rows(raw, "flash"):
        if r["head_dim"] not in longest or r["prompt"] > longest[r["head_dim"]]["prompt"]:
            longest[r["head_dim"]] = r
    if longest:
        out["attention_flops_per_s"] = {d: sig(_rate(r, "flops")) for d, r in sorted(longest.items())}
    dec = _rows(raw, "decode_attention")
    if len({r["bytes"] for r in dec}) >= 2:
        fitted = _optional_fit([r["bytes"] for r in dec], [r["s"] for r in dec], "decode attention rows", out)
        if fitted:
            out["decode_attention_latency_s"], out["decode_attention_bytes_per_s"] = fitted


def _layer_weighted(raw: dict, kind: str) -> float | None:
    """Per-call time of the `kind` chains weighted by EAGER_LAYER_CALLS, None unless every op is there."""
    chains = {r["op"]: r["s"] for r in _rows(raw, kind)}
    if not all(op in chains for op in EAGER_LAYER_CALLS):
        return None
    return sum(n * chains[op] for op, n in EAGER_LAYER_CALLS.items()) / sum(EAGER_LAYER_CALLS.values())


def _kernels(raw: dict, out: dict) -> None:
    launch = _rows(raw, "launch")
    if not launch:
        raise SectionError("rows: the raw file has no launch row (launch_latency_s is required)")
    out["launch_latency_s"] = sig(launch[0]["s"])
    chain = [r for r in _rows(raw, "kernel") if r.get("tokens") == 1]
    if chain:
        out["kernel_overhead_s"] = sig(chain[0]["s"])
    aten = _layer_weighted(raw, "aten")
    if aten:
        out["aten_kernel_s"] = sig(aten)
    bare = _layer_weighted(raw, "aten_bare")
    if bare:
        out.setdefault("_notes", []).append(
            f"aten chains before any profiler in the process: {sig(bare) * 1e6:.4g} us per layer-weighted kernel "
            f"(aten_kernel_s, each chain timed after its kernel census as the lab's probe: "
            f"{sig(aten) * 1e6:.4g} us)" if aten else f"aten chains before any profiler: {sig(bare) * 1e6:.4g} us")
    context = _rows(raw, "cuda_context")
    if context and context[0]["bytes"] > 0:
        out["cuda_context_bytes"] = int(context[0]["bytes"])


def _probe(raw: dict, out: dict) -> None:
    steady = [r for r in _rows(raw, "sustained") if r.get("steady_flops_per_s") and r.get("m", 0) >= LARGE_TOKENS]
    if steady:
        out["sustained_gemm_flops_per_s"] = {"bf16": sig(median([r["steady_flops_per_s"] for r in steady]))}
        out["sustained_after_s"] = sig(median([_settling_s(r["series"], r["steady_flops_per_s"]) for r in steady]))
        burst = [r["burst_sm_mhz"] for r in steady if r.get("burst_sm_mhz")]
        held = [r["steady_sm_mhz"] for r in steady if r.get("steady_sm_mhz")]
        if burst and held:
            out["burst_sm_clock_hz"], out["sustained_sm_clock_hz"] = sig(median(burst) * 1e6), sig(median(held) * 1e6)
    flash = [r for r in _rows(raw, "sustained_flash") if r.get("steady_flops_per_s")]
    if flash:
        longest = max(flash, key=lambda r: r["prompt"])
        out["sustained_attention_flops_per_s"] = {int(longest["head_dim"]): sig(longest["steady_flops_per_s"])}
    per_kernel = [r["per_kernel_s"] for r in _rows(raw, "routing") if r.get("per_kernel_s")]
    if per_kernel:
        out["routing_kernel_s"] = sig(median(per_kernel))
    grouped = _rows(raw, "grouped_gemm")
    if len({r["bytes"] for r in grouped}) >= 2:
        fitted = _optional_fit([r["bytes"] for r in grouped], [r["s"] for r in grouped], "grouped GEMM rows", out)
        if fitted:
            out["grouped_gemm_latency_s"], out["grouped_gemm_stream_bytes_per_s"] = fitted


def measured_section(raw: dict, source: str) -> dict:
    """The `measured:` mapping (roofline.specs.Measured fields) of a raw calibration file; `source`: its path."""
    env = raw.get("env")
    if not isinstance(env, dict) or not isinstance(raw.get("rows"), list):
        raise SectionError("raw file: needs an 'env' mapping and a 'rows' list (python -m roofline.calibrate.measure)")
    for key in ("device", "date", "torch"):
        if not env.get(key):
            raise SectionError(f"env.{key}: missing from the raw file")
    out: dict = {"kind": "calibrated", "device": str(env["device"]),
                 "date": dt.date.fromisoformat(str(env["date"])[:10]), "driver": str(env.get("driver") or "unknown"),
                 "torch": str(env["torch"]), "triton": str(env.get("triton") or "none")}
    try:
        _stream(raw, out)
        _gemm(raw, out)
        _kernels(raw, out)
        _attention(raw, out)
        _probe(raw, out)
    except (KeyError, TypeError) as err:
        raise SectionError(f"rows: a row lacks a field the figures need ({err})") from None
    except FitError as err:
        raise SectionError(str(err)) from None
    notes = out.pop("_notes", None)
    out["source"] = source
    for key in ("kernel_overhead_s", "gemm_latency_s", "decode_attention_latency_s"):
        if key in out:
            out["client_source"] = source
            break
    if any(k in out for k in ("sustained_gemm_flops_per_s", "aten_kernel_s", "grouped_gemm_latency_s",
                              "routing_kernel_s")):
        out["probe_source"] = source
    if notes:
        raw.setdefault("notes", []).extend(notes)
    return out
