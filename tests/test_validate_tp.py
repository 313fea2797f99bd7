"""Two H200s (validate/results/clients/nvidia-h200-x2.json: NCCL all-reduce sweep and a tp=2 Llama-3.1-8B decode
step, validate/clients/tp.py) against the ring link model with hardware/H200.yaml's fitted scale_up link."""

import json
from pathlib import Path

import pytest

from roofline.catalogue import load_hardware
from roofline.specs import Link
from roofline.validation.tp import ALLREDUCE_TARGET_APE, TP_DECODE_TARGET_APE, compare, ring_allreduce_s
from validate.clients.tpfit import fit_link

RESULTS = json.loads((Path(__file__).resolve().parents[1] / "validate/results/clients/nvidia-h200-x2.json")
                     .read_text())


def test_ring_allreduce_by_hand():
    link = Link(kind="nvlink4", bytes_per_s=450e9, latency_s=1e-6, max_gpus=8)
    # n = 2: 2 (1)/2 x 1 MiB / 450 GB/s + 2 x 1 us = 2.330 + 2 us
    assert ring_allreduce_s(link, 1 << 20, 2) == pytest.approx((1 << 20) / 450e9 + 2e-6)
    # n = 8: 14/8 x 1 MiB / 450 GB/s + 14 us
    assert ring_allreduce_s(link, 1 << 20, 8) == pytest.approx(1.75 * (1 << 20) / 450e9 + 14e-6)


def test_fit_recovers_a_synthetic_link():
    # t = 2 x 5 us + S / 300 GB/s on two GPUs (2(n-1)/n = 1)
    rows = [{"params": {"bytes": s, "gpus": 2}, "ms": (10e-6 + s / 300e9) * 1e3} for s in (1 << 14, 1 << 20, 1 << 28)]
    assert fit_link(rows) == {"bytes_per_s": pytest.approx(300e9, rel=1e-3), "latency_s": pytest.approx(5e-6, rel=1e-3)}


def test_h200_link_is_the_fit_of_the_committed_run():
    rows = [r for r in RESULTS["cases"] if r["family"] == "allreduce"]
    assert all(r["sum_ok"] for r in rows) and len(rows) == 15
    link = load_hardware("H200").scale_up
    assert fit_link(rows) == {"bytes_per_s": link.bytes_per_s, "latency_s": link.latency_s}


def test_tp2_decode_and_allreduce_gates():
    s = compare(RESULTS, load_hardware("H200"))["summary"]
    assert s["decode"]["n"] == 5 and s["decode"]["worst_ape"] <= TP_DECODE_TARGET_APE
    assert s["allreduce"]["median_ape"] <= ALLREDUCE_TARGET_APE


@pytest.mark.xfail(strict=True, reason="one latency + bandwidth line misses NCCL's protocol steps: 1-4 MB (the "
                   "LL128 -> Simple switch, 17.5 -> 31.6 us from 1 to 2 MB) and 256 MB (301 GB/s bus bandwidth at the "
                   "largest size vs the 259 GB/s the relative fit settles on) are 15-40 % off")
def test_every_allreduce_size_within_target():
    s = compare(RESULTS, load_hardware("H200"))["summary"]["allreduce"]
    assert s["worst_ape"] <= ALLREDUCE_TARGET_APE
