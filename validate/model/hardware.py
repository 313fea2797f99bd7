"""The lab's spec extension: the measured rates only the kernel micro-architecture model reads.

The planner's hardware spec (roofline.specs.hardware.Measured) holds what the planner reads: bandwidth curve,
GEMM / attention rates, kernel times, shared-memory, L2, integer and FP32 rates, memory. The model of this
project's own Triton kernels down to their SASS issue classes also needs the rates of the conversion, MUFU and
dispatch pipes, of warp-level mma.sync and of wgmma by shape, the SM clock each tensor rate ran at, and how
wgmma holds the issue station (validate.ops.ceilings.onchip, .wgmma, .mva_micro). Those live here, as one data
file per catalogue device (validate/hardware/<name>.yaml), and `load_hardware` returns the catalogue's spec with
its measured section extended by them (KernelMeasured), which is what every lab reader takes.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field, PositiveFloat

from roofline.catalogue import load_hardware as load_catalogue_hardware
from roofline.catalogue.loading import load_spec
from roofline.specs import bounds
from roofline.specs.base import Spec
from roofline.specs.hardware import Hardware, Measured

KERNEL_DIR = Path(__file__).resolve().parent.parent / "hardware"
KERNEL_BOUNDS = {name: bounds.PEAK for name in ("mma_sync_flops_per_s", "f2fp_ops_per_s", "i2f_ops_per_s",
                                                "f2i_ops_per_s", "mufu_ops_per_s", "dispatch_ops_per_s")}


class KernelFields(Spec):
    """The kernel-only measured rates (ceilings microbenchmarks of validate.ops.ceilings)."""

    BOUNDS: ClassVar = KERNEL_BOUNDS

    mma_sync_flops_per_s: PositiveFloat | None = Field(
        None, description="bf16 tensor-core rate of warp-level mma.sync (HMMA, what a Triton tl.dot of too few rows "
        "for wgmma compiles to), FLOP/s (ceilings microbenchmark 'mma_sync').")
    f2fp_ops_per_s: PositiveFloat | None = Field(
        None, description="fp32 -> bf16x2 pack conversions (cvt.rn.bf16x2.f32, SASS F2FP), thread instructions/s "
        "(ceilings microbenchmark 'cvt_f2fp').")
    i2f_ops_per_s: PositiveFloat | None = Field(
        None, description="int32 -> fp32 conversions (cvt.rn.f32.s32, SASS I2FP), thread instructions/s (ceilings "
        "microbenchmark 'cvt_i2f').")
    f2i_ops_per_s: PositiveFloat | None = Field(
        None, description="fp32 -> int32 conversions (cvt.rzi.s32.f32, SASS F2I; also timing F2F and FRND), thread "
        "instructions/s (ceilings microbenchmark 'cvt_f2i').")
    mufu_ops_per_s: PositiveFloat | None = Field(
        None, description="Special-function unit rate (ex2.approx.ftz.f32, SASS MUFU.EX2), thread instructions/s "
        "(ceilings microbenchmark 'mufu_issue').")
    dispatch_ops_per_s: PositiveFloat | None = Field(
        None, description="Instruction dispatch rate, thread instructions/s: 1 lop3 : 2 fma.rn.f32 of independent "
        "chains, neither pipe busy enough to bind (ceilings microbenchmark 'mixed_issue'); the CUDA guide's one warp "
        "instruction per clock per scheduler is 128 per SM per clock.")
    wgmma_flops_per_s: dict[str, PositiveFloat] = Field(
        default_factory=dict, description="wgmma FLOP/s of one warpgroup per program that waits on each dot, by "
        "'n<N>.<rs|ss>.p<programs per SM>' (m64nNk16 bf16, A from registers or shared memory; ceilings "
        "microbenchmark 'wgmma_*', validate.ops.ceilings.wgmma).")
    wgmma_clock_hz: dict[str, Annotated[float, Field(ge=1e8, le=1e10)]] = Field(
        default_factory=dict, description="SM clock each wgmma_flops_per_s key was measured at, Hz, read inside the "
        "GPU while it ran (validate.common.clocks.probe_mhz): the tensor core runs its full m64nNk16 rate per clock "
        "at a clock the board's power limit lowers; validate.model.case_clock rescales each rate to a case's "
        "clock.")
    mma_sync_clock_hz: Annotated[float, Field(ge=1e8, le=1e10)] | None = Field(
        None, description="SM clock mma_sync_flops_per_s was measured at, Hz (the probe, as wgmma_clock_hz).")
    wgmma_issue_serial: dict[int, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict, description="By programs per SM: (t_both - max(t_W, t_I)) / min(t_W, t_I) of a loop "
        "of W wgmma (waited on) and I integer instructions per step against each alone (ceilings microbenchmark "
        "'overlap_*'): 1 when the two add, 0 when they overlap fully.")
    wgmma_issue_block: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None, description="Share of a warpgroup's wgmma tensor-core cycles during which the SM issues no other "
        "warp's instruction: the b for which the contention model (validate.model.contention, issue demand "
        "I + b W, tensor (1 - b) W) gives the overlap loop's cycles per step at 2 and 4 programs per SM, each row "
        "read at the SM clock recorded while it ran (ceilings microbenchmark 'overlap_*', "
        "validate.ops.ceilings.mva_micro --block).")

class KernelRates(KernelFields):
    """One data file of validate/hardware/: the catalogue device it extends and where its figures come from."""

    hardware: str = Field(description="Catalogue name of the device these rates were measured on.")
    source: str = Field(description="Committed results files the figures come from.")


class KernelMeasured(Measured, KernelFields):
    """A catalogue device's measured section with the kernel-only rates beside it (what the lab's model reads)."""

    BOUNDS: ClassVar = {**bounds.MEASURED, **KERNEL_BOUNDS}


@cache
def kernel_rates(name: str) -> KernelRates | None:
    """The kernel-only rates of catalogue device `name` (validate/hardware/<name>.yaml), None when it has none."""
    path = KERNEL_DIR / f"{name}.yaml"
    if not path.is_file():
        return None
    rates = load_spec(KernelRates, path)
    if rates.hardware != name:
        raise ValueError(f"{path.name}: hardware: {rates.hardware!r} is not the file's device {name!r}")
    return rates


def extend(hardware: Hardware) -> Hardware:
    """`hardware` with its measured section extended by its device's kernel-only rates (itself when it has no
    measured section, no data file, or is extended already)."""
    m = hardware.measured
    if m is None or isinstance(m, KernelMeasured):
        return hardware
    rates = kernel_rates(hardware.name)
    fields = rates.model_dump(exclude={"hardware", "source"}, exclude_unset=True) if rates is not None else {}
    measured = KernelMeasured.model_validate({**m.model_dump(exclude_unset=True), **fields})
    return hardware.model_copy(update={"measured": measured})


def load_hardware(ref: str) -> Hardware:
    """roofline.catalogue.load_hardware(ref), extended with the device's kernel-only rates (`extend`)."""
    return extend(load_catalogue_hardware(ref))
