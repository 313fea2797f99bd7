"""When each request reaches the engine: open-loop arrivals, a concurrency-limited client, or chat sessions.

- Open loop: request i is sent at its arrival time a_i (Poisson or a trace).
- `max_concurrency` N (vLLM's `benchmark_serving.py --max-concurrency`, an asyncio semaphore around each request;
  vllm-project/vllm benchmarks/benchmark_serving.py): requests are sent in order, request i at
  max(a_i, the time a slot frees + think time), with at most N outstanding. With a_i = 0 (`--rate inf`) that is a
  closed loop of N clients.
- Sessions of T turns: requests i = kT .. kT + T - 1 are the turns of one chat; the first is sent at its arrival
  time, turn j + 1 think time after turn j finishes (a user reads the answer, then types); the later turns' own
  arrival times are not used.
An API server's own per-request time (EngineOverheads.api_request_s) delays each request's arrival at the engine;
latencies are measured from the send time, as a benchmark client measures them. On the way back (emission_delay_s)
a step's tokens leave the server one sequence after another, the sequences that ran the step before it first, so a
request's first token reaches its client after the running sequences' tokens of that step.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from roofline.serving.requests import Requests


@dataclass(frozen=True)
class Clients:
    """How requests are released: open loop (the defaults), at most `max_concurrency` outstanding, or sessions of
    `session_turns` turns; `think_s` between a completion and the next send on the freed slot or session."""

    max_concurrency: int | None = None
    think_s: float = 0.0
    session_turns: int = 1

    def __post_init__(self) -> None:
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"--max-concurrency: {self.max_concurrency} must be >= 1")
        if not (self.think_s >= 0 and math.isfinite(self.think_s)):
            raise ValueError(f"--think-time-s: {self.think_s} must be a finite number of seconds >= 0")
        if self.session_turns < 1:
            raise ValueError(f"--session-turns: {self.session_turns} must be >= 1")
        if self.max_concurrency is not None and self.session_turns > 1:
            raise ValueError("--max-concurrency: cannot be combined with --session-turns (sessions are the clients)")

    @property
    def open_loop(self) -> bool:
        """Every send time is known in advance (the arrival times)."""
        return self.max_concurrency is None and self.session_turns == 1


class Arrivals:
    """The engine's view of the clients: the next arrival time, the requests due by now, and completions."""

    def __init__(self, requests: Requests, clients: Clients, api_s: float = 0.0) -> None:
        self.clients, self.api_s = clients, api_s
        n = len(requests)
        self.arrival_s = requests.arrival_s
        self.send_s = np.full(n, np.nan)
        self._heap: list[tuple[float, int]] = []  # (engine arrival time, id) of requests sent, not yet arrived
        self.arrived = 0
        if clients.open_loop:
            self.send_s = requests.arrival_s.copy()
            self._clock = _clock_arrivals(requests.arrival_s + api_s)
            return
        self._clock = None
        if clients.max_concurrency is not None:
            self._next = 0  # next request to send, in order
            self._slots = [0.0] * min(clients.max_concurrency, n)  # times the free slots became free
            self._release_slots()
        else:
            for first in range(0, n, clients.session_turns):
                self._send(first, float(self.arrival_s[first]))

    def _send(self, i: int, t: float) -> None:
        self.send_s[i] = t
        heapq.heappush(self._heap, (t + self.api_s, i))

    def _release_slots(self) -> None:
        n = len(self.arrival_s)
        while self._slots and self._next < n:
            free = heapq.heappop(self._slots)
            self._send(self._next, max(float(self.arrival_s[self._next]), free))
            self._next += 1

    def next_time(self) -> float:
        """Engine time of the next arrival (inf while none is known: every client waits on a request in flight)."""
        if self._clock is not None:
            return self._clock[self.arrived] if self.arrived < len(self._clock) else math.inf
        return self._heap[0][0] if self._heap else math.inf

    def due(self, now: float) -> list[int]:
        """Ids of the requests that reach the engine by `now`, in arrival order."""
        out = []
        if self._clock is not None:
            clock = self._clock
            while self.arrived < len(clock) and clock[self.arrived] <= now:
                out.append(self.arrived)
                self.arrived += 1
            return out
        while self._heap and self._heap[0][0] <= now:
            out.append(heapq.heappop(self._heap)[1])
        self.arrived += len(out)
        return out

    def finished(self, ids: np.ndarray, now: float) -> None:
        """Requests `ids` completed at `now`: their slots (or their sessions' next turns) are released."""
        if self._clock is not None or not len(ids):
            return
        think = self.clients.think_s
        if self.clients.max_concurrency is not None:
            for _ in range(len(ids)):
                heapq.heappush(self._slots, now + think)
            self._release_slots()
            return
        turns = self.clients.session_turns
        for i in ids.tolist():
            nxt = i + 1
            if nxt % turns and nxt < len(self.arrival_s):
                self._send(nxt, now + think)


