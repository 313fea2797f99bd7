"""GPU timing harness: medians from triton.testing.do_bench, rotated inputs, the environment record,
and the results file {"env": {...}, "cases": [{family, name, params, ms, bytes, flops, ...}]}.

Timing rules (DESIGN "Validation method"): median of repeated runs (do_bench) after a warm-up, fresh
random inputs (never zeros), and working sets well past L2: when one input set is smaller than 4x the
L2, each timed run goes through ceil(4 * L2 / set) copies so that no call finds its inputs in cache.
Kernels run from a CUDA graph (`graph_ms`) so that the time is the GPU's, not Python's launch cost.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"  # validate/results
WARMUP_MS = 25
REP_MS = 100
MAX_ROTATION = 256
DEFAULT_L2_BYTES = 50 * 1024 * 1024


def median_ms(fn: Callable[[], object], warmup_ms: int = WARMUP_MS, rep_ms: int = REP_MS) -> float:
    """Median milliseconds of fn() over the repetitions do_bench fits in `rep_ms` (L2 flushed between)."""
    from triton.testing import do_bench

    from validate.common import clocks

    start = time.time()
    out = float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
    clocks.mark(start, time.time())
    return out


def l2_bytes() -> int:
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 0) or DEFAULT_L2_BYTES)


def rotation_count(set_bytes: int, l2: int | None = None, cap_bytes: int | None = None) -> int:
    """Copies of an input set to rotate among: ceil(4 * L2 / set_bytes), at least 1, at most
    MAX_ROTATION and at most what fits in `cap_bytes` (default: a quarter of the free device memory)."""
    l2 = l2_bytes() if l2 is None else l2
    if cap_bytes is None:
        import torch

        cap_bytes = torch.cuda.mem_get_info()[0] // 4
    want = -(-4 * l2 // max(set_bytes, 1))
    return max(1, min(want, MAX_ROTATION, cap_bytes // max(set_bytes, 1)))


def input_sets(make_inputs: Callable[[], tuple], set_bytes: int, l2: int | None = None) -> list[tuple]:
    """`rotation_count(set_bytes)` freshly made input sets (each a tuple of arguments)."""
    return [make_inputs() for _ in range(rotation_count(set_bytes, l2))]


def graph_ms(call: Callable[..., object], sets: list[tuple], warmup_ms: int = WARMUP_MS,
             rep_ms: int = REP_MS) -> float:
    """Median milliseconds of one call(*inputs): a CUDA graph runs `call` once on each input set in
    turn, do_bench times its replay (median, L2 flushed before each replay), divided by len(sets).

    The graph keeps the host's per-launch cost (Python argument binding, tens of microseconds) out
    of the time, so a small kernel is timed as the GPU runs it, as in a graph-captured decode step.
    """
    from validate.common import clocks

    graph = capture_graph(call, sets)
    ms = median_ms(graph.replay, warmup_ms, rep_ms)
    clocks.probe_graph(graph, ms)
    return ms / len(sets)


def capture_graph(call: Callable[..., object], sets: list[tuple]):
    """A CUDA graph of call(*inputs) on each input set in turn, after one eager pass on a side stream (compile,
    autotune and allocate before capture)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for inputs in sets:
            call(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for inputs in sets:
            call(*inputs)
    return graph


def committed_devices(devices: dict[str, str], family: str):
    """(catalogue name, hardware calibrated by its committed results file, {case name: measured ms} of `family`) for
    each item of `devices` (catalogue name -> results file name under validate/results/), for the model scripts that
    predict a kernel variant on every committed device."""
    from roofline.validation import results_file
    from validate.model import compare
    from validate.model.hardware import load_hardware

    for name, file in devices.items():
        results = results_file.load(RESULTS_DIR / file)
        measured = {r["name"]: r.get("ms") for r in results["cases"] if r["family"] == family}
        yield name, compare.calibrated(load_hardware(name), results), measured


def eager_ms(call: Callable[..., object], sets: list[tuple], warmup_ms: int = WARMUP_MS,
             rep_ms: int = REP_MS) -> float:
    """Median milliseconds of call(*inputs) launched from Python, cycling through the input sets
    (host launch overhead included when it exceeds the GPU time)."""
    cycle = itertools.cycle(sets)
    return median_ms(lambda: call(*next(cycle)), warmup_ms, rep_ms)


def script_args(argv: list[str], module: str, gpu: str, quick: bool = True,
                interpreter: bool = True) -> tuple[Path, bool] | None:
    """(OUT.json, --quick given) of a device script `python -m validate.ops.ceilings.<module> OUT.json [--quick]`
    (a dotted `module`: that module's full path; `quick`: whether it takes --quick), or None after one line on
    stderr: the usage when the arguments are wrong, "<module's last name>: needs <gpu>" without a CUDA GPU or, with
    `interpreter`, under TRITON_INTERPRET=1 (inline PTX and wgmma do not run in Triton's interpreter). The caller
    exits 2 on None."""
    import torch

    args = [a for a in argv if not (quick and a == "--quick")]
    if len(args) != 1:
        path = module if "." in module else f"validate.ops.ceilings.{module}"
        print(f"usage: python -m {path} OUT.json" + (" [--quick]" if quick else ""),
              file=sys.stderr)
        return None
    if (interpreter and os.environ.get("TRITON_INTERPRET") == "1") or not torch.cuda.is_available():
        print(f"{module.rsplit('.', 1)[-1]}: needs {gpu}", file=sys.stderr)
        return None
    return Path(args[0]), quick and "--quick" in argv


def _driver() -> str:
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20, check=True).stdout
            if out.strip():
                return out.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    import torch

    return f"unknown (torch built for CUDA {torch.version.cuda})"


