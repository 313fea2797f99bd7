"""A vLLM-like scheduler: continuous batching, chunked prefill under a token budget, a paged KV pool,
preemption by recompute.

Each step, in this order (vLLM's chunked-prefill policy, Sarathi-Serve's stall-free batching):
1. every running sequence that is decoding gets its one token;
2. running sequences still prefilling get chunks, in admission order, from what is left of the token budget
   (max_num_batched_tokens);
3. if the pool cannot hold the pages these tokens need, the most recently admitted running sequence is
   preempted (its pages freed, its progress dropped; it returns to the head of the queue and later
   recomputes its prompt and the tokens it had generated, as vLLM's recompute preemption does), until it fits;
4. if nothing was preempted, waiting requests are admitted first come first served while the budget, the
   sequence cap (max_num_seqs) and the pool allow their first chunk.
A sequence's known tokens are its prompt plus the tokens generated so far; a step that computes the last
of them emits a token (the first one ends the prefill).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from roofline.serving.pool import KVPool
from roofline.serving.requests import Requests

EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class SchedulerConfig:
    """The engine's scheduling limits (vLLM names)."""

    max_num_batched_tokens: int = 8192  # vLLM's chunked-prefill token budget per step
    max_num_seqs: int = 256  # vLLM's default cap on running sequences

    def __post_init__(self) -> None:
        if self.max_num_batched_tokens < 1 or self.max_num_seqs < 1:
            raise ValueError("scheduler: max_num_batched_tokens and max_num_seqs must be >= 1")


@dataclass
class StepPlan:
    """What one step computes: decoding sequences, and chunks (sequence, cached prefix, new tokens, ends?)."""

    decode: np.ndarray
    chunk_ids: np.ndarray
    chunk_start: np.ndarray
    chunk_tokens: np.ndarray
    chunk_done: np.ndarray

    @property
    def tokens(self) -> int:
        """Tokens the step computes: one per decoding sequence plus every chunk's new tokens."""
        return len(self.decode) + int(self.chunk_tokens.sum())


