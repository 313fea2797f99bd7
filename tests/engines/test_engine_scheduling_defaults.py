"""Engine scheduler defaults (roofline.engines.scheduling) and the simulator's use of them.

Expected values are read by hand from the engines' source (the module docstring cites each file and commit):
vLLM arg_utils.py _set_default_args and config/vllm.py _set_cudagraph_sizes, SGLang server_args.py
_handle_gpu_memory_settings, TensorRT-LLM CudaGraphConfig; the timing expectations follow from the definition of
each overhead (a fixed CPU cost per step, per sequence, per request), not from the simulator's output.
"""

from __future__ import annotations

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.engines.scheduling import (
    EngineOverheads,
    EngineScheduling,
    scheduling,
    sglang_max_running,
    trtllm_capture_sizes,
    vllm_capture_sizes,
)
from roofline.errors import SpecError
from roofline.methods import parse_method
from roofline.serving.pool import KVPool
from roofline.serving.requests import Requests
from roofline.serving.scheduler import Scheduler, SchedulerConfig
from roofline.serving.simulate import Simulator
from roofline.specs import Workload
from validate import stored

H200, A100, L4, B200 = (load_hardware(n) for n in ("H200", "A100-80GB", "L4", "B200"))


@pytest.mark.parametrize("hw,entry,tokens,seqs", [
    (H200, "api", 8192, 1024),  # >= 70 GiB, not an A100
    (H200, "offline", 16384, 1024),
    (A100, "api", 2048, 256),  # 80 GiB but an A100: the small defaults (vLLM PR #17885)
    (A100, "offline", 8192, 256),
    (L4, "api", 2048, 256),  # 24 GiB
])
def test_vllm_budgets_follow_the_gpu_and_the_entry_point(hw, entry, tokens, seqs):
    s = scheduling("vllm", hw, entry)
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (tokens, seqs)
    assert s.chunked_prefill and s.mixed_steps and s.preemption == "recompute" and s.prefix_caching


def test_vllm_capture_sizes_and_padding():
    sizes = vllm_capture_sizes(1024, 8192)  # max = min(1024 x 2, 512, 8192) = 512
    assert sizes[:4] == (1, 2, 4, 8) and sizes[-1] == 512
    assert len(sizes) == 3 + 31 + 17  # [1,2,4] + 8..248 step 8 + 256..512 step 16
    assert vllm_capture_sizes(4, 8192) == (1, 2, 4, 8)  # max = 8
    assert vllm_capture_sizes(256, 100)[-1] == 96  # max = min(512, 512, 100) = 100 -> 96 the last multiple of 8
    s = scheduling("vllm", H200)
    assert [s.padded_tokens(n, True) for n in (1, 3, 5, 249, 257, 512, 513)] == [1, 4, 8, 256, 272, 512, 513]
    assert s.padded_tokens(300, False) == 304  # vLLM pads mixed steps too (piecewise graphs)


def test_vllm_capture_sizes_with_speculative_tokens_reach_512():
    sizes = vllm_capture_sizes(64, 8192, speculative_tokens=3)  # min(64 x 4 x 2, 512) = 512
    assert sizes[-1] == 512


def test_sglang_defaults_by_gpu_memory():
    s = scheduling("sglang", H200, pool_tokens=None)  # 139.8 GiB < 160 GiB
    assert s.max_num_batched_tokens == 8192 and s.capture_sizes[-1] == 256
    assert len(s.capture_sizes) == 5 + 31  # [1,2,4,8,12] + 16..256 step 8
    assert not s.mixed_steps and s.pad_scope == "decode" and s.page_tokens == 1
    assert s.padded_tokens(13, True) == 16  # a decode batch of 13 runs the bs-16 graph
    # a 13-token prefill runs the 16-token prefill graph (sglang 0.5.17 server_args.py 4990-5007: 4..32 by 4); a
    # 1-token one runs eagerly (the 4-token bucket is more than twice it: prefill_cuda_graph_runner.py)
    assert s.padded_tokens(13, False) == 16 and s.padded_tokens(1, False) == 1
    big = scheduling("sglang", B200)  # 180 GiB
    assert big.max_num_batched_tokens == 16384 and big.capture_sizes[-1] == 512
    assert scheduling("sglang", L4, tp=4).capture_sizes[-1] == 80  # < 35 GiB, tp >= 4


