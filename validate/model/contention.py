"""Contention between the warps resident on an SM, by exact Mean Value Analysis of a closed queueing network.

A kernel's warps share their SM: each scheduler issues for its own warps, the SM's tensor core runs every
warpgroup's wgmma (and every warp's mma.sync), its shared memory serves every warp's wavefronts. A lone warp's time
through a step is its dependency chain (structure/chains.json, validate.common.chain); with N warps the stations
queue. The network (Lazowska, Zahorjan, Graham, Sevcik, "Quantitative System Performance", 1984, ch. 6-7; exact MVA:
Reiser and Lavenberg, "Mean-value analysis of closed multichain queuing networks", JACM 27(2), 1980):
    customer    a quad of warps, one on each of the SM's 4 schedulers (a warpgroup; `customers`): the 4 schedulers
                issue for their own warps at once, so one issue station stands for all four; N = ceil(active warps
                of the SM / 4), active = min(resident programs, ceil(programs / SMs)) (kernel_structure);
    stations    (per customer-step, SM clock cycles; `demands`)
      issue     the warp's step at its scheduler: kernel_structure.issue_cycles of its issue classes at the measured
                per-SM rates / 4 (a warp instruction of class c: 32 x 4 / lanes_c per SM per clock);
      tensor    the quad's wgmma FLOPs at 2 x 64 x N x 16 / interval_N per clock (one SM's tensor cores run one
                warpgroup's HGMMA.64xNx16 every interval_N cycles: the measured back-to-back interval of
                validate.ops.ceilings.wgmma_latency, chains.json "wgmma_cycles") and its mma.sync FLOPs at the
                measured mma.sync rate per SM per clock;
      shared    the quad's wavefronts x 128 B (+ wgmma operands read from shared memory) at the measured
                shared-memory bytes per SM per clock;
                a share b of the wgmma cycles W holds the issue station too (issue I + b W, tensor - b W,
                `split_tensor`): measured.wgmma_issue_block, the b that gives the overlap microbenchmark's cycles at
                2 and 4 warpgroups per SM at their recorded clocks (H100 0.80 / 0.77, H200 0.85 / 0.80:
                nvidia-h{100,200}-wgmma-clocked.json); without it b = 0, separate stations;
    delay       Z = max(0, chain - sum of the demands): the chain is what one warp alone takes, its issue, its
                waits on its own wgmma and everything else (fixed latencies, scoreboard waits, fetch); the demands
                are taken to lie inside it, so N = 1 gives max(chain, sum of demands). Where the demands exceed
                the chain (a warp that queues wgmma without waiting on them), Z = 0: the chain is then no floor.
Exact MVA (`mva`): Q_k(0) = 0; for n = 1..N: R_k = D_k (1 + Q_k(n-1)), X = n / (Z + sum R_k), Q_k = X R_k.
X(N) is customer-steps per cycle per SM; a program-step is warps / width of a customer-step (width = the warps
of a customer, 4 unless the SM holds fewer), so over a launch
    t = program-steps x wave_factor x warps / (width x X(N) x SMs x clock)     (`contention_seconds`)
when every round of the busiest SM is full; a last round of fewer programs runs at its own N (`rounds`)
and the bound is the station with the largest residence time R_k, by the Roofline's ceiling names (`BOUNDS`:
"issue", "compute" for the tensor core, "shared-memory", or "latency" for Z).
DRAM stays a ceiling: the op's time is max(t, its DRAM time) (`with_contention`).
Validation on microbenchmarks (validate/notes/2026-11-23-warp-contention-mva.md, mva-microbench.json): the wgmma/ALU
overlap
loop at one warpgroup per SM within 2 % of the measured times (its serial share 0.865 vs 0.90); at 2 and 4, read
at their recorded clocks, separate stations are 22 and 41 % too fast
(validate/notes/2026-11-23-warp-contention-mva.md), which b removes (one b for both).
The 1 LOP3 : 2 FFMA mix is issue-bound at 2 and 8 warps per scheduler, as
measured, but the MVA at one dispatch per clock is 6 % above it, a per-instruction cost a queue does not produce:
the kernels' issue station uses the measured dispatch rate (dispatch_ops_per_s).
"""

from __future__ import annotations

import math

from validate.model import kernel_structure as ks

SCHEDULERS = 4  # warp schedulers per SM (Hopper SM: 4 sub-partitions; CUDA C++ Programming Guide, cc 9.0)
MMA_SYNC_FLOPS = 2 * 16 * 8 * 16  # one HMMA.16816 (m16n8k16) per warp
# the bound a station names: the Roofline's ceiling names (roofline.costmodel.optimes.binding_ceiling)
BOUNDS = {"issue": "issue", "tensor": "compute", "shared": "shared-memory", "latency": "latency"}


