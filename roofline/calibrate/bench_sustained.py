"""Sustained tensor-core rates (torch only), as the lab's probe measured them (validate/clients/step_costs_gpu.py
h1_gemm, h1_flash, _burst, sustain; constants of validate/clients/step_costs_core.py):

  gemm   per Llama-3.1-8B projection (qkv, o, gate+up, down: the scale's first four model shapes) and M = 2048, 8192,
         16384 in that order (h1_gemm; the figures take M >= 2048, validate/clients/calibrate.py probe_ceilings):
         F.linear bf16 over the shape's rotated weight copies. Each burst follows the previous case's window with no
         idle between, so its clock is the power-capped one the lab's bursts read (1425-1550 MHz on the H200); the
         first shape's M = 512 case runs too (not in the figures) so the first measured burst follows a window as
         the lab's did; the other shapes' first bursts follow the previous shape's M = 16384 window
  flash  causal SDPA at head dim 128, 32 / 8 heads, on the client's strided q, k, v ([B, S, H, D] memory, as
         decoder.layer hands them over), at the longest of the lab's prompts (its figure's case)
Each case: the burst (a graph of one call, 2 warm + 10 timed replays, the SM clock over those replays), then a graph
of ~REPLAY_S of calls captured, IDLE_S idle, and SUSTAIN_S (the scale's sustain_s) of back-to-back replays, every
replay timed: the steady rate is the work of the replays starting past SETTLE_S over their time, the series their
rates binned every BIN_S (the settling time is read from it, roofline.calibrate.section).
"""

from __future__ import annotations

import math
import statistics
import time

import torch
import torch.nn.functional as F

from roofline.calibrate.bench import Bench

IDLE_S, SETTLE_S, REPLAY_S, BIN_S = 1.0, 0.5, 0.03, 0.05
SUSTAIN_TOKENS, LEAD_IN_TOKENS = (2048, 8192, 16384), 512
FLASH_PROMPT, HEADS, KV_HEADS, HEAD_DIM = 16384, 32, 8, 128


def sustained(b: Bench) -> None:
    """Every GEMM case in the lab's order, then the flash case (CUDA and a scale with a sustain window only)."""
    if b.scale.sustain_s <= 0 or b.device != "cuda":
        return
    for index, (n, k) in enumerate(b.scale.gemm_shapes[:4]):
        copies = b.copies(n * k * 2, most=16)
        ws = [b.randn(n, k) for _ in range(copies)]
        for m in ((LEAD_IN_TOKENS,) if index == 0 else ()) + SUSTAIN_TOKENS:
            if b.late(f"sustained_m{m}_n{n}_k{k}"):
                return
            x = b.randn(m, k)
            _case(b, "sustained", f"sustained_m{m}_n{n}_k{k}", lambda x=x, ws=ws: [F.linear(x, w) for w in ws],
                  copies, 2 * m * n * k, m=m, n=n, k=k)
            del x
        del ws
        b.release()
    if not b.late("sustained_flash"):
        p = FLASH_PROMPT
        q = b.randn(1, p, HEADS, HEAD_DIM).transpose(1, 2)
        k, v = (t.view(1, p, KV_HEADS, HEAD_DIM).transpose(1, 2)
                for t in b.randn(1, p, 2 * KV_HEADS * HEAD_DIM).chunk(2, dim=-1))
        flops = 4 * HEADS * HEAD_DIM * p * (p + 1) // 2
        _case(b, "sustained_flash", f"sustained_flash_d{HEAD_DIM}_p{p}",
              lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), 1, flops,
              prompt=p, head_dim=HEAD_DIM)
        b.release()


def _clock(b: Bench, t0: float, t1: float) -> float | None:
    return b.clocks.mean_mhz(t0, t1) if b.clocks is not None and b.clocks.ok else None


def _case(b: Bench, kind: str, name: str, fn, calls: int, flops_per_call: int, **params) -> None:
    """One case: burst, then the sustained window (module docstring); one row with both."""
    graph = b.timer.capture(fn)
    t0 = time.perf_counter()
    times = b.timer.replay_times_s(graph, reps=10, warmup=2)
    burst_mhz = _clock(b, t0, time.perf_counter())
    del graph
    burst_s = statistics.median(times) / calls
    reps = max(1, math.ceil(REPLAY_S / (burst_s * calls)))

    def many():
        for _ in range(reps):
            fn()  # each output dropped: the graph's pool reuses its memory, as the lab's `many`
    graph = b.timer.capture(many)
    torch.cuda.synchronize()
    time.sleep(IDLE_S)
    h0 = time.perf_counter()
    starts, durations = b.timer.back_to_back(graph, b.scale.sustain_s)
    h1 = time.perf_counter()
    del graph
    work = flops_per_call * calls * reps
    steady = [dur for st, dur in zip(starts, durations, strict=True) if st >= SETTLE_S]
    rate = work * len(steady) / sum(steady) if steady else None
    bins: dict[int, list[float]] = {}
    for st, dur in zip(starts, durations, strict=True):
        bins.setdefault(int(st // BIN_S), []).append(work / dur)
    series = [[round(i * BIN_S, 3), statistics.fmean(v)] for i, v in sorted(bins.items())]
    b.add(kind, name, work / rate if rate else burst_s * calls * reps, 0, work, **params, burst_s=burst_s,
          calls=reps * calls, steady_flops_per_s=rate, series=series, burst_sm_mhz=burst_mhz,
          steady_sm_mhz=_clock(b, h0 + SETTLE_S, h1))
