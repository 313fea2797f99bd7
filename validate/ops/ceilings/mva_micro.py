"""Structure of the on-chip microbenchmarks whose results test validate.model.contention (MVA) without being
its inputs: the wgmma/ALU overlap loops (validate.ops.ceilings.wgmma: wgmma_n64_rs, overlap_alu, overlap_both) and
the 1 LOP3 : 2 FFMA mix (validate.ops.ceilings.onchip mixed_issue), compiled for sm_90 on the CPU (with the Triton
3.6 the GPU results were measured with on PYTHONPATH), their loop counted (validate.common.sass.loop_counts), the lone
warp's chain through
one trip walked (validate.common.chain), and the MVA's cycles per program-step written beside them:

    python -m validate.ops.ceilings.mva_micro OUT.json
    python -m validate.ops.ceilings.mva_micro --block OUT.json nvidia-h100-wgmma-clocked.json   (wgmma_issue_block)

Demands per customer (a warpgroup: one warp on each scheduler) and trip: issue = kernel_structure.issue_cycles of
the loop's classes at the datasheet's per-scheduler lanes (INT32 16, FP32 32, dispatch 1 instruction per clock:
CUDA C++ Programming Guide, cc 9.0; NOT the mixed_issue measurement these loops test); tensor = 8 HGMMA.64x64x16 x
the measured back-to-back interval (32 cycles, validate.ops.ceilings.wgmma_latency chain_n64); no shared memory in
the loops. Customers: P programs of one warpgroup per SM (overlap) / 8 and 2 warps per scheduler (mixed).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

MIX_PAYLOAD = 96  # validate.ops.ceilings.onchip MIX_OPS_PER_ITER: 32 lop3 + 64 fma a thread and loop trip
INTERVAL_N64 = 32.0  # validate/results/experiments/nvidia-h100-wgmma-latency.json chain_n64
DATASHEET_LANES = {"int": 64, "fp": 128, "f2fp": 64, "i2f": 64, "f2i": 16, "mufu": 16, "dispatch": 128}


def _sass(kernel, signature: dict, constexprs: dict, warps: int, name: str, tmp: Path) -> tuple[str, int]:
    """SASS and registers of one sm_90 compile."""
    import triton

    from validate.common.sm90 import compile_sm90

    compiled = compile_sm90(kernel, signature, constexprs, warps, 1)
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    path = tmp / f"{name}.cubin"
    path.write_bytes(compiled.asm["cubin"])
    sass = subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    usage = subprocess.run([str(tool), "-res-usage", str(path)], capture_output=True, text=True, check=True).stdout
    return sass, int(re.search(r"REG:(\d+)", usage).group(1))


def loops(tmp: Path) -> dict:
    """name -> {"classes", "instructions", "hgmma_n64", "chain", "registers"} of each microbenchmark loop (one trip)."""
    from validate.common.chain import chain_cycles, executed_stream
    from validate.common.sass import loop_counts
    from validate.ops.ceilings import onchip, wgmma

    sig = {"a_ptr": "*bf16", "b_ptr": "*bf16", "out_ptr": "*fp32", "scale": "fp32", "iters": "i32"}
    out = {}
    for name, dot, alu in (("wgmma_n64_rs", True, False), ("overlap_alu", False, True), ("overlap_both", True, True)):
        ce = dict(N=64, K=wgmma.K, RS=True, DOT=dot, ALU=alu, ASM=wgmma.ALU_ASM)
        sass, regs = _sass(wgmma.wgmma_kernel, sig, ce, wgmma.WARPS, name, tmp)
        out[name] = _row(sass, regs, loop_counts, chain_cycles, executed_stream)
    sass, regs = _sass(onchip.int_kernel, {"out_ptr": "*i32", "iters": "i32"},
                       dict(THREADS=onchip.THREADS, ASM=onchip.MIX_ASM), onchip.WARPS, "mixed_issue", tmp)
    out["mixed_issue"] = _row(sass, regs, loop_counts, chain_cycles, executed_stream)
    return out


def _row(sass, regs, loop_counts, chain_cycles, executed_stream) -> dict:
    """The loop's counts, its HGMMA.64x64x16 and the lone warp's chain through one trip."""
    c, stream = loop_counts(sass), executed_stream(sass, "loop", 1)
    return {"instructions": c["instructions"], "classes": c["classes"], "registers": regs,
            "hgmma_n64": sum(op.startswith("HGMMA.64x64x16") for op, _ in stream),
            "chain": chain_cycles(stream)["cycles"]}


def predict(rows: dict) -> dict:
    """MVA cycles per program-step (overlap: per SM per program-step at P = 1, 2, 4) and instructions per SM per
    clock x 32 (mixed_issue at 8 and 2 warps per scheduler) from `loops`' counts."""
    from validate.model.contention import SCHEDULERS, mva
    from validate.model.kernel_structure import issue_cycles

    lanes = {c: v / SCHEDULERS for c, v in DATASHEET_LANES.items()}
    out = {}
    for name in ("wgmma_n64_rs", "overlap_alu", "overlap_both"):
        r = rows[name]
        d = {"issue": issue_cycles(r["classes"], lanes), "tensor": r["hgmma_n64"] * INTERVAL_N64}
        z = max(0.0, r["chain"] - sum(d.values()))
        for p in (1, 2, 4):
            x, _ = mva(d, z, p)
            out[f"{name}_p{p}"] = {"demands": d, "think": z, "cycles_per_program_step": 1 / x}
    r = rows["mixed_issue"]
    d = {"issue": issue_cycles(r["classes"], lanes)}
    z = max(0.0, r["chain"] - d["issue"])
    for name, n in (("mixed_issue", 8), ("mixed_issue_w2", 2)):
        x, _ = mva(d, z, n)
        # the measured rate counts the payload only (MIX_OPS_PER_ITER thread instructions a trip, no loop counter)
        out[name] = {"demands": d, "think": z, "lanes_per_sm_per_clock": x * SCHEDULERS * MIX_PAYLOAD * 32}
    return out


