"""The two-command CLI of a lab run module (run18.py, run19.py): `predict OUT.json` before the run, `compare RESULTS
--predicted P [--out REPORT]` after it (the report printed, and written where --out says)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path


def main(doc: str, predict: Callable[[Path], None], compare: Callable[[Path, dict], str]) -> None:
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("predict").add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("results", type=Path)
    c.add_argument("--predicted", type=Path, required=True)
    c.add_argument("--out", type=Path)
    a = p.parse_args()
    if a.cmd == "predict":
        predict(a.out)
        return
    text = compare(a.results, json.loads(a.predicted.read_text()))
    if a.out:
        a.out.write_text(text)
    print(text, end="")


def trust_rows(title: str, rows: list[tuple[str, dict, dict]]) -> list[str]:
    """Served runs in validate.engines.compare's serving format, which roofline.trust.engines reads from a
    `-compare.txt` report: a `serving (TITLE)` line, then per run `RUN  m / p (err)` for TTFT p50, p99, TPOT p50,
    p99 (ms) and output tok/s. `rows`: (run, `vllm bench serve`'s result, `roofline simulate --json`'s figures)."""
    lines = ["", "rows in validate.engines.compare's format (roofline.trust.engines reads them: the model now)",
             f"serving ({title}): measured / predicted (err %)",
             "run       TTFT p50 ms            TTFT p99 ms            TPOT p50 ms          TPOT p99 ms          "
             "output tok/s"]
    for run, meas, sim in rows:
        cells = []
        for key, q, mkey in (("ttft_s", "p50", "median_ttft_ms"), ("ttft_s", "p99", "p99_ttft_ms"),
                             ("tpot_s", "p50", "median_tpot_ms"), ("tpot_s", "p99", "p99_tpot_ms")):
            m, p = meas[mkey], sim[key][q] * 1e3
            cells.append(f"{m:8.1f} / {p:8.1f} ({100 * (p - m) / m:+5.1f})")
        m, p = meas["output_throughput"], sim.get("throughput_tokens_per_s", sim.get("output_tokens_per_s"))
        cells.append(f"{m:6.0f} / {p:6.0f} ({100 * (p - m) / m:+5.1f})")
        lines.append(f"{run:8s}  " + "  ".join(cells))
    return lines


def served_cells(meas: dict, sim: dict, keys: tuple[tuple[str, str, str], ...]) -> str:
    """One report row's cells (run19.py, run20.py): per (quantity, percentile, `vllm bench serve` key) of `keys`
    'QUANTITY Q measured / predicted (err %)' in ms, then output tok/s."""
    cells = []
    for key, q, mkey in keys:
        m, p = meas[mkey], sim[f"{key}_s"][q] * 1e3
        cells.append(f"{key.upper()} {q} {m:7.1f} / {p:7.1f} ({100 * (p - m) / m:+6.1f})")
    m, p = meas["output_throughput"], sim["throughput_tokens_per_s"]
    cells.append(f"tok/s {m:6.0f} / {p:6.0f} ({100 * (p - m) / m:+5.1f})")
    return "   ".join(cells)


def result(results: Path, run: str) -> dict | None:
    """`vllm bench serve`'s saved result of `run` in a run folder (RUN.json, or its .gz), None where it did not run."""
    from validate import stored

    f = results / f"{run}.json"
    return json.loads(stored.read_text(f)) if stored.exists(f) else None


def sends(meas: dict) -> list[float]:
    """A saved result's send instants (--save-detailed start_times), seconds from the first."""
    t0 = meas["start_times"][0]
    return [t - t0 for t in meas["start_times"]]


def simulated_trace(args: list[str]):
    """`roofline simulate ARGS` run in this process, returning the simulator's first Trace (per-request first
    tokens and finishes, per-step records) that its printed summary is made from; SystemExit on a refusal."""
    import contextlib
    import io

    from roofline.cli import main as cli
    from roofline.serving import simulate as S

    got = {}
    orig = S.Simulator.run

    def run(self, *a, **k):
        t = orig(self, *a, **k)
        got.setdefault("trace", t)
        return t

    S.Simulator.run = run
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli(["simulate", *args])
    finally:
        S.Simulator.run = orig
    if code or "trace" not in got:
        raise SystemExit(f"simulate {' '.join(args)}: exit {code}")
    return got["trace"]
