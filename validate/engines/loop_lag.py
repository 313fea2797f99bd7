"""In-process lag monitors for a served vLLM (run 26; issue 29's missing API path, issue 33's N 64 excess).

Installed in every Python process that starts with LOOPLAG_DIR set and `validate/engines/looplag_site` on PYTHONPATH
(its sitecustomize.py calls install()): the API server, the engine core, the benchmark client. Per process, a daemon
thread wakes every TICK_S (2 ms) from time.sleep and records two delays, and the process's CPU time, in windows of
WINDOW_S (1 s) appended to LOOPLAG_DIR/lag-PID.jsonl (the first line names the process: pid, argv, the switch
interval):

- `thread`: the wake-up's lateness past the sleep, i.e. the wait for the GIL (plus the kernel's timer slack, ~0.1 ms
  on an idle process). This is the wait vLLM's tokeniser thread (renderers/base.py:86-93, make_async) meets each time
  it needs the GIL back while the loop thread runs Python.
- `hop`: once a loop runs in the process (asyncio.Runner, which uvloop.run and asyncio.run both use), the thread posts
  a callback with loop.call_soon_threadsafe at its wake-up and the callback records when it ran: the wait for the
  loop's iteration in progress and for the callbacks queued before it. This is the hop a tokenised prompt's return
  (and any executor future's) makes into the loop; api_loop.loop() charges it C / 2 past saturation.

A third figure per window, `posted`, counts hops still outstanding at the window's end. Nothing here changes what the
process does besides ~500 short callbacks a second (a few us each) on its loop.

    python -m validate.engines.loop_lag summary FOLDER [T0 T1]   (each process's windows in [T0, T1] epoch s, merged)
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from pathlib import Path

TICK_S = 2e-3
WINDOW_S = 1.0
EDGES_S = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 1e-1, 2e-1, 5e-1)  # bin i: [EDGES[i-1], EDGES[i])


class Hist:
    """Counts of delays in the bins EDGES_S (the last open above), their sum and maximum."""

    def __init__(self) -> None:
        self.bins = [0] * (len(EDGES_S) + 1)
        self.n = 0
        self.total = 0.0
        self.max = 0.0

    def add(self, s: float) -> None:
        s = max(0.0, s)
        i = 0
        while i < len(EDGES_S) and s >= EDGES_S[i]:
            i += 1
        self.bins[i] += 1
        self.n += 1
        self.total += s
        self.max = max(self.max, s)

    def merge(self, d: dict) -> None:
        self.bins = [a + b for a, b in zip(self.bins, d["bins"], strict=True)]
        self.n += d["n"]
        self.total += d["sum"]
        self.max = max(self.max, d["max"])

    def as_dict(self) -> dict:
        return {"n": self.n, "sum": self.total, "max": self.max, "bins": self.bins}

    def quantile(self, q: float) -> float:
        """The q-quantile, read as the upper edge of the bin it falls in (at most the maximum)."""
        if self.n == 0:
            return math.nan
        need, seen = q * self.n, 0
        for i, c in enumerate(self.bins):
            seen += c
            if seen >= need and c:
                return min(EDGES_S[i], self.max) if i < len(EDGES_S) else self.max
        return self.max

    def mean(self) -> float:
        return self.total / self.n if self.n else math.nan


class Monitor:
    """The daemon thread and, once a loop runs, its hops (module docstring)."""

    def __init__(self, folder: Path, tick_s: float = TICK_S, window_s: float = WINDOW_S) -> None:
        self.path = folder / f"lag-{os.getpid()}.jsonl"
        self.tick_s, self.window_s = tick_s, window_s
        self.loop = None
        self.lock = threading.Lock()
        self.thread_h, self.hop_h = Hist(), Hist()
        self.posted = 0
        folder.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps({"pid": os.getpid(), "argv": sys.argv[:8], "t": time.time(),
                                "switch_interval_s": sys.getswitchinterval(), "tick_s": tick_s}) + "\n")

    def attach(self, loop) -> None:
        self.loop = loop

    def _hop(self, sent: float) -> None:
        lag = time.perf_counter() - sent
        with self.lock:
            self.hop_h.add(lag)
            self.posted -= 1

    def _flush(self, t0: float, cpu0: float) -> None:
        with self.lock:
            rec = {"t0": t0, "t1": time.time(), "cpu_s": time.process_time() - cpu0, "thread": self.thread_h.as_dict(),
                   "hop": self.hop_h.as_dict(), "posted": self.posted, "loop": self.loop is not None}
            self.thread_h, self.hop_h = Hist(), Hist()
        with self.path.open("a") as f:
            f.write(json.dumps(rec) + "\n")

    def run(self) -> None:
        t0, cpu0 = time.time(), time.process_time()
        while True:
            before = time.perf_counter()
            time.sleep(self.tick_s)
            woke = time.perf_counter()
            loop = self.loop
            with self.lock:
                self.thread_h.add(woke - before - self.tick_s)
            if loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(self._hop, woke)
                    with self.lock:
                        self.posted += 1
                except RuntimeError:  # the loop closed between the check and the call
                    self.loop = None
            if time.time() - t0 >= self.window_s:
                self._flush(t0, cpu0)
                t0, cpu0 = time.time(), time.process_time()


def install(folder: str | os.PathLike) -> Monitor:
    """Start the monitor in this process and attach it to the first loop an asyncio.Runner makes."""
    import asyncio.runners

    mon = Monitor(Path(folder))
    original = asyncio.runners.Runner._lazy_init

    def _lazy_init(self):
        original(self)
        if mon.loop is None:
            mon.attach(self._loop)

    asyncio.runners.Runner._lazy_init = _lazy_init
    threading.Thread(target=mon.run, name="loop-lag", daemon=True).start()
    return mon


# ---- reading the files ----

def read(path: Path) -> tuple[dict, list[dict]]:
    """(the process's header, its windows); a torn last line (the process killed mid-write) is dropped."""
    lines = path.read_text().splitlines()
    head, windows = json.loads(lines[0]), []
    for line in lines[1:]:
        try:
            windows.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return head, windows


def merged(windows: list[dict], t0: float = -math.inf, t1: float = math.inf) -> dict:
    """The windows wholly inside [t0, t1], merged: both histograms, CPU seconds and wall seconds."""
    th, hop, cpu, wall = Hist(), Hist(), 0.0, 0.0
    for w in windows:
        if w["t0"] >= t0 and w["t1"] <= t1:
            th.merge(w["thread"])
            hop.merge(w["hop"])
            cpu += w["cpu_s"]
            wall += w["t1"] - w["t0"]
    return {"thread": th, "hop": hop, "cpu_s": cpu, "wall_s": wall}


def role(head: dict) -> str:
    """api (vllm serve's API server), client (vllm bench), or the first words of argv."""
    argv = " ".join(head["argv"])
    if " bench " in f" {argv} ":
        return "client"
    if " serve " in f" {argv} ":
        return "api"
    return argv[:60]


def summary(folder: Path, t0: float = -math.inf, t1: float = math.inf) -> str:
    rows = ["pid     role                                 wall s  cpu   thread mean/p50/p99/max ms      "
            "hop n  mean/p50/p99/max ms"]
    for path in sorted(folder.glob("lag-*.jsonl")):
        head, windows = read(path)
        m = merged(windows, t0, t1)
        if m["wall_s"] == 0:
            continue
        th, hop = m["thread"], m["hop"]
        q = lambda h: "/".join(f"{1e3 * v:.2f}" for v in (h.mean(), h.quantile(.5), h.quantile(.99), h.max))  # noqa: E731
        rows.append(f"{head['pid']:<7} {role(head):<36} {m['wall_s']:6.1f} {m['cpu_s'] / m['wall_s']:5.2f}  "
                    f"{q(th):<30} {hop.n:5d}  {q(hop) if hop.n else '-'}")
    return "\n".join(rows)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "summary":
        bounds = [float(x) for x in sys.argv[3:5]]
        print(summary(Path(sys.argv[2]), *bounds))
    else:
        print("usage: python -m validate.engines.loop_lag summary FOLDER [T0 T1]")
        sys.exit(2)
