"""SGLang's time profile from its own tiny-model measurements (never from the runs it is judged on):
roofline/engines/profiles/sglang.json.

python -m validate.engines.derive_sglang RUN_DIR [--out roofline/engines/profiles/sglang.json]

The same mechanisms as vLLM's (validate/engines/derive.py; roofline/engines/timing.py 1, 2, 3, 5, 6), measured on
SGLang's tiny-llama (2 layers of width 256, Llama-3's vocabulary: its GPU work ~0.1 ms, roofline's own prediction):
- host work per step: the offline Engine's decode steps at B = 1 .. 256 (lat_sglang.py), host = step_s + per_seq_s x B
  by relative least squares; overlap: SGLang's overlap scheduler (server_info disable_overlap_schedule False: the
  next batch is prepared while the GPU runs this one, a step = max(GPU, host)).
- capture sizes: the decode CUDA-graph batch sizes the engine logged capturing.
- a request's own cost: the tiny model's offline prefill of 128 tokens (B = 1, one output token).
- the API server: the tiny server's median TPOT at concurrency 1, 16, 64 (the same fit), and its per-request cost,
  the server's median TTFT at concurrency 1 less the request's own cost (0 where the offline request costs more: the
  offline Engine's call pays its own IPC).
SGLang's kernels, sampler, launches past the capture sizes, drafter and connector are not measured: none is set.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from validate.engines.derive import fit_host

TINY = "tiny-llama"


def derive(run: Path) -> dict:
    lat = json.loads((run / f"{TINY}-lat.json").read_text())
    info = lat["server_info"]
    batches = [d["B"] for d in lat["decode"]]
    steps = [d["decode_step_s"] for d in lat["decode"]]
    step_s, per_seq_s = fit_host(batches, steps)
    request = min(lat["prefill"], key=lambda p: p["P"])
    served = [(c, json.loads((run / f"{TINY}-conc{c}.jsonl").read_text().splitlines()[-1])) for c in (1, 16, 64)]
    server_step_s, server_per_seq_s = fit_host([c for c, _ in served], [m["median_tpot_ms"] * 1e-3 for _, m in served])
    ttft = served[0][1]["median_ttft_ms"] * 1e-3
    startup = "\n".join(json.loads((run / f"{TINY}-startup.json").read_text())["log"])
    sizes = [int(s) for s in re.findall(r"Capture target decode CUDA graph begin.*?bs=\[([\d, ]+)\]",
                                        startup)[-1].split(",")]
    src = f"{run}/{TINY}"
    return {"version": f"sglang {info.get('version', '')}", "step_s": step_s, "per_seq_s": per_seq_s,
            "overlap": not info["disable_overlap_schedule"], "capture_sizes": sorted(sizes),
            "api_request_s": max(0.0, ttft - request["median_s"]), "request_s": request["median_s"],
            "server_step_s": server_step_s, "server_per_seq_s": server_per_seq_s, "kernels": {},
            "sources": {"step_s": f"{src}-lat.json decode (B, step) fitted host = a + b B",
                        "per_seq_s": f"{src}-lat.json decode (B, step) fitted host = a + b B",
                        "overlap": f"{src}-lat.json server_info.disable_overlap_schedule = "
                                   f"{info['disable_overlap_schedule']}",
                        "capture_sizes": f"{src}-startup.json 'Capture target decode CUDA graph begin' bs",
                        "request_s": f"{src}-lat.json prefill P={request['P']} (B = 1, one output token)",
                        "api_request_s": f"{src}-conc1.jsonl median_ttft_ms less request_s (at least 0)",
                        "server_step_s": f"{src}-conc{{1,16,64}}.jsonl median_tpot_ms against concurrency",
                        "kernels": "not measured: the device's own laws"},
            "fit_residuals": {"host": [round(s / (step_s + per_seq_s * b) - 1, 4)
                                       for b, s in zip(batches, steps, strict=True)]}}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run", type=Path)
    p.add_argument("--out", type=Path, default=Path("roofline/engines/profiles/sglang.json"))
    a = p.parse_args()
    a.out.write_text(json.dumps(derive(a.run), indent=1) + "\n")
    print(a.out.read_text(), end="")


if __name__ == "__main__":
    main()
