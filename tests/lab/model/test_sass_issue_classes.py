"""Issue classes of a structured kernel (issue 14 item 4, session 6): SASS opcodes by the pipe that times them
(validate.common.sass.issue_class), their time summed at each pipe's rate (validate.model.kernel_structure:
issue_cycles, extra_int_ops, class_rates) and the ceilings family's benchmarks of the rates the model takes from
the CUDA guide's cc 9.0 throughput table until measured; the wgmma benchmarks' fields (wgmma_scale, wgmma_serial,
compose). Expectations by hand."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from validate.common.sass import ISSUE_CLASSES, executed_counts, issue_class, issue_classes
from validate.model import kernel_structure as ks
from validate.model.hardware import load_hardware

ROOT = Path(__file__).resolve().parents[3]


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


def test_issue_cycles_take_the_longest_pipe_or_the_dispatch() -> None:
    # per scheduler (lanes per SM / 4): ALU (int, f2fp, i2f) 16, FMA 32, XU (f2i, mufu) 4, dispatch 32 per clock
    rates = {"int": 16, "fp": 32, "f2fp": 16, "i2f": 16, "f2i": 4, "mufu": 4, "dispatch": 32}
    alu_bound = {"int": 10, "fp": 6, "f2fp": 2, "i2f": 0, "f2i": 0, "mufu": 1, "dispatch": 5}
    # ALU (10 + 2) x 2 = 24, FMA 6, XU 8, dispatch 24 instructions x 1 = 24
    assert ks.pipe_cycles(alu_bound, rates) == {"alu": 24, "fma": 6, "xu": 8, "dispatch": 24}
    assert ks.issue_cycles(alu_bound, rates) == 24
    # 4 int + 8 fp + 10 others: ALU 8, FMA 8, dispatch 22 (the pipes overlap under the dispatch)
    assert ks.issue_cycles({"int": 4, "fp": 8, "dispatch": 10}, rates) == 22
    assert ks.issue_cycles({"mufu": 5, "dispatch": 1}, rates) == 40  # XU: 5 x 32 / 4
    # 1 LOP3 : 2 FFMA at the datasheet rates: 3 instructions in 3 clocks (dispatch), not the summed pipes' 4
    assert ks.issue_cycles({"int": 1, "fp": 2}, rates) == 3


def test_fused_xquant_step_is_dispatch_bound_at_the_measured_rates() -> None:
    hw = load_hardware("H100-SXM")
    m, clocks = hw.measured, 4 * hw.sm_count * hw.sm_clock_hz  # scheduler-clocks per second of the device
    c = ks.kernels("xquant")["kernels"]["fused"]["executed"]["classes"]
    rates = {k: v / clocks for k, v in ks.class_rates(hw).items()}  # lanes per scheduler per clock
    dispatch = 12138 * 32 * clocks / 3.044e13  # every instruction at the measured mixed_issue rate: ~13.3k clocks
    alu = (5058 * 32 / m.int32_ops_per_s + 580 * 32 / 1.605e13 + 40 * 32 / 1.628e13) * clocks  # ~11.6k
    assert sum(c.values()) == 12138
    assert ks.issue_cycles(c, rates) == pytest.approx(dispatch) and 13_000 < dispatch < 13_600
    assert ks.pipe_cycles(c, rates)["alu"] == pytest.approx(alu) and alu < dispatch
    # the op's fields carry that time: vector FLOPs at the FP32 rate + integer lane-ops at the int32 rate = T
    got = ks.issue_fields({"classes": c}, 3, hw)
    t = got["vector_flops"] / m.fp32_flops_per_s + got["int_ops"] / m.int32_ops_per_s
    assert t == pytest.approx(3 * 12138 * 32 / 3.044e13)
    assert got["vector_flops"] == 3 * c["fp"] * 32 * 2


def test_wgmma_scale_and_composition_follow_the_measured_fields() -> None:
    full = load_hardware("H100-SXM")  # its measured section has both fields: clear them to start from nothing
    hw = full.model_copy(update={"measured": full.measured.model_copy(update={"wgmma_flops_per_s": {},
                                                                               "wgmma_issue_serial": {}})})
    s = {"warps": 4, "registers": 255, "shared_bytes": 79872,  # the fused kernel: 2 programs per SM (regs, smem)
         "executed": {"hgmma_flops": 400, "hgmma_shapes": {"n64.rs": 100, "n128.rs": 300}}}
    assert ks.resident_programs(s, hw) == 2
    assert ks.wgmma_scale(s, hw, 1e15) == 1.0  # nothing measured: the GEMM rate
    m = hw.measured.model_copy(update={"wgmma_flops_per_s": {"n64.rs.p1": 5e14, "n128.rs.p2": 2.5e14,
                                                             "n128.rs.p4": 1e15}})
    got = hw.model_copy(update={"measured": m})
    # n64 at p1 (the largest measured p <= 2): peak / rate 2; n128 at p2: 4 -> (100 x 2 + 300 x 4) / 400
    assert ks.wgmma_scale(s, got, 1e15) == pytest.approx(3.5)
    assert ks.wgmma_serial(s, got) == 1.0
    got = got.model_copy(update={"measured": m.model_copy(update={"wgmma_issue_serial": {1: 0.2, 2: 0.5}})})
    assert ks.wgmma_serial(s, got) == 0.5
    fields = {"matmul_flops": 10.0, "vector_flops": 4.0, "int_ops": 6.0}
    # W 3 s > I 1 s: the issue part scaled by the serial share; I > W: the matmul part
    assert ks.compose(fields, 3.0, 1.0, 0.5) == {"matmul_flops": 10.0, "vector_flops": 2.0, "int_ops": 3.0}
    assert ks.compose(fields, 1.0, 3.0, 0.25) == {"matmul_flops": 2.5, "vector_flops": 4.0, "int_ops": 6.0}
    assert ks.compose(fields, 1.0, 3.0, 1.0) == fields


def test_committed_structures_classify_every_instruction() -> None:
    xq, qa = ks.kernels("xquant"), ks.kernels("quant_attention")
    for k in xq["kernels"].values():
        c = k["executed"]["classes"]
        assert set(c) == set(ISSUE_CLASSES) and sum(c.values()) == k["executed"]["instructions"]
        assert (c["int"], c["fp"]) == (k["executed"]["int"], k["executed"]["fp"])
    for k in qa["kernels"].values():
        assert sum(k["loop"]["classes"].values()) == k["loop"]["instructions"]


def test_datasheet_fallback_follows_the_measured_pipes() -> None:
    # F2I and MUFU: the XU pipe, the table's 16 committed before the run (issue-classes-predicted.json); F2FP and
    # I2FP: the ALU pipe's 64, the rate they measured (61.4, 62.3 per SM per clock: nvidia-h100-onchip-s6.json)
    doc = json.loads((ROOT / "validate" / "results" / "experiments" / "issue-classes-predicted.json").read_text())
    run = json.loads((ROOT / "validate" / "results" / "experiments" / "nvidia-h100-onchip-s6.json").read_text())
    for device, spec in doc["devices"].items():
        scale = spec["sm_count"] * spec["sm_clock_hz"]
        for bench, cls in (("cvt_f2i", "f2i"), ("mufu_issue", "mufu")):
            assert spec[f"{bench}_ops_per_s"] == pytest.approx(ks.CLASS_LANES_PER_CLOCK_SM[cls] * scale), device
    for bench, cls in (("cvt_f2fp", "f2fp"), ("cvt_i2f", "i2f"), ("cvt_f2i", "f2i"), ("mufu_issue", "mufu")):
        assert run["benchmarks"][bench]["per_sm_per_clock"] == pytest.approx(ks.CLASS_LANES_PER_CLOCK_SM[cls],
                                                                             rel=0.05)
    # the mixed 1 lop3 : 2 fma loop: 91 % of the dispatch's 128 (3 of its 99 instructions per iteration uncounted)
    assert run["benchmarks"]["mixed_issue"]["per_sm_per_clock"] == pytest.approx(
        ks.CLASS_LANES_PER_CLOCK_SM["dispatch"], rel=0.1)
    hw = load_hardware("H100-SXM")
    assert ks.class_rates(hw)["dispatch"] == pytest.approx(run["benchmarks"]["mixed_issue"]["rate_per_s"], rel=1e-3)
    bare = hw.model_copy(update={"measured": hw.measured.model_copy(update={"dispatch_ops_per_s": None})})
    assert ks.class_rates(bare)["dispatch"] == pytest.approx(128 * hw.sm_count * hw.sm_clock_hz)


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


def test_wgmma_benchmarks_count_what_they_time() -> None:
    from validate.ops.ceilings import wgmma

    assert wgmma.ALU_ASM.count("lop3.b32") == wgmma.ALU_OPS == 8 * 20
    cfgs = wgmma.configs()
    # m64 n64 k128: 8 HGMMA.64x64x16 per step (the fused loop's K remat trip); n256 only at 1 and 2 programs per SM
    assert wgmma.flops_per_step(cfgs["wgmma_n64_rs_p2"]) == 2 * 64 * 64 * 128 == 8 * 2 * 64 * 64 * 16
    assert wgmma.flops_per_step(cfgs["overlap_alu_p4"]) == 0
    assert "wgmma_n256_rs_p2" in cfgs and "wgmma_n256_rs_p4" not in cfgs and "wgmma_n128_ss_p4" in cfgs
    # serial share: W 2, I 1 -> both 3 (they add): 1; both 2 (I hidden): 0; both 2.5: 0.5; clipped
    assert [wgmma.serial_share(2.0, 1.0, t) for t in (3.0, 2.0, 2.5, 3.5, 1.9)] == [1.0, 0.0, 0.5, 1.0, 0.0]


def test_device_scripts_refuse_bad_arguments_and_a_missing_gpu(capsys) -> None:
    # validate.common.harness.script_args, shared by the on-chip, wgmma and wgmma-latency scripts: one line on stderr
    # and exit 2 for wrong arguments, and for no CUDA GPU (this machine) or Triton's interpreter
    from validate.ops.ceilings import onchip, wgmma, wgmma_latency

    assert onchip.main([]) == 2 and wgmma.main(["a.json", "b.json", "--quick"]) == 2
    assert wgmma_latency.main(["a.json", "--quick"]) == 2  # takes no --quick
    usage = capsys.readouterr().err.splitlines()
    assert usage == ["usage: python -m validate.ops.ceilings.onchip OUT.json [--quick]",
                     "usage: python -m validate.ops.ceilings.wgmma OUT.json [--quick]",
                     "usage: python -m validate.ops.ceilings.wgmma_latency OUT.json"]
    import torch

    if torch.cuda.is_available():
        return  # the rest is the no-GPU refusal
    assert onchip.main(["out.json", "--quick"]) == 2 and wgmma_latency.main(["out.json"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "onchip: needs a CUDA GPU (inline PTX does not run under TRITON_INTERPRET)",
        "wgmma_latency: needs a CUDA GPU with wgmma (sm_90)"]
