"""Run 29 (session 39): run 23 repeated on another lease (run23.sh's kit unchanged: K1's tiny server, then the served
Qwen3-30B-A3B at run 22's sends with the engine's step log and the in-situ probes), judged at the lease's own host
speed from K1. Issue 29's open item: the same settings on different leases differ about as much as the serving
targets allow, and K1 carried the MoE's eager path on run 23's lease but not on run 22's; a third lease with K1
recorded says which is the rule.

    python -m validate.engines.run29 predict OUT.json                      (before the run; committed)
    python -m validate.engines.run29 compare RESULTS --predicted P [--out REPORT]
"""

from __future__ import annotations

import json
from pathlib import Path

from validate.engines import labrun, run20, run23

HYPOTHESES = {
    "R1": "K1's S (16.63 ms over the tiny server's median TTFT at concurrency 1) lies in [1.3, 1.8], as on every "
          "lease since run 20 (1.36, 1.41, 1.71, 1.43)",
    "R2": "at K1's S the served TPOT p50 of r6, r12 and c16 within 15 % (run 23: +8 / +12 / +12 %), the TTFT p50 of "
          "r6 and c16 within 10 % and r12's within 25 % (run 23: +0.5 / -21.9 / +5.9 %)",
    "R3": "the engine's eager launch period (iter_log's eager_period_ms at r6, r12, c16) within 10 % of the model's "
          "eager host work at K1's S, (eager_step_s + 48 eager_layer_s + 48 eager_moe_layer_s) / S (run 23: 52 / 55 / "
          "49 ms against 52.8, within 5 %)",
    "R4": "the measured TTFT p50 of r6, r12 and c16 differ by more than 20 % between the leases of runs 22, 23 and 29 "
          "(run 22: 120 / 159 / 122 ms; run 23: 75 / 122 / 78): the served MoE is host-bound enough that one lease "
          "cannot judge a 10 % target",
}


def predict(out: Path) -> None:
    run20.predict(out, runs=run23.RUNS, hosts=run23.HOSTS, hypotheses=HYPOTHESES, about=__doc__.splitlines()[0])
    d = json.loads(out.read_text())
    d["probes"] = {f"{h:g}": {name: run23.probe_ttft(p, h) for name, p in run23.PROBES.items()} for h in run23.HOSTS}
    out.write_text(json.dumps(d, indent=1) + "\n")


def compare(results: Path, predicted: dict) -> str:
    return run23.compare(results, predicted).replace("Run 23: run 22's sends with the engine's step log",
                                                     "Run 29: run 23 repeated on another lease", 1)


if __name__ == "__main__":
    labrun.main(__doc__, predict, compare)
