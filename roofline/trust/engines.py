"""The error bands real serving engines support, read from the lab's engine compare reports (never typed in).

Three kinds of engine report are committed (`results_folder()/engines/`):

- a real engine run here, `<device>-<engine>-<date>-compare.txt` (`python -m validate.engines compare`): one row per
  timed step (`decode   Llama-3.1-8B   8   1024   5.558   4.997 ( -10.1)   5.291 (  -4.8)`: measured ms, the
  prediction before the run and now, each with its signed error), a capacity block (the engine's logged max
  concurrency against the prediction before the run, now, and the pool rule on the logged budget) and a serving
  block (`vllm serve` runs: TTFT p50/p99, TPOT p50/p99 and output tokens/s, measured / predicted (err %)). The
  bands use the "now" columns: what the planner predicts today.
- a real engine run here summarised per run, `<device>-<engine>-<date>-runN-summary.txt` (the prediction before the
  run) and `...-runN-now-summary.txt` (the model as it stands; `python -m validate.engines.compare_sglang`): a summary
  in its own lines, then its step and serving rows again in the compare report's format, which the bands read from
  each run's "now" report; its capacity block (the engine's logged KV pool, predicted (err %)) is read apart.
- published runs on other GPUs, `public-compare.txt` (`python -m validate.engines.public`): its summary
  `Median APE per group [median signed error] (records within 15 % / records with the figure)` gives, per group
  (`other GPUs, all`, `other GPUs, A100-80GB`, `controls (H100/H200), all`, ...), the median absolute and signed
  error of TPOT, ITL and output throughput against the published figures.

A step row's model is classed MoE or dense from the catalogue (a model with an `moe` section): the engine's
error differs by class (its fused-MoE kernels are not the planner's expert GEMMs), so the bands are also given per
class and a plan of an MoE model quotes the MoE band. A row of a model the catalogue does not hold (the lab's
tiny-llama, the microbenchmark the engine profile's host costs were fitted to: in-sample, which the report's own
summary leaves out too) is left out.
"""

from __future__ import annotations

import functools
import os
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from roofline.trust.bands import band, read_report, results_folder

_NUM = r"([+-]?[\d.]+)"
_STEP = re.compile(rf"^(decode|prefill)\s+(\S+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+\(\s*{_NUM}\)\s+([\d.]+)"
                   rf"\s+\(\s*{_NUM}\)\s*(\*?)\s*$")
_CAPACITY = re.compile(rf"^\s+(\S+)\s+(\S+)\s+(\d+)\s+([\d.]+)\s+\|\s+([\d.]+)\s+([\d.]+)\s+\|"
                       rf"\s+([\d.]+)\s+\(\s*{_NUM}\)\s+([\d.]+)\s+\(\s*{_NUM}\)\s+([\d.]+)\s+\(\s*{_NUM}\)\s*$")
_PAIR = re.compile(rf"([\d.]+)\s*/\s*([\d.]+)\s*\(\s*{_NUM}\)")
_GROUP = re.compile(r"^\s+((?:other GPUs|controls)[^:]*?), ([^:]+): (.+)$")
_GROUP_ITEM = re.compile(r"(TPOT mean|TPOT median|ITL mean|out tok/s) (\d+)% \[([+-]?\d+)%\] \((\d+)/(\d+)\)")
SERVING_COLUMNS = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "throughput")
# a disaggregated pair's rows in the two-GPU reports (validate/engines/compare_x2.py): a rate's line, then one line a
# figure: `  pd-rate8  TTFT p50    66.83 ms: before -2.8 %, now -6.2 %`, `out tok/s   1925.7: before ..., now +0.3 %`
_DISAGG = re.compile(rf"^\s+(pd-\S+)?\s*(TTFT p50|TTFT p99|TPOT p50|TPOT p99|out tok/s)\s+[\d.]+(?: ms)?: "
                     rf"before {_NUM} %, now {_NUM} %\s*$")
DISAGG_COLUMNS = {"TTFT p50": "ttft_p50", "TTFT p99": "ttft_p99", "TPOT p50": "tpot_p50", "TPOT p99": "tpot_p99",
                  "out tok/s": "throughput"}


def signed_band(errors: list[float]) -> dict[str, Any] | None:
    """band() of the absolute errors plus the median signed error (negative: the prediction is under)."""
    b = band([abs(e) for e in errors])
    return None if b is None else {**b, "median_signed_pct": round(statistics.median(errors), 2)}


