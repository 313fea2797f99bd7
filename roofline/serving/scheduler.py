"""A vLLM-like scheduler: continuous batching, chunked prefill under a token budget, a paged KV pool,
preemption by recompute.

Each step, in this order (vLLM's chunked-prefill policy, Sarathi-Serve's stall-free batching):
1. every running sequence that is decoding gets its one token;
2. running sequences still prefilling get chunks, in admission order, from what is left of the token budget
   (max_num_batched_tokens);
3. if the pool cannot hold the pages these tokens need, the most recently admitted running sequence is
   preempted (its pages freed, its progress dropped; it returns to the head of the queue and later
   recomputes its prompt and the tokens it had generated, as vLLM's recompute preemption does, less what its prefix
   cache still holds: its cached prefix and its own full pages no allocation has taken since), until it fits;
4. if nothing was preempted, waiting requests are admitted first come first served while the budget, the
   sequence cap (max_num_seqs) and the pool allow their first chunk (with admit_full_prompt: all their known tokens).
With a prefix cache, the pages of cached prefixes no running request uses count as free in steps 3 and 4; the pages a
step takes (the running sequences' in 3, each admission's first chunk in 4, in that order) come from the never-used
room, then from the free queue's front, least recently freed first: the spent pages of requests that left and the
unused prefixes' tails, evicted as they are reached; a test that fails takes nothing (vLLM's free queue:
serving.prefix_cache's module docstring).
A sequence's known tokens are its prompt plus the tokens generated so far; a step that computes the last
of them emits a token (the first one ends the prefill).
Engine variants (SchedulerConfig, from roofline.engines.scheduling): without mixed steps (SGLang) a step that can
prefill (a running prompt's next chunk, or an admission) carries only prefill, and decodes run when nothing can;
without chunked prefill (TensorRT-LLM) a prompt is admitted only when the step's budget holds all of it; with
reserve_full (TensorRT-LLM's GUARANTEED_NO_EVICT, llama.cpp's slots) a request is admitted only when the pool holds
it to its last output token, and it keeps that reservation, so nothing is preempted; with admit_full_prompt (vLLM's
scheduler_reserve_full_isl from 0.19.0 on, vllm/config/scheduler.py:140-144 in 0.24, on by default) a request is
admitted only when the free pages (unused cached prefixes but its own counted as free) hold its prompt and the
tokens it had generated before a preemption, less its prefix-cache hit (v1/core/kv_cache_manager.py allocate_slots,
full_sequence_must_fit: a gate only, nothing is reserved or evicted for it, so a later chunk may still preempt).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from roofline.engines.llamacpp import lru_slot
from roofline.serving.pool import KVPool
from roofline.serving.prefix_cache import PrefixCache
from roofline.serving.remote import Handshake, RemoteLoads
from roofline.serving.requests import Requests

EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class SchedulerConfig:
    """The engine's scheduling limits (vLLM names)."""

    max_num_batched_tokens: int = 8192  # vLLM's chunked-prefill token budget per step
    max_num_seqs: int = 256  # vLLM's default cap on running sequences
    chunked_prefill: bool = True  # False: a prompt is admitted only when the step's budget holds all of it
    mixed_steps: bool = True  # False: a step is all prefill or all decode, prefill first (SGLang)
    reserve_full: bool = False  # admit only what the pool holds to its last token; never preempt (TensorRT-LLM)
    spec_tokens: int = 0  # speculative decoding: drafts a decoding sequence verifies per step (serving.speculative)
    admit_full_prompt: bool = False  # admit only when the pool holds all known tokens, taking the first chunk's (vLLM)
    slot_streams: bool = False  # llama-server's slots, one KV stream each: LRU slot ids (engines.llamacpp.lru_slot)
    # llama-server's slots sharing one KV stream (-kvu, its default): LRU slot ids and the cells each idle slot keeps,
    # the stream's used cells a step attends over (Scheduler.stream_used; timing 22.)
    unified_slots: bool = False

    def __post_init__(self) -> None:
        if self.max_num_batched_tokens < 1 or self.max_num_seqs < 1:
            raise ValueError("scheduler: max_num_batched_tokens and max_num_seqs must be >= 1")

    @classmethod
    def of(cls, engine, spec_tokens: int = 0) -> SchedulerConfig:
        """The scheduling part of an engine profile (roofline.engines.scheduling.EngineScheduling)."""
        return cls(engine.max_num_batched_tokens, engine.max_num_seqs, engine.chunked_prefill, engine.mixed_steps,
                   engine.preemption == "none", spec_tokens, engine.admit_full_prompt,
                   getattr(engine, "slot_streams", False))

    @property
    def slots(self) -> bool:
        """Whether requests take llama-server's slot ids (one stream a slot, or one stream for all)."""
        return self.slot_streams or self.unified_slots


