"""validate.common.chain: a lone warp's chain through hand-built SASS (control words composed bit by bit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from validate.common.chain import chain_cycles, executed_stream

ROOT = Path(__file__).resolve().parents[3]


def word(stall: int = 1, write: int = 7, read: int = 7, wait: int = 0) -> int:
    """A second control word: stall bits 41-44, write barrier 46-48, read barrier 49-51, wait mask 52-57."""
    return stall << 41 | write << 46 | read << 49 | wait << 52


def sass(rows: list[tuple[str, int]]) -> str:
    lines = []
    for i, (text, w) in enumerate(rows):
        lines.append(f"        /*{16 * i:04x}*/                   {text} ;   /* 0x0000000000000000 */")
        lines.append(f"                                                      /* 0x{w:016x} */")
    return "\n".join(lines)


def test_straight_line_stalls_and_a_global_wait():
    # LDG sets barrier 0 at t = 0 (ready at 674), FFMA with stall 4 (t 1 -> 5 after the LDG's stall 1), then an
    # FADD waiting on barrier 0: t = 674, + its stall 2 = 676
    rows = [("LDG.E R2, [R4.64]", word(stall=1, write=0)), ("FFMA R6, R7, R8, R9", word(stall=4)),
            ("FADD R10, R2, R6", word(stall=2, wait=0b1))]
    got = chain_cycles(executed_stream(sass(rows)))
    assert got == {"cycles": 676.0, "waited": 674.0 - 5.0, "wgmma_waited": 0.0, "copy_waited": 0.0, "instructions": 3}


def test_shared_load_latency_and_zero_stall_counts_one_cycle():
    rows = [("LDS R2, [R3]", word(stall=0, write=1)), ("IADD3 R4, R5, R6, RZ", word(stall=0)),
            ("FMUL R7, R2, R2", word(stall=1, wait=0b10))]
    # LDS at t 0 -> ready 23; IADD3 at t 1; FMUL waits to 23, then + 1
    assert chain_cycles(executed_stream(sass(rows)))["cycles"] == 24.0


def test_inner_loop_runs_trips_times():
    # a 2-instruction loop (the BRA jumps back to 0x0010) between two straight-line instructions
    rows = [("MOV R1, RZ", word(stall=1)), ("FFMA R2, R2, R2, R2", word(stall=4)), ("@P0 BRA 0x10", word(stall=5)),
            ("EXIT", word(stall=5))]
    stream = executed_stream(sass(rows), "kernel", trips=3)
    assert [op for op, _ in stream] == ["MOV", "FFMA", "BRA", "FFMA", "BRA", "FFMA", "BRA", "EXIT"]
    assert chain_cycles(stream)["cycles"] == 1 + 3 * (4 + 5) + 5


def test_wgmma_depbar_waits_for_its_pending_groups():
    # two dependent HGMMA.64x64x16 (WGMMA_CYCLES[64]: latency 137.6, interval 32, measured on the H100: wait0_n64
    # and chain_n64 of nvidia-h100-wgmma-latency.json) issued at t 0 and t 1; the first completes at 137.6, the
    # second at max(1 + 137.6, 137.6 + 32) = 169.6. DEPBAR.LE 0x1 at t 2 waits for the older one (137.6), DEPBAR.LE
    # 0x0 right after for the newer (169.6); each instruction then adds its stall of 1
    from validate.common.chain import WGMMA_CYCLES

    assert WGMMA_CYCLES[64] == (137.6, 32.0)
    rows = [("HGMMA.64x64x16.F32.BF16 R24, R56, gdesc[UR4].tnspB, R24, gsb0", word()),
            ("HGMMA.64x64x16.F32.BF16 R24, R60, gdesc[UR8].tnspB, R24, gsb0", word()),
            ("WARPGROUP.DEPBAR.LE gsb0, 0x1", word()), ("WARPGROUP.DEPBAR.LE gsb0, 0x0", word()),
            ("WARPGROUP.DEPBAR.LE gsb0, 0x7", word())]
    stream = executed_stream(sass(rows))
    assert [op for op, _ in stream][2:] == ["WARPGROUP.DEPBAR.LE.1", "WARPGROUP.DEPBAR.LE.0", "WARPGROUP.DEPBAR.LE.7"]
    got = chain_cycles(stream)
    # t: 0 -> 1 -> 2; wait to 137.6, +1 = 138.6; wait to 169.6, +1 = 170.6; nothing pending, +1 = 171.6
    assert got["cycles"] == pytest.approx(171.6) and got["wgmma_waited"] == pytest.approx((137.6 - 2) + (169.6 - 138.6))


def test_async_copies_wait_at_depbar_for_their_groups():
    # Triton's two-stage loop: two copy groups (LDGSTS ... LDGDEPBAR), then DEPBAR.LE SB0, 0x1 (one may pend) and
    # DEPBAR.LE SB0, 0x0 (none). LDGSTS at t 0 and 1 (group 1 done at 1 + 674 = 675), LDGDEPBAR at 2 (its write
    # barrier 0 is the group counter: the FADD waiting on barrier 0 at t 3 does not wait), LDGSTS at 4 (group 2
    # done at 678), LDGDEPBAR at 5, DEPBAR.LE 0x1 at 6 waits for group 1 (675), +1 = 676; DEPBAR.LE 0x0 waits for
    # group 2 (678), +1 = 679. LATENCY_CYCLES["LDGSTS"] is the measured global latency (674, an LDG's)
    from validate.common.chain import LATENCY_CYCLES

    assert LATENCY_CYCLES["LDGSTS"] == LATENCY_CYCLES["LDG"] == 674.0
    copy = "LDGSTS.E.BYPASS.128 [R9], desc[UR22][R12.64]"
    rows = [(copy, word()), (copy, word()), ("LDGDEPBAR", word(write=0)), ("FADD R1, R2, R3", word(wait=0b1)),
            (copy, word()), ("LDGDEPBAR", word(write=0)), ("DEPBAR.LE SB0, 0x1", word()),
            ("DEPBAR.LE SB0, 0x0", word())]
    stream = executed_stream(sass(rows))
    assert [op for op, _ in stream][-2:] == ["DEPBAR.LE.SB0.1", "DEPBAR.LE.SB0.0"]
    got = chain_cycles(stream)
    assert got["cycles"] == pytest.approx(679.0)
    assert got["copy_waited"] == pytest.approx((675 - 6) + (678 - 676)) and got["waited"] == 0.0


def test_bar_sync_takes_the_measured_barrier_round_trip():
    # a BAR.SYNC whose stall bits say 6 holds the warp 20.2 cycles (one warpgroup's bar.sync back to back,
    # nvidia-h100-waits.json bar_sync: 20.17 measured); the FADDs around it at stall 1: 1 + 20.2 + 1 = 22.2
    import json

    from validate.common.chain import BAR_SYNC_CYCLES

    measured = json.loads((ROOT / "validate/results/experiments/nvidia-h100-waits.json").read_text())["cycles"]
    assert BAR_SYNC_CYCLES == pytest.approx(measured["bar_sync"], abs=0.05)
    rows = [("FADD R1, R2, R3", word()), ("BAR.SYNC.DEFER_BLOCKING 0x0", word(stall=6)), ("FADD R1, R2, R3", word())]
    assert chain_cycles(executed_stream(sass(rows)))["cycles"] == pytest.approx(22.2)


def test_local_latency_follows_the_l1_left_by_shared_memory():
    # a kernel with shared memory gets the 228 KB carve-out (measured: beside 160 KB of shared memory a 64 KB local
    # footprint paid L2, nvidia-h100-stalls.json), leaving 28 KB of L1: 16 KB of spills hit, the fused XQuant
    # kernel's 45 KB (2 programs x 128 threads x 176 B) do not; with no shared memory all 256 KB are L1
    from validate.common.chain import LOCAL_CYCLES, local_cycles

    shared = 2 * (80 * 1024 + 1024)
    assert LOCAL_CYCLES == {"l1": 29.1, "l2": 288.4}
    assert local_cycles(shared, 16 * 1024) == LOCAL_CYCLES["l1"]
    assert local_cycles(shared, 45 * 1024) == LOCAL_CYCLES["l2"]
    assert local_cycles(0, 200 * 1024) == LOCAL_CYCLES["l1"]


def test_fetch_interval_of_a_loop_beyond_l0():
    # a 2-instruction inner loop (32 B: up to 16 KB, 1.05 cycles measured) inside a region whose body is padded past
    # 16 KB (16,416 B: the 32 KB level, 1.15): the first trip of the inner loop and the straight-line code issue at the
    # region's fetch cycles, later trips at the small body's
    from validate.common.chain import FETCH_LEVELS, fetch_intervals

    pad = [("IADD3 R1, R1, R1, RZ", word(stall=1))] * (16 * 1024 // 16)
    rows = [("FFMA R2, R2, R2, R2", word(stall=1)), ("@P0 BRA 0x0", word(stall=1))] + pad
    text = sass(rows)
    fast, slow = FETCH_LEVELS[0][1], FETCH_LEVELS[1][1]
    assert (fast, slow) == (1.05, 1.15)
    fetch = fetch_intervals(text, "kernel", trips=3)
    assert fetch == [slow, slow, fast, fast, fast, fast] + [slow] * len(pad)
    stream = executed_stream(text, "kernel", trips=3)
    assert chain_cycles(stream, fetch=fetch)["cycles"] == pytest.approx(slow * (2 + len(pad)) + 4 * fast)