def engine_rows(text: str) -> dict[str, list]:
    """{"steps": [(phase, model, batch, prompt, now err %)], "capacity": [(model, now err %, rule err %)],
    "serving": [(run, {column: err %}, model)]} of a real-engine compare report (a serving row's model: its block's
    `serving (MODEL, ...)` line); a step row the report marks '*' (not judged: the engine profile's own
    microbenchmark, or a step profiled in the engine) is left out as it does."""
    steps, capacity, serving, in_serving, served, skipped = [], [], [], False, "", []
    for line in text.splitlines():
        if m := _STEP.match(line):
            # a row marked '*' is not judged by the report (the profile's own microbenchmark, collapsed routing, a
            # stalled rep: the report says why below its rows); kept apart so a trust line can count them
            (skipped if m[10] else steps).append((m[1], m[2], int(m[3]), int(m[4]), float(m[9])))
        elif m := _CAPACITY.match(line):
            capacity.append((m[1], float(m[10]), float(m[12])))
        elif line.startswith("serving ("):
            in_serving, served = True, re.split(r"[,)]", line[len("serving ("):], maxsplit=1)[0].strip()
        elif in_serving and len(pairs := _PAIR.findall(line)) == len(SERVING_COLUMNS):
            serving.append((line.split()[0], {c: float(p[2]) for c, p in zip(SERVING_COLUMNS, pairs, strict=True)},
                            served))
    return {"steps": steps, "capacity": capacity, "serving": serving, "disaggregated": disaggregated_rows(text),
            "not_judged": skipped}


def disaggregated_rows(text: str) -> list[dict[str, float]]:
    """One {column: now err %} per disaggregated rate of a two-GPU report (`runNN: disaggregated ...` blocks)."""
    rows: list[dict[str, float]] = []
    for line in text.splitlines():
        if m := _DISAGG.match(line):
            if m[1]:
                rows.append({})
            if rows:
                rows[-1][DISAGG_COLUMNS[m[2]]] = float(m[4])
    return rows


def engine_reports(stem: str | None, engine: str, folder: Path | None = None) -> tuple[Path, ...]:
    """Every committed report of `engine` run on the device whose results file stem is `stem`: each compare report
    (`engines/nvidia-h200-vllm-2026-11-28-compare.txt`, `...-2026-11-28-run2-compare.txt`) and each run's summary
    report of the model as it stands (summary_reports); sorted by name, a run's number as a number (run10 follows
    run9)."""
    folder = results_folder() if folder is None else folder
    if not stem or folder is None or not (folder / "engines").is_dir():
        return ()
    compare = list((folder / "engines").glob(f"{stem}-{engine}-*-compare.txt"))
    return tuple(sorted(compare + summary_reports(stem, engine, folder), key=_natural))


def summary_reports(stem: str | None, engine: str, folder: Path | None = None) -> list[Path]:
    """One report per run of an engine whose runs are summarised (`<stem>-<engine>-<date>-runN-summary.txt`, the
    prediction before the run, and `...-runN-now-summary.txt`, the model as it stands:
    validate/engines/compare_sglang.py): the run's "now" report where it has one, else its only one; natural order."""
    folder = results_folder() if folder is None else folder
    if not stem or folder is None or not (folder / "engines").is_dir():
        return []
    runs: dict[str, Path] = {}
    for path in sorted((folder / "engines").glob(f"{stem}-{engine}-*-summary.txt"), key=_natural):
        run = path.name.removesuffix("-summary.txt").removesuffix("-now")
        if run not in runs or path.name.endswith("-now-summary.txt"):
            runs[run] = path
    return sorted(runs.values(), key=_natural)


def engine_summary_capacity(stem: str | None, engine: str,
                            folder: Path | None = None) -> tuple[tuple[Path, ...], list[float]] | None:
    """The logged pools of an engine's summarised runs (summary_reports: each run's report of the model as it
    stands): (the reports, every capacity line's signed error %, pooled over the runs); None where none is
    committed. A capacity block is the lines after one starting `capacity` up to a blank line, each ending
    `(+0.075 %)`."""
    paths = summary_reports(stem, engine, folder)
    if not paths:
        return None
    errors = []
    for path in paths:
        lines = path.read_text().splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("capacity")), len(lines))
        for line in lines[start + 1:]:
            if not line.strip():
                break
            if found := re.search(r"\(([+-][\d.]+) %\)", line):
                errors.append(float(found[1]))
    return tuple(paths), errors


