"""A fleet: N identical replicas behind a router, simulated together on one clock.

Each replica is the single-replica engine (its own scheduler, KV pool and prefix cache, the same step model); a
request is routed when it arrives:
- round-robin: request k to replica k mod N;
- least-outstanding: the replica with the fewest requests running or waiting (ties: the lowest index) - the
  "least request" policy of Envoy / the llm-d inference scheduler's queue scorer;
- prefix-aware: SGLang's cache-aware router (serving.router, its source cited there): the least outstanding when
  the load is imbalanced past its thresholds, else the replica whose cache holds the longest prefix of the request
  (in whole pages; ties by least outstanding) when that prefix is more than cache_threshold of the prompt, else
  the replica the router has sent the fewest new prompt tokens (its smallest prefix tree). Without a prefix cache
  in use: least-outstanding.
The event loop is the single replica's, kept per replica: a replica's decode-only block is cut at the step during
which a request is routed to it (its outstanding count cannot change inside a block: blocks end at the first
completion). With one replica it replays Simulator.run exactly (tested). The prefix-aware router reads a replica's
cache as of its last committed step.

Sizing: the fewest replicas whose fleet meets the SLO (TTFT p99 and TPOT p99) at a target rate, searched by
bisection on N with the fleet simulated at each N; cost per million output tokens = $/GPU-hour x GPUs / 3600 /
output tokens per second x 1e6.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from roofline.serving.clients import Arrivals, Clients
from roofline.serving.clock import decision, gemm_duty
from roofline.serving.prefix import cache_tree
from roofline.serving.prefix_cache import PrefixCache, merged_stats
from roofline.serving.remote import Handshake
from roofline.serving.requests import Requests
from roofline.serving.router import CacheAware, choose
from roofline.serving.scheduler import Scheduler
from roofline.serving.search import usd_per_million_tokens
from roofline.serving.simulate import BLOCK_STEPS, SPEC_SEED, Simulator, Slo, Trace, last_seen

ROUTERS = ("round-robin", "least-outstanding", "prefix-aware")


@dataclass
class _Replica:
    sched: Scheduler
    records: list[tuple] = field(default_factory=list)
    plan: Any = None
    start: float = 0.0
    ends: np.ndarray | None = None
    steps: int = 0
    launch: tuple = (0.0, 0.0)  # the block's steps' host and eager launch seconds (Simulator.block_launch_s)
    slack: float = 0.0  # the host's lead into the block's first step (Simulator.block_ends; 0 after idling)
    version: int = 0  # bumps when the block in flight is cut: stale heap entries are skipped
    held: list = field(default_factory=list)  # (arrival, id) routed here, not yet seen (the engine's admission lag)
    # its place in the fleet: breaks ties between events at one instant, lowest first (kernel_loop's argmin does the
    # same); never id(), whose order is the allocator's and changed results from run to run
    index: int = 0

    @property
    def outstanding(self) -> int:
        return self.sched.n_running + len(self.sched.waiting) + len(self.held) + len(self.sched.remote)

    def admit(self, until: float) -> None:
        """Held requests that arrived by `until` join the waiting queue, in arrival order."""
        seen = [i for t, i in self.held if t <= until]
        if seen:
            self.held = [(t, i) for t, i in self.held if t > until]
            self.sched.waiting.extend(seen)
            self.sched.arrived += len(seen)


@dataclass
class FleetTrace:
    """One fleet run: the merged per-request trace and each replica's own."""

    trace: Trace
    replicas: Sequence[Trace]  # a list, or serving.kernel_fleet.KernelReplicas (built when read)
    routed: np.ndarray  # replica of each request


def _emitted(out: FleetTrace, per_seq_s: float) -> FleetTrace:
    """Each replica's first tokens delayed by that replica's step outputs on the way out and by the next step's
    eager launch (Trace.emitted), the merged trace taking each request's from its own replica."""
    if not isinstance(out.replicas, list):  # kernel_fleet.KernelReplicas: each request against its own replica's
        first, reps = out.replicas.emitted(per_seq_s)  # records in one compiled pass, no replica's Trace built
        return FleetTrace(replace(out.trace, first_token_s=first), reps, out.routed)
    reps = [t.emitted(per_seq_s) for t in out.replicas]
    if all(t is o for t, o in zip(reps, out.replicas, strict=True)):
        return out
    first = out.trace.first_token_s.copy()
    for j, t in enumerate(reps):
        mine = out.routed == j
        first[mine] = t.first_token_s[mine]
    return FleetTrace(replace(out.trace, first_token_s=first), reps, out.routed)


