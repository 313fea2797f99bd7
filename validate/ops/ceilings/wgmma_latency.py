"""Completion latency of a dependent wgmma, in SM clock cycles (issue 14, session 6): what the lone-warp chain walker
(validate.common.chain) charges a WARPGROUP.DEPBAR that waits for an HGMMA.

    python -m validate.ops.ceilings.wgmma_latency OUT.json

Needs torch + triton only (Triton 3.6 semantics). One program (one warpgroup, 4 warps) on one SM runs `iters` trips
of acc = tl.dot(a, b, acc) with a [64, KD] bf16 from registers (scaled by a runtime 1.0, as the fused XQuant loop's
dequantized latent) and b [KD, N] bf16: KD / 16 HGMMA.64xNx16 per trip, each on the previous accumulator. The sm_90
SASS (Triton 3.6, checked on the CPU with validate.common.sm90) has two patterns:
  chain_n{N}    KD = 128, as the fused XQuant loop compiles its K and V remat dots: WARPGROUP.ARRIVE, HGMMA,
                WARPGROUP.DEPBAR.LE gsb0, 0x7 per HGMMA (up to 7 groups left in flight: the dependent HGMMAs queue
                on the tensor core back to back) -> cycles per HGMMA when the warp does not wait;
  wait0_n{N}    KD = 16: WARPGROUP.ARRIVE, HGMMA, WARPGROUP.DEPBAR.LE gsb0, 0x0 per trip (the loop-carried dot of
                one HGMMA waits for it), as the fused loop's DEPBAR.LE 0x0 after each remat loop -> issue-to-
                completion latency of one HGMMA.
Cycles from %clock64 read by the warpgroup before and after the loop (the SM clock), per trip; median of TRIALS.
validate/results/experiments/wgmma-latency-predicted.json has the prediction, committed before any run.
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

NS = (64, 128)
ITERS, TRIALS = 4096, 5
CLOCK_ASM = tl.constexpr("mov.u64 $0, %clock64;")


@triton.jit
def latency_kernel(a_ptr, b_ptr, out_ptr, cycles_ptr, scale, iters, N: tl.constexpr, KD: tl.constexpr):
    """One warpgroup: `iters` dependent m64 N KD dots (module docstring); lane 0 stores the cycles."""
    rm, rn, rk = tl.arange(0, 64), tl.arange(0, N), tl.arange(0, KD)
    a = (tl.load(a_ptr + rm[:, None] * KD + rk[None, :]).to(tl.float32) * scale).to(tl.bfloat16)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.zeros([64, N], dtype=tl.float32)
    lane = tl.arange(0, 128)
    t0 = tl.inline_asm_elementwise(CLOCK_ASM, "=l,r", [lane], dtype=tl.int64, is_pure=False, pack=1)
    for _ in range(iters):
        acc = tl.dot(a, b, acc)
    total = tl.sum(tl.sum(acc, 1), 0)  # the loop's result is needed before the second clock read
    t1 = tl.inline_asm_elementwise(CLOCK_ASM, "=l,r", [lane + (total > 1e30).to(tl.int32)], dtype=tl.int64,
                                   is_pure=False, pack=1)
    tl.store(cycles_ptr + lane, t1 - t0, mask=lane == 0)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc)


def cycles_per_wgmma(n: int, wait0: bool) -> float:
    """Median over TRIALS of (clock after - clock before) / HGMMAs for one program on GPU 0."""
    kd = 16 if wait0 else 128
    a = (torch.randn(64, kd, device="cuda") * 0.01).to(torch.bfloat16)
    b = (torch.randn(kd, n, device="cuda") * 0.01).to(torch.bfloat16)
    out = torch.empty(64 * n, dtype=torch.float32, device="cuda")
    cycles = torch.zeros(128, dtype=torch.int64, device="cuda")
    runs = []
    for _ in range(TRIALS):
        latency_kernel[(1,)](a, b, out, cycles, 1.0, ITERS, N=n, KD=kd, num_warps=4, num_stages=1)
        torch.cuda.synchronize()
        runs.append(int(cycles[0]) / (ITERS * kd // 16))
    return statistics.median(runs)


def run(out_path: Path) -> dict:
    """Every pattern x N; the fields the chain walker reads: `wgmma_latency_cycles` (wait0) per shape."""
    rows = {f"{'wait0' if w else 'chain'}_n{n}": cycles_per_wgmma(n, w) for n in NS for w in (False, True)}
    props = torch.cuda.get_device_properties(0)
    result = {"device": props.name, "torch": torch.__version__, "triton": triton.__version__, "env": environment(),
              "iterations": ITERS, "cycles_per_wgmma": rows,
              "wgmma_latency_cycles": {f"n{n}.rs": rows[f"wait0_n{n}"] for n in NS}}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str]) -> int:
    """`python -m validate.ops.ceilings.wgmma_latency OUT.json`; exit 2 with one line on bad arguments."""
    parsed = script_args(argv, "wgmma_latency", "a CUDA GPU with wgmma (sm_90)", quick=False, interpreter=False)
    if parsed is None:
        return 2
    for name, cycles in run(parsed[0])["cycles_per_wgmma"].items():
        print(f"{name}: {cycles:.1f} cycles per wgmma")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
