"""kv_handshake_s (roofline.engines.timing mechanism 13) from a disaggregated run's warm-up, into the vLLM profile.

    python -m validate.engines.derive_handshake RUN_DIR --into roofline/engines/profiles/vllm.json

A fresh pair's first request waits for the NixlConnector's first handshake (the decode worker fetches the prefill
engine's metadata and registers its whole KV pool with NIXL in a background thread, the request parked until that
ends: nixl/pull_worker.py:63-74, base_worker.py:752-827). pd_proxy.py logs each request's legs
(RUN_DIR/Llama-3.1-8B-pd-proxy-requests.jsonl); the marks file says when each stage began. The figure is the decode
leg (first token at the proxy less the prefill's return) of the first request of the warm-up stage (`pd-warmup`, sent
to a fresh pair before any judged rate) less the median decode leg of the first judged rate that follows it (the same
pair, warm, at its lowest load), times the run's host speed (its own tiny server against the profile's,
validate.engines.predict.host_speed_of; timing mechanism 11): the handshake is one thread's host work (the Python loop
over the remote pool's blocks and NIXL's descriptor list, base_worker.py:1308-1364, 1565-1569), so the profile keeps
it at the profile's own host as its other host figures. Only this field and its source change in the profile."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from validate import stored
from validate.engines.predict import host_speed_of

PROXY = "Llama-3.1-8B-pd-proxy-requests.jsonl"
MARKS = "Llama-3.1-8B-pd-marks.txt"


def decode_leg(x: dict) -> float:
    return x["decode_first"] - x["prefill_done"]


def handshake_seconds(run: Path) -> tuple[float, dict]:
    """(the first warm-up request's decode leg less the next stage's median decode leg, what went into it)."""
    marks = [line.split() for line in stored.read_text(run / MARKS).splitlines() if line.strip()]
    stages = [name for name, _ in marks]
    if "pd-warmup" not in stages or stages.index("pd-warmup") + 1 >= len(stages):
        raise SystemExit(f"{run}: no pd-warmup stage followed by a rate in {MARKS}")
    k = stages.index("pd-warmup")
    edges = [float(t) for _, t in marks] + [float("inf")]
    proxy = sorted((json.loads(line) for line in stored.read_text(run / PROXY).splitlines() if line.strip()),
                   key=lambda x: x["in"])
    warm = [x for x in proxy if edges[k] <= x["in"] < edges[k + 1] and x["decode_first"]]
    after = [x for x in proxy if edges[k + 1] <= x["in"] < edges[k + 2] and x["decode_first"]]
    first, steady = decode_leg(warm[0]), statistics.median(decode_leg(x) for x in after)
    speed = host_speed_of(run)
    if speed is None:
        raise SystemExit(f"{run}: no tiny-conc1.json (serve_tiny.sh on the same host): the host speed is unknown")
    return (first - steady) * speed, {"first_decode_leg_s": first, "steady_decode_leg_s": steady,
                                      "steady_stage": stages[k + 1], "steady_requests": len(after),
                                      "first_in": warm[0]["in"], "host_speed": speed}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("--into", type=Path, required=True)
    a = p.parse_args()
    value, why = handshake_seconds(a.run)
    d = json.loads(a.into.read_text())
    d["kv_handshake_s"] = value
    d["sources"]["kv_handshake_s"] = (
        f"{a.run / PROXY} and {a.run / MARKS}: the first pd-warmup request's decode leg (decode_first - prefill_done) "
        f"{why['first_decode_leg_s']:.4f} s on a fresh 1 prefill + 1 decode pair (Llama-3.1-8B, NixlConnector, "
        f"839,648-token pools) less the median decode leg of {why['steady_stage']} ({why['steady_requests']} "
        f"requests) {why['steady_decode_leg_s']:.4f} s, times that host's speed {why['host_speed']:.4f} (its "
        f"tiny-conc1.json against the profile's: the figure at the profile's host, timing mechanism 11) "
        f"(validate/engines/derive_handshake.py)")
    a.into.write_text(json.dumps(d, indent=1) + "\n")
    print(f"{a.into}: kv_handshake_s {value:.4f} s ({why})")


if __name__ == "__main__":
    main()