def _git_sha() -> str | None:
    """ROOFLINE_GIT_SHA when set (a GPU box without git), else `git rev-parse HEAD` of this checkout."""
    sha = os.environ.get("ROOFLINE_GIT_SHA")
    if sha:
        return sha
    git = shutil.which("git")
    if not git:
        return None
    try:
        out = subprocess.run([git, "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def environment() -> dict:
    """Device, driver, torch, triton, python, date (UTC ISO) and git SHA of this measurement."""
    import torch
    import triton

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "device": torch.cuda.get_device_name(),
        "capability": list(torch.cuda.get_device_capability()),
        "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "l2_cache_bytes": l2_bytes(),
        "driver": _driver(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        "git_sha": _git_sha(),
    }


def device_slug(device: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3' (the results file name)."""
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") or "device"


def write_json(path: Path, data: dict) -> None:
    """Write atomically: a temporary file in the same folder, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _run_case(family, case) -> dict:
    import torch

    try:
        measured = family.run(case)
    except torch.cuda.OutOfMemoryError as err:
        measured = {"skipped": f"out of memory: {str(err).splitlines()[0]}"}
    except Exception as err:  # one failed case must not lose the others: record it and go on
        measured = {"error": f"{type(err).__name__}: {err}".splitlines()[0],
                    "traceback": traceback.format_exc(limit=4)}
    finally:
        torch.cuda.empty_cache()
    return {**case.as_dict(), **measured}


def _describe(row: dict) -> str:
    if "ms" in row and row["ms"] is not None:
        extra = f"  {row['bytes'] / row['ms'] / 1e6:,.0f} GB/s" if row.get("bytes") else ""
        return f"{row['ms']:.4f} ms{extra}"
    return row.get("skipped") or row.get("error") or "no result"


def bench(families: Iterable, quick: bool, out: Path | None = None, log: Callable[[str], None] = print,
          cases: list | None = None, probe: bool = False) -> dict:
    """Run every case of `families` (or exactly `cases`, each run by its family), printing one line per case; the
    results file is rewritten after each case (atomically), so a run cut short keeps what it measured."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("bench: no CUDA device visible to torch")
    env = environment()
    # a quick run never overwrites the committed full grid of the same device
    out = out or RESULTS_DIR / f"{device_slug(env['device'])}{'-quick' if quick else ''}.json"
    results = {"env": {**env, "quick": quick}, "cases": []}
    families = list(families)
    if cases is not None:
        by_name = {f.name: f for f in families}
        plan = [(by_name[case.family], case) for case in cases]
    else:
        plan = [(family, case) for family in families for case in family.cases(quick)]
    log(f"bench: {len(plan)} cases on {env['device']} -> {out}")
    from validate.common.clocks import PROBE, Sampler, take_probes, take_windows

    PROBE["on"] = probe
    if probe:
        from validate.common.clocks import idle_probe

        results["env"]["clock_probe"] = idle_probe()  # the effective SM clock with nothing else running
        log(f"bench: clock probe {results['env']['clock_probe']}")
    sampler = Sampler().start()
    try:
        for i, (family, case) in enumerate(plan, 1):
            log(f"[{i}/{len(plan)}] {family.name}/{case.name} ...")
            take_windows()
            take_probes()
            row = _run_case(family, case)
            clock = {**(sampler.case_clocks() or {}), **take_probes()}
            if clock:
                row["clocks"] = clock  # SM clock and power while it was timed (validate.common.clocks)
            results["cases"].append(row)
            write_json(out, results)
            log(f"[{i}/{len(plan)}] {family.name}/{case.name}: {_describe(row)}")
            sys.stdout.flush()
    finally:
        sampler.stop()
    return results
