"""vLLM's admission gate from 0.19.0 on (SchedulerConfig.admit_full_prompt: scheduler_reserve_full_isl, 0.24's
vllm/config/scheduler.py lines 140-144; KVCacheManager.allocate_slots' full_sequence_must_fit): a waiting request
starts only when the free pages hold all its known tokens, though the step takes only its first chunk's pages.

Expected steps are derived by hand on a pool of 1 byte per token in 16-token pages (seq_bytes[n] = 16 ceil(n / 16)).
"""

from __future__ import annotations

import numpy as np

from roofline.catalogue import load_hardware
from roofline.engines.scheduling import scheduling, vllm_full_prompt_admission
from roofline.serving.pool import KVPool
from roofline.serving.requests import Requests
from roofline.serving.scheduler import Scheduler, SchedulerConfig


def _scheduler(capacity: float, full: bool, prompts, outputs, budget: int = 64) -> Scheduler:
    pool = KVPool.uniform(capacity, 16, 1.0, 4096, "test: 1 byte per token")
    n = len(prompts)
    reqs = Requests(np.zeros(n), np.array(prompts, dtype=np.int64), np.array(outputs, dtype=np.int64))
    sched = Scheduler(reqs, pool, SchedulerConfig(budget, 256, admit_full_prompt=full))
    sched.waiting.extend(range(n))
    sched.arrived = n
    return sched


def _admitted_at(sched: Scheduler, i: int, steps: int) -> int | None:
    """The 1-based step whose plan first runs request i (committed), stepping one step at a time (no decode blocks)."""
    for step in range(1, steps + 1):
        plan = sched.schedule()
        started = sched.ids[plan.chunk_pos].tolist()
        sched.commit(plan, float(step))
        if i in started:
            return step
    return None


def test_a_prompt_whose_first_chunk_fits_but_whole_does_not_waits():
    """A 256-byte pool, 64 tokens a step; r0 = 100 + 50 tokens, r1 = 150 + 10, both at 0.
    Step 1: r0's chunk of 64 (64 bytes). Step 2: r0's last 36 (it holds 112), 28 tokens of budget left: r1's first
    chunk needs 32 bytes of the 144 free, its whole prompt seq[150] = 160 > 144. The old rule admits it at step 2;
    then step 3 runs its 63 more (96 held, 208 used) and step 4 its last 59 would take it to 160 with r0's 112: 272 >
    256, so r1 is preempted. Under vLLM 0.24's rule r1 waits while r0 holds more than 256 - 160 = 96 bytes (r0 never
    does less than 112 before it ends): r0 emits its first token at step 2 and its 49 others at steps 3-51, so r1
    starts at step 52, with no preemption."""
    old = _scheduler(256, False, [100, 150], [50, 10])
    assert _admitted_at(old, 1, 10) == 2
    old.commit(old.schedule(), 3.0)  # step 3: r0's decode beside r1's 63
    plan = old.schedule()  # step 4
    assert old.preemptions == 1 and len(plan.chunk_pos) == 0 and old.running == [0]
    new = _scheduler(256, True, [100, 150], [50, 10])
    assert _admitted_at(new, 1, 60) == 52
    assert new.preemptions == 0


def test_a_preempted_request_needs_room_for_the_tokens_it_had_generated():
    """r0 = 100 + 50, preempted after 40 tokens: it resumes with 140 known tokens, seq[140] = 144 bytes, in a pool of
    128. Its first chunk (64 tokens, 64 bytes) fits: the old rule takes it; vLLM 0.24's asks for all 144 and waits."""
    for full, chunks in ((False, [64]), (True, [])):
        sched = _scheduler(128, full, [100], [50])
        sched.generated[0] = 40
        plan = sched.schedule()
        assert (plan.chunk_tokens.tolist() if plan is not None else []) == chunks


def test_first_chunk_admission_is_unchanged_where_the_whole_prompt_fits():
    """A pool of 4,096: both rules admit r0 (64) then, at step 2, r1's 28 tokens beside r0's last 36."""
    for full in (False, True):
        sched = _scheduler(4096, full, [100, 150], [50, 10])
        assert _admitted_at(sched, 1, 5) == 2


def test_vllm_admits_on_the_whole_prompt_from_0_19():
    """The vLLM profile (its time profile's release, 0.24.0) gates on the whole prompt, as every release from 0.19.0
    does (scheduler_reserve_full_isl, default True, first in the 0.19.0 wheel's vllm/config/scheduler.py lines
    139-143; absent from 0.18.1's); the published records' releases (0.9-0.11) and the other engines on the first
    chunk."""
    h200 = load_hardware("H200")
    assert scheduling("vllm", h200).admit_full_prompt
    assert SchedulerConfig.of(scheduling("vllm", h200)).admit_full_prompt
    for engine in ("ideal", "sglang", "trtllm", "llamacpp"):
        assert not SchedulerConfig.of(scheduling(engine, h200)).admit_full_prompt
    assert [vllm_full_prompt_admission(r) for r in ("0.9.1", "0.11.0", "0.18.1", "0.19.0", "0.23.0", "0.24.0",
                                                     "0.25.1", None)] == [False, False, False, True, True, True, True,
                                                                          True]
