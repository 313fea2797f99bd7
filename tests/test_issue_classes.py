"""Issue classes of a structured kernel (issue 14 item 4, session 6): SASS opcodes by the pipe that times them
(validate.common.sass.issue_class), their time summed at each pipe's rate (roofline.validation.kernel_structure:
issue_cycles, extra_int_ops, class_rates) and the ceilings family's benchmarks of the rates the model takes from
the CUDA guide's cc 9.0 throughput table until measured. Expectations by hand."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from roofline.catalogue import load_hardware
from roofline.validation import kernel_structure as ks
from validate.common.sass import ISSUE_CLASSES, executed_counts, issue_class, issue_classes

ROOT = Path(__file__).resolve().parents[1]


def _ins(addr: int, text: str) -> str:
    return f"        /*{addr:04x}*/   {text} ;   /* 0x0000000000000000 */\n                   /* 0x{0:016x} */\n"


def test_opcodes_by_issue_class() -> None:
    got = {op: issue_class(op) for op in ("LOP3.LUT", "IMAD.MOV.U32", "FFMA.FTZ", "HADD2.F32", "F2FP.BF16.F32.PACK_AB",
                                          "I2FP.F32.S32", "I2F.U32", "F2I.FTZ.NTZ", "FRND.FTZ.FLOOR", "MUFU.EX2",
                                          "UIADD3", "HGMMA.64x64x16.F32.BF16", "LDSM.16.M88.4", "BAR.SYNC", "MOV")}
    assert got == {"LOP3.LUT": "int", "IMAD.MOV.U32": "int", "FFMA.FTZ": "fp", "HADD2.F32": "fp",
                   "F2FP.BF16.F32.PACK_AB": "f2fp", "I2FP.F32.S32": "i2f", "I2F.U32": "i2f", "F2I.FTZ.NTZ": "f2i",
                   "FRND.FTZ.FLOOR": "f2i", "MUFU.EX2": "mufu", "UIADD3": "dispatch",
                   "HGMMA.64x64x16.F32.BF16": "dispatch", "LDSM.16.M88.4": "dispatch", "BAR.SYNC": "dispatch",
                   "MOV": "dispatch"}
    assert issue_classes(Counter({"LOP3.LUT": 3, "F2FP.BF16.F32.PACK_AB": 2, "UMOV": 1})) == {
        "int": 3, "fp": 0, "f2fp": 2, "i2f": 0, "f2i": 0, "mufu": 0, "dispatch": 1}


def test_executed_classes_follow_the_trips() -> None:
    # a loop 0x10..0x40 (F2FP, I2FP, MUFU, back edge) inside the kernel: x 4 trips; MOV and EXIT once
    sass = "".join(_ins(a, t) for a, t in ((0x00, "MOV R1, c[0x0][0x28]"), (0x10, "F2FP.BF16.F32.PACK_AB R2, R3, R4"),
                                            (0x20, "I2FP.F32.S32 R5, R5"), (0x30, "MUFU.EX2 R6, R6"),
                                            (0x40, "@P0 BRA 0x10"), (0x50, "EXIT")))
    got = executed_counts(sass, trips=4)
    assert got["classes"] == {"int": 0, "fp": 0, "f2fp": 4, "i2f": 4, "f2i": 0, "mufu": 4, "dispatch": 2 + 4}
    assert sum(got["classes"].values()) == got["instructions"] == 2 + 4 * 4


def test_issue_cycles_sum_each_class_at_its_pipe() -> None:
    # per scheduler (lanes per SM / 4): int 16, fp 32, conversions and MUFU 4, dispatch 32 lanes per clock
    rates = {"int": 16, "fp": 32, "f2fp": 4, "i2f": 4, "f2i": 4, "mufu": 4, "dispatch": 32}
    classes = {"int": 10, "fp": 6, "f2fp": 2, "i2f": 0, "f2i": 0, "mufu": 1, "dispatch": 5}
    assert ks.issue_cycles(classes, rates) == 10 * 2 + 6 * 1 + 2 * 8 + 1 * 8 + 5 * 1
    # never below the dispatch floor: one warp instruction per clock and scheduler
    assert ks.issue_cycles(classes, rates) >= sum(classes.values())


def test_extra_int_ops_without_and_with_hardware() -> None:
    counts = {"int": 10, "classes": {"int": 10, "fp": 6, "f2fp": 2, "i2f": 0, "f2i": 1, "mufu": 1, "dispatch": 5}}
    # the table's ratios to INT32 (64 lanes per SM per clock): a conversion or MUFU (16) = 4 integer instructions,
    # a dispatch slot (128) = 1/2: (2 + 1 + 1) x 32 x 4 + 5 x 32 / 2
    assert ks.extra_int_ops(counts) == pytest.approx(4 * 32 * 4 + 5 * 16)
    assert ks.extra_int_ops({"int": 10}) == 0.0  # a structure without classes: as before
    hw = load_hardware("H100-SXM")
    rates = ks.class_rates(hw)
    assert rates["f2fp"] == pytest.approx(16 * hw.sm_count * hw.sm_clock_hz)  # not measured yet: the table
    measured = hw.model_copy(update={"measured": hw.measured.model_copy(update={"f2fp_ops_per_s": 1.6e13})})
    assert ks.class_rates(measured)["f2fp"] == 1.6e13 and ks.class_rates(measured)["int"] == rates["int"]
    s = {"warps": 2, "executed": {**counts, "fp": 6, "hgmma_flops": 0, "hmma_flops": 0, "wavefronts": 0}}
    assert ks.executed_work(s, steps=3, hmma_scale=1.0)["int_ops"] == pytest.approx(6 * (10 * 32 + 4 * 128 + 80))


def test_committed_structures_classify_every_instruction() -> None:
    xq, qa = ks.kernels("xquant"), ks.kernels("quant_attention")
    for k in xq["kernels"].values():
        c = k["executed"]["classes"]
        assert set(c) == set(ISSUE_CLASSES) and sum(c.values()) == k["executed"]["instructions"]
        assert (c["int"], c["fp"]) == (k["executed"]["int"], k["executed"]["fp"])
    for k in qa["kernels"].values():
        assert sum(k["loop"]["classes"].values()) == k["loop"]["instructions"]


def test_datasheet_fallback_is_the_committed_prediction() -> None:
    # the rates the model uses until measured are the ones committed before the benchmarks ran
    doc = json.loads((ROOT / "validate" / "results" / "experiments" / "issue-classes-predicted.json").read_text())
    for device, spec in doc["devices"].items():
        scale = spec["sm_count"] * spec["sm_clock_hz"]
        for bench, cls in (("cvt_f2fp", "f2fp"), ("cvt_i2f", "i2f"), ("cvt_f2i", "f2i"), ("mufu_issue", "mufu")):
            assert spec[f"{bench}_ops_per_s"] == pytest.approx(ks.CLASS_LANES_PER_CLOCK_SM[cls] * scale), device
        # mixed 1 lop3 : 2 fma per scheduler, summed: 4 clocks per 3 warp instructions = 96 lanes/clock/SM
        rates = {"int": 16, "fp": 32}
        assert 3 * 32 / ks.issue_cycles({"int": 1, "fp": 2}, rates) * 4 * scale == pytest.approx(
            spec["mixed_issue_ops_per_s"])


def test_onchip_benchmarks_count_what_they_time() -> None:
    from validate.ops.ceilings import onchip

    doc = json.loads((ROOT / "validate" / "results" / "experiments" / "issue-classes-predicted.json").read_text())
    spec = doc["devices"]["H100-SXM"]
    for name, op in (("cvt_f2fp", "cvt.rn.bf16x2.f32"), ("cvt_i2f", "cvt.rn.f32.s32"), ("cvt_f2i", "cvt.rzi.s32.f32"),
                     ("mufu_issue", "ex2.approx.ftz.f32")):
        # 8 chains x CVT_UNROLL per iteration, all of them counted as the work
        assert onchip.conversion_asm(name).count(op) == 8 * onchip.CVT_UNROLL == onchip.work_per_iter(name)
        assert onchip.PER_CLOCK[name] * spec["sm_count"] * spec["sm_clock_hz"] == pytest.approx(
            spec[f"{name}_ops_per_s"])
    body = onchip.MIX_ASM
    assert body.count("lop3.b32") == 8 * onchip.MIX_UNROLL and body.count("fma.rn.f32") == 16 * onchip.MIX_UNROLL
    assert onchip.work_per_iter("mixed_issue") == 24 * onchip.MIX_UNROLL
    assert onchip.PER_CLOCK["mixed_issue_w2"] * spec["sm_count"] * spec["sm_clock_hz"] == pytest.approx(
        spec["mixed_issue_w2_ops_per_s"])