def issue_block(micro: dict, clocked: dict) -> dict:
    """measured.wgmma_issue_block from a wgmma run that recorded each row's clock (`clocked`, validate.ops.ceilings.
    wgmma) and the overlap loop's demands (`micro`, this script's output): per P in 2, 4 the b of
    contention.solve_issue_block for overlap_both_p<P>'s cycles per program-step (ns x MHz / 1000, at the probe's
    clock where the row has one, else nvidia-smi's), and
    their mean ("block"). At P = 1 every b gives the same cycles (one customer), so P = 1 is no evidence."""
    from validate.model.contention import solve_issue_block

    loop = micro["predicted"]["overlap_both_p1"]
    out = {}
    for p in (2, 4):
        row = clocked["benchmarks"][f"overlap_both_p{p}"]
        cycles = row["ns_per_step"] * row.get("probe_mhz", row["clocks"]["sm_mhz"]) / 1000
        out[f"p{p}"] = {"cycles": cycles, "block": solve_issue_block(loop["demands"], loop["think"], p, cycles)}
    out["block"] = sum(v["block"] for v in out.values()) / 2
    return out


def main(argv: list[str]) -> int:
    """`python -m validate.ops.ceilings.mva_micro OUT.json`: compile, count, predict, write;
    `... --block MICRO.json CLOCKED.json`: print `issue_block` as JSON."""
    import tempfile

    if len(argv) == 3 and argv[0] == "--block":
        try:
            micro, clocked = (json.loads(Path(a).read_text()) for a in argv[1:])
            print(json.dumps(issue_block(micro, clocked), indent=1))
        except (OSError, ValueError, KeyError) as err:
            print(f"mva_micro: {type(err).__name__}: {err}", file=sys.stderr)
            return 2
        return 0
    if len(argv) != 1:
        print("usage: python -m validate.ops.ceilings.mva_micro OUT.json | --block MICRO.json CLOCKED.json",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        rows = loops(Path(tmp))
    Path(argv[0]).write_text(json.dumps({"loops": rows, "predicted": predict(rows)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