def test_sglang_running_cap_follows_the_pool():
    assert sglang_max_running(400_000, 4096) == 4096  # min(200000, min(max(50000, 2048), 4096))
    assert sglang_max_running(3000, 4096) == 1500  # min(1500, 2048)
    assert sglang_max_running(100_000, 1_000_000) == 2048  # the request pool's floor


def test_trtllm_and_llamacpp_defaults():
    t = scheduling("trtllm", H200)
    assert (t.max_num_seqs, t.max_num_batched_tokens, t.chunked_prefill, t.preemption) == (2048, 8192, False, "none")
    assert trtllm_capture_sizes() == tuple(range(1, 32)) + (32, 64, 128)
    assert t.padded_tokens(33, True) == 33  # padding off by default
    ll = scheduling("llamacpp", H200)
    assert (ll.max_num_seqs, ll.max_num_batched_tokens, ll.preemption) == (4, 2048, "none")


def test_flags_override_only_what_they_name_and_bad_names_are_errors():
    s = scheduling("vllm", H200).with_overrides(max_num_seqs=64)
    assert (s.max_num_seqs, s.max_num_batched_tokens) == (64, 8192)
    with pytest.raises(SpecError, match="--engine"):
        scheduling("tgi", H200)
    with pytest.raises(SpecError, match="--entry-point"):
        scheduling("vllm", H200, entry="grpc")
    with pytest.raises(ValueError, match="step_s"):
        EngineOverheads(step_s=-1.0)


def _scheduler(capacity: float, config: SchedulerConfig, prompts, outputs) -> Scheduler:
    pool = KVPool.uniform(capacity, 16, 1.0, 4096, "test")  # 1 byte per token, pages of 16
    n = len(prompts)
    reqs = Requests(np.zeros(n), np.array(prompts, dtype=np.int64), np.array(outputs, dtype=np.int64))
    sched = Scheduler(reqs, pool, config)
    sched.waiting.extend(range(n))
    sched.arrived = n
    return sched


def test_reserve_full_admits_only_what_fits_to_the_last_token():
    """Pages of 16 bytes: a 100 + 60 request reserves 160 bytes; its first chunk alone needs 112."""
    reserve = _scheduler(400, SchedulerConfig(8192, 256, reserve_full=True), [100] * 3, [60] * 3)
    plan = reserve.schedule()
    assert len(plan.chunk_pos) == 2  # 2 x 160 = 320 <= 400 < 480
    greedy = _scheduler(400, SchedulerConfig(8192, 256), [100] * 3, [60] * 3)
    assert len(greedy.schedule().chunk_pos) == 3  # 3 x 112 = 336 <= 400


def test_without_chunked_prefill_a_prompt_waits_for_a_whole_budget():
    chunked = _scheduler(10_000, SchedulerConfig(100, 256), [60, 60], [5, 5])
    assert chunked.schedule().chunk_tokens.tolist() == [60, 40]
    whole = _scheduler(10_000, SchedulerConfig(100, 256, chunked_prefill=False), [60, 60], [5, 5])
    assert whole.schedule().chunk_tokens.tolist() == [60]


def test_prefill_or_decode_steps_never_mix():
    """SGLang: once r0 decodes and r1 waits, the next step is r1's prefill alone; vLLM mixes them."""
    for mixed, decodes in ((True, 1), (False, 0)):
        sched = _scheduler(10_000, SchedulerConfig(8192, 256, mixed_steps=mixed), [50, 50], [5, 5])
        sched.waiting.pop()  # r1 arrives later
        sched.commit(sched.schedule(), 1.0)  # r0's prefill: its first token
        sched.waiting.append(1)
        plan = sched.schedule()
        assert len(plan.context) == decodes and plan.chunk_tokens.tolist() == [50]
        assert plan.tokens == decodes + 50  # the step's tokens: one per decode plus the chunk
        if not mixed:
            sched.commit(plan, 2.0)
            assert len(sched.schedule().context) == 2  # nothing left to prefill: both decode


MODEL = load_model("Llama-3.1-8B")


def _lone(overheads: EngineOverheads, prompt: int = 512, output: int = 20):
    engine = EngineScheduling("ideal", 256, 8192, overheads=overheads)
    wl = Workload(context_tokens=prompt + output, prefill_chunk_tokens=8192)
    sim = Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=prompt + output, engine=engine)
    reqs = Requests(np.array([0.0]), np.array([prompt]), np.array([output]))
    trace = sim.run(reqs)
    return float(trace.ttft_s[0]), float(trace.e2e_s[0])


