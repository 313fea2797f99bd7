"""Predict one published engine run (roofline.validation.engine_results) with roofline's serving simulation.

The run's client is replayed on `roofline.serving.Simulator` with the record's deployment (catalogue model and
device, tp, pp, weight dtype, the KV dtype as the method) and the engine's scheduling limits:

- **max concurrency C** (`vllm bench serve --max-concurrency`): a closed loop. All requests are queued at t = 0
  and the engine admits at most C (FCFS, `max_num_seqs = min(C, engine cap)`), so request i >= C starts when
  the (i - C + 1)-th request finishes, exactly when the client would send it. TTFT is then measured from that
  send time (the (i - C)-th smallest finish time), as the client measures it.
- **request rate R** without a cap: Poisson arrivals at R (the client's default `burstiness 1`), seed 0.
- **neither** (`--request-rate inf`): every request at t = 0.

Lengths are the record's: fixed where the run fixed them; otherwise the run's mean lengths (a ShareGPT run is
replayed at its mean prompt and output lengths, not its heavy-tailed distribution: the record says so).
Engine limits the record omits are the engine's own defaults for its release and GPU (`engine_defaults`).
The host law is the profile's as measured (vLLM 0.24, asynchronous scheduling on) for every release: 0.10 / 0.11
default to synchronous steps (roofline.engines.scheduling.vllm_async_scheduling), but what a synchronous step adds
is unmeasured — the 0.24 law added serially makes the H100 closed-loop controls 37 % slow (notes
validate/notes/2026-11-28-public-misses.md), so it is not applied until measured.

Statistics follow `vllm bench serve` (benchmarks/serve.py, `calculate_metrics`): TTFT and TPOT per request
(TPOT = (e2e - TTFT) / (output - 1)), mean / median / p99 by `numpy.percentile`; ITL mean = all decode time over
all decode tokens; output throughput = output tokens / duration (first send to last completion).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from roofline.validation.engine_results import PublishedRun

GIB = 1 << 30
# vLLM's V1 engine (0.9 on): the OpenAI server's defaults by GPU, as its own test states them
# (vllm-project/vllm tests/engine/test_arg_utils.py, test_defaults_with_usage_context): a GPU with >= 70 GiB that
# is not an A100 -> 1024 sequences, 8192 tokens per step; any other GPU -> 256 sequences, 2048 tokens per step.
V1_FIRST_RELEASE = (0, 9)


@dataclass(frozen=True)
class Replay:
    """The simulated client: lengths (tokens), arrival times (s) and the engine's admission cap."""

    prompt_tokens: int
    output_tokens: int
    arrival_s: np.ndarray
    max_num_seqs: int
    max_num_batched_tokens: int
    closed_loop: int | None  # C of a concurrency-capped client, else None


