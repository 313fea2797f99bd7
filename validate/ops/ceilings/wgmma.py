"""wgmma at the XQuant kernels' own tile shapes, and its overlap with a warpgroup's issue work (issue 14 item 4,
session 6): the `measured` fields wgmma_flops_per_s and wgmma_issue_serial that validate.model.kernel_structure
reads (wgmma_rate, wgmma_serial; without them it borrows the cuBLAS GEMM rate and adds wgmma and issue time).

    python -m validate.ops.ceilings.wgmma OUT.json [--quick]

Needs torch + triton only. Every program is one warpgroup (4 warps) and runs `iters` steps of one loop:
  wgmma_n{N}_{rs,ss}_p{P}  acc = tl.dot(a, b, acc): a [64, K] bf16, b [K, N] bf16, K = 128 (8 x HGMMA.64xNx16 per
                     step, as the fused XQuant loop's K and V remat dots per latent trip), a and b loaded once before
                     the loop; rs: a scaled by a runtime 1.0 so it sits in registers (wgmma's A from registers, like
                     the fused loop's dequantized latent: sm_90 SASS, Triton 3.6, WARPGROUP.ARRIVE, HGMMA R.., gdesc,
                     WARPGROUP.DEPBAR.LE gsb0 per instruction, as in fused_kernel); ss: a staged in shared memory
                     (HGMMA gdesc, gdesc back to back, one DEPBAR per dot). No load in the loop. P programs per SM
                     (1, 2, 4; n256 at most 2: its B tiles fill shared memory):
                     FLOP = programs x iters x 2 x 64 x N x K.
  overlap_alu_p{P}   the same loop with no dot and ALU_OPS lop3 per thread per step (8 independent chains, inline PTX
                     fed by the loop-carried value, so nothing is hoisted).
  overlap_both_p{P}  the dot of wgmma_n64_rs and the lop3 block in one loop (W and I per step).
serial share at P = (t_both - max(t_W, t_I)) / min(t_W, t_I) (t_W: wgmma_n64_rs_pP), clipped to [0, 1]: 1 when the
warpgroup's issue work and its waited-on wgmma add, 0 when they overlap fully.
Timing as the other ceilings (onchip.graph_seconds: a CUDA graph of 10 launches, median of 9 replays).
validate/results/experiments/wgmma-overlap-predicted.json has the model's predictions, committed before any run.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

from validate.common import clocks
from validate.common.harness import environment, script_args
from validate.ops.ceilings.onchip import graph_seconds, probe_row

M, K, WARPS = 64, 128, 4
NS = (64, 128, 256)
PROGRAMS = (1, 2, 4)
ALU_CHAINS, ALU_DEPTH = 8, 20
ALU_OPS = ALU_CHAINS * ALU_DEPTH  # lop3 per thread per step: 160 (320 scheduler clocks per warp at 64 lanes/SM/clock)
# the dot of a step, m64 n64 k128: 1.05 MFLOP, 355 SM clocks at the cuBLAS rate (2956 FLOP/clock/SM on the H100)
_ALU_BODY = "\n".join(f"lop3.b32 r{c}, r{c}, r{(c + 1) % 8}, k, 0x96;" for _ in range(ALU_DEPTH)
                      for c in range(ALU_CHAINS))
ALU_ASM = ("{\n.reg .u32 r0, r1, r2, r3, r4, r5, r6, r7, k;\nmov.u32 k, $1;\n"
           + "".join(f"add.u32 r{c}, $1, {c};\n" for c in range(8)) + _ALU_BODY + "\n"
           + "xor.b32 r0, r0, r1; xor.b32 r2, r2, r3; xor.b32 r4, r4, r5; xor.b32 r6, r6, r7;\n"
           + "xor.b32 r0, r0, r2; xor.b32 r4, r4, r6; xor.b32 $0, r0, r4;\n}")


@triton.jit
def wgmma_kernel(a_ptr, b_ptr, out_ptr, scale, iters, N: tl.constexpr, K: tl.constexpr, RS: tl.constexpr,
                 DOT: tl.constexpr, ALU: tl.constexpr, ASM: tl.constexpr):
    rm, rn, rk = tl.arange(0, 64), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    if RS:
        a = (a.to(tl.float32) * scale).to(tl.bfloat16)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.zeros([64, N], dtype=tl.float32)
    lane = tl.arange(0, 128)
    x = lane + tl.program_id(0)
    for _ in range(iters):
        if DOT:
            acc = tl.dot(a, b, acc)
        if ALU:
            x = tl.inline_asm_elementwise(ASM, "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)
    pid = tl.program_id(0)
    tl.store(out_ptr + pid * 64 * N + rm[:, None] * N + rn[None, :], acc + (tl.sum(x, 0) * 1e-30))


def configs() -> dict[str, dict]:
    """Every benchmark's constexprs and programs per SM (module docstring)."""
    out = {}
    for p in PROGRAMS:
        for n in NS:
            for rs in (True, False):
                if n * K * 2 * p > 160 * 1024:  # B tiles of the SM's programs must fit its 228 KB shared memory
                    continue
                out[f"wgmma_n{n}_{'rs' if rs else 'ss'}_p{p}"] = dict(N=n, RS=rs, DOT=True, ALU=False, programs=p)
        out[f"overlap_alu_p{p}"] = dict(N=64, RS=True, DOT=False, ALU=True, programs=p)
        out[f"overlap_both_p{p}"] = dict(N=64, RS=True, DOT=True, ALU=True, programs=p)
    return out


