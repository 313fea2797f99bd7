"""Timing for whole decoder steps: a CUDA graph of the step, the median of its replays timed with events,
and the kernels one step launches (torch.profiler over one un-graphed call)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable

import torch

from validate.common.events import replay_times_ms

WARMUP_REPLAYS = 5
TIMED_REPLAYS = 30


def capture(fn: Callable[[], object], warm_calls: int = 2) -> torch.cuda.CUDAGraph:
    """fn run `warm_calls` times on a side stream (compile, autotune, allocate), then captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warm_calls):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph


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
