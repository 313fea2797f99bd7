"""Each serving engine's scheduler defaults: the batch limits, chunked prefill, which steps run as captured CUDA
graphs (and so are padded to a captured size), what happens when the KV pool runs out, and whether a step may mix
prefill chunks with decodes; plus the hook for the engines' time costs (`EngineOverheads`).

`scheduling(engine, hardware, ...)` returns what the engine itself would pick when a flag is omitted. Sources, each
read from the engine's source (repository, file @ commit, function):

vLLM (V1 engine; vllm-project/vllm):
- max_num_batched_tokens / max_num_seqs depend on the entry point and the GPU (vllm/engine/arg_utils.py@99d7eb5,
  EngineArgs._set_default_args): a GPU of >= 70 GiB whose name does not contain "a100" gets {offline `LLM` class:
  16384, OpenAI API server: 8192} tokens and 1024 sequences for both; other GPUs 8192 / 2048 tokens and 256 sequences;
  max_num_seqs is then min(that, max_num_batched_tokens). Chunked prefill is always on for generative models, prefix
  caching on except for hybrid (Mamba-type) models (same function).
- CUDA-graph capture sizes (vllm/config/vllm.py@09f030e, VllmConfig._set_cudagraph_sizes): max capture size =
  min(max_num_seqs x (1 + speculative tokens) x 2, 512, max_num_batched_tokens); sizes [1, 2, 4] + range(8, 256, 8)
  + range(256, max + 1, 16), each <= max. A step of n <= max tokens is padded to the smallest captured size >= n (the
  docstring there: "If batch size <= one of the cudagraph_capture_sizes, the closest padded CUDA graph will be used";
  larger steps run without a graph, unpadded). The default cudagraph mode captures mixed steps piecewise, so the pad
  applies to the step's token count whatever its mix.
- asynchronous scheduling (the host prepares step n + 1 while the GPU runs step n: the time profile's `overlap`) is
  off by default before the release that carries vllm-project/vllm PR #27614 ("use_async_scheduling default";
  tracked in issue #27679, closed with it, Jan 2026): 0.10.x and 0.11.x run a step as GPU + host unless the command
  passes --async-scheduling (the flag of those releases; vllm-project/recipes PR #131 documents it as opt-in for
  GPT-OSS on 0.11). ASYNC_DEFAULT_RELEASE below; a build of unknown release is taken as current (on).
- preemption by recompute of the most recently admitted running request, FCFS admission (vllm/v1/core/sched/
  scheduler.py: `preempted_req = self.running.pop()`, RequestStatus.PREEMPTED, policy "fcfs" default). With prefix
  caching on, every full block a request computes is hashed, whatever its prompt shares (kv_cache_manager.py
  allocate_slots -> cache_blocks; v0.11.0 lines 296-302, v0.24.0 447-456), preemption frees its blocks to the free
  queue tail first with their hashes and sets num_computed_tokens = 0 (v0.11.0 sched/scheduler.py lines 262-282,
  single_type_kv_cache_manager.py 156-171), and the re-admission's get_computed_blocks finds the ones no allocation has
  popped since (v0.11.0 kv_cache_manager.py 154-191): the recompute starts past them (`own_pages`; the same code in
  0.24.0, validate/notes/2026-11-30-prefix-preempt.md).
- a waiting request is admitted only when the free KV blocks hold all its known tokens (prompt, and the output of a
  preempted one) less its prefix-cache hit, not only its first chunk: scheduler_reserve_full_isl (vllm/config/
  scheduler.py@v0.24.0 lines 140-144, default True; PR vllm-project/vllm#37307, Mar 2026), passed to KVCacheManager.
  allocate_slots as full_sequence_must_fit (v1/core/sched/scheduler.py lines 283-284, 883). First in 0.19.0, on by
  default (the PyPI wheels read release by release: absent from 0.18.1's vllm/config/scheduler.py; 0.19.0 lines
  139-143 and v1/core/sched/scheduler.py lines 246-247, 732-744, where it gates allocate_slots through
  KVCacheManager.can_fit_full_sequence, kv_cache_manager.py lines 218-255, the same count of blocks against the same
  free queue; 0.21.0 moves it into allocate_slots). Earlier releases admit on the first chunk (FULL_PROMPT_RELEASE).
SGLang (sgl-project/sglang, python/sglang/srt/server_args.py@469c63e, ServerArgs._handle_gpu_memory_settings and
  _generate_cuda_graph_batch_sizes):
- chunked_prefill_size by GPU memory (MiB): < 20 GiB and < 35 GiB 2048, < 60 GiB 4096, < 90 GiB and < 160 GiB 8192,
  larger 16384; cuda_graph_max_bs 8 / 24 (tp < 4, else 80) / 32 (else 160) / 256 (else 512) / 256 (else 512) / 512.
- decode capture sizes [1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, max + 1, 32), <= max;
  a decode batch is padded to the next captured size (cuda_graph_runner.py; `disable_cuda_graph_padding` False).
- max_running_requests = min(max_total_num_tokens // 2, req_to_token_pool size) with the pool of
  min(max(int(max_total_num_tokens / context_len x 512), 2048), 4096) requests (managers/tp_worker.py and
  model_executor/model_runner.py init_memory_pool).
- a step is either a prefill (extend) batch or a decode batch, prefill first: Scheduler.get_next_batch_to_run runs a
  new prefill batch when one can be formed, else decodes (enable_mixed_chunk defaults to False); when the pool runs
  out, running decodes are retracted and recomputed (ScheduleBatch.retract_decode). Page size 1.
- the overlap scheduler (on unless --disable-overlap-schedule) forms batch n + 1 before it processes batch n's result,
  so a request that arrives while a step runs joins the step after the next (sglang_admission_lag).
TensorRT-LLM (NVIDIA/TensorRT-LLM, PyTorch backend, tensorrt_llm/llmapi/llm_args.py):
- max_batch_size 2048, max_num_tokens 8192, enable_chunked_prefill False (BaseLlmArgs defaults);
  capacity scheduler GUARANTEED_NO_EVICT by default (docs "Useful Runtime Options": a request is admitted only when
  the pool can hold it to its last token, so nothing is ever preempted); in-flight batching mixes context and
  generation requests in one step.
- CudaGraphConfig: max_batch_size 0 -> 128, enable_padding False, sizes 1..31, 32, 64, 128 (+ powers of two up to
  the max) (CudaGraphConfig._generate_cuda_graph_batch_sizes); without padding a batch of another size runs eagerly:
  no pad. tokens_per_block 32 (KvCacheConfig).
llama.cpp (ggml-org/llama.cpp, tools/server/server.cpp, common/arg.cpp): the server runs -np 4 slots by default
  (n_parallel -1 -> 4 with a unified KV cache, PR ggml-org/llama.cpp#16736), -b 2048 logical batch (prompt tokens of
  every slot and the decode tokens share it: a continuous, mixed batch), no CUDA-graph padding, and no preemption:
  a slot holds its context for the whole request.
'ideal': the planner's own idealised engine: 256 sequences, 8192 tokens a step, mixed chunked prefill, no graphs,
  recompute preemption, prefix caching on (it changes nothing unless the workload shares a prefix).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from roofline.engines.base import release_tuple
from roofline.errors import SpecError
from roofline.specs import Hardware

GIB = 1 << 30
MIB = 1 << 20
ENTRY_POINTS = ("api", "offline")
SCHEDULING_ENGINES = ("ideal", "vllm", "sglang", "trtllm", "llamacpp")
ASYNC_DEFAULT_RELEASE = (0, 14)  # first vLLM release with async scheduling on by default (module docstring)
FULL_PROMPT_RELEASE = (0, 19)  # first vLLM release that admits a request only when its whole prompt fits


@dataclass(frozen=True)
class EngineOverheads:
    """Time an engine spends outside the GPU's kernels, added by the step model: per step (scheduler, sampling,
    launch), per running sequence in the step, and per request on an API server's path (tokenisation, detokenisation,
    HTTP; added to each request's TTFT); with `overlap` the host work hides under the GPU's. Zero until
    roofline/engines/timing.py fills them from measurements."""

    step_s: float = 0.0
    per_seq_s: float = 0.0
    api_request_s: float = 0.0
    overlap: bool = False  # asynchronous scheduling: a step takes max(GPU, host) instead of GPU + host
    # a step of more tokens than the largest CUDA-graph capture size launches every kernel from Python, ahead of its
    # GPU work (timing mechanism 8): such a step's GPU part takes at least eager_s (0: not measured)
    eager_above_tokens: int = 0
    eager_s: float = 0.0
    # ... a step with prefill chunks past this many tokens (0: eager_above_tokens): SGLang captures prefill graphs
    # apart from its decode batches (timing mechanism 8, EngineTiming.prefill_capture_tokens)
    eager_above_prefill_tokens: int = 0
    # ... and whether that cost adds to a decode step's GPU work instead of running ahead of it (timing mechanism 15:
    # llama.cpp's step past one token; a prefill's long kernels still hide it)
    eager_serial: bool = False
    # the engine's sampler as GPU work of every step (timing mechanism 9): sampler_s + sampler_row_s x sequences
    sampler_s: float = 0.0
    sampler_row_s: float = 0.0
    # host seconds per token of a step, before its GPU work (timing mechanism 17: llama.cpp's llama_decode)
    token_s: float = 0.0
    # the save of each finished request's KV to the server's host prompt cache, paid by the next step that admits a
    # request (timing mechanism 18: llama-server --cache-ram): save_s a save + save_byte_s x its bytes (0: none)
    save_s: float = 0.0
    save_byte_s: float = 0.0
    # host seconds of a step that cannot reuse the step before's graph, serial before its GPU work (timing mechanism
    # 21: llama-server rebuilds its graph for a step with prompt tokens and for a step its slots split into ubatches)
    graph_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("step_s", "per_seq_s", "api_request_s", "eager_s", "sampler_s", "sampler_row_s", "token_s",
                     "save_s", "save_byte_s", "graph_s"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"engine overheads: {name} {value!r} must be >= 0 seconds")

    def step(self, sequences: int) -> float:
        """CPU seconds of a step that runs `sequences` sequences."""
        return self.step_s + self.per_seq_s * sequences

    def eager(self, tokens: int, prefill: bool = False) -> bool:
        """Whether a step of `tokens` tokens (`prefill`: with prefill chunks) runs past the capture sizes and pays
        its launches (mechanism 8): eager_above_tokens, or for a step with chunks eager_above_prefill_tokens where
        set."""
        above = self.eager_above_prefill_tokens if prefill and self.eager_above_prefill_tokens else \
            self.eager_above_tokens
        return bool(self.eager_s) and tokens > above

    def host_s(self, sequences: int, tokens: int = 0, loads_s: float = 0.0, prefill: bool = False) -> float:
        """Host seconds of one step, all on the thread that schedules and launches it: its own (step), the KV loads
        it starts (`loads_s`, timing mechanism 10) and, past the capture sizes, its launches (eager_s, mechanism 8;
        `prefill`: the step has prefill chunks). With asynchronous scheduling a step takes at least this (combine);
        the engine core schedules the step after it no earlier than this after its own schedule (serving.fleet's
        `seen` after a step that starts loads)."""
        host = self.step(sequences) + self.token_s * tokens + loads_s + (self.graph_s if prefill else 0.0)
        return host + self.eager_s if self.eager(tokens, prefill) else host

    def with_sampler(self, gpu_s, sequences: int):
        """A step's GPU seconds (a float or an array of steps) with the sampler's kernels, which follow the model's
        (mechanism 9): + sampler_s + sampler_row_s x sequences."""
        if self.sampler_s or self.sampler_row_s:
            return gpu_s + self.sampler_s + self.sampler_row_s * sequences
        return gpu_s

    def combine(self, gpu_s, sequences: int, tokens: int = 0, loads_s: float = 0.0, prefill: bool = False,
                rebuilt: bool = False):
        """A step's wall time from its GPU time (a float or an array of steps) for `sequences` sequences and `tokens`
        tokens: the host work after the GPU's, or hidden under it with asynchronous scheduling (vLLM's
        async_scheduling: the host prepares step n + 1 while the GPU runs step n; roofline/engines/timing.py's
        overlap rule); a step past the capture sizes adds its launches (eager_s) to the host's work, ahead of the
        GPU's (timing.EngineTiming.step). `loads_s`: host seconds of the KV loads the step starts (a disaggregated
        decode instance posting the transfers of the requests it admits, timing mechanism 10), host work like the
        step's own. Each of the step's tokens adds token_s to the host's work; a step with prefill chunks, or one the
        engine splits by slots (`rebuilt`), rebuilds its graph (graph_s, mechanism 21)."""
        host = self.step(sequences) + self.token_s * tokens + loads_s + (self.graph_s if prefill or rebuilt else 0.0)
        gpu_s = self.with_sampler(gpu_s, sequences)
        if self.overlap:
            return np.maximum(gpu_s, self.host_s(sequences, tokens, loads_s, prefill))
        if self.eager_serial and self.eager(tokens, prefill) and not prefill:  # timing.EngineTiming.step (15.)
            return host + gpu_s + self.eager_s
        if self.eager(tokens, prefill):  # timing.EngineTiming.step's rule
            return host + np.maximum(gpu_s, self.eager_s)
        return gpu_s + host


def chained_ends(gpu_s, host_s: float, slack_s: float, eager: bool) -> np.ndarray:
    """End times, from the first's start, of consecutive steps of GPU seconds `gpu_s` (the sampler's included) and
    host seconds `host_s` each (EngineOverheads.host_s: schedule, inputs, loads and, past the capture sizes, the eager
    launch) under asynchronous scheduling with the admission lag (timing mechanism 24), the host having begun the
    first step's work `slack_s` before that step's start (its lead: 0 after an idle engine); `eager`: the steps run
    past the capture sizes (EngineOverheads.eager).

    The engine core schedules and launches step k + 1 once step k's launch has ended and step k - 1's result is in
    (vLLM 0.24, v1/engine/core.py@v0.24.0:519-603 step_with_batch_queue): its host work begins at
    H(k + 1) = max(H(k) + host_s, S(k)), S(k) step k's start (step k - 1's end). An eager step's kernels run on the
    GPU as the host launches them, so it ends at max(S(k + 1) + gpu, H(k + 1) + host_s): its wall from step k's end
    is max(gpu, host_s - slack), slack = the host's lead E(k) - H(k + 1) >= 0. A graph step keeps
    EngineOverheads.combine's max(gpu, host_s): its one launch comes at the end of its host work, so the lead does
    not let its host work run under its own GPU work (the chain's steady state, a GPU-bound one's lead a whole step,
    a host-bound one's 0, is combine's). Steps of the same host work in steady state take max(gpu, host_s) either
    way; only a change moves: an eager step after a GPU-bound one launches while that one runs on the GPU."""
    ends = np.empty(len(gpu_s))
    start, host = 0.0, -slack_s
    for s, gpu in enumerate(np.asarray(gpu_s, dtype=np.float64).tolist()):
        end = max(start + gpu, host + host_s) if eager else start + max(gpu, host_s)
        host = max(host + host_s, start)
        ends[s] = start = end
    return ends


@dataclass(frozen=True)
class EngineScheduling:
    """One engine's scheduler, as the simulator runs it (see the module docstring for each engine's sources)."""

    engine: str
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool = True  # a prompt may be split over steps; if not, it needs a whole step's budget
    mixed_steps: bool = True  # prefill chunks ride with decodes in one step (False: SGLang's prefill-or-decode)
    capture_sizes: tuple[int, ...] = ()  # captured CUDA-graph sizes, ascending (empty: no graphs)
    # a prefill step's graphs apart from the decode batches' (SGLang's breakable prefill graphs: token buckets,
    # sglang_prefill_capture_sizes); () where the engine has none
    prefill_capture_sizes: tuple[int, ...] = ()
    pad_scope: Literal["tokens", "decode", "none"] = "none"  # what is padded: any step's tokens, decode-only steps
    preemption: Literal["recompute", "none"] = "recompute"  # "none": admit only what fits to the last token
    prefix_caching: bool = False
    # with prefix caching on, the cache holds every request's own full pages, not only shared content, so a preempted
    # request's re-admission hits those no allocation has taken since, whatever the workload shares (vLLM V1: every full
    # block is hashed and its re-admission looks its hashes up again; serving.prefix.cache_tree)
    own_pages: bool = False
    page_tokens: int = 16
    overheads: EngineOverheads = field(default_factory=EngineOverheads)
    notes: tuple[str, ...] = ()
    # a request that reaches the engine while a step runs joins the step after the next, not the next (vLLM under
    # asynchronous scheduling, SGLang under its overlap scheduler: step n + 1 is formed as soon as step n is launched;
    # vllm_admission_lag, sglang_admission_lag)
    admission_lag: bool = False
    # the host's speed against the one the engine's time profile was measured on (timing mechanism 11): the host
    # figures the builders below read (with_eager, with_speculative) are divided by it
    host_speed: float = 1.0
    # a waiting request is admitted only when the pool holds all its known tokens, not only its first chunk (vLLM
    # 0.19+'s scheduler_reserve_full_isl: a gate, nothing reserved; vllm_full_prompt_admission)
    admit_full_prompt: bool = False
    # llama-server with one KV stream a slot (-np N without -kvu): a request takes the least recently used slot and a
    # step's batch splits into ubatches at every break in consecutive slot ids (timing 20.; engines.llamacpp ubatches)
    slot_streams: bool = False

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise ValueError("scheduler: max_num_seqs and max_num_batched_tokens must be >= 1")
        if list(self.capture_sizes) != sorted(set(self.capture_sizes)):
            raise ValueError("scheduler: capture sizes must be distinct and ascending")

    def padded_tokens(self, tokens: int, decode_only: bool) -> int:
        """Tokens the GPU computes for a step of `tokens` tokens: the smallest captured size >= tokens when the step
        runs as a graph (vLLM: any step up to the largest size; SGLang: decode-only steps, and a prefill step its
        prefill graphs' bucket where that bucket is at most twice the tokens: sglang_prefill_padded), else
        `tokens`."""
        if not decode_only and self.prefill_capture_sizes:
            return sglang_prefill_padded(tokens, self.prefill_capture_sizes)
        if self.pad_scope == "none" or not self.capture_sizes or (self.pad_scope == "decode" and not decode_only):
            return tokens
        i = bisect.bisect_left(self.capture_sizes, tokens)
        return self.capture_sizes[i] if i < len(self.capture_sizes) else tokens

    def with_overrides(self, max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
                       prefix_caching: bool | None = None) -> EngineScheduling:
        """The same engine with the user's flags; an omitted flag keeps the engine's default."""
        out = self
        if max_num_batched_tokens is not None:
            out = replace(out, max_num_batched_tokens=max_num_batched_tokens)
        if max_num_seqs is not None:
            out = replace(out, max_num_seqs=max_num_seqs)
        if prefix_caching is not None:
            out = replace(out, prefix_caching=prefix_caching)
        return out


def device_memory_bytes(hardware: Hardware) -> int:
    """What the engines read as the device's memory: CUDA's totalGlobalMem when the catalogue has it, else the
    datasheet capacity (vLLM current_platform.get_device_total_memory, SGLang get_device_memory_capacity)."""
    return int(hardware.driver_memory_bytes or hardware.memory_bytes)


def measured_overheads(engine: str, host_speed: float = 1.0) -> EngineOverheads:
    """The engine's host costs from its time profile (roofline.engines.timing; zeros where none is measured): the
    API server's per-step law and its overlap as measured, and per request on the server's path its request cost
    and the server's own (timing.request_s + api_request_s: the tiny server's TTFT at concurrency 1) less the one
    step's host work the simulator already charges that request's first step; on a host `host_speed` times as fast
    as the profile's (timing mechanism 11)."""
    from roofline.engines.timing import timing_on

    t = timing_on(engine, host_speed)
    host_1 = t.server_step_s + t.server_per_seq_s
    api = max(0.0, t.request_s + t.api_request_s - host_1) if t.request_s or t.api_request_s else 0.0
    return EngineOverheads(step_s=t.server_step_s, per_seq_s=t.server_per_seq_s, api_request_s=api,
                           overlap=t.overlap, token_s=t.token_s, save_s=t.cache_save_s,
                           save_byte_s=t.cache_save_byte_s, graph_s=t.server_graph_s)


