"""Two H200s (validate/results/clients/nvidia-h200-x2.json: NCCL all-reduce sweep and a tp=2 Llama-3.1-8B decode
step, validate/clients/tp.py) against NCCL's tuner model (roofline.costmodel.collectives; hand-derived checks of
the model itself: tests/costmodel/test_nccl_allreduce.py) with hardware/H200.yaml's measured scale_up bus bandwidth."""

import json
from pathlib import Path

import pytest

from roofline.catalogue import load_hardware
from roofline.validation.tp import ALLREDUCE_TARGET_APE, TP_DECODE_TARGET_APE, compare, nccl_allreduce
from validate.clients.tpfit import bus_bandwidth

RESULTS = json.loads((Path(__file__).resolve().parents[3] / "validate/results/clients/nvidia-h200-x2.json")
                     .read_text())


def test_bus_bandwidth_is_the_largest_size_read_off() -> None:
    # n = 4: 2(n-1)/n = 1.5; 1 GB in 5 ms -> 1.5e9 / 5e-3 = 300 GB/s (the smaller sizes do not enter)
    rows = [{"params": {"bytes": s, "gpus": 4}, "ms": ms} for s, ms in ((1 << 20, 1.0), (10**9, 5.0), (1 << 14, 0.1))]
    assert bus_bandwidth(rows) == {"bytes": 10**9, "bytes_per_s": 300e9}


def test_h200_link_is_the_bus_bandwidth_of_the_committed_run() -> None:
    rows = [r for r in RESULTS["cases"] if r["family"] == "allreduce"]
    assert all(r["sum_ok"] for r in rows) and len(rows) == 15
    # 268,435,456 B / 890.7 us (2 GPUs: 2(n-1)/n = 1) = 301.4 GB/s
    assert load_hardware("H200").scale_up.bytes_per_s == bus_bandwidth(rows)["bytes_per_s"] == pytest.approx(
        301.4e9, rel=1e-3)


def test_validation_uses_the_cost_models_protocols() -> None:
    h200 = load_hardware("H200")
    assert nccl_allreduce(h200, 16384, 2)[1] == "LL" and nccl_allreduce(h200, 4 << 20, 2)[1] == "Simple"


def test_tp2_decode_gate() -> None:
    s = compare(RESULTS, load_hardware("H200"))["summary"]
    assert s["decode"]["n"] == 5 and s["decode"]["worst_ape"] <= TP_DECODE_TARGET_APE


def test_allreduce_median_within_target():
    s = compare(RESULTS, load_hardware("H200"))["summary"]["allreduce"]
    assert s["median_ape"] <= ALLREDUCE_TARGET_APE


@pytest.mark.xfail(strict=True, reason="NCCL's Simple line misses the protocol's pipeline start at 2-4 MB (23.1 vs "
                   "31.6 us at 2 MB, 27 %; 30.0 vs 36.6 us at 4 MB, 18 %): tuning.cc l. 367 'waiting for proper chunk "
                   "modeling'; the other 13 sizes are within 15 %")
def test_every_allreduce_size_within_target():
    s = compare(RESULTS, load_hardware("H200"))["summary"]["allreduce"]
    assert s["worst_ape"] <= ALLREDUCE_TARGET_APE
