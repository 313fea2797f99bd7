"""validate.clients.step_costs's pure-Python side (no torch): shapes, the plan, rate and clock summaries, the clock
sampler and the dry run."""

from __future__ import annotations

import statistics
import time

GEMM_TOKENS = (512, 2048, 8192, 16384)
# (N, K) of F.linear(h, w) in decoder.layer for Llama-3.1-8B: fused qkv, o, fused gate+up, down
GEMM_SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
FLASH_PROMPTS = (2048, 8192, 16384)
HEADS, KV_HEADS, HEAD_DIM, LAYERS, D_MODEL, INTER, VOCAB = 32, 8, 128, 32, 4096, 14336, 128256
MIX_PROMPT = 8192
SUSTAIN_S, IDLE_S, SETTLE_S, REPLAY_S, BIN_S = 1.5, 1.0, 0.5, 0.03, 0.05
CHAIN = 2000
MOE_BATCHES = (1, 2, 4, 8, 16, 32, 64)
MOE_EXPERTS, MOE_TOP_K, MOE_INTER = 8, 2, 14336
PARTS = ("h1", "h2", "h3")
# the h2 chains (step_costs_gpu._chain_kinds): the small ops of the eager decode layer, then tiny GEMMs
CHAIN_KINDS = ("add_inplace_1x4096", "add", "mul_weight", "to_fp32", "to_bf16", "pow2_fp32", "mean_fp32", "add_eps",
               "rsqrt", "mul_fp32_bcast", "neg_strided", "cat_rope", "mul_rope", "index_put_kv", "silu_strided",
               "mul_silu_up", "rms_norm", "rope", "linear_1x4096_n128", "linear_1x4096_n4096_l2",
               "linear_1x4096_n4096_dram")


def gemm_flops(m: int, n: int, k: int) -> int:
    """2 M N K."""
    return 2 * m * n * k


def flash_flops(prompt: int, heads: int = HEADS, head_dim: int = HEAD_DIM) -> int:
    """Causal attention FLOPs as micro.flash_prefill counts them: 4 H D P (P + 1) / 2 (QK and PV)."""
    return 4 * heads * head_dim * prompt * (prompt + 1) // 2


def plan() -> dict:
    """What each part runs (pure Python): shapes, FLOPs per call, and the rough seconds it takes."""
    gemms = [{"name": f"gemm_{label}_m{m}", "m": m, "n": n, "k": k, "flops": gemm_flops(m, n, k)}
             for label, (n, k) in GEMM_SHAPES.items() for m in GEMM_TOKENS]
    flash = [{"name": f"flash_p{p}", "prompt": p, "flops": flash_flops(p)} for p in FLASH_PROMPTS]
    per_sustained = IDLE_S + SUSTAIN_S + 0.3
    return {"h1": {"gemm": gemms, "flash": flash, "mix_prompt": MIX_PROMPT,
                   "seconds": (len(gemms) + len(flash) + 1) * per_sustained},
            "h2": {"chain": CHAIN, "seconds": 20.0}, "h3": {"batches": list(MOE_BATCHES), "seconds": 15.0}}