def with_speculative(profile: EngineScheduling, method: str | None) -> EngineScheduling:
    """The engine's scheduler under speculative decoding of `method` (serving.speculative's names): vLLM 0.24 turns
    asynchronous scheduling off for a draft model (methods other than EAGLE / MTP / ngram-on-GPU:
    vllm/config/vllm.py VllmConfig.__post_init__, "Async scheduling not supported with draft_model-based speculative
    decoding and will be disabled", logged by run 2 of validate/engines), so its host work no longer hides under the
    GPU's and new requests are admitted at the next step (no admission lag); the speculative step's own serial host
    work (timing.EngineTiming.spec_step_s: rejection sampler, proposer set-up, the drafts' copy) adds to every
    step's. The draft passes' host work bounds each pass from below (serving.speculative.DraftCost)."""
    if method != "draft" or profile.engine != "vllm" or not profile.overheads.overlap:
        return profile
    from roofline.engines.timing import timing_on

    extra = timing_on("vllm", profile.host_speed).spec_step_s
    o = profile.overheads
    return replace(profile, overheads=replace(o, overlap=False, step_s=o.step_s + extra), admission_lag=False,
                   notes=profile.notes + (f"vllm: async scheduling off with a draft model (host work after the "
                                          f"GPU's), speculative step host {extra * 1e3:.2f} ms",))


