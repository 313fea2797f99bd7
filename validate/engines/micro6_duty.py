"""The GEMM rate of a prefill-sized burst under a duty cycle (issue 29: TTFT p50 at a light Poisson load, run 2's
rate4, reads +20 %; validate/notes/2026-11-29-attribute.md found a lone 1,024-token prefill's GEMMs at the burst
rate, 686-772 TFLOP/s, while the planner charges every GEMM the sustained 660 that back-to-back load settles to).

The question: does the board's clock recover between prefills when the GPU spends the time between them on
memory-bound decode work (as a lightly loaded server does) or idle, and over what time does it settle? Three parts,
torch only, timed by CUDA events, nvidia-smi sampling SM clock and power every 20 ms throughout:
- settle: 2 s idle, then back-to-back GEMMs for 4 s; the rate in 50 ms windows (the settling curve);
- duty: a burst of X = 25 ms of GEMMs, then Y ms of fill, repeated for 4 s, for fill in {idle (host sleep), stream
  (a device copy of a 2 GiB buffer: memory-bound, as decode steps are)} and Y in {0, 25, 75, 225} ms; the rate of
  the bursts in the pattern's last 2 s (median), and the clock / power samples inside them;
- the GEMM is Llama-3.1-8B's gate-up projection at a 1,024-token prefill: M = 1,024, N = 28,672, K = 4,096, bf16.

Usage (GPU machine, torch): python3 micro6_duty.py OUT_JSON
MICRO6_PATTERNS="BURST_MS:FILL_MS[:KIND],..." replaces the duty part's patterns (KIND idle or stream, default stream):
micro7 (prepared in session 16, validate/results/engines/h200-micro7-predicted.json) places the threshold between
duty 0.5 and 1 and times bursts longer than the settling time.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import torch

dev = "cuda"
M, N, K = 1024, 28672, 4096
FLOPS = 2 * M * N * K
BURST_S = 0.025


def sampler(path: str) -> subprocess.Popen:
    """nvidia-smi's SM clock and board power every 20 ms into `path` (timestamps local wall time)."""
    return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw",
                             "--format=csv,noheader,nounits", "-lms", "20", "-f", path])


def gemm_rate_series(x, w, out, seconds: float) -> list[tuple[float, float]]:
    """Back-to-back GEMMs for `seconds`: (wall offset s, TFLOP/s) per 50 ms window, by CUDA events per window."""
    res, t0 = [], time.time()
    while time.time() - t0 < seconds:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        n = 0
        while True:
            torch.matmul(x, w.t(), out=out)
            n += 1
            if n % 20 == 0:
                b.record()
                b.synchronize()
                if a.elapsed_time(b) >= 50.0:
                    break
        res.append((time.time() - t0, n * FLOPS / (a.elapsed_time(b) * 1e-3) / 1e12))
    return res


def patterns() -> list[tuple[float, float, str]]:
    """(burst s, fill s, fill kind) of the duty part: MICRO6_PATTERNS, else micro6's 25 ms bursts with 0-225 ms
    of idle, then stream, fill."""
    spec = os.environ.get("MICRO6_PATTERNS")
    if not spec:
        return [(BURST_S, f, k) for k in ("idle", "stream") for f in (0.0, 0.025, 0.075, 0.225)]
    out = []
    for item in spec.split(","):
        parts = item.split(":")
        out.append((float(parts[0]) / 1e3, float(parts[1]) / 1e3, parts[2] if len(parts) > 2 else "stream"))
    return out


def pattern(x, w, out, buf, fill: str, fill_s: float, seconds: float, per_burst: int) -> dict:
    """Bursts of `per_burst` GEMMs (~25 ms), each followed by `fill_s` of `fill`; rates of the bursts in the last
    half of the pattern, and their wall windows (for the clock samples)."""
    rates, windows, t0 = [], [], time.time()
    while time.time() - t0 < seconds:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        w0 = time.time()
        a.record()
        for _ in range(per_burst):
            torch.matmul(x, w.t(), out=out)
        b.record()
        b.synchronize()
        w1 = time.time()
        if w0 - t0 >= seconds / 2:
            rates.append(per_burst * FLOPS / (a.elapsed_time(b) * 1e-3) / 1e12)
            windows.append((w0, w1))
        if fill_s > 0 and fill == "idle":
            time.sleep(fill_s)
        elif fill_s > 0:
            f0 = time.time()
            while time.time() - f0 < fill_s:
                buf[1].copy_(buf[0])
                torch.cuda.synchronize()
    return {"fill": fill, "fill_s": fill_s, "bursts": len(rates), "tflops_median": statistics.median(rates),
            "tflops_min": min(rates), "tflops_max": max(rates), "windows": windows}


def main() -> None:
    out_path = sys.argv[1]
    clock_path = out_path.replace(".json", "-clock.csv")
    smi = sampler(clock_path)
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.02
    out = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
    buf = torch.empty(2, 1 << 30, device=dev, dtype=torch.bfloat16)  # 2 x 2 GiB
    for _ in range(50):
        torch.matmul(x, w.t(), out=out)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(20):
        torch.matmul(x, w.t(), out=out)
    b.record()
    b.synchronize()
    gemm_s = a.elapsed_time(b) * 1e-3 / 20
    per_burst = max(1, round(BURST_S / gemm_s))
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "shape": [M, N, K],
           "per_burst": per_burst, "started": time.time()}
    time.sleep(2.0)
    res["settle"] = gemm_rate_series(x, w, out, 4.0)
    res["duty"] = []
    for burst_s, fill_s, fill in patterns():
        time.sleep(1.0)
        n = max(1, round(burst_s / gemm_s))
        r = pattern(x, w, out, buf, fill, fill_s, 4.0, n)
        r.update(burst_s=burst_s, per_burst=n)
        res["duty"].append(r)
        print(f"duty {burst_s * 1e3:.0f} ms on, {fill} {fill_s * 1e3:.1f} ms: {r['tflops_median']:.0f} TFLOP/s "
              f"({r['tflops_min']:.0f}-{r['tflops_max']:.0f}, {r['bursts']} bursts)", flush=True)
    smi.terminate()
    smi.wait()
    s = res["settle"]
    print("settle first/last windows TFLOP/s:", [round(v) for _, v in s[:6]], [round(v) for _, v in s[-6:]])
    with open(out_path, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
