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
H100), `LATENCY_CYCLES`; an opcode not measured waits DEFAULT_CYCLES.
Warpgroup MMA (`_Wgmma`): each HGMMA.64xNx16 is one wgmma group (gsb0) that completes at
    done_i = max(t_issue + latency_N, done_(i-1) + interval_N)
(the tensor core runs a warpgroup's groups in order, each `interval_N` cycles when queued back to back, and a lone
one takes `latency_N` from issue to completion: WGMMA_CYCLES, validate.ops.ceilings.wgmma_latency's chain_n{N} and
wait0_n{N}), and WARPGROUP.DEPBAR.LE gsb0, k waits until at most k groups are pending: t = max(t, done of the
(k+1)-th newest). WARPGROUP.ARRIVE (a register fence before the wgmma reads its A registers) does not wait.
Asynchronous copies (`_CopyGroups`; cp.async, Triton's pipelined loads): an LDGSTS sets no scoreboard of its own; the
LDGDEPBAR after a batch of them closes a copy group on the counting scoreboard SB0 (its write barrier, 0, is that
counter, which no wait mask reads), and DEPBAR.LE SB0, k waits until at most k groups are pending. A group completes
at its last LDGSTS's issue + LATENCY_CYCLES["LDGSTS"] (the global latency, as every LDG: a copy is a global load
that lands in shared memory), so DEPBAR.LE SB0, k: t = max(t, completion of the (k+1)-th newest group). Without it
(the walker before this) a kernel's pipelined loads never waited: Triton 3.6's two-stage loops issue trip i + 1's
copies at the end of trip i and wait for all of them (DEPBAR.LE SB0, 0x0) at the top of trip i + 1.
Local memory (`local_cycles`): an LDL (a spilled register's reload) goes through L1; it hits while the spills of
the SM's resident programs fit the L1 the shared-memory carve-out leaves (256 KB less the carve-out: none without
shared memory, else the largest, 228 KB, as measured; CARVEOUTS_KB), else it pays an L2 hit: LOCAL_CYCLES,
validate.ops.ceilings.stalls.
Instruction fetch (`fetch_intervals`): a loop body beyond a scheduler's instruction cache cannot issue faster than
the next cache level delivers: each instruction waits max(1, stall, FETCH cycles of the level that holds the loop it
runs in), FETCH_LEVELS (body bytes up to -> cycles per instruction), validate.ops.ceilings.stalls.
Barriers (BAR.SYNC of one warpgroup): issue to the next issue takes BAR_SYNC_CYCLES when the warps arrive together
(the barrier unit's round trip; measured 20.2 cycles a barrier against the 8 of its stall bits,
validate.ops.ceilings.waits bar_sync, nvidia-h100-waits.json): t += max(1, stall, fetch, BAR_SYNC_CYCLES).
What it leaves out: waiting at a barrier for a slower warp (this one warp is taken to be the slowest), other warps
sharing the scheduler and the tensor core, and L2 hits (every global load pays the DRAM latency).
"""

from __future__ import annotations

import re

from validate.common.sass import _loops, cold_spans, instructions, opcode

# validate/results/experiments/nvidia-h100-onchip-latency.json latency_cycles (measured dependent chains)
LATENCY_CYCLES = {"LDS": 23.0, "LDSM": 23.0, "LDL": 23.0, "SHFL": 26.0, "MUFU": 17.0, "HMMA": 24.3, "LDG": 674.0,
                  "LDGSTS": 674.0}
DEFAULT_CYCLES = 20.0  # other variable-latency producers (S2R, conversions): about the measured LDS/MUFU latencies
NO_BARRIER = 7
# HGMMA.64xNx16 (bf16, A from registers): N -> (latency from issue to completion when waited alone, interval between
# dependent groups queued back to back), SM clock cycles, MEASURED on the H100 by validate.ops.ceilings.wgmma_latency
# (validate/results/experiments/nvidia-h100-wgmma-latency.json: wait0_n{N}, chain_n{N}; predicted 96/32, 128/64 in
# wgmma-latency-predicted.json); another N scales from them: interval N / 2 (4096 dense FLOP per SM per clock),
# latency interval + WGMMA_FIXED_CYCLES (measured 105.6 at N 64, 105.7 at N 128).
WGMMA_CYCLES = {64: (137.6, 32.0), 128: (169.7, 64.0)}
WGMMA_FIXED_CYCLES = 105.7
# MEASURED on the H100 by validate.ops.ceilings.stalls (validate/results/experiments/nvidia-h100-stalls.json;
# predicted in stalls-predicted.json): a dependent LDL's cycles when it hits L1 (29.1-33.4 at 16-128 KB with no
# shared memory, 30.6 at 16 KB beside 160 KB of shared memory) / when it pays L2 (257.7-290.5, median 288.4). The L1
# left beside shared memory: Hopper's 256 KB unified L1 + shared memory per SM less the carve-out (CUDA C++
# Programming Guide, compute capability 9.0). A kernel with shared memory gets the largest carve-out, 228 KB, not the
# smallest that fits: beside 160 KB of shared memory a 64 KB footprint already paid L2 (287.8 cycles; the smallest
# fitting carve-out, 164 KB, would leave 92 KB), and Nsight Compute reports a 233 KB shared-memory configuration for
# the fused XQuant kernel (80 KB per block; nvidia-h200-ncu-xquant.txt). Fetch: one warp per scheduler issuing a loop
# of independent FFMAs with a body up to 16 / 32 / 64 / 128 KB / beyond (256 KB) ran at 1.05 / 1.15 / 2.22 / 2.57 /
# 5.72 cycles per instruction; a lone warp's chain waits that long per instruction at least.
LOCAL_CYCLES = {"l1": 29.1, "l2": 288.4}
# MEASURED on the H100 by validate.ops.ceilings.waits (validate/results/experiments/nvidia-h100-waits.json bar_sync;
# predicted 20 in waits-predicted.json): one warpgroup's 4 warps running bar.sync 0 back to back, cycles a barrier
BAR_SYNC_CYCLES = 20.2
L1_SHARED_BYTES = 256 * 1024
CARVEOUTS_KB = (0, 228)
FETCH_LEVELS = ((16 * 1024, 1.05), (32 * 1024, 1.15), (64 * 1024, 2.22), (128 * 1024, 2.57), (None, 5.72))
_HGMMA_N = re.compile(r"HGMMA\.64x(\d+)x")
_DEPBAR = re.compile(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*(0x[0-9a-f]+|\d+)")
_SB_DEPBAR = re.compile(r"^(?:@!?U?P\w+\s+)?DEPBAR\.LE\s+SB(\d),\s*(0x[0-9a-f]+|\d+)")


def wgmma_cycles(n: int) -> tuple[float, float]:
    """(latency, interval) of an HGMMA.64x`n`x16 (WGMMA_CYCLES)."""
    return WGMMA_CYCLES.get(n) or (n / 2 + WGMMA_FIXED_CYCLES, n / 2)


def local_cycles(shared_per_sm: int, spill_per_sm: int) -> float:
    """Cycles of a dependent LDL on an SM whose resident programs hold `shared_per_sm` bytes of shared memory and
    `spill_per_sm` bytes of local memory (module docstring: L1 while the spills fit beside the carve-out)."""
    carve = min((c for c in CARVEOUTS_KB if c * 1024 >= shared_per_sm), default=CARVEOUTS_KB[-1]) * 1024
    return LOCAL_CYCLES["l1"] if spill_per_sm <= L1_SHARED_BYTES - carve else LOCAL_CYCLES["l2"]


def fetch_cycles(body_bytes: int) -> float:
    """Cycles per instruction the fetch allows a loop body of `body_bytes` (FETCH_LEVELS)."""
    return next(c for size, c in FETCH_LEVELS if size is None or body_bytes <= size)


def stream_opcode(text: str) -> str:
    """`opcode`, with a WARPGROUP.DEPBAR's pending-group bound appended ('WARPGROUP.DEPBAR.LE.7') and a
    scoreboard DEPBAR's counter and bound ('DEPBAR.LE.SB0.1')."""
    m = _DEPBAR.search(text)
    if m:
        return f"WARPGROUP.DEPBAR.LE.{int(m.group(1), 0)}"
    m = _SB_DEPBAR.match(text)
    return f"DEPBAR.LE.SB{m.group(1)}.{int(m.group(2), 0)}" if m else opcode(text)