def rate_summary(starts_s: list[float], durations_s: list[float], work: float, settle_s: float = SETTLE_S,
                 bin_s: float = BIN_S) -> dict:
    """Rates (work / s) of back-to-back replays: the first, all, those starting after `settle_s` ("steady") and
    those of the last 0.5 s; the series binned every `bin_s` (start time, mean rate of the replays starting there)."""
    rates = [work / d for d in durations_s]
    steady = [d for s, d in zip(starts_s, durations_s, strict=True) if s >= settle_s]
    end = starts_s[-1] + durations_s[-1]
    last = [d for s, d in zip(starts_s, durations_s, strict=True) if s >= end - 0.5]
    bins: dict[int, list[float]] = {}
    for s, r in zip(starts_s, rates, strict=True):
        bins.setdefault(int(s // bin_s), []).append(r)
    return {"replays": len(durations_s), "span_s": end, "first": rates[0],
            "all": work * len(durations_s) / sum(durations_s),
            "steady": work * len(steady) / sum(steady) if steady else None,
            "last_half_s": work * len(last) / sum(last) if last else None,
            "series": [[round(b * bin_s, 3), statistics.fmean(v)] for b, v in sorted(bins.items())]}


def clock_summary(samples: list[list], t0: float, t1: float) -> dict | None:
    """Mean SM clock (MHz), power (W) and temperature (C) of the samples taken in [t0, t1] (host seconds since the
    probe started); the nearest sample when none falls inside (a burst shorter than the sampling period)."""
    samples = list(samples)  # the sampler thread may be appending
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if not inside and samples:
        inside = [min(samples, key=lambda s: abs(s[0] - (t0 + t1) / 2))]
    if not inside:
        return None

    def mean(i: int) -> float | None:
        values = [s[i] for s in inside if s[i] is not None]
        return statistics.fmean(values) if values else None

    return {"samples": len(inside), "sm_mhz": mean(1), "power_w": mean(2), "temp_c": mean(3),
            "reasons": sorted({s[4] for s in inside if s[4] is not None})}


def moe_law(active_experts: float, n: int, k: int, latency_s: float, stream_bytes_per_s: float) -> float:
    """The streaming-GEMM law the step model prices a skinny GEMM at: alpha + weight bytes read / bandwidth (bf16)."""
    return latency_s + active_experts * n * k * 2 / stream_bytes_per_s


def sustained_view(summary: dict, samples: list[list], h0: float, h1: float, unit: float = 1e12) -> dict:
    """rate_summary's rates in `unit` (TFLOP/s), with the clocks of the first 0.1 s and of the steady part of the
    window [h0, h1] (host seconds since the probe started)."""
    rates = {k: (summary[k] / unit if summary[k] is not None else None) for k in ("first", "all", "steady",
                                                                                  "last_half_s")}
    return {**rates, "series": [[t, r / unit] for t, r in summary["series"]], "replays": summary["replays"],
            "clocks": {"first_0.1s": clock_summary(samples, h0, h0 + 0.1),
                       "steady": clock_summary(samples, h0 + SETTLE_S, h1)}, "window_s": [h0, h1]}


def rate_row(name: str, kind: str, flops: int, burst_s: float, burst_clocks: dict | None, sustained: dict,
             **extra) -> dict:
    """One h1 case: the burst rate (micro.py's procedure), the steady one (sustained_view) and their ratio."""
    burst = flops / burst_s / 1e12
    steady = sustained["steady"]
    return {"name": name, "part": "h1", "kind": kind, **extra, "flops": flops, "burst_tflops": burst,
            "burst_clocks": burst_clocks, "steady_tflops": steady,
            "steady_over_burst": steady / burst if steady else None, "sustained": sustained}


def chain_row(kind: str, calls: int, census: dict, ms: float) -> dict:
    """One h2 chain: `calls` calls of one op in a graph, replayed in `ms`; per call and per kernel launched."""
    kernels = census["kernels"]
    return {"name": f"chain_{kind}", "part": "h2", "kind": kind, "calls": calls, "kernels_per_call": kernels,
            "top_kernels": census["top_kernels"], "ms": ms, "per_call_s": ms * 1e-3 / calls,
            "per_kernel_s": ms * 1e-3 / (calls * kernels) if kernels else None}


def moe_row(batch: int, active: list[int], moe_s: float, up_s: float, down_s: float, census: dict) -> dict:
    """One h3 case: decoder.moe_mlp of Mixtral-8x7B at decode batch `batch` (seconds per call, two layers
    alternating), its two grouped GEMM calls alone, the experts each layer touched, bytes per expert and the census
    of one moe_mlp call."""
    return {"name": f"moe_b{batch}", "part": "h3", "kind": "moe", "batch": batch, "active_experts": active,
            "moe_mlp_s": moe_s, "grouped_w13_s": up_s, "grouped_w2_s": down_s,
            "w13_bytes_per_expert": 2 * MOE_INTER * D_MODEL * 2, "w2_bytes_per_expert": D_MODEL * MOE_INTER * 2,
            "kernels": census["kernels"], "top_kernels": census["top_kernels"]}


# the dry run's synthetic routed MLP: grouped GEMM calls at 10 us + bytes / 2.5 TB/s, the router GEMM at 5 us +
# bytes / 2.5 TB/s (its 2 kernels: nvjet + split-K reduce), 23 routing kernels of 3 us, 2 x 2 grouped GEMM kernels
DRY_GROUPED = (10e-6, 2.5e12)
DRY_ROUTER = (5e-6, 2.5e12)
DRY_ROUTING_KERNEL_S = 3e-6
DRY_CENSUS = {"kernels": 29, "top_kernels": [
    ["Memcpy DtoD (Device -> Device)", 3], ["void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t", 2],
    ["_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm9x", 2],
    ["nvjet_sm90_tst_64x8_64x16_1x1_h_bz_splitK_TNT", 1], ["void cublasLt::splitKreduce_kernel<32, 16, int, float", 1],
    ["void at::native::sbtopk::gatherTopK<c10::BFloat16, unsigned int, 1>", 1]]}


def _dry_moe(batch: int) -> dict:
    active = [min(MOE_EXPERTS, MOE_TOP_K * batch)] * 2
    row = moe_row(batch, active, 0.0, 0.0, 0.0, DRY_CENSUS)
    up, down = (DRY_GROUPED[0] + active[0] * row[k] / DRY_GROUPED[1] for k in ("w13_bytes_per_expert",
                                                                                "w2_bytes_per_expert"))
    router = DRY_ROUTER[0] + MOE_EXPERTS * D_MODEL * 2 / DRY_ROUTER[1]
    moe = up + down + router + 23 * DRY_ROUTING_KERNEL_S
    return {**row, "grouped_w13_s": up, "grouped_w2_s": down, "moe_mlp_s": moe}


def dry_run() -> dict:
    """The plan and synthetic rows through the same shaping as the GPU run (no torch): a GEMM at 800 TFLOP/s for
    0.2 s, then 700 (SM clock 1980 -> 1755 MHz), 2 us per call of every chain kind, and routed MLPs of the
    DRY_* figures above."""
    work, starts, durations, t = 2.0e12, [], [], 0.0
    while t < SUSTAIN_S:
        starts.append(t)
        durations.append(work / (800e12 if t < 0.2 else 700e12))
        t += durations[-1]
    samples = [[i * 0.02, 1980.0 if i < 10 else 1755.0, 690.0, 60.0, "0x0"] for i in range(100)]
    sustained = sustained_view(rate_summary(starts, durations, work), samples, 0.0, SUSTAIN_S)
    cases = [rate_row("gemm_synthetic_m8192", "gemm", int(work), work / 800e12, clock_summary(samples, 0.0, 0.01),
                      sustained, m=8192, n=28672, k=4096),
             rate_row("flash_synthetic_p16384", "flash", int(work), work / 800e12, None, sustained, prompt=16384)]
    cases += [chain_row(kind, CHAIN, {"kernels": 1, "top_kernels": []}, CHAIN * 2e-3) for kind in CHAIN_KINDS]
    cases += [_dry_moe(b) for b in MOE_BATCHES]
    return {"env": {"dry_run": True}, "plan": plan(), "cases": cases}


class ClockSampler:
    """SM clock, power, temperature and clock-event reasons every `period_s`, in a thread (pynvml) or from an
    nvidia-smi subprocess (-lms); samples [t_s since `origin`, MHz, W, C, reasons]."""

    def __init__(self, origin: float, period_s: float = 0.02):
        import threading

        self.origin, self.period_s, self.samples, self.stop_flag = origin, period_s, [], threading.Event()
        self.source, self.static = "none", {}
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(_nvml_index())
            self.source = "pynvml"
            self.static = {"power_limit_w": pynvml.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1e3,
                           "max_sm_mhz": pynvml.nvmlDeviceGetMaxClockInfo(self.handle, pynvml.NVML_CLOCK_SM)}
            target = self._poll_nvml
        except Exception:  # noqa: BLE001 - no pynvml: nvidia-smi
            self.source = "nvidia-smi"
            target = self._poll_smi
        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def _poll_nvml(self):
        nv, h = self.nvml, self.handle
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        while not self.stop_flag.is_set():
            try:
                self.samples.append([time.perf_counter() - self.origin, nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                                     nv.nvmlDeviceGetPowerUsage(h) / 1e3,
                                     nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                                     hex(reasons(h)) if reasons else None])
            except Exception:  # noqa: BLE001 - a failed read is a missing sample
                pass
            time.sleep(self.period_s)

    def _poll_smi(self):
        import subprocess

        fields = ["clocks.sm", "power.draw", "temperature.gpu"]
        for extra in ("clocks_event_reasons.active", "clocks_throttle_reasons.active", None):
            query = fields + ([extra] if extra else [])
            probe = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(query)}", "--format=csv,noheader,nounits",
                                    "-i", str(_nvml_index())], capture_output=True, text=True)
            if probe.returncode == 0:
                break
        else:
            return
        static = subprocess.run(["nvidia-smi", "--query-gpu=power.limit,clocks.max.sm", "--format=csv,noheader,"
                                 "nounits", "-i", str(_nvml_index())], capture_output=True, text=True).stdout.split(",")
        if len(static) == 2:
            self.static = {"power_limit_w": _num(static[0]), "max_sm_mhz": _num(static[1])}
        proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(query)}", "--format=csv,noheader,nounits",
                                 "-i", str(_nvml_index()), "-lms", str(max(100, int(self.period_s * 1e3)))],
                                stdout=subprocess.PIPE, text=True)
        for line in proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            self.samples.append([time.perf_counter() - self.origin, _num(parts[0]), _num(parts[1]), _num(parts[2]),
                                 parts[3] if len(parts) > 3 else None])
            if self.stop_flag.is_set():
                break
        proc.terminate()

    def stop(self):
        self.stop_flag.set()
        self.thread.join(timeout=2)


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _nvml_index() -> int:
    import os

    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(first) if first.isdigit() else 0
