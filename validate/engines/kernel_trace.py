"""Reads cupti_trace.c's kernel timeline: a program's steps, each step's wall, its GPU-busy time, its kernels per
category and the GPU's idle gaps — what Nsight Systems would show, on a machine without it.

A step ends where the program copies a step's result to the host: a device-to-host copy of exactly `nbytes` (llama.cpp
copies the logits, B x vocab x 4 bytes, once per llama_decode that outputs, so one process timing several batch sizes
gives each its own steps). Step n spans (end of copy n - 1, end of copy n]: its wall is what a benchmark that times
decode calls back to back sees; a kernel belongs to the step its GPU start falls in. Steps are grouped by their kernel
count (a decode step, a prompt of one ubatch, a prompt of four ...), each group summarized by its medians.
  python -m validate.engines.kernel_trace summary TRACE.tsv[.xz] --bytes N [--skip K] [--json OUT]
  python -m validate.engines.kernel_trace gaps TRACE.tsv[.xz] --bytes N [--min-kernels K] [--min-gap-us U] [--steps S]
"""

from __future__ import annotations

import argparse
import json
import lzma
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

DTOH = 2  # CUpti_ActivityMemcpyKind CUPTI_ACTIVITY_MEMCPY_KIND_DTOH
LAUNCHES = re.compile(r"^(cudaLaunchKernel|cuLaunchKernel|cudaGraphLaunch|cuGraphLaunch|cudaLaunchKernelExC|"
                      r"cuLaunchKernelEx)")
# kernel names (demangled by CUPTI) to the planner's op families; first match wins
CATEGORIES = (
    ("attention", re.compile(r"flash_attn|fattn|soft_max", re.I)),
    ("matmul", re.compile(r"mul_mat|mmq|mmvq|mmvf|mmf|gemm|gemv|cutlass|cublas|sm90_xmma|nvjet|ampere|hopper", re.I)),
    ("convert", re.compile(r"convert|cpy|to_fp16|to_fp32|dequantize|quantize_q8|quantize_mmq", re.I)),
    ("rope", re.compile(r"rope", re.I)),  # before norm: ggml's rope_norm kernels
    ("norm", re.compile(r"norm", re.I)),
    ("elementwise", re.compile(r"bin_bcast|add|mul|glu|silu|swiglu|scale", re.I)),
    ("kv-write", re.compile(r"set_rows", re.I)),
    ("rows", re.compile(r"get_rows|argmax|argsort|top_k", re.I)),
)


def category(name: str) -> str:
    for cat, rx in CATEGORIES:
        if rx.search(name):
            return cat
    return "other"


@dataclass
class Trace:
    kernels: list[tuple[int, int, str]] = field(default_factory=list)   # (start, end, name), GPU ns
    copies: list[tuple[int, int, int, int]] = field(default_factory=list)  # (start, end, bytes, kind)
    api: list[tuple[int, int, str]] = field(default_factory=list)       # (start, end, name), host ns
    dropped: int = 0


def read(path: Path) -> Trace:
    """The records of a cupti_trace.c file (plain or .xz), each list sorted by start."""
    opener = lzma.open if path.suffix == ".xz" else open
    t = Trace()
    with opener(path, "rt", errors="replace") as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[0] == "K" and len(p) >= 7:
                t.kernels.append((int(p[1]), int(p[2]), p[6]))
            elif p[0] in ("M", "S") and len(p) >= 7:
                t.copies.append((int(p[1]), int(p[2]), int(p[5]), int(p[6]) if p[0] == "M" else -1))
            elif p[0] in ("R", "D") and len(p) >= 7:
                t.api.append((int(p[1]), int(p[2]), p[6]))
            elif p[0] == "X":
                t.dropped += int(p[1])
    for lst in (t.kernels, t.copies, t.api):
        lst.sort()
    return t


def _union(intervals: list[tuple[int, int]]) -> tuple[int, list[tuple[int, int]]]:
    """Busy ns of sorted intervals and the gaps between them."""
    busy, gaps, cur_s, cur_e = 0, [], None, None
    for s, e in intervals:
        if cur_e is None:
            cur_s, cur_e = s, e
        elif s > cur_e:
            busy += cur_e - cur_s
            gaps.append((cur_e, s))
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy, gaps