def with_eager(profile: EngineScheduling, layers: int, moe_layers: int) -> EngineScheduling:
    """The engine's scheduler for a model of `layers` decoder layers (`moe_layers` with routed experts) per stage:
    a step of more tokens than its largest capture size costs at least the launches of every kernel from Python
    (roofline/engines/timing.py mechanism 8, EngineTiming.eager_launch_s); unchanged without graphs or a
    measurement."""
    from roofline.engines.timing import timing_on

    timing = timing_on(profile.engine, profile.host_speed)
    eager = timing.eager_launch_s(layers, moe_layers) if profile.capture_sizes else 0.0
    if not eager:
        return profile
    prefill = profile.prefill_capture_sizes[-1] if profile.prefill_capture_sizes else timing.prefill_capture_tokens
    return replace(profile, overheads=replace(profile.overheads, eager_above_tokens=profile.capture_sizes[-1],
                                              eager_above_prefill_tokens=prefill, eager_s=eager,
                                              eager_serial=timing.eager_serial))


def with_sampler(profile: EngineScheduling, hardware_name: str, vocab: int) -> EngineScheduling:
    """The engine's scheduler with its sampler's GPU law on `hardware_name` for a `vocab`-token vocabulary
    (roofline/engines/timing.py mechanism 9: latency_s + rows x vocab / elements_per_s, one row per sequence of a
    step), and a host sampler's scan of the vocabulary per sequence (mechanism 15: sampler_host_element_s x vocab,
    host work of every sequence of a step, on the profile's host scaled by host_speed); unchanged where neither was
    measured."""
    from roofline.engines.timing import timing, timing_on

    host = timing_on(profile.engine, profile.host_speed).sampler_host_element_s * vocab
    if host:
        profile = replace(profile, overheads=replace(profile.overheads, per_seq_s=profile.overheads.per_seq_s + host))
    law = timing(profile.engine).sampler.get(hardware_name)
    if law is None:
        return profile
    latency_s, elements_per_s = law
    return replace(profile, overheads=replace(profile.overheads, sampler_s=latency_s,
                                              sampler_row_s=vocab / elements_per_s))


