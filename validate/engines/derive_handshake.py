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
it at the profile's own host as its other host figures. Only this field and its source change in the profile.

    python -m validate.engines.derive_handshake --probe RUN_DIR/handshake-probe.json --into PROFILE
                                                [--host-speed S] [--anchor]

The per-descriptor law (mechanism 13) from handshake_probe.py's result: kv_handshake_fixed_s + descriptors x
kv_handshake_descriptor_s fitted on the probe's per-case medians of vLLM's timed handshake path
(handshake_predict.fit_law), both terms times the probe host's speed (RUN_DIR's tiny-conc1.json, serve_tiny.sh in
the same lease, or --host-speed): host work kept at the profile's host. --anchor keeps the probe's slope and sets the
fixed term so the law meets kv_handshake_s (run 17's whole first wait) at run 17's pool: the part of the real wait
the probe does not time (the engine around the handshake thread) then stays in the fixed term. Only these two
fields, their sources and fit_residuals["handshake_probe"] change; kv_handshake_s stays (the model's figure
wherever the law is absent)."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from validate import stored
from validate.engines.handshake_predict import RUN17_DESCRIPTORS, fit_law, points
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


def probe_law(path: Path, speed: float | None, anchor_s: float | None) -> tuple[dict, dict, list[dict]]:
    """(profile fields, their sources, the fit's points) of the per-descriptor law from handshake_probe.py's
    result (module docstring); `speed`: the probe host's (None: its folder's tiny server); `anchor_s`: the whole
    first wait at run 17's pool the law must meet (None: the probe alone)."""
    probe = json.loads(path.read_text())
    if probe.get("mem") != "VRAM" or not probe.get("reps"):
        raise SystemExit(f"--probe {path}: not handshake_probe.py's result on a GPU (HS_MEM=VRAM) with reps")
    if speed is None and (speed := host_speed_of(path.parent)) is None:
        raise SystemExit(f"--probe {path}: no tiny-conc1.json beside it (serve_tiny.sh in the same lease): give "
                         "--host-speed")
    pts = points(probe)
    fixed, per = fit_law(pts)
    law = {"kv_handshake_fixed_s": fixed * speed, "kv_handshake_descriptor_s": per * speed}
    how = "the probe alone"
    if anchor_s is not None:
        law["kv_handshake_fixed_s"] = max(0.0, anchor_s - RUN17_DESCRIPTORS * law["kv_handshake_descriptor_s"])
        how = f"the probe's slope, the fixed term meeting kv_handshake_s {anchor_s:.4f} s at run 17's pool"
    bad = sum(not r["read_ok"] for r in probe["reps"])
    src = (f"{path}: vLLM 0.24's handshake path (ZMQ metadata, add_remote_agent, _build_fa_remote, get_xfer_descs, "
           f"prep_xfer_dlist; nixl/base_worker.py@v0.24.0:527-643, 1410-1594) timed on fresh pairs at "
           f"{', '.join(f'{d:,}' for d, _ in pts)} descriptors ({len(probe['reps'])} reps, medians; "
           f"{bad} failed the READ check), t = fixed + descriptors x per (relative least squares), {how}; times "
           f"that host's speed {speed:.4f} (timing mechanism 11) (validate/engines/derive_handshake.py --probe)")
    rows = [{"descriptors": d, "s": t, "fit_s": fixed + per * d} for d, t in pts]
    return law, {k: src for k in law}, rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, nargs="?", help="a disaggregated run's folder (its warm-up: kv_handshake_s)")
    p.add_argument("--probe", type=Path, help="handshake_probe.py's result (the per-descriptor law)")
    p.add_argument("--host-speed", type=float, help="with --probe: the probe host's speed (default: its folder's "
                                                    "tiny-conc1.json against the profile's)")
    p.add_argument("--anchor", action="store_true", help="with --probe: the fixed term meets kv_handshake_s at run "
                                                         "17's pool")
    p.add_argument("--into", type=Path, required=True)
    a = p.parse_args()
    if (a.run is None) == (a.probe is None):
        p.error("give either RUN (the warm-up's kv_handshake_s) or --probe (the per-descriptor law)")
    if a.host_speed is not None and not a.host_speed > 0:
        p.error("--host-speed: must be a positive number")
    d = json.loads(a.into.read_text())
    if a.probe:
        law, sources, rows = probe_law(a.probe, a.host_speed, d["kv_handshake_s"] if a.anchor else None)
        d.update(law)
        d["sources"].update(sources)
        d.setdefault("fit_residuals", {})["handshake_probe"] = rows
        a.into.write_text(json.dumps(d, indent=1) + "\n")
        at17 = law["kv_handshake_fixed_s"] + RUN17_DESCRIPTORS * law["kv_handshake_descriptor_s"]
        print(f"{a.into}: kv_handshake_fixed_s {law['kv_handshake_fixed_s']:.4f} s, kv_handshake_descriptor_s "
              f"{law['kv_handshake_descriptor_s'] * 1e9:.2f} ns; at run 17's pool {at17:.4f} s against its "
              f"kv_handshake_s {d['kv_handshake_s']:.4f} s ({at17 / d['kv_handshake_s'] - 1:+.1%})")
        return
    value, why = handshake_seconds(a.run)
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