def _natural(path: Path) -> tuple:
    """A file name's sort key with its digit runs as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name))


@functools.lru_cache(maxsize=64)
def _is_moe(model_name: str) -> bool | None:
    """Whether the catalogue model of that name has an MoE section (None when the catalogue does not hold it)."""
    from roofline.catalogue import load_model
    from roofline.errors import RooflineError

    try:
        return load_model(model_name).moe is not None
    except (RooflineError, ValueError, OSError):
        return None


def files_text(paths: Sequence[Path]) -> str:
    """The reports as a text names them: one by its name, several by the pattern they share and their count
    (`engines/nvidia-h200-vllm-*-compare.txt, 10 reports`): a trust line listing every file buried its figures.
    The pattern is the names' common prefix cut back to a dash, less trailing date or number parts, and their common
    suffix from its first dash (`-compare.txt`, `-now-summary.txt`)."""
    names = [p.name for p in paths]
    if len(names) == 1:
        return f"engines/{names[0]}"
    prefix = os.path.commonprefix(names)
    prefix = re.sub(r"(\d+-)+$", "", prefix[:prefix.rfind("-") + 1])
    suffix = os.path.commonprefix([n[::-1] for n in names])[::-1]
    suffix = suffix[suffix.find("-"):] if "-" in suffix else suffix
    return f"engines/{prefix}*{suffix}, {len(names)} reports"


def engine_bands(paths: Path | Sequence[Path]) -> dict[str, Any]:
    """Bands of the real-engine reports of one device, their rows pooled (each run is real evidence): decode step
    and prefill (all models, and per class "dense" / "moe"), capacity (the prediction now, and the pool rule on the
    logged budget; all models and per class), serving TTFT, TPOT (p50 and p99 pooled) and output throughput (all
    runs and per class of the served model, serving_by_class); each with its median signed error; plus the worst step
    per phase."""
    paths = (paths,) if isinstance(paths, Path) else tuple(paths)
    rows: dict[str, list] = {"steps": [], "capacity": [], "serving": [], "disaggregated": [], "not_judged": []}
    for path in paths:
        for key, found in engine_rows(read_report(path)).items():
            rows[key] += found
    rows["steps"] = [s for s in rows["steps"] if _is_moe(s[1]) is not None]
    rows["capacity"] = [c for c in rows["capacity"] if _is_moe(c[0]) is not None]
    # timed steps of catalogue models the reports do not judge (the lab's tiny models are not counted)
    skipped = [s for s in rows["not_judged"] if _is_moe(s[1]) is not None]
    out: dict[str, Any] = {"file": ", ".join(f"engines/{p.name}" for p in paths), "reports": len(paths),
                           "files_text": files_text(paths), "models": sorted({s[1] for s in rows["steps"]}),
                           "steps_not_judged": len(skipped)}
    for phase, key in (("decode", "decode_step"), ("prefill", "prefill")):
        steps = [s for s in rows["steps"] if s[0] == phase]
        out[key] = signed_band([s[4] for s in steps])
        out[f"{key}_by_class"] = {cls: signed_band([s[4] for s in steps if _is_moe(s[1]) is want])
                                  for cls, want in (("dense", False), ("moe", True))}
        if steps:
            worst = max(steps, key=lambda s: abs(s[4]))
            out[f"{key}_worst"] = {"model": worst[1], "batch": worst[2], "prompt": worst[3], "error_pct": worst[4]}
    for key, col in (("capacity", 1), ("capacity_rule", 2)):
        out[key] = signed_band([c[col] for c in rows["capacity"]])
        out[f"{key}_by_class"] = {cls: signed_band([c[col] for c in rows["capacity"] if _is_moe(c[0]) is want])
                                  for cls, want in (("dense", False), ("moe", True))}
    out.update(serving_bands([s[1] for s in rows["serving"]]))
    out["serving_by_class"] = {cls: serving_bands([s[1] for s in rows["serving"] if _is_moe(s[2]) is want])
                               for cls, want in (("dense", False), ("moe", True))}
    pairs = rows["disaggregated"]
    out["disaggregated"] = {"rates": len(pairs), **{c: signed_band([r[c] for r in pairs if c in r])
                                                    for c in DISAGG_COLUMNS.values()}} if pairs else None
    return out


def serving_bands(serving: list[dict[str, float]]) -> dict[str, Any]:
    """TTFT and TPOT (p50 and p99 pooled) and output throughput bands of served runs' errors, and their count."""
    return {"ttft": signed_band([s[c] for s in serving for c in ("ttft_p50", "ttft_p99")]),
            "tpot": signed_band([s[c] for s in serving for c in ("tpot_p50", "tpot_p99")]),
            "throughput": signed_band([s["throughput"] for s in serving]), "serving_runs": len(serving)}


