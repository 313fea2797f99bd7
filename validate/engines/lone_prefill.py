"""The offline prefill case at the clock it runs at: lat.py's and lat_sglang.py's prefill, one prompt's generate(out=1)
three times back to back after the decode cases, each a burst of tens to hundreds of milliseconds.

The planner prices GEMMs and prefill attention at the sustained, power-capped rate (Roofline.steady_state): steps back
to back for longer than the device's sustained_after_s (the H200: 1.6 s, the issue-13 probe's settling time of
back-to-back GEMMs). A prefill case is not such a phase: its calls, at the sustained rate, last
CALLS x prefill_time < sustained_after_s for every prefill the cases hold (the H200's longest, Llama-3.1-8B at 8,192
tokens: 3 x 0.23 s), after decode cases whose GEMMs are memory-bound. micro6 / micro7 (validate/notes/
2026-11-29-micro6-duty.md) timed prefill-sized GEMM bursts at the burst rate up to duty 0.5 and 100-400 ms bursts
between the two (714-688 TFLOP/s); the GEMMs alone of micro4 and SGLang run 4 ran at the burst rate
(validate/engines/gemm_hidden.py). So a case whose calls stay under sustained_after_s is priced at the burst rates
(costmodel.device.burst_options, as serving.clock prices a light served run); a longer one keeps the steady state.
"""

from __future__ import annotations

CALLS = 3  # lat.py / lat_sglang.py: timed(1, P, 1, 3), the median of three calls


def lone_prefill_s(model, hardware, workload, prompt: int, method=None) -> float:
    """Seconds of one prompt's prefill as the offline case times it (PhaseModel.prefill_time at B 1), at the burst
    rates when CALLS such prefills at the steady state stay under the device's sustained_after_s."""
    from roofline.costmodel.device import burst_options, roofline_for
    from roofline.engines.timing import engine_options
    from roofline.methods.registry import parse_method
    from roofline.planner.phases import PhaseModel

    method = method or parse_method("bf16")
    steady = float(PhaseModel.build(model, hardware, workload, method).prefill_time(1, prompt))
    settle = hardware.measured.sustained_after_s if hardware.measured else None
    options = burst_options(hardware, engine_options(workload.engine, hardware))
    if not settle or options is None or CALLS * steady >= settle:
        return steady
    roof = roofline_for(hardware, tp=workload.tp, options=options)
    return float(PhaseModel.build(model, hardware, workload, method, roofline=roof).prefill_time(1, prompt))