class _Wgmma:
    """A warpgroup's pending wgmma groups (module docstring)."""

    def __init__(self) -> None:
        self.done: list[float] = []

    def issue(self, op: str, t: float) -> None:
        latency, interval = wgmma_cycles(int(_HGMMA_N.match(op).group(1)))
        last = self.done[-1] if self.done else 0.0
        self.done.append(max(t + latency, last + interval))

    def wait(self, op: str, t: float) -> float:
        """The time the DEPBAR `op` releases the warp at (t when no more than its bound are pending)."""
        bound = int(op.rsplit(".", 1)[1])
        self.done = [d for d in self.done if d > t]
        if len(self.done) > bound:
            t = self.done[len(self.done) - bound - 1]
            self.done = self.done[len(self.done) - bound:]
        return t


class _CopyGroups:
    """A warp's pending asynchronous-copy groups on SB0 (module docstring)."""

    def __init__(self, latency: float) -> None:
        self.latency, self.open, self.done = latency, None, []

    def copy(self, t: float) -> None:
        """An LDGSTS issued at t joins the open group."""
        self.open = t + self.latency

    def commit(self, t: float) -> None:
        """LDGDEPBAR at t: the open group (its last copy's completion; an empty group completes at once) pends."""
        self.done.append(t if self.open is None else self.open)
        self.open = None

    def wait(self, bound: int, t: float) -> float:
        """The time DEPBAR.LE SB0, `bound` releases the warp at (t when no more than `bound` groups pend)."""
        self.done = [d for d in self.done if d > t]
        if len(self.done) > bound:
            t = sorted(self.done)[len(self.done) - bound - 1]
            self.done = [d for d in self.done if d > t]
        return t


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
        out += [(stream_opcode(t), w) for _, t, w in block] * (trips if span else 1)
        i += len(block)
    return out


