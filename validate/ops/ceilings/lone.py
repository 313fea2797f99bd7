"""Lone-program microbenchmark: the fixed cost of a kernel whose programs each have an SM to themselves.

validate.model.fixed_costs.chain_floor charges each kernel of a small case the graph's launch (launch_empty)
plus one warp's dependency chain through one program (validate.common.chain over the sm_90 SASS, at the measured
latencies). This times that directly on the ceilings family's own read kernel (16 KB a program, BLOCK = 4096 fp32,
8 warps, as the read cases launch it) with 1 program and with one program per SM, in a CUDA graph like every case
(validate.common.harness.graph_ms: rotated inputs past L2, do_bench median), and the empty kernel beside it:

    python -m validate.ops.ceilings.lone OUT.json        (about 30 s on an H100)

Prediction committed before the run: validate/results/experiments/lone-chain-predicted.json (launch_empty +
chain cycles / SM clock, the same for 1 and for 132 programs: no bandwidth term at 16 KB per SM).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PROGRAMS = (1, 132)
LAUNCHES = 1000


def main(out: Path) -> dict:
    """Time the read kernel at PROGRAMS programs and the empty kernel; write {"env", "rows"} to `out`."""
    import torch

    from validate.common.harness import environment, graph_ms, input_sets
    from validate.ops.ceilings.kernel import BLOCK, empty_kernel, read_kernel

    rows = []
    for programs in PROGRAMS:
        n = programs * BLOCK

        def make(n=n, programs=programs):
            return (torch.rand(n, dtype=torch.float32, device="cuda"),
                    torch.empty(programs, dtype=torch.float32, device="cuda"))

        sets = input_sets(make, 4 * n)

        def call(x, partial, n=n, programs=programs):
            read_kernel[(programs,)](x, partial, n, BLOCK=BLOCK, num_warps=8)

        rows.append({"kernel": "read_kernel", "programs": programs, "bytes": 4 * n, "ms": graph_ms(call, sets),
                     "rotation": len(sets)})
    x = torch.empty(1, device="cuda")
    rows.append({"kernel": "empty_kernel", "programs": 1, "bytes": 0,
                 "ms": graph_ms(lambda x: empty_kernel[(1,)](x), [(x,)] * LAUNCHES)})
    doc = {"env": environment(), "rows": rows}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    main(Path(sys.argv[1]))
