"""A Simulator under an engine's scheduling profile, as `roofline simulate --engine` and the dashboard's Serving and
Fleet pages build it: the profile (roofline.engines.scheduling) with speculative decoding's changes
(with_speculative), and SGLang's running-request cap sized from the pool once the pool is known (its
`max_running_requests` default follows the KV pool's tokens: scheduling.sglang_max_running) unless the caller set
`max_num_seqs` itself. The tensor cores' clock follows each run's GEMM duty (Simulator.clock "duty",
serving.clock), in a fleet by its busiest replica (Fleet.run)."""

from __future__ import annotations

from dataclasses import replace

from roofline.engines.scheduling import EngineScheduling, scheduling, sglang_max_running, with_speculative
from roofline.serving.simulate import Simulator
from roofline.serving.speculative import Speculative


def engine_simulator(model, hardware, workload, method, max_tokens: int, profile: EngineScheduling,
                     speculative: Speculative | None = None, seqs_given: bool = False,
                     clock: str = "duty") -> Simulator:
    """The simulator of one method under `profile` (and `speculative`), SGLang's cap applied unless `seqs_given`;
    `clock` the tensor cores' (Simulator.clock: by default each run's own GEMM duty decides, serving.clock)."""
    if speculative is not None:
        profile = with_speculative(profile, speculative.method)
    sim = Simulator(model, hardware, workload, method, max_tokens=max_tokens, engine=profile,
                    speculative=speculative, clock=clock)
    if profile.engine == "sglang" and not seqs_given:
        pool_tokens = sim.pool.capacity_pages * sim.pool.page_tokens
        sim.set_engine(replace(profile, max_num_seqs=sglang_max_running(pool_tokens, max(max_tokens, 2))))
    return sim


def workload_simulator(model, hardware, workload, method, max_tokens: int, clock: str = "duty") -> Simulator:
    """The simulator of `workload.engine` with its defaults for this GPU (`vllm serve`'s entry point); the planner's
    ideal scheduler (no engine profile) for 'ideal'; `clock` as engine_simulator's."""
    if workload.engine == "ideal":
        return Simulator(model, hardware, workload, method, max_tokens=max_tokens, clock=clock)
    profile = scheduling(workload.engine, hardware, "api", workload.tp, context_len=max(max_tokens, 2),
                         host_speed=workload.host_speed)
    return engine_simulator(model, hardware, workload, method, max_tokens, profile, clock=clock)
