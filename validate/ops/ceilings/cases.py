"""The ceilings' grid, how a case runs on the GPU, and the datasheet prediction (roofline.validation)."""

from __future__ import annotations

import triton

from roofline.validation.results_file import Case
from validate.model.families import calibration as predicted
from validate.model.families.calibration import gemm_work, stream_work
from validate.ops.ceilings import kernel
from validate.ops.ceilings.kernel import BLOCK, empty_kernel, stream_copy, stream_sum

MIB = 1 << 20
READ_SIZES = [MIB << i for i in range(13)]  # 1 MiB .. 4 GiB
QUICK_READ_SIZES = [MIB, 16 * MIB, 256 * MIB, 1024 * MIB, 4096 * MIB]
GEMM_SIZE = 8192
LAUNCHES = 1000
LAUNCH_REPEATS = 25


def sm90_specs() -> list[dict]:
    """validate.common.sm90 compile specs of the read, copy and empty kernels as the bench launches them."""
    stream = {"constexprs": {"BLOCK": BLOCK}, "num_warps": 8, "num_stages": 3, "module": kernel.__name__}
    return [{**stream, "kernel": "read_kernel", "signature": {"x_ptr": "*fp32", "partial_ptr": "*fp32", "n": "i64"}},
            {**stream, "kernel": "copy_kernel", "signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i64"}},
            {"module": kernel.__name__, "kernel": "empty_kernel", "signature": {"x_ptr": "*fp32"}, "constexprs": {}}]


def _run_stream(case: Case) -> dict:
    import torch

    from validate.common.harness import graph_ms, input_sets

    size, kind = case.params["bytes"], case.params["kind"]
    n = size // 4
    moved, flops = stream_work(kind, size)

    def make():
        x = torch.rand(n, dtype=torch.float32, device="cuda")
        out = torch.empty(triton.cdiv(n, BLOCK), dtype=torch.float32, device="cuda") if kind == "read" \
            else torch.empty_like(x)
        return x, out

    sets = input_sets(make, moved)
    x, out = sets[0]
    if kind == "read":
        got, want = stream_sum(x, partial=out).sum().item(), x.sum().item()
        assert abs(got - want) <= 1e-3 * abs(want), f"read kernel sum {got} != {want}"
        ms = graph_ms(lambda x, out: stream_sum(x, partial=out), sets)
    else:
        assert torch.equal(stream_copy(x, out), x), "copy kernel output differs"
        ms = graph_ms(lambda x, out: stream_copy(x, out), sets)
    return {"ms": ms, "bytes": moved, "flops": flops, "rotation": len(sets)}


def _run_gemm(case: Case) -> dict:
    import torch

    from validate.common.harness import graph_ms

    m = n = k = case.params["size"]
    dtype = case.params["dtype"]
    moved, flops = gemm_work(m, dtype)
    if dtype == "bf16":
        a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(k, n, dtype=torch.bfloat16, device="cuda")
        return {"ms": graph_ms(torch.matmul, [(a, b)]), "bytes": moved, "flops": flops}
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return {"skipped": f"torch {torch.__version__} has no torch._scaled_mm / float8_e4m3fn"}
    if torch.cuda.get_device_capability() < (8, 9):
        return {"skipped": f"fp8 GEMM needs compute capability >= 8.9, have {torch.cuda.get_device_capability()}"}
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
    one = torch.tensor(1.0, device="cuda")

    def fp8_mm(a, b):
        return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    try:
        fp8_mm(a, b)
    except RuntimeError as err:
        return {"skipped": f"torch._scaled_mm failed: {str(err).splitlines()[0]}"}
    return {"ms": graph_ms(fp8_mm, [(a, b)]), "bytes": moved, "flops": flops}


def _eager_launch_ms(x, count: int) -> float:
    """Median over LAUNCH_REPEATS of (CUDA events around `count` Python launches) / count: the host's
    dispatch cost per launch when it exceeds the GPU's."""
    import statistics

    import torch

    per_launch = []
    for _ in range(LAUNCH_REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(count):
            empty_kernel[(1,)](x)
        end.record()
        end.synchronize()
        per_launch.append(start.elapsed_time(end) / count)
    return statistics.median(per_launch)


def _run_launch(case: Case) -> dict:
    """ms: `launches` empty kernels back to back in one CUDA graph, timed by do_bench (median) and
    divided by the count (the GPU's cost of a launch); eager_ms: the same from a Python loop."""
    import torch

    from validate.common.harness import graph_ms

    x = torch.empty(1, device="cuda")
    count = case.params["launches"]
    ms = graph_ms(lambda x: empty_kernel[(1,)](x), [(x,)] * count)
    return {"ms": ms, "bytes": 0, "flops": 0, "eager_ms": _eager_launch_ms(x, count)}


class Ceilings:
    name = "ceilings"

    def cases(self, quick: bool) -> list[Case]:
        sizes = QUICK_READ_SIZES if quick else READ_SIZES
        out = [Case(self.name, f"{kind}_{s // MIB}MiB", {"kind": kind, "bytes": s, "dtype": "fp32"})
               for kind in ("read", "copy") for s in sizes]
        out += [Case(self.name, f"gemm_{d}_{GEMM_SIZE}", {"kind": "gemm", "dtype": d, "size": GEMM_SIZE})
                for d in ("bf16", "fp8")]
        out.append(Case(self.name, "launch_empty", {"kind": "launch", "launches": LAUNCHES}))
        return out

    def run(self, case: Case) -> dict:
        kind = case.params["kind"]
        if kind in ("read", "copy"):
            return _run_stream(case)
        return _run_gemm(case) if kind == "gemm" else _run_launch(case)

    def predict(self, case: Case, hardware) -> dict:
        return predicted.predict(case, hardware)
