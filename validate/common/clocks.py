"""The SM clock and board power while each case is timed: `nvidia-smi` sampled in the background during a bench,
and each case's samples (those inside the windows its timings ran in, `harness.median_ms`) reduced to medians.

Why: the on-chip rates of the ceilings family run at the boost clock, while a kernel that draws the board's power
limit runs slower; a results file that records each case's clock lets `validate compare` tell a clock effect from
a modelling one instead of assuming one (AQUA-KV's clock_scale assumed the clock of large cuBLAS GEMMs).

The sampler writes `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 20`
to a file; nvidia-smi's timestamps are local time, read back with the same clock as `time.time()`. Without
nvidia-smi every case gets no "clocks" and the bench runs as before.
"""

from __future__ import annotations

import datetime as dt
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

QUERY = ["--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "20"]
WINDOWS: list[tuple[float, float]] = []  # (start, end) of every timing since the last `take_windows`


def mark(start: float, end: float) -> None:
    """Record one timing's wall-clock window (harness.median_ms calls it around do_bench)."""
    WINDOWS.append((start, end))


def take_windows() -> list[tuple[float, float]]:
    """The windows recorded since the last call, and forget them."""
    out = WINDOWS[:]
    WINDOWS.clear()
    return out


def parse_line(line: str) -> tuple[float, float, float] | None:
    """(epoch seconds, SM MHz, watts) of one sample line, None for a line that is not one (a header, "[N/A]")."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 3:
        return None
    try:
        stamp = dt.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()  # local time, as time.time()
        return stamp, float(parts[1]), float(parts[2])
    except ValueError:
        return None


def summarize(samples: list[tuple[float, float, float]], windows: list[tuple[float, float]]) -> dict | None:
    """Median SM clock (MHz) and power (W) of the samples inside any of `windows`, with their count and the
    lowest clock; None when no sample falls inside."""
    inside = [s for s in samples if any(a <= s[0] <= b for a, b in windows)]
    if not inside:
        return None
    clocks, watts = [s[1] for s in inside], [s[2] for s in inside]
    return {"sm_mhz": statistics.median(clocks), "sm_mhz_min": min(clocks), "power_w": statistics.median(watts),
            "samples": len(inside)}


class Sampler:
    """nvidia-smi writing samples to a temporary file from `start` to `stop`; `case_clocks` reduces the samples of
    the windows timed since the last call."""

    def __init__(self) -> None:
        self.proc = None
        self.path = Path(tempfile.mkstemp(prefix="clocks-", suffix=".csv")[1])
        self.offset = 0  # bytes of the file already parsed
        self.samples: list[tuple[float, float, float]] = []

    def start(self) -> Sampler:
        exe = shutil.which("nvidia-smi")
        if exe:
            self.proc = subprocess.Popen([exe, *QUERY], stdout=self.path.open("w"), stderr=subprocess.DEVNULL)
            time.sleep(0.1)
        return self

    def case_clocks(self) -> dict | None:
        """The clocks of the windows timed since the last call (`take_windows`), or None without a sampler."""
        windows = take_windows()
        if self.proc is None or not windows:
            return None
        time.sleep(0.05)  # the last sample of the window reaches the file
        with self.path.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        complete = chunk[:chunk.rfind(b"\n") + 1]  # a line still being written waits for the next call
        self.offset += len(complete)
        self.samples = [s for s in self.samples if s[0] >= windows[0][0]]
        self.samples += [s for s in map(parse_line, complete.decode(errors="replace").splitlines()) if s]
        return summarize(self.samples, windows)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=5)
        self.path.unlink(missing_ok=True)


# ---- the effective SM clock, read inside the GPU -------------------------------------------------------------------
# nvidia-smi's clocks.sm is a driver reading, sampled every 20 ms. The probe reads the clock the SMs actually run at:
# one warp on a side stream reads %clock64 (SM cycles) and %globaltimer (ns) at its start and at its end while the
# case's CUDA graph replays on the main stream; f = d(clock64) / d(globaltimer). Where the probe waits for a free
# slot on a full SM does not matter: it measures only between its own two readings. `validate bench --probe-clock`
# turns it on (harness.graph_ms calls `probe_graph` after timing); each case's probes reduce to "probe_mhz".
PROBE = {"on": False, "mhz": []}
PROBE_SECONDS = 0.3  # the replays' span; the probe spins half of it at the boost clock
BOOST_HZ = 1.98e9


def _probe_kernel():
    import triton
    import triton.language as tl
    from triton.language.extra.cuda import globaltimer

    @triton.jit
    def clock64():
        return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)

    @triton.jit
    def probe_kernel(out_ptr, spin):
        t0 = globaltimer()
        c0 = clock64()
        c = c0
        while c - c0 < spin:
            c = clock64()
        t1 = globaltimer()
        tl.store(out_ptr, t0)
        tl.store(out_ptr + 1, c0)
        tl.store(out_ptr + 2, t1)
        tl.store(out_ptr + 3, c)

    return probe_kernel


_KERNEL: list = []


def _spin_cycles(seconds: float) -> int:
    """The probe's spin: half of `seconds` at the boost clock (it ends inside the replays at any lower clock)."""
    return int(seconds / 2 * BOOST_HZ)


def probe_mhz(replay, replay_ms: float, seconds: float = PROBE_SECONDS) -> float:
    """The SMs' clock (MHz) while `replay` (one CUDA graph replay of `replay_ms`) runs back to back for about
    `seconds`: the probe kernel on a side stream, started after two replays are queued."""
    import torch

    if not _KERNEL:
        _KERNEL.append(_probe_kernel())
    kernel = _KERNEL[0]
    out = torch.zeros(4, dtype=torch.int64, device="cuda")
    kernel[(1,)](out, 1000, num_warps=1)  # compile outside the window
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    n = max(4, int(seconds * 1e3 / max(replay_ms, 1e-3)))
    for _ in range(2):
        replay()
    with torch.cuda.stream(side):
        kernel[(1,)](out, _spin_cycles(seconds), num_warps=1)
    for _ in range(n):
        replay()
    torch.cuda.synchronize()
    t0, c0, t1, c1 = out.tolist()
    return (c1 - c0) / max(t1 - t0, 1) * 1e3


def idle_probe() -> dict:
    """The probe on an idle GPU ("idle_mhz"), and torch.cuda._sleep's clock64 spin timed by CUDA events
    ("sleep_event_mhz": another timer than %globaltimer, as a check on the probe's)."""
    import torch

    idle = probe_mhz(lambda: None, 1.0)
    cycles = _spin_cycles(PROBE_SECONDS)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    return {"idle_mhz": round(idle, 1), "sleep_event_mhz": round(cycles / (start.elapsed_time(end) * 1e3), 1)}


def probe_graph(graph, replay_ms: float) -> None:
    """Record the probe's clock for one timed graph (`PROBE` on), else nothing."""
    if PROBE["on"]:
        PROBE["mhz"].append(probe_mhz(graph.replay, replay_ms))


def take_probes() -> dict:
    """{"probe_mhz", "probe_mhz_min", "probes"} of the probes since the last call ({} without any), and forget them."""
    got, PROBE["mhz"] = PROBE["mhz"], []
    if not got:
        return {}
    return {"probe_mhz": round(statistics.median(got), 1), "probe_mhz_min": round(min(got), 1), "probes": len(got)}
