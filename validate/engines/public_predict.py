"""Predict one published engine run (roofline.validation.engine_results) with roofline's serving simulation.

The run's client is replayed on `roofline.serving.Simulator` with the record's deployment (catalogue model and
device, tp, pp, weight dtype, the KV dtype as the method) and the engine's scheduling limits:

- **max concurrency C** (`vllm bench serve --max-concurrency`): a closed loop. All requests are queued at t = 0
  and the engine admits at most C (FCFS, `max_num_seqs = min(C, engine cap)`), so request i >= C starts when
  the (i - C + 1)-th request finishes, exactly when the client would send it. TTFT is then measured from that
  send time (the (i - C)-th smallest finish time), as the client measures it.
- **request rate R** without a cap: Poisson arrivals at R (the client's default `burstiness 1`), seed 0.
- **neither** (`--request-rate inf`): every request at t = 0.

Lengths are the record's: fixed where the run fixed them; a random-dataset run that did not fix them at its mean
lengths (`--random-output-len` is a cap the model reaches unless it ends early); a ShareGPT run at lengths drawn
from the distribution of largest entropy with the record's mean prompt and output lengths, the geometric (Jaynes
1957; roofline.serving.datasets draws ShareGPT lengths the same way), kept only where vllm bench's own filter keeps
a ShareGPT conversation (vllm/benchmarks/datasets.py is_valid_sequence: prompt and output >= 4 tokens, prompt <=
1024, prompt + output <= 2048), seed 0. The spread is a mechanism of its own, not a detail: with every request the
same length, a burst runs in synchronised waves (max_num_seqs requests admitted together, decoding together,
finishing together: long decode-only stretches), while spread lengths finish one by one, so that nearly every step
admits a request and carries a prefill chunk beside its decodes (notes validate/notes/2026-11-28-public-misses.md).
Engine limits the record omits are the engine's own defaults for its release and GPU (`engine_defaults`), and so is
prefix caching (`prefix_caching`: on in vLLM V1, so a preempted request re-hits its own pages).
The host law is the profile's as measured (vLLM 0.24, asynchronous scheduling on) for every release: 0.10 / 0.11
default to synchronous steps (roofline.engines.scheduling.vllm_async_scheduling), but what a synchronous step adds
is unmeasured — the 0.24 law added serially makes the H100 closed-loop controls 37 % slow (notes
validate/notes/2026-11-28-public-misses.md), so it is not applied until measured. The admission lag of async
scheduling (roofline.engines.scheduling.vllm_admission_lag: a request arriving during a step runs two steps later)
is a fact of the source, not a measured law: it follows the record's --async-scheduling flag, else its release's
default (off before 0.14). So does admission: a release before 0.19 admits a waiting request on its first chunk,
0.19 on only when the pool holds its whole prompt (roofline.engines.scheduling.vllm_full_prompt_admission; a record of
unknown release is taken as current).

Statistics follow `vllm bench serve` (benchmarks/serve.py, `calculate_metrics`): TTFT and TPOT per request
(TPOT = (e2e - TTFT) / (output - 1)), mean / median / p99 by `numpy.percentile`; ITL mean = all decode time over
all decode tokens; output throughput = output tokens / duration (first send to last completion).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

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

    prompt_tokens: np.ndarray  # per request
    output_tokens: np.ndarray
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


def prefix_caching(run: PublishedRun) -> bool | None:
    """Whether the record's engine caches prefixes: the record's flag, else for vLLM its release's default: on in V1
    (EngineArgs._set_default_args, vllm/engine/arg_utils.py@v0.11.0 lines 1540-1561: "V1 always uses chunked prefills
    and prefix caching for non-pooling tasks"), off in V0 (a release before V1_FIRST_RELEASE, as engine_defaults
    takes it; 0.3.3 has no prefix cache); None: the engine profile's. The public records share no prompt content, so
    what it changes is a preempted request's re-admission: with it on, vLLM finds its own freed blocks that no
    allocation has taken (roofline.engines.scheduling, serving.prefix.cache_tree) and recomputes only the rest."""
    if run.benchmark.prefix_caching is not None:
        return run.benchmark.prefix_caching
    release = run.engine.release
    if run.engine.name != "vllm" or release is None:
        return None
    return tuple(int(x) for x in release.split(".")[:2]) >= V1_FIRST_RELEASE


def replay_of(run: PublishedRun, defaults: tuple[int, int]) -> Replay:
    """The client and engine limits a record describes (see the module docstring); `defaults` are the engine's
    (max_num_seqs, max_num_batched_tokens) for what the command leaves out."""
    bench = run.benchmark
    n = bench.num_prompts
    prompt, output = lengths(run)
    cap = bench.max_num_seqs or defaults[0]
    budget = bench.max_num_batched_tokens or defaults[1]
    if bench.max_concurrency is not None:
        return Replay(prompt, output, np.zeros(n), min(cap, bench.max_concurrency), budget, bench.max_concurrency)
    if bench.request_rate_per_s is not None:
        gaps = np.random.default_rng(0).exponential(1.0 / bench.request_rate_per_s, size=n)
        return Replay(prompt, output, np.cumsum(gaps) - gaps[0], cap, budget, None)
    return Replay(prompt, output, np.zeros(n), cap, budget, None)


SHAREGPT_MIN, SHAREGPT_MAX_PROMPT, SHAREGPT_MAX_TOTAL = 4, 1024, 2048  # vllm bench is_valid_sequence defaults


def lengths(run: PublishedRun) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output tokens per request (module docstring): geometric draws with the record's means, filtered
    as vllm bench filters ShareGPT, for a ShareGPT run whose lengths were not fixed; else the means, rounded."""
    bench = run.benchmark
    n = bench.num_prompts
    prompt, output = max(1, round(bench.input_tokens)), max(1, round(bench.output_tokens))
    if bench.lengths_fixed or (bench.dataset or "").lower() != "sharegpt":
        return np.full(n, prompt, dtype=np.int64), np.full(n, output, dtype=np.int64)
    rng = np.random.default_rng(0)
    keep_p, keep_o = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    while len(keep_p) < n:
        p = rng.geometric(1.0 / bench.input_tokens, size=2 * n)
        o = rng.geometric(1.0 / bench.output_tokens, size=2 * n)
        ok = ((p >= SHAREGPT_MIN) & (o >= SHAREGPT_MIN) & (p <= SHAREGPT_MAX_PROMPT)
              & (p + o <= SHAREGPT_MAX_TOTAL))
        keep_p, keep_o = np.concatenate([keep_p, p[ok]]), np.concatenate([keep_o, o[ok]])
    return keep_p[:n].astype(np.int64), keep_o[:n].astype(np.int64)


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
    from roofline.engines.scheduling import (
        SCHEDULING_ENGINES,
        scheduling,
        vllm_admission_lag,
        vllm_async_scheduling,
        vllm_full_prompt_admission,
    )
    from roofline.methods import parse_method
    from roofline.serving.requests import Requests
    from roofline.serving.scheduler import SchedulerConfig
    from roofline.serving.simulate import Simulator
    from roofline.specs import Workload

    dep = run.deployment
    model, hardware = load_model(dep.catalogue_model), load_hardware(dep.catalogue_hardware)
    rep = replay_of(run, engine_defaults(run, hardware.memory_bytes, model.max_position_embeddings))
    n = len(rep.arrival_s)
    requests = Requests(rep.arrival_s, rep.prompt_tokens, rep.output_tokens)
    total = int((rep.prompt_tokens + rep.output_tokens).max())
    util = run.benchmark.gpu_memory_utilization
    if util is None and run.engine.name == "vllm":  # the record's release's default (0.90 before 0.20)
        from roofline.engines.vllm import default_utilization

        util = default_utilization(run.engine.release)
    memory = {} if util is None else {"gpu_memory_utilization": util}
    workload = validate(Workload, {**memory, "context_tokens": total, "tp": dep.tp, "pp": dep.pp,
                                   "weight_dtype": dep.weight_dtype, "expert_weight_dtype": dep.expert_weight_dtype,
                                   "engine": run.engine.name,
                                   "prefill_chunk_tokens": rep.max_num_batched_tokens}, "workload")
    engine = None
    if run.engine.name in SCHEDULING_ENGINES and run.engine.name != "ideal":
        # the engine's own profile (scheduler, graph padding, host costs: roofline.engines.scheduling / timing),
        # with the limits this run used
        engine = scheduling(run.engine.name, hardware, entry="api", tp=dep.tp).with_overrides(
            max_num_seqs=rep.max_num_seqs, max_num_batched_tokens=rep.max_num_batched_tokens,
            prefix_caching=prefix_caching(run))
        if run.engine.name == "vllm":  # the admission lag needs async scheduling: the flag, else the release's default
            flag = "--async-scheduling" in run.benchmark.command
            engine = replace(engine, admission_lag=vllm_admission_lag(vllm_async_scheduling(run.engine.release, flag)),
                             admit_full_prompt=vllm_full_prompt_admission(run.engine.release))
    sim = Simulator(model, hardware, workload, parse_method(dep.kv_cache_dtype),
                    SchedulerConfig(rep.max_num_batched_tokens, rep.max_num_seqs), max_tokens=total, engine=engine)
    trace = sim.run(requests)
    sent = _sent_s(rep.arrival_s, trace.finish_s, rep.closed_loop)
    decode_s = trace.finish_s - trace.first_token_s
    decode_tokens = int((rep.output_tokens - 1).sum())
    out = {"ttft": _stat(trace.first_token_s - sent), "tpot": _stat(trace.tpot_s),
           "itl": {"mean_ms": float(decode_s.sum() / decode_tokens * 1e3)} if decode_tokens > 0 else {},
           "duration_s": float(trace.finish_s.max() - sent.min()),
           "preemptions": int(trace.preemptions)}
    out["output_throughput_tokens_per_s"] = int(rep.output_tokens.sum()) / out["duration_s"]
    out["request_throughput_per_s"] = n / out["duration_s"]
    return out


def ape(predicted: float | None, published: float | None) -> float | None:
    """|predicted - published| / published, or None when either is missing (or published is 0)."""
    if predicted is None or published is None or published == 0 or not math.isfinite(predicted):
        return None
    return abs(predicted - published) / published
