"""The band of each quantity a command prints, from the validation that covers it (read at run time, never typed).

Quantities: `decode_step` (a decode step, TPOT), `prefill` (a prefill, the plan's TTFT of the batch), `capacity`
(the longest context / most sequences that fit, an engine's pool), and the serving figures `ttft`, `tpot`,
`throughput` (output tokens/s) of `simulate`. Each band is {"median_ape_pct", "p90_ape_pct", "cases",
"median_signed_pct" (negative: the prediction is under), "basis" (what was compared), "file"}, or None: not
validated for that device and engine.

- No engine, or an engine no real run covers: the real decoders timed on the device (clients/<device>-compare.txt:
  steps, and the memory boundary at the planner's default reserve for capacity) where its ceilings were measured;
  the devices measured here pooled for a user's calibration; nothing for derived, estimated or datasheet ceilings.
- `--engine vllm`: the real vLLM run on the device where one was committed (engines/<device>-vllm-<date>-compare.txt,
  per model class for steps), else the published vLLM runs on that GPU (engines/public-compare.txt: TPOT and output
  throughput medians; no step, prefill or capacity figure there).
- `--engine sglang`: SGLang's runs on the device where some were committed (each run's report of the model as it
  stands, engines/<device>-sglang-<date>-runN-now-summary.txt: steps, served runs, and its logged KV pools for
  capacity); a single run's band says "one run, not yet a band"; elsewhere the real decoders' bands, as for an engine
  never run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roofline.trust.bands import capacity_band, decoder_bands, pooled_decoder_bands
from roofline.trust.engines import (
    engine_bands,
    engine_reports,
    engine_summary_capacity,
    files_text,
    llamacpp_bands,
    llamacpp_quant_bands,
    public_bands,
    signed_band,
)
from roofline.trust.source import measured_devices, source_kind

QUANTITIES = ("decode_step", "prefill", "capacity", "ttft", "tpot", "throughput")
VALIDATED_ENGINES = ("vllm", "sglang")
ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
# what each engine's served rows time (a serving band's basis)
SERVED_BY = {"vllm": "vllm serve", "sglang": "SGLang's launch_server under sglang.bench_serving"}
PUBLIC_TPOT = ("TPOT median", "TPOT mean")


def _with(b: dict[str, Any] | None, basis: str, file: str | None) -> dict[str, Any] | None:
    return None if b is None else {**{k: v for k, v in b.items() if k != "file"}, "basis": basis, "file": file}


def fmt(b: dict[str, Any] | None) -> str:
    """'±2.8 %', or '40 % under' / '86 % over' when the median error has one sign (a bias, not a spread)."""
    if not b:
        return "not validated"
    ape, signed = b["median_ape_pct"], b.get("median_signed_pct")
    if signed is not None and ape >= 5 and abs(signed) >= 0.8 * ape:
        return f"{ape:.0f} % {'under' if signed < 0 else 'over'}"
    return f"±{ape:.2f} %" if ape < 0.1 else f"±{ape:.1f} %"


def fmt_tail(b: dict[str, Any] | None) -> str:
    """fmt(b), and its p90 beside where the tail is more than twice the median ('±8.2 % (p90 40 %)'): a served
    figure's misses sit in a few loaded runs, which the median alone hides."""
    text = fmt(b)
    p90 = (b or {}).get("p90_ape_pct")
    if p90 is not None and p90 > 2 * max(b["median_ape_pct"], 1.0):
        return f"{text} (p90 {p90:.0f} %)"
    return text


def stem(hardware) -> str | None:
    """The stem of the device's measured results file (`validate/results/nvidia-h200.json` -> nvidia-h200)."""
    m = hardware.measured
    return None if m is None else _stem(m.source)


def _stem(source: str | None) -> str | None:
    words = (source or "").split()
    return Path(words[0]).stem if words else None


def decoder_quantities(hardware, fusion: str) -> dict[str, dict[str, Any] | None]:
    """The bands the real decoders support for a device as the plan uses it (see the module docstring)."""
    out: dict[str, dict[str, Any] | None] = dict.fromkeys(QUANTITIES)
    kind, m = source_kind(hardware), hardware.measured
    if kind == "measured":
        bands = decoder_bands(m.client_source, fusion) or {}
        basis = f"real decoders on {hardware.name}, {' and '.join(bands.get('modes', []))}"
        out["decode_step"] = _with(bands.get("decode"), basis, bands.get("file"))
        out["prefill"] = _with(bands.get("prefill"), basis, bands.get("file"))
        cap = capacity_band(m.client_source)
        out["capacity"] = _with(cap, f"longest context a real decoder held on {hardware.name} at the default reserve",
                                cap and cap["file"])
    elif kind == "calibrated":
        devices = measured_devices()
        pooled = pooled_decoder_bands([c for _n, _s, c in devices if c], fusion) or {}
        basis = f"real decoders on {', '.join(n for n, _s, _c in devices)} (not your device)"
        out["decode_step"] = _with(pooled.get("decode"), basis, None)
        out["prefill"] = _with(pooled.get("prefill"), basis, None)
    return out


