"""A lone warp's dependency chain through a compiled kernel (sm_70+ SASS control bits; no GPU, no timing).

When a program has its SM (or its scheduler) to itself, nothing hides its latencies: its time is the chain one
warp walks through its instruction stream. Walking the executed stream in order (loops nested in the region run
`trips` times, validate.common.sass's cold spans left out), per instruction with control word w:
    wait   (w >> 52) & 0x3F   scoreboard barriers it waits on: t = max(t, ready[b]) for each b in the mask
    write  (w >> 46) & 7      barrier its result sets (7: none): ready[b] = t + latency(opcode)
    read   (w >> 49) & 7      barrier freed when its operands are read: ready[b] = max(ready[b], t + 2)
    stall  (w >> 41) & 0xF    the fixed-latency cycles the compiler encoded before the next issue: t += max(1, stall)
The latencies of the variable-latency instructions are the ceilings family's measured dependent-chain latencies
(validate.ops.ceilings.latency: LDS/LDSM 23, SHFL 26, MUFU 17, HMMA 24.3, global loads past L2 674 cycles on the
H100), `LATENCY_CYCLES`; an opcode not measured waits DEFAULT_CYCLES. What it leaves out: warpgroup MMA
completion (WARPGROUP.DEPBAR is not a scoreboard wait: its time is the wgmma work itself), barriers between warps
(BAR.SYNC waits for the slowest warp, which this one warp is taken to be), and L2 hits (every global load pays the
DRAM latency).
"""

from __future__ import annotations

from validate.common.sass import _loops, cold_spans, instructions, opcode

# validate/results/experiments/nvidia-h100-onchip-latency.json latency_cycles (measured dependent chains)
LATENCY_CYCLES = {"LDS": 23.0, "LDSM": 23.0, "LDL": 23.0, "SHFL": 26.0, "MUFU": 17.0, "HMMA": 24.3, "LDG": 674.0,
                  "LDGSTS": 674.0}
DEFAULT_CYCLES = 20.0  # other variable-latency producers (S2R, conversions): about the measured LDS/MUFU latencies
NO_BARRIER = 7


def region_bounds(sass: str, region: str) -> tuple[int, int]:
    """(first, last) address of "kernel" (every instruction) or "loop" (the longest loop's body, one trip)."""
    ins = instructions(sass)
    if region == "kernel":
        return ins[0][0], ins[-1][0]
    cold = cold_spans(ins)
    loops = [s for s in _loops(ins) if not any(c0 <= s[0] < c1 for c0, c1 in cold)]
    if not loops:
        raise ValueError("sass: no loop (no backward branch) in the kernel")
    return max(loops, key=lambda s: s[1] - s[0])


def executed_stream(sass: str, region: str = "kernel", trips: int = 1) -> list[tuple[str, int]]:
    """(opcode, control word) of what one warp executes in `region` once, loops nested in it `trips` times."""
    ins = instructions(sass)
    cold = cold_spans(ins)
    lo, hi = region_bounds(sass, region)
    inner = [(s, e) for s, e in _loops(ins) if lo <= s and e <= hi and (s, e) != (lo, hi)]
    body = [(a, t, w) for a, t, w in ins if lo <= a <= hi and not any(c0 <= a < c1 for c0, c1 in cold)]
    out, i = [], 0
    while i < len(body):
        span = next(((s, e) for s, e in inner if s == body[i][0]), None)
        block = [x for x in body if span[0] <= x[0] <= span[1]] if span else [body[i]]
        out += [(opcode(t), w) for _, t, w in block] * (trips if span else 1)
        i += len(block)
    return out


def chain_cycles(stream: list[tuple[str, int]], latency: dict[str, float] | None = None) -> dict:
    """{"cycles": the lone warp's chain through `stream` (module docstring), "waited": cycles spent in scoreboard
    waits, "instructions": len(stream)}."""
    lat = LATENCY_CYCLES if latency is None else latency
    t, waited, ready = 0.0, 0.0, [0.0] * 6
    for op, w in stream:
        mask = (w >> 52) & 0x3F
        if mask:
            need = max(ready[b] for b in range(6) if mask >> b & 1)
            waited += max(0.0, need - t)
            t = max(t, need)
        write, read = (w >> 46) & 7, (w >> 49) & 7
        if write != NO_BARRIER:
            ready[write] = t + lat.get(op.split(".")[0], DEFAULT_CYCLES)
        if read != NO_BARRIER:
            ready[read] = max(ready[read], t + 2)
        t += max(1, (w >> 41) & 0xF)
    return {"cycles": t, "waited": waited, "instructions": len(stream)}