def test_overheads_add_their_definition_to_a_lone_request():
    """One request, alone: a prefill step then output - 1 decode steps, each running one sequence. A per-step cost
    adds once to the TTFT and `output` times to the end-to-end time; a per-sequence cost the same (one sequence);
    an API server's per-request cost adds once to both."""
    ttft0, e2e0 = _lone(EngineOverheads())
    ttft, e2e = _lone(EngineOverheads(step_s=0.003))
    assert ttft - ttft0 == pytest.approx(0.003, rel=1e-9) and e2e - e2e0 == pytest.approx(20 * 0.003, rel=1e-9)
    ttft, e2e = _lone(EngineOverheads(per_seq_s=0.002))
    assert ttft - ttft0 == pytest.approx(0.002, rel=1e-9) and e2e - e2e0 == pytest.approx(20 * 0.002, rel=1e-9)
    ttft, e2e = _lone(EngineOverheads(api_request_s=0.05))
    assert ttft - ttft0 == pytest.approx(0.05, rel=1e-9) and e2e - e2e0 == pytest.approx(0.05, rel=1e-9)


def test_graph_padding_costs_the_dummy_tokens_gemm_work():
    """Three decodes padded to four captured tokens cost more than three and no more than four real ones (the
    dummy token runs the GEMMs but attends to nothing)."""
    wl = Workload(context_tokens=4096, prefill_chunk_tokens=8192)
    sim = Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=4096, engine=scheduling("vllm", H200))
    e = np.zeros(0, dtype=np.int64)
    ctx3, ctx4 = np.full(3, 2000), np.full(4, 2000)
    three = sim.steps.step_time(ctx3, e, e, e.astype(bool))
    padded = sim.steps.step_time(ctx3, e, e, e.astype(bool), pad=1)
    four = sim.steps.step_time(ctx4, e, e, e.astype(bool))
    assert three < padded < four
    block = sim.steps.decode_block(ctx3, 2, pad=1)
    assert block[0] == pytest.approx(padded, rel=1e-12)


def test_asynchronous_scheduling_hides_the_host_under_the_gpu():
    """With overlap a step takes max(GPU, host): a host cost above a lone decode step's GPU time sets every decode
    step; below it, nothing changes."""
    prompt, output = 512, 20
    ttft0, e2e0 = _lone(EngineOverheads())
    _, hidden = _lone(EngineOverheads(step_s=1e-6, overlap=True))
    assert hidden == pytest.approx(e2e0, rel=1e-12)
    ttft, e2e = _lone(EngineOverheads(step_s=0.5, overlap=True), prompt, output)
    assert ttft == pytest.approx(0.5, rel=1e-12) and e2e == pytest.approx(output * 0.5, rel=1e-12)
    assert ttft0 < 0.5


def test_a_verifying_sequence_counts_its_drafts_in_the_step_budget():
    """Speculative decoding with 2 drafts: r0's verify step is 3 tokens, so r1's chunk gets 100 - 3 = 97."""
    sched = _scheduler(10_000, SchedulerConfig(100, 256, spec_tokens=2), [50, 200], [5, 5])
    sched.waiting.pop()
    sched.commit(sched.schedule(), 1.0)
    sched.waiting.append(1)
    plan = sched.schedule()
    assert len(plan.context) == 1 and plan.chunk_tokens.tolist() == [97] and plan.tokens == 100


def _second_request_ttft(lag: bool, arrive_s: float, prompt: int = 512, output: int = 64) -> tuple[float, object]:
    """TTFT of a second request (prompt 128, output 4) arriving at `arrive_s` while a first (arriving at 0) runs,
    on the 'ideal' engine with no host costs, with or without the admission lag."""
    engine = EngineScheduling("ideal", 256, 8192, admission_lag=lag)
    wl = Workload(context_tokens=prompt + output, prefill_chunk_tokens=8192)
    sim = Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=prompt + output, engine=engine)
    reqs = Requests(np.array([0.0, arrive_s]), np.array([prompt, 128]), np.array([output, 4]))
    return float(sim.run(reqs).ttft_s[1]), sim