def _model_class(model) -> str | None:
    return None if model is None else ("moe" if model.moe is not None else "dense")


def engine_quantities(hardware, engine: str,
                      model=None) -> tuple[dict[str, dict[str, Any] | None], dict[str, Any]]:
    """(bands, {"engine", "own_run": engine_bands or None, "pool": the summarised runs' logged-pool band or None,
    "published": public_bands or None (vLLM's only), "model_class"}) under a validated engine. A band of one report
    says so in its basis ("one run, not yet a band")."""
    out: dict[str, dict[str, Any] | None] = dict.fromkeys(QUANTITIES)
    measured = source_kind(hardware) == "measured"
    paths = engine_reports(stem(hardware), engine) if measured else ()
    own = engine_bands(paths) if paths else None
    cls, name, where = _model_class(model), ENGINE_NAMES[engine], hardware.name
    # the devices measured here are the published runs' controls (H100/H200); other GPUs have their own group
    published = public_bands(where, controls=measured) if engine == "vllm" else None
    summary = engine_summary_capacity(stem(hardware), engine) if measured else None
    pool = signed_band(summary[1]) if summary else None
    if own is not None:
        one = "; one run, not yet a band" if own["reports"] == 1 else ""
        for key in ("decode_step", "prefill"):
            b = own[f"{key}_by_class"].get(cls) if cls else own[key]
            of = (f", {cls} models" if b else f", no {'MoE' if cls == 'moe' else cls} model run") if cls else ""
            out[key] = _with(b or own[key], f"{name} on {where}{of}{one}", own["file"])
        b = own["capacity_by_class"].get(cls) if cls else None
        if b or own["capacity"]:
            out["capacity"] = _with(b or own["capacity"], f"{name}'s logged max concurrency on {where}"
                                    + (f", {cls} models" if b else "") + one, own["file"])
        elif pool is not None:
            of = ", one engine run, not yet a band" if len(summary[0]) == 1 else ""
            out["capacity"] = _with(pool, f"{name}'s logged KV pools on {where} ({pool['cases']} pools{of})",
                                    files_text(summary[0]))
        served = _served(own, cls)
        of = ", one engine run, not yet a band" if own["reports"] == 1 else ""
        of += f", {cls} models" if served is not own else ""
        of += ", one served run, not yet a band" if served["serving_runs"] == 1 else ""
        for key in ("ttft", "tpot", "throughput"):
            out[key] = _with(served[key], f"{SERVED_BY[engine]} on {where} ({served['serving_runs']} served runs{of})",
                             own["file"])
    elif published is not None and (published["own_device"] or published["group"].startswith("controls")):
        q = published["quantities"]
        tpot = next((q[k] for k in PUBLIC_TPOT if k in q), None)
        group = published["group"].split(", ", 1)[1] if published["own_device"] else "H100/H200"
        basis = f"published vLLM runs on {group}"
        out["tpot"] = out["decode_step"] = _with(_public(tpot), basis + " (TPOT)", published["file"])
        out["throughput"] = _with(_public(q.get("out tok/s")), basis + " (output tok/s)", published["file"])
    return out, {"engine": engine, "own_run": own, "pool": pool, "published": published, "model_class": cls}


def _public(q: dict[str, Any] | None) -> dict[str, Any] | None:
    """A published-runs group figure as a band (the summary gives medians, not the 90th percentile)."""
    if q is None:
        return None
    return {"median_ape_pct": q["median_ape_pct"], "p90_ape_pct": None, "cases": q["records"],
            "median_signed_pct": q["median_signed_pct"], "within_15_pct": q["within_15_pct"]}


def quantity_bands(hardware, fusion: str = "typical", engine: str | None = None,
                   model=None) -> tuple[dict[str, dict[str, Any] | None], dict[str, Any] | None]:
    """(bands per quantity, the engine validation or None) for a device, fusion level, engine and model: under vLLM
    always its own (its runs here, else the published runs); under another validated engine its runs on this device
    where some are committed, else the real decoders' (as for an engine never run)."""
    if engine in VALIDATED_ENGINES:
        bands, info = engine_quantities(hardware, engine, model)
        if engine == "vllm" or info["own_run"] is not None:
            return bands, info
    return decoder_quantities(hardware, fusion), None


