"""The all-reduce of tensor parallelism as NCCL's tuner predicts it (roofline.costmodel.collectives), against
times worked by hand from NCCL's constants: NVIDIA/nccl v2.28.9-1 (commit dbc86fd06e8b), src/graph/tuning.cc
l. 143-172 (ring base latency LL / LL128 / Simple = 6.6 / 14.0 / 8.4 us; NVLink hop latency 0.6 / 1.9 / 3.4 us;
Hopper's one-node LL cap llMaxBw = 141 GB/s), l. 268 (nsteps = 2(n - 1)), l. 304-305 (bus bandwidth x 0.5 for LL,
x 0.92 for LL128), l. 348 (algorithm bandwidth = bus x n / nsteps), l. 599 (time = latency + bytes / bandwidth).
The bus bandwidth is H200's: 268,435,456 B in 890.7 us measured = 301.4 GB/s
(validate/results/clients/nvidia-h200-x2.json, bf16, NCCL 2.28.9)."""

from __future__ import annotations

import pytest

from roofline.catalogue import load_hardware
from roofline.costmodel import Roofline
from roofline.costmodel.collectives import ll_max_bw, nccl_hw, protocol_times, ring_latencies
from roofline.costmodel.ops import Op

BUS = 301.4e9  # bytes/s, hardware/H200.yaml scale_up (the 256 MB measurement)
US = 1e-6


def _times(size: int, gpus: int = 2) -> dict[str, float]:
    t = protocol_times(size, gpus, BUS, ring_latencies("nvlink", gpus), ll_max_bw("hopper", "nvlink"))
    return {p: float(v) for p, v in t.items()}


def test_latencies_by_hand() -> None:
    # 2 GPUs: 2 steps. LL 6.6 + 2 x 0.6, LL128 14.0 + 2 x 1.9, Simple 8.4 + 2 x 3.4 (us)
    assert ring_latencies("nvlink", 2) == pytest.approx({"LL": 7.8 * US, "LL128": 17.8 * US, "Simple": 15.2 * US})
    # 8 GPUs: 14 steps. LL 6.6 + 8.4, Simple 8.4 + 47.6
    assert ring_latencies("nvlink", 8)["LL"] == pytest.approx(15.0 * US)
    assert ring_latencies("nvlink", 8)["Simple"] == pytest.approx(56.0 * US)
    assert nccl_hw("nvlink4", scale_out=False) == "nvlink" and nccl_hw("pcie5", scale_out=False) == "pci"
    assert nccl_hw("infiniband-ndr", scale_out=True) == "net" and ll_max_bw("hopper", "net") is None


def test_16kb_and_256mb_on_two_gpus_by_hand() -> None:
    # 16 KB: LL at min(141, 301.4 / 2 = 150.7) = 141 GB/s: 7.8 us + 16384 / 141e9 s = 7.8 + 0.1162 = 7.916 us
    t = _times(16384)
    assert min(t, key=t.get) == "LL"
    assert t["LL"] == pytest.approx(7.9162 * US, rel=1e-4)
    # 256 MB: Simple at 301.4 GB/s: 15.2 us + 268435456 / 301.4e9 s = 15.2 + 890.63 = 905.83 us
    t = _times(268435456)
    assert min(t, key=t.get) == "Simple"
    assert t["Simple"] == pytest.approx(905.83 * US, rel=1e-4)


def test_protocol_at_1mb_and_4mb() -> None:
    # 1 MiB: LL 7.8 + 7.437 = 15.24 us; LL128 17.8 + 1048576 / 277.3e9 = 21.58; Simple 15.2 + 3.479 = 18.68
    t = _times(1 << 20)
    assert min(t, key=t.get) == "LL" and t["LL"] == pytest.approx(15.237 * US, rel=1e-3)
    assert t["Simple"] == pytest.approx(18.679 * US, rel=1e-3)
    # 4 MiB: LL 7.8 + 29.75 = 37.55; LL128 17.8 + 15.13 = 32.93; Simple 15.2 + 13.92 = 29.12 us
    t = _times(4 << 20)
    assert min(t, key=t.get) == "Simple" and t["Simple"] == pytest.approx(29.116 * US, rel=1e-3)
    assert t["LL128"] == pytest.approx(32.93 * US, rel=1e-3)


def test_the_cost_model_takes_the_same_time_numeric_and_symbolic() -> None:
    from roofline.lazy import sp
    from roofline.units import B

    h200 = load_hardware("H200")
    assert h200.scale_up.bytes_per_s == BUS
    op = Op(name="allreduce", group="layer", count=1, comm_bytes=8192 * B)  # [B, 4096] bf16 per GPU
    numeric = Roofline(h200, tp=2).op_times(op).comm
    symbolic = Roofline(h200, tp=2, symbolic=True)
    bound = symbolic.op_times(op).comm.subs({sp.Symbol(k, positive=True): v for k, v in symbolic.bindings().items()})
    # B = 1: 8 KB, LL: 7.8 us + 8192 / 141e9 s = 7.858 us;  B = 512: 4 MiB, Simple: 29.116 us (above)
    for batch, expected_us in ((1, 7.858), (512, 29.116)):
        assert float(numeric.subs(B, batch)) == pytest.approx(expected_us * US, rel=1e-3)
        assert float(bound.subs(B, batch)) == pytest.approx(expected_us * US, rel=1e-3)
