"""python -m roofline.calibrate.measure --out raw.json [--quick] [--device cuda|cpu] [--budget-s S] [--no-allreduce]

Times the ceilings the planner reads on this machine's GPU (torch + the standard library only: runs with
PYTHONPATH=<checkout> where nothing else of roofline's dependencies is installed) and writes a raw JSON
{"format": "roofline-calibrate-raw/1", "env": {...}, "rows": [...], "skipped": [...], "figures": {...}}:
the timings (roofline.calibrate.bench_memory, bench_compute, allreduce) and the figures fitted from them
(roofline.calibrate.section). Progress goes to stderr, the summary table to stdout, last.
`roofline calibrate --from-json raw.json --base H200 --out my-gpu.yaml` turns it into a hardware file.
--device cpu times toy sizes with perf_counter: it exercises the pipeline in CI, its figures describe no GPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FORMAT = "roofline-calibrate-raw/1"
BUDGET_S = {"full": 105.0, "quick": 40.0, "cpu": 30.0}
# the parts whose figures a Measured section must have (read, copy, launch, square GEMMs): run past the budget too
REQUIRED_PARTS = ("launch", "read", "copy", "square GEMMs")


def _driver() -> str:
    """The NVIDIA driver version from nvidia-smi ('unknown' without it)."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=20, check=True).stdout.strip()
            if out:
                return out.splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return "unknown"


def environment(device: str) -> dict:
    """Device, memory, driver, torch, triton (if installed), python, date (UTC ISO) of this run."""
    import torch

    env = {"torch": torch.__version__, "python": platform.python_version(),
           "date": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(), "device_kind": device}
    try:  # recorded only (the catalogue's sections name it), never imported
        env["triton"] = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        env["triton"] = "none"
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(device=torch.cuda.get_device_name(), capability=list(torch.cuda.get_device_capability()),
                   sm_count=props.multi_processor_count, total_memory_bytes=props.total_memory,
                   l2_cache_bytes=int(getattr(props, "L2_cache_size", 0)), cuda=torch.version.cuda,
                   driver=_driver(), gpus=torch.cuda.device_count())
    else:
        env.update(device=f"cpu ({platform.processor() or platform.machine()})", driver="none", gpus=0)
    return env


# seconds the GPU idles before each session (Bench.idle): each lab figure was taken by its own process
IDLE_BETWEEN_SESSIONS_S = 2.0


def sessions():
    """(session, [(part, fn)]) in the order of the lab runs the catalogue's figures come from, each session the
    sequence of one lab process:
      clients   validate/clients/micro.py all_micro (`python -m validate.clients --part micro`, first in its
                process): the kernel chain, decode attention, prefill attention, the model GEMMs
      ceilings  `python -m validate bench --family ceilings` (validate/ops/ceilings/cases.py Ceilings.cases): read
                and copy sweeps, bf16 and fp8 square GEMMs, the launch row; then the dtypes the lab does not time
      probe     validate/clients/step_costs_gpu.py (h1, h2, h3, the NVML clock sampled throughout): the sustained
                GEMMs, the aten chains, the grouped GEMMs; then the routing kernels (torch.profiler census last)"""
    from roofline.calibrate import bench_compute as C
    from roofline.calibrate import bench_memory as M
    from roofline.calibrate.bench_routing import routing
    from roofline.calibrate.bench_sustained import sustained

    return [("clients", [("kernel chain", M.kernel_chain), ("decode attention", C.decode_attention),
                         ("prefill attention", C.flash), ("model GEMMs", C.gemm_grid)]),
            ("ceilings", [("read", lambda b: M.stream(b, "read")), ("copy", lambda b: M.stream(b, "copy")),
                          ("square GEMMs", lambda b: C.gemm_peak(b, ("bf16", "fp8"))), ("launch", M.launch),
                          ("other GEMM dtypes", lambda b: C.gemm_peak(b, ("fp16", "tf32", "fp32")))]),
            ("probe", [("sustained GEMM", sustained), ("aten chains", M.aten_chains),
                       ("grouped GEMM", C.grouped_gemm), ("routing kernels", routing)])]