def published_text(published: dict[str, Any] | None) -> str:
    """'published vLLM runs on A100-80GB: TPOT 44 % under, ITL 42 % under, output tok/s 86 % over at the median
    (8 of 56 TPOT within 15 %)'."""
    if published is None:
        return "no published vLLM run compared"
    group = published["group"]
    where = {"controls, all": "on H100/H200, the controls", "other GPUs, all": "on other GPUs"}.get(
        group, f"on {group.split(', ', 1)[1]}")
    q = published["quantities"]
    tpot_key = next((k for k in PUBLIC_TPOT if k in q), None)
    parts = [f"{name} {fmt(_public(q[key]))}" for key, name in ((tpot_key, "TPOT"), ("ITL mean", "ITL"),
                                                               ("out tok/s", "output tok/s")) if key in q]
    within = f" ({q[tpot_key]['within_15_pct']} of {q[tpot_key]['records']} TPOT within 15 %)" if tpot_key else ""
    return f"published vLLM runs {where} ({published['file']}): {', '.join(parts)} at the median{within}"


def _class_text(own: dict[str, Any], key: str, cls: str | None) -> str:
    """'±2.8 % dense, 34 % over MoE' with this model's class first."""
    classes = own[f"{key}_by_class"]
    order = [c for c in (cls, "dense", "moe") if c][:1] + [c for c in ("dense", "moe") if c != cls]
    parts = [f"{fmt(classes[c])} {'MoE' if c == 'moe' else c}" for c in dict.fromkeys(order) if classes.get(c)]
    return ", ".join(parts) or fmt(own[key])


def engine_text(hardware_name: str, engine_info: dict[str, Any]) -> str:
    """The trust line's engine part under a validated engine: its runs on this device (per model class, the worst
    prefill, capacity, serving; "one run, not yet a band" for a single report) and vLLM's published runs; or, with
    no vLLM run here, the published runs on this GPU."""
    own, published, cls = engine_info["own_run"], engine_info["published"], engine_info["model_class"]
    name = ENGINE_NAMES[engine_info["engine"]]
    if own is None:
        return f"{name} not run on {hardware_name} here; {published_text(published)}"
    worst = own.get("prefill_worst")
    worst_text = (f" (worst {worst['error_pct']:+.0f} %, {worst['model']} P {worst['prompt']:,})" if worst else "")
    skipped = own.get("steps_not_judged", 0)
    skipped_text = (f"; {skipped} timed step{'s' if skipped != 1 else ''} not judged (each report says why)"
                    if skipped else "")
    others = published and published.get("other_gpus")
    other_text = ""
    if others:
        tpot_key = next((k for k in PUBLIC_TPOT if k in others), None)
        if tpot_key:
            other_text = (f"; published runs on other GPUs: TPOT {fmt(_public(others[tpot_key]))} at the median "
                          f"({others[tpot_key]['records']} runs, {published['file']})")
    runs = f"{name} run" if own["reports"] == 1 else f"{name} runs"
    one = "; one run, not yet a band" if own["reports"] == 1 else ""
    models = f"{len(own['models'])} model" + ("" if len(own["models"]) == 1 else "s")
    pool = engine_info.get("pool")
    served = _served(own, cls)
    capacity = (f"capacity {fmt(pool)} ({pool['cases']} logged KV pools)" if pool and not own["capacity"] else
                f"capacity {fmt(own['capacity'])}")
    return (f"{runs} on {hardware_name} ({own['files_text']}{one}; {models}): decode step "
            f"{_class_text(own, 'decode_step', cls)}; prefill {_class_text(own, 'prefill', cls)}{worst_text}"
            f"{skipped_text}; "
            f"{capacity}; serving ({_served_text(own, cls)}) TTFT {fmt_tail(served['ttft'])}, "
            f"TPOT {fmt_tail(served['tpot'])}, output tok/s {fmt_tail(served['throughput'])}{other_text}")


def _served(own: dict[str, Any], cls: str | None) -> dict[str, Any]:
    """The serving bands a model of class `cls` quotes: its class's runs where the engine served one (an MoE's
    routed experts and their eager prefill cost differently: run 19), else every run's (`own` itself)."""
    by = own.get("serving_by_class", {}).get(cls) if cls else None
    return by if by and by["serving_runs"] else own


def _served_text(own: dict[str, Any], cls: str | None) -> str:
    """'N runs', '... of CLASS models', and 'one run, not yet a band' where one run is all there is."""
    served = _served(own, cls)
    n = served["serving_runs"]
    text = f"{n} runs" + (f" of {'MoE' if cls == 'moe' else cls} models" if served is not own else "")
    return text if n != 1 else text.replace("1 runs", "1 run") + ", not yet a band"


