"""Hierarchical roofline from a kernel's structure (issue 14 item 4): the SASS loop counts, residency from registers
and shared memory, and the quant_attention prediction that uses them against the committed H100/H200 runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.validation.results_file import Case
from validate.common.sass import loop_counts, wavefronts
from validate.model import kernel_structure as ks
from validate.model.families import quant_attention as qa
from validate.model.hardware import load_hardware

RESULTS = Path(__file__).resolve().parents[3] / "validate" / "results"
SHAPES = [(8, 16384), (8, 65536), (8, 131072), (32, 16384), (32, 65536), (32, 131072)]


def _ins(addr: int, text: str, stall: int, wait: bool = False) -> str:
    """Two cuobjdump -sass lines of one instruction with `stall` cycles (bits 41-44) and a scoreboard wait mask."""
    word = (stall << 41) | ((1 << 52) if wait else 0)
    return f"        /*{addr:04x}*/   {text} ;   /* 0x0000000000000000 */\n                   /* 0x{word:016x} */\n"


def test_sass_loop_counts_by_hand() -> None:
    sass = (_ins(0x00, "MOV R1, c[0x0][0x28]", 1)
            + _ins(0x10, "LDSM.16.M88.4 R4, [R2]", 1)          # loop start: 4 wavefronts
            + _ins(0x20, "LDGSTS.E.64 [R3], desc[UR4][R6.64]", 2)   # 32 x 8 B = 256 B: 2 wavefronts
            + _ins(0x30, "LOP3.LUT R8, R4, 0x3, RZ, 0xc0, !PT", 4, wait=True)
            + _ins(0x40, "@P0 PRMT R9, R8, 0x7650, R9", 5)
            + _ins(0x50, "HFMA2 R10, R9, R11, R12", 4)
            + _ins(0x60, "HMMA.16816.F32 R12, R4, R10, R12", 6)
            + _ins(0x70, "@!P1 BRA 0x10", 7)
            + _ins(0x80, "EXIT", 1))
    got = loop_counts(sass)
    # classes: LOP3 + PRMT int, HFMA2 fp, LDSM, LDGSTS, HMMA and BRA one dispatch slot each
    assert got == {"instructions": 7, "int": 2, "fp": 1, "mma": 1, "wavefronts": 4 + 2, "stall_cycles": 29,
                   "waits": 1, "classes": {"int": 2, "fp": 1, "f2fp": 0, "i2f": 0, "f2i": 0, "mufu": 0, "dispatch": 4},
                   # the LDGSTS is the one global load; no spills; 7 instructions x 16 B of loop body
                   "ldl": 0, "stl": 0, "ldg": 1, "body_bytes": 7 * 16}
    assert [wavefronts(op) for op in ("LDS.U16", "LDS.64", "STS.128", "STSM.16.M88.2", "FFMA")] == [1, 2, 4, 2, 0]


def test_resident_programs_match_the_splits_the_launcher_chose() -> None:
    # tiled_launch picks the most splits whose B x H_kv x splits programs fit one wave of resident programs (floor):
    # so the committed num_splits bound each kernel's residency: (R - 1) x SMs < programs <= R x SMs
    hw = load_hardware("H200")
    doc = ks.kernels("quant_attention")
    cases = json.loads((RESULTS / "nvidia-h200.json").read_text())["cases"]
    for c in cases:
        p = c["params"]
        if c["family"] != "quant_attention" or p["batch"] != 8 or p["context"] != 131072:
            continue
        resident = ks.resident_programs(doc["kernels"][p["method"]], hw)
        programs = p["batch"] * p["num_kv_heads"] * c["num_splits"]
        assert (resident - 1) * hw.sm_count < programs <= resident * hw.sm_count, p["method"]
    # KIVI-2 by hand: 117 registers -> 3744 -> 3840 per warp x 4 warps = 15360 -> 4 programs (shared memory allows 7)
    assert ks.resident_programs({"registers": 117, "warps": 4, "shared_bytes": 30720}, hw) == 4


def test_kivi_structure_is_the_launched_qall_r128() -> None:
    # the committed structure is the kernel tiled_launch launches for KIVI (qall-r128), capped at 128 registers:
    # 128 x 32 = 4096 per warp x 4 warps = 16384 -> 4 programs, as the old kernel's 117 registers gave (its 18 KB
    # and 25 KB of shared memory allow 12 and 8). The q.k A operands of a step are 2 [16, 64] tiles instead of 8, each
    # 4 LDSM.x4 of 4 wavefronts (validate/notes/2026-11-23-kivi-kernel-variants.md): 666 - 96 wavefronts (kivi-2) and
    # 698 - 96 (kivi-4) per warp-step
    hw = load_hardware("H100-SXM")
    doc = ks.kernels("quant_attention")["kernels"]
    for method, old in (("kivi-2", 666), ("kivi-4", 698)):
        s = doc[method]
        assert s["registers"] == 128 and s["warps"] == 4
        assert ks.resident_programs(s, hw) == 4
        assert s["loop"]["wavefronts"] == old - (8 - 2) * 4 * 4


def test_structure_only_for_the_compiled_architecture_and_heads() -> None:
    params = {"num_heads": 32, "num_kv_heads": 8, "head_dim": 128}
    assert ks.structure("quant_attention", "kivi-2", params, load_hardware("H100-SXM")) is not None
    assert ks.structure("quant_attention", "kivi-2", params, load_hardware("Jetson-Xavier-NX-8GB")) is None
    assert ks.structure("quant_attention", "kivi-2", {**params, "num_kv_heads": 4}, load_hardware("H200")) is None


def _measured(device: str) -> dict:
    cases = json.loads((RESULTS / f"nvidia-{device}.json").read_text())["cases"]
    return {(c["params"]["method"], c["params"]["batch"], c["params"]["context"]): c for c in cases
            if c["family"] == "quant_attention"}


def _kivi_launched(device: str) -> dict:
    """(method, batch, context) -> ms of the kernel KIVI launches (tiled_launch.LAUNCH: qall-r128) as the KIVI
    variants run timed it (validate/results/experiments/nvidia-<device>-kivi-variants.json)."""
    rows = json.loads((RESULTS / "experiments" / f"nvidia-{device}-kivi-variants.json").read_text())["rows"]
    return {(r["method"], r["batch"], r["context"]): r["ms"] for r in rows if r["variant"] == "qall-r128"}


@pytest.mark.parametrize(("device", "hardware"), [("h100", "H100-SXM"), ("h200", "H200")])
def test_kivi_is_shared_memory_bound_and_slower_than_innerq_as_measured(device: str, hardware: str) -> None:
    from validate.model.compare import calibrated

    results = json.loads((RESULTS / f"nvidia-{device}.json").read_text())
    hw = calibrated(load_hardware(hardware), results)
    rows, launched = _measured(device), _kivi_launched(device)
    for b, L in SHAPES:
        kivi, innerq = rows[("kivi-2", b, L)], rows[("innerq-base", b, L)]
        pk = qa.predict(Case("quant_attention", kivi["name"], kivi["params"]), hw)
        pi = qa.predict(Case("quant_attention", innerq["name"], innerq["params"]), hw)
        assert pk["bound"] == "shared-memory"
        assert pk["time_s"] > 1.25 * pi["time_s"]
        ms = launched.get(("kivi-2", b, L))
        if ms is None:
            continue
        # measured: qall-r128 takes 1.20-1.29x InnerQ-Base's time (H100 b32 L16K 1.20x; the old kernel 1.29-1.49x)
        assert ms > 1.15 * innerq["ms"]
        # KIVI at its shared-memory ceiling: the loop's wavefronts predict the launched kernel within 12 %
        assert pk["time_s"] * 1e3 == pytest.approx(ms, rel=0.12)
