"""CUDA-event timing of a captured graph's replays (torch only: the on-chip microbenchmarks and the decoder
clients run it on a GPU box without roofline's dependencies)."""

from __future__ import annotations

import torch


def replay_times_ms(graph: torch.cuda.CUDAGraph, replays: int) -> list[float]:
    """Milliseconds of each of `replays` replays of `graph`, each bracketed by its own pair of CUDA events."""
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times