def _clock_arrivals(arrival_s: np.ndarray) -> list[float]:
    """The clock readings at which requests join the queue: each arrival is a wait from the previous one
    (now + (t - now) in floating point, as a timeout from the previous arrival reads the clock)."""
    out, now = [], 0.0
    for t in arrival_s.tolist():
        if t > now:
            now = now + (t - now)
        out.append(now)
    return out


def emission_delay_s(first_token_s: np.ndarray, steps: np.ndarray, per_seq_s: float) -> np.ndarray:
    """Per request, the time its first token waits behind the step's other outputs on the API server's way out:
    per_seq_s x the sequences already running in the step that produced it (the record holding its first-token
    time: its start before the first token, records in time order; column 2 of Trace.steps, the running count
    when the step was scheduled). 0 for requests with no first token here (NaN: another replica's).

    vLLM 0.24 streams a step's outputs in the order the scheduler ran them, running requests before the ones
    admitted in that step (v1/core/sched/scheduler.py Scheduler.schedule: the RUNNING queue first, then WAITING;
    update_from_output builds the outputs in that order; v1/engine/output_processor.py process_outputs puts each
    into its request's queue in turn). `vllm bench serve` timestamps each streamed token: in the served runs of
    validate/engines (runs 6, 8, 9, 10; validate/notes/2026-11-29-vllm-h200-run9.md) a step's tokens reached the
    client 42-49 us apart and a new request's first token came last in its step (median rank 0.83-1.00 of the
    step's tokens). The cost a sequence is the profile's served host law per running sequence
    (EngineOverheads.per_seq_s: the tiny server's median TPOT against concurrency, 39.8 us on the H200), not fitted
    to those runs."""
    out = np.zeros(len(first_token_s))
    if not per_seq_s or not len(steps):
        return out
    ok = np.isfinite(first_token_s)
    row = np.clip(np.searchsorted(steps[:, 0], first_token_s[ok], side="left") - 1, 0, len(steps) - 1)
    out[ok] = per_seq_s * steps[row, 2]
    return out


def launch_delay_s(stamp_s: np.ndarray, steps: np.ndarray, launch_s: np.ndarray) -> np.ndarray:
    """Per request, how much later than its step's end a token stamped at `stamp_s` (a step's end) leaves the engine:
    the eager launch of the step after (Trace.launch_s of the record starting at the stamp, back to back), its part
    past the host's lead into that step (the launch began while the step before ran on the GPU: timing mechanism 24,
    Simulator.block_launch_s); 0 where the engine went idle after the step or the next step replays captured graphs,
    and for stamps not here (NaN: another replica's).

    vLLM 0.24's engine core under asynchronous scheduling (v1/engine/core.py@v0.24.0:519-603
    step_with_batch_queue; one GPU's UniProcExecutor runs execute_model on the core's thread,
    v1/executor/uniproc_executor.py:79-104) schedules and launches step n + 1, then blocks on step n's result and
    sends its outputs: step n's tokens leave once step n + 1 is launched. SGLang's overlap loop does the same
    (event_loop_overlap: run_batch of the next batch before process_batch_result of the last). A graph replay's
    schedule and launch are in the profile's request path already (api_request_s: the tiny server's TTFT at
    concurrency 1, whose first token waited for its decode's) and its growth with the running sequences in
    emission_delay_s; an eager step's launch (EngineOverheads.eager_s, 49-55 ms for Qwen3-30B-A3B on run 23's host)
    is not: seen in run 23's own step log (validate/notes/2026-11-30-vllm-h200-run23.md, last section), a step's
    line 47 ms after the one before, the eager launch of the next, with 21 / 43 / 20 % of prefill steps followed by
    an eager step at 6 / 12 req/s and 16 clients."""
    out = np.zeros(len(stamp_s))
    if not len(steps):
        return out
    ok = np.flatnonzero(np.isfinite(stamp_s))
    row = np.searchsorted(steps[:, 0], stamp_s[ok], side="left")
    inside = row < len(steps)
    ok, row = ok[inside], row[inside]
    back = steps[row, 0] == stamp_s[ok]
    out[ok[back]] = launch_s[row[back]]
    return out
