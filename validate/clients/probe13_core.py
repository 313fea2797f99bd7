"""validate.clients.probe13's pure-Python side (no torch): shapes, the plan, rate and clock summaries, the clock
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


def dry_run() -> dict:
    """The plan and synthetic results through the same shaping (no torch): 0.2 s at 800 TFLOP/s, then 700."""
    work, starts, durations, t = 2.0e12, [], [], 0.0
    while t < 1.5:
        starts.append(t)
        durations.append(work / (800e12 if t < 0.2 else 700e12))
        t += durations[-1]
    samples = [[i * 0.02, 1980.0 if i < 10 else 1755.0, 690.0, 60.0, "0x0"] for i in range(100)]
    return {"env": {"dry_run": True}, "plan": plan(), "cases": [
        {"name": "synthetic", "tflops": {k: (v / 1e12 if isinstance(v, float) and k != "span_s" else v)
                                         for k, v in rate_summary(starts, durations, work).items() if k != "series"},
         "clocks": {"burst": clock_summary(samples, 0.0, 0.01), "steady": clock_summary(samples, 0.5, 2.0)}}]}


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