def vllm_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int, speculative_tokens: int = 0) -> tuple[int, ...]:
    """vLLM's default CUDA-graph capture sizes (VllmConfig._set_cudagraph_sizes, see the module docstring)."""
    top = min(max_num_seqs * (1 + speculative_tokens) * 2, 512, max_num_batched_tokens)
    sizes = [i for i in (1, 2, 4) if i <= top]
    if top >= 8:
        sizes += list(range(8, min(top + 1, 256), 8))
    if top >= 256:
        sizes += list(range(256, top + 1, 16))
    return tuple(sizes)


def vllm_async_scheduling(release: str | None, flag: bool = False) -> bool:
    """Whether a vLLM of `release` ('0.11.0'; None: unknown, taken as current) overlaps host and GPU work: the
    --async-scheduling flag, else the release's default (module docstring: off before ASYNC_DEFAULT_RELEASE)."""
    return flag or release is None or release_tuple(release) >= ASYNC_DEFAULT_RELEASE


def vllm_full_prompt_admission(release: str | None) -> bool:
    """Whether a vLLM of `release` (None: unknown, taken as current) admits a waiting request only when the KV pool
    holds its whole prompt (scheduler_reserve_full_isl's default, module docstring), not only its first chunk."""
    return release is None or release_tuple(release) >= FULL_PROMPT_RELEASE


