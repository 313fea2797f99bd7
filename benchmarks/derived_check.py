"""Check of the aiconfigurator-derived ceilings where the project has its own truth (H100-SXM, H200).

    PYTHONPATH=. python benchmarks/derived_check.py [--out FILE.json]

1. Per ceiling: the derived section (hardware/derived/<name>.yaml, written by `python -m roofline.catalogue.derive`)
   against the measured one (hardware/<name>.yaml), % difference (derived / measured - 1).
2. The committed real decoders (validate/results/clients/nvidia-h100.json, nvidia-h200.json) predicted three ways
   by roofline.validation.clients.compare: with the measured section, with the derived section alone (the fields
   aiconfigurator cannot give fall to the planner's defaults), and with the measured section whose derivable
   fields are replaced by the derived ones ("substituted": the conversion's error alone). Median APE per
   (client, phase) and over every decode case.
Pure Python on committed files; no network, no database.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEVICES = {"H100-SXM": "nvidia-h100", "H200": "nvidia-h200"}


def ceiling_differences(measured, derived) -> dict[str, float]:
    """{field[.key]: derived / measured - 1} over the scalar and per-key ceilings both sections have."""
    m, d = measured.model_dump(), derived.model_dump()
    out = {}
    for name, value in d.items():
        other = m.get(name)
        if isinstance(value, float) and isinstance(other, float) and other:
            out[name] = value / other - 1
        elif isinstance(value, dict) and isinstance(other, dict):
            for key, v in value.items():
                if isinstance(v, float) and other.get(key):
                    out[f"{name}.{key}"] = v / other[key] - 1
    return out


def substituted(measured_hw, derived_hw):
    """The measured spec whose measured section takes every field the derived section sets (kind 'derived')."""
    d = derived_hw.measured.model_dump(exclude_unset=True)
    section = measured_hw.measured.model_copy(update={k: v for k, v in d.items() if k not in ("device", "date")})
    return measured_hw.model_copy(update={"measured": section})


def decoder_summary(results: dict, hardware) -> dict:
    """Median APE per (client, phase) and over every decode case of the committed real decoders."""
    from roofline.validation.clients import compare

    report = compare(results, hardware)
    out = {k: round(s["median_ape"], 2) for k, s in report["summary"].items() if k.count("/") == 1}
    out["decode (all clients)"] = round(statistics.median(
        r["ape"] for r in report["cases"] if r["phase"] == "decode"), 2)
    out["decode (compiled + eager)"] = round(statistics.median(
        r["ape"] for r in report["cases"] if r["phase"] == "decode" and r["client"] != "hf-static"), 2)
    return out


def check() -> dict:
    """Both parts of the module docstring for every device of DEVICES."""
    from roofline.catalogue import load_hardware

    out = {}
    for name, results_name in DEVICES.items():
        measured = load_hardware(str(ROOT / "hardware" / f"{name}.yaml"))
        derived = load_hardware(str(ROOT / "hardware" / "derived" / f"{name}.yaml"))
        results = json.loads((ROOT / "validate" / "results" / "clients" / f"{results_name}.json").read_text())
        out[name] = {"ceilings_pct": {k: round(100 * v, 1) for k, v in
                                      ceiling_differences(measured.measured, derived.measured).items()},
                     "decoders_median_ape_pct": {
                         "measured": decoder_summary(results, measured),
                         "derived": decoder_summary(results, derived),
                         "substituted": decoder_summary(results, substituted(measured, derived))}}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/derived_check.py")
    p.add_argument("--out", type=Path, help="also write the figures here (JSON)")
    args = p.parse_args(argv)
    figures = check()
    text = json.dumps(figures, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
