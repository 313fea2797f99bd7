"""vLLM's custom all-reduce in the engine profile (roofline/engines/timing.py KERNEL_KEYS; costmodel.device).

By hand: vLLM 0.24 at tp 2 on NVLink dispatches its custom all-reduce first (run 12's log: "Using ['CUSTOM', 'PYNCCL']
all-reduce backends (in dispatch order)") for messages below max_size 8 MiB (custom_all_reduce.py). A decode step of
Llama-3.1-8B at B sequences all-reduces B x 4,096 x 2 bytes after attention and after the MLP: 8,192 bytes at B = 1,
so each costs latency + 8,192 / rate of the law ar_probe.py measured (derive.py --allreduce: ~4.3 us + bytes /
~270 GB/s; its own rows read 4.4-4.7 us up to 128 KiB, where NCCL's tuner model gives ~9 us). At tp 4 (not measured)
and for a 16,384-token prefill chunk's 128 MiB message the NCCL model stands.
"""

from __future__ import annotations

import json

import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.catalogue.loading import validate
from roofline.engines.timing import PROFILES
from roofline.methods import parse_method
from roofline.planner.phases import PhaseModel
from roofline.specs import Workload

H200, MODEL = load_hardware("H200"), load_model("Llama-3.1-8B")
LAW = json.loads((PROFILES / "vllm.json").read_text())["kernels"]["H200"]


def allreduce_s(engine: str, tp: int, batch: int, key: str = "time_s") -> float:
    wl = validate(Workload, {"batch": 1, "context_tokens": 4096, "engine": engine, "tp": tp}, "workload")
    pm = PhaseModel.build(MODEL, H200, wl, parse_method("bf16"))
    row = next(r for r in pm.rows("decode", batch, 1024) if r["name"] == "mlp_allreduce")
    return float(row[key])


def test_vllm_tp2_takes_the_measured_custom_law():
    expected = LAW["allreduce_custom_latency"] + 8192 / LAW["allreduce_custom_bw"]
    assert allreduce_s("vllm", 2, 1) == pytest.approx(expected, rel=1e-9)
    assert 4e-6 < expected < 5e-6
    b64 = LAW["allreduce_custom_latency"] + 64 * 8192 / LAW["allreduce_custom_bw"]
    assert allreduce_s("vllm", 2, 64) == pytest.approx(b64, rel=1e-9)


def test_elsewhere_the_nccl_model_stands():
    """The ideal engine and an unmeasured tp keep NCCL's tuner model (~9 us at 8 KiB on two GPUs): the same
    communication time as the ideal engine's at tp 4."""
    ideal = allreduce_s("ideal", 2, 1)
    assert ideal > 1.5 * allreduce_s("vllm", 2, 1)
    assert allreduce_s("vllm", 4, 1, "comm_s") == pytest.approx(allreduce_s("ideal", 4, 1, "comm_s"), rel=1e-12)
