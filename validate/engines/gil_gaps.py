"""A waking thread's wait for the GIL against a busy thread that drops it in short gaps (runs 26 / 27's convoy).

    python validate/engines/gil_gaps.py OUT.json        (~1 min; the standard library only)

Runs 26 / 27 (validate/notes/2026-12-02-run26-27.md) measured, in vLLM's API server at 64 streams, a waking thread's
GIL wait of 4-26 ms on average and up to 0.1-0.5 s, while the loop thread held the GIL in 99 % of py-spy's samples.
CPython's take_gil (Python/ceval_gil.c) lets a waiter ask the holder to drop the GIL only when a whole switch interval
(5 ms) passed with no switch; every drop_gil signals the waiter, which re-reads the switch count and waits a fresh
interval when it finds the GIL taken again. uvloop runs libuv without the GIL (loop.pyx `with nogil: uv.uv_run`) and
takes it back for each callback into Python, so a busy loop drops it in many short gaps. This times that alone: a
main thread spinning in Python for 3 s, dropping the GIL every `period` us in a gap of one of three kinds, and a
thread that sleeps 2 ms and records its lateness (loop_lag.py's thread monitor):

- none: a pure Python spin; the waiter's drop request after one switch interval is its only way in;
- syscall: time.sleep(0), a system call that lets the kernel run the woken waiter;
- c-gap: hashlib.sha256 of 8 KB, which releases the GIL for ~10 us of C with no system call (as uvloop's C code
  between callbacks).

Per point: the waits' count, mean, median, p99 and maximum (ms)."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

TICK_S = 0.002
RUN_S = 3.0
PERIODS_US = (2000, 500, 100, 20)
BUF = b"x" * 8192  # hashlib drops the GIL for data over 2,047 bytes


def _gap(kind: str) -> None:
    if kind == "syscall":
        time.sleep(0)
    else:
        hashlib.sha256(BUF).digest()


def point(kind: str, period_us: float, run_s: float = RUN_S) -> dict[str, float]:
    """The waiter's waits (seconds past its 2 ms sleep) while the main thread spins for `run_s`, dropping the GIL in a
    gap of `kind` every `period_us` (kind "none": never)."""
    stop = time.perf_counter() + run_s
    waits: list[float] = []

    def waiter() -> None:
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            time.sleep(TICK_S)
            waits.append(time.perf_counter() - t0 - TICK_S)

    th = threading.Thread(target=waiter)
    th.start()
    nxt = time.perf_counter()
    while time.perf_counter() < stop:
        if kind != "none" and time.perf_counter() >= nxt:
            _gap(kind)
            nxt = time.perf_counter() + period_us * 1e-6
    th.join()
    w = sorted(waits)
    return {"kind": kind, "period_us": period_us, "n": len(w), "mean_ms": statistics.mean(w) * 1e3,
            "p50_ms": w[len(w) // 2] * 1e3, "p99_ms": w[int(len(w) * 0.99)] * 1e3, "max_ms": w[-1] * 1e3}


def gap_us(kind: str, n: int = 2000) -> float:
    """One gap's own length (us), alone."""
    t0 = time.perf_counter()
    for _ in range(n):
        _gap(kind)
    return (time.perf_counter() - t0) / n * 1e6


def main(out: Path) -> None:
    points = [point("none", 0)]
    for kind in ("syscall", "c-gap"):
        points += [point(kind, p) for p in PERIODS_US]
    d = {"python": sys.version.split()[0], "machine": platform.machine(), "cpus": len(os.sched_getaffinity(0)),
         "switch_interval_s": sys.getswitchinterval(), "gap_us": {k: gap_us(k) for k in ("syscall", "c-gap")},
         "date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "points": points}
    out.write_text(json.dumps(d, indent=1) + "\n")
    gaps = ", ".join(f"{k} {v:.1f} us" for k, v in d["gap_us"].items())
    print(f"Python {d['python']}, {d['cpus']} CPUs, gaps: {gaps}")
    for p in points:
        print(f"  {p['kind']:8s} every {p['period_us']:6.0f} us: n {p['n']:5d}  mean {p['mean_ms']:6.2f}  p50 "
              f"{p['p50_ms']:6.2f}  p99 {p['p99_ms']:7.2f}  max {p['max_ms']:7.2f} ms")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
