"""llama.cpp run 14 (llamacpp_cases_run14.json): llama-server's own host work on a model of negligible GPU work, and
timing mechanism 22 on llama-batched-bench's prompts.

    python -m validate.engines.llamacpp_host predict14 OUT.json          (the prediction, before the run)
    python -m validate.engines.llamacpp_host compare14 RESDIR PREDICTED  (the run against it)
    python -m validate.engines.llamacpp_host predict15 OUT.json / compare15 RESDIR PREDICTED   (run 15)

A (tiny-llama, validate/engines/models.py: 2 layers of width 256, Llama-3's vocabulary): per server variant and
concurrency c, `roofline simulate --model <its config.json> --engine llamacpp --max-num-seqs 16 --kv-unified
--cache-ram 0 --rate inf --max-concurrency c` TPOT and TTFT p50; the 'gpu' variant (--backend-sampling, greedy
clients: the token is sampled on the GPU) has no flag in roofline: its prediction is the host variant's less the
host sampler's law (sampler_host_element_s x vocabulary, a slot a step) x c. The lone prompts: `simulate --requests 1`.
B (the F16 8B): per (npp, npl) the planner's batched-bench figures (llamacpp_predict.steps' laws: T_PP, T_TG / TG)
for the stream-a-sequence benchmark, and for -kvu those plus mechanism 22's difference: each llama_decode call of up
to -b 2048 tokens as StepModel.span_time (ubatches over the one stream's view) less the same ubatches on their own
streams (split_time).
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CASES = json.loads((HERE / "llamacpp_cases_run14.json").read_text())


def _tiny_config() -> Path:
    """The tiny model's config.json in a fresh folder (roofline imports a Hugging Face config.json)."""
    from validate.engines.models import config
    folder = Path(tempfile.mkdtemp()) / "tiny-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config(CASES["tiny"]["model"])))
    return folder / "config.json"


def _simulated(argv: list[str]) -> dict:
    """TTFT and TPOT p50 (s) of `roofline simulate ARGV --json`."""
    import contextlib
    import io

    from roofline.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["simulate", *argv, "--no-search", "--json"])
    if rc:
        raise SystemExit(f"llamacpp_host: simulate {' '.join(argv)} failed ({rc})")
    d = json.loads(out.getvalue())
    return {"ttft_s": d["ttft_s"]["p50"], "tpot_s": d["tpot_s"]["p50"]}


