"""Hierarchical roofline (issue 14): shared memory, issue, L2 and Little's-law ceilings, the metadata loads of each
grouping axis, and what the model says about InnerQ-Base vs KIVI-2 against the committed H200/H100 measurements
and InnerQ's Table 4 (Jetson Xavier NX)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy as sp

from roofline.costmodel.device import Roofline, RooflineOptions, binding_ceiling
from roofline.costmodel.ops import Op, traffic
from roofline.kv.quant import TensorQuant, metadata_loads
from validate.model.families import quant_attention as qa
from validate.model.hardware import load_hardware
from validate.model.predict import _symbols, find_ops

RESULTS = Path(__file__).resolve().parents[3] / "validate" / "results"
E = sp.Symbol("E", positive=True)
SHAPES = [(8, 16384), (8, 65536), (8, 131072), (32, 16384), (32, 65536), (32, 131072)]

# Hand derivation per cached token and KV head (Llama-3.1-8B heads: d = 128, 4 query heads per KV head padded to
# M = 16 rows), long context (windows negligible), datasheet ceilings of H100-SXM and H200 (same GH100 SMs:
# 132 x 1.98 GHz), the fused kernel of kv.quant (4 warps split each dot's N, q fragments read once a step for the 4
# sub-tile dots of 8 tokens that share them: 2 tiles, the qall-r128 KIVI kernel):
#   KIVI-2: K and V 2-bit codes 2 x 32 B + fp16 scale+zero per 32 elements 2 x 16 B = 96 B from DRAM, staged once;
#           both tensors grouped across the dot's reduction: each of the 256 elements loads its own scale+zero
#           (1024 B) and each of the 4 warps copies the 32 B of stored metadata (128 B); q: 16 x 128 x 2 / 32 = 128 B;
#           p: 16 rows x 2 B written once, read by 4 warps: 160 B. Shared memory 96 + 1152 + 128 + 160 = 1536 B
#           -> 1536 / (128 B x 132 x 1.98e9) = 45.91 ps   (binding)
#           issue: 256 x 3/4 int ops / 16.73e12 + (512 dequant + 20 softmax) / 66.9e12 + 2048 / 989.4e12 = 21.5 ps
#   InnerQ-Base: 3-bit codes 2 x 48 B + fp16 scale per 32: 2 x 8 B = 112 B; groups along the reduction: metadata
#           read once per group after the dot (16 B); q 128 B, p 160 B: shared 416 B -> 12.4 ps
#           issue: 256 x 9/4 int ops / 16.73e12 + (32 + 20) / 66.9e12 + 2048 / 989.4e12 = 37.28 ps   (binding)
KIVI_PS = 1536 / (128 * 132 * 1.98e9) * 1e12
INNERQ_PS = (256 * 9 / 4 / 1.673e13 + 52 / 66.9e12 + 2048 / 989.4e12) * 1e12
HAND_SPEED = KIVI_PS / INNERQ_PS  # InnerQ-Base speed over KIVI-2's: 1.231


def _attention_row(method: str, hw, batch: int, context: int, measured: bool = False) -> dict:
    params = dict(method=method, batch=batch, context=context, num_heads=32, num_kv_heads=8, head_dim=128)
    model, config = qa.model_and_method(params)
    graph, ops = find_ops(model, config, "attention")
    roof = Roofline(hw, RooflineOptions(use_measured=measured))
    rows = roof.evaluate(graph, _symbols({"B": batch, "L": context}))
    return next(r for op, r in zip(graph.ops, rows, strict=True) if op is ops[0])


def _measured_ms(device: str) -> dict:
    cases = json.loads((RESULTS / f"nvidia-{device}.json").read_text())["cases"]
    return {(c["params"]["method"], c["params"]["batch"], c["params"]["context"]): c["ms"]
            for c in cases if c["family"] == "quant_attention"}


def test_metadata_loads_follow_the_grouping_axis() -> None:
    kivi_k = TensorQuant(bits=2, group_along="tokens", group_size=32)  # per-channel keys
    innerq_k = TensorQuant(bits=3, group_along="channels", group_size=32, mode="symmetric", zero_dtype="none")
    # across the reduction (channels for K): fp16 scale + zero per element, plus the 4 B per 32 elements copied by
    # each of the 4 warps that split the tokens (4 x 4 / 32 = 1/2); along it: one fp16 scale per 32
    assert metadata_loads(kivi_k, E, sp.Integer(4), "channels") == 4 * E + E / 2
    assert metadata_loads(kivi_k, E, sp.Integer(4), None) == 4 * E  # dequantized before a GEMM: no warp copies
    assert metadata_loads(innerq_k, E, sp.Integer(2), "channels") == E / 16
    assert metadata_loads(TensorQuant(bits=16), E, sp.Integer(0), "channels") == 0


def test_binding_ceiling_names() -> None:
    assert binding_ceiling(1.0, 2.0) == "memory"
    assert binding_ceiling(3.0, 2.0, issue=2.0) == "issue"
    assert binding_ceiling(3.0, 2.0, issue=1.0) == "compute"
    assert binding_ceiling(1.0, 2.0, shared=5.0, l2=3.0, latency=4.0) == "shared-memory"
    assert binding_ceiling(1.0, 1.0, latency=4.0) == "latency"


def test_littles_law_binds_when_few_programs_run() -> None:
    hw = load_hardware("H100-SXM").model_copy(update={"dram_latency_s": 1e-6, "measured": None})
    roof = Roofline(hw, RooflineOptions(use_measured=False))
    op = Op("x", "g", 1, traffic=traffic(kv_read=sp.Integer(10**8)), programs=sp.Integer(2))
    t = roof.op_times(op)
    # 1e8 B x 1 us / (2 SMs x 233,472 B) = 214 us; DRAM alone: 1e8 / 3.35e12 = 30 us
    assert float(t.latency) == pytest.approx(1e8 * 1e-6 / (2 * 233472))
    assert float(t.total) == pytest.approx(float(t.latency))
    wide = Op("x", "g", 1, traffic=traffic(kv_read=sp.Integer(10**8)))
    assert float(roof.op_times(wide).total) == pytest.approx(1e8 / 3.35e12)


@pytest.mark.parametrize("device", ["H200", "H100-SXM"])
def test_model_innerq_vs_kivi_from_the_layouts(device: str) -> None:
    hw = load_hardware(device)
    for batch, context in SHAPES:
        kivi = _attention_row("kivi-2", hw, batch, context)
        innerq = _attention_row("innerq-base", hw, batch, context)
        assert kivi["bound"] == "shared-memory" and innerq["bound"] == "issue"
        tokens = batch * 8 * context
        assert kivi["time_s"] / tokens * 1e12 == pytest.approx(KIVI_PS, rel=0.01)
        assert innerq["time_s"] / tokens * 1e12 == pytest.approx(INNERQ_PS, rel=0.01)
        assert kivi["time_s"] / innerq["time_s"] == pytest.approx(HAND_SPEED, rel=0.02)


@pytest.mark.parametrize("device", ["h200", "h100"])
def test_planner_direction_as_measured(device: str) -> None:
    # the planner (layouts, measured ceilings as `roofline plan` uses them) against the committed runs: InnerQ-Base
    # faster than KIVI-2 wherever measured (batch >= 8, context >= 16K), by a ratio within 10 % of the measured one
    # (1.15-1.30 measured with the qall-r128 KIVI kernel, 1.16-1.19 predicted: the planner's generic kernel does not
    # grow the KIVI / InnerQ ratio with context as the measured kernels' splits and tails do)
    hw = load_hardware({"h200": "H200", "h100": "H100-SXM"}[device])
    measured = _measured_ms(device)
    for batch, context in SHAPES:
        pred = (_attention_row("kivi-2", hw, batch, context, measured=True)["time_s"]
                / _attention_row("innerq-base", hw, batch, context, measured=True)["time_s"])
        meas = measured[("kivi-2", batch, context)] / measured[("innerq-base", batch, context)]
        assert pred > 1 and meas > 1
        assert pred == pytest.approx(meas, rel=0.10)


def test_measured_innerq_beats_kivi_and_h100_matches_h200() -> None:
    h200, h100 = _measured_ms("h200"), _measured_ms("h100")
    speedups = [h200[("kivi-2", b, L)] / h200[("innerq-base", b, L)] for b, L in SHAPES]
    # 1.18 .. 1.30 with the qall-r128 KIVI kernel (the earlier kernel, which re-read q per sub-tile: 1.32 .. 1.48)
    assert 1.15 <= min(speedups) and max(speedups) <= 1.35
    # both kernels run at the same speed on the two GH100 parts despite 4.8 vs 3.35 TB/s: on-chip bound, as the
    # model's shared-memory / issue ceilings (same SMs and clock) say
    for method in ("kivi-2", "innerq-base"):
        for b, L in SHAPES:
            assert h100[(method, b, L)] == pytest.approx(h200[(method, b, L)], rel=0.05)  # bf16: 1.35-1.43x
            pred = [_attention_row(method, load_hardware(d), b, L)["time_s"] for d in ("H100-SXM", "H200")]
            assert pred[0] == pytest.approx(pred[1], rel=0.02)


def test_model_direction_matches_the_measurement() -> None:
    # issue 14 item 4: with the measured kernel's loop structure (validate.model.kernel_structure: wavefronts
    # and integer instructions per program-step of its sm_90 compile) KIVI-2 is shared-memory bound on the
    # wavefronts its B-operand metadata copies and q re-reads need (2664 per 128 tokens and KV head against
    # InnerQ-Base's 752), so InnerQ-Base comes out faster, as measured; so do the layouts' generic on-chip terms
    # (test_model_innerq_vs_kivi_from_the_layouts: 1920 B of shared memory per token for KIVI, 1.54x).
    from roofline.validation.results_file import Case
    from validate.model.compare import calibrated

    results = json.loads((RESULTS / "nvidia-h200.json").read_text())
    hw = calibrated(load_hardware("H200"), results)
    for batch, context in SHAPES:
        rows = {}
        for method in ("kivi-2", "innerq-base"):
            params = dict(method=method, batch=batch, context=context, num_heads=32, num_kv_heads=8, head_dim=128)
            rows[method] = qa.predict(Case("quant_attention", method, params), hw)
        assert rows["kivi-2"]["time_s"] > rows["innerq-base"]["time_s"]


def test_xavier_nx_innerq_table4_against_the_model() -> None:
    # InnerQ Table 4 (seed 002, §5.3), Jetson Xavier NX, batch 1, one layer of Llama-3.1-8B, totals in us
    kivi = {512: 79, 2048: 278, 8192: 1074, 32768: 4331}
    innerq_base = {512: 64, 2048: 220, 8192: 822, 32768: 3276}
    paper = {L: kivi[L] / innerq_base[L] for L in kivi}
    assert min(paper.values()) > 1.2  # 1.23 .. 1.32: InnerQ faster
    hw = load_hardware("Jetson-Xavier-NX-8GB")
    row_k, row_i = (_attention_row(m, hw, 1, 32768) for m in ("kivi-2", "innerq-base"))
    # the model: KIVI-2 shared-memory bound on 844.8 GB/s (6 SMs x 128 B x 1.1 GHz) with its 1536 B per token and
    # KV head (hand derivation above), InnerQ-Base DRAM-bound on 59.7 GB/s with 112 B (its 416 B of shared memory
    # fit): 1.818 / 1.876 ns = 0.97x: KIVI-2 the faster, against the paper's 1.23 .. 1.32x for InnerQ (its kernels
    # are CUDA-core GEMVs, one per query head, reading FP16 K at 14.6 GB/s per KV head: not the tensor-core kernel
    # the model describes; with q re-read per sub-tile, 1920 B, the model gave 1.21x)
    assert row_k["bound"] == "shared-memory" and row_i["bound"] == "memory"
    hand = (1536 / 844.8e9) / (112 / 59.7e9)
    assert row_k["time_s"] / row_i["time_s"] == pytest.approx(hand, rel=0.03)
    assert row_k["time_s"] / row_i["time_s"] < 1 < min(paper.values())
