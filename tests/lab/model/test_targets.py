"""validate.model.targets: the issue's four targets decided from hand-made results and reports."""

from __future__ import annotations

import pytest

from validate.model import targets

SHAPE = {"num_heads": 32, "num_kv_heads": 8, "head_dim": 128}


def _row(family: str, name: str, ms: float, nbytes: int, **params) -> dict:
    return {"family": family, "name": name, "params": {**SHAPE, **params}, "ms": ms, "bytes": nbytes, "flops": 0}


def _report(median: float, p90: float, efficiency: dict) -> dict:
    return {"summary": {"median_ape_pct": median, "p90_ape_pct": p90},
            "families": {n: {"kernel_efficiency": e} for n, e in efficiency.items()}}


def _results() -> dict:
    big = {"batch": 8, "context": 65536}
    return {"env": {}, "cases": [
        _row("fp16_attention", "b8_l65536", 1.0, 4000, dtype="bf16", **big),
        _row("fp16_attention", "b1_l65536", 0.2, 500, dtype="bf16", batch=1, context=65536),
        # 4x fewer bytes, 3.4x faster: 85% of the byte ratio
        _row("quant_attention", "kivi-4_b8_l65536", 1 / 3.4, 1000, method="kivi-4", **big),
        # 8x fewer bytes, 2x faster: 25%
        _row("quant_attention", "kivi-2_b8_l65536", 0.5, 500, method="kivi-2", **big),
        # batch 1 is not a large shape: left out even though its bf16 twin exists
        _row("quant_attention", "kivi-2_b1_l65536", 0.2, 100, method="kivi-2", batch=1, context=65536),
        # no bf16 case of this shape: left out
        _row("quant_attention", "kivi-2_b8_l131072", 0.9, 1000, method="kivi-2", batch=8, context=131072),
    ]}


def test_quant_speedups_pair_each_large_case_with_its_bf16_twin() -> None:
    rows = {r["name"]: r for r in targets.quant_speedups(_results())}
    assert set(rows) == {"kivi-4_b8_l65536", "kivi-2_b8_l65536"}
    assert rows["kivi-4_b8_l65536"]["speedup"] == pytest.approx(3.4)
    assert rows["kivi-4_b8_l65536"]["byte_ratio"] == pytest.approx(4.0)
    assert rows["kivi-4_b8_l65536"]["fraction"] == pytest.approx(0.85)
    assert rows["kivi-2_b8_l65536"]["fraction"] == pytest.approx(2 / 8)


def test_verdicts() -> None:
    t = targets.targets(_results(), _report(4.0, 14.0, {"ceilings": 0.5, "a": 0.9, "b": 0.84}), hardware=None)
    assert t["suite"]["verdict"] == "met"
    assert t["bandwidth"]["met_by"] == ["a"] and t["bandwidth"]["verdict"] == "missed"  # ceilings not judged
    assert t["quant_speedup"]["verdict"] == "missed"  # kivi-2 at 25%
    assert t["xquant_crossover"]["verdict"] == "not measured"
    assert targets.targets(_results(), _report(4.0, 15.1, {"a": 0.85}), None)["suite"]["verdict"] == "missed"
    assert targets.targets(_results(), _report(4.0, 15.0, {"a": 0.85}), None)["bandwidth"]["verdict"] == "met"
    text = targets.render(t)
    assert "kivi-4_b8_l65536" in text and "85%" in text and "not measured" in text


def test_nothing_measured_is_not_a_verdict() -> None:
    t = targets.targets({"env": {}, "cases": []}, _report(None, None, {}), None)
    assert {v["verdict"] for v in t.values()} == {"not measured"}
