"""Routed experts (issue 13): the grouped-GEMM law and the routing kernels, from the probe's h3 rows (no GPU).

The measurements are validate/results/clients/nvidia-h100-probe13.json / nvidia-h200-probe13.json, part h3
(decoder.moe_mlp of Mixtral-8x7B and its two torch._grouped_mm calls at decode batches 1 .. 64, CUDA graphs).
"""

import json
from pathlib import Path

import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.costmodel import build_graph, roofline_for
from roofline.costmodel.fusion import FUSION
from roofline.methods import parse_method
from validate import stored
from validate.clients import step_costs_core
from validate.clients.calibrate import probe_ceilings, routing_kernels

RESULTS = Path(__file__).resolve().parents[3] / "validate" / "results" / "clients"
EXPERT_BYTES = 3 * 4096 * 14336 * 2  # Mixtral-8x7B: w1, w3 and w2 of one expert, bf16 = 352,321,536 bytes


def _h3(device: str) -> list[dict]:
    probe = json.loads(stored.read_text(RESULTS / f"{device}-probe13.json"))
    return [c for c in probe["cases"] if c.get("part") == "h3"]


def test_dry_run_routed_mlp_calibrates_back():
    # the dry run's synthetic rows: grouped calls at 10 us + bytes / 2.5 TB/s, router at 5 us + bytes / 2.5 TB/s,
    # 23 routing kernels of 3 us; the fit and the routing time come back
    law = {"gemm_latency_s": 5e-6, "gemm_stream_bytes_per_s": 2.5e12}
    out = probe_ceilings(step_costs_core.dry_run(), "dry.json", law)
    assert out["grouped_gemm_latency_s"] == pytest.approx(10e-6, rel=1e-3)
    assert out["grouped_gemm_stream_bytes_per_s"] == pytest.approx(2.5e12, rel=1e-3)
    assert out["routing_kernel_s"] == pytest.approx(3e-6, rel=1e-3)
    assert "routing_kernel_s" not in probe_ceilings(step_costs_core.dry_run(), "dry.json")  # no GEMM law: no router


@pytest.mark.parametrize("device", ["nvidia-h100", "nvidia-h200"])
def test_routing_kernel_count_is_the_census_less_the_gemms(device):
    # one moe_mlp call: 29 kernels; named in its census: prepare_grouped_gemm_data x 2 and the CUTLASS grouped kernel
    # x 2 (two _grouped_mm calls), the router's nvjet + cublasLt splitKreduce: 29 - 4 - 2 = 23 at every batch
    for row in _h3(device):
        assert row["kernels"] == 29 and routing_kernels(row) == 23
    assert FUSION["none"]["routing"][0] == 23 and FUSION["none"]["experts"][0] == 2


def test_compiled_routing_count_follows_the_client_census():
    # compiled client, kernels per step: Mixtral 569 (16 layers, H100) and 1113 (32 layers, H200) -> 34 per layer;
    # Llama-3.1-8B 474 (32 layers) and Llama-3.2-3B 418 (28) -> 14 per dense layer, whose MLP is 4 kernels (nvjet
    # gate/up, triton silu-mul, split-K down + its reduce). Routed MLP = 34 - (14 - 4) = router 2 + grouped 2 x 2 +
    # routing
    cases = {}
    for device in ("nvidia-h100", "nvidia-h200"):
        for c in json.loads((RESULTS / f"{device}.json").read_text())["cases"]:
            if c.get("family") == "client" and c.get("kernels") and c["name"].endswith("compiled/decode/b1-c1024"):
                cases[(c["params"]["model"], c["params"].get("layers"))] = c["kernels"]
    moe_layer = (cases[("Mixtral-8x7B", 32)] - cases[("Mixtral-8x7B", 16)]) / 16
    dense_layer = (cases[("Llama-3.1-8B", 32)] - cases[("Llama-3.2-3B", 28)]) / 4
    assert moe_layer - (dense_layer - 4) - 2 - 4 == FUSION["full"]["routing"][0] == 18


def _experts_and_routing(hardware, fusion: str):
    from roofline.units import B, L

    graph = build_graph(load_model("Mixtral-8x7B"), parse_method("bf16"), "decode", fusion=fusion)
    ops = graph.by_name()
    rows = {r["name"]: r for r in roofline_for(hardware).evaluate(graph, {B: 1, L: 1024})}
    return ops["experts"][0], ops["routing"][0], rows["experts"], rows["routing"]


def test_experts_take_the_grouped_gemm_law_and_absent_fields_the_dense_one():
    hw = load_hardware("H100-SXM")
    m = hw.measured
    _, _, experts, _ = _experts_and_routing(hw, "full")
    # batch 1, top-2: 2 experts touched; two grouped calls: 2 alpha + their weights / the grouped stream rate
    # (activations: 2 routed tokens x 4096 x 2 bytes read and written, 32 KiB)
    moved = 2 * EXPERT_BYTES + 2 * 2 * 4096 * 2
    assert experts["time_s"] == pytest.approx(2 * m.grouped_gemm_latency_s + moved / m.grouped_gemm_stream_bytes_per_s,
                                              rel=1e-6)
    dense = hw.model_copy(update={"measured": m.model_copy(update={"grouped_gemm_latency_s": None,
                                                                  "grouped_gemm_stream_bytes_per_s": None})})
    _, _, experts, _ = _experts_and_routing(dense, "full")
    assert experts["time_s"] == pytest.approx(2 * m.gemm_latency_s + moved / m.gemm_stream_bytes_per_s, rel=1e-6)


@pytest.mark.parametrize("fusion, kernels", [("full", 18), ("none", 23), ("typical", 3)])
def test_routing_kernels_cost_the_measured_routing_time(fusion, kernels):
    hw = load_hardware("H200")
    op, routing_op, _, routing = _experts_and_routing(hw, fusion)
    assert routing_op.kernels == kernels and not routing_op.aten
    # a few hundred bytes of logits and ids: the kernels' fixed time is all of it
    assert routing["time_s"] == pytest.approx(kernels * hw.measured.routing_kernel_s, rel=1e-3)
    assert op.kernels == 2