def mva(demands: dict[str, float], think: float, customers: int) -> tuple[float, dict[str, float]]:
    """Exact single-class MVA of a closed network of queueing stations `demands` (name -> service demand per
    visit-cycle) and a delay `think`, with `customers` customers: (throughput X, residence time R_k per station)
    (module docstring's recursion; Lazowska et al. 1984, ch. 6, Algorithm 6.1)."""
    if customers < 1:
        raise ValueError(f"customers: {customers} must be >= 1")
    queue = dict.fromkeys(demands, 0.0)
    throughput, residence = 0.0, dict(demands)
    for n in range(1, customers + 1):
        residence = {k: d * (1 + queue[k]) for k, d in demands.items()}
        throughput = n / (think + sum(residence.values()))
        queue = {k: throughput * r for k, r in residence.items()}
    return throughput, residence


def solve_issue_block(demands: dict[str, float], think: float, customers: int, cycles: float) -> float:
    """The share b in [0, 1] of the "tensor" demand moved to the "issue" station (`split_tensor`) for which `mva`
    gives `cycles` per customer-step with `customers` customers (bisection: the cycles grow with b, from separate
    stations at b = 0 to one station at b = 1; 0 or 1 when `cycles` lies outside that range)."""
    def at(b: float) -> float:
        return 1 / mva(split_tensor(demands, b), think, customers)[0]

    lo, hi = 0.0, 1.0
    if cycles <= at(lo):
        return lo
    if cycles >= at(hi):
        return hi
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if at(mid) < cycles else (lo, mid)
    return (lo + hi) / 2


def split_tensor(demands: dict[str, float], block: float, wgmma: float | None = None) -> dict[str, float]:
    """`demands` with `block` x the wgmma cycles (`wgmma`, else all of "tensor") also holding the issue station:
    issue + b W, tensor - b W (a warpgroup's wgmma, A read from registers, keeps the SM's schedulers from issuing
    other warps' instructions for that share of its cycles: hardware.measured.wgmma_issue_block)."""
    moved = block * (demands["tensor"] if wgmma is None else wgmma)
    return demands | {"issue": demands["issue"] + moved, "tensor": demands["tensor"] - moved}


def per_clock(hardware) -> dict:
    """Per-SM per-clock rates: each issue class in lanes (kernel_structure.class_rates / (SMs x clock)), "mma_sync"
    in FLOP, "shared" in bytes (measured shared_memory_bytes_per_s, else 128 B: CUDA guide, cc 9.0)."""
    scale = hardware.sm_count * hardware.sm_clock_hz
    out = {c: r / scale for c, r in ks.class_rates(hardware).items()}
    smem = getattr(getattr(hardware, "measured", None), "shared_memory_bytes_per_s", None)
    out["shared"] = smem / scale if smem else ks.WAVEFRONT_BYTES
    out["mma_sync"] = ks.mma_sync_rate(hardware) / scale
    return out


def wgmma_cycles(shapes: dict, intervals: dict) -> float:
    """Tensor-core cycles of a warpgroup's wgmma FLOPs by shape (`shapes`: "n<N>.<rs|ss>" -> FLOPs of ONE warp,
    validate.common.sass.hgmma_shapes): 4 x F / (2 x 64 x N x 16) groups x interval_N (`intervals`: "n<N>" ->
    {"interval": cycles}; another N at N / 2 cycles, 4096 FLOP per clock)."""
    out = 0.0
    for shape, flops in shapes.items():
        n = int(shape.split(".")[0][1:])
        interval = intervals.get(f"n{n}", {}).get("interval", n / 2)
        out += SCHEDULERS * flops / (2 * 64 * n * 16) * interval
    return out


def demands(s: dict, hardware, width: int = SCHEDULERS) -> dict[str, float]:
    """Service demands (SM cycles) of one customer-step of kernel `s`, a customer of `width` warps on as many
    schedulers (module docstring): "issue", "tensor", "shared"; counts from s["executed"] (per warp and
    program-step) or s["loop"] (per warp and step)."""
    counts = s.get("executed") or s["loop"]
    rates = per_clock(hardware)
    lanes = {c: r / SCHEDULERS for c, r in rates.items() if c in ks.CLASS_FIELDS or c in ("int", "fp")}
    issue = ks.issue_cycles(counts["classes"], lanes)
    shapes = counts.get("hgmma_shapes") or ({ks.WGMMA_SHAPE: counts["hgmma_flops"]} if counts.get("hgmma_flops")
                                            else {})
    intervals = ks.kernels("chains").get("wgmma_cycles", {})
    hmma = counts.get("hmma_flops", counts.get("mma", 0) * MMA_SYNC_FLOPS)
    wgmma = wgmma_cycles(shapes, intervals) * width / SCHEDULERS
    tensor = wgmma + width * hmma / rates["mma_sync"]
    shared = width * (counts["wavefronts"] * ks.WAVEFRONT_BYTES + counts.get("wgmma_shared_bytes", 0))
    block = getattr(getattr(hardware, "measured", None), "wgmma_issue_block", None) or 0.0
    return split_tensor({"issue": issue, "tensor": tensor, "shared": shared / rates["shared"]}, block, wgmma)