class Scheduler:
    """Request state (arrays over all requests) and the running / waiting queues."""

    def __init__(self, requests: Requests, pool: KVPool, config: SchedulerConfig) -> None:
        n = len(requests)
        self.requests, self.pool, self.config = requests, pool, config
        self.prompt, self.output = requests.prompt_tokens, requests.output_tokens
        self.computed = np.zeros(n, dtype=np.int64)
        self.generated = np.zeros(n, dtype=np.int64)
        self.held = np.zeros(n, dtype=np.float64)
        self.first_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.running: list[int] = []
        self.waiting: deque[int] = deque()
        self.used_bytes = 0.0
        self.preemptions = 0
        self.finished = 0
        self.arrived = 0
        self._run = EMPTY

    def _set_running(self, ids: list[int]) -> None:
        self.running = ids
        self._run = np.array(ids, dtype=np.int64)

    def _preempt_last(self) -> None:
        victim = self.running[-1]
        self._set_running(self.running[:-1])
        self.used_bytes -= self.held[victim]
        self.held[victim] = 0.0
        self.computed[victim] = 0
        self.waiting.appendleft(victim)
        self.preemptions += 1

    def _plan_running(self) -> tuple[StepPlan, float]:
        """Tokens for the running sequences (decodes first, then chunks) and the bytes they need."""
        run, seq = self._run, self.pool.seq_bytes
        computed = self.computed[run]
        todo = self.prompt[run] + self.generated[run] - computed
        is_dec = (todo == 1) & (computed > 0)
        dec = run[is_dec]
        need = float((seq[computed[is_dec] + 1] - self.held[dec]).sum()) if len(dec) else 0.0
        budget = self.config.max_num_batched_tokens - len(dec)
        ids, starts, counts, done = [], [], [], []
        for i, c, t in zip(run[~is_dec].tolist(), computed[~is_dec].tolist(), todo[~is_dec].tolist(), strict=True):
            if budget <= 0:
                break
            n = min(t, budget)
            budget -= n
            ids.append(i), starts.append(c), counts.append(n), done.append(n == t)
            need += float(seq[c + n] - self.held[i])
        plan = StepPlan(dec, np.array(ids, dtype=np.int64), np.array(starts, dtype=np.int64),
                        np.array(counts, dtype=np.int64), np.array(done, dtype=bool))
        return plan, need

    def schedule(self) -> StepPlan | None:
        """The next step's work, or None when nothing is running or admissible."""
        plan, need = self._plan_running()
        preempted = False
        while need > self.pool.capacity_bytes - self.used_bytes and self.running:
            self._preempt_last()
            preempted = True
            plan, need = self._plan_running()
        if not preempted:
            plan, need = self._admit(plan, need)
        return plan if plan.tokens else None

    def _admit(self, plan: StepPlan, need: float) -> tuple[StepPlan, float]:
        budget = self.config.max_num_batched_tokens - plan.tokens
        free = self.pool.capacity_bytes - self.used_bytes - need
        admitted = []
        seq = self.pool.seq_bytes
        while self.waiting and budget > 0 and len(self.running) + len(admitted) < self.config.max_num_seqs:
            i = self.waiting[0]
            todo = int(self.prompt[i] + self.generated[i])
            n = min(todo, budget)
            if seq[n] > free:
                break
            self.waiting.popleft()
            admitted.append((i, n, n == todo))
            budget -= n
            free -= seq[n]
            need += seq[n]
        if not admitted:
            return plan, need
        self._set_running(self.running + [a[0] for a in admitted])
        ids, counts, done = zip(*admitted, strict=True)
        plan = StepPlan(plan.decode, np.concatenate([plan.chunk_ids, np.array(ids, dtype=np.int64)]),
                        np.concatenate([plan.chunk_start, np.zeros(len(ids), dtype=np.int64)]),
                        np.concatenate([plan.chunk_tokens, np.array(counts, dtype=np.int64)]),
                        np.concatenate([plan.chunk_done, np.array(done, dtype=bool)]))
        return plan, need

    def block_length(self, plan: StepPlan, limit: int) -> int:
        """How many decode-only steps like `plan` may run back to back with nothing else changing: up to
        the first completion and while the pool holds every sequence's next page (arrivals are the
        caller's cut). 1 when the plan has chunks or waiting requests could be admitted."""
        if len(plan.chunk_ids) or not len(plan.decode) or limit <= 1:
            return 1
        dec = plan.decode
        k = int(min(limit, (self.output[dec] - self.generated[dec]).min()))
        if k <= 1:
            return 1
        after = self.computed[dec][:, None] + 1 + np.arange(k)  # tokens held after step j
        used = self.pool.seq_bytes[after].sum(axis=0) + (self.used_bytes - self.held[dec].sum())
        over = np.flatnonzero(used > self.pool.capacity_bytes)
        return int(over[0]) if len(over) and over[0] > 0 else k if not len(over) else 1

    def commit_block(self, plan: StepPlan, steps: int, now: float) -> int:
        """Apply `steps` decode-only steps of `plan` ending at `now`."""
        if steps == 1:
            return self.commit(plan, now)
        dec = plan.decode
        self.computed[dec] += steps - 1
        self.generated[dec] += steps - 1
        return self.commit(plan, now)

    def commit(self, plan: StepPlan, now: float) -> int:
        """Apply a finished step at time `now`: progress, pages, emitted tokens, completions. Returns the
        number of requests that finished."""
        seq = self.pool.seq_bytes
        ids = np.concatenate([plan.decode, plan.chunk_ids])
        self.computed[plan.decode] += 1
        self.computed[plan.chunk_ids] += plan.chunk_tokens
        new_held = seq[self.computed[ids]]
        self.used_bytes += float((new_held - self.held[ids]).sum())
        self.held[ids] = new_held
        emitted = np.concatenate([plan.decode, plan.chunk_ids[plan.chunk_done]])
        self.generated[emitted] += 1
        first = emitted[np.isnan(self.first_token_s[emitted])]
        self.first_token_s[first] = now
        ended = emitted[self.generated[emitted] >= self.output[emitted]]
        if len(ended):
            self.finish_s[ended] = now
            self.used_bytes -= float(self.held[ended].sum())
            self.held[ended] = 0.0
            gone = set(ended.tolist())
            self._set_running([i for i in self.running if i not in gone])
            self.finished += len(ended)
        return len(ended)
