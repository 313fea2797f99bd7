"""Cold instruction fetch: what a program's first pass through code costs when its SM's instruction caches do not
hold that code yet (issue 14, the small cases' fixed cost):

    python -m validate.ops.ceilings.fetch_cold OUT.json        (about 20 s on an H100; torch + triton only)

The loop of validate.ops.ceilings.stalls' fetch microbenchmark (independent FFMAs, a body of KB kilobytes of SASS,
%clock64 around the loop), one program of WARPS warps, run for 1 trip and for 2 trips in one launch:
    first   cycles of trip 1: the body fetched for the first time in this launch;
    second  cycles(2 trips) - cycles(1 trip): the same body again, now cached as far as it fits.
Each at three states of the caches before the launch:
    dram    the L2 flushed (a 256 MB buffer written) and another kernel launched: the code comes from DRAM;
    l2      the same kernel (one program) launched just before: its code is in L2, and in this SM's caches where
            that program ran on the same SM;
    same    launched just before with 132 programs (every SM ran this code): does an SM keep a kernel's code in its
            instruction caches from one launch to the next?
Cycles per instruction per warp: cycles / (body instructions x trips). The chain (validate.common.chain) charges a
loop body its warm fetch level (FETCH_LEVELS) on every trip and the pass at 1 cycle an instruction; a first trip
slower than the second is what it leaves out.
Predictions, committed before the run: validate/results/experiments/fetch-cold-predicted.json.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from validate.ops.ceilings.stalls import LOOP_OVERHEAD, fetch_asm, fetch_body, fetch_kernel

KB = (16, 64, 128)
WARPS = 4
STATES = ("dram", "l2", "same")
TRIALS = 5
FLUSH_BYTES = 256 * 1024 * 1024


def _launch(out, kb: int, trips: int, grid: int = 1) -> None:
    fetch_kernel[(grid,)](out, trips, ASM=fetch_asm(kb), THREADS=32 * WARPS, num_warps=WARPS, num_stages=1)


def _cycles(kb: int, trips: int, state: str, scratch) -> float:
    """Median over trials and warps of the loop's cycles, `trips` trips, after bringing the caches to `state`
    (`scratch`: the FLUSH_BYTES buffer the "dram" state writes)."""
    import torch

    out = torch.zeros(33 * WARPS, dtype=torch.int64, device="cuda")
    _launch(out, kb, trips)  # compile
    runs = []
    for _ in range(TRIALS):
        if state == "dram":
            scratch.fill_(1)
        elif state == "l2":
            _launch(out, kb, trips)
        else:
            _launch(out, kb, trips, grid=torch.cuda.get_device_properties(0).multi_processor_count)
        torch.cuda.synchronize()
        _launch(out, kb, trips)
        torch.cuda.synchronize()
        runs += [int(c) for c in out[:WARPS].tolist()]
    return statistics.median(runs)


def main(out: Path) -> dict:
    import torch

    from validate.common.harness import environment

    scratch = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    rows = []
    for kb in KB:
        body = fetch_body(kb) + LOOP_OVERHEAD
        for state in STATES:
            one, two = _cycles(kb, 1, state, scratch), _cycles(kb, 2, state, scratch)
            rows.append({"kb": kb, "state": state, "instructions": body, "first_cycles": one,
                         "second_cycles": two - one, "first_cpi": one / body, "second_cpi": (two - one) / body})
            print(rows[-1], flush=True)
    doc = {"env": environment(), "warps": WARPS, "rows": rows}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main(Path(sys.argv[1]))