def vllm_admission_lag(async_scheduling: bool) -> bool:
    """Whether a vLLM engine admits a request one step late: under asynchronous scheduling the engine core keeps a
    batch queue of two (vllm/config/vllm.py@v0.24.0 VllmConfig.max_concurrent_batches: 2 with async_scheduling at
    pp 1, "Async scheduling requires 2 concurrent batches to overlap"), and EngineCore.step_with_batch_queue
    (vllm/v1/engine/core.py@v0.24.0, lines 539-581) schedules and launches step n + 1 as soon as step n is launched,
    before blocking on step n's result. New requests enter the scheduler only between steps (run_busy_loop ->
    _process_input_queue, core.py lines 1259-1296), so one that arrives while step n runs is past the schedule of
    step n + 1 (made when step n started) and first runs in step n + 2: one whole step later than a synchronous
    scheduler (batch queue of one: step() schedules after the previous step's result) would run it. With an idle
    engine the core blocks on its input queue and schedules at once: no lag."""
    return async_scheduling


def vllm(hardware: Hardware, entry: str, speculative_tokens: int = 0,
         overlap: bool | None = None, host_speed: float = 1.0) -> EngineScheduling:
    """vLLM's defaults for this GPU and entry point ('api': `vllm serve`; 'offline': the `LLM` class); `overlap`:
    whether host work hides under the GPU's (vllm_async_scheduling of the release; None: as measured); its host costs
    on a host `host_speed` times as fast as the profile's (timing mechanism 11); its admission rule is that of the
    profile's release (vllm_full_prompt_admission)."""
    from roofline.engines.timing import timing

    big = device_memory_bytes(hardware) >= 70 * GIB and "a100" not in hardware.name.lower()
    tokens = {"offline": 16384, "api": 8192}[entry] if big else {"offline": 8192, "api": 2048}[entry]
    seqs = min(1024 if big else 256, tokens)
    overheads = measured_overheads("vllm", host_speed)
    if overlap is not None:
        overheads = replace(overheads, overlap=overlap)
    return EngineScheduling(
        "vllm", seqs, tokens, capture_sizes=vllm_capture_sizes(seqs, tokens, speculative_tokens), pad_scope="tokens",
        prefix_caching=True, own_pages=True, page_tokens=16, overheads=overheads,
        admission_lag=vllm_admission_lag(overheads.overlap),
        host_speed=host_speed, admit_full_prompt=vllm_full_prompt_admission(timing("vllm").version),
        notes=(f"vllm {entry}: max_num_batched_tokens {tokens}, max_num_seqs {seqs} ("
               f"{'>= 70 GiB, not A100' if big else '< 70 GiB or A100'}; arg_utils.py@99d7eb5 _set_default_args)",)
        + ((f"vllm: host {host_speed:g}x the time profile's (its host work / {host_speed:g})",)
           if host_speed != 1.0 else ()))


