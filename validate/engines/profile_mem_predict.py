"""roofline's prediction of validate/engines/profile_mem.py's cases, written before the run.

vLLM 0.24's profile-run peak of 2-layer models by roofline/engines/vllm_profile.py.

python -m validate.engines.profile_mem_predict OUT.json [--hardware H200] [--set run16]
(committed: validate/results/engines/h200-profile-mem-predicted.json; run 16's set:
validate/results/engines/h200-profile-mem-run16-predicted.json);
python -m validate.engines.profile_mem_predict PREDICTED.json --compare MEASURED.json ...: each case's measured figure
(the worker's bytes, else the log's GiB) beside the prediction. Each case's model is roofline's import of the
same config.json the engine runs (profile_mem.config_of: the published config cut to 2 layers).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from roofline.catalogue import load_hardware, load_model
from roofline.cli.capacity import budget_parts
from roofline.engines.scheduling import vllm_capture_sizes
from roofline.engines.vllm_profile import profile_peak
from validate.engines import profile_mem

GIB = float(1 << 30)


def model_of(name: str, layers: int = profile_mem.LAYERS):
    """roofline's model of the cut config.json profile_mem.py writes for `name` (`layers` decoder layers)."""
    folder = Path(tempfile.mkdtemp())
    (folder / "config.json").write_text(json.dumps(profile_mem.config_of(name, layers)))
    return load_model(str(folder / "config.json"), name=f"{name}-{layers}L")


def predict_case(index: int, hardware, cases: tuple = profile_mem.CASES) -> dict:
    """One case: the runner, the three moments, the peak (the worker's torch peak increase), the second profile run's
    increase (the peak less the buffers the first run left: the MoE workspace, the V1 sampler's Triton buffer) and the
    CUDA-graph estimate's floor, in bytes and GiB."""
    name, tokens, seqs, layers, forced = profile_mem.case_of(cases, index)
    model = model_of(name, layers)
    p = profile_peak(model, tokens, seqs, sm_count=hardware.sm_count,
                     capture_sizes=len(vllm_capture_sizes(seqs, tokens)), kind=forced)
    parts = budget_parts(model, hardware, 1, 1, tokens, "bf16")
    weights = parts.weights
    return {"case": index, "model": name, "layers": layers, "forced_runner": forced,
            "max_num_batched_tokens": tokens, "max_num_seqs": seqs,
            "non_torch_increase_bytes": parts.non_torch - parts.context,
            "runner": p.runner, "weights_bytes": weights, "torch_peak_increase_bytes": p.peak_bytes,
            "torch_peak_increase_gib": round(p.peak_bytes / GIB, 3),
            "dense_forward_bytes": p.dense_forward_bytes, "moe_forward_bytes": p.moe_forward_bytes,
            "sampler_bytes": p.sampler_bytes, "moe_workspace_bytes": p.moe_workspace_bytes,
            "triton_sampler_buffer_bytes": p.triton_buffer_bytes,
            "second_profile_run_increase_bytes": p.transient_bytes,
            "cudagraph_estimate_floor_bytes": p.cudagraph_bytes,
            "cudagraph_estimate_note": "V1 runner: the 1 MiB-per-graph floor only; the first capture is measured by "
                                       "the engine, not derived (vllm_profile.py)" if p.runner == "v1" else
                                       "V2 runner: profile_cudagraph_memory returns 0"}


def _measured(case: dict) -> dict:
    """A measured case's figures in bytes: the worker's own, else the log's GiB lines."""
    w = case.get("worker") or {}

    def pick(key: str, log_key: str):
        if w.get(key) is not None:
            return float(w[key])
        return None if case.get(log_key) is None else case[log_key] * GIB

    return {"peak": pick("peak_activation_memory", "log_torch_peak_gib"),
            "weights": pick("model_memory_usage", "log_weights_gib"),
            "graphs": pick("cudagraph_memory_estimate", "log_cudagraph_estimate_gib"),
            "second": w.get("second_profile_run_increase"),
            "workspace": sum(w.get("moe_workspace_bytes") or []) or None,
            "triton": sum(w.get("triton_sampler_buffer_bytes") or []) or None}


def compare(measured_paths: list[str], predicted_path: str) -> str:
    """One line per case: measured / predicted GiB (error %) of the torch peak, the second run's increase, the MoE
    workspace, the Triton buffer, and the CUDA-graph estimate against its floor."""
    measured = {c["case"]: c for path in measured_paths for c in json.loads(Path(path).read_text())["cases"]}
    lines = ["case model              T      S   | torch peak          | second run          | workspace"
             "           | triton buffer       | CUDA graphs / floor | weights"]

    def cell(m, p) -> str:
        if m is None:
            return f"{'-':>7} / {p / GIB:6.3f}       "
        return f"{m / GIB:7.3f} / {p / GIB:6.3f} {(p / m - 1) * 100 if m else 0:+5.1f}%"

    for p in json.loads(Path(predicted_path).read_text())["cases"]:
        c = measured.get(p["case"])
        if c is None:
            continue
        m = _measured(c)
        lines.append(f"{p['case']:>4} {p['model']:<17} {p['max_num_batched_tokens']:>5} {p['max_num_seqs']:>5}  | "
                     f"{cell(m['peak'], p['torch_peak_increase_bytes'])} | "
                     f"{cell(m['second'], p['second_profile_run_increase_bytes'])} | "
                     f"{cell(m['workspace'], p['moe_workspace_bytes'])} | "
                     f"{cell(m['triton'], p['triton_sampler_buffer_bytes'])} | "
                     f"{cell(m['graphs'], p['cudagraph_estimate_floor_bytes'])} | "
                     f"{cell(m['weights'], p['weights_bytes'])}"
                     + (f"  error: {str(c['error'])[-80:]!r}" if c.get("error") else ""))
    return "\n".join(lines)


def main() -> None:
    """Write every case's prediction to OUT.json (or --compare a measured file with a predicted one)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="OUT.json; with --compare, the predicted file")
    ap.add_argument("--hardware", default="H200")
    ap.add_argument("--set", default="run5", choices=sorted(profile_mem.SETS), help="profile_mem.py's case set")
    ap.add_argument("--compare", metavar="MEASURED.json", nargs="+",
                    help="print measured (one or more files of profile_mem.py) against the predicted file OUT.json")
    args = ap.parse_args()
    if args.compare:
        print(compare(args.compare, args.out))
        return
    hardware = load_hardware(args.hardware)
    chosen = profile_mem.SETS[args.set]
    cases = [predict_case(i, hardware, chosen) for i in range(len(chosen))]
    Path(args.out).write_text(json.dumps({"about": __doc__.splitlines()[0], "hardware": args.hardware,
                                          "set": args.set, "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main()