def run(device: str, scale_name: str, budget_s: float, allreduce: bool) -> dict:
    """Every session (`sessions`) in order, the GPU idle IDLE_BETWEEN_SESSIONS_S before each but the first,
    within `budget_s` (later optional parts are skipped and listed once the budget is spent)."""
    import torch

    from roofline.calibrate.bench import SCALES, Bench
    from roofline.calibrate.bench_memory import context

    if device == "cuda":
        free_at_start, total = torch.cuda.mem_get_info()  # right after CUDA init, before any allocation
    b = Bench(device, SCALES[scale_name], budget_s)
    b.log(f"calibrating {device} at scale {scale_name!r}, budget {budget_s:.0f} s")
    env = environment(device)
    if device == "cuda":
        b.rows.append(context(total, free_at_start))
        b.log(f"  cuda_context {total - free_at_start} bytes of {total}")
    torch.manual_seed(0)
    if device == "cpu":
        torch.set_num_threads(1)  # one thread: less noise from a shared CI machine
    for index, (session, parts) in enumerate(sessions()):
        if index:
            b.idle(IDLE_BETWEEN_SESSIONS_S)
        if session == "probe":
            b.start_clocks()
        b.log(f"session {session}")
        for name, part in parts:
            _run_part(b, name, part)
    b.required = False
    if allreduce and device == "cuda" and torch.cuda.device_count() > 1 and not b.late("all-reduce"):
        from roofline.calibrate.allreduce import allreduce_rows

        b.log(f"all-reduce over {torch.cuda.device_count()} GPUs")
        b.rows += allreduce_rows(torch.cuda.device_count(), b.log)
    b.close()
    b.log(f"done in {b.elapsed_s():.1f} s ({len(b.rows)} rows, {len(b.skipped)} skipped)")
    return {"format": FORMAT, "scale": scale_name, "env": env, "rows": b.rows, "skipped": b.skipped,
            "elapsed_s": round(b.elapsed_s(), 2)}


def _run_part(b, name: str, part) -> None:
    """One part: skipped once past the budget unless required; an optional part that raises is skipped and
    listed, a required one raises."""
    b.required = name in REQUIRED_PARTS
    if b.late(name):
        return
    b.log(f"{name}")
    b.mark = time.perf_counter()
    try:
        part(b)
    except Exception as err:  # a part that breaks on this device (a kernel, an op) leaves the others standing
        if b.required:
            raise
        b.skip(name, f"failed: {type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}")
        b.release()


def summary(figures: dict) -> str:
    """One line per figure: name, value (rates in G or T, times in us)."""
    lines = [f"{'figure':34s} value"]
    for key, value in figures.items():
        if key in ("bandwidth_curve",) or key.endswith("source"):
            continue
        lines.append(f"{key:34s} {_show(key, value)}")
    return "\n".join(lines)


def _show(key: str, value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_show(key, v)}" for k, v in value.items())
    if not isinstance(value, float):
        return str(value)
    if key.endswith("bytes_per_s"):
        return f"{value / 1e9:.1f} GB/s"
    if key.endswith("flops_per_s"):
        return f"{value / 1e12:.1f} TFLOP/s"
    if key.endswith("_hz"):
        return f"{value / 1e6:.0f} MHz"
    if key.endswith("after_s"):
        return f"{value:.2f} s"
    if key.endswith("_s"):
        return f"{value * 1e6:.3f} us"
    return f"{value:g}"


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in its folder and a rename (nothing half-written)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # a plain new file's mode (mkstemp makes it 0600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds in (0, 3600]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text[:40]} must be in (0, 3600] seconds")
    return value


def main(argv: list[str] | None = None) -> int:
    """The script's entry point (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m roofline.calibrate.measure", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="raw JSON to write")
    p.add_argument("--quick", action="store_true", help="fewer sizes and no sustained window (CI-size on a GPU)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a toy run for CI")
    p.add_argument("--budget-s", type=_seconds, help="soft time budget, s (default 105 full, 40 quick, 30 cpu)")
    p.add_argument("--no-allreduce", action="store_true", help="skip the all-reduce even with several GPUs")
    args = p.parse_args(argv)
    return measure_to_file(args.out, args.device, args.quick, args.budget_s, not args.no_allreduce)


def device_problem(device: str) -> str | None:
    """Why this machine cannot measure on `device` (one line), or None when it can."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        return "--device: no CUDA device is visible to torch (use --device cpu for a toy run)"
    return None


def measure_to_file(out: Path, device: str, quick: bool, budget_s: float | None = None,
                    allreduce: bool = True) -> int:
    """Run, fit, write `out` and print the summary; 2 with one line on stderr when it cannot run."""
    from roofline.calibrate.section import SectionError, measured_section

    out = Path(out)
    if not out.parent.is_dir():
        print(f"roofline calibrate: error: --out: folder {out.parent} does not exist", file=sys.stderr)
        return 2
    problem = device_problem(device)
    if problem:
        print(f"roofline calibrate: error: {problem}", file=sys.stderr)
        return 2
    scale = "cpu" if device == "cpu" else "quick" if quick else "full"
    raw = run(device, scale, budget_s or BUDGET_S[scale], allreduce)
    try:
        raw["figures"] = measured_section(raw, str(out))
    except SectionError as err:
        raw["figures_error"] = str(err)
    write_atomic(out, json.dumps(raw, indent=1, default=str) + "\n")
    if "figures" in raw:
        print(f"wrote {out}; a hardware file from it: roofline calibrate --from-json {out} --out my-gpu.yaml "
              "[--base CATALOGUE-GPU]", file=sys.stderr, flush=True)
        print(summary(raw["figures"]))
    else:
        print(f"roofline calibrate: error: {raw['figures_error']} (raw timings written to {out})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
