"""The device as it ran one case: the on-chip rates at the SM clock recorded while the case was timed.

A results row may carry "clocks" (validate.common.clocks: the median SM clock nvidia-smi reported while the case
was timed). The GPU lowers its SM clock when a kernel would draw more than the board's power limit (700 W on the
H100 SXM and the H200): on 2026-11-23 the AQUA-KV grid ran at 1605-1980 MHz on the H100 and 1620-1980 on the H200,
the heavy XQuant cases at 1730-1890 on the H100, every quantized-attention case at 1980
(validate/results/experiments/nvidia-h{100,200}-clocked.json). An on-chip rate is a number of operations per SM per
clock times the clock, so the rates that the ceilings family measured at the boost clock (ONCHIP_AT_BOOST: the
ALU/FMA/XU pipes, the dispatch, shared memory; validate.ops.ceilings.onchip ran them at 1980 MHz,
SESSION6.md) scale by f_case / f_boost, and so does the clock that turns a chain's cycles into seconds
(hardware.sm_clock_hz). DRAM bandwidth does not (HBM has its own clock). The tensor-core rates (wgmma
by shape, mma.sync, the GEMM ceilings) stay as measured: their microbenchmarks ran under tensor-core load at a
lowered clock of their own (the wgmma microbenchmark's samples above 550 W: 1.64 GHz on the H100), which was not
recorded per case.

Which clock: nvidia-smi's reading is not the clock the SMs run at. `validate bench --probe-clock` reads it inside
the GPU (validate.common.clocks.probe_mhz: %clock64 over %globaltimer on a side stream while the case's graph
replays). On the H100 (validate/results/experiments/nvidia-h100-probe.json) the probe read 1858-1866 MHz where
nvidia-smi said 1980 (light XQuant and quantized-attention cases, 128-510 W), and 1788-1837 where it said 1815-1920
(the heavy XQuant cases): the effective clocks differ less between cases than the readings do, as the H100's and
the H200's equal times of the same cases had said. So a row's "probe_mhz" is used where it has one, and nvidia-smi's
"sm_mhz" only for rows timed before the probe existed.

Without a recorded clock (every row of a bench before validate.common.clocks) the spec is used as it is: the
boost clock.
"""

from __future__ import annotations

ONCHIP_AT_BOOST = ("shared_memory_bytes_per_s", "int32_ops_per_s", "fp32_flops_per_s", "f2fp_ops_per_s",
                   "i2f_ops_per_s", "f2i_ops_per_s", "mufu_ops_per_s", "dispatch_ops_per_s")
STEP_MHZ = 15  # nvidia-smi's SM clock steps: a median between two steps is rounded to one (fewer spec copies)


def case_mhz(row: dict) -> float | None:
    """The SM clock (MHz) recorded while `row` was timed, rounded to STEP_MHZ: the probe's ("probe_mhz", read inside
    the GPU) where the row has one, else nvidia-smi's ("sm_mhz"); None when the row has neither."""
    clocks = row.get("clocks") or {}
    mhz = clocks.get("probe_mhz", clocks.get("sm_mhz"))
    if not isinstance(mhz, int | float) or isinstance(mhz, bool) or mhz <= 0:
        return None
    return round(mhz / STEP_MHZ) * STEP_MHZ


def scale(hardware, row: dict) -> float:
    """f_case / f_boost (at most 1) of `row` on `hardware` (hardware.sm_clock_hz is the boost clock); 1 without a
    recorded clock or a spec clock."""
    mhz = case_mhz(row)
    if mhz is None or not hardware.sm_clock_hz:
        return 1.0
    return min(1.0, mhz * 1e6 / hardware.sm_clock_hz)


def at_case_clock(hardware, row: dict):
    """`hardware` with sm_clock_hz and the measured ONCHIP_AT_BOOST rates times `scale` (the spec itself at 1)."""
    s = scale(hardware, row)
    if s >= 1.0:
        return hardware
    update = {"sm_clock_hz": hardware.sm_clock_hz * s}
    if hardware.measured is not None:
        rates = {k: getattr(hardware.measured, k) * s for k in ONCHIP_AT_BOOST if getattr(hardware.measured, k)}
        update["measured"] = hardware.measured.model_copy(update=rates)
    return hardware.model_copy(update=update)
