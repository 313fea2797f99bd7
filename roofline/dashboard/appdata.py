"""What the dashboard (app/) shows, computed here and tested without Streamlit (STYLE 14: the app only draws).

Inputs are hashable (catalogue names, upload text, SPEC strings, numbers) so the app can cache each call with
st.cache_data; specs are rebuilt from them here. Uploads are parsed as data only (roofline.catalogue.loading: safe YAML
or strict JSON, at most MAX_SPEC_BYTES) and every failure is one SpecError line for an inline error.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from roofline.catalogue.loading import MAX_SPEC_BYTES, parse_json_object, parse_text, validate
from roofline.errors import RooflineError, SpecError, one_line
from roofline.specs import Hardware, Model, Workload

GIB = 1 << 30
APP_ENTRY = "main.py"
UPLOAD_LIMIT_MB = max(1, MAX_SPEC_BYTES >> 20)  # server.maxUploadSize: the server refuses larger bodies
# planned on first render (< 3 s together): SKVQ, AQUA-KV and InnerQ plans take 1 s or more each (the symbolic
# integral of the averaged TPOT, planner.timing), so they are a click away rather than defaults
DEFAULT_METHODS = ("bf16", "fp8", "kivi-2", "xquant-2", "zack-50")
ROOFLINE_EXTRA = ("aquakv-2",)  # added on the roofline page: its predictor ops are the point of that chart
WORKLOAD_DEFAULTS = {"batch": 16, "context_tokens": 32_768, "generated_tokens": 1024, "tp": 1, "pp": 1,
                     "gpu_memory_utilization": 0.0}  # 0: the engine's own default (workload_from)
Source = tuple[str, ...]  # ("catalogue", name), ("upload", filename, text) or ("upload", filename, text, quant text)
QUANT_CONFIG = "hf_quant_config.json"  # a ModelOpt export's quantization settings, beside its config.json


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent.parent


def app_path() -> Path:
    """The dashboard's entry script: `roofline/_app/main.py` when the wheel ships it, else the checkout's app/."""
    for candidate in (Path(__file__).resolve().parent.parent / "_app" / APP_ENTRY, repo_root() / "app" / APP_ENTRY):
        if candidate.is_file():
            return candidate
    raise RooflineError("app: the dashboard (app/main.py) is not installed; run it from a checkout of the repository")


def streamlit_command(port: int | None = None, python: str | None = None) -> list[str]:
    """`python -m streamlit run <entry>` bound to 127.0.0.1 (never all interfaces), headless, no telemetry, uploads
    limited to the spec size on the server, no full garbage collection after each run, no source-file watcher, the
    viewer's toolbar (no Deploy button) (app/.streamlit/config.toml says the same for `streamlit run`)."""
    cmd = [python or sys.executable, "-m", "streamlit", "run", str(app_path()), "--server.address", "127.0.0.1",
           "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--server.maxUploadSize", str(UPLOAD_LIMIT_MB), "--runner.postScriptGC", "false",
           "--server.fileWatcherType", "none", "--client.toolbarMode", "viewer"]
    if port is not None:
        cmd += ["--server.port", str(port)]
    return cmd


def catalogue_source(name: str) -> Source:
    return ("catalogue", name)


def upload_source(filename: str, data: bytes, quant: bytes | None = None) -> Source:
    """An uploaded spec file as a Source: size-limited, UTF-8, and it must validate (else SpecError). `quant`: the
    hf_quant_config.json uploaded with a config.json (a ModelOpt export keeps its quantization only there)."""
    texts = []
    for name, blob in ((filename, data), (QUANT_CONFIG, quant)):
        if blob is None:
            continue
        if len(blob) > MAX_SPEC_BYTES:
            raise SpecError(f"{name}: (file): {len(blob)} bytes exceeds the {MAX_SPEC_BYTES}-byte limit for a spec")
        try:
            texts.append(blob.decode("utf-8"))
        except UnicodeDecodeError:
            raise SpecError(f"{name}: (file): not UTF-8 text") from None
    return ("upload", filename, *texts)