class Fleet:
    """N replicas of one Simulator's engine behind a router."""

    def __init__(self, sim: Simulator, replicas: int, router: str = "least-outstanding",
                 rule: CacheAware | None = None) -> None:
        if replicas < 1:
            raise ValueError(f"--replicas: {replicas} must be >= 1")
        if router not in ROUTERS:
            raise ValueError(f"--router: {router!r} is not one of {', '.join(ROUTERS)}")
        self.sim, self.n, self.router = sim, replicas, router
        self.rule = rule or CacheAware()  # prefix-aware's thresholds (serving.router)

    def _route(self, i: int, reps: list[_Replica], k: int, tree_tokens: list[int]) -> int:
        if self.router == "round-robin":
            return k % self.n
        load = [r.outstanding for r in reps]
        shared = reps[0].sched.requests.prefix is not None  # a cache of own pages only gives the router nothing
        if self.router == "prefix-aware" and shared and reps[0].sched.cache is not None:
            todo = int(reps[0].sched.prompt[i])
            hits = [r.sched.cache.hit(i, todo) for r in reps]
            return choose(load, hits, todo, tree_tokens, self.rule)
        return min(range(self.n), key=lambda j: (load[j], j))

    def _start(self, r: _Replica, now: float, next_arrival: float, events: list,
               release: Callable[[float], float] | None = None) -> None:
        """Begin replica r's next block at `now` (nothing if it has nothing to run). With the engine's admission
        lag (Simulator.run's `seen`) a held request joins once the block that ended now had its last step start
        after its arrival; an idle replica takes every held request at once. After a step that started KV loads
        the schedule is made no earlier than that step's schedule plus its host work, posts included (`_serial`).
        `release`: the block that ended now completed requests whose closed-loop slots free once this block's
        first step is launched (Simulator.release_at_launch): called with that step's eager launch (0 when idle),
        it returns the next arrival then."""
        idle = r.plan is None
        seen, slack = now, 0.0
        if not idle and self.sim.engine.admission_lag:
            host = last_seen(r.ends, r.steps, r.launch[0], r.slack)
            seen = r.start + host
            if self.sim.lagged:
                slack = float(r.ends[r.steps - 1]) - host
        if not idle and self.sim.engine.admission_lag and r.plan.loads_s > 0:
            seen = max(seen, self._serial(r))
        if r.held:
            r.admit(seen)
        if idle and r.sched.remote:
            r.sched.remote.spin(now)
        r.sched.now, r.sched.t_sched = now, seen
        in_system = (r.sched.n_running, len(r.sched.waiting) + len(r.sched.remote))
        plan = r.sched.schedule()
        if plan is None and r.held:  # idle but for requests that came after the schedule: none before them
            slack = 0.0
            r.admit(math.inf)
            in_system = (r.sched.n_running, len(r.sched.waiting) + len(r.sched.remote))
            plan = r.sched.schedule()
        if plan is None:
            if release is not None:
                release(0.0)
            r.plan, r.slack = None, 0.0
            r.version += 1
            if r.sched.remote:  # idle until a remote load's completion or report is due (serving.remote)
                heapq.heappush(events, (max(now, r.sched.remote.wake_s()), r.index, r.version, r))
            return
        r.plan, r.start, r.slack = plan, now, slack
        r.ends = self.sim.block_ends(r.sched, plan, slack_s=slack)
        r.launch = self.sim.block_launch_s(r.sched, plan, slack)
        if release is not None:
            next_arrival = release(r.launch[1])
        # one replica cuts its block at the next arrival as Simulator.run does; several cut when one is routed to them
        r.steps = self.sim.cut(r.ends, now, next_arrival if self.n == 1 else math.inf, self.sim.engine.admission_lag,
                               r.launch[0], slack)
        if r.held:  # they arrived before now: seen once this block's first step has started
            r.steps = 1
        r.records.append([now, 0.0, *in_system, r.sched.used_bytes, r.sched.preemptions, plan.tokens,
                          r.launch[1]])
        self._push(r, events)

    def _serial(self, r: _Replica) -> float:
        """When the engine core can schedule the step after r's last one, a step that started KV loads: vLLM 0.24's
        loop is serial (v1/engine/core.py@v0.24.0:519-632 step_with_batch_queue: schedule, execute_model, whose
        connector posts the READs before the forward's launch, v1/worker/gpu/model_runner.py:1261 / 1281 and
        gpu/kv_connector.py:61-75, sample_tokens, then the previous step's output; one GPU's UniProcExecutor runs
        both calls on the engine core's thread, v1/executor/uniproc_executor.py:79-131), so the next schedule waits
        for the posting step's whole host work (EngineOverheads.host_s) after its own schedule (t_sched), not only
        for the start of that step. The same bound holds after any step; only a posting step's is applied here (a
        step without loads keeps the admission lag's instant, its outputs unchanged)."""
        plan = r.plan
        host = self.sim.engine.overheads.host_s(len(plan.context) + len(plan.chunk_tokens), plan.tokens, plan.loads_s,
                                                bool(len(plan.chunk_tokens)))
        return r.sched.t_sched + host

    def _push(self, r: _Replica, events: list) -> None:
        r.version += 1
        r.records[-1][1] = float(r.ends[r.steps - 1])
        r.records[-1][6] = r.plan.tokens * r.steps
        heapq.heappush(events, (r.start + float(r.ends[r.steps - 1]), r.index, r.version, r))

    def run(self, requests: Requests, clients: Clients | None = None, preloaded: np.ndarray | None = None,
            load_host_s: np.ndarray | None = None, transfer_s: np.ndarray | None = None,
            handshake: Handshake | None = None) -> FleetTrace:
        """Simulate the fleet serving `requests` to completion (`preloaded`: tokens of KV each request brings,
        `load_host_s`: host seconds its load costs the step that admits it, `transfer_s`: seconds from its load's post
        to its completion when the engine's connector loads it remotely; Scheduler's; `handshake`: a fresh engine's
        first contact with each prefill replica, serving.remote.Handshake). Under the simulator's
        clock "duty" (serving.clock) a fleet whose every replica's GEMM duty is at most BURST_DUTY (its tokens over
        the fleet's wall) runs again at the burst rates: each replica is its own board, and the rule takes the
        busiest."""
        out = self._run(requests, clients, preloaded, load_host_s, transfer_s, handshake)
        if self.sim.burst_twin is None:
            return _emitted(out, self.sim.emit_per_seq_s)
        wall = out.trace.requests.arrival_s, out.trace.finish_s
        clock = decision(max(gemm_duty(t.steps, *wall, self.sim.gemm_s_per_token) for t in out.replicas))
        if clock["sustained_share"] < 1.0:
            twin = self.sim.twin(clock["sustained_share"])
            out = Fleet(twin, self.n, self.router, self.rule)._run(requests, clients, preloaded, load_host_s,
                                                                   transfer_s, handshake)
        out = _emitted(out, self.sim.emit_per_seq_s)
        return FleetTrace(replace(out.trace, gemm_clock=clock), out.replicas, out.routed)

    def _run(self, requests: Requests, clients: Clients | None = None, preloaded: np.ndarray | None = None,
             load_host_s: np.ndarray | None = None, transfer_s: np.ndarray | None = None,
             handshake: Handshake | None = None) -> FleetTrace:
        """One fleet run at this simulator's rates (see run)."""
        sim = self.sim
        sim.check(requests)
        if handshake is not None:
            handshake.reset()
        elif sim.use_kernel(requests, clients, preloaded, self.router, transfer_s=transfer_s):
            return self._kernel_run(requests, clients, preloaded, load_host_s, transfer_s)
        tree = cache_tree(sim.engine, requests, preloaded)
        reps = [_Replica(Scheduler(requests, sim.pool, sim.scheduler,
                                   PrefixCache(tree, sim.pool.seq_bytes, sim.pool.page_tokens)
                                   if tree is not None else None, preloaded, load_host_s, transfer_s, handshake,
                                   (sim.engine.overheads.save_s, sim.engine.overheads.save_byte_s)),
                         index=j)
                for j in range(self.n)]
        arrivals = Arrivals(requests, clients or Clients(), sim.engine.overheads.api_request_s)
        routed = np.full(len(requests), -1)
        rng = np.random.default_rng(SPEC_SEED)
        events: list = []
        done, k = 0, 0
        tree_tokens = [0] * self.n  # the prefix-aware router's tree per replica (serving.router)
        while done < len(requests):
            t_arr = arrivals.next_time()
            if events and events[0][0] < t_arr or (events and t_arr == math.inf):
                end, _, version, r = heapq.heappop(events)
                if version != r.version:
                    continue
                if r.plan is None:  # an idle replica's remote load is due (_start)
                    self._start(r, end, arrivals.next_time(), events)
                    continue
                finished = r.sched.commit_block(r.plan, r.steps, end, sim.accepted(r.sched, r.plan, rng))
                release = None
                if finished:
                    done += finished
                    if sim.release_at_launch(arrivals.clients):  # once r's next step is launched (Simulator.run)
                        release = partial(_release, arrivals, r.sched.last_finished.copy(), end)
                    else:
                        arrivals.finished(r.sched.last_finished, end)
                self._start(r, end, arrivals.next_time(), events, release)
                continue
            if t_arr == math.inf:
                raise RuntimeError("fleet: no event left with requests outstanding")
            for i in arrivals.due(t_arr):
                j = self._route(i, reps, k, tree_tokens)
                k += 1
                routed[i] = j
                r = reps[j]
                lag = sim.engine.admission_lag and r.plan is not None
                if lag:  # seen one step after the step in flight (Simulator.run's admission lag)
                    r.held.append((t_arr, i))
                else:
                    r.sched.waiting.append(i)
                    r.sched.arrived += 1
                if r.plan is None:
                    self._start(r, t_arr, arrivals.next_time(), events)
                elif r.steps > 1 and r.start + float(r.ends[r.steps - 1]) > t_arr:
                    r.steps = min(r.steps, self.sim.cut(r.ends, r.start, t_arr, lag, r.launch[0], r.slack))
                    self._push(r, events)
        return self._traces(requests, reps, arrivals, routed)

    def _kernel_run(self, requests: Requests, clients: Clients | None, preloaded: np.ndarray | None = None,
                    load_host_s: np.ndarray | None = None, transfer_s: np.ndarray | None = None) -> FleetTrace:
        """The same run through serving.kernel (Simulator.use_kernel said it is covered); its traces assembled by
        serving.kernel_fleet (records split by replica in one counting pass, each replica's Trace built when read,
        the merged records a view of the kernel's table when already in start order)."""
        from roofline.serving import kernel
        from roofline.serving.kernel_fleet import REPLICA, KernelReplicas, merged_steps, split
        send, first, finish, routed, rec, preempted, cached = kernel.run(self.sim, requests, clients, self.n,
                                                                         self.router, BLOCK_STEPS, rule=self.rule,
                                                                         preloaded=preloaded,
                                                                         load_host_s=load_host_s,
                                                                         transfer_s=transfer_s)
        sent = Requests(send, requests.prompt_tokens, requests.output_tokens, requests.prefix)
        cap = self.sim.pool.capacity_bytes
        per = KernelReplicas(sent, first, finish, routed, rec, split(rec[:, REPLICA], self.n), cap, preempted,
                             cached)
        merged = Trace(sent, first, finish, merged_steps(rec), cap, int(preempted.sum()), per.stats())
        return FleetTrace(merged, per, routed)

    def _traces(self, requests: Requests, reps: list[_Replica], arrivals: Arrivals, routed) -> FleetTrace:
        sent = Requests(arrivals.send_s, requests.prompt_tokens, requests.output_tokens, requests.prefix)
        first = np.full(len(requests), np.nan)
        finish = np.full(len(requests), np.nan)
        per = []
        cap = self.sim.pool.capacity_bytes
        for j, r in enumerate(reps):
            mine = routed == j
            first[mine], finish[mine] = r.sched.first_token_s[mine], r.sched.finish_s[mine]
            table = np.array(r.records, dtype=np.float64).reshape(-1, 8)
            stats = r.sched.cache.stats() if r.sched.cache is not None and requests.prefix is not None else None
            per.append(Trace(sent, r.sched.first_token_s, r.sched.finish_s, table[:, :7], cap, r.sched.preemptions,
                             stats, launch_s=table[:, 7]))
        steps = np.concatenate([t.steps for t in per])
        steps = steps[np.argsort(steps[:, 0], kind="stable")]
        # records of every replica, each against its own replica's pool: utilization is per replica
        merged = Trace(sent, first, finish, steps, cap, sum(t.preemptions for t in per), _merged_stats(per))
        return FleetTrace(merged, per, routed)