def public_groups(text: str) -> dict[str, dict[str, dict[str, Any]]]:
    """{group: {quantity: {"median_ape_pct", "median_signed_pct", "within_15_pct", "records"}}} of the published
    runs' summary (`other GPUs, A100-80GB: TPOT mean 45% [-45%] (11/60); ...`)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for line in text.splitlines():
        if not (m := _GROUP.match(line)):
            continue
        group = f"{'controls' if m[1].startswith('controls') else 'other GPUs'}, {m[2].strip()}"
        out[group] = {q: {"median_ape_pct": float(a), "median_signed_pct": float(s), "within_15_pct": int(w),
                          "records": int(n)} for q, a, s, w, n in _GROUP_ITEM.findall(m[3])}
    return out


def public_bands(hardware_name: str, controls: bool = False, folder: Path | None = None) -> dict[str, Any] | None:
    """The published runs' figures for a device: the controls' (`controls, all`: the devices measured here) when
    `controls`, else its own group (`other GPUs, <name>`) when the report has one, else every other GPU's
    (`other GPUs, all`); plus the other GPUs' overall figures; None when no report was committed."""
    folder = results_folder() if folder is None else folder
    path = None if folder is None else folder / "engines" / "public-compare.txt"
    if path is None or not path.is_file():
        return None
    groups = public_groups(read_report(path))
    order = ("controls, all",) if controls else (f"other GPUs, {hardware_name}", "other GPUs, all")
    for group in order:
        if groups.get(group):
            return {"file": f"engines/{path.name}", "group": group, "quantities": groups[group],
                    "own_device": group == f"other GPUs, {hardware_name}",
                    "other_gpus": groups.get("other GPUs, all", {})}
    return None


_LLAMACPP_FAMILY = re.compile(
    r"^(memory|decode|prefill|served): (\d+) measured cases, median APE ([\d.]+)%, p90 ([\d.]+)%$")


def llamacpp_bands(folder: Path | None = None) -> dict[str, Any] | None:
    """llama.cpp's runs as the model stands: the last `engines/<device>-llamacpp-<date>-runN-now-report.txt`
    (validate.engines.llamacpp_compare against llamacpp_predict --now) as {"file", "device", family: {"median_ape_pct",
    "p90_ape_pct", "cases"}} for memory, decode, prefill and served; None where none is committed."""
    folder = results_folder() if folder is None else folder
    paths = sorted((folder / "engines").glob("*-llamacpp-*-now-report.txt")) if folder is not None else []
    if not paths:
        return None
    out: dict[str, Any] = {"file": f"engines/{paths[-1].name}", "device": paths[-1].name.split("-llamacpp-")[0]}
    for line in read_report(paths[-1]).splitlines():
        if m := _LLAMACPP_FAMILY.match(line.strip()):
            out[m[1]] = {"median_ape_pct": float(m[3]), "p90_ape_pct": float(m[4]), "cases": int(m[2])}
    return out


_QUANT_FAMILY = re.compile(r"^(mem|decode|prefill-batched|prefill|decode-tg)\s+n\s+(\d+)\s+median \|err\| "
                           r"([\d.]+(?:e[-+]\d+)?) %\s+worst ([\d.]+(?:e[-+]\d+)?) %$")


def llamacpp_quant_bands(folder: Path | None = None) -> dict[str, Any] | None:
    """llama.cpp on GGUF-quantized weights as the model stands: the last block of the last
    `engines/<device>-llamacpp-<date>-runN-quant-report.txt` (validate.engines.llamacpp_quant compare; run 4b's decode
    B 1..64 and batched prefills) as {"file", "device", family: {"median_ape_pct", "worst_ape_pct", "cases"}}; None
    where none is committed."""
    folder = results_folder() if folder is None else folder
    paths = sorted((folder / "engines").glob("*-llamacpp-*-quant-report.txt")) if folder is not None else []
    if not paths:
        return None
    out: dict[str, Any] = {"file": f"engines/{paths[-1].name}", "device": paths[-1].name.split("-llamacpp-")[0]}
    for line in read_report(paths[-1]).splitlines():  # a later block (the model now) replaces an earlier one
        if m := _QUANT_FAMILY.match(line.strip()):
            out[m[1]] = {"median_ape_pct": float(m[3]), "worst_ape_pct": float(m[4]), "cases": int(m[2])}
    return out