def test_admission_lag_costs_the_second_request_one_step_of_the_first():
    """vLLM under async scheduling schedules step n + 1 when step n starts (core.py step_with_batch_queue), so a
    request arriving during step n runs in step n + 2: its TTFT is longer by one decode step of the request
    already running (batch 1 at its context, the planner's decode_time), not by a step of its own."""
    from roofline.planner.phases import PhaseModel

    wl = Workload(context_tokens=576, prefill_chunk_tokens=8192)
    phases = PhaseModel.build(MODEL, H200, wl, parse_method("bf16"))
    prefill = phases.prefill_time(1, 512)
    arrive = prefill + 10.5 * phases.decode_time(1, 520)  # mid-way through the first request's 11th decode step
    plain, _ = _second_request_ttft(False, arrive)
    lagged, _ = _second_request_ttft(True, arrive)
    assert lagged - plain == pytest.approx(phases.decode_time(1, 524), rel=2e-3)


def test_admission_lag_does_not_delay_a_request_to_an_idle_engine():
    """An idle engine blocks on its input queue and schedules what arrives at once (core.py _process_input_queue):
    the lag applies only while a step runs."""
    plain, _ = _second_request_ttft(False, 100.0)  # the first request long finished
    lagged, _ = _second_request_ttft(True, 100.0)
    assert lagged == pytest.approx(plain, rel=1e-12)


def test_vllm_lags_admission_under_async_scheduling_only():
    """vLLM's profile (async scheduling measured on) lags admission; a release without async scheduling, or a draft
    model (which turns async scheduling off), does not."""
    from roofline.engines.scheduling import vllm, with_speculative

    assert vllm(H200, "api").admission_lag
    assert not vllm(H200, "api", overlap=False).admission_lag
    assert not with_speculative(vllm(H200, "api"), "draft").admission_lag
    assert with_speculative(vllm(H200, "api"), "eagle").admission_lag


def _prefill_first_ttft(lag: bool, arrive_s: float) -> float:
    """TTFT of a second request (prompt 128, output 4) arriving at `arrive_s` while a first (prompt 512, output 64,
    arriving at 0) decodes alone, on an engine that runs a step of prefill or of decodes, prefill first (SGLang's
    get_next_batch_to_run), with no host costs, with or without the admission lag."""
    engine = EngineScheduling("ideal", 256, 8192, mixed_steps=False, admission_lag=lag)
    wl = Workload(context_tokens=576, prefill_chunk_tokens=8192)
    sim = Simulator(MODEL, H200, wl, parse_method("bf16"), max_tokens=576, engine=engine)
    reqs = Requests(np.array([0.0, arrive_s]), np.array([512, 128]), np.array([64, 4]))
    return float(sim.run(reqs).ttft_s[1])


def test_sglang_lags_admission_one_decode_step_of_the_running_request():
    """SGLang's overlap scheduler forms batch n + 2 as batch n + 1 starts (scheduler.py event_loop_overlap: the next
    batch is formed and launched before the previous one's result is processed), so a request arriving while a
    decode step runs has its prefill after the next decode step, not after this one: its TTFT is longer by one decode
    step of the request already running (batch 1 at its context, the planner's decode_time). The run's server had
    the overlap scheduler on (its server_info: disable_overlap_schedule false), so SGLang's profile lags."""
    import json
    from pathlib import Path

    from roofline.planner.phases import PhaseModel

    phases = PhaseModel.build(MODEL, H200, Workload(context_tokens=576, prefill_chunk_tokens=8192),
                              parse_method("bf16"))
    arrive = phases.prefill_time(1, 512) + 10.5 * phases.decode_time(1, 520)  # mid-way through its 11th decode step
    extra = _prefill_first_ttft(True, arrive) - _prefill_first_ttft(False, arrive)
    assert extra == pytest.approx(phases.decode_time(1, 524), rel=2e-3)
    assert _prefill_first_ttft(True, 100.0) == pytest.approx(_prefill_first_ttft(False, 100.0), rel=1e-12)  # idle
    run = Path(__file__).resolve().parents[2] / "validate/results/engines/nvidia-h200-sglang-2026-11-30-run1"
    info = json.loads(stored.read_text(run / "Llama-3.1-8B-rate24.jsonl").splitlines()[0])["server_info"]
    assert info["disable_overlap_schedule"] is False and scheduling("sglang", H200).admission_lag
