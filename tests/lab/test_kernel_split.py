"""validate.kernel_split: the per-kernel split of a profiled graph replay, by hand; the script's
refusals without a GPU; the committed prediction covers every case on both devices."""

import json
from pathlib import Path

import pytest

from validate import kernel_split

ROOT = Path(__file__).resolve().parents[2]


def test_split_by_hand():
    # 2 calls of (a, b): a 0-2, b 3-4, a 6-9, b 10-11 us -> durations a 2, 3 (median 2.5), b 1, 1; gaps before a:
    # only the second call's (6 - 4 = 2), before b: 1, 1; period 6 - 0 = 6
    events = [("a", 0.0, 2.0), ("b", 3.0, 4.0), ("a", 6.0, 9.0), ("b", 10.0, 11.0)]
    got = kernel_split.split(events, 2)
    assert got["kernels"] == [{"name": "a", "duration_us": 2.5, "gap_us": 2.0},
                              {"name": "b", "duration_us": 1.0, "gap_us": 1.0}]
    assert got["period_us"] == 6.0 and got["events"] == 4
    # events that do not divide into the calls (a stray kernel): no split, the count kept
    assert kernel_split.split(events[:3], 2) == {"kernels": [], "period_us": None, "events": 3}


def test_script_refuses_bad_arguments_and_a_missing_gpu(capsys):
    assert kernel_split.cli([]) == 2
    assert capsys.readouterr().err.strip() == "usage: python -m validate.kernel_split OUT.json [--quick]"
    import torch

    if torch.cuda.is_available():
        return
    assert kernel_split.cli(["out.json"]) == 2
    assert capsys.readouterr().err.strip() == "kernel_split: needs a CUDA GPU"


def test_committed_prediction_covers_every_case():
    doc = json.loads((ROOT / "validate/results/experiments/kernel-split-predicted.json").read_text())
    for device in ("H100", "H200"):
        rows = doc["devices"][device]
        assert [(r["family"], r["name"]) for r in rows] == [tuple(c) for c in kernel_split.CASES]
        # the lone bounds sum below the case's prediction (launch gaps and the roofline come on top)
        for r in rows:
            assert sum(k["lone_us"] for k in r["kernels"]) <= r["predicted_ms"] * 1e3 + 1e-9
    assert doc["devices"]["H100"][0]["launch_gap_us"] == pytest.approx(1.118)