def customers(s: dict, programs: int, hardware) -> tuple[int, int]:
    """(customers of an SM, warps of one): ceil(W / 4) quads of warps, W = active programs x warps, active =
    min(resident programs, ceil(programs / SMs)); a customer holds min(4, W) warps."""
    warps = max(1, min(ks.resident_programs(s, hardware), -(-programs // hardware.sm_count))) * s["warps"]
    return math.ceil(warps / SCHEDULERS), min(SCHEDULERS, warps)


def step_cycles(s: dict, key: str, programs: int, hardware) -> dict | None:
    """{"cycles": SM cycles per program-step, "bound", "customers", "think", "residence"} of kernel `s` (chain `key`
    of chains.json) at the occupancy of a launch of `programs` programs; None without its chain or architecture."""
    chain, doc = ks.chain_cycles(key), ks.kernels("chains")
    if chain is None or doc.get("architecture") != hardware.architecture or not hardware.sm_clock_hz:
        return None
    n, width = customers(s, programs, hardware)
    d = demands(s, hardware, width)
    think = max(0.0, chain - sum(d.values()))
    x, r = mva(d, think, n)
    bound = BOUNDS[max({**r, "latency": think}.items(), key=lambda kv: kv[1])[0]]
    # a customer-step is width / warps program-steps
    return {"cycles": s["warps"] / (width * x), "bound": bound, "customers": n, "think": think, "residence": r,
            "demands": d}


def rounds(programs: int, resident: int, sm_count: int) -> list[tuple[int, int]]:
    """[(programs active on the busiest SM, rounds at that occupancy)] of a launch of `programs` equal programs:
    the busiest SM runs k = ceil(programs / SMs) of them, `resident` at a time, so k // resident rounds with every
    slot busy, then the k mod resident left over run together (the block scheduler starts a waiting program on the
    least-loaded SM, so the last programs spread one per SM: 384 programs, 2 resident, 132 SMs: 264 at once, then
    120 alone)."""
    k = -(-programs // sm_count)
    full, rest = divmod(k, max(1, resident))
    return [(n, r) for n, r in ((resident, full), (rest, 1)) if n and r]


def contention_seconds(s: dict, key: str, steps: float, programs: int, hardware,
                       clock_hz: float | None = None) -> dict | None:
    """{"seconds", "bound", ...} of `steps` program-steps of kernel `s` launched as `programs` programs: each of
    the busiest SM's rounds (`rounds`) takes its programs' steps at the MVA of that many programs,
    n x steps-per-program x `step_cycles`(n) / clock (`clock_hz`, else the spec's SM clock); None where
    `step_cycles` is. With every round full this is steps x wave_factor x step_cycles / (SMs x clock); a last round
    of fewer programs runs at its own, lower occupancy (a lone program at its chain)."""
    sms = hardware.sm_count
    plan = rounds(programs, ks.resident_programs(s, hardware), sms)
    got = [(n, r, step_cycles(s, key, n * sms, hardware)) for n, r in plan]
    if not got or any(g is None for _, _, g in got):
        return None
    clock = clock_hz or hardware.sm_clock_hz
    per_program = steps / programs
    seconds = sum(n * r * per_program * g["cycles"] for n, r, g in got) / clock
    return got[0][2] | {"seconds": seconds, "rounds": [(n, r) for n, r, _ in got]}


def with_contention(row: dict, t: float, bound: str) -> dict:
    """`row` (predict.predict_op's numbers; "op_s" the structured op's own time, "op_memory_s" its DRAM time) with
    the op's on-chip time replaced by the MVA time `t`: op time = max(t, DRAM time); time_s moves by the change,
    and the bound is `bound` where t binds (else "memory")."""
    op = max(t, row["op_memory_s"])
    return row | {"contention_s": t, "time_s": row["time_s"] + op - row["op_s"], "op_s": op,
                  "bound": bound if t >= row["op_memory_s"] else "memory"}


def launches_seconds(family: str, parts: list[tuple[str, dict, int, float]], hardware,
                     clock_hz: float | None = None) -> dict | None:
    """{"seconds", "bound"} of launches run one after another, each (chain name, structure, programs,
    program-steps) of `family` (`contention_seconds`, chain "<family>/<name>"): seconds summed, the bound of the
    longest; None where any launch has no chain."""
    got = [contention_seconds(s, f"{family}/{name}", steps, programs, hardware, clock_hz)
           for name, s, programs, steps in parts]
    if not got or any(g is None for g in got):
        return None
    return {"seconds": sum(g["seconds"] for g in got), "bound": max(got, key=lambda g: g["seconds"])["bound"]}
