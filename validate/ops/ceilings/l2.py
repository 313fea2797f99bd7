"""L2 read bandwidth, the ceiling the spec field `measured.l2_bytes_per_s` names (issue 14 item 4: a hierarchical
roofline): every SM streams a buffer that fits in L2, again and again, with loads that bypass L1.

    python -m validate.ops.ceilings.l2 OUT.json        (about 20 s on an H100; torch + triton only)

Kernel `l2_read_kernel`: PROGRAMS_PER_SM programs on each SM; program p, at pass i, reads slice (p + i) mod n of the
buffer (BLOCK int32 a load, 16 B a thread: LDG.E.128 with the .cg cache operator, L1 bypassed) and folds it into a
running sum that is stored at the end, so nothing is dead. Bytes = programs x passes x slice bytes. Each footprint
(FOOTPRINTS_MB: below the 50 MB L2 of both the H100 and the H200) is read once untimed, then timed as a CUDA graph
of REPEATS launches (onchip.graph_seconds: CUDA events, median of TRIALS replays, the SM clock probed inside the GPU
while it replays: "probe_mhz"). DRAM_MB reads a footprint past L2 with the same kernel, for reference.
The rate a kernel meets when its programs re-read tiles other programs have brought into L2 (AQUA-KV's GEMM tiles,
the XQuant remat weights): Nsight Compute put predict_kernel's L2 throughput at 72-84 % of its peak on both GPUs
(nvidia-h{100,200}-ncu-aquakv.txt). Prediction, committed before any run:
validate/results/experiments/l2-predicted.json.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from validate.common.harness import environment, script_args
from validate.ops.ceilings.onchip import graph_seconds, probe_row

BLOCK = 4096  # int32 per load and program: 16 KB, 16 B a thread at 8 warps
SLICE_LOADS = 8  # loads per slice: a slice is 128 KB
PROGRAMS_PER_SM = 4
WARPS = 8
FOOTPRINTS_MB = (4, 8, 16, 24, 32)
DRAM_MB = 1024
PASSES = 32
REPEATS = 10
TRIALS = 5


@triton.jit
def l2_read_kernel(x_ptr, out_ptr, n_slices, passes, BLOCK: tl.constexpr, SLICE_LOADS: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for i in range(passes):
        base = ((pid + i) % n_slices).to(tl.int64) * (BLOCK * SLICE_LOADS)
        for j in tl.static_range(SLICE_LOADS):
            acc ^= tl.load(x_ptr + base + j * BLOCK + offs, cache_modifier=".cg")
    tl.store(out_ptr + pid * BLOCK + offs, acc)


def slice_bytes() -> int:
    """Bytes of one slice: SLICE_LOADS loads of BLOCK int32."""
    return BLOCK * SLICE_LOADS * 4


def measure(footprint_mb: int, sms: int, passes: int = PASSES) -> dict:
    """GB/s of reading a `footprint_mb` buffer over and over (module docstring), with its probe clock."""
    n_slices = footprint_mb * 2 ** 20 // slice_bytes()
    x = torch.randint(0, 2 ** 30, (n_slices * slice_bytes() // 4,), dtype=torch.int32, device="cuda")
    programs = PROGRAMS_PER_SM * sms
    out = torch.empty(programs * BLOCK, dtype=torch.int32, device="cuda")

    def launch():
        l2_read_kernel[(programs,)](x, out, n_slices, passes, BLOCK=BLOCK, SLICE_LOADS=SLICE_LOADS, num_warps=WARPS)

    launch()  # compile and the untimed pass
    seconds = graph_seconds(launch, REPEATS, TRIALS)
    moved = programs * passes * slice_bytes()
    return probe_row({"footprint_mb": footprint_mb, "programs": programs, "passes": passes, "bytes": moved,
                      "seconds": seconds, "bytes_per_s": moved / seconds})


def run(out: Path) -> dict:
    """Every footprint and the DRAM reference on GPU 0; writes {"env", "rows", "l2_bytes_per_s"} to `out`:
    l2_bytes_per_s is the median over the footprints up to 16 MB (every one of them far below L2)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = [measure(mb, sms) for mb in FOOTPRINTS_MB]
    dram = measure(DRAM_MB, sms, passes=2)
    doc = {"env": environment(), "block": BLOCK, "slice_bytes": slice_bytes(), "programs_per_sm": PROGRAMS_PER_SM,
           "warps": WARPS, "rows": rows, "dram_reference": dram,
           "l2_bytes_per_s": statistics.median(r["bytes_per_s"] for r in rows if r["footprint_mb"] <= 16)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def main(argv: list[str]) -> int:
    """`python -m validate.ops.ceilings.l2 OUT.json`; exit 2 with one line on bad arguments."""
    parsed = script_args(argv, "l2", "a CUDA GPU", quick=False)
    if parsed is None:
        return 2
    doc = run(parsed[0])
    for r in [*doc["rows"], doc["dram_reference"]]:
        print(f"{r['footprint_mb']:5d} MB: {r['bytes_per_s'] / 1e12:.2f} TB/s at {r.get('probe_mhz', 0):.0f} MHz")
    print(f"l2_bytes_per_s {doc['l2_bytes_per_s']:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
