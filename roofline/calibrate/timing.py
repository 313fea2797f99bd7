"""Timing of one microbenchmark on a CUDA device or, for CI, on the CPU (torch + the standard library only).

CUDA (the lab's rules, validate/common/harness.py and validate/clients/timing.py): `fn` is run twice on a side
stream (cuBLAS heuristics, allocations), captured in a CUDA graph, replayed `warmup` times, then `reps` replays
each bracketed by its own CUDA events; the median replay divided by the calls inside one `fn` is the time of one
call as the GPU runs it in a graph-captured step (no Python launch cost).
CPU: the same loop with time.perf_counter around each call of `fn` (a stand-in so the command runs in CI).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def capture(fn: Callable[[], object], warm_calls: int = 2) -> torch.cuda.CUDAGraph:
    """fn run `warm_calls` times on a side stream (compile, autotune, allocate), then captured in a CUDA graph (the
    lab's decoder clients capture their steps with this too: validate/clients/timing.py)."""
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


class Timer:
    """Seconds per call on `device` ('cuda' or 'cpu')."""

    def __init__(self, device: str):
        self.device = device

    @property
    def cuda(self) -> bool:
        """Whether this timer times a CUDA device."""
        return self.device == "cuda"

    def sync(self) -> None:
        """Wait for the device (nothing on the CPU)."""
        if self.cuda:
            torch.cuda.synchronize()

    def capture(self, fn: Callable[[], object], warm_calls: int = 2):
        """fn run `warm_calls` times on a side stream, then captured in a CUDA graph (`capture`)."""
        return capture(fn, warm_calls)

    def replay_times_s(self, graph, reps: int, warmup: int) -> list[float]:
        """Seconds of each of `reps` replays of `graph` (CUDA events around each), after `warmup` replays."""
        for _ in range(warmup):
            graph.replay()
        torch.cuda.synchronize()
        out = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) * 1e-3)
        return out

    def per_call_s(self, fn: Callable[[], object], calls: int = 1, reps: int = 10, warmup: int = 2) -> float:
        """Median seconds of one call, where one `fn()` makes `calls` calls (a chain or rotated input copies)."""
        if self.cuda:
            graph = self.capture(fn)
            times = self.replay_times_s(graph, reps, warmup)
            del graph
        else:
            for _ in range(max(1, warmup)):
                fn()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        return statistics.median(times) / calls

    def do_bench_s(self, fn: Callable[[], object], calls: int = 1, warmup_ms: float = 25.0,
                   rep_ms: float = 100.0) -> float:
        """Median seconds of one call as triton.testing.do_bench (Triton 3.x, python/triton/testing.py) times fn's
        graph in the lab's ceilings family (validate/common/harness.py graph_ms: warm-up 25 ms, repetitions 100 ms):
        one replay, then five replays each after zeroing a 256 MB buffer (the L2 flush) under one pair of events
        (the estimate, flushes included), max(1, int(warmup / estimate)) warm-up replays, then
        max(1, int(rep / estimate)) replays each after a flush and bracketed by its own events; the median over
        `calls`."""
        if not self.cuda:
            return self.per_call_s(fn, calls)
        graph = self.capture(fn, warm_calls=1)  # graph_ms: one eager pass on a side stream before the capture
        graph.replay()
        torch.cuda.synchronize()
        flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            flush.zero_()
            graph.replay()
        end.record()
        torch.cuda.synchronize()
        estimate_ms = max(start.elapsed_time(end) / 5, 1e-4)  # in ms, as do_bench divides
        for _ in range(max(1, int(warmup_ms / estimate_ms))):
            graph.replay()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(max(1, int(rep_ms / estimate_ms)))]
        for start, end in events:
            flush.zero_()
            start.record()
            graph.replay()
            end.record()
        torch.cuda.synchronize()
        times = sorted(s.elapsed_time(e) * 1e-3 for s, e in events)
        del graph, flush
        return times[(len(times) - 1) // 2] / calls  # torch.median's lower middle, as do_bench's "median"

    def back_to_back(self, graph, seconds: float) -> tuple[list[float], list[float]]:
        """(start s, duration s) of back-to-back replays of a captured `graph` for `seconds` from now (<= 3 in
        flight, so the GPU never waits on the host), as validate/clients/step_costs_gpu.py sustain times them."""
        pairs, t0 = [], time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            graph.replay()
            e.record()
            pairs.append((s, e))
            if len(pairs) > 3:
                pairs[-4][1].synchronize()
        torch.cuda.synchronize()
        starts = [pairs[0][0].elapsed_time(s) * 1e-3 for s, _ in pairs]
        durations = [s.elapsed_time(e) * 1e-3 for s, e in pairs]
        return starts, durations


def kernel_count(fn: Callable[[], object]) -> int:
    """CUDA kernels (and memsets) one call of fn launches, counted by torch.profiler's CUDA activity after one
    warm call (validate/clients/timing.py kernel_census). Kineto leaves CUPTI attached when the profiler exits unless
    TEARDOWN_CUPTI=1 (pytorch/pytorch#144455; kineto libkineto/src/CuptiActivityApi.cpp cuptiTearDown_), so every
    timing after the first census runs with CUPTI attached, as the lab's probe timed its chains and routed MLPs."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def rotation(set_bytes: int, l2_bytes: int, free_bytes: int, most: int = 256) -> int:
    """Copies of an input set to cycle through so that none is read from L2: ceil(4 L2 / set), at least 1, at most
    `most` and at most what fits in a quarter of the free memory (validate/common/harness.py rotation_count)."""
    want = -(-4 * l2_bytes // max(set_bytes, 1))
    return max(1, min(want, most, free_bytes // 4 // max(set_bytes, 1)))


class ClockSampler:
    """The SM clock (MHz) every 20 ms in a thread, through torch.cuda.clock_rate (pynvml); no samples without it."""

    def __init__(self):
        import threading

        self.samples: list[tuple[float, float]] = []
        self.stop_flag = threading.Event()
        try:
            torch.cuda.clock_rate()
            self.ok = True
        except Exception:  # noqa: BLE001 - no pynvml / amdsmi: clocks are optional
            self.ok = False
        self.thread = threading.Thread(target=self._poll, daemon=True) if self.ok else None
        if self.thread:
            self.thread.start()

    def _poll(self):
        while not self.stop_flag.is_set():
            try:
                self.samples.append((time.perf_counter(), float(torch.cuda.clock_rate())))
            except Exception:  # noqa: BLE001 - a failed read is a missing sample
                pass
            time.sleep(0.02)

    def mean_mhz(self, t0: float, t1: float) -> float | None:
        """Mean clock of the samples in [t0, t1] (perf_counter s); the nearest sample when none falls inside."""
        samples = list(self.samples)
        inside = [mhz for t, mhz in samples if t0 <= t <= t1]
        if not inside and samples:
            inside = [min(samples, key=lambda tm: abs(tm[0] - (t0 + t1) / 2))[1]]
        return sum(inside) / len(inside) if inside else None

    def stop(self):
        """End the sampling thread."""
        self.stop_flag.set()
