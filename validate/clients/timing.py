"""Timing for whole decoder steps: a CUDA graph of the step, the median of its replays timed with events,
and the kernels one step launches (torch.profiler over one un-graphed call)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable

import torch

from roofline.calibrate.timing import capture  # noqa: F401  (the clients capture their steps as calibrate does)
from validate.common.events import replay_times_ms

WARMUP_REPLAYS = 5
TIMED_REPLAYS = 30




def replay_ms(graph: torch.cuda.CUDAGraph, timed: int = TIMED_REPLAYS, warmup: int = WARMUP_REPLAYS) -> dict:
    """Median (and spread) of `timed` replays, each bracketed by CUDA events, after `warmup` replays."""
    for _ in range(warmup):
        graph.replay()
    torch.cuda.synchronize()
    times = sorted(replay_times_ms(graph, timed))
    return {"ms": statistics.median(times), "ms_p10": times[len(times) // 10], "ms_p90": times[(9 * len(times)) // 10],
            "replays": timed}


def chain_ms(fn: Callable[[], object], calls: int) -> float:
    """Milliseconds per call of `calls` back-to-back calls of fn captured in one graph (median replay)."""
    graph = capture(lambda: [fn() for _ in range(calls)])
    return replay_ms(graph, timed=20)["ms"] / calls


def kernel_census(fn: Callable[[], object]) -> dict:
    """Kernels one call of fn launches: count and the most frequent names (torch.profiler, CUDA activity)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            names[event.name[:90]] += 1
    return {"kernels": sum(names.values()), "top_kernels": names.most_common(14)}