def exclusive(ks: list[tuple[int, int, str]]) -> list[int]:
    """Each kernel's own ns on the GPU's timeline: its end less the later of its start and every earlier kernel's end.
    Hopper's programmatic dependent launch (ggml-cuda uses it) starts a kernel before its predecessor ends, to wait
    inside it: its interval overlaps the one before, and the raw durations add to more than the step's busy time; the
    exclusive times add to exactly the busy time."""
    out, reach = [], None
    for s, e, _ in ks:
        lo = s if reach is None else max(s, reach)
        out.append(max(0, e - lo))
        reach = e if reach is None else max(reach, e)
    return out


def boundaries(t: Trace, nbytes: int) -> list[int]:
    """Ends (GPU ns) of the device-to-host copies of exactly `nbytes`."""
    return [e for s, e, b, k in t.copies if k == DTOH and b == nbytes]


def steps(t: Trace, nbytes: int) -> list[dict]:
    """One dict per step (module docstring): its span, wall, busy, idle before the first kernel (lead) and after the
    last (tail), the kernels' raw durations summed (sum_us: more than busy where launches overlap) and their exclusive
    times by category (adding to busy), the launch calls' count and host time, the gaps over 20 us inside it."""
    ends = boundaries(t, nbytes)
    out = []
    ki = ai = 0
    for lo, hi in zip(ends, ends[1:], strict=False):
        while ki < len(t.kernels) and t.kernels[ki][0] < lo:
            ki += 1
        ks = []
        while ki < len(t.kernels) and t.kernels[ki][0] < hi:
            ks.append(t.kernels[ki])
            ki += 1
        while ai < len(t.api) and t.api[ai][0] < lo:
            ai += 1
        launches, launch_ns, j = 0, 0, ai
        while j < len(t.api) and t.api[j][0] < hi:
            if LAUNCHES.match(t.api[j][2]):
                launches += 1
                launch_ns += t.api[j][1] - t.api[j][0]
            j += 1
        busy, gaps = _union([(s, e) for s, e, _ in ks])
        by_cat: dict[str, float] = {}
        for (_, _, n), x in zip(ks, exclusive(ks), strict=True):
            c = category(n)
            by_cat[c] = by_cat.get(c, 0.0) + x / 1e3
        out.append({"span": (lo, hi), "wall_us": (hi - lo) / 1e3, "busy_us": busy / 1e3, "kernels": len(ks),
                    "lead_us": ((ks[0][0] - lo) / 1e3) if ks else None,
                    "tail_us": ((hi - max(e for _, e, _ in ks)) / 1e3) if ks else None,
                    "sum_us": sum(e - s for s, e, _ in ks) / 1e3, "by_category_us": by_cat,
                    "launch_calls": launches, "launch_host_us": launch_ns / 1e3,
                    "gaps_over_20us": [round((b - a) / 1e3, 1) for a, b in gaps if b - a > 20_000]})
    return out


def by_name(t: Trace, lo: int, hi: int) -> dict[str, tuple[int, float]]:
    """(count, exclusive GPU us) per kernel name whose start lies in [lo, hi)."""
    ks = [k for k in t.kernels if lo <= k[0] < hi]
    out: dict[str, list] = {}
    for (_, _, n), x in zip(ks, exclusive(ks), strict=True):
        c = out.setdefault(n, [0, 0.0])
        c[0] += 1
        c[1] += x / 1e3
    return {n: (c[0], c[1]) for n, c in out.items()}