def sglang_graph_max_bs(memory_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) by GPU memory in MiB (_handle_gpu_memory_settings)."""
    small_tp = tp < 4
    if memory_mib < 20 * 1024:
        return 2048, 8
    if memory_mib < 35 * 1024:
        return 2048, 24 if small_tp else 80
    if memory_mib < 60 * 1024:
        return 4096, 32 if small_tp else 160
    if memory_mib < 160 * 1024:
        return 8192, 256 if small_tp else 512
    return 16384, 512


def sglang_capture_sizes(max_bs: int) -> tuple[int, ...]:
    """SGLang's decode capture sizes without speculative decoding (_generate_cuda_graph_batch_sizes)."""
    sizes = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16)) + list(range(512, max_bs + 1, 32))
    return tuple(s for s in sizes if s <= max_bs)


def sglang_prefill_capture_sizes(max_tokens: int) -> tuple[int, ...]:
    """SGLang's prefill CUDA-graph buckets (ServerArgs._generate_prefill_cuda_graph_batch_sizes, srt/server_args.py
    of sglang 0.5.17, lines 4990-5007: 4 .. 32 by 4, 48 .. 256 by 16, 288 .. 512 by 32, 576 .. 1,024 by 64, 1,280 ..
    4,096 by 256, 4,608 .. max by 512), up to its prefill max_bs, the chunked_prefill_size for a model without MLA
    (lines 4724-4731; 2,048 with MLA, not modelled). The H200 runs' start-up logs list 4 .. 8,192."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return tuple(s for s in sizes if s <= max_tokens)


def sglang_prefill_padded(tokens: int, sizes: tuple[int, ...]) -> int:
    """The tokens a prefill step of `tokens` computes under SGLang's breakable prefill graphs: the replay runs every
    token of the smallest bucket >= tokens (srt/model_executor/runner/prefill_cuda_graph_runner.py: 'A replay
    executes every padded token in its capture bucket'), unless that bucket is more than twice the tokens
    (_MAX_PREFILL_CUDA_GRAPH_PADDING_FACTOR = 2, can_replay_locally) or none holds them: then the exact tokens,
    eagerly."""
    i = bisect.bisect_left(sizes, tokens)
    return sizes[i] if i < len(sizes) and sizes[i] <= 2 * tokens else tokens


def sglang_max_running(pool_tokens: int, context_len: int) -> int:
    """max_running_requests = min(pool tokens // 2, the request pool min(max(pool / context x 512, 2048), 4096))."""
    req_pool = min(max(int(pool_tokens / context_len * 512), 2048), 4096)
    return max(1, min(pool_tokens // 2, req_pool))


def sglang_admission_lag(overlap: bool) -> bool:
    """Whether SGLang admits a request one step late: each pass of its overlap scheduler's loop (Scheduler.
    event_loop_overlap, srt/managers/scheduler.py of sglang 0.5.17, lines 1727-1784) receives requests, forms and
    launches the next batch, and only then processes the previous batch's result (pop_and_process, blocking on its
    copy_done). The pass forming batch n + 2 so starts as batch n ends, i.e. as n + 1 starts, and a request arriving
    while n + 1 runs first runs in n + 3: one step later than --disable-overlap-schedule's loop (event_loop_normal).
    An idle server forms a batch as soon as a request arrives. vLLM's rule under async scheduling (vllm_admission_lag).
    """
    return overlap


def sglang(hardware: Hardware, tp: int, pool_tokens: int | None, context_len: int,
           host_speed: float = 1.0) -> EngineScheduling:
    """SGLang's defaults for this GPU; max running requests from the pool's tokens (4096 when unknown); its host costs
    as its time profile measured them (profiles/sglang.json: the overlap scheduler's max(GPU, host), the API server's
    per-step and per-request work), on a host `host_speed` times as fast (timing mechanism 11), and the overlap
    scheduler's admission one step late (sglang_admission_lag)."""
    chunk, max_bs = sglang_graph_max_bs(device_memory_bytes(hardware) / MIB, tp)
    running = sglang_max_running(pool_tokens, context_len) if pool_tokens else 4096
    overheads = measured_overheads("sglang", host_speed)
    return EngineScheduling(
        "sglang", running, chunk, mixed_steps=False, capture_sizes=sglang_capture_sizes(max_bs), pad_scope="decode",
        prefill_capture_sizes=sglang_prefill_capture_sizes(chunk),
        prefix_caching=True, page_tokens=1, overheads=overheads, host_speed=host_speed,
        admission_lag=sglang_admission_lag(overheads.overlap),
        notes=(f"sglang: chunked_prefill_size {chunk}, cuda_graph_max_bs {max_bs}, max_running_requests {running} "
               "(server_args.py@469c63e _handle_gpu_memory_settings; prefill and decode in separate steps)",))


def trtllm_capture_sizes(max_bs: int = 128) -> tuple[int, ...]:
    """TensorRT-LLM CudaGraphConfig sizes without padding: 1..31, 32, 64, 128 and powers of two up to max_bs."""
    sizes = set(range(1, 32)) | {32, 64, 128} | {2 ** i for i in range(8, max_bs.bit_length())}
    return tuple(sorted(s for s in sizes if s <= max_bs))


def trtllm() -> EngineScheduling:
    """TensorRT-LLM's LLM API defaults (PyTorch backend)."""
    return EngineScheduling(
        "trtllm", 2048, 8192, chunked_prefill=False, capture_sizes=trtllm_capture_sizes(), pad_scope="none",
        preemption="none", prefix_caching=True, page_tokens=32,
        notes=("trtllm: max_batch_size 2048, max_num_tokens 8192, no chunked prefill, GUARANTEED_NO_EVICT "
               "(llm_args.py defaults); CUDA graphs of 1..128 unpadded",))


def llamacpp(host_speed: float = 1.0) -> EngineScheduling:
    """llama-server's defaults: 4 slots, a 2048-token logical batch shared by prompts and decodes; its host costs as
    its time profile measured them (profiles/llamacpp.json: a synchronous loop, the host sampler per slot added by
    with_sampler), and a decode step of more than one token's cost beyond its matmuls (capture sizes (1,), unpadded:
    timing mechanism 15, with_eager)."""
    from roofline.engines.timing import timing

    return EngineScheduling(
        "llamacpp", 4, 2048, preemption="none", prefix_caching=True, page_tokens=256,
        capture_sizes=timing("llamacpp").capture_sizes, pad_scope="none",
        overheads=measured_overheads("llamacpp", host_speed), host_speed=host_speed,
        notes=("llamacpp: -np 4 slots (unified KV), -b 2048, no preemption (server.cpp; PR #16736)",
               "llamacpp: the host prompt cache on (--cache-ram 8192 MiB, PR #16391): each finished request's KV is "
               "saved to host memory before the next request starts, the server's loop waiting (~1.8 GB/s, timing "
               "18.); --cache-ram 0 turns it off",
               UNIFIED_NOTE))


# the one-stream server's attention (timing 22.): a note the split server (-np N without -kvu) drops
UNIFIED_NOTE = ("llamacpp: the slots share one KV stream: a step's attention spans every cell it holds, an idle "
                "slot's kept until a task takes the slot (or, with the host prompt cache on, until the next task "
                "starts) (ggml's FLASH_ATTN_EXT under 1,024 rows, timing 22.), and the host builds its mask over them "
                "(23.)")


def ideal() -> EngineScheduling:
    """The planner's idealised engine (the simulator's defaults before engine profiles existed)."""
    return EngineScheduling("ideal", 256, 8192, prefix_caching=True,
                            notes=("ideal: 256 sequences, 8192 tokens a step, prefix caching",))


def scheduling(engine: str, hardware: Hardware, entry: str = "api", tp: int = 1, pool_tokens: int | None = None,
               context_len: int = 4096, speculative_tokens: int = 0,
               overlap: bool | None = None, host_speed: float = 1.0) -> EngineScheduling:
    """The engine's own scheduler defaults for this GPU (see the module docstring for each source); `overlap`
    (vLLM): the release's asynchronous scheduling (vllm_async_scheduling), None for the measured profile's;
    `host_speed`: the host against the one the engine's time profile was measured on (timing mechanism 11; an
    engine with no measured host costs has none to scale)."""
    if entry not in ENTRY_POINTS:
        raise SpecError(f"--entry-point: {entry!r} is not one of {', '.join(ENTRY_POINTS)}")
    if engine == "vllm":
        return vllm(hardware, entry, speculative_tokens, overlap, host_speed)
    if engine == "sglang":
        return sglang(hardware, tp, pool_tokens, context_len, host_speed)
    if engine == "trtllm":
        return trtllm()
    if engine == "llamacpp":
        return llamacpp(host_speed)
    if engine == "ideal":
        return ideal()
    raise SpecError(f"--engine: unknown engine {engine!r}; valid: {', '.join(SCHEDULING_ENGINES)}")