def upload_pair(files: list[tuple[str, bytes]]) -> Source:
    """The model uploader's files as one Source: a spec or config.json alone, or a config.json with the
    hf_quant_config.json of its checkpoint; anything else is refused in one line naming the files."""
    names = [n for n, _ in files]
    quant = [b for n, b in files if n == QUANT_CONFIG]
    specs = [(n, b) for n, b in files if n != QUANT_CONFIG]
    if len(specs) != 1 or len(quant) > 1:
        raise SpecError(f"{', '.join(names)}: (files): upload one spec or config.json, with at most one "
                        f"{QUANT_CONFIG} beside a config.json")
    if quant and not specs[0][0].lower().endswith(".json"):
        raise SpecError(f"{QUANT_CONFIG}: (file): goes with a Hugging Face config.json, not {specs[0][0]}")
    return upload_source(specs[0][0], specs[0][1], quant[0] if quant else None)


def spec_from_text(kind: str, text: str, filename: str, quant_text: str | None = None) -> Hardware | Model:
    """Validate uploaded text as a Hardware or Model spec (YAML or JSON; a model may be a HF config.json, with
    `quant_text` its checkpoint's hf_quant_config.json, read as the CLI reads the file beside a config.json)."""
    is_json = filename.lower().endswith(".json")
    data = (parse_json_object(text, filename, constants_as_text=kind == "model") if is_json
            else parse_text(text, filename))
    if kind == "hardware":
        return validate(Hardware, data, filename)
    if kind != "model":
        raise ValueError(f"kind: {kind!r} is not 'hardware' or 'model'")
    if "architectures" in data or "model_type" in data:
        from roofline.catalogue.hf import model_from_hf_config

        # an upload has no parent folder to name it: the file's stem, unless the config names itself
        stem = Path(filename).stem
        name = None if data.get("_name_or_path") else stem if stem.lower() != "config" else "uploaded-model"
        quant = None
        if quant_text is not None and "quantization_config" not in data:
            quant = parse_json_object(quant_text, QUANT_CONFIG)
        try:
            return model_from_hf_config(data, where=filename, name=name, hf_quant_config=quant)
        except (ValueError, TypeError, KeyError) as err:  # SpecError included; anything else as one line
            raise SpecError(one_line(str(err)) if isinstance(err, SpecError) else f"{filename}: {err}") from None
    if quant_text is not None:
        raise SpecError(f"{QUANT_CONFIG}: (file): goes with a Hugging Face config.json; {filename} is a Model spec")
    if is_json:  # a Model spec in JSON: no Infinity or NaN
        data = parse_json_object(text, filename)
    return validate(Model, data, filename)


def load_source(kind: str, source: Source) -> Hardware | Model:
    """The spec of a Source: a catalogue entry (catalogue_spec) or an upload (validated from its text)."""
    if source[0] == "catalogue":
        return catalogue_spec(kind, source[1])
    return spec_from_text(kind, source[2], source[1], source[3] if len(source) > 3 else None)


def catalogue_spec(kind: str, name: str) -> Hardware | Model:
    """A catalogue spec, its validated form kept by the file's content (numbers.codegen.cached_json: memory, then
    disk): the strict YAML loader is pure Python (30-70 ms for a hardware file with measured curves), revalidating
    the kept JSON takes 0.1 ms; the dashboard's warm-up process fills every entry. An edited file is a new key."""
    import hashlib

    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.store import catalogue_dir
    from roofline.numbers import codegen

    load, cls = (load_hardware, Hardware) if kind == "hardware" else (load_model, Model)
    path = catalogue_dir("hardware" if kind == "hardware" else "models") / f"{name}.yaml"
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return load(name)  # not a catalogue file: the catalogue's own error
    key = codegen.content_key("catalogue-spec", kind, name, digest)
    return cls.model_validate(codegen.cached_json(key, lambda: load(name).model_dump(mode="json")))


def source_label(source: Source) -> str:
    return source[1] if source[0] == "catalogue" else f"uploaded: {source[1]}"


