"""roofline's prediction of validate/engines/cases-sglang.json on a real SGLang, written BEFORE the engine is timed.

python -m validate.engines.predict_sglang OUT_JSON [--hardware H200] [--cases FILE] [--steps-only] [--results RUN]
                                                   [--host-speed S | --host-speed run]
Per model: the KV pool as `roofline capacity --engine sglang` gives it at the case's context_length (SGLang's
max_total_num_tokens, its rules in roofline/engines/sglang.py); per decode case what lat_sglang.py measures, the mean
decode step over contexts P + 1 .. P + N - 1 ((t(N) - t(1)) / (N - 1)), as the planner's decode step at the batch
padded to SGLang's captured sizes and the mid context; per prefill case the batch-1 prefill at the clock its three
calls run at (lone_prefill: where the median call sits on the board's settling curve); per served run
`roofline simulate --engine sglang` at the run's rate (Poisson, its own draws) or --max-concurrency. Every time is
the GPU work on the H200's measured ceilings with the engine's scheduling rules (roofline.engines.scheduling.sglang)
and, where one is committed, SGLang's time profile (roofline/engines/profiles/sglang.json; run 1's prediction had
none). --cases picks the cases file (run 2: cases-sglang-run2.json, its "lat_models" in order, a case's "dir" naming
the catalogue model and its engine_args' mem_fraction_static the capacity's fraction); --steps-only leaves out the
served runs. Each served model's pool as launch_server sizes it ("served_capacity": the serve entry's context_length,
else the model's own) and, run 3 on, a second served model ("serve2") and a shared-prefix run ("prefix").
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from roofline.catalogue.loading import validate
from roofline.catalogue.store import load_hardware
from roofline.engines.scheduling import scheduling
from roofline.methods.registry import parse_method
from roofline.planner.phases import PhaseModel
from roofline.specs import Workload
from validate import stored
from validate.engines import models as engine_models
from validate.engines.cases import checkout_sha, prediction_parser, read_cases, write_prediction
from validate.engines.lone_prefill import lone_prefill_s

HERE = Path(__file__).resolve().parent
CASES = json.loads((HERE / "cases-sglang.json").read_text())


def model_arg(name: str, folder: Path) -> list[str]:
    """`--model` flags for a case's model: the catalogue's, or (a tiny model) the config.json the engine runs."""
    if name in engine_models.TINY or name.startswith("tiny-"):
        path = folder / name / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(engine_models.config(name)))
        return ["--model", str(path), "--name", name]
    return ["--model", name]


def cli(*argv: str) -> dict:
    """One roofline command's JSON (its error line where it refuses)."""
    r = subprocess.run([sys.executable, "-m", "roofline.cli", *argv, "--json"], capture_output=True, text=True)
    if r.returncode:
        return {"error": r.stderr.strip()[-300:]}
    d = json.loads(r.stdout)
    return d[0] if isinstance(d, list) else d


