"""The server's decode time by the slots it shared its steps with (timing mechanism 20): for every task of a
llama-server log (-lv 4), the busy slots and their runs of consecutive ids over its decode, and its time a token.

With one KV stream a slot (-np N without -kvu), llama_decode splits a batch with split_equal, whose ubatch holds only
consecutive sequence ids (src/llama-batch.cpp split_equal, sequential): busy slots {0, 1, 4, 5} decode in two
ubatches, each a pass over the weights. This table is the evidence: the decode time a token grouped by (busy, runs).
  python -m validate.engines.llamacpp_slots LOG[.gz] ..
  python -m validate.engines.llamacpp_slots predict9 OUT [--now] [--cases F] / compare9 RESDIR PREDICTED [--cases F]
                                                              runs 9 and 11 (pinned slots; 11: Q4_K_M, and r8)
  python -m validate.engines.llamacpp_slots compare12 RESDIR PREDICTED                     run 12 (-np 16 vs -kvu)
  python -m validate.engines.llamacpp_slots now12 RESDIR                                    run 12 on the model now
  python -m validate.engines.llamacpp_slots predict13 OUT.json                              run 13's prediction
  python -m validate.engines.llamacpp_slots compare13 RESDIR PREDICTED                     run 13 (-kvu span, 22.)
  python -m validate.engines.llamacpp_slots chain             runs 6, 8a, 8b: the served runs one after another on one
                                                              server, measured / the model (its slots carried from run
                                                              to run) / the model given the server's slots at each
                                                              run's start as its log shows them
"""

from __future__ import annotations

import argparse
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np

from validate.engines.llamacpp_logs import busy_runs, served_summary, slot_tasks

RESULTS = Path("validate/results/engines")
# run folder, cases file, the server log, the served results' names: the runs one after another on one server
CHAINS = (("nvidia-h200-llamacpp-2026-12-01-run6", "llamacpp_cases_run6.json", "serve.log.gz", "serve-{}.json"),
          ("nvidia-h200-llamacpp-2026-12-01-run8a", "llamacpp_cases_run8.json", "serve-off.log.gz",
           "serve-off-{}.json.gz"),
          ("nvidia-h200-llamacpp-2026-12-01-run8", "llamacpp_cases_run8.json", "serve-off.log.gz",
           "serve-off-{}.json.gz"))


def table(path: Path) -> list[dict]:
    """Rows (busy, runs, tasks, median decode ms a token) of one log, busy and runs rounded per task."""
    text = (gzip.open(path, "rt", errors="replace") if path.suffix == ".gz" else path.open(errors="replace")).read()
    tasks = slot_tasks(text)
    groups: dict[tuple[int, int], list[float]] = defaultdict(list)
    for t in tasks:
        if t.get("decode_tokens"):
            busy, runs = busy_runs(tasks, t)
            groups[(round(busy), round(runs))].append(t["decode_ms"] / t["decode_tokens"])
    return [{"busy": b, "runs": r, "tasks": len(v), "ms_per_token": statistics.median(v)}
            for (b, r), v in sorted(groups.items())]


def _read(path: Path) -> str:
    return (gzip.open(path, "rt", errors="replace") if path.suffix == ".gz" else path.open(errors="replace")).read()


def slots_at_runs(text: str, starts: list[int], n_slots: int) -> list[tuple[float, ...]]:
    """The server's slots at the start of each run (`starts`: the index of each run's first task in task order): each
    slot's last release before it (-1 never), on a clock that puts them before the run's own times (only their order
    matters to the LRU choice: engines.llamacpp.lru_slot)."""
    tasks = slot_tasks(text)
    out = []
    for first in starts:
        t0 = tasks[first]["start_s"] if first < len(tasks) else tasks[-1]["end_s"]
        last = [-1.0] * n_slots
        for t in tasks[:first]:
            last[t["slot"]] = max(last[t["slot"]], t["end_s"])
        out.append(shifted(last, t0))
    return out