def engine_defaults(run: PublishedRun, memory_bytes: float, max_positions: int) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) the engine uses when the command omits them.

    vLLM V1 (release >= 0.9, or no release stated: a current build): the GPU rule above. vLLM V0 (< 0.9): 256
    sequences and, without chunked prefill, a whole prompt per step up to max(max_model_len, 2048) tokens
    (vllm/config.py SchedulerConfig of those releases), max_model_len being the model's positions.
    Interim: roofline/engines/scheduling.py (the serving branch) is to own these rules."""
    release = run.engine.release
    if release is not None and tuple(int(x) for x in release.split(".")[:2]) < V1_FIRST_RELEASE:
        return 256, max(max_positions, 2048)
    big = memory_bytes >= 70 * GIB and "A100" not in run.deployment.hardware_as_published.upper()
    return (1024, 8192) if big else (256, 2048)


def replay_of(run: PublishedRun, defaults: tuple[int, int]) -> Replay:
    """The client and engine limits a record describes (see the module docstring); `defaults` are the engine's
    (max_num_seqs, max_num_batched_tokens) for what the command leaves out."""
    bench = run.benchmark
    prompt, output = max(1, round(bench.input_tokens)), max(1, round(bench.output_tokens))
    cap = bench.max_num_seqs or defaults[0]
    budget = bench.max_num_batched_tokens or defaults[1]
    n = bench.num_prompts
    if bench.max_concurrency is not None:
        return Replay(prompt, output, np.zeros(n), min(cap, bench.max_concurrency), budget, bench.max_concurrency)
    if bench.request_rate_per_s is not None:
        gaps = np.random.default_rng(0).exponential(1.0 / bench.request_rate_per_s, size=n)
        return Replay(prompt, output, np.cumsum(gaps) - gaps[0], cap, budget, None)
    return Replay(prompt, output, np.zeros(n), cap, budget, None)


def _stat(values_s: np.ndarray) -> dict[str, float]:
    """Mean, median and p99 in milliseconds (numpy's linear percentile, as vLLM's client)."""
    ms = values_s * 1e3
    return {"mean_ms": float(ms.mean()), "median_ms": float(np.median(ms)),
            "p99_ms": float(np.percentile(ms, 99))}


def _sent_s(arrival_s: np.ndarray, finish_s: np.ndarray, closed_loop: int | None) -> np.ndarray:
    """When the client sent each request: its arrival, or in a closed loop of C the (i - C)-th completion."""
    if closed_loop is None:
        return arrival_s
    sent = np.zeros(len(finish_s))
    order = np.sort(finish_s)
    sent[closed_loop:] = order[: max(0, len(finish_s) - closed_loop)]
    return sent


def simulate(run: PublishedRun) -> dict:
    """Predicted figures of one record, in the record's units; raises SpecError for a spec the planner refuses."""
    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.loading import validate
    from roofline.engines.scheduling import SCHEDULING_ENGINES, scheduling
    from roofline.methods import parse_method
    from roofline.serving.requests import Requests
    from roofline.serving.scheduler import SchedulerConfig
    from roofline.serving.simulate import Simulator
    from roofline.specs import Workload

    dep = run.deployment
    model, hardware = load_model(dep.catalogue_model), load_hardware(dep.catalogue_hardware)
    rep = replay_of(run, engine_defaults(run, hardware.memory_bytes, model.max_position_embeddings))
    n = len(rep.arrival_s)
    requests = Requests(rep.arrival_s, np.full(n, rep.prompt_tokens, dtype=np.int64),
                        np.full(n, rep.output_tokens, dtype=np.int64))
    total = rep.prompt_tokens + rep.output_tokens
    memory = {} if run.benchmark.gpu_memory_utilization is None else {
        "gpu_memory_utilization": run.benchmark.gpu_memory_utilization}
    workload = validate(Workload, {**memory, "context_tokens": total, "tp": dep.tp, "pp": dep.pp,
                                   "weight_dtype": dep.weight_dtype, "expert_weight_dtype": dep.expert_weight_dtype,
                                   "engine": run.engine.name,
                                   "prefill_chunk_tokens": rep.max_num_batched_tokens}, "workload")
    engine = None
    if run.engine.name in SCHEDULING_ENGINES and run.engine.name != "ideal":
        # the engine's own profile (scheduler, graph padding, host costs: roofline.engines.scheduling / timing),
        # with the limits this run used
        engine = scheduling(run.engine.name, hardware, entry="api", tp=dep.tp).with_overrides(
            max_num_seqs=rep.max_num_seqs, max_num_batched_tokens=rep.max_num_batched_tokens)
    sim = Simulator(model, hardware, workload, parse_method(dep.kv_cache_dtype),
                    SchedulerConfig(rep.max_num_batched_tokens, rep.max_num_seqs), max_tokens=total, engine=engine)
    trace = sim.run(requests)
    sent = _sent_s(rep.arrival_s, trace.finish_s, rep.closed_loop)
    decode_s = trace.finish_s - trace.first_token_s
    out = {"ttft": _stat(trace.first_token_s - sent), "tpot": _stat(trace.tpot_s),
           "itl": {"mean_ms": float(decode_s.sum() / (n * (rep.output_tokens - 1)) * 1e3)}
           if rep.output_tokens > 1 else {},
           "duration_s": float(trace.finish_s.max() - sent.min()),
           "preemptions": int(trace.preemptions)}
    out["output_throughput_tokens_per_s"] = n * rep.output_tokens / out["duration_s"]
    out["request_throughput_per_s"] = n / out["duration_s"]
    return out


def ape(predicted: float | None, published: float | None) -> float | None:
    """|predicted - published| / published, or None when either is missing (or published is 0)."""
    if predicted is None or published is None or published == 0 or not math.isfinite(predicted):
        return None
    return abs(predicted - published) / published
