"""Real decoder clients: the committed H100 / H200 runs against the roofline's step model (no torch, no GPU).

The measurements are validate/results/clients/nvidia-*.json (validate/clients/, CUDA-graph replays of a
gpt-fast-style decoder); the predictions use only the catalogue spec and its measured ceilings.
"""

import json
from pathlib import Path

import pytest

from roofline.catalogue import load_hardware
from roofline.costmodel.fusion import FUSION, apply_fusion
from roofline.validation.clients import CI_DECODE_MEDIAN_APE, compare, predict_case
from validate.clients.calibrate import client_ceilings, latency_bandwidth

RESULTS = Path(__file__).resolve().parents[1] / "validate" / "results" / "clients"


def _report(device: str, hardware: str) -> dict:
    return compare(json.loads((RESULTS / f"{device}.json").read_text()), load_hardware(hardware))


def test_compiled_decode_gate_h100():
    s = _report("nvidia-h100", "H100-SXM")["summary"]["compiled/decode"]
    assert s["n"] >= 45 and s["median_ape"] <= CI_DECODE_MEDIAN_APE


@pytest.mark.xfail(strict=True, reason="H200 compiled decode median APE is 7.04 % (> 7): Mixtral's grouped-GEMM "
                   "experts run 31-37 % slower than the dense-GEMM law prices them, and the dense 3B-8B models sit "
                   "3-8 % under (see validate/clients/README.md)")
def test_compiled_decode_gate_h200():
    s = _report("nvidia-h200", "H200")["summary"]["compiled/decode"]
    assert s["median_ape"] <= CI_DECODE_MEDIAN_APE


def test_latency_bandwidth_fit_by_hand():
    # t = 5 us + S / 2 TB/s at 1 MB and 100 MB: 5.5 us and 55 us
    alpha, bw = latency_bandwidth([1e6, 100e6], [5.5e-6, 55e-6])
    assert alpha == pytest.approx(5e-6, rel=1e-6) and bw == pytest.approx(2e12, rel=1e-6)


def test_client_ceilings_come_from_microbenchmarks_only():
    results = json.loads((RESULTS / "nvidia-h100.json").read_text())
    micro_only = {"env": results["env"], "cases": [c for c in results["cases"] if c["family"] == "client_ceilings"]}
    assert client_ceilings(micro_only, "x") == client_ceilings(results, "x")
    # the add chain: 256 kernels in one graph, per-kernel time as recorded
    chain = next(c for c in micro_only["cases"] if c["name"] == "kernel_chain_1x4096")
    assert client_ceilings(micro_only, "x")["kernel_overhead_s"] == pytest.approx(chain["ms"] * 1e-3, rel=1e-3)


def test_eager_kernel_count_matches_the_census():
    # Llama-3.1-8B eager decode: torch.profiler counted 1306 kernels in one step on the H100 (results file);
    # the "none" fusion table predicts them within 10 % (GEMM split-K reduces and copies are not in the table)
    results = json.loads((RESULTS / "nvidia-h100.json").read_text())
    case = next(c for c in results["cases"] if c["name"] == "Llama-3.1-8B/eager/decode/b1-c1024")
    predicted = predict_case(case["params"], load_hardware("H100-SXM"))["kernels"]
    assert abs(predicted - case["kernels"]) / case["kernels"] < 0.10


def test_fusion_levels_order_kernels_and_keep_gemm_work():
    from roofline.catalogue import load_model
    from roofline.costmodel import build_graph
    from roofline.methods import parse_method

    model = load_model("Llama-3.1-8B")
    counts = {lvl: sum(op.count * op.kernels for op in build_graph(model, parse_method("bf16"), fusion=lvl).ops)
              for lvl in FUSION}
    assert counts["none"] > counts["typical"] >= counts["full"]
    none = build_graph(model, parse_method("bf16"), fusion="none")
    assert [op.matmul_flops for op in apply_fusion(list(none.ops), "full")] == [op.matmul_flops for op in none.ops]