def capacity_trust(hardware, engine: str, model=None, budget_logged: bool = False) -> dict[str, Any]:
    """{"source", "engine", "capacity": band or None, "text"} for `roofline capacity`: under vLLM the concurrency
    its start-up log reported (the prediction now where the engine ran on this device; the pool rule alone when the
    budget is given, as it was checked on the logged budget); the real decoders' memory boundary for `ideal` on a
    measured device; otherwise not validated."""
    kind = source_kind(hardware)
    paths = engine_reports(stem(hardware), engine) if engine in VALIDATED_ENGINES else ()
    if not paths and engine in VALIDATED_ENGINES and budget_logged:  # the pool rule is arithmetic: any device's
        paths = tuple(p for _n, source, _c in measured_devices() for p in engine_reports(_stem(source), engine))
    own = engine_bands(paths) if paths else None
    out: dict[str, Any] = {"source": "logged budget" if budget_logged else kind, "engine": engine, "capacity": None}
    key = "capacity_rule" if budget_logged else "capacity"
    if own is not None and own[key]:
        cls = _model_class(model)
        band = own[f"{key}_by_class"].get(cls) if cls else None  # this model's class where runs of it exist
        what = ("the pool rule on the logged KV budget" if budget_logged else
                f"max concurrency predicted on {hardware.name}") + (f", {cls} models" if band else "")
        band = band or own[key]
        out["capacity"] = _with(band, f"{engine}'s logged max concurrency against {what}", own["file"])
        out["text"] = (f"capacity {fmt(band)} against {engine}'s logged max concurrency ({what}; "
                       f"{band['cases']} runs, {own['files_text']})")
    elif engine == "llamacpp" and (runs := llamacpp_bands()) is not None and "memory" in runs:
        # llama.cpp sizes its cache from -c, not from memory: what its runs check is the buffers it allocates
        where = runs["device"].replace("nvidia-", "").upper()
        note = "" if where == hardware.name.upper() else f", measured on the {where}"
        quant = llamacpp_quant_bands()
        gguf = (f"; GGUF-quantized weights' buffers {quant['mem']['worst_ape_pct']:.3f} % at worst in "
                f"{quant['mem']['cases']} cases ({quant['file']})" if quant and "mem" in quant else "")
        out["text"] = (f"capacity: llama.cpp's KV, weight and compute buffers and cells as its start-up logs on its "
                       f"runs ({runs['file']}{note}; memory median {runs['memory']['median_ape_pct']:.1f} %, p90 "
                       f"{runs['memory']['p90_ape_pct']:.1f} % over {runs['memory']['cases']} cases; the compute "
                       f"buffers by its reserve rule for a Llama-style graph, other architectures budgeted above "
                       f"it, unlogged){gguf}")
    elif engine == "ideal" and not budget_logged:
        band = decoder_quantities(hardware, "typical")["capacity"]
        out["capacity"] = band
        out["text"] = (f"capacity {fmt(band)} ({band['basis']}, {band['file']})" if band else
                       f"capacity not validated on {hardware.name} (no real decoder's memory boundary measured)")
    else:
        where = "a logged budget" if budget_logged else hardware.name
        summary = None if budget_logged else engine_summary_capacity(stem(hardware), engine)
        if summary and summary[1]:
            paths, errors = summary
            worst, one = max(errors, key=abs), len(paths) == 1
            out["capacity"] = _with(signed_band(errors), f"{engine}'s logged KV pool on {where} ({len(errors)} pools"
                                    + ("; one run, not yet a band)" if one else ")"), files_text(paths))
            out["text"] = (f"capacity {worst:+.2f} % at worst on {len(errors)} logged pools of "
                           + (f"a real {engine} run" if one else f"{len(paths)} real {engine} runs")
                           + f" on {where} ({files_text(paths)}" + ("; one run, not yet a band)" if one else ")"))
        else:
            out["text"] = (f"capacity not validated: no real {engine} run on {where} committed here (the pool rules "
                           f"follow the engine's source, cited in `rules`)")
    return out


def disaggregated_bands(hardware, engine: str) -> dict[str, Any] | None:
    """The disaggregated pairs of `engine`'s reports on this device (engine_bands' "disaggregated": TTFT, TPOT p50 /
    p99 and output throughput, the model as it stands against each rate run), None where none was run."""
    paths = engine_reports(stem(hardware), engine) if source_kind(hardware) == "measured" else ()
    return engine_bands(paths)["disaggregated"] if paths else None


def disaggregated_text(pairs: dict[str, Any]) -> str:
    """`9 rates: TTFT p50 ±6.2 % (median -6.2 %, p90 41.6 %), ...`: each figure's median absolute error, its
    median signed error and its p90."""
    parts = [f"{label} ±{b['median_ape_pct']:.1f} % (median {b['median_signed_pct']:+.1f} %, p90 "
             f"{b['p90_ape_pct']:.1f} %)" for label, key in (("TTFT p50", "ttft_p50"), ("TTFT p99", "ttft_p99"),
                                                           ("TPOT p50", "tpot_p50"), ("TPOT p99", "tpot_p99"),
                                                           ("output tok/s", "throughput")) if (b := pairs[key])]
    return f"{pairs['rates']} rates: " + ", ".join(parts)