def workload_from(fields: Mapping[str, Any]) -> Workload:
    """A Workload from the app's fields (batch, context_tokens, generated_tokens, tp, pp, utilization); pipeline
    stages get min(pp, batch) micro-batches, as `roofline plan` gives them."""
    data = {**WORKLOAD_DEFAULTS, **fields}
    if not data["gpu_memory_utilization"]:  # the box's 0: the engine's default (Workload's None)
        data["gpu_memory_utilization"] = None
    if data.get("engine", "ideal") != "ideal" and "page_tokens" not in fields:  # as `roofline plan --engine` sets it
        from roofline.engines import PAGE_TOKENS

        data["page_tokens"] = PAGE_TOKENS[data["engine"]]
    if data["pp"] > 1 and "micro_batches" not in fields:
        data["micro_batches"] = min(data["pp"], data["batch"])
    return validate(Workload, data, "workload")


def split_specs(text: str) -> list[str]:
    """Custom SPECs typed one per line or separated by ';' (a SPEC itself may hold ',' and '+')."""
    return [part.strip() for line in text.splitlines() for part in line.split(";") if part.strip()]


def check_spec(spec: str) -> str:
    """The SPEC if it parses (raises SpecError with the one-line reason if not)."""
    from roofline.methods import parse_method

    parse_method(spec)
    return spec


def applicable_presets(model: Model) -> list[str]:
    """Every preset that applies to `model` (methods.applies), by name: the 'Compare all methods' action."""
    from roofline.methods import applies, parse_method, presets

    return [name for name in sorted(presets()) if applies(parse_method(name), model) is None]


def select_all_methods(state: Any, model: Model) -> None:
    """Sets the scenario's methods to every preset that applies to `model` (a button's on_click, before the
    sidebar's form is drawn)."""
    state["methods"] = applicable_presets(model)


def model_workload(model: Model, fields: Mapping[str, Any]) -> Workload:
    """workload_from, with a quantized checkpoint's weights at their stored widths while the weight dtype is left at
    its bf16 default, as `roofline plan` plans it (stored_bytes.stored_widths): an FP8 or NVFP4 checkpoint's
    upload was planned at bf16 on every page."""
    from roofline.stored_bytes import stored_widths

    return stored_widths(model, workload_from(fields))[0]


def method_result(model: Model, hardware: Hardware, workload: Workload, spec: str) -> dict[str, Any]:
    """`roofline plan`'s result for one method (planner.plan_method)."""
    from roofline.methods import parse_method
    from roofline.planner import plan_method

    return plan_method(model, hardware, workload, parse_method(spec)).as_dict()


def plan_dict(model: Model, hardware: Hardware, workload: Workload, results: Sequence[dict]) -> dict[str, Any]:
    """The same shape as planner.plan (and `roofline plan --json`): planner.plan.plan_header plus the results."""
    from roofline.planner.plan import plan_header

    return {**plan_header(model, hardware, workload), "results": list(results)}


def summary_rows(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per method: capacity at the scenario, latency, throughput, and what bounds the decode step (None
    for each decode figure of a plan that generates no token: report.answer.drop_decode)."""
    rows = []
    for r in plan["results"]:
        d = r["decode"]
        rows.append({
            "method": r["method"], "family": r["family"], "effective bits": r["effective_bits"],
            "KV per sequence (GiB)": r["kv_bytes_per_sequence"] / GIB, "max context at batch": r["max_context"],
            "max batch at context": r["max_batch"], "fits": r["fits"], "TTFT (s)": r["ttft_s"],
            "TPOT (ms)": None if d is None else r["tpot_s"] * 1e3,
            "TPOT avg (ms)": None if d is None else r["tpot_avg_s"] * 1e3, "tokens/s": r["tokens_per_s"],
            "tokens/s at max batch": r["tokens_per_s_max_batch"], "bound": None if d is None else d["bound"],
            "dominant op": None if d is None else f"{d['dominant_op']} ({d['dominant_share']:.0%})",
        })
    return rows


def memory_rows(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One GPU's memory by segment and method (roofline.report.plots.memory_segments), in GiB, stacking order kept."""
    from roofline.report.plots import SEGMENTS, memory_segments

    rows = []
    for r in plan["results"]:
        seg = memory_segments(r)
        name = r["method"] if r["fits"] else f"{r['method']} (does not fit: max batch {r['max_batch']})"
        rows += [{"method": r["method"], "label": name, "segment": label, "order": i, "colour": colour,
                  "GiB": seg[key] / GIB} for i, (key, label, colour) in enumerate(SEGMENTS) if seg[key] > 0]
    return rows


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else "-inf" if value < 0 else "nan"
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def plan_json(plan: Mapping[str, Any]) -> str:
    """The plan as strict JSON (infinite contexts as the string "inf", as `roofline plan --json` writes them)."""
    return json.dumps(_finite(plan), indent=2, allow_nan=False)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(value, list | tuple):
        return {prefix[:-1]: "; ".join(str(v) for v in value)}
    return {prefix[:-1]: value}


def rows_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """Any table of the app as CSV (nested values flattened with dotted names, infinities as "inf")."""
    flat = [_flatten(_finite(dict(r))) for r in rows]
    columns = list(dict.fromkeys(k for row in flat for k in row))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)
    return buf.getvalue()


