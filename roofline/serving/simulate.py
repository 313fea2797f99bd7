"""Request-level simulation: a discrete-event loop over arrivals and engine steps; each step's time is the step
model's.

One replica has one event in flight (its step or decode block), so a plain loop is the clock (the fleet's heap holds
one event per replica): the engine queues the requests that have arrived by now (with the engine's admission lag,
EngineScheduling.admission_lag: by the start of its last step, so one arriving during a step runs two steps later,
as vLLM's async scheduling and SGLang's overlap scheduler do), schedules a step, advances the clock by its predicted
time (or, idle, to the next arrival) and commits it. It records per step the requests in the system, the pool's use
and the preemptions so far, for the time series and the Little's-law check."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from roofline.costmodel.device import burst_options, roofline_for
from roofline.engines.first_use import FirstUse, first_use
from roofline.engines.llamacpp import fa_query_tile, pad256, ubatches
from roofline.engines.scheduling import EngineOverheads, EngineScheduling, chained_ends, with_eager, with_sampler
from roofline.engines.timing import eager_layers, engine_options, timing_on
from roofline.methods import MethodConfig
from roofline.planner.phases import PhaseModel
from roofline.serving.clients import Arrivals, Clients, emission_delay_s, launch_delay_s
from roofline.serving.clock import decision, gemm_duty, gemm_s_per_token
from roofline.serving.closedform import ClosedForm
from roofline.serving.kernel_layout import LAUNCH_COL
from roofline.serving.pool import KVPool
from roofline.serving.prefix import cache_tree
from roofline.serving.prefix_cache import PrefixCache
from roofline.serving.requests import Requests
from roofline.serving.scheduler import Scheduler, SchedulerConfig
from roofline.serving.speculative import SPEC_SEED, DraftCost, Speculative, speculative_pool
from roofline.serving.stepmodel import StepModel
from roofline.specs import Hardware, Model, Workload

BLOCK_STEPS = 256  # most decode-only steps in one block
LAZY_STEPS = 8  # a block's first batch of steps evaluated; each further batch doubles until the next arrival


def _lazy_ends(steps: int, until_s: float, block) -> np.ndarray:
    """End times of a decode block's `steps` steps from its start, `block(done, k)` giving the wall times of steps
    done .. done + k - 1, evaluated in batches of LAZY_STEPS doubling, until one ends at or past `until_s` (the
    comparison `cut` makes: the step that holds the arrival is computed)."""
    parts, done, size = [], 0, LAZY_STEPS
    while done < steps:
        k = min(size, steps - done)
        parts.append(block(done, k))
        done, size = done + k, 2 * size
        ends = np.cumsum(np.concatenate(parts))
        if ends[-1] >= until_s:
            break
    return ends


def host_start(ends: np.ndarray, i: int, launch_s: float, slack_s: float = 0.0) -> float:
    """Seconds from a block's start at which the engine core schedules the step after step i (`ends`: the block's
    steps' ends from its start), under the admission lag: a request that reaches the engine by then runs in that
    step, one after it in the step after. `launch_s`: the host seconds of each of the block's steps (Simulator.
    block_launch_s; 0 outside an asynchronous loop), `slack_s`: the host's lead into the block's first step
    (scheduling.chained_ends).

    vLLM 0.24's engine core (v1/engine/core.py@v0.24.0:519-603 step_with_batch_queue) schedules and launches step
    n + 1, then waits for step n's result, sends its outputs and takes new requests: it schedules step n + 1 at
    max(step n's launch end, step n's start) (scheduling.chained_ends). Where the GPU bounds the steps that is step
    n's start (the admission lag's two steps); a request that arrives while a host-bound step is launched is taken
    in right after that launch and runs in the next step (run 23's step log, validate/notes/2026-11-30-vllm-h200-
    run23.md, last section), as is one that arrives while an eager step's launch outlasts the step before it
    (timing mechanism 24). Where that launch ends with the step (within 1e-9 of the host seconds) the step's end."""
    host = -slack_s
    for j in range(i + 1):
        host = max(host + launch_s, float(ends[j - 1]) if j else 0.0)
    end = float(ends[i])
    return end if end - host <= 1e-9 * launch_s else host


def last_seen(ends: np.ndarray, steps: int, launch_s: float, slack_s: float = 0.0) -> float:
    """Seconds from a block's start by which a request must reach the engine to be in the schedule made at its end
    under the admission lag: host_start of its last step (that step's start where the GPU bounds the steps, its end
    where the host did)."""
    return host_start(ends, steps - 1, launch_s, slack_s)


@dataclass(frozen=True)
class _GpuSide:
    """EngineOverheads.combine's GPU side alone (the sampler's kernels added): Simulator.block_ends' step times
    before scheduling.chained_ends adds the host's chain."""

    overheads: EngineOverheads

    def combine(self, gpu_s, sequences: int, tokens: int = 0, loads_s: float = 0.0, prefill: bool = False,
                rebuilt: bool = False):
        return self.overheads.with_sampler(gpu_s, sequences)