def _release(arrivals: Arrivals, ended: np.ndarray, end: float, launch_s: float) -> float:
    """Fleet._start's `release`: the slots of `ended` (completed at `end`) freed after the next step's eager launch;
    the next arrival then."""
    arrivals.finished(ended, end + launch_s)
    return arrivals.next_time()


def _merged_stats(per: list[Trace]) -> dict | None:
    """The fleet's prefix-cache stats: every replica's hit and query tokens summed (None without a cache)."""
    return None if per[0].prefix_cache is None else merged_stats([t.prefix_cache for t in per])


def fewest_replicas(sim: Simulator, requests: Requests, slo: Slo, router: str, start: int,
                    clients: Clients | None = None, most: int = 4096, rule: CacheAware | None = None) -> dict[str, Any]:
    """The fewest replicas whose fleet meets `slo` on `requests` (at their own rate), by bisection from `start`
    (the independent-replicas estimate): doubled until a size meets it, then halved down (`rule`: prefix-aware's
    thresholds)."""
    def meets(n: int) -> bool:
        trace = Fleet(sim, n, router, rule).run(requests, clients).trace
        tpot = trace.tpot_s
        return (float(np.percentile(trace.ttft_s, 99)) <= slo.ttft_s
                and (not len(tpot) or float(np.percentile(tpot, 99)) <= slo.tpot_s))

    runs = 0
    hi = max(1, start)
    while True:
        runs += 1
        if meets(hi):
            break
        if hi >= most:
            return {"replicas": None, "reason": f"{most} replicas do not meet the SLO", "runs": runs}
        hi = min(2 * hi, most)
    lo = 0  # largest size known to fail (0: none tried)
    probe = hi // 2
    while probe > lo:
        runs += 1
        if meets(probe):
            hi = probe
            probe = (lo + hi) // 2
        else:
            lo = probe
            probe = (lo + hi) // 2
    return {"replicas": hi, "reason": None, "runs": runs}


def size_fleet(sim: Simulator, requests: Requests, slo: Slo, router: str, target_rate: float, gpus_per_replica: int,
               usd_per_gpu_hour: float | None = None, start: int = 1, clients: Clients | None = None,
               rule: CacheAware | None = None) -> dict[str, Any]:
    """The fewest replicas behind `router` that meet `slo` with `requests` arriving at `target_rate` (fewest_replicas),
    their GPUs and, with a price, the cost per million output tokens at the target rate's output tokens per second."""
    found = fewest_replicas(sim, requests.at_rate(target_rate), slo, router, start, clients, rule=rule)
    out = {"target_rate_per_s": target_rate, "router": router, **found}
    if found["replicas"]:
        gpus = found["replicas"] * gpus_per_replica
        out["gpus"] = gpus
        if usd_per_gpu_hour:
            tokens_per_s = target_rate * float(requests.output_tokens.mean())
            out["usd_per_million_output_tokens"] = usd_per_million_tokens(usd_per_gpu_hour, gpus, tokens_per_s)
    return out