def flops_per_step(cfg: dict) -> int:
    """FLOP of one program's step: one m64 x N x K dot (0 without one)."""
    return 2 * M * cfg["N"] * K if cfg["DOT"] else 0


def measure(name: str, cfg: dict, sms: int, iters: int) -> dict:
    """Seconds and rates of benchmark `name` at cfg["programs"] programs per SM."""
    blocks = sms * cfg["programs"]
    a = (torch.randn(M, K, device="cuda") * 0.01).to(torch.bfloat16)
    b = (torch.randn(K, cfg["N"], device="cuda") * 0.01).to(torch.bfloat16)
    out = torch.empty(blocks * M * cfg["N"], dtype=torch.float32, device="cuda")
    ce = {k: cfg[k] for k in ("N", "RS", "DOT", "ALU")}

    def launch():
        wgmma_kernel[(blocks,)](a, b, out, 1.0, iters, K=K, ASM=ALU_ASM, num_warps=WARPS, num_stages=1, **ce)

    launch()  # compile outside the clocked window
    torch.cuda.synchronize()
    start = time.time()
    seconds = graph_seconds(launch, repeats=10, trials=9)
    clocks.mark(start, time.time())
    flops = blocks * iters * flops_per_step(cfg)
    return probe_row({"programs_per_sm": cfg["programs"], "blocks": blocks, "iterations": iters, "n": cfg["N"],
            "a_operand": "registers" if cfg["RS"] else "shared", "dot": cfg["DOT"],
            "alu_ops_per_thread_step": ALU_OPS if cfg["ALU"] else 0, "seconds": seconds,
            "flops_per_s": flops / seconds if flops else None})


def serial_share(t_w: float, t_i: float, t_both: float) -> float:
    """(t_both - max(t_W, t_I)) / min(t_W, t_I), clipped to [0, 1]."""
    return min(1.0, max(0.0, (t_both - max(t_w, t_i)) / min(t_w, t_i)))


def row_cycles(row: dict) -> float:
    """A row's time in SM cycles at the clock the probe read while it ran ("probe_mhz"), else its seconds: the three
    rows of an overlap share run at different clocks (the wgmma loop at ~1.6 GHz, the integer loop at ~1.98 under
    the power limit), and the model composes them per clock."""
    return row["seconds"] * row.get("probe_mhz", 1e-6) * 1e6


def serial_shares(rows: dict) -> dict[int, float]:
    """`serial_share` of each programs-per-SM count, in cycles (`row_cycles`)."""
    return {p: serial_share(row_cycles(rows[f"wgmma_n64_rs_p{p}"]), row_cycles(rows[f"overlap_alu_p{p}"]),
                            row_cycles(rows[f"overlap_both_p{p}"])) for p in PROGRAMS}


def run(out_path: Path, quick: bool = False) -> dict:
    """Measure every benchmark of `configs` on GPU 0; write the rows, the per-clock figures and the fields."""
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    iters = 64 if quick else 4096
    sampler = clocks.Sampler().start()  # each row's SM clock while timed (none without nvidia-smi)
    try:
        rows = {}
        for name, cfg in configs().items():
            clocks.take_windows()
            rows[name] = measure(name, cfg, sms, iters)
            if (clock := sampler.case_clocks()) is not None:
                rows[name]["clocks"] = clock
    finally:
        sampler.stop()
    fields = {"wgmma_flops_per_s": {f"n{r['n']}.{'rs' if r['a_operand'] == 'registers' else 'ss'}."
                                    f"p{r['programs_per_sm']}": r["flops_per_s"]
                                    for name, r in rows.items() if name.startswith("wgmma_")},
              "wgmma_issue_serial": serial_shares(rows),
              "wgmma_clock_hz": {f"n{r['n']}.{'rs' if r['a_operand'] == 'registers' else 'ss'}."
                                 f"p{r['programs_per_sm']}": r["probe_mhz"] * 1e6
                                 for name, r in rows.items() if name.startswith("wgmma_") and "probe_mhz" in r}}
    for r in rows.values():  # one SM's time per program-step (its P programs share it)
        r["ns_per_step"] = r["seconds"] * 1e9 / (r["iterations"] * r["programs_per_sm"])
    result = {"device": props.name, "sm_count": sms, "torch": torch.__version__, "triton": triton.__version__,
              "quick": quick, "env": environment(), "fields": fields, "benchmarks": rows}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str]) -> int:
    """`python -m validate.ops.ceilings.wgmma OUT.json [--quick]`; exit 2 with one line on bad arguments."""
    parsed = script_args(argv, "wgmma", "a CUDA GPU with wgmma (sm_90)")
    if parsed is None:
        return 2
    result = run(*parsed)
    for name, row in result["benchmarks"].items():
        rate = f"{row['flops_per_s'] / 1e12:.1f} TFLOP/s" if row["flops_per_s"] else "-"
        mhz = (row.get("clocks") or {}).get("sm_mhz")
        at = (f", {mhz:.0f} MHz" if mhz else "") + (f", probe {row['probe_mhz']:.0f} MHz" if "probe_mhz" in row else "")
        print(f"{name}: {row['seconds'] * 1e3:.3f} ms, {rate}, {row['ns_per_step']:.1f} ns per program-step{at}")
    print("wgmma_issue_serial:", result["fields"]["wgmma_issue_serial"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