def shifted(last, end_s: float) -> tuple[float, ...]:
    """A run's slots (each slot's last release on its clock, -1 never) as the next run's clock sees them: released
    before it starts (end_s - 1e6 + t: negative, in the same order) and never-used ones before every used one."""
    return tuple(-2e6 if t < 0 else t - end_s - 1e6 for t in last)


def _simulation(argv: list[str]):
    """(the Simulator, its requests, its clients) `roofline simulate ARGV` would run (roofline.cli.simulate's steps)."""
    from roofline.catalogue import load_hardware, load_model
    from roofline.catalogue.loading import validate
    from roofline.cli import build_parser
    from roofline.cli.simulate import _clients, _engine_profile, _simulator
    from roofline.cli.simulate_inputs import inputs
    from roofline.methods import parse_method
    from roofline.specs import Workload

    args = build_parser().parse_args(argv)
    model, hw = load_model(args.model), load_hardware(args.hardware)
    requests, _, _ = inputs(args)
    profile = _engine_profile(args, hw, requests)
    wl = validate(Workload, {"context_tokens": max(requests.max_tokens, 2), "engine": "llamacpp",
                             "prefill_chunk_tokens": profile.max_num_batched_tokens, "page_tokens": profile.page_tokens,
                             "weight_dtype": args.weight_dtype}, "workload")
    return (_simulator(args, model, hw, wl, parse_method(args.method[0]), profile, requests.max_tokens), requests,
            _clients(args))


BASE = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H200", "--method", "fp16", "--engine", "llamacpp",
        "--weight-dtype", "fp16", "--no-search"]


def chain() -> str:
    """Each chained run's served figures (TTFT and TPOT p50): measured / the model carrying its own slots from run to
    run / the model given the log's slots at the run's start."""
    import json
    import tempfile

    from validate.engines.llamacpp_client import schedule
    from validate.engines.predict import write_trace

    lines = []
    for folder, cases_file, log, served in CHAINS:
        cases = json.loads((Path(__file__).resolve().parent / cases_file).read_text())["serve"]
        flags = (cases.get("flags") or dict(cases.get("variants", [])).get("off", "")).split()
        text = _read(RESULTS / folder / log)
        counts = [n for _, _, _, n, _ in cases["runs"]]
        starts = [sum(counts[:i]) for i in range(len(counts))]
        given_all = slots_at_runs(text, starts, cases["np"])
        lines.append(f"{folder} ({' -> '.join(r[0] for r in cases['runs'])} on one server, {' '.join(flags)})")
        carried = None
        for (name, rate, conc, n, seed), given in zip(cases["runs"], given_all, strict=True):
            tmp = Path(tempfile.mkdtemp())
            argv = [*BASE, "--max-num-seqs", str(cases["np"]), *flags]
            if rate > 0:
                argv += ["--trace", str(write_trace(tmp / f"{name}.csv", schedule(seed, rate, n), cases["prompt"],
                                                    cases["output"]))]
            else:
                argv += ["--rate", "inf", "--max-concurrency", str(conc), "--requests", str(n), "--prompt-tokens",
                         str(cases["prompt"]), "--output-tokens", str(cases["output"])]
            row = {}
            for label, state in (("carried", carried), ("given", given)):
                sim, requests, clients = _simulation(argv)
                sim.slot_last = state
                trace = sim.run(requests, None, clients)
                row[label] = trace
                if label == "carried":
                    carried = shifted(trace.slots_after, float(trace.finish_s.max()))
            path = RESULTS / folder / served.format(name)
            if not path.exists():  # run 8b's r8 client file did not come back (its README)
                lines.append(f"  {name:4s} (no client file: {path.name})")
                continue
            m = served_summary(json.loads(_read(path)))
            cells = []
            for key in ("ttft_s", "tpot_s"):
                meas = m[key]["p50"]
                mod = [float(np.nanmedian(getattr(row[k], key))) for k in ("carried", "given")]
                errs = [(x / meas - 1) * 100 for x in mod]
                cells.append(f"{key[:-2]} p50 {meas * 1e3:7.1f} / {mod[0] * 1e3:7.1f} ({errs[0]:+6.1f})"
                             f" / {mod[1] * 1e3:7.1f} ({errs[1]:+6.1f})")
            lines.append(f"  {name:4s} " + "   ".join(cells))
    lines.append("(ms: measured / the model, slots carried from its own runs (err %) / the model, the log's slots "
                 "at the run's start (err %))")
    return "\n".join(lines)