def fetch_intervals(sass: str, region: str = "kernel", trips: int = 1) -> list[float]:
    """Per instruction of executed_stream(sass, region, trips): the fetch cycles (`fetch_cycles`) of the code it is
    fetched from: a loop nested in the region, from its second trip on, its own body; else the region's body
    (static bytes, cold spans left out; 16 B an instruction)."""
    ins = instructions(sass)
    cold = cold_spans(ins)
    lo, hi = region_bounds(sass, region)
    inner = [(s, e) for s, e in _loops(ins) if lo <= s and e <= hi and (s, e) != (lo, hi)]
    body = [(a, t, w) for a, t, w in ins if lo <= a <= hi and not any(c0 <= a < c1 for c0, c1 in cold)]
    outer = fetch_cycles(16 * len(body))
    out, i = [], 0
    while i < len(body):
        span = next(((s, e) for s, e in inner if s == body[i][0]), None)
        block = [x for x in body if span[0] <= x[0] <= span[1]] if span else [body[i]]
        out += [outer] * len(block)
        if span:
            out += [fetch_cycles(16 * len(block))] * (len(block) * (trips - 1))
        i += len(block)
    return out


def chain_cycles(stream: list[tuple[str, int]], latency: dict[str, float] | None = None,
                 fetch: list[float] | None = None) -> dict:
    """{"cycles": the lone warp's chain through `stream` (module docstring), "waited": cycles spent in scoreboard
    waits, "wgmma_waited": cycles spent in WARPGROUP.DEPBAR waits, "copy_waited": cycles spent in DEPBAR.LE SB0
    waits on asynchronous copies (`_CopyGroups`), "instructions": len(stream)}; `fetch` (one per
    instruction, `fetch_intervals`): the fetch's cycles per instruction, each issue then waits max(1, stall, fetch)."""
    lat = LATENCY_CYCLES if latency is None else latency
    t, waited, wg_waited, ready, wgmma = 0.0, 0.0, 0.0, [0.0] * 6, _Wgmma()
    copies, copy_waited = _CopyGroups(lat.get("LDGSTS", DEFAULT_CYCLES)), 0.0
    fetch = fetch or [1.0] * len(stream)
    for (op, w), interval in zip(stream, fetch, strict=True):
        if op.startswith("WARPGROUP.DEPBAR.LE."):
            release = wgmma.wait(op, t)
            wg_waited += release - t
            t = release
        elif op.startswith("DEPBAR.LE.SB0."):
            release = copies.wait(int(op.rsplit(".", 1)[1]), t)
            copy_waited += release - t
            t = release
        mask = (w >> 52) & 0x3F
        if mask:
            need = max(ready[b] for b in range(6) if mask >> b & 1)
            waited += max(0.0, need - t)
            t = max(t, need)
        if op.startswith("HGMMA."):
            wgmma.issue(op, t)
        elif op.startswith("LDGSTS"):
            copies.copy(t)
        write, read = (w >> 46) & 7, (w >> 49) & 7
        if op == "LDGDEPBAR":  # its write barrier is SB0's group counter (`_CopyGroups`), not a ready time
            copies.commit(t)
        elif write != NO_BARRIER:
            ready[write] = t + lat.get(op.split(".")[0], DEFAULT_CYCLES)
        if read != NO_BARRIER:
            ready[read] = max(ready[read], t + 2)
        t += max(1, (w >> 41) & 0xF, interval, BAR_SYNC_CYCLES if op.startswith("BAR.SYNC") else 0)
    return {"cycles": t, "waited": waited, "wgmma_waited": wg_waited, "copy_waited": copy_waited,
            "instructions": len(stream)}