# a one-stream server's row in a run report's block of the model now (validate/engines/llamacpp_slots.py now12 and
# compare13): `kvu   TTFT p50   48.32 /   49.81 (  +3.1)   TPOT p50 ...` or `kvu   k4   stale ... lone TTFT   37.9 /
# 37.7 (  -0.6) [server ...] [without 22: ...]   TPOT ...`; the bracketed figures are not the model's
_SPAN_ROW = re.compile(rf"(TTFT|TPOT)(?: p50)?\s+[\d.]+\s*/\s*[\d.]+\s*\(\s*{_NUM}\)")
_NOW_BLOCK = ("-- now", "== the model now")
# the served runs' reports with one-stream rows (runs 9, 12, 13: validate/engines/llamacpp_reports.sh), shipped in the
# wheel beside the other reports the bands read (pyproject force-include)
SPAN_REPORTS = ("nvidia-h200-llamacpp-2026-12-01-run9-report.txt", "nvidia-h200-llamacpp-2026-12-01-run12-report.txt",
                "nvidia-h200-llamacpp-2026-12-01-run13-report.txt")


def llamacpp_span_bands(folder: Path | None = None) -> dict[str, Any] | None:
    """llama-server's one KV stream (-kvu, its default; timing 22.-23.) as the model stands: the one-stream rows
    ("kvu ...") of the model-now block of each of SPAN_REPORTS (runs 9, 12, 13: pinned sets, a Poisson run, lone
    prompts and a decode beside kept cells), their TTFT and TPOT errors pooled as {"files", "ttft_tpot": band}; None
    where none is committed."""
    folder = results_folder() if folder is None else folder
    if folder is None or not (folder / "engines").is_dir():
        return None
    errors, files = [], []
    for path in (folder / "engines" / name for name in SPAN_REPORTS):
        if not path.exists():
            continue
        now, mine = False, []
        for line in read_report(path).splitlines():
            now = now or line.startswith(_NOW_BLOCK)
            if now and line.startswith("kvu "):
                mine += [float(m[2]) for m in _SPAN_ROW.finditer(re.sub(r"\[[^]]*\]", "", line))]
        if mine:
            errors += mine
            files.append(f"engines/{path.name}")
    b = signed_band(errors)
    return None if b is None else {"files": files, "ttft_tpot": b}


def llamacpp_text(hardware_name: str, b: dict[str, Any]) -> str:
    """'llama.cpp's runs on the H200 (engines/<file>): decode ±8.9 % (median; p90 18.2 %, 16 cases), ...', with
    the device they were measured on where it is not this one."""
    parts = [f"{k} ±{b[k]['median_ape_pct']:.1f} % (median; p90 {b[k]['p90_ape_pct']:.1f} %, {b[k]['cases']} cases)"
             for k in ("decode", "prefill", "served") if k in b]
    where = b["device"].replace("nvidia-", "").upper()
    note = "" if where == hardware_name.upper() else f", measured on the {where}, not on {hardware_name}"
    text = f"llama.cpp's runs ({b['file']}{note}): " + ", ".join(parts) + " (served: TTFT, TPOT, e2e, tok/s pooled)"
    q = llamacpp_quant_bands()
    if q is not None and "decode" in q:
        steps = [f"{name} ±{q[k]['median_ape_pct']:.1f} % (median; worst {q[k]['worst_ape_pct']:.1f} %, "
                 f"{q[k]['cases']} cases)" for k, name in (("decode", "decode"), ("prefill-batched", "prefill"))
                 if k in q]
        text += (f"; GGUF-quantized weights ({q['file']}, a dense 8B; a MoE's expert matmuls, MUL_MAT_ID, not "
                 "timed): " + ", ".join(steps))
    span = llamacpp_span_bands()
    if span is not None:
        t = span["ttft_tpot"]
        text += (f"; one KV stream for every slot (-kvu, the server's default; {', '.join(span['files'])}): TTFT and "
                 f"TPOT ±{t['median_ape_pct']:.1f} % (median; p90 {t['p90_ape_pct']:.1f} %, {t['cases']} cases)")
    return text


_SPREAD = re.compile(r"^lease-to-lease spread \(([^)]*)\): (.*)$")


def repeat_spreads(folder: Path | None = None) -> list[dict[str, Any]]:
    """The measurement's own spread: each `*-repeat-report.txt` under engines/ and its `lease-to-lease spread (WHAT):
    name X %, ...` line (validate/engines/run26.py repeat: the same served runs on several leases, the largest
    lease's figure over the smallest's less one, the largest over the runs), as {"file", "what", "spread_pct":
    {name: X}}; natural order."""
    folder = results_folder() if folder is None else folder
    if folder is None or not (folder / "engines").is_dir():
        return []
    out = []
    for path in sorted((folder / "engines").glob("*-repeat-report.txt"), key=_natural):
        for line in path.read_text().splitlines():
            if m := _SPREAD.match(line):
                pairs = (part.strip().rsplit(" ", 2) for part in m[2].split(","))
                out.append({"file": f"engines/{path.name}", "what": m[1],
                            "spread_pct": {name: float(value) for name, value, _pct in pairs}})
    return out
