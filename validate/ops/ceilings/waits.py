"""Two waits the lone-warp chain (validate.common.chain) charges at assumed costs, measured on their own:

    python -m validate.ops.ceilings.waits OUT.json        (about 30 s on an H100; torch + triton only)
    python -m validate.ops.ceilings.waits --check-sass    (CPU only: the sm_90 SASS of every chase)

  copy chases    one warp chases a pointer chain, every step one dependent load, %clock64 around ITERS x UNROLL
                 steps: cycles per step.
                   ldg_{dram,l2}     ld.global.cg.u64 p, [p] (LDG.E.64.STRONG.GPU: L1 bypassed)
                   ldgsts_{dram,l2}  cp.async.cg.shared.global [s], [p], 16; cp.async.commit_group;
                                     cp.async.wait_group 0; ld.shared.u64 p, [s]   (LDGSTS.E.BYPASS.128,
                                     LDGDEPBAR, DEPBAR.LE SB0, 0x0, LDS.64: what Triton's pipelined loops wait on)
                 dram: DRAM_HOPS hops DRAM_STRIDE bytes apart (128 MB > 50 MB of L2), a larger scratch write first
                 to evict them (as validate.ops.ceilings.latency's ldg_latency); l2: L2_HOPS hops L2_STRIDE bytes
                 apart (2 MB), one untimed pass first, so every step hits L2 and misses L1 (.cg).
                 The copy's own completion latency is ldgsts_* less the dependent LDS (23.0 cycles measured,
                 nvidia-h100-onchip-latency.json lds_latency) and the DEPBAR's issue.
  bar_sync       WARPS warps (one warpgroup, one a scheduler, as the kernels' programs) run a loop of UNROLL
                 bar.sync 0 with nothing between: cycles per barrier (lane 0 of each warp; the median).
The chain's assumptions these test: LATENCY_CYCLES["LDGSTS"] = the LDG's (674 cycles past L2), and a BAR.SYNC
costs its stall bits (1-2 cycles) when the warps arrive together. Predictions, committed before any run:
validate/results/experiments/waits-predicted.json.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import triton
import triton.language as tl

from validate.ops.ceilings.latency import ldg_kernel as chase_kernel  # one warp chasing a chain: cycles, its end

UNROLL = 16
DRAM_HOPS, DRAM_STRIDE = 2048, 64 * 1024  # 128 MB
L2_HOPS, L2_STRIDE = 512, 4 * 1024  # 2 MB
BAR_ITERS, WARPS = 1024, 4
TRIALS = 5


def _timed(body: str, label: str, head: str = "", tail: str = "") -> str:
    """PTX: `head`, %clock64, `body` UNROLL times per trip of a counted loop ($3 trips), %clock64, `tail`."""
    return (head + f"mov.u64 c0, %clock64;\nmov.u32 i, 0;\n{label}:\n" + "\n".join([body] * UNROLL) +
            f"\nadd.u32 i, i, 1;\nsetp.lt.u32 q, i, $3;\n@q bra {label};\nmov.u64 c1, %clock64;\n" + tail +
            "sub.s64 $0, c1, c0;\n}")


LDG_ASM = _timed("ld.global.cg.u64 p, [p];", "LDG_LOOP", "{\n.reg .u64 p, c0, c1; .reg .u32 i; .reg .pred q;\n"
                 "mov.u64 p, $2;\n", "mov.u64 $1, p;\n")
LDGSTS_ASM = _timed("cp.async.cg.shared.global [s], [p], 16;\ncp.async.commit_group;\ncp.async.wait_group 0;\n"
                    "ld.shared.u64 p, [s];", "LDGSTS_LOOP",
                    "{\n.shared .align 16 .b8 slot[16];\n.reg .u64 p, c0, c1; .reg .u32 i, s; .reg .pred q;\n"
                    "mov.u32 s, slot;\nmov.u64 p, $2;\n", "mov.u64 $1, p;\n")
BAR_ASM = ("{\n.reg .u64 c0, c1; .reg .u32 i; .reg .pred q;\nbar.sync 0;\nmov.u64 c0, %clock64;\nmov.u32 i, 0;\n"
           "BAR_LOOP:\n" + "\n".join(["bar.sync 0;"] * UNROLL) +
           "\nadd.u32 i, i, 1;\nsetp.lt.u32 q, i, $2;\n@q bra BAR_LOOP;\nmov.u64 c1, %clock64;\n"
           "sub.s64 $0, c1, c0;\nmov.u32 $1, i;\n}")
CHASES = {"ldg": LDG_ASM, "ldgsts": LDGSTS_ASM}


@triton.jit
def bar_kernel(out_ptr, iters, ASM: tl.constexpr, THREADS: tl.constexpr):
    """THREADS / 32 warps: the barrier loop (BAR_ASM); each warp's lane 0 stores its cycles."""
    t = tl.arange(0, THREADS)
    n = tl.full([THREADS], 0, tl.int32) + iters
    cycles, x = tl.inline_asm_elementwise(ASM, "=l,=r,r", [n], dtype=(tl.int64, tl.int32), is_pure=False, pack=1)
    tl.store(out_ptr + t // 32, cycles, mask=t % 32 == 0)
    tl.store(out_ptr + THREADS + t, x.to(tl.int64))


def _chain(hops: int, stride: int):
    """A cyclic pointer chain of `hops` 8-byte words `stride` bytes apart (int64 tensor, on GPU 0)."""
    import torch

    words = stride // 8
    buf = torch.zeros(hops * words, dtype=torch.int64, device="cuda")
    at = torch.arange(hops, device="cuda") * words
    buf[at] = buf.data_ptr() + torch.roll(at, -1) * 8
    return buf


def chase_cycles(kind: str, level: str) -> float:
    """Median cycles per step of the `kind` chase ("ldg", "ldgsts") at `level` ("dram", "l2")."""
    import torch

    hops, stride = (DRAM_HOPS, DRAM_STRIDE) if level == "dram" else (L2_HOPS, L2_STRIDE)
    buf = _chain(hops, stride)
    scratch = torch.empty(2 * buf.numel(), dtype=torch.int64, device="cuda") if level == "dram" else None
    out = torch.zeros(64, dtype=torch.int64, device="cuda")
    iters = hops // UNROLL
    runs = []
    for _ in range(TRIALS):
        if scratch is not None:
            scratch.fill_(1)  # evicts the chain from L2
        else:
            chase_kernel[(1,)](out, buf.data_ptr(), iters, ASM=CHASES[kind], num_warps=1, num_stages=1)
        torch.cuda.synchronize()
        chase_kernel[(1,)](out, buf.data_ptr(), iters, ASM=CHASES[kind], num_warps=1, num_stages=1)
        torch.cuda.synchronize()
        runs.append(int(out[0]) / (iters * UNROLL))
    return statistics.median(runs)


def bar_cycles() -> float:
    """Median cycles per bar.sync of WARPS warps (median over warps and trials)."""
    import torch

    threads = 32 * WARPS
    out = torch.zeros(threads + WARPS, dtype=torch.int64, device="cuda")
    runs = []
    for _ in range(TRIALS):
        bar_kernel[(1,)](out, BAR_ITERS, ASM=BAR_ASM, THREADS=threads, num_warps=WARPS, num_stages=1)
        torch.cuda.synchronize()
        runs += [int(c) / (BAR_ITERS * UNROLL) for c in out[:WARPS].tolist()]
    return statistics.median(runs)


def check_sass() -> dict:
    """CPU only: compile every kernel for sm_90; per kernel its longest loop's opcodes (counts) and size."""
    import subprocess
    import tempfile
    from collections import Counter

    from validate.common.sass import instructions, loop_counts, opcode
    from validate.common.sm90 import compile_sm90

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    found = {}
    cases = [(kind, chase_kernel, {"cycles_ptr": "*i64", "start": "i64", "iters": "i32"}, {"ASM": asm}, 1)
             for kind, asm in CHASES.items()]
    cases.append(("bar_sync", bar_kernel, {"out_ptr": "*i64", "iters": "i32"},
                  {"ASM": BAR_ASM, "THREADS": 32 * WARPS}, WARPS))
    for name, kernel, signature, ce, warps in cases:
        compiled = compile_sm90(kernel, signature, ce, warps, 1)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "k.cubin"
            path.write_bytes(compiled.asm["cubin"])
            sass = subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True, check=True).stdout
        ins = instructions(sass)
        loop = loop_counts(sass)
        found[name] = {"loop_instructions": loop["instructions"],
                       "opcodes": dict(Counter(opcode(t) for _, t, _ in ins)), "sass": sass}
    return found


def main(out: Path) -> dict:
    """Run every row on GPU 0 and write {"env", "cycles"} to `out`."""
    from validate.common.harness import environment

    cycles = {f"{kind}_{level}": chase_cycles(kind, level) for kind in CHASES for level in ("dram", "l2")}
    cycles["bar_sync"] = bar_cycles()
    print(cycles, flush=True)
    doc = {"env": environment(), "unroll": UNROLL, "warps_bar_sync": WARPS, "cycles": cycles}
    Path(out).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check-sass"]:
        for name, row in check_sass().items():
            print(name, row["loop_instructions"], {k: v for k, v in row["opcodes"].items()})
    else:
        main(Path(sys.argv[1]))
