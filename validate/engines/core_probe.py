"""The host's pure-Python speed core by core: host_probe.py's workload pinned to each CPU in turn
(os.sched_setaffinity), SWEEPS sweeps over every core, printed as JSON {"cores": [...], "sweeps": [[s per core]...]}.

Why: the probe read 1.6-1.9x apart between processes on one lent H200 box (runs 9 and 10) and every host-bound vLLM
figure carries that spread. If the slow reads are the same cores sweep after sweep, the spread is where a process
lands (cores shared with another tenant, or slower ones); if they move between sweeps, it is time (the whole host
slowing), and only interleaved rounds cancel it.

Usage: python3 core_probe.py [SWEEPS]  (default 2; ~0.15 s a core a sweep)
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from host_probe import work  # noqa: E402


def core_s(core: int, reps: int = 5) -> float:
    """The median of `reps` runs of the probe's workload pinned to `core`, seconds."""
    os.sched_setaffinity(0, {core})
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        work()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    sweeps = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    cores = sorted(os.sched_getaffinity(0))
    out = {"cores": cores, "sweeps": [[round(core_s(c), 5) for c in cores] for _ in range(sweeps)]}
    os.sched_setaffinity(0, set(cores))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