@dataclass(frozen=True)
class Slo:
    """Latency targets of one request: time to first token and time per output token (p99 of each)."""

    ttft_s: float
    tpot_s: float

    def __post_init__(self) -> None:
        for name, value in (("--slo-ttft-ms", self.ttft_s), ("--slo-tpot-ms", self.tpot_s)):
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name}: {value * 1e3:g} must be a positive finite number of milliseconds")


@dataclass
class Trace:
    """Per-request times and per-step engine records of one run."""

    requests: Requests
    first_token_s: np.ndarray
    finish_s: np.ndarray
    steps: np.ndarray  # rows: start_s, duration_s, running, waiting, kv_used_bytes, preemptions, tokens
    kv_capacity_bytes: float
    preemptions: int
    prefix_cache: dict | None = None  # PrefixCache.stats() when the run cached shared prefixes
    # the tensor cores' clock Simulator.run chose (serving.clock): {"clock": "burst" | "sustained", "duty": ...}
    gemm_clock: dict | None = None
    # a fresh server's first-use compiles (Simulator.cold_start): {"keys": n, "seconds": total, "tokens": the eager
    # steps that compiled them}; None in steady state
    first_use: dict | None = None
    # per record, its steps' eager launch seconds (past the capture sizes) in an asynchronous loop, which the step
    # before's outputs wait for (clients.launch_delay_s; Simulator.block_launch_s); 0 elsewhere; None: not kept
    launch_s: np.ndarray | None = None
    # llama-server's slots as the run left them (scheduler.slot_streams): each slot's last release on the run's clock,
    # -1 never used; None elsewhere (a next run's Simulator.slot_last, shifted to its own clock)
    slots_after: tuple | None = None

    @property
    def ttft_s(self) -> np.ndarray:
        """Time to first token per request, seconds: first token - arrival."""
        return self.first_token_s - self.requests.arrival_s

    @property
    def e2e_s(self) -> np.ndarray:
        """End-to-end latency per request, seconds: finish - arrival."""
        return self.finish_s - self.requests.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        """(finish - first token) / (output - 1), for requests of more than one output token."""
        out = self.requests.output_tokens
        many = out > 1
        return (self.finish_s[many] - self.first_token_s[many]) / (out[many] - 1)

    def emitted(self, per_seq_s: float) -> Trace:
        """This trace with each first token delayed by its step's other outputs on the way out
        (clients.emission_delay_s) and by the eager launch of the step after the one that made it (clients.
        launch_delay_s); the schedule itself, finishes included, is unchanged. A last token
        leaves after the next launch too: a closed-loop client's next send is made there by the loop itself
        (release_at_launch), a chat's next turn at the schedule's finish; the finish stamp stays the schedule's (TPOT
        reads low by the first token's delay over the output's tokens, under 1 % at 100 tokens and a 50 ms
        launch)."""
        delay = emission_delay_s(self.first_token_s, self.steps, per_seq_s)
        if self.launch_s is not None and self.launch_s.any():
            delay = delay + launch_delay_s(self.first_token_s, self.steps, self.launch_s)
        return replace(self, first_token_s=self.first_token_s + delay) if delay.any() else self

    @property
    def horizon_s(self) -> float:
        """From time 0 (arrivals start then) to the last completion."""
        return float(np.max(self.finish_s))

    @property
    def output_tokens_per_s(self) -> float:
        """Output tokens over the horizon: what the run streams to its clients a second."""
        return float(self.requests.output_tokens.sum() / self.horizon_s)

    def meets(self, slo: Slo) -> np.ndarray:
        """Per request: both its TTFT and its TPOT within the SLO (a one-token request has no TPOT)."""
        out = self.requests.output_tokens
        tpot = np.zeros(len(out))
        many = out > 1
        tpot[many] = self.tpot_s
        return (self.ttft_s <= slo.ttft_s) & (tpot <= slo.tpot_s)