def predict9(out: Path, now: bool = False, cases_file: str = "llamacpp_cases_run9.json") -> None:
    """Run 9's prediction (llamacpp_cases_run9.json), written before the run: per server variant and slot set, the
    decode step of the four pinned streams at the mid context (prompt + output / 2) and the step of their four
    prompts together, each as the engine splits it (split: engines.llamacpp.ubatches over the set's slots; kvu: one
    stream, passes of pass_tokens), with the server's host work (EngineOverheads.combine); the lone prompts' TTFT by
    `simulate --requests 1`."""
    import datetime as dt
    import json

    from roofline.engines.llamacpp import fa_query_tile, ubatches
    from validate.engines.cases import checkout_sha

    whole = json.loads((Path(__file__).resolve().parent / cases_file).read_text())
    cases = whole["serve"]
    p, o = cases["prompt"], cases["output"]
    weights = ["--weight-dtype", f"gguf:{whole['quant']}"] if "quant" in whole else []
    about = ("the model now (mechanisms 19-22; 21's graph rebuild measured by run 10 against this run's reuse set; 22: "
             "-kvu's attention over the stream's cells, idle slots' kept)"
             if now else "written before the run: timing mechanisms 19 (passes) and 20 (slots, one KV stream each) as "
             "they stand")
    doc = {"about": f"roofline's prediction of llama.cpp's pinned slots ({cases_file}), {about}",
           "hardware": "H200", "git_sha": checkout_sha(), "date": dt.date.today().isoformat(), "sets": {}, "lone": {}}
    for variant, flags in cases["servers"]:
        kvu = "-kvu" in flags.split()
        ours = ["--kv-unified" if f == "-kvu" else f for f in flags.split()]  # roofline's name of the server's flag
        sim, _, _ = _simulation([*BASE, *weights, "--max-num-seqs", str(cases["np"]), "--rate", "1", "--requests",
                                 "1", "--prompt-tokens", str(p), "--output-tokens", str(o), *ours])
        steps, host, n_ub = sim.steps, sim.engine.overheads, sim.phases.engine.pass_tokens
        empty = np.zeros(0, dtype=np.int64)
        kept: dict[int, int] = {}  # -kvu --cache-ram 0: the cells each idle slot keeps from the sets before (22.)
        for slots in cases["slot_sets"]:
            ctx = np.full(4, p + o // 2)
            dec = [4] if kvu else ubatches(slots, [], [], n_ub)
            pre = ([p] * (4 * p // n_ub)) if kvu else ubatches([], slots, [p] * 4, n_ub)
            if kvu and sim.span:  # one stream: attention over every cell it holds (timing 22.)
                stale = sum(c for j, c in kept.items() if j not in slots)
                tile = fa_query_tile(sim.model.num_heads // sim.model.num_kv_heads)
                tpot_gpu = steps.span_time(ctx, empty, empty, np.zeros(0, bool), int((ctx - 1).sum()) + stale,
                                           sim.stream_cells, tile, n_ub)
                prompt_gpu = steps.span_time(empty, np.zeros(4, dtype=np.int64), np.full(4, p), np.ones(4, bool),
                                             stale, sim.stream_cells, tile, n_ub)
                kept.update({j: p + o - 1 for j in slots})
            else:
                tpot_gpu = steps.split_time(ctx, empty, empty, np.zeros(0, bool), dec)
                prompt_gpu = steps.split_time(empty, np.zeros(4, dtype=np.int64), np.full(4, p), np.ones(4, bool),
                                              pre)
            tpot = host.combine(tpot_gpu, 4, 4, rebuilt=len(dec) > 1)
            prompt = host.combine(prompt_gpu, 4, 4 * p, 0.0, True)
            doc["sets"][f"{variant} {','.join(map(str, slots))}"] = {
                "decode_ubatches": dec, "prompt_ubatches": pre, "tpot_s": float(tpot), "prompt_step_s": float(prompt)}
        if not kvu:
            for lp in cases["lone_prompts"]:
                s, reqs, clients = _simulation([*BASE, *weights, "--max-num-seqs", str(cases["np"]), "--rate", "inf",
                                                "--requests", "1", "--prompt-tokens", str(lp), "--output-tokens",
                                                str(cases["lone_output"]), *ours])
                doc["lone"][str(lp)] = {"ttft_s": float(np.nanmedian(s.run(reqs, None, clients).ttft_s))}
            doc["served"] = {}
            for name, rate, _conc, n, seed in cases.get("runs", []):  # after the sets, on the same server
                import tempfile

                from validate.engines.llamacpp_client import schedule
                from validate.engines.predict import write_trace
                trace = write_trace(Path(tempfile.mkdtemp()) / f"{name}.csv", schedule(seed, rate, n), p, o)
                s, reqs, clients = _simulation([*BASE, *weights, "--max-num-seqs", str(cases["np"]), "--trace",
                                                str(trace), *ours])
                t = s.run(reqs, None, clients)
                doc["served"][name] = {k: float(np.nanmedian(getattr(t, k))) for k in ("ttft_s", "tpot_s")}
    out.write_text(json.dumps(doc, indent=1) + "\n")


def compare9(resdir: Path, predicted: Path, cases_file: str = "llamacpp_cases_run9.json") -> str:
    """Run 9 against a prediction: per server variant and slot set, TPOT p50 (the client's; the server's own decode
    time a token beside it) and TTFT p50 (four prompts in one step), and the lone prompts' TTFT p50 (the server's own
    prompt time beside it)."""
    import json

    pred = json.loads(predicted.read_text())
    cases = json.loads((Path(__file__).resolve().parent / cases_file).read_text())["serve"]
    lines = [f"llama.cpp ({resdir}): four streams pinned to slots, one KV stream a slot (split) or -kvu; lone "
             f"prompts", f"predicted: {predicted.name} ({pred['git_sha'][:7]}); measured / predicted (err %), ms"]
    for variant, _ in cases["servers"]:
        tasks = slot_tasks(_read(resdir / f"server-{variant}.log.gz"))
        at = 0
        for k, slots in enumerate(cases["slot_sets"], 1):
            m = served_summary(json.loads((resdir / f"set-{variant}-{k}.json").read_text()))
            mine = tasks[at:at + cases["requests"]]
            at += cases["requests"]
            server = statistics.median(t["decode_ms"] / t["decode_tokens"] for t in mine)
            p = pred["sets"][f"{variant} {','.join(map(str, slots))}"]
            tpot, ttft = m["tpot_s"]["p50"], m["ttft_s"]["p50"]
            lines.append(f"{variant:5s} slots {','.join(map(str, slots)):8s} ubatches {str(p['decode_ubatches']):13s} "
                         f"TPOT {tpot * 1e3:6.2f} / {p['tpot_s'] * 1e3:6.2f} ({(p['tpot_s'] / tpot - 1) * 100:+6.1f}) "
                         f"[server {server:6.2f}]   TTFT {ttft * 1e3:6.1f} / {p['prompt_step_s'] * 1e3:6.1f} "
                         f"({(p['prompt_step_s'] / ttft - 1) * 100:+6.1f})")
        if variant == "split":
            for lp in cases["lone_prompts"]:
                doc = json.loads((resdir / f"lone-{variant}-{lp}.json").read_text())
                m = served_summary(doc)
                mine = tasks[at:at + cases["lone_repeats"]]
                at += cases["lone_repeats"]
                server = statistics.median(t["prompt_ms"] for t in mine)
                ttft, p = m["ttft_s"]["p50"], pred["lone"][str(lp)]["ttft_s"]
                lines.append(f"split lone prompt {lp:5d}: TTFT {ttft * 1e3:6.1f} / {p * 1e3:6.1f} "
                             f"({(p / ttft - 1) * 100:+6.1f}) [server's prompt time {server:6.1f}]")
            for name in pred.get("served", {}):
                m = served_summary(json.loads((resdir / f"serve-{name}.json").read_text()))
                cells = [f"{k[:-2].upper()} p50 {m[k]['p50'] * 1e3:7.1f} / {pred['served'][name][k] * 1e3:7.1f} "
                         f"({(pred['served'][name][k] / m[k]['p50'] - 1) * 100:+6.1f})" for k in ("ttft_s", "tpot_s")]
                lines.append(f"split served {name}: " + "   ".join(cells))
    return "\n".join(lines)


def compare12(resdir: Path, predicted: Path) -> str:
    """Run 12 (llamacpp_cases_run12.json): the same Poisson sends on the -np 16 server split by slots and under -kvu,
    TTFT and TPOT p50 measured / predicted, then each server's decode time by its busy slots' runs (`table`)."""
    import json

    pred = json.loads(predicted.read_text())
    lines = [f"llama.cpp run 12 ({resdir}): the same 120 Poisson sends (3 req/s, 512 + 128) on -np 16, one KV stream "
             "a slot (split) and -kvu", f"predicted before the run: {predicted.name} ({pred['git_sha'][:7]}); "
             "measured / predicted (err %), ms"]
    for v, p in pred["served"].items():
        m = served_summary(json.loads((resdir / f"serve-{v}.json").read_text()))
        cells = [f"{k[:-2].upper()} p50 {m[k]['p50'] * 1e3:7.2f} / {p[k]['p50'] * 1e3:7.2f} "
                 f"({(p[k]['p50'] / m[k]['p50'] - 1) * 100:+6.1f})" for k in ("ttft_s", "tpot_s")]
        lines.append(f"{v:5s} " + "   ".join(cells))
    for v in pred["served"]:
        lines.append(f"{v}: decode by busy slots and their runs (the server's log)")
        lines += [f"  busy {r['busy']:2d} in {r['runs']} run(s): {r['tasks']:4d} tasks, decode "
                  f"{r['ms_per_token']:6.2f} ms a token (median)" for r in table(resdir / f"server-{v}.log.gz")]
    return "\n".join(lines)


def predict13(out: Path, about: str = "written before the run: timing mechanisms 19-22 as they stand") -> None:
    """Run 13's prediction (llamacpp_cases_run13.json): per server variant and phase, the lone prompt's step (its
    TTFT) and the decoding stream's step at its mid context (its TPOT) in the probe slot, while slots 0-2 keep the
    fill prompts' cells (--cache-ram 0), with the server's host work (EngineOverheads.combine). kvu: one stream, the
    steps' attention over every cell it holds (StepModel.span_time, timing 22.); split: a stream a slot (split_time,
    one ubatch); 'kvu_without_22': the kvu steps as the model timed them before 22 (the split law)."""
    import datetime as dt
    import json

    from roofline.engines.llamacpp import fa_query_tile
    from validate.engines.cases import checkout_sha

    cases = json.loads((Path(__file__).resolve().parent / "llamacpp_cases_run13.json").read_text())["serve"]
    lone, dec = cases["lone"], cases["decode"]
    doc = {"about": f"roofline's prediction of llama.cpp run 13 (llamacpp_cases_run13.json), {about}",
           "hardware": "H200", "git_sha": checkout_sha(), "date": dt.date.today().isoformat(), "cases": {}}
    longest = max(f for _, f in cases["phases"])  # the step tables reach every slot's longest request (Simulator)
    sim, _, _ = _simulation([*BASE, "--max-num-seqs", str(cases["np"]), "--kv-unified", "--cache-ram", "0",
                             "--rate", "1", "--requests", "1", "--prompt-tokens", str(longest), "--output-tokens",
                             str(cases["output_fill"])])
    steps, host, n_ub = sim.steps, sim.engine.overheads, sim.phases.engine.pass_tokens
    tile, size = fa_query_tile(sim.model.num_heads // sim.model.num_kv_heads), sim.stream_cells
    empty, none, one = np.zeros(0, dtype=np.int64), np.zeros(0, bool), np.ones(1, bool)
    mid = dec["prompt"] + dec["output"] // 2  # the decode's context at its middle token, the new one included
    for name, fill in cases["phases"]:
        stale = len(cases["fill_slots"]) * (fill + cases["output_fill"] - 1)
        prompt = (np.zeros(1, dtype=np.int64), np.full(1, lone["prompt"]), one)
        split = {"lone_ttft_s": host.combine(steps.split_time(empty, *prompt, [lone["prompt"]]), 1, lone["prompt"],
                                             0.0, True),
                 "decode_tpot_s": host.combine(steps.split_time(np.array([mid]), empty, empty, none, [1]), 1, 1)}
        kvu = {"lone_ttft_s": host.combine(steps.span_time(empty, *prompt, stale, size, tile, n_ub), 1,
                                           lone["prompt"], 0.0, True),
               "decode_tpot_s": host.combine(steps.span_time(np.array([mid]), empty, empty, none, stale + mid - 1, size,
                                                             tile, n_ub), 1, 1)}
        doc["cases"][name] = {"stale_cells": stale, "kvu": {k: float(v) for k, v in kvu.items()},
                              "split": {k: float(v) for k, v in split.items()},
                              "kvu_without_22": {k: float(v) for k, v in split.items()}}
    out.write_text(json.dumps(doc, indent=1) + "\n")


def compare13(resdir: Path, predicted: Path) -> str:
    """Run 13 against a prediction: per server variant and phase, the lone prompts' TTFT p50 and the decoding streams'
    TPOT p50 (the clients'), measured / predicted (err %), the server's own prompt and decode times beside them, and
    the kvu prediction without mechanism 22."""
    import json

    pred = json.loads(predicted.read_text())
    cases = json.loads((Path(__file__).resolve().parent / "llamacpp_cases_run13.json").read_text())["serve"]
    per = 3 + cases["lone"]["repeats"] + cases["decode"]["repeats"]  # tasks a phase: fills, lone prompts, decodes
    lines = [f"llama.cpp run 13 ({resdir}): -np 4 --cache-ram 0, slots 0-2 filled, lone prompts and a decoding stream "
             "in slot 3; one stream (kvu) or a stream a slot (split)",
             f"predicted: {predicted.name} ({pred['git_sha'][:7]}); measured / predicted (err %), ms; [the server's "
             "own; the kvu model without 22]"]
    for variant, _ in cases["servers"]:
        tasks = slot_tasks(_read(resdir / f"server-{variant}.log.gz"))
        for k, (name, _fill) in enumerate(cases["phases"]):
            mine = tasks[k * per:(k + 1) * per]
            p, old = pred["cases"][name][variant], pred["cases"][name]["kvu_without_22"]
            ttft = served_summary(json.loads((resdir / f"lone-{variant}-{name}.json").read_text()))["ttft_s"]["p50"]
            tpot = served_summary(json.loads((resdir / f"dec-{variant}-{name}.json").read_text()))["tpot_s"]["p50"]
            lone_srv = statistics.median(t["prompt_ms"] for t in mine[3:3 + cases["lone"]["repeats"]])
            decs = mine[3 + cases["lone"]["repeats"]:]
            dec_srv = statistics.median(t["decode_ms"] / t["decode_tokens"] for t in decs)
            extra = (f" [without 22: {old['lone_ttft_s'] * 1e3:6.1f} ({(old['lone_ttft_s'] / ttft - 1) * 100:+6.1f})]"
                     if variant == "kvu" else "")
            extra2 = (f" [without 22: {old['decode_tpot_s'] * 1e3:6.2f} "
                      f"({(old['decode_tpot_s'] / tpot - 1) * 100:+6.1f})]" if variant == "kvu" else "")
            err_ttft, err_tpot = (p["lone_ttft_s"] / ttft - 1) * 100, (p["decode_tpot_s"] / tpot - 1) * 100
            lines.append(f"{variant:5s} {name:4s} stale {pred['cases'][name]['stale_cells']:6d}  lone TTFT "
                         f"{ttft * 1e3:6.1f} / {p['lone_ttft_s'] * 1e3:6.1f} ({err_ttft:+6.1f}) "
                         f"[server {lone_srv:6.1f}]{extra}   TPOT {tpot * 1e3:6.2f} / {p['decode_tpot_s'] * 1e3:6.2f} "
                         f"({err_tpot:+6.1f}) [server {dec_srv:6.2f}]{extra2}")
    return "\n".join(lines)


def now12(resdir: Path) -> str:
    """Run 12's sends replayed on the model as it stands (`simulate --trace`, --max-num-seqs 16 --cache-ram 0, with
    --kv-unified for the -kvu server): TTFT and TPOT p50 measured / now (err %)."""
    import json
    import tempfile

    from validate.engines.llamacpp_client import schedule
    from validate.engines.predict import write_trace

    cases = json.loads((Path(__file__).resolve().parent / "llamacpp_cases_run12.json").read_text())["serve"]
    name, rate, _conc, n, seed = cases["run"]
    trace = write_trace(Path(tempfile.mkdtemp()) / f"{name}.csv", schedule(seed, rate, n), cases["prompt"],
                        cases["output"])
    lines = [f"-- now: run 12's sends on the model as it stands ({resdir.name}); measured / now (err %), ms"]
    for variant, flags in cases["servers"]:
        ours = ["--kv-unified" if f == "-kvu" else f for f in flags.split()]
        sim, reqs, clients = _simulation([*BASE, "--max-num-seqs", str(cases["np"]), "--trace", str(trace), *ours])
        t = sim.run(reqs, None, clients)
        m = served_summary(json.loads((resdir / f"serve-{variant}.json").read_text()))
        now = {k: float(np.nanmedian(getattr(t, k))) for k in ("ttft_s", "tpot_s")}
        cells = [f"{k[:-2].upper()} p50 {m[k]['p50'] * 1e3:7.2f} / {now[k] * 1e3:7.2f} "
                 f"({(now[k] / m[k]['p50'] - 1) * 100:+6.1f})" for k in ("ttft_s", "tpot_s")]
        lines.append(f"{variant:5s} " + "   ".join(cells))
    return "\n".join(lines)


def main() -> None:
    import sys
    if sys.argv[1:] == ["chain"]:
        print(chain())
        return
    if sys.argv[1:2] == ["predict9"] and len(sys.argv) >= 3:  # [--now] [--cases FILE]
        rest = sys.argv[3:]
        cases = rest[rest.index("--cases") + 1] if "--cases" in rest else "llamacpp_cases_run9.json"
        predict9(Path(sys.argv[2]), "--now" in rest, cases)
        return
    if sys.argv[1:2] == ["predict13"] and len(sys.argv) in (3, 4):  # [--now]: the model as it stands
        predict13(Path(sys.argv[2]), *(["the model now (mechanisms 19-23)"] if sys.argv[3:] == ["--now"] else []))
        return
    if sys.argv[1:2] == ["compare13"] and len(sys.argv) == 4:
        print(compare13(Path(sys.argv[2]), Path(sys.argv[3])))
        return
    if sys.argv[1:2] == ["now12"] and len(sys.argv) == 3:
        print(now12(Path(sys.argv[2])))
        return
    if sys.argv[1:2] == ["compare12"] and len(sys.argv) == 4:
        print(compare12(Path(sys.argv[2]), Path(sys.argv[3])))
        return
    if sys.argv[1:2] == ["compare9"] and len(sys.argv) >= 4:  # [--cases FILE]
        rest = sys.argv[4:]
        cases = rest[rest.index("--cases") + 1] if "--cases" in rest else "llamacpp_cases_run9.json"
        print(compare9(Path(sys.argv[2]), Path(sys.argv[3]), cases))
        return
    p = argparse.ArgumentParser(prog="llamacpp_slots", description=__doc__.splitlines()[0])
    p.add_argument("logs", nargs="+", type=Path)
    for log in p.parse_args().logs:
        print(log)
        for row in table(log):
            print(f"  busy {row['busy']:2d} in {row['runs']} run(s): {row['tasks']:4d} tasks, decode "
                  f"{row['ms_per_token']:6.2f} ms a token (median)")


if __name__ == "__main__":
    main()
