"""The device as it ran one case: the on-chip rates at the SM clock recorded while the case was timed.

A results row may carry "clocks" (validate.common.clocks: the median SM clock nvidia-smi reported while the case
was timed). The GPU lowers its SM clock when a kernel would draw more than the board's power limit (700 W on the
H100 SXM and the H200): on 2026-11-23 the AQUA-KV grid ran at 1605-1980 MHz on the H100 and 1620-1980 on the H200,
the heavy XQuant cases at 1730-1890 on the H100, every quantized-attention case at 1980
(validate/results/experiments/nvidia-h{100,200}-clocked.json). An on-chip rate is a number of operations per SM per
clock times the clock, so the rates that the ceilings family measured at the boost clock (ONCHIP_AT_BOOST: the
ALU/FMA/XU pipes, the dispatch, shared memory; validate.ops.ceilings.onchip ran them at 1980 MHz,
validate/notes/2026-11-23-session6-device-runs.md) scale by f_case / f_boost, and so does the clock that turns a
chain's cycles into seconds
(hardware.sm_clock_hz). DRAM bandwidth does not (HBM has its own clock). The tensor-core rates run at a clock of
their own: the power limit lowers it under tensor load. Read inside the GPU (session 9,
validate/results/experiments/nvidia-h{100,200}-wgmma-probe.json), every wgmma row ran at its full m64nNk16 rate of
4096 FLOP per SM per clock within 1-9 % at its own probe clock: 1.49-1.75 GHz on the H100, 1.53-1.74 on the H200
(nvidia-smi said 1575-1965 and 1710-1965), and mma.sync at 1834 / 1786 MHz (the on-chip run, where the ALU, FMA, XU
and shared-memory rows read 1974-1980: measured at the boost clock as ONCHIP_AT_BOOST assumes). So each measured
tensor rate with a recorded clock (TENSOR_CLOCKS: measured.wgmma_clock_hz per shape, measured.mma_sync_clock_hz)
is rescaled by f_case / f_measured, above 1 where a case runs faster than its microbenchmark did (a light decode at
1.86 GHz against a wgmma row at 1.6). The GEMM ceilings (gemm_flops_per_s: the planner's sustained rate of large
GEMMs at 1.27-1.41 GHz under the power limit) are not rescaled: structured kernels take their wgmma / mma.sync
rates, and a case without structure runs no measured clock.

Which clock: nvidia-smi's reading is not the clock the SMs run at. `validate bench --probe-clock` reads it inside
the GPU (validate.common.clocks.probe_mhz: %clock64 over %globaltimer on a side stream while the case's graph
replays). On the H100 (validate/results/experiments/nvidia-h100-probe.json) the probe read 1858-1866 MHz where
nvidia-smi said 1980 (light XQuant and quantized-attention cases, 128-510 W), and 1788-1837 where it said 1815-1920
(the heavy XQuant cases): the effective clocks differ less between cases than the readings do, as the H100's and
the H200's equal times of the same cases had said. So a row's "probe_mhz" is used where it has one, and nvidia-smi's
"sm_mhz" only for rows timed before the probe existed.

Without a recorded clock (every row of a bench before validate.common.clocks) the spec is used as it is: the
boost clock. The L2 read rate (measured.l2_bytes_per_s) is not rescaled: like DRAM's, it is taken in bytes/s as the
ceilings family measured it (validate.ops.ceilings.l2; whether Hopper's L2 runs in the SMs' clock domain is not
measured here).
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


def tensor_rates(measured, hz: float) -> dict:
    """The measured tensor-core rates that have a recorded clock, rescaled from it to `hz` (module docstring):
    {"wgmma_flops_per_s": {shape: rate x hz / wgmma_clock_hz[shape], ...}, "mma_sync_flops_per_s": rate x hz /
    mma_sync_clock_hz}, each only where both the rate and its clock are recorded; {} when none is."""
    out = {}
    clocks = measured.wgmma_clock_hz
    if clocks and measured.wgmma_flops_per_s:
        out["wgmma_flops_per_s"] = {k: v * hz / clocks[k] if k in clocks else v
                                    for k, v in measured.wgmma_flops_per_s.items()}
    if measured.mma_sync_clock_hz and measured.mma_sync_flops_per_s:
        out["mma_sync_flops_per_s"] = measured.mma_sync_flops_per_s * hz / measured.mma_sync_clock_hz
    return out


def at_case_clock(hardware, row: dict):
    """`hardware` as it ran `row`: sm_clock_hz and the measured ONCHIP_AT_BOOST rates times `scale`, and the tensor
    rates with a recorded clock at the case's clock (`tensor_rates`); the spec itself without a recorded case
    clock, or where nothing changes."""
    mhz = case_mhz(row)
    if mhz is None or not hardware.sm_clock_hz:
        return hardware
    s = scale(hardware, row)
    update, rates = {}, {}
    if s < 1.0:
        update["sm_clock_hz"] = hardware.sm_clock_hz * s
    m = hardware.measured
    if m is not None:
        if s < 1.0:
            rates = {k: getattr(m, k) * s for k in ONCHIP_AT_BOOST if getattr(m, k)}
        rates.update(tensor_rates(m, min(mhz * 1e6, hardware.sm_clock_hz)))
        if rates:
            update["measured"] = m.model_copy(update=rates)
    return hardware.model_copy(update=update) if update else hardware
