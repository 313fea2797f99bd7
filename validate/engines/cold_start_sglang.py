"""SGLang run 3's served MoE runs replayed at the client's sends, steady state beside a fresh server (`simulate
--cold-start`, roofline.engines.first_use), against the measured figures.

    python -m validate.engines.cold_start_sglang [RUN_DIR] [--cases cases-sglang-run3.json]

The runs went through one server in the cases file's order (rates 4, 12, 24, 36, then the closed loop), so only the
first run that goes past SGLang's captured batches meets new fused-MoE keys; every replay here starts fresh and each
line says which ones compiled (`first_use`). CPU only, committed results."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from validate import stored
from validate.engines import predict_sglang
from validate.engines.predict import write_trace

RUN = Path("validate/results/engines/nvidia-h200-sglang-2026-11-30-run3")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, nargs="?", default=RUN)
    p.add_argument("--cases", default="cases-sglang-run3.json")
    a = p.parse_args()
    predict_sglang.CASES = json.loads((predict_sglang.HERE / a.cases).read_text())
    s, tmp = predict_sglang.CASES["serve2"], Path(tempfile.mkdtemp())
    print(f"{s['model']} on SGLang ({a.run.name}): measured / steady / fresh server (% of measured)")
    for rate, n in s["rates"]:
        reqs = predict_sglang.sent(a.run, s["model"], f"rate{rate}", n)
        t0 = reqs[0]["start_perf_s"]
        trace = write_trace(tmp / f"rate{rate}.csv", [r["start_perf_s"] - t0 for r in reqs],
                            [r["prompt_len"] for r in reqs], [r["output_len"] for r in reqs])
        m = json.loads(stored.read_text(a.run / f"{s['model']}-rate{rate}.jsonl").splitlines()[-1])
        sims = []
        for extra in ([], ["--cold-start"]):
            r = subprocess.run([sys.executable, "-m", "roofline.cli", "simulate", "--model", s["model"], "--hardware",
                                "H200", "--method", "bf16", "--engine", "sglang", "--no-search", "--trace",
                                str(trace), "--json", *extra], capture_output=True, text=True, check=True)
            sims.append(json.loads(r.stdout))
        cells = []
        for label, mk, key, q in (("TTFT p50", "median_ttft_ms", "ttft_s", "p50"),
                                  ("TTFT p99", "p99_ttft_ms", "ttft_s", "p99"),
                                  ("TPOT p50", "median_tpot_ms", "tpot_s", "p50")):
            w, c = sims[0][key][q] * 1e3, sims[1][key][q] * 1e3
            cells.append(f"{label} {m[mk]:.1f} / {w:.1f} ({100 * (w / m[mk] - 1):+.1f}) / {c:.1f} "
                         f"({100 * (c / m[mk] - 1):+.1f})")
        mt, w, c = m["output_throughput"], sims[0]["throughput_tokens_per_s"], sims[1]["throughput_tokens_per_s"]
        cells.append(f"tok/s {mt:.0f} / {w:.0f} ({100 * (w / mt - 1):+.1f}) / {c:.0f} ({100 * (c / mt - 1):+.1f})")
        print(f"rate {rate}: " + "; ".join(cells) + f"; compiled {sims[1]['first_use']}")


if __name__ == "__main__":
    main()
