"""Runs 12 and 13's fresh-pair rates replayed in steady state and with `--cold-start` (timing mechanism 13).

    python -m validate.engines.replay_handshake

Each run's first rate met a fresh pair (no warm-up before runs 17's): run 12's 4 req/s, run 13's 2 req/s. Both are
replayed at the send times the client recorded (validate.engines.predict.pd_runs, as compare_x2.py does), once as
the model stands (steady state) and once with --cold-start, against the measured TTFT p50 / p99, TPOT p50 and output
tok/s. kv_handshake_s comes from run 17's warm-up (derive_handshake.py); nothing here is fitted."""

from __future__ import annotations

import json
import subprocess
import sys

from validate import stored
from validate.engines.compare_x2 import RUNS, _predict_module, pct

FRESH = {"run12": "pd-rate4", "run13": "pd-rate2"}  # the first rate of each run: the pair's first requests
ROWS = (("TTFT p50", "median_ttft_ms", "ttft_s", "p50"), ("TTFT p99", "p99_ttft_ms", "ttft_s", "p99"),
        ("TPOT p50", "median_tpot_ms", "tpot_s", "p50"))


def replay(run: str) -> list[str]:
    cases, folder, _ = RUNS[run]
    pred = _predict_module(cases)
    key = FRESH[run]
    flags = dict(pred.pd_runs(folder))[key]
    out = {}
    for mode, extra in (("steady", ()), ("cold", ("--cold-start",))):
        r = subprocess.run([sys.executable, "-m", "roofline.cli", "simulate", *pred.pd_flags("H200"),
                            *flags, *extra], capture_output=True, text=True, check=True)
        d = json.loads(r.stdout)
        out[mode] = d[0] if isinstance(d, list) else d
    m = json.loads(stored.read_text(folder / f"{pred.CASES['disagg']['model']}-{key}.json"))
    shake = out["cold"]["first_use"]["kv_handshake"]
    lines = [f"{run} {key} ({m['completed']} requests; {shake['requests_waited']} waited for the handshake in the "
             f"model, {shake['seconds_each']:.3f} s each pair)"]
    for label, mk, pk, q in ROWS:
        meas = m[mk]
        s, c = out["steady"][pk][q] * 1e3, out["cold"][pk][q] * 1e3
        lines.append(f"  {label:<9} {meas:9.2f} ms | steady {s:9.2f} ms ({pct(s, meas)}) | cold-start {c:9.2f} ms "
                     f"({pct(c, meas)})")
    meas = m["output_throughput"]
    s, c = out["steady"]["throughput_tokens_per_s"], out["cold"]["throughput_tokens_per_s"]
    lines.append(f"  {'out tok/s':<9} {meas:9.1f}    | steady {s:9.1f}    ({pct(s, meas)}) | cold-start {c:9.1f}    "
                 f"({pct(c, meas)})")
    return lines


def main() -> None:
    for run in FRESH:
        print("\n".join(replay(run)))


if __name__ == "__main__":
    main()