def summarize(t: Trace, nbytes: int, skip: int = 2) -> dict:
    """Per kernel count (the first `skip` steps left out: warm-up), groups of two steps or more: the medians of the
    steps' figures and the per-name kernel table (calls and GPU us per step)."""
    st = steps(t, nbytes)[skip:]
    groups = []
    for n in sorted({s["kernels"] for s in st}, key=lambda n: -sum(s["kernels"] == n for s in st)):
        sel = [s for s in st if s["kernels"] == n]
        if len(sel) < 2:
            continue
        med = {k: statistics.median(s[k] for s in sel) for k in
               ("wall_us", "busy_us", "sum_us", "lead_us", "tail_us", "launch_calls", "launch_host_us")}
        cats = sorted({c for s in sel for c in s["by_category_us"]})
        med["by_category_us"] = {c: statistics.median(s["by_category_us"].get(c, 0.0) for s in sel) for c in cats}
        names: dict[str, list] = {}
        for s in sel:
            for name, (c, us) in by_name(t, *s["span"]).items():
                acc = names.setdefault(name, [0, 0.0])
                acc[0] += c
                acc[1] += us
        table = sorted(names.items(), key=lambda kv: -kv[1][1])
        groups.append({"kernels_per_step": n, "steps": len(sel), "median": med,
                       "walls_us": [round(s["wall_us"], 1) for s in sel][:64],
                       "gaps_over_20us_first": sel[0]["gaps_over_20us"][:20],
                       "per_name_per_step": [{"name": k[:160], "calls": round(c / len(sel), 2),
                                              "us": round(us / len(sel), 2), "cat": category(k)}
                                             for k, (c, us) in table[:60]]})
    return {"bytes": nbytes, "steps": len(st), "dropped": t.dropped, "groups": groups}


def gaps(t: Trace, nbytes: int, min_kernels: int = 0, min_gap_us: float = 500.0, limit: int = 4) -> list[dict]:
    """The GPU's idle gaps over `min_gap_us` inside the first `limit` steps of at least `min_kernels` kernels, each with
    where it starts in its step and the CUDA calls the host made during it (count and host us by name, the largest
    first): what the host was doing while the GPU waited (a prompt call's ubatch inputs, an eager relaunch)."""
    out = []
    for s in [s for s in steps(t, nbytes) if s["kernels"] >= min_kernels][:limit]:
        lo, hi = s["span"]
        ks = [k for k in t.kernels if lo <= k[0] < hi]
        row = {"wall_us": s["wall_us"], "busy_us": s["busy_us"], "kernels": len(ks), "gaps": []}
        for a, b in _union([(x, y) for x, y, _ in ks])[1]:
            if b - a <= min_gap_us * 1e3:
                continue
            calls: dict[str, list] = {}
            for x, y, n in t.api:
                if y >= a and x <= b:
                    c = calls.setdefault(n, [0, 0.0])
                    c[0] += 1
                    c[1] += (min(y, b) - max(x, a)) / 1e3
            top = sorted(calls.items(), key=lambda kv: -kv[1][1])[:6]
            row["gaps"].append({"us": (b - a) / 1e3, "at_us": (a - lo) / 1e3,
                                "calls": [{"name": n, "count": c, "host_us": round(u, 1)} for n, (c, u) in top]})
        out.append(row)
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="kernel_trace", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="steps between result copies (module docstring)")
    s.add_argument("trace", type=Path)
    s.add_argument("--bytes", type=int, required=True, help="the device-to-host copy that ends a step, in bytes")
    s.add_argument("--skip", type=int, default=2, help="warm-up steps left out")
    s.add_argument("--json", type=Path, help="write the summary here too")
    g = sub.add_parser("gaps", help="the GPU's idle gaps inside steps and the host's CUDA calls during them")
    g.add_argument("trace", type=Path)
    g.add_argument("--bytes", type=int, required=True, help="the device-to-host copy that ends a step, in bytes")
    g.add_argument("--min-kernels", type=int, default=0, help="only steps of at least this many kernels")
    g.add_argument("--min-gap-us", type=float, default=500.0)
    g.add_argument("--steps", type=int, default=4, help="how many such steps")
    a = p.parse_args()
    if not a.trace.is_file():
        p.error(f"trace: {a.trace} is not a file")
    if a.cmd == "gaps":
        print(json.dumps(gaps(read(a.trace), a.bytes, a.min_kernels, a.min_gap_us, a.steps), indent=1))
        return
    out = summarize(read(a.trace), a.bytes, a.skip)
    text = json.dumps(out, indent=1)
    if a.json:
        a.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