def rows_json(rows: Any) -> str:
    """Any table or record of the app as strict JSON (infinities as "inf")."""
    return json.dumps(_finite(rows), indent=2, allow_nan=False, default=str)


def plan_csv(plan: Mapping[str, Any]) -> str:
    """One CSV row per method: the scenario, then every result field flattened with dotted names (memory.*)."""
    scenario = {"model": plan["model"], "hardware": plan["hardware"], "gpus": plan["gpus"],
                **_flatten(plan["workload"], "workload.")}
    rows = [{**scenario, **_flatten(r)} for r in plan["results"]]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def compare_rows(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Methods side by side: effective bits, compression against a 16-bit cache, capacity and TPOT."""
    return [{"method": r["method"], "family": r["family"], "effective bits": r["effective_bits"],
             "compression vs 16-bit": 16 / r["effective_bits"] if r["effective_bits"] else math.inf,
             "max context at batch": r["max_context"], "max batch at context": r["max_batch"],
             "TPOT (ms)": r["tpot_s"] * 1e3, "tokens/s": r["tokens_per_s"], "bound": r["bound"]}
            for r in plan["results"]]


def quality_rows(benchmark: str, context: int) -> list[dict[str, Any]]:
    """The paper's figures for one benchmark, each beside the effective bits our model computes for its SPEC on
    the catalogue model at `context` (None where the row has no SPEC or the model is not catalogued)."""
    from roofline.analysis.quality import for_benchmark
    from roofline.catalogue import load_model
    from roofline.methods import build_cache, parse_method
    from roofline.units import L

    rows = []
    for f in for_benchmark(benchmark):
        bits = None
        if f.spec and f.catalogue_model:
            cache = build_cache(parse_method(f.spec), load_model(f.catalogue_model))
            bits = float(cache.effective_bits().subs(L, context))
        rows.append({"method": f.method, "value": f.value, "baseline": f.baseline, "metric": f.metric,
                     "higher is better": f.higher_is_better, "paper memory": f.paper_memory, "spec": f.spec,
                     "catalogue model": f.catalogue_model, "computed bits": bits,
                     "computed compression": 16 / bits if bits else None, "source": f.source, "note": f.note})
    return rows


def results_files(results_dir: Path | None = None) -> list[Path]:
    """The shipped kernel summaries (roofline.validation.kernel_summary.committed: one per GPU run of the lab)."""
    from roofline.validation.kernel_summary import committed

    return committed(results_dir)


def validation_report(path: Path) -> dict[str, Any]:
    """One GPU run's kernel validation as the lab summarized it (roofline.validation.kernel_summary.load):
    {"file", "env", "report", "targets"}."""
    from roofline.validation import kernel_summary

    return kernel_summary.load(Path(path))


def target_rows(t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """validate.model.targets' four verdicts, one row each, with the figures that decide them."""
    s, b, q, x = t["suite"], t["bandwidth"], t["quant_speedup"], t["xquant_crossover"]
    fractions = [c["fraction"] for c in q["cases"]]
    judged = {n: c for n, c in x["batches"].items() if c["ratio"] is not None}
    return [
        {"target": "suite APE: median <= 5 %, p90 <= 15 %", "verdict": s["verdict"],
         "measured": "-" if s["median_ape_pct"] is None else f"{s['median_ape_pct']:.1f} %, {s['p90_ape_pct']:.1f} %"},
        {"target": "kernels at large shapes >= 85 % of the measured ceilings", "verdict": b["verdict"],
         "measured": ", ".join(f"{n} {e:.0%}" for n, e in b["families"].items()) or "-"},
        {"target": "quantized speedup >= 80 % of the byte ratio (batch >= 8, context >= 64K)", "verdict": q["verdict"],
         "measured": f"{min(fractions):.0%} - {max(fractions):.0%} over {len(fractions)} cases" if fractions else "-"},
        {"target": "XQuant crossover within 20 % of the model", "verdict": x["verdict"],
         "measured": ", ".join(f"batch {n}: {c['measured']:.0f} vs {c['predicted']} tokens" for n, c in judged.items())
         or "-"},
    ]


def validation_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every case of a comparison report, one row each."""
    return [{"family": family, "case": r["name"], "measured (ms)": r["measured_ms"],
             "predicted (ms)": r["predicted_ms"], "APE (%)": r["ape_pct"], "bound": r["bound"],
             "bandwidth fraction": r["bandwidth_fraction"],
             "achieved GB/s": None if r["achieved_bytes_per_s"] is None else r["achieved_bytes_per_s"] / 1e9,
             "achieved TFLOP/s": None if r["achieved_flops_per_s"] is None else r["achieved_flops_per_s"] / 1e12,
             "note": r["note"]}
            for family, fam in report["families"].items() for r in fam["rows"]]


def family_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per kernel family: cases compared, median and 90th-percentile APE, median achieved bandwidth fraction and
    kernel efficiency (validate.model.compare.kernel_efficiency)."""
    import numpy as np

    out = []
    for family, fam in report["families"].items():
        apes = [r["ape_pct"] for r in fam["rows"] if r["ape_pct"] is not None]
        fractions = [r["bandwidth_fraction"] for r in fam["rows"] if r["bandwidth_fraction"] is not None]
        out.append({"family": family, "cases": fam["cases"], "median APE (%)": fam["median_ape_pct"],
                    "p90 APE (%)": float(np.percentile(apes, 90)) if apes else None,
                    "median bandwidth fraction": float(np.median(fractions)) if fractions else None,
                    "kernel efficiency": fam.get("kernel_efficiency")})
    return out


def claims_rows() -> list[dict[str, Any]]:
    """roofline.analysis.claims.claims(), with `computed` as text (it may be a number, a list or a sentence) and
    the trust of a time or rate (roofline.trust.annotate_claims)."""
    from roofline.analysis.claims import claims
    from roofline.analysis.quality import SEEDS
    from roofline.trust import annotate_claims

    papers = {seed: name for name, seed in SEEDS.items()}
    rows = []
    for c in annotate_claims(claims()):
        computed = c["computed"] if isinstance(c["computed"], str) else json.dumps(_finite(c["computed"]))
        rows.append({"paper": papers.get(c["seed"], c["seed"]), **c, "computed": computed,
                     "result": human_result(c["computed"], c["unit"])})
    return rows


def human_result(value: Any, unit: str) -> str:
    """A claim's computed value in human units: bytes as GiB (the exact count beside it), token counts and other
    numbers with thousands separators, lists item by item; text as it is, with its unit in brackets."""
    from roofline import report as fmt

    if isinstance(value, bool) or not isinstance(value, int | float | list | tuple):
        return f"{value} ({unit})"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(fmt.number(v) if isinstance(v, int | float) else str(v) for v in value) + f"] {unit}"
    if not math.isfinite(value):
        return f"{_finite(value)} {unit}"
    if unit == "bytes":
        return f"{fmt.gib(value)} ({int(value):,} bytes)"
    if unit == "GiB":
        return f"{value:,.2f} GiB"
    return f"{fmt.number(value)} {unit}"
