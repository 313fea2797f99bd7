"""Per-kernel time of Inductor's fused Triton kernels in a CUDA graph (torch only).

    python -m validate.clients.probe_fused --out OUT.json

The compiled client's decode step launches, besides its GEMMs and attention, 5-6 small fused Triton kernels per
layer (RMSNorm reductions, RoPE + KV write, SiLU x up; validate.clients.profile_step): at batch 1 they move a few
KB each, so their time is the kernel's own floor, not bytes / bandwidth. Each case compiles one such function
(torch.compile) and captures N calls of it in one CUDA graph (one stream: back to back): replay time / N is the
per-kernel time of that kind of kernel, the counterpart of the aten chains (probe13 h2) for fusion 'full'.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

CALLS = 400


def _cases(torch, F):
    d, inter, heads, hd = 4096, 14336, 32, 128

    def rms_norm(x, w):
        v = x.float()
        v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-5)
        return (v * w.float()).to(x.dtype)

    def add_norm(x, r, w):
        return rms_norm(x + r, w)

    def silu_mul(gu):
        g, u = gu.split(inter, dim=-1)
        return F.silu(g) * u

    def rope(q, cos, sin):
        a, b = q[..., : hd // 2], q[..., hd // 2:]
        return q * cos + torch.cat((-b, a), dim=-1) * sin

    return {"rms_norm": (rms_norm, [(1, d), (d,)]), "add_rms_norm": (add_norm, [(1, d), (1, d), (d,)]),
            "silu_mul": (silu_mul, [(1, 2 * inter)]), "rope": (rope, [(1, heads, hd), (1, 1, hd), (1, 1, hd)])}


def main(argv=None) -> int:
    """Time each fused kind's chain; write OUT.json."""
    parser = argparse.ArgumentParser(prog="validate.clients.probe_fused")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from validate.clients.timing import capture, kernel_census, replay_ms

    torch.manual_seed(0)
    rows = []
    for name, (fn, shapes) in _cases(torch, F).items():
        compiled = torch.compile(fn, dynamic=False)
        inputs = [torch.randn(*s, device="cuda", dtype=torch.bfloat16) for s in shapes]
        census = kernel_census(lambda compiled=compiled, inputs=inputs: compiled(*inputs))
        graph = capture(lambda compiled=compiled, inputs=inputs: [compiled(*inputs) for _ in range(CALLS)])
        ms = replay_ms(graph, timed=20)["ms"]
        per_call = ms * 1e-3 / CALLS
        rows.append({"name": f"fused_{name}", "calls": CALLS, "kernels_per_call": census["kernels"],
                     "top_kernels": census["top_kernels"], "ms": ms, "per_call_s": per_call,
                     "per_kernel_s": per_call / max(census["kernels"], 1)})
        print(f"{name}: {census['kernels']} kernel(s) per call, {per_call * 1e6:.2f} us per call", flush=True)
    env = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    Path(args.out).write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