@dataclass
class StepPlan:
    """What one step computes: decoding sequences (positions in the scheduler's running arrays, a slice when
    all of them decode) at their contexts, and chunks (position, cached prefix, new tokens, ends the prompt?)."""

    decode: np.ndarray | slice
    context: np.ndarray
    chunk_pos: np.ndarray
    chunk_start: np.ndarray
    chunk_tokens: np.ndarray
    chunk_done: np.ndarray
    tokens: int  # one per decoding sequence plus every chunk's new tokens
    loads_s: float = 0.0  # host seconds of the KV loads of the requests it admits (Scheduler's load_host_s)
    posts: int = 0  # remote loads it starts (Scheduler's transfer_s): a step of no tokens still runs to post them


class Scheduler:
    """Request state: per request (first token, finish, tokens generated while waiting), and the running
    sequences in admission order as compact arrays (id, computed, known = prompt + generated, generated,
    output, bytes held) over positions 0..n_running-1; the waiting queue of ids."""

    def __init__(self, requests: Requests, pool: KVPool, config: SchedulerConfig,
                 cache: PrefixCache | None = None, preloaded: np.ndarray | None = None,
                 load_host_s: np.ndarray | None = None, transfer_s: np.ndarray | None = None,
                 handshake: Handshake | None = None, save: tuple[float, float] = (0.0, 0.0),
                 slot_last: list[float] | None = None) -> None:
        n = len(requests)
        if transfer_s is not None and (preloaded is None or cache is not None):
            raise ValueError("scheduler: transfer_s (remote KV loads) needs preloaded KV and no prefix cache")
        self.requests, self.pool, self.config, self.cache = requests, pool, config, cache
        # tokens whose KV arrives with the request (a disaggregated prefill's transfer); lost if it is preempted
        self.preloaded = None if preloaded is None else np.array(preloaded, dtype=np.int64)
        # host seconds the step admitting a request with preloaded KV spends starting its load (the engine's KV
        # connector posting the transfer on the worker's thread: timing mechanism 10); none once the KV is lost
        self.load_host_s = None if load_host_s is None else np.asarray(load_host_s, dtype=np.float64)
        self.now = 0.0  # the engine's clock, set by the simulator before each schedule (the cache's LRU order)
        # remote KV loads (serving.disagg's decode pool under an engine with a KV connector: serving.remote); t_sched:
        # when the engine made the schedule being planned (the loop sets it: the step's start, or under the admission
        # lag the previous step's, after a step that started loads no earlier than its host work's end: Fleet._serial)
        self.remote = RemoteLoads(transfer_s, n, handshake)
        self.t_sched = 0.0
        self.prompt, self.output = requests.prompt_tokens, requests.output_tokens
        self.generated = np.zeros(n, dtype=np.int64)  # kept for waiting (preempted) requests
        self.first_token_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        cap = config.max_num_seqs
        # base: leading tokens the prefix cache owns (a hit, or pages this sequence published to it); counted: the
        # prefix-cache hit its admission counted (PrefixCache.count; uncounted if it is preempted before a token)
        self.ids, self.comp, self.known, self.gen, self.out, self.res, self.base, self.counted = (
            np.zeros(cap, dtype=np.int64) for _ in range(8))
        self.held = np.zeros(cap, dtype=np.float64)
        # llama-server's slots (config.slot_streams): each running sequence's slot id, and each slot's last release
        # (-1: never used) while it is idle (None: busy)
        self.slot = np.zeros(cap, dtype=np.int64)
        self.slot_last: list[float | None] = [-1.0] * cap if slot_last is None else [float(t) for t in slot_last]
        # config.unified_slots: the cells each idle slot still holds in the one stream (its last task's, until a task
        # takes the slot: memory_seq_rm of its cells past the common prefix; none for a fresh slot), and whether a new
        # task clears every idle slot (--cache-idle-slots, on with the host prompt cache and a unified stream:
        # tools/server/server-context.cpp, [TAG_IDLE_SLOT_CLEAR], after saving them)
        self.slot_cells = np.zeros(cap, dtype=np.int64)
        self.clear_idle = bool(config.unified_slots and (save[0] or save[1]))
        if len(self.slot_last) != cap:
            raise ValueError(f"scheduler: slot_last holds {len(self.slot_last)} slots, not max_num_seqs {cap}")
        self.n_running = 0
        self.waiting: deque[int] = deque()
        self.used_bytes = 0.0
        self.preemptions = 0
        self.preempted_step = False  # the last schedule preempted: its plan may not start a decode block
        self.finished = 0
        self.arrived = 0
        self.last_finished = EMPTY  # ids the last commit completed
        # the server's host prompt cache (EngineOverheads.save_s, save_byte_s; timing mechanism 18): each finished
        # request's KV waits to be saved, its tokens at the pool's bytes a token (a long sequence's, pages aside: the
        # state holds the tokens, not their pages); the next step that admits a request pays the saves
        self.save_s, self.save_byte_s = save
        self.save_token_bytes = pool.page_bytes / pool.page_tokens
        self.saves, self.save_tokens = 0, 0
        self._monotone = bool(np.all(np.diff(pool.seq_bytes) >= 0))

    @property
    def running(self) -> list[int]:
        """Ids of the running sequences, in admission order."""
        return self.ids[:self.n_running].tolist()

    def _preempt_last(self) -> None:
        self.n_running -= 1
        last = self.n_running
        victim = int(self.ids[last])
        self._free_slots(last, self.now, keep=False)
        self.used_bytes -= self.held[last] - self.pool.seq_bytes[self.base[last]]
        if self.cache is not None:
            if not self.gen[last]:
                self.cache.uncount(int(self.counted[last]), int(self.known[last]))
            self.cache.spend_pages(int(self.comp[last]), int(self.base[last]), self.now, victim)
            self.cache.release(victim, self.now)
        if self.preloaded is not None:
            self.preloaded[victim] = 0
        self.generated[victim] = self.gen[last]
        self.waiting.appendleft(victim)
        self.preemptions += 1

    def _plan_running(self, decodes: bool = True, chunks: bool = True) -> tuple[StepPlan, float]:
        """Tokens for the running sequences (decodes first, then chunks; either left out on request) and the bytes
        they need beyond what they hold."""
        n, seq = self.n_running, self.pool.seq_bytes
        comp = self.comp[:n]
        todo = self.known[:n] - comp
        is_dec = (todo == 1) & (comp > 0)
        n_dec = int(np.count_nonzero(is_dec)) if decodes else 0
        dec = slice(0, n) if n_dec == n else np.flatnonzero(is_dec) if decodes else EMPTY
        context = comp[dec] + 1
        spec = self.config.spec_tokens  # a verifying sequence also holds pages for its drafts
        held_to = np.minimum(context + spec, self.pool.max_tokens) if spec else context
        need = float(np.maximum(seq[held_to] - self.held[dec], 0.0).sum()) if n_dec else 0.0
        dec_tokens = n_dec * (1 + spec)
        budget = self.config.max_num_batched_tokens - dec_tokens
        if n_dec == n or not chunks:
            return StepPlan(dec, context, EMPTY, EMPTY, EMPTY, EMPTY.astype(bool), dec_tokens), need
        pos, starts, counts, done = [], [], [], []
        rest = np.flatnonzero(~is_dec)
        for i, c, t in zip(rest.tolist(), comp[rest].tolist(), todo[rest].tolist(), strict=True):
            if budget <= 0:
                break
            k = min(t, budget)
            budget -= k
            pos.append(i), starts.append(c), counts.append(k), done.append(k == t)
            need += max(float(seq[c + k] - self.held[i]), 0.0)
        plan = StepPlan(dec, context, np.array(pos, dtype=np.int64), np.array(starts, dtype=np.int64),
                        np.array(counts, dtype=np.int64), np.array(done, dtype=bool), dec_tokens + sum(counts))
        return plan, need

    def schedule(self) -> StepPlan | None:
        """The next step's work, or None when nothing is running or admissible. With mixed steps (vLLM, TensorRT-LLM,
        llama.cpp) decodes, chunks and admissions share one step; without (SGLang) a step that can prefill (a running
        prompt's next chunk or a new admission) prefills only, and decodes run when nothing can. A step that runs
        finds the remote loads complete by t_sched (its worker's get_finished: serving.disagg), reported when it
        commits."""
        plan = self._schedule()
        if plan is not None and self.remote:
            self.remote.observe(self.t_sched)
        return plan

    def _schedule(self) -> StepPlan | None:
        """schedule's plan."""
        if self.cache is not None:  # a block of decode steps took pages beyond the never-used ones
            self.used_bytes -= self.cache.settle(self.used_bytes, self.pool.capacity_bytes)
        self.preempted_step = False
        if not self.config.mixed_steps:
            plan, need = self._plan_running(decodes=False)
            if self._room(need):
                plan, need = self._admit(plan, need)
                if plan.tokens:
                    return plan
        mixed = self.config.mixed_steps
        plan, need = self._plan_running(chunks=mixed)
        preempted = False
        while not self._room(need) and self.n_running:
            self._preempt_last()
            preempted = True
            plan, need = self._plan_running(chunks=mixed)
        self.preempted_step = preempted
        if not preempted and mixed:
            plan, need = self._admit(plan, need)
        return plan if plan.tokens or plan.posts else None

    def _room(self, need: float) -> bool:
        """Whether the running sequences' `need` more bytes fit, unused cached prefixes counted as free; if they do,
        their pages are taken now, before any admission reads the cache (PrefixCache.take_pages), else nothing is
        (vLLM's allocate_slots checks the free queue's length before it pops a block: kv_cache_manager.py:405-420)."""
        free = self.pool.capacity_bytes - self.used_bytes
        short = need - free
        if short > 0 and (self.cache is None or short > self.cache.unused_bytes):
            return False
        if self.cache is not None:
            self.used_bytes -= self.cache.take_pages(need, free)
        return True

    def _admit(self, plan: StepPlan, need: float) -> tuple[StepPlan, float]:
        """Waiting requests, first come first served, while the budget, the sequence cap and the pool allow their
        first chunk (with reserve_full: their whole sequence, to the last output token; with admit_full_prompt: their
        known tokens, though the step takes only the first chunk's pages; without chunked prefill: only a prompt the
        step's budget holds whole)."""
        budget = self.config.max_num_batched_tokens - plan.tokens
        admitted = []
        loads_s, posts = plan.loads_s, plan.posts
        seqs = self.config.max_num_seqs
        for i in list(self.remote.ids):  # vLLM's skipped_waiting before its waiting queue: loads reported by now
            if budget <= 0 or self.n_running + len(admitted) >= seqs:
                break
            if self.remote.reported(i, self.t_sched):
                self.remote.ids.remove(i)
                todo = int(self.prompt[i] + self.generated[i])  # its pages are held since its load was posted
                admitted.append((i, 1, True, todo, todo - 1, float(self.pool.seq_bytes[todo]), 0, 0))
                budget -= 1
        while self.waiting and budget > 0 and self.n_running + len(admitted) < seqs:
            i = self.waiting[0]
            todo = int(self.prompt[i] + self.generated[i])
            if self.remote.on and min(int(self.preloaded[i]), todo - 1) > 0:
                cost = float(self.pool.seq_bytes[todo])  # a remote load: its pages now, no tokens this step
                if cost > self.pool.capacity_bytes - self.used_bytes - need:
                    break
                self.waiting.popleft()
                self.used_bytes += cost
                if self.load_host_s is not None:
                    loads_s += float(self.load_host_s[i])
                posts += 1
                self.remote.post(i, self.t_sched)
                continue
            took = self._take(i, todo, budget, self.pool.capacity_bytes - self.used_bytes - need)
            if took is None:
                break
            n, start, cost, held, base, hit, loaded = took
            if self.load_host_s is not None and loaded:  # it starts after its preloaded KV (_take)
                loads_s += float(self.load_host_s[i])
            self.waiting.popleft()
            admitted.append((i, n, n == todo - start, todo, start, held, base, hit))
            budget -= n
            need += cost
        if not admitted:
            return (replace(plan, loads_s=loads_s, posts=posts) if posts > plan.posts else plan), need
        if self.saves and (self.save_s or self.save_byte_s):  # llama-server saves the idle slots first
            loads_s += self.saves * self.save_s + self.save_tokens * self.save_token_bytes * self.save_byte_s
            self.saves, self.save_tokens = 0, 0
        ids, counts, done, todo, hits, held, base, counted = (np.array(col) for col in zip(*admitted, strict=True))
        at = slice(self.n_running, self.n_running + len(ids))
        self.ids[at], self.comp[at], self.known[at], self.base[at], self.counted[at] = ids, hits, todo, base, counted
        self.gen[at], self.out[at], self.held[at] = self.generated[ids], self.output[ids], held
        self.res[at] = self.prompt[ids] + self.output[ids] if self.config.reserve_full else 0
        if self.config.slots:
            for p in range(at.start, at.stop):
                self.slot[p] = self._take_slot()
            if self.clear_idle:
                self.slot_cells[:] = 0
        self.n_running = at.stop
        plan = StepPlan(plan.decode, plan.context, np.concatenate([plan.chunk_pos, np.arange(at.start, at.stop)]),
                        np.concatenate([plan.chunk_start, hits.astype(np.int64)]),
                        np.concatenate([plan.chunk_tokens, counts.astype(np.int64)]),
                        np.concatenate([plan.chunk_done, done.astype(bool)]), plan.tokens + int(counts.sum()),
                        loads_s, posts)
        return plan, need

    def _take_slot(self) -> int:
        """The slot llama-server gives a new task: the least recently used idle one (engines.llamacpp.lru_slot)."""
        s = lru_slot({j: t for j, t in enumerate(self.slot_last) if t is not None})
        self.slot_last[s] = None
        self.slot_cells[s] = 0
        return s

    def _free_slots(self, pos, now: float, keep: bool = True) -> None:
        """The slots of running positions `pos` are released at `now` (their last use, for the LRU choice), in slot
        order as the server's loop releases them (each a nanosecond after the one before: update_slots walks its slots
        in order and stamps each release, so of slots freed by one step the lowest is the least recently used); in
        one stream each keeps its sequence's cells (`keep`; a preempted one's are freed)."""
        if self.config.slots:
            pos = np.atleast_1d(pos)
            self.slot_cells[self.slot[pos]] = self.comp[pos] if keep else 0
            for k, s in enumerate(sorted(self.slot[pos].tolist())):
                self.slot_last[s] = now + k * 1e-9

    def stream_used(self) -> int:
        """The cells a unified stream holds now (config.unified_slots): every running sequence's computed tokens and
        the cells idle slots keep."""
        return int(self.comp[:self.n_running].sum() + self.slot_cells.sum())

    def _take(self, i: int, todo: int, budget: int, free: float
              ) -> tuple[int, int, float, float, int, int, bool] | None:
        """(first chunk, tokens already computed, bytes it needs, bytes it holds at once, tokens the prefix cache
        owns, its prefix-cache hit, whether it starts after preloaded KV) if request i can start now with `budget`
        tokens and `free` bytes no running sequence or cached prefix holds (the step's pages counted, spent ones
        free), else None (and nothing changes). A request preempted after computing pages of its own hits those
        still queued (PrefixCache.own_hit): it holds them as its own, and they are not free room for it. Unused
        cached prefixes count as free room, but those on its own path (PrefixCache.evictable_for); once it is
        admitted, its path is held and the pages its first chunk takes, and no more, are taken (PrefixCache.take_pages:
        vLLM's allocate_slots checks num_blocks_to_allocate against get_num_free_blocks, touches the hit, then
        get_new_blocks pops only the chunk's blocks: kv_cache_manager.py:405-440, block_pool.py:542-572).
        Computed tokens are a prefix-cache hit (pages the cache holds) or preloaded KV (pages this request brings:
        they need room too). With admit_full_prompt the room asked for is that of all `todo` known tokens less the
        hit (full_sequence_must_fit, kv_cache_manager.py:372-387), though only the first chunk's pages are taken."""
        cache, seq = self.cache, self.pool.seq_bytes
        tree = cache.hit(i, todo) if cache is not None else 0
        hit, own = cache.own_hit(i, tree, todo) if cache is not None else (0, 0.0)
        pre = min(int(self.preloaded[i]), todo - 1) if self.preloaded is not None else 0
        loaded = pre > hit
        if loaded:
            hit, own = tree, 0.0
        start, held, base = (pre, 0.0, 0) if loaded else (hit, float(seq[hit]), tree)
        free -= own
        n = min(todo - start, budget)
        if n < todo - start and not self.config.chunked_prefill:
            return None
        cost = (seq[int(self.prompt[i] + self.output[i])] if self.config.reserve_full else seq[start + n]) - held
        gate = max(cost, seq[todo] - held) if self.config.admit_full_prompt else cost
        if gate > free and (cache is None or gate > free + cache.evictable_for(i)):
            return None
        if cache is not None:
            cache.acquire(i, self.now)
            cache.claim(i, -1 if loaded else tree)
            self.used_bytes += own
            self.used_bytes -= cache.take_pages(cost, free)
            cache.count(hit, todo, bool(self.generated[i]))
        return n, start, cost, held, base, hit, loaded

    def block_length(self, plan: StepPlan, limit: int) -> int:
        """How many decode-only steps like `plan` may run back to back with nothing else changing: up to
        the first completion and while the pool holds every sequence's next page (arrivals are the
        caller's cut). 1 when the plan has chunks, waiting requests could be admitted, or a sequence is about
        to emit its first token (decoding the last prompt token: a block would stamp its TTFT at the end). A step
        that preempted admits nothing (vLLM skips its waiting queue then: sched/scheduler.py:626), though the room it
        freed may take the queue's head at the next step: it is a block of one too."""
        if (len(plan.chunk_pos) or not len(plan.context) or limit <= 1 or self.config.spec_tokens or self.remote
                or self.preempted_step):
            return 1
        dec = plan.decode
        if (self.gen[dec] == 0).any():  # a first token is due: its time stamps the TTFT, so step alone
            return 1
        k = int(min(limit, (self.out[dec] - self.gen[dec]).min()))
        if k <= 1:
            return 1
        rest = self.used_bytes - self.held[dec].sum()
        if self._monotone:  # bytes held only grow with the tokens: if the last step fits, every step does
            last = np.maximum(self.comp[dec] + k, self.res[dec])
            if self.pool.seq_bytes[last].sum() + rest <= self.pool.capacity_bytes:
                return k
        after = np.maximum(self.comp[dec][:, None] + 1 + np.arange(k), self.res[dec][:, None])  # tokens held
        used = self.pool.seq_bytes[after].sum(axis=0) + rest
        over = np.flatnonzero(used > self.pool.capacity_bytes)
        return int(over[0]) if len(over) and over[0] > 0 else k if not len(over) else 1

    def commit_block(self, plan: StepPlan, steps: int, now: float, extra: np.ndarray | None = None) -> int:
        """Apply `steps` decode-only steps of `plan` ending at `now` (`extra`: see commit)."""
        if steps > 1:
            dec = plan.decode
            self.comp[dec] += steps - 1
            self.gen[dec] += steps - 1
            self.known[dec] += steps - 1
        return self.commit(plan, now, extra)

    def commit(self, plan: StepPlan, now: float, extra: np.ndarray | None = None) -> int:
        """Apply a finished step at time `now`: progress, pages, emitted tokens, completions. Returns the
        number of requests that finished. `extra`: tokens each decoding sequence emitted beyond its one (accepted
        speculative drafts); they are computed tokens too."""
        if self.remote:  # the loads this step found complete are reported with its output
            self.remote.report(now)
        seq, n = self.pool.seq_bytes, self.n_running
        dec, chunks = plan.decode, plan.chunk_pos
        if extra is None and not len(chunks) and self.cache is None:
            return self._commit_decodes(dec, now)
        self.comp[dec] += 1
        if extra is not None:
            self.comp[dec] += extra
            self.gen[dec] += extra
            self.known[dec] += extra
        if len(chunks):
            self.comp[chunks] += plan.chunk_tokens
            pos = np.concatenate([np.arange(n)[dec], chunks])
            emitted = np.concatenate([np.arange(n)[dec], chunks[plan.chunk_done]])
        else:
            pos = emitted = dec
        new_held = seq[np.maximum(self.comp[pos], self.res[pos])]
        self.used_bytes += float((new_held - self.held[pos]).sum())
        self.held[pos] = new_held
        if self.cache is not None:
            self._publish(np.arange(n)[pos])
        self.gen[emitted] += 1
        self.known[emitted] += 1
        gen, who = self.gen[emitted], self.ids[emitted]
        first = who[np.isnan(self.first_token_s[who])]
        self.first_token_s[first] = now
        ended = np.flatnonzero(gen >= self.out[emitted])
        if not len(ended):
            return 0
        return self._complete(np.arange(n)[emitted][ended], now)

    def _commit_decodes(self, dec: np.ndarray | slice, now: float) -> int:
        """commit for a step of decodes only, without prefix caching or drafts: each sequence computes its one token
        and emits it; a sequence's first emission leaves it with one generated token (a first token due is never
        inside a block: block_length), so that is when its first token is stamped."""
        self.comp[dec] += 1
        held_to = np.maximum(self.comp[dec], self.res[dec]) if self.config.reserve_full else self.comp[dec]
        new_held = self.pool.seq_bytes[held_to]
        self.used_bytes += float((new_held - self.held[dec]).sum())
        self.held[dec] = new_held
        self.gen[dec] += 1
        self.known[dec] += 1
        gen = self.gen[dec]
        first = gen == 1
        if first.any():
            who = self.ids[dec][first]
            self.first_token_s[who[np.isnan(self.first_token_s[who])]] = now
        ended = np.flatnonzero(gen >= self.out[dec])
        if not len(ended):
            return 0
        return self._complete(np.arange(self.n_running)[dec][ended], now)

    def _complete(self, ended: np.ndarray, now: float) -> int:
        """Sequences at running positions `ended` finished at `now`: stamp, free their pages, compact the arrays."""
        seq, n = self.pool.seq_bytes, self.n_running
        self.last_finished = self.ids[ended].copy()
        self.finish_s[self.last_finished] = now
        # its KV, saved when the next request starts (save_s, save_byte_s): every known token but the last sampled
        self.saves += len(ended)
        self.save_tokens += int((self.known[ended] - 1).sum())
        self.used_bytes -= float((self.held[ended] - seq[self.base[ended]]).sum())
        if self.cache is not None:
            for p, i in zip(ended.tolist(), self.last_finished.tolist(), strict=True):
                self.cache.spend_pages(int(self.comp[p]), int(self.base[p]), now)
                self.cache.release(i, now)
        self._free_slots(ended, now)
        keep = np.ones(n, dtype=bool)
        keep[ended] = False
        m = n - len(ended)
        for arr in (self.ids, self.comp, self.known, self.gen, self.out, self.res, self.base, self.counted, self.held,
                    self.slot):
            arr[:m] = arr[:n][keep]
        self.n_running = m
        self.finished += len(ended)
        return len(ended)

    def _publish(self, pos: np.ndarray) -> None:
        """Shared tokens these sequences have computed, in whole pages, join the prefix cache; a sequence's own copy
        of pages the cache already held (computed while another request published them) is freed."""
        seq, page = self.pool.seq_bytes, self.cache.page
        ids = self.ids[pos]
        upto = np.minimum(self.comp[pos], self.cache.tree.shared[ids]) // page * page
        for j in np.flatnonzero(upto > self.base[pos]).tolist():
            p, u = int(pos[j]), int(upto[j])
            before = self.cache.publish(int(ids[j]), u)
            self.used_bytes -= float(seq[min(before, u)] - seq[self.base[p]]) if before > self.base[p] else 0.0
            self.base[p] = u
