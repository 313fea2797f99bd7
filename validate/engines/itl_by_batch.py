"""The served decode step by batch size, read from a `vllm bench serve --save-detailed` result alone: each request's
token times (send + TTFT + its ITLs, cumulated), the batch at a token the requests whose decode span (first token to
last) covers it, and per batch the median of the ITLs under a threshold (the decode steps between prefills: a step
that carries a prefill past the capture sizes is tens of ms). Beside it `roofline simulate`'s own decode steps by
running sequences on the same sends and lengths (optional).

    python -m validate.engines.itl_by_batch RESULTS RUN [--model M --host-speed S] [--under-ms 25]

(run 20: validate/notes/2026-11-30-vllm-h200-run20.md)."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

import numpy as np

from validate.engines import labrun
from validate.engines.predict import write_trace


def measured(meas: dict, under_ms: float) -> dict[int, tuple[float, int]]:
    """{batch: (median ITL ms under `under_ms`, count)} of a saved result (module docstring)."""
    first = np.array(meas["start_times"]) + np.array(meas["ttfts"])
    times, itls, ends = [], [], []
    for i, x in enumerate(meas["itls"]):
        t = first[i] + np.cumsum(x)
        times.append(t)
        itls.append(np.array(x) * 1e3)
        ends.append(t[-1] if len(x) else first[i])
    t, itl, ends = np.concatenate(times), np.concatenate(itls), np.array(ends)
    eps = 1e-4  # a token time sits at its own request's span end: count it in
    batch = ((first[None, :] <= t[:, None] - eps) & (ends[None, :] >= t[:, None] - eps)).sum(axis=1)
    low = itl < under_ms
    return {int(b): (float(np.median(itl[low & (batch == b)])), int((low & (batch == b)).sum()))
            for b in sorted(set(batch[low].tolist()))}


def modelled(meas: dict, model: str, host_speed: float) -> dict[int, float]:
    """{running sequences: the median of `roofline simulate`'s decode-only steps, ms} at the result's sends."""
    import roofline.serving.metrics as metrics
    from roofline.cli import main as cli

    trace = write_trace(Path(tempfile.mkdtemp()) / "t.csv", labrun.sends(meas), meas["input_lens"],
                        meas["output_lens"])
    caught, summarize = {}, metrics.summarize

    def grab(tr, slo):
        caught["trace"] = tr
        return summarize(tr, slo)

    metrics.summarize = grab
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli(["simulate", "--model", model, "--hardware", "H200", "--method", "bf16", "--engine", "vllm", "--trace",
                 str(trace), "--no-search", "--host-speed", repr(host_speed), "--json"])
    finally:
        metrics.summarize = summarize
    st = caught["trace"].steps  # rows: start, duration, running, waiting, kv bytes, preemptions, tokens
    run, tok = st[:, 2], st[:, 6]
    pure = (run > 0) & (tok % np.maximum(run, 1) == 0) & (st[:, 3] == 0)  # blocks of k decode steps: tokens k x run
    per = st[:, 1] / np.where(pure, tok / np.maximum(run, 1), 1) * 1e3
    return {int(b): float(np.median(per[pure & (run == b)])) for b in sorted(set(run[pure].astype(int).tolist()))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path)
    p.add_argument("run")
    p.add_argument("--model")
    p.add_argument("--host-speed", type=float, default=1.0)
    p.add_argument("--under-ms", type=float, default=25.0)
    p.add_argument("--min-count", type=int, default=30)
    a = p.parse_args()
    meas = labrun.result(a.results, a.run)
    if meas is None:
        sys.exit(f"{a.results}/{a.run}.json: no such result")
    m = measured(meas, a.under_ms)
    sim = modelled(meas, a.model, a.host_speed) if a.model else {}
    print(f"{a.results.name} {a.run}: decode ITLs under {a.under_ms:g} ms by batch (median ms, count)"
          + (f"; the model ({a.model}, host speed {a.host_speed:g})" if sim else ""))
    for b, (med, n) in m.items():
        if n < a.min_count:
            continue
        s = sim.get(b)
        print(f"B {b:3d}  {med:7.2f}  ({n:5d})" + (f"   model {s:7.2f} ({100 * (s - med) / med:+5.1f} %)" if s else ""))


if __name__ == "__main__":
    main()
