"""validate.ops.xquant.pair_bench: the row and line the two-variant device scripts print (no GPU: fake check and
timing; the expected line is deq_bench's output on the H100, validate/results/experiments/nvidia-h100-deq-bench.json,
fused_b8_l16384, with its own figures)."""

import json

from validate.ops.xquant.pair_bench import pair_line, pair_row, predictions


def test_row_and_line_as_the_scripts_printed_them() -> None:
    times = {"fp32_ms": 2.1034, "pairs_ms": 2.2188, "flops": 2.1034e-3 * 263e12}
    row = pair_row({"x": 1}, ("fused", 8, 16384), "fused_b8_l16384", ("fp32", "pairs"),
                   lambda p, v: {"fp32": 4.5e-3, "pairs": 5.0e-3}[v], lambda p: dict(times),
                   {"pairs_ms": 1.6746, "old_predicted_ms": 1.7054},
                   {"predicted_pairs_ms": "pairs_ms", "predicted_fp32_ms": "old_predicted_ms", "predicted_x": "none"})
    assert row["speedup"] == 2.1034 / 2.2188 and row["predicted_pairs_ms"] == 1.6746 and row["predicted_x"] is None
    assert round(row["fp32_tflops"]) == 263 and round(row["pairs_tflops"]) == 249
    assert pair_line(row, ("fp32", "pairs"), "predicted_pairs_ms", 13.2, 24, 3) == (
        "fused_b8_l16384          fp32    2.1034 ms  pairs    2.2188 ms  x0.948  (263 -> 249 TFLOP/s)  predicted pairs "
        "1.6746 ms  check 4.5e-03 / 5.0e-03  [13 s]")


def test_predictions_by_device(tmp_path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"devices": {"H200": {"rows": [{"case": "a", "pairs_ms": 1.0}]}}}))
    assert predictions(path, "NVIDIA H200") == {"a": {"case": "a", "pairs_ms": 1.0}}
    assert predictions(path, "NVIDIA H100 80GB HBM3") == {}
    assert predictions(tmp_path / "missing.json", "NVIDIA H200") == {}
