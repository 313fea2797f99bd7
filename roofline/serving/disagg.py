"""Disaggregated serving: a prefill pool and a decode pool, each of its own size, GPU kind and parallelism, the KV
of every prompt sent from one to the other.

How the engines run it (vLLM's disaggregated prefill with a KV connector, vllm-project/vllm
examples/online_serving/disaggregated_serving; llm-d / NVIDIA Dynamo likewise): the router sends the request to a
prefill instance with max_tokens = 1; the prefill instance computes the prompt's KV; the KV moves to a decode
instance, which loads it and generates every output token, the first included. So:
- prefill pool: the request's prompt, one output token (its time and queueing are the prefill fleet's);
- transfer: the prompt's KV bytes (the prefill side's pool table x its GPUs holding them, the method's compressed
  bytes when a method compresses) over the link between the pools, `min(GPUs of either side)` NICs in parallel:
  bytes / (NICs x link bytes/s) + link latency; transfers do not contend with each other (a dedicated NIC per GPU);
  plus the engine's KV connector (roofline/engines/timing.py mechanism 10, vLLM's NixlConnector measured alone):
  each GPU's worker reads one descriptor per (KV region, block) of the prompt, two regions a cached layer (K and
  V; one for MLA's latent) on its pipeline stage, kv_transfer_s + descriptors x kv_descriptor_s from the post to the
  completion, posted one by one (two H200s, the connector's 4 UCX threads: ~14 ms for a 1,024-token Llama-3.1-8B
  prompt's 4,096 descriptors, its 134 MB ~0.5 ms over NVLink); the decode instance's worker posts those READs on the
  thread that launches its steps, so the step that posts them takes the post as host work of its own
  (EngineTiming.post_s, EngineOverheads.combine's loads_s): every running sequence waits for it; the transfer, post
  included, starts at the post (the two hops below);
- decode pool: the request arrives with its prompt's KV but the last token preloaded (the decode side computes that
  token to emit the first output token), needs pages for all of it, and decodes to the end.

Under an engine with a KV connector (vLLM's NixlConnector: the profile's connector law) the decode instance's
scheduler takes the request in two hops, each at a step boundary (vllm/...@v0.24.0; Scheduler's transfer_s):
1. Post. The request reaches the decode engine when its prefill returns (the proxy sends it then). The first
   schedule() that sees it (EngineScheduling.admission_lag: under async scheduling the schedule made when the step
   after its arrival starts, which runs one step later) asks the connector for its external tokens, all its prompt's
   (nixl/pull_scheduler.py:34-66), allocates their blocks with no tokens to compute (v1/core/sched/scheduler.py:782-785,
   869-883) and parks it in WAITING_FOR_REMOTE_KVS in skipped_waiting, not in `running` (:918-937). The worker call
   of that schedule posts the READs (vLLM 0.24 runs its V2 model runner, v1/worker/gpu/model_runner.py: execute_model's
   kv_connector.pre_forward, start_load_kv before the forward, :1261 / :1281 and gpu/kv_connector.py:61-75;
   nixl/pull_worker.py:40-77); a schedule with nothing else to run still makes a step that posts them
   (model_runner.py:1117-1120, kv_connector.no_forward). The post instant is the schedule's, not the step's: with
   async scheduling step n + 2 is scheduled, and its worker called, when step n + 1 starts (v1/engine/core.py:539-581),
   so a request arriving during step n is posted at step n + 1's start with or without the lag. The transfer ends
   transfer_s after the post (the post its first part).
2. Report. Each worker call's get_finished, after the forward's and the sampler's launch (model_runner.py:1465,
   sample_tokens' kv_connector.post_forward; gpu/kv_connector.py:77-92), polls the READs (nixl/base_worker.py:
   1877-1885, 2003-2048 check_xfer_state "DONE"; at tp > 1 a request is done once every worker reports it:
   kv_connector/utils.py:75-90); the step's output carries it to update_from_output
   (scheduler.py:1733-1734 -> 2422-2442, finished_recving_kv_req_ids), after that step's GPU work. Only a schedule made
   after that promotes the request (skipped_waiting is walked before waiting: scheduler.py:627-650, 1818-1829;
   _try_promote_blocked_waiting_request :2390-2402) and schedules its last prompt token, recomputed
   (_update_waiting_for_remote_kv :2383-2385); its first output token comes at that step's end.
   Synchronous (core.py:479-507): the first step started after the transfer's end observes it, the next one computes
   the token. Asynchronous: step k's worker call is made when step k - 1 starts and step k + 1 is scheduled before
   step k's output is processed, so the completion is observed by the step after the first one started after it,
   and the token is computed two steps after that: two steps more than synchronous, one from each cause.
   In the model, with t_sched the time a step's schedule is made (its start; under the lag the previous step's):
   the first step with t_sched >= post + transfer_s observes the load, its end reports it, and the first schedule
   with t_sched >= that end admits the last token. An engine with nothing to run while loads are in flight steps
   empty (no forward), so it acts on a completion at once (Scheduler.spin).
While it waits the request holds its prompt's pages (they count against the pool and are never preempted: only
`running` is), not a place under max_num_seqs (a full `running` stops the admission loop, posts included:
scheduler.py:630-631), counts as waiting in the engine's stats (:1962), and its post spends no token budget (the loop
runs while budget is left). The engine core's loop is serial (core.py:539-581: schedule, execute_model, which posts
the READs, sample_tokens, then the previous step's output; UniProcExecutor runs the worker's calls on that thread,
v1/executor/uniproc_executor.py:79-131), so the schedule after a posting one is made when the posting step's host
work, post included, ends: later than the start of the step in flight when that work outlasts it (Fleet._serial;
the observation, promotion and posts of that schedule move with it). Not modelled: vLLM admits a load only if it
fits beside the blocks other in-flight prefills still need (:862-867; a decode pool's loads need none beyond their
prompt's); the observation's instant is the step's schedule, not the end of its launch (a step's host work later),
and the post starts after the posting call's input preparation, not at its schedule. Engines without a connector
law (ideal, SGLang, TensorRT-LLM's profiles here) keep one arrival at the transfer's end.
A fresh pair (`simulate --cold-start`, the decode pool's Simulator.cold_start; roofline.engines.timing mechanism 13):
each decode replica meets each prefill replica once; the first load it posts from one starts the connector's
handshake with it (EngineTiming.handshake_s of one remote rank's whole pool, its regions x blocks: the one figure
kv_handshake_s until the per-descriptor law is measured; times the remote ranks one decode rank reads from: prefill tp
/ decode tp when wider), and that load and every later one from the same prefill replica posted before the handshake
ends start their transfer at its end (serving.remote.Handshake). Steady state (the default) pays nothing.
TTFT is measured at the client: prefill queue + prefill + transfer + the decode side's hops and first step; TPOT is
the decode pool's. The two stages are simulated one after the other, which is exact for open-loop arrivals (the prefill
side never waits on the decode side: no back-pressure, the decode pool queues what it cannot admit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from roofline.engines.base import stage_kinds
from roofline.serving.fleet import Fleet
from roofline.serving.remote import Handshake
from roofline.serving.requests import Requests
from roofline.serving.simulate import Simulator, Trace


@dataclass(frozen=True)
class KvLink:
    """The link the KV crosses between the pools (per GPU, per direction)."""

    bytes_per_s: float
    latency_s: float

    @classmethod
    def between(cls, a, b) -> KvLink:
        """The slower scale-out link of two devices (a GPU's NIC to the other node), else their scale-up link."""
        links = [h.scale_out or h.scale_up for h in (a, b)]
        if any(lk is None for lk in links):
            raise ValueError("--kv-link-bytes-per-s: a device has no link to another node; give the link's speed")
        return cls(min(lk.bytes_per_s for lk in links), max(lk.latency_s for lk in links))


@dataclass
class DisaggTrace:
    """The merged per-request trace (client view) and each pool's own."""

    trace: Trace
    prefill: Trace
    decode: Trace
    transfer_s: np.ndarray


class Disaggregated:
    """`prefill_replicas` replicas of `prefill` and `decode_replicas` of `decode` behind one router each."""

    def __init__(self, prefill: Simulator, decode: Simulator, prefill_replicas: int, decode_replicas: int,
                 link: KvLink, router: str = "least-outstanding") -> None:
        self.prefill, self.decode, self.link = prefill, decode, link
        self.fleets = (Fleet(prefill, prefill_replicas, router), Fleet(decode, decode_replicas, router))

    def transfer_s(self, prompt_tokens: np.ndarray) -> np.ndarray:
        """KV transfer time of each prompt: its bytes on the prefill side over the parallel NICs, plus the decode
        engine's connector moving its descriptors (connector_s)."""
        p, d = self.prefill.workload, self.decode.workload
        gpus_p, gpus_d = p.tp * p.pp, d.tp * d.pp
        total = self.prefill.pool.seq_bytes[prompt_tokens] * gpus_p
        wire = total / (min(gpus_p, gpus_d) * self.link.bytes_per_s) + self.link.latency_s
        return wire + self.connector_s(prompt_tokens)

    def regions(self) -> int:
        """Descriptor regions of one prefill GPU's pool: two (K, V; one with MLA's latent) per cached layer on its
        pipeline stage (the first, fullest stage's paged layers)."""
        model = self.prefill.model
        stage = stage_kinds(model, self.prefill.workload.pp)
        cached = sum(n for (kind, _window), n in stage.items() if kind in ("full", "sliding", "chunked"))
        return cached * (1 if model.mla is not None else 2)

    def descriptors(self, prompt_tokens: np.ndarray) -> np.ndarray:
        """Descriptors one GPU's connector moves for each prompt (module docstring): one per region and block of
        the prompt."""
        return self.regions() * -(-np.asarray(prompt_tokens) // self.prefill.pool.page_tokens)

    def remote_pool_descriptors(self) -> int:
        """Descriptors a decode rank's handshake builds for one remote rank: one per region and block of that prefill
        GPU's WHOLE pool (vLLM's _build_fa_remote, nixl/base_worker.py@v0.24.0:1308-1364; timing mechanism 13)."""
        return self.regions() * self.prefill.pool.capacity_pages

    def connector_s(self, prompt_tokens: np.ndarray) -> np.ndarray:
        """Seconds the decode engine's KV connector takes for each prompt (EngineTiming.connector_s of its
        descriptors; 0 under an engine without that measurement)."""
        return self.decode.phases.engine.connector_s(self.descriptors(prompt_tokens))

    @property
    def hops(self) -> bool:
        """Whether the decode engine loads the KV through a connector (its profile's connector law: vLLM's
        NixlConnector), so a request takes the two scheduler hops of the module docstring."""
        return bool(self.decode.phases.engine.kv_descriptor_s)

    def load_host_s(self, prompt_tokens: np.ndarray) -> np.ndarray | None:
        """Host seconds the decode engine's worker spends posting each prompt's READs (EngineTiming.post_s), the
        step that admits the request paying them; None under an engine without that measurement."""
        engine = self.decode.phases.engine
        return engine.post_s(self.descriptors(prompt_tokens)) if engine.kv_post_descriptor_s else None

    def handshake_s(self) -> float:
        """Seconds a fresh decode replica's first load from a prefill replica waits for the connector's handshake
        (timing mechanism 13): EngineTiming.handshake_s of one remote rank's whole pool (the one figure
        kv_handshake_s where the profile has no per-descriptor law) per remote rank one decode rank meets, those one
        after the other (vLLM's handshake_target_ranks: prefill tp / decode tp of them when the prefill side is
        wider, else one); 0 in steady state, or under an engine without the connector law or that measurement."""
        engine = self.decode.phases.engine
        if not (self.decode.cold_start and self.hops and (engine.kv_handshake_s or engine.kv_handshake_descriptor_s)):
            return 0.0
        each = engine.handshake_s(self.remote_pool_descriptors())
        return each * max(1, self.prefill.workload.tp // self.decode.workload.tp)

    def run(self, requests: Requests) -> DisaggTrace:
        """Both stages for open-loop `requests`."""
        n = len(requests)
        first = Requests(requests.arrival_s, requests.prompt_tokens, np.ones(n, dtype=np.int64))
        pre_fleet = self.fleets[0].run(first)
        pre = pre_fleet.trace
        transfer = self.transfer_s(requests.prompt_tokens)
        # the post is part of the connector's time, spent in the step that admits the request (its own first step
        # included), so the request is ready for that step when the rest of the transfer is done (at least the
        # wire's time: the two laws are separate fits, and below ~170 descriptors the post's exceeds the whole's)
        post = self.load_host_s(requests.prompt_tokens)
        if self.hops:  # the decode engine sees the request at its prefill's end and posts the load (module docstring)
            ready = pre.finish_s
        elif post is not None:
            ready = pre.finish_s + transfer - np.minimum(post, self.connector_s(requests.prompt_tokens))
        else:
            ready = pre.finish_s + transfer
        order = np.argsort(ready, kind="stable")
        second = Requests(ready[order], requests.prompt_tokens[order], requests.output_tokens[order])
        shake = Handshake(self.handshake_s(), pre_fleet.routed[order]) if self.handshake_s() else None
        dec = self.fleets[1].run(second, preloaded=requests.prompt_tokens[order] - 1,
                                 load_host_s=None if post is None else post[order],
                                 transfer_s=transfer[order] if self.hops else None, handshake=shake).trace
        first_token, finish = np.empty(n), np.empty(n)
        first_token[order], finish[order] = dec.first_token_s, dec.finish_s
        merged = Trace(requests, first_token, finish, dec.steps, dec.kv_capacity_bytes,
                       dec.preemptions + pre.preemptions, first_use=self._first_use_json(shake))
        return DisaggTrace(merged, pre, dec, transfer)

    def _first_use_json(self, shake: Handshake | None) -> dict | None:
        """Trace.first_use of a fresh pair (the decode pool's cold_start; None in steady state): no compiles (the
        pools' fused-MoE compiles are refused upstream: the CLI's checks) and the connector's handshakes."""
        if not self.decode.cold_start:
            return None
        out = self.decode._first_use_json(None)
        if shake is None:
            out["kv_handshake"] = {"pairs": 0, "seconds_each": 0.0, "requests_waited": 0, "max_wait_s": 0.0,
                                   "why": "no measured KV connector handshake for this engine (timing mechanism 13)"}
        else:
            out["kv_handshake"] = {"pairs": shake.pairs, "seconds_each": shake.seconds,
                                   "requests_waited": len(shake.waits), "max_wait_s": max(shake.waits, default=0.0),
                                   "remote_pool_descriptors": self.remote_pool_descriptors()}
        return out

    def summary(self, run: DisaggTrace) -> dict[str, Any]:
        """What the pools add to a run's report: sizes, the transfer, each pool's busy time."""
        p, d = self.prefill.workload, self.decode.workload
        pct = np.percentile(run.transfer_s, [50, 99])
        return {"prefill": {"hardware": self.prefill.hardware.name, "tp": p.tp, "pp": p.pp,
                            "replicas": self.fleets[0].n, "gpus": self.fleets[0].n * p.tp * p.pp,
                            "busy_fraction": float(run.prefill.steps[:, 1].sum() / run.trace.horizon_s
                                                   / self.fleets[0].n)},
                "decode": {"hardware": self.decode.hardware.name, "tp": d.tp, "pp": d.pp,
                           "replicas": self.fleets[1].n, "gpus": self.fleets[1].n * d.tp * d.pp,
                           "busy_fraction": float(run.decode.steps[:, 1].sum() / run.trace.horizon_s
                                                  / self.fleets[1].n)},
                "kv_link": {"bytes_per_s": self.link.bytes_per_s, "latency_s": self.link.latency_s},
                "transfer_s": {"p50": float(pct[0]), "p99": float(pct[1]), "mean": float(run.transfer_s.mean())},
                "connector_s_mean": float(self.connector_s(run.trace.requests.prompt_tokens).mean()),
                "post_s_mean": float(np.mean(post)) if (post := self.load_host_s(run.trace.requests.prompt_tokens))
                is not None else 0.0, "hops": self.hops}
