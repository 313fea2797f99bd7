"""A compiled fleet run's traces, assembled in time proportional to what is read (serving.fleet's kernel path).

serving.kernel_loop returns one record table in event order, each row with its replica (column 7), and the
per-request first-token / finish times and routing. Fleet._traces (the Python loop's assembly, the reference)
gives each replica a Trace of its own records and full-length per-request arrays (NaN for other replicas'
requests), and a merged Trace of every record by start time. Built eagerly for 32 x 100,000 requests under EAGLE
(30.8 M records) that is a stable argsort of the records by replica, 32 x 2 full-length arrays of 3.2 M requests
and two copies of the record table: ~16 CPU-s of ~80 (benchmarks/serving_scale.md, session 18). Here instead:
- the records are split by replica with one counting pass (`split`: a stable counting sort, O(records)); a
  replica's Trace is built only when it is read (KernelReplicas.__getitem__), with the same values as
  Fleet._traces would give it;
- the merged table is a view of the kernel's table when starts strictly increase along it (event order: starts
  never decrease, so only runs of equal starts can need reordering; `merge_order` orders those runs by replica,
  as a stable sort by start of the replicas' lists concatenated in replica order does);
- the API server's emission delay (serving.clients.emission_delay_s, Trace.emitted per replica in the Python
  path) is computed for every request against its own replica's records in one compiled pass (`emission_delays`,
  the same row rule: the last record of its replica starting before its first token).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from roofline.serving.kernel_layout import LAUNCH_COL
from roofline.serving.prefix_cache import merged_stats
from roofline.serving.requests import Requests
from roofline.serving.simulate import Trace

REPLICA = 7  # the kernel's record column holding the replica (serving.kernel_layout: REC_FIELDS)


@njit(cache=True)
def split(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A stable counting sort of integer `keys` in [0, n): (order, bounds), order[bounds[j]:bounds[j + 1]] the
    positions holding key j in their original order (what np.argsort(keys, kind="stable") gives, in O(len))."""
    bounds = np.zeros(n + 1, dtype=np.int64)
    for i in range(len(keys)):
        bounds[int(keys[i]) + 1] += 1
    for j in range(n):
        bounds[j + 1] += bounds[j]
    fill = bounds[:n].copy()
    order = np.empty(len(keys), dtype=np.int64)
    for i in range(len(keys)):
        j = int(keys[i])
        order[fill[j]] = i
        fill[j] += 1
    return order, bounds


@njit(cache=True)
def merge_order(start: np.ndarray, replica: np.ndarray) -> tuple[int, np.ndarray]:
    """The records in (start, replica, event order) order, as np.lexsort((replica, start)) sorts them: (0, empty)
    when that is event order itself (no reordering needed), (1, order) when only runs of equal starts need
    reordering, (2, empty) when a start decreases along event order (the caller sorts in full)."""
    m = len(start)
    ties = False
    for i in range(1, m):
        if start[i] < start[i - 1]:
            return 2, np.empty(0, dtype=np.int64)
        if start[i] == start[i - 1] and replica[i] < replica[i - 1]:
            ties = True
    if not ties:
        return 0, np.empty(0, dtype=np.int64)
    order = np.arange(m)
    i = 0
    while i < m:
        k = i + 1
        while k < m and start[k] == start[i]:
            k += 1
        if k - i > 1:
            order[i:k] = i + np.argsort(replica[i:k], kind="mergesort")
        i = k
    return 1, order


@njit(cache=True, inline="always")
def at_or_after(rec, order, lo, hi, t):
    """The first position p in [lo, hi) of a replica's records (rec[order[p]], starts nondecreasing) whose start is
    at or after t (np.searchsorted side "left"); hi if none."""
    a, b = lo, hi
    while a < b:
        mid = (a + b) >> 1
        if rec[order[mid], 0] < t:
            a = mid + 1
        else:
            b = mid
    return a