def _batched(b: dict | None = None) -> list[dict]:
    """Part B's figures: the planner's (stream a sequence) and, for -kvu, those plus mechanism 22's difference."""
    from roofline.engines.llamacpp import fa_query_tile
    from validate.engines.llamacpp_predict import phases
    from validate.engines.llamacpp_slots import BASE, _simulation

    b = CASES["batched"] if b is None else b
    longest = max(b["npp"]) * max(b["npl"]) + b["ntg"] * max(b["npl"])
    sim, _, _ = _simulation([*BASE, "--max-num-seqs", "1", "--kv-unified", "--cache-ram", "0", "--rate", "1",
                             "--requests", "1", "--prompt-tokens", str(longest), "--output-tokens", "2"])
    steps, model, hw = sim.steps, sim.model, sim.hardware
    tile, size, n_ub = fa_query_tile(model.num_heads // model.num_kv_heads), b["c"], sim.phases.engine.pass_tokens
    empty, none = np.zeros(0, dtype=np.int64), np.zeros(0, bool)
    out = []
    for pp in b["npp"]:
        for pl in b["npl"]:
            pm = phases(model, hw, pl, pp + b["ntg"])
            split = {"prefill_s": float(pm.prefill_time(pl, pp)),
                     "decode_step_s": float(pm.decode_time(pl, pp + b["ntg"] // 2))}
            extra, used, left = 0.0, 0, [pp] * pl  # the prompts in batch order, -b 2048 tokens a llama_decode call
            while any(left):
                room, chunks = 2048, []
                for j, t in enumerate(left):
                    if t and room:
                        take = min(t, room)
                        chunks.append((pp - t, take, take == t))
                        left[j] -= take
                        room -= take
                start, count, done = (np.array(x) for x in zip(*chunks, strict=True))
                sizes = [n_ub] * (int(count.sum()) // n_ub) + ([int(count.sum()) % n_ub] if count.sum() % n_ub else [])
                extra += (steps.span_time(empty, start, count, done.astype(bool), used, size, tile, n_ub)
                          - steps.split_time(empty, start, count, done.astype(bool), sizes))
                used += int(count.sum())
            mid = np.full(pl, pp + b["ntg"] // 2)
            dec = (steps.span_time(mid, empty, empty, none, int((mid - 1).sum()), size, tile, n_ub)
                   - steps.split_time(mid, empty, empty, none, [pl]))
            kvu = {"prefill_s": split["prefill_s"] + extra, "decode_step_s": split["decode_step_s"] + dec}
            out.append({"pp": pp, "pl": pl, "split": split, "kvu": kvu})
    return out


def predict14(out: Path, about: str = "written before the run") -> None:
    from roofline.catalogue.store import load_model
    from roofline.engines.timing import timing
    from validate.engines.cases import checkout_sha

    t = CASES["tiny"]
    cfg = _tiny_config()
    base = ["--model", str(cfg), "--hardware", "H200", "--method", "fp16", "--engine", "llamacpp", "--weight-dtype",
            "fp16", "--max-num-seqs", str(t["np"]), "--kv-unified", "--cache-ram", "0"]
    per_slot = timing("llamacpp").sampler_host_element_s * load_model(str(cfg)).vocab_size  # the host sampler a slot
    tiny = {}
    for c in t["concurrency"]:
        host = _simulated([*base, "--rate", "inf", "--max-concurrency", str(c), "--requests", str(c * t["rounds"]),
                           "--prompt-tokens", str(t["prompt"]), "--output-tokens", str(t["output"])])
        tiny[str(c)] = {"host": host, "gpu": {"tpot_s": host["tpot_s"] - c * per_slot, "ttft_s": host["ttft_s"]}}
    lone = {str(p): _simulated([*base, "--rate", "inf", "--requests", "1", "--prompt-tokens", str(p),
                                "--output-tokens", str(t["lone_output"])])["ttft_s"] for p in t["lone_prompts"]}
    doc = {"about": f"roofline's prediction of llama.cpp run 14 (llamacpp_cases_run14.json), {about}: the timing "
                    "mechanisms as they stand (no server host work a slot beyond the sampler: server_per_seq_s 0; no "
                    "request's own cost: request_s 0)",
           "hardware": "H200", "git_sha": checkout_sha(), "date": dt.date.today().isoformat(),
           "sampler_per_slot_s": per_slot, "tiny": tiny, "lone_ttft_s": lone, "batched": _batched()}
    out.write_text(json.dumps(doc, indent=1) + "\n")


def predict15(out: Path, about: str = "written before the run") -> None:
    """Run 15 (llamacpp_cases_run15.json): llama-batched-bench's decode steps past one query tile (mechanism 22: one
    stream's view read once per 64 / ncols2 = 16 query rows for Llama-3.1-8B), -kvu against a stream a sequence."""
    from validate.engines.cases import checkout_sha

    cases = json.loads((HERE / "llamacpp_cases_run15.json").read_text())
    doc = {"about": f"roofline's prediction of llama.cpp run 15 (llamacpp_cases_run15.json), {about}: the timing "
                    "mechanisms as they stand", "hardware": "H200", "git_sha": checkout_sha(),
           "date": dt.date.today().isoformat(), "batched": _batched(cases["batched"])}
    out.write_text(json.dumps(doc, indent=1) + "\n")


def compare_batched(resdir: Path, predicted: Path, b: dict) -> list[str]:
    """Each (PP, B) of a prediction's batched rows against the runs' median T_PP and T_TG / TG, per variant."""
    pred = json.loads(predicted.read_text())
    lines = []
    for variant, _ in b["runs"]:
        runs = [_batched_rows(resdir / f"batched-{variant}-{k}.log") for k in range(1, b["repeats"] + 1)]
        for row in pred["batched"]:
            key = (row["pp"], row["pl"])
            if not all(key in r for r in runs):
                continue
            t_pp = statistics.median(r[key]["t_pp"] for r in runs)
            t_tg = statistics.median(r[key]["t_tg"] / r[key]["tg"] for r in runs)
            p = row[variant]
            lines.append(f"B {variant:5s} PP {row['pp']:5d} B {row['pl']:2d}: T_PP {t_pp * 1e3:7.1f} / "
                         f"{p['prefill_s'] * 1e3:7.1f} ({(p['prefill_s'] / t_pp - 1) * 100:+6.1f})   step "
                         f"{t_tg * 1e3:6.2f} / {p['decode_step_s'] * 1e3:6.2f} "
                         f"({(p['decode_step_s'] / t_tg - 1) * 100:+6.1f})")
    return lines


def compare15(resdir: Path, predicted: Path) -> str:
    cases = json.loads((HERE / "llamacpp_cases_run15.json").read_text())
    pred = json.loads(predicted.read_text())
    return "\n".join([f"llama.cpp run 15 ({resdir}): llama-batched-bench -kvu against a stream a sequence",
                      f"predicted before the run: {predicted.name} ({pred['git_sha'][:7]}); measured / predicted "
                      "(err %), ms", *compare_batched(resdir, predicted, cases["batched"])])


def _batched_rows(path: Path) -> dict[tuple[int, int], dict]:
    """llama-batched-bench's table: (PP, B) -> {'t_pp': s, 't_tg': s, 'tg': tokens}."""
    rows = {}
    for line in path.read_text(errors="replace").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[0].isdigit():
            pp, tg, b = int(cells[0]), int(cells[1]), int(cells[2])
            rows[(pp, b)] = {"t_pp": float(cells[4]), "t_tg": float(cells[6]), "tg": tg}
    return rows


def compare14(resdir: Path, predicted: Path) -> str:
    from validate.engines.llamacpp_logs import served_summary

    pred = json.loads(predicted.read_text())
    t, b = CASES["tiny"], CASES["batched"]
    lines = [f"llama.cpp run 14 ({resdir}): A tiny-llama on llama-server -np 16 -kvu --cache-ram 0; B batched-bench",
             f"predicted before the run: {predicted.name} ({pred['git_sha'][:7]}); measured / predicted (err %), ms"]
    for variant, _flags, _client in t["servers"]:
        tpots = []
        for c in t["concurrency"]:
            m = served_summary(json.loads((resdir / f"tiny-{variant}-c{c}.json").read_text()))
            p = pred["tiny"][str(c)][variant]
            tpots.append((c, m["tpot_s"]["p50"]))
            tpot = m["tpot_s"]["p50"]
            lines.append(f"A {variant:4s} c {c:2d}: TPOT p50 {tpot * 1e3:6.3f} / {p['tpot_s'] * 1e3:6.3f} "
                         f"({(p['tpot_s'] / tpot - 1) * 100:+6.1f})   TTFT p50 "
                         f"{m['ttft_s']['p50'] * 1e3:6.2f} / {p['ttft_s'] * 1e3:6.2f}")
        cs, ys = np.array([x for x, _ in tpots], float), np.array([y for _, y in tpots])
        slope, icpt = np.polyfit(cs, ys, 1)
        lines.append(f"A {variant:4s} least squares over c: TPOT = {icpt * 1e3:.3f} ms + {slope * 1e6:.1f} us x c "
                     f"(the model's host sampler a slot: {pred['sampler_per_slot_s'] * 1e6:.1f} us)")
    for p in t["lone_prompts"]:
        m = served_summary(json.loads((resdir / f"lone-{p}.json").read_text()))
        q = pred["lone_ttft_s"][str(p)]
        lines.append(f"A lone prompt {p:5d}: TTFT p50 {m['ttft_s']['p50'] * 1e3:6.2f} / {q * 1e3:6.2f} "
                     f"({(q / m['ttft_s']['p50'] - 1) * 100:+6.1f})")
    lines += compare_batched(resdir, predicted, b)
    return "\n".join(lines)


def main() -> None:
    now = ["the model now"] if sys.argv[3:] == ["--now"] else []
    if sys.argv[1:2] == ["predict14"] and len(sys.argv) in (3, 4):
        predict14(Path(sys.argv[2]), *now)
    elif sys.argv[1:2] == ["compare14"] and len(sys.argv) == 4:
        print(compare14(Path(sys.argv[2]), Path(sys.argv[3])))
    elif sys.argv[1:2] == ["predict15"] and len(sys.argv) in (3, 4):
        predict15(Path(sys.argv[2]), *now)
    elif sys.argv[1:2] == ["compare15"] and len(sys.argv) == 4:
        print(compare15(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        print(__doc__.splitlines()[0], file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
