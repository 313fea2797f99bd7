"""The handshake at handshake_probe.py's pool sizes: what the model says now, and the per-descriptor law the probe
gives (roofline/engines/timing.py mechanism 13).

    python -m validate.engines.handshake_predict [--probe PROBE_JSON] [--host-speed S] [--json]

- current: the model as committed, EngineTiming.handshake_s of each case's descriptors on a host S times the
  profile's (timing_on): the one figure kv_handshake_s (run 17's warm-up) at every pool size, until the profile
  carries the per-descriptor law.
- probe law (with --probe): t = fixed + descriptors x per by relative least squares (derive.fit_affine) over the
  probe's per-case medians of the timed handshake (meta + add_remote_agent + _build_fa_remote + get_xfer_descs +
  prep_xfer_dlist), in sample at every case; and the largest case predicted by the law of the others alone (held
  out: whether the growth stays linear to the whole pool). Both at the probe's own host; derive_handshake.py --probe
  puts the law at the profile's host.
Run 17's pool (Llama-3.1-8B, 839,648 tokens: 52,478 blocks x 64 regions = 3,358,592 descriptors) is where the one
figure was measured; the law there is printed beside it (at S).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from validate.engines.handshake_layout import DEFAULT_CASES, parse_cases, summarize

RUN17_DESCRIPTORS = 3_358_592  # 52,478 blocks x 32 layers x (K, V): validate/notes/2026-11-30-disagg-27.md


def points(probe: dict) -> list[tuple[int, float]]:
    """(descriptors, median handshake_s) per case of a probe result, smallest first."""
    return [(s["descriptors"], s["handshake_s"]) for s in summarize(probe["reps"])]


def fit_law(pts: list[tuple[int, float]]) -> tuple[float, float]:
    """(fixed_s, per_descriptor_s) of t = fixed + descriptors x per (relative least squares, fixed >= 0)."""
    from validate.engines.derive import fit_affine

    if len({d for d, _ in pts}) < 2:
        raise ValueError("probe: the law needs at least two pool sizes")
    alpha, rate = fit_affine([d for d, _ in pts], [t for _, t in pts])
    return alpha, 1.0 / rate


def predict(probe: dict | None, host_speed: float = 1.0) -> dict:
    """The current model and (with a probe result) the probe's law at each case's descriptors (module docstring)."""
    from roofline.engines.timing import timing_on

    engine = timing_on("vllm", host_speed)
    sizes = ([d for d, _ in points(probe)] if probe else
             [c.descriptors for c in parse_cases(DEFAULT_CASES, 32)])
    out = {"host_speed": host_speed, "profile_law": bool(engine.kv_handshake_descriptor_s),
           "cases": [{"descriptors": d, "current_s": engine.handshake_s(d)} for d in sizes],
           "run17": {"descriptors": RUN17_DESCRIPTORS, "current_s": engine.handshake_s(RUN17_DESCRIPTORS)}}
    if probe is None:
        return out
    pts = points(probe)
    fixed, per = fit_law(pts)
    out["probe_law"] = {"fixed_s": fixed, "per_descriptor_s": per, "at_run17_s": fixed + per * RUN17_DESCRIPTORS}
    held = fit_law(pts[:-1]) if len(pts) >= 3 else None
    for row, (d, t) in zip(out["cases"], pts, strict=True):
        row.update(measured_s=t, law_s=fixed + per * d, law_error=(fixed + per * d) / t - 1,
                   current_error=row["current_s"] / t - 1)
    if held:
        d, t = pts[-1]
        out["held_out"] = {"descriptors": d, "measured_s": t, "law_of_the_others_s": held[0] + held[1] * d,
                           "error": (held[0] + held[1] * d) / t - 1}
    return out


def text(p: dict) -> str:
    lines = [f"host speed {p['host_speed']:g} (1: the profile's host); profile law: {p['profile_law']}",
             f"{'descriptors':>12} {'current s':>10} {'measured s':>11} {'probe law s':>12} {'law err':>8}"]
    for r in p["cases"]:
        lines.append(f"{r['descriptors']:>12,} {r['current_s']:>10.4f} {r.get('measured_s', float('nan')):>11.4f} "
                     f"{r.get('law_s', float('nan')):>12.4f} {r.get('law_error', float('nan')):>+8.1%}")
    lines.append(f"run 17's pool {RUN17_DESCRIPTORS:,}: current {p['run17']['current_s']:.4f} s"
                 + (f", probe law {p['probe_law']['at_run17_s']:.4f} s (fixed {p['probe_law']['fixed_s']:.4f} s + "
                    f"{p['probe_law']['per_descriptor_s'] * 1e9:.1f} ns a descriptor)" if "probe_law" in p else ""))
    if "held_out" in p:
        h = p["held_out"]
        lines.append(f"held out {h['descriptors']:,}: measured {h['measured_s']:.4f} s, law of the others "
                     f"{h['law_of_the_others_s']:.4f} s ({h['error']:+.1%})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", type=Path, help="handshake_probe.py's result")
    ap.add_argument("--host-speed", type=float, default=1.0, help="the probe host's speed (timing mechanism 11)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not a.host_speed > 0:
        ap.error("--host-speed: must be a positive number")
    probe = json.loads(a.probe.read_text()) if a.probe else None
    p = predict(probe, a.host_speed)
    print(json.dumps(p, indent=1) if a.json else text(p))


if __name__ == "__main__":
    main()