@dataclass
class Simulator:
    """Everything compiled once per (model, method, hardware, workload, scheduler): the step model and the
    KV pool; `run` then simulates any set of requests."""

    model: Model
    hardware: Hardware
    workload: Workload
    method: MethodConfig
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    max_tokens: int = 0
    pool: KVPool | None = None
    engine: EngineScheduling | None = None  # the engine's scheduler, graph padding and overheads (None: ideal)
    speculative: Speculative | None = None  # speculative decoding (serving.speculative)
    fast: bool = True  # steps through serving.closedform (the same times to float rounding); False: StepModel's numpy
    # the compiled record loop (serving.kernel) for the runs it covers, the same times to float rounding: None from
    # kernel.MIN_REQUESTS requests on, True for any covered run, False never
    kernel: bool | None = None
    # the tensor cores' clock (serving.clock): "sustained" (the planner's steady state) or "burst" hold one rate for
    # every run; "duty" (what `roofline simulate` and the dashboard run: serving.engined) prices a run at the
    # sustained rate and runs it again between the burst and the sustained rates by its GEMM duty (serving.clock)
    clock: str = "sustained"
    share: float = 0.0  # clock "burst": the share of the way to the sustained rates (serving.clock.sustained_share)
    # a freshly started server: its eager steps compile each new fused-MoE specialisation once (engines.first_use;
    # the Python loop only: serving.kernel does not cover it)
    cold_start: bool = False
    # cold_start's server after earlier traffic in the same process: the tokens of the eager steps it ran (their
    # fused-MoE keys compiled then; a run's Trace.first_use "tokens")
    compiled_tokens: tuple[int, ...] = ()
    # llama-server's slots (scheduler.slot_streams) as earlier traffic left them: each slot's last release, -1 never
    # (None: a fresh server); a run leaves its own in Trace.slots_after
    slot_last: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.max_tokens <= 0:
            raise ValueError("serving: max_tokens (longest request) must be positive")
        if self.clock not in ("duty", "sustained", "burst"):
            raise ValueError(f"serving: clock: {self.clock!r} is not one of duty, sustained, burst")
        self._given = (self.scheduler, self.engine, self.pool)  # what a twin at another clock is built from
        self._twins: dict[float, Simulator] = {}
        k = self.speculative.tokens if self.speculative else 0
        if self.engine is None:
            self.engine = EngineScheduling("ideal", self.scheduler.max_num_seqs, self.scheduler.max_num_batched_tokens,
                                           prefix_caching=True)
            if k:
                self.scheduler = replace(self.scheduler, spec_tokens=k)
        else:
            self.engine = self._with_eager(self.engine)
            self.scheduler = SchedulerConfig.of(self.engine, k)
        roof = None
        if self.clock == "burst" and (options := burst_options(self.hardware, engine_options(self.workload.engine,
                                                                                            self.hardware),
                                                               self.share)):
            roof = roofline_for(self.hardware, tp=self.workload.tp, options=options)
        self.phases = PhaseModel.build(self.model, self.hardware, self.workload, self.method, roofline=roof)
        step_tokens = self.scheduler.max_num_batched_tokens + self.scheduler.max_num_seqs * (1 + k)
        table = self.max_tokens + k  # a verifying sequence reaches K tokens past its last
        # llama-server's slots sharing one KV stream: a step attends over every cell the stream holds (timing 22.;
        # one pipeline stage: a layer split's stages are timed by the pipelined laws, which keep their own contexts)
        self.span = (bool(self.phases.engine.fa_span) and not self.scheduler.slot_streams and not k
                     and self.workload.pp == 1)
        if self.span:
            self.scheduler = replace(self.scheduler, unified_slots=True)
        if self.pool is None:
            # the engine's peak step: a full token budget of prefill and logits for max_num_seqs sequences
            peak = self.workload.model_copy(update={
                "batch": self.scheduler.max_num_seqs, "prompt_tokens": None, "generated_tokens": 0,
                "micro_batches": 1, "prefill_chunk_tokens": self.scheduler.max_num_batched_tokens})
            self.pool = KVPool.from_planner(self.model, self.hardware, peak, self.phases.cache, table)
        # the step tables reach the one stream's view: every slot at its longest request, within the stream's cells
        span_table = max(table, min(pad256(self.scheduler.max_num_seqs * table), self.stream_cells))
        self.steps = StepModel(self.phases, span_table if self.span else table, step_tokens)
        # pp > 1 (serving.pipeline) too, except with speculative decoding (its verify and draft passes have no
        # pipelined closed form: StepModel's numpy path times them)
        # llama-server's slots (scheduler.slot_streams) split a step by its slot ids: StepModel's numpy path times them
        self.closed = (ClosedForm(self.steps) if self.fast and (self.workload.pp == 1 or not k)
                       and not self.scheduler.slots else None)
        # the one-stream server's steps through the same laws compiled (StepModel.span_time's `closed`)
        self.span_closed = ClosedForm(self.steps) if self.span and self.fast else None
        self.draft = None
        if k:
            self.draft = DraftCost(self.speculative, self, table)
            self.pool = speculative_pool(self.pool, self.draft, table)

    def _with_eager(self, engine: EngineScheduling) -> EngineScheduling:
        """`engine` with this model's sampler on this GPU (scheduling.with_sampler) and its launch cost of a step
        past the capture sizes (scheduling.with_eager), per pipeline stage (timing.eager_layers)."""
        engine = with_sampler(engine, self.hardware.name, self.model.vocab_size)
        return with_eager(engine, *eager_layers(self.model, self.workload))

    def set_engine(self, engine: EngineScheduling) -> None:
        """Run under another profile of the same engine (e.g. SGLang's running cap once its pool is known)."""
        self._given = (self._given[0], engine, self._given[2])
        self._twins = {}
        engine = self._with_eager(engine)
        self.engine = engine
        self.scheduler = SchedulerConfig.of(engine, self.speculative.tokens if self.speculative else 0)
        if self.span:
            self.scheduler = replace(self.scheduler, unified_slots=not self.scheduler.slot_streams)

    def _slot_ends(self, sched: Scheduler, plan, steps: int, until_s: float, host) -> np.ndarray:
        """block_ends for llama-server with one KV stream a slot: each step runs as the ubatches its slots split into
        (engines.llamacpp.ubatches: consecutive slot ids only, at most the engine's pass_tokens each), timed by
        StepModel's numpy path (the same slots all through a decode block, so the same split)."""
        seqs = len(plan.context) + len(plan.chunk_tokens)
        n_ubatch = self.phases.engine.pass_tokens or self.scheduler.max_num_batched_tokens
        sizes = ubatches(sched.slot[plan.decode], sched.slot[plan.chunk_pos], plan.chunk_tokens, n_ubatch)
        split = len(sizes) > 1  # the server's graph is rebuilt for such a step (timing 21.)
        if steps == 1:
            gpu = self.steps.split_time(plan.context, plan.chunk_start, plan.chunk_tokens, plan.chunk_done, sizes)
            return np.array([host.combine(gpu, seqs, plan.tokens, plan.loads_s, bool(len(plan.chunk_tokens)), split)])
        return _lazy_ends(steps, until_s, lambda done, k: host.combine(
            self.steps.decode_block(plan.context + done, k, 0, sizes), seqs, seqs, rebuilt=split))

    def _span_ends(self, sched: Scheduler, plan, steps: int, until_s: float, host) -> np.ndarray:
        """block_ends for llama-server with its slots in one KV stream: each ubatch's attention spans the cells the
        stream holds (Scheduler.stream_used: the running sequences' and those idle slots keep) and the host builds its
        mask over them (StepModel.span_time, span_block: timing 22., 23.), through the compiled laws when fast."""
        seqs = len(plan.context) + len(plan.chunk_tokens)
        n_ubatch = self.phases.engine.pass_tokens
        used, size = sched.stream_used(), self.stream_cells
        tile = fa_query_tile(self.model.num_heads // self.model.num_kv_heads)
        if steps == 1 or (n_ubatch and len(plan.context) > n_ubatch):
            ends = []
            for j in range(steps):
                ctx = plan.context + j
                gpu = self.steps.span_time(ctx, plan.chunk_start, plan.chunk_tokens, plan.chunk_done,
                                           used + j * len(ctx), size, tile, n_ubatch, self.span_closed)
                ends.append(host.combine(gpu, seqs, plan.tokens, plan.loads_s, bool(len(plan.chunk_tokens))))
            return np.cumsum(ends)
        return _lazy_ends(steps, until_s, lambda done, k: host.combine(
            self.steps.span_block(plan.context + done, k, used + done * len(plan.context), size, tile,
                                  self.span_closed), seqs, seqs))

    @cached_property
    def stream_cells(self) -> int:
        """The cells of llama-server's one KV stream: the pool's tokens (its n_ctx, padded)."""
        return int(self.pool.capacity_bytes // (self.pool.page_bytes / self.pool.page_tokens))

    def accepted(self, sched: Scheduler, plan, rng: np.random.Generator) -> np.ndarray | None:
        """Tokens each decoding sequence of a finished step emits beyond its one: accepted drafts, drawn at the
        per-position rates, at most what the request has left to generate (None without speculative decoding)."""
        if self.speculative is None or not len(plan.context):
            return None
        room = sched.out[plan.decode] - sched.gen[plan.decode]
        return np.minimum(self.speculative.draw(rng, len(plan.context)) + 1, room) - 1

    def use_kernel(self, requests: Requests, clients: Clients | None = None, preloaded=None,
                   router: str = "round-robin", single: bool = False, transfer_s=None) -> bool:
        """Whether this run goes through serving.kernel: allowed by `kernel`, large enough in auto mode, and covered
        exactly (kernel.covers; otherwise the loop below runs); `single`: this class's run, else Fleet.run."""
        from roofline.serving import kernel
        if self.kernel is False or self.cold_start or (self.kernel is None and len(requests) < kernel.MIN_REQUESTS):
            return False
        return kernel.covers(self, requests, clients, preloaded, router, single, transfer_s) is None

    def run_kernel(self, requests: Requests, clients: Clients | None, replicas: int = 1,
                   router: str = "round-robin", single: bool = False) -> tuple[Requests, tuple]:
        """serving.kernel's run of `requests` on `replicas` replicas (`single`: as this class's run, else as
        Fleet.run): (the requests as sent, its arrays)."""
        from roofline.serving import kernel
        send, *out = kernel.run(self, requests, clients, replicas, router, BLOCK_STEPS, single)
        return Requests(send, requests.prompt_tokens, requests.output_tokens, requests.prefix), tuple(out)

    def check(self, requests: Requests, prompt_field: str = "--prompt-tokens",
              output_field: str = "--output-tokens") -> None:
        """Requests the model or the pool cannot hold are input errors naming the length field."""
        from roofline.errors import SpecError

        requests.check_positions(self.model.max_position_embeddings, prompt_field, output_field)
        if requests.max_tokens > self.max_tokens:
            raise ValueError(f"serving: a request of {requests.max_tokens} tokens exceeds the simulator's "
                             f"max_tokens {self.max_tokens}")
        total = requests.prompt_tokens + requests.output_tokens
        worst = int(np.argmax(total))
        need = float(self.pool.seq_bytes[total[worst]])
        if need > self.pool.capacity_bytes:
            raise SpecError(f"{prompt_field}: a request of {int(total[worst]):,} tokens needs {need / 2**30:.2f} GiB "
                            f"of KV, more than the whole pool ({self.pool.capacity_bytes / 2**30:.2f} GiB) on "
                            f"{self.hardware.name} with tp={self.workload.tp}")

    @property
    def block_limit(self) -> int:
        """Most decode-only steps in one block: BLOCK_STEPS, or 1 for pp > 1 off the closed form (StepModel's
        decode_block has no pipeline; its step_time, the reference, times each pipelined step)."""
        return BLOCK_STEPS if self.workload.pp == 1 or self.closed is not None else 1

    @property
    def lagged(self) -> bool:
        """Whether the engine schedules asynchronously with the admission lag: each step's host work chains from the
        step before's (scheduling.chained_ends, timing mechanism 24; block_launch_s live)."""
        e = self.engine
        return e is not None and e.admission_lag and e.overheads.overlap

    def block_ends(self, sched: Scheduler, plan, until_s: float = math.inf, slack_s: float = 0.0) -> np.ndarray:
        """End times, from the block's start, of the next block's steps: one step, or decode-only steps back to back
        until a completion or a page shortage (the same steps one at a time would take; pp > 1 only through the
        closed form: StepModel's numpy path times a pipelined step one at a time, the reference). The caller
        cuts it at the next arrival (`cut`); steps are evaluated only until one ends at or past `until_s` from the
        block's start (the cut falls there), the same times as evaluating them all: by the closed form's linear
        stretches (serving.closedform) when it applies, else StepModel's numpy path in growing batches (pp > 1: the
        closed form's pipelined steps one by one). Where the engine schedules asynchronously with the admission lag
        (`lagged`), each step's host work follows the step before's (scheduling.chained_ends: `slack_s`, the host's
        lead into the block's first step, the end of the block before less its host_start)."""
        if not self.lagged:
            return self._ends(sched, plan, until_s, self.engine.overheads)
        host, eager = self._host_work(sched, plan)
        gpu = self._ends(sched, plan, until_s, _GpuSide(self.engine.overheads))
        return chained_ends(np.diff(gpu, prepend=0.0), host, slack_s, eager)

    def _ends(self, sched: Scheduler, plan, until_s: float, host) -> np.ndarray:
        """block_ends with `host` combining each step's GPU and host seconds (EngineOverheads.combine, or _GpuSide's
        GPU seconds alone)."""
        context, engine = plan.context, self.engine
        if not plan.tokens:  # a step that only posts remote loads (Scheduler.posts): host work, no forward
            return np.array([0.0 if isinstance(host, _GpuSide) else engine.overheads.step(0) + plan.loads_s])
        steps = sched.block_length(plan, self.block_limit)
        pad = engine.padded_tokens(plan.tokens, not len(plan.chunk_tokens)) - plan.tokens
        seqs = len(context) + len(plan.chunk_tokens)
        if self.draft is not None and (len(context) or len(plan.chunk_tokens)):
            # verify: each decoding sequence's last token and its K drafts, a chunk after its cached tokens
            k1 = self.speculative.tokens + 1
            starts = np.concatenate([context - 1, plan.chunk_start])
            counts = np.concatenate([np.full(len(context), k1), plan.chunk_tokens])
            done = np.concatenate([np.ones(len(context), dtype=bool), plan.chunk_done])
            empty = np.zeros(0, dtype=np.int64)
            if self.closed is not None:
                verify = self.closed.time(self.closed.chunk_work(starts, counts, done, pad), 0)
            else:
                verify = self.steps.step_time(empty, starts, counts, done, pad)
            drafts = self.draft.time_s(context, plan.chunk_start, plan.chunk_tokens)
            return np.array([host.combine(verify + drafts, seqs, int(counts.sum()), plan.loads_s,
                                          bool(len(plan.chunk_tokens)))])
        if self.scheduler.slot_streams:  # llama-server's slots: the step's ubatches follow its slot ids (timing 20.)
            return self._slot_ends(sched, plan, steps, until_s, host)
        if self.span:  # llama-server's slots in one stream: attention over the stream's cells (timing 22.)
            return self._span_ends(sched, plan, steps, until_s, host)
        closed = self.closed
        # a pipeline, or an engine's passes over the step's tokens (llama.cpp's ubatches): micro-batches
        pipelined = closed is not None and (self.workload.pp > 1
                                            or self.phases.micro_count(seqs, plan.tokens + pad) > 1)
        if steps == 1:
            if pipelined:
                gpu = closed.pipelined(context, pad, plan.chunk_start, plan.chunk_tokens, plan.chunk_done)
            elif closed is None:
                gpu = self.steps.step_time(context, plan.chunk_start, plan.chunk_tokens, plan.chunk_done, pad)
            elif len(plan.chunk_tokens):
                gpu = closed.time(closed.work(context, pad, len(context), True, plan.chunk_start, plan.chunk_tokens,
                                              plan.chunk_done), len(context))
            else:
                gpu = closed.time(closed.work(context, pad, len(context), False), len(context))
            return np.array([host.combine(gpu, seqs, plan.tokens, plan.loads_s, bool(len(plan.chunk_tokens)))])
        if closed is not None and closed.blocks:
            return closed.decode_ends(context, steps, pad, lambda gpu: host.combine(gpu, seqs, seqs), until_s)

        def block(done: int, k: int) -> np.ndarray:
            if pipelined:  # a law with a min (tp > 1's all-reduce): the closed form step by step
                return host.combine(np.array([closed.pipelined(context + s, pad) for s in range(done, done + k)]),
                                    seqs, seqs)
            return host.combine(self.steps.decode_block(context + done, k, pad), seqs, seqs)
        return _lazy_ends(steps, until_s, block)

    def block_launch_s(self, sched: Scheduler, plan, slack_s: float = 0.0) -> tuple[float, float]:
        """Where the engine schedules asynchronously with the admission lag (`lagged`): (the host seconds of each
        step of the block `plan` starts, EngineOverheads.host_s of the sequences, tokens, loads and chunks block_ends
        gives combine: scheduling.chained_ends chains them, host_start reads when the next step is scheduled; the
        part of the eager launch, past the capture sizes, that outlasts the step before, the host's lead `slack_s`
        into the block's first step spent: the step before's outputs wait for it, clients.launch_delay_s); (0, 0)
        elsewhere. The launch's part is the eager launch alone, not the whole host work: a graph step's schedule and
        launch are in the API path (clients.launch_delay_s)."""
        if not self.lagged:
            return 0.0, 0.0
        host, eager = self._host_work(sched, plan)
        return host, max(0.0, self.engine.overheads.eager_s - slack_s) if eager else 0.0

    def _host_work(self, sched: Scheduler, plan) -> tuple[float, bool]:
        """(EngineOverheads.host_s of each step of the block `plan` starts, over the sequences, tokens, loads and
        chunks block_ends gives combine; whether those steps run past the capture sizes, EngineOverheads.eager)."""
        host = self.engine.overheads
        if not plan.tokens:  # block_ends' host-only step
            return host.step(0) + plan.loads_s, False
        seqs, chunks = len(plan.context) + len(plan.chunk_tokens), bool(len(plan.chunk_tokens))
        tokens, loads = plan.tokens, plan.loads_s
        if self.draft is not None and (len(plan.context) or chunks):  # the verify's tokens (block_ends)
            tokens = len(plan.context) * (self.speculative.tokens + 1) + int(np.sum(plan.chunk_tokens))
        elif sched.block_length(plan, self.block_limit) > 1:  # decode-only steps (block_ends: combine(gpu, seqs, seqs))
            tokens, loads = seqs, 0.0
        return host.host_s(seqs, tokens, loads, chunks), host.eager(tokens, chunks)

    def release_at_launch(self, clients: Clients) -> bool:
        """Whether a completion frees its closed-loop client's slot only once the step after it is launched (then
        at the schedule's finish plus that step's eager launch, Simulator.block_launch_s; the finish itself at the
        schedule's): where the engine schedules asynchronously with the admission lag (block_launch_s live). vLLM
        0.24's engine core sends step n's outputs, a last token's included, after launching step n + 1
        (v1/engine/core.py@v0.24.0:519-603 step_with_batch_queue; clients.launch_delay_s), so the client's next
        request is sent after that launch: in run 23's step log (validate/notes/2026-11-30-c16-ttft.md) a closed-loop
        send follows the line of its predecessor's last step, written after the next step's launch, by 3.7 ms
        (median), and lands two or three steps after that last step, never one. Chat sessions' next turns keep the
        schedule's finish (not measured)."""
        return clients.max_concurrency is not None and self.lagged

    @staticmethod
    def cut(ends: np.ndarray, now: float, next_arrival: float, lag: bool = False, launch_s: float = 0.0,
            slack_s: float = 0.0) -> int:
        """Steps of a block started at `now` that run: the step during which the next request arrives is the
        block's last (the request is seen at the next step); with the engine's admission lag the step after it
        is (seen one step later; one that arrived before `now` and is not yet seen: after the first step), except
        where it arrives by the next step's schedule (host_start: the launch of the step it arrives during ends
        after it, a host-bound step's or an eager launch outlasting the step before): the engine takes it in then,
        for the next step."""
        if next_arrival < math.inf and len(ends) > 1:
            during = int(np.searchsorted(ends, next_arrival - now))
            late = (lag and next_arrival >= now and during < len(ends)
                    and next_arrival - now > host_start(ends, during, launch_s, slack_s))
            return min(len(ends), during + (2 if late else 1))
        return len(ends)

    def _block(self, sched: Scheduler, plan, now: float, nxt: float, lag: bool, compiled: FirstUse | None = None,
               slack_s: float = 0.0) -> tuple[np.ndarray, int, tuple[float, float]]:
        """The next block's step ends, how many of its steps run before the next arrival is seen (`cut`) and its
        steps' host and eager launch seconds (block_launch_s).
        With the admission lag the block must hold the step after the arrival's: block_ends evaluates only to
        the step that holds the arrival, so when that is its last and the block may run longer, it is evaluated
        one step further (both step-time paths then cut at the same step). `compiled` (a fresh server's, cold_start):
        an eager first step at a new fused-MoE key first compiles it (engines.first_use), every step later by that.
        `slack_s`: the host's lead into the block's first step (block_ends)."""
        stall = 0.0
        if compiled is not None and self.engine.overheads.eager(plan.tokens, bool(len(plan.chunk_tokens))):
            stall = compiled.stall(plan.tokens)
        ends = self.block_ends(sched, plan, nxt - now - stall, slack_s) + stall
        if lag and now <= nxt < math.inf:
            during = int(np.searchsorted(ends, nxt - now))
            if during + 1 == len(ends) and sched.block_length(plan, self.block_limit) > len(ends):
                ends = self.block_ends(sched, plan, (float(ends[-1]) - stall) * (1 + 1e-9), slack_s) + stall
        launch = self.block_launch_s(sched, plan, slack_s)
        return ends, self.cut(ends, now, nxt, lag, launch[0], slack_s), launch

    def _first_use_json(self, compiled: FirstUse | None) -> dict | None:
        """Trace.first_use: the fresh server's compiles, with why there were none where nothing compiles on first
        use; None in steady state."""
        if not self.cold_start:
            return None
        if compiled is None:
            return {"keys": 0, "seconds": 0.0, "why": "nothing compiles on first use here: no routed experts on "
                    "vLLM's or SGLang's Triton fused MoE (engines.first_use)"}
        return {"keys": compiled.stalls, "seconds": compiled.stalls * compiled.key_s, "tokens": list(compiled.tokens)}

    def first_use(self) -> FirstUse | None:
        """A fresh server's compile state for this run (cold_start), or None (steady state, or nothing compiles)."""
        if not self.cold_start or self.engine is None:
            return None
        e = self.engine
        key_s = timing_on(e.engine, e.host_speed).moe_jit_key_s
        return first_use(self.model, e.engine, e.capture_sizes, e.prefill_capture_sizes, e.max_num_batched_tokens,
                         key_s, self.workload.expert_dtype, self.hardware.name, self.workload.tp,
                         self.compiled_tokens)

    def twin(self, share: float) -> Simulator | None:
        """This simulator with the tensor cores `share` of the way from the burst to the sustained rates
        (serving.clock), built from what this one was given; None when the clock is held or the device has no
        sustained figure to move."""
        if self.clock != "duty" or burst_options(self.hardware) is None:
            return None
        if share not in self._twins:
            scheduler, engine, pool = self._given
            self._twins[share] = replace(self, scheduler=scheduler, engine=engine, pool=pool, clock="burst",
                                         share=share)
        return self._twins[share]

    @property
    def burst_twin(self) -> Simulator | None:
        """twin(0): every tensor-core rate at the burst clock."""
        return self.twin(0.0)

    @cached_property
    def gemm_s_per_token(self) -> float:
        """One token's GEMM seconds at this simulator's rates (serving.clock.gemm_s_per_token)."""
        return gemm_s_per_token(self.phases)

    def run(self, requests: Requests, progress: Callable[[int, int], None] | None = None,
            clients: Clients | None = None) -> Trace:
        """Simulate `requests` to completion, released by `clients` (default: open loop at their arrival times);
        under clock "duty" a run whose GEMM duty at the sustained rate leaves the board under its power cap for part
        of the time is run again at rates between the burst and the sustained (serving.clock)."""
        trace = self._run(requests, progress, clients)
        if self.burst_twin is None:
            return trace.emitted(self.emit_per_seq_s)
        duty = gemm_duty(trace.steps, trace.requests.arrival_s, trace.finish_s, self.gemm_s_per_token)
        clock = decision(duty)
        if clock["sustained_share"] < 1.0:  # the twin's clock is held: its run returns its trace emitted
            return replace(self.twin(clock["sustained_share"]).run(requests, progress, clients), gemm_clock=clock)
        return replace(trace.emitted(self.emit_per_seq_s), gemm_clock=clock)

    @property
    def emit_per_seq_s(self) -> float:
        """Seconds a running sequence's output delays a new request's first token on the API server's way out
        (clients.emission_delay_s): the engine's served host work per sequence; 0 without an engine profile."""
        return self.engine.overheads.per_seq_s if self.engine is not None else 0.0

    def _run(self, requests: Requests, progress: Callable[[int, int], None] | None = None,
             clients: Clients | None = None) -> Trace:
        """One run at this simulator's rates (see run)."""
        self.check(requests)
        if self.use_kernel(requests, clients, single=True):
            sent, (first, finish, _, rec, preempted, cached) = self.run_kernel(requests, clients, single=True)
            if progress is not None:
                progress(len(requests), len(requests))
            return Trace(sent, first, finish, np.ascontiguousarray(rec[:, :7]), self.pool.capacity_bytes,
                         int(preempted[0]), cached[0] if cached is not None else None,
                         launch_s=np.ascontiguousarray(rec[:, LAUNCH_COL]))
        tree = cache_tree(self.engine, requests)
        cache = None if tree is None else PrefixCache(tree, self.pool.seq_bytes, self.pool.page_tokens)
        host = self.engine.overheads
        sched = Scheduler(requests, self.pool, self.scheduler, cache, save=(host.save_s, host.save_byte_s),
                          slot_last=self.slot_last)
        records: list[tuple] = []
        arrivals = Arrivals(requests, clients or Clients(), self.engine.overheads.api_request_s)
        rng = np.random.default_rng(SPEC_SEED)
        now, total = 0.0, len(requests)
        lag = self.engine.admission_lag
        compiled = self.first_use()
        seen = 0.0  # requests that reached the engine by then are schedulable now (admission_lag: the last start)
        slack = 0.0  # the host's lead into the next step (block_ends; 0 after an idle engine)
        ended = None  # completions whose closed-loop slots wait for the next step's launch (release_at_launch)
        while sched.finished < total:
            due = arrivals.due(seen if lag else now)
            if due:
                sched.waiting.extend(due)
                sched.arrived += len(due)
            in_system = (sched.n_running, len(sched.waiting))
            sched.now = now
            plan = sched.schedule()
            if ended is not None:
                launch = self.block_launch_s(sched, plan, slack)[1] if plan is not None else 0.0
                arrivals.finished(ended, now + launch)
                ended = None
            nxt = arrivals.next_time()
            if plan is None:  # idle until the next arrival (an idle engine schedules what arrives at once)
                if nxt == math.inf:
                    raise RuntimeError("serving: the engine is idle with requests outstanding and none to arrive")
                now = seen = max(now, nxt)
                slack = 0.0
                continue
            ends, steps, launch = self._block(sched, plan, now, nxt, lag, compiled, slack)
            dt = float(ends[steps - 1])
            host = last_seen(ends, steps, launch[0], slack)
            seen, slack = now + host, dt - host if self.lagged else 0.0
            records.append((now, dt, *in_system, sched.used_bytes, sched.preemptions, plan.tokens * steps, launch[1]))
            now += dt
            if sched.commit_block(plan, steps, now, self.accepted(sched, plan, rng)):
                if self.release_at_launch(arrivals.clients):
                    ended = sched.last_finished.copy()
                else:
                    arrivals.finished(sched.last_finished, now)
                if progress is not None:
                    progress(sched.finished, total)
        table = np.array(records, dtype=np.float64).reshape(-1, 8)
        sent = Requests(arrivals.send_s, requests.prompt_tokens, requests.output_tokens, requests.prefix)
        return Trace(sent, sched.first_token_s, sched.finish_s, table[:, :7], self.pool.capacity_bytes,
                     sched.preemptions, cache.stats() if cache is not None and requests.prefix is not None else None,
                     first_use=self._first_use_json(compiled), launch_s=table[:, 7],
                     slots_after=tuple(-1.0 if t is None else t for t in sched.slot_last)
                     if self.scheduler.slots else None)