def predict(hardware: str) -> dict:
    """Capacity, decode steps and prefills of every model of the cases file."""
    from roofline.catalogue.store import load_model

    folder, hw, out = Path(tempfile.mkdtemp()), load_hardware(hardware), {}
    for name in CASES.get("lat_models", CASES["models"]):
        case = CASES["models"][name]
        margs = model_arg(case.get("dir", name), folder)
        model = load_model(margs[1])
        ctx = case["context_length"] or model.max_position_embeddings
        fraction = case.get("engine_args", {}).get("mem_fraction_static")
        cap = cli("capacity", *margs, "--hardware", hardware, "--engine", "sglang", "--max-model-len", str(ctx),
                  *(["--gpu-memory-utilization", str(fraction)] if fraction else []))
        sched = scheduling("sglang", hw, "api", 1, context_len=ctx)
        n = CASES["out_tokens"]
        dec = []
        for b, p in case["decode"]:
            wl = validate(Workload, {"batch": b, "context_tokens": p + n, "engine": "sglang", "page_tokens": 1},
                          "workload")
            pm = PhaseModel.build(model, hw, wl, parse_method("bf16"))
            padded = sched.padded_tokens(b, decode_only=True)
            dec.append({"B": b, "P": p, "padded_B": padded, "decode_step_s": float(pm.decode_time(padded, p + n // 2))})
        wl = validate(Workload, {"batch": 1, "context_tokens": max(case["prefill"]) + 1, "engine": "sglang",
                                 "page_tokens": 1}, "workload")
        pre = [{"P": p, "prefill_s": lone_prefill_s(model, hw, wl, p)} for p in case["prefill"]]
        out[name] = {"capacity": cap, "decode": dec, "prefill": pre}
    return out


def sent(results: Path | None, model: str, key: str, n: int) -> list[dict] | None:
    """The requests a Poisson run sent (bench_sglang.py's `*-sends.json`: send instant, lengths), the warm-up request
    before them left out; None without a results folder."""
    path = results / f"{model}-{key}-sends.json" if results else None
    if not path or not path.is_file():
        return None
    requests = json.loads(path.read_text())["requests"]
    return requests[len(requests) - n:]


def served_capacity(hardware: str) -> dict:
    """`roofline capacity --engine sglang` of each served model at its serve entry's context_length (launch_server's
    max_total_num_tokens)."""
    from roofline.catalogue.store import load_model

    out = {}
    for key in ("serve", "serve2"):
        if key in CASES:
            s = CASES[key]
            ctx = s.get("context_length") or load_model(s["model"]).max_position_embeddings
            out[s["model"]] = cli("capacity", "--model", s["model"], "--hardware", hardware, "--engine", "sglang",
                                  "--max-model-len", str(ctx))
    return out


def host_speed_of(results: Path) -> float | None:
    """The host speed (roofline.engines.timing mechanism 11) of a run's host against SGLang's profile host (run 1,
    whose tiny server the profile's host costs come from): run 1's tiny server's median TTFT at concurrency 1 over this
    run's own (its tiny-llama-conc1.jsonl, stage T in the same lease), as validate.engines.predict.host_speed_of does
    for vLLM; None where the run has no tiny server."""
    def ttft(run: Path) -> float | None:
        f = run / "tiny-llama-conc1.jsonl"
        return json.loads(stored.read_text(f).splitlines()[-1])["median_ttft_ms"] if stored.exists(f) else None

    own, ref = ttft(results), ttft(HERE.parents[1] / "validate/results/engines/nvidia-h200-sglang-2026-11-30-run1")
    return ref / own if own and ref else None


def serve(hardware: str, results: Path | None = None, key: str = "serve", host_speed: float | None = None) -> dict:
    """`roofline simulate --engine sglang` of each served run of the cases file's `key` entry ("serve", or run 3's
    "serve2"): at the run's rate with roofline's own draws, or (`results`: the run's folder) replayed at the send
    instants the client recorded; its "prefix" run (one shared prefix of prefix_len tokens before every prompt,
    bench_sglang.py) with `--prefix system:L`, the replayed prompts less the prefix the flag adds back; `host_speed`:
    --host-speed (the run's host against the profile's). One launch_server process serves an entry's runs in this
    order (run_sglang.sh; each run's marks): the first from a fresh start, so every run is simulated `--cold-start`
    with `--compiled-tokens` the eager steps that compiled a fused-MoE key in the runs before it (engines.first_use;
    nothing for a dense model)."""
    from validate.engines.predict import write_trace

    s, out, tmp = CASES[key], {}, Path(tempfile.mkdtemp())
    base = ["simulate", "--model", s["model"], "--hardware", hardware, "--method", "bf16", "--engine", "sglang",
            "--no-search", "--cold-start", *(["--host-speed", f"{host_speed:.4f}"] if host_speed else [])]
    lengths = ["--prompt-tokens", str(s["input_len"]), "--output-tokens", str(s["output_len"])]
    keys = ("ttft_s", "tpot_s", "e2e_s", "throughput_tokens_per_s", "requests_per_s", "preemptions", "prefix_cache",
            "first_use")
    compiled: list[int] = []  # the process's eager steps that compiled a key so far

    def run_cli(*argv: str) -> dict:
        d = cli(*argv, *(["--compiled-tokens", *map(str, compiled)] if compiled else []))
        compiled.extend((d.get("first_use") or {}).get("tokens", []))
        return d

    def poisson(run: str, rate: float, n: int, shared: int = 0) -> dict:
        reqs = sent(results, s["model"], run, n)
        extra = ["--prefix", f"system:{shared}"] if shared else []
        if reqs:
            t0 = reqs[0]["start_perf_s"]
            trace = write_trace(tmp / f"{run}.csv", [r["start_perf_s"] - t0 for r in reqs],
                                [r["prompt_len"] - shared for r in reqs], [r["output_len"] for r in reqs])
            return run_cli(*base, "--trace", str(trace), *extra)
        return run_cli(*base, *lengths, "--rate", str(rate), "--requests", str(n), *extra)

    def kept(d: dict) -> dict:
        return {k: d[k] for k in keys if k in d} if "error" not in d else d

    for rate, n in s["rates"]:
        out[f"rate{rate}"] = kept(poisson(f"rate{rate}", rate, n))
    if "prefix" in s:
        pf = s["prefix"]
        out["prefix"] = kept(poisson("prefix", pf["rate"], pf["prompts"], pf["prefix_len"]))
    if "concurrency" in s:
        c = s["concurrency"]
        out[f"conc{c['max_concurrency']}"] = kept(run_cli(*base, *lengths, "--rate", "inf", "--max-concurrency",
                                                          str(c["max_concurrency"]), "--requests", str(c["prompts"])))
    return out


def main() -> None:
    p = prediction_parser("cases-sglang.json")
    p.add_argument("--steps-only", action="store_true", help="no served runs (a run without stage S)")
    p.add_argument("--results", type=Path, help="the run's folder: replay its Poisson runs at the recorded sends "
                   "(the model after the run; without it, before)")
    p.add_argument("--host-speed", default="1", help="the served runs' --host-speed: a number, or 'run' (with "
                   "--results: the run's tiny server against run 1's, host_speed_of)")
    a = p.parse_args()
    global CASES
    CASES = read_cases(p, a.cases)
    speed = host_speed_of(a.results) if a.host_speed == "run" and a.results else float(a.host_speed)
    if speed is None:
        p.error("--host-speed run: the run has no tiny-llama-conc1.jsonl (stage T)")
    speed = None if speed == 1 else speed
    sha = checkout_sha()
    doc = {"about": f"roofline's prediction of validate/engines/{a.cases} on a real SGLang, written before the run: "
                    "SGLang's scheduling rules and time profile (roofline/engines/profiles/sglang.json, when there is "
                    "one) around the GPU work",
           "hardware": a.hardware, "engine": "sglang", "git_sha": sha, "date": dt.date.today().isoformat(),
           "cases": a.cases, "models": predict(a.hardware),
           "host_speed": speed, "served_capacity": served_capacity(a.hardware),
           **({} if a.steps_only else {k: serve(a.hardware, a.results, k, speed) for k in ("serve", "serve2")
                                       if k in CASES}),
           **({"serve": {}} if a.steps_only else {})}
    write_prediction(a.out, doc)


if __name__ == "__main__":
    main()