@njit(cache=True)
def emission_delays(rec: np.ndarray, order: np.ndarray, bounds: np.ndarray, routed: np.ndarray,
                    first: np.ndarray, per_seq_s: float, launched: bool = False) -> np.ndarray:
    """Per request, serving.clients.emission_delay_s against its own replica's records: per_seq_s x the running
    count (column 2) of the last record of its replica starting before its first token (np.searchsorted side
    "left" minus 1, clipped to the replica's records); with `launched`, plus serving.clients.launch_delay_s: the
    launch seconds (column LAUNCH_COL) of the record starting exactly at the first token (the next step, back to
    back), found by the same search (one search a request: each step of it a cache miss in a fleet's records);
    0 without a first token or records."""
    out = np.zeros(len(first))
    for i in range(len(first)):
        f = first[i]
        if not np.isfinite(f):
            continue
        j = routed[i]
        lo, hi = bounds[j], bounds[j + 1]
        if hi == lo:
            continue
        a = at_or_after(rec, order, lo, hi, f)
        row = min(max(a - 1, lo), hi - 1)
        out[i] = per_seq_s * rec[order[row], 2]
        if launched and a < hi and rec[order[a], 0] == f:
            out[i] += rec[order[a], LAUNCH_COL]
    return out


class KernelReplicas(Sequence):
    """Each replica's Trace of one compiled fleet run, built when first read (the values Fleet._traces gives:
    its own records in event order, the per-request arrays full length with NaN for other replicas' requests)."""

    def __init__(self, sent: Requests, first: np.ndarray, finish: np.ndarray, routed: np.ndarray, rec: np.ndarray,
                 split_rec: tuple[np.ndarray, np.ndarray], cap_bytes: float, preempted: np.ndarray,
                 cached: list | None) -> None:
        self.sent, self.first, self.finish, self.routed, self.rec = sent, first, finish, routed, rec
        self.order, self.bounds = split_rec
        self.cap_bytes, self.preempted, self.cached = cap_bytes, preempted, cached
        self._mine: tuple[np.ndarray, np.ndarray] | None = None
        self._built: dict[int, Trace] = {}

    def __len__(self) -> int:
        return len(self.preempted)

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(len(self)))]
        j = int(j)
        if j < 0:
            j += len(self)
        if not 0 <= j < len(self):
            raise IndexError(f"replica {j} of {len(self)}")
        if j not in self._built:
            self._built[j] = self._build(j)
        return self._built[j]

    def _build(self, j: int) -> Trace:
        if self._mine is None:  # each replica's requests, by one counting pass over the routing
            self._mine = split(self.routed, len(self))
        by_replica, counts = self._mine
        mine = by_replica[counts[j]:counts[j + 1]]
        f, e = np.full(len(self.first), np.nan), np.full(len(self.finish), np.nan)
        f[mine], e[mine] = self.first[mine], self.finish[mine]
        rows = self.order[self.bounds[j]:self.bounds[j + 1]]
        return Trace(self.sent, f, e, np.ascontiguousarray(self.rec[rows, :REPLICA]), self.cap_bytes,
                     int(self.preempted[j]), self.cached[j] if self.cached is not None else None,
                     launch_s=np.ascontiguousarray(self.rec[rows, LAUNCH_COL]))

    def stats(self) -> dict | None:
        """The fleet's prefix-cache stats (serving.fleet._merged_stats's sums) from each replica's, without
        building the replicas' Traces."""
        return None if self.cached is None else merged_stats(self.cached)

    def emitted(self, per_seq_s: float) -> tuple[np.ndarray, KernelReplicas]:
        """Every request's first token delayed by its own replica's step outputs and by the launch of the step
        after its own where the host bound it (Trace.emitted on each replica, the merged first tokens taken from
        them): (the merged first-token times, these replicas with them)."""
        launched = bool(self.rec[:, LAUNCH_COL].any())
        first = self.first + emission_delays(self.rec, self.order, self.bounds, self.routed, self.first, per_seq_s,
                                             launched)
        out = KernelReplicas(self.sent, first, self.finish, self.routed, self.rec, (self.order, self.bounds),
                             self.cap_bytes, self.preempted, self.cached)
        out._mine = self._mine
        return first, out


def merged_steps(rec: np.ndarray) -> np.ndarray:
    """The fleet's records by start time, ties by replica then event order (Fleet._traces's stable sort of the
    replicas' lists): a view of the kernel's table when event order is already that order."""
    start, replica = rec[:, 0], rec[:, REPLICA]
    how, order = merge_order(start, replica)
    if how == 0:
        return rec[:, :REPLICA]
    if how == 2:
        order = np.lexsort((replica, start))
    return np.ascontiguousarray(rec[order, :REPLICA])
