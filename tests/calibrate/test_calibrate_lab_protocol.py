"""`roofline calibrate` measures each ceiling as the lab run it is compared with did: the sessions' order, the
figures' row selections (sustained cases at M >= 2048, aten chains timed after their census), the law comparison
and `--check`."""

from __future__ import annotations

import json

import pytest

from roofline.calibrate.section import measured_section
from tests.calibrate.test_calibrate_command import _synthetic_raw
from tests.cli_run import run


def _sustained_row(m: int, steady: float, series: list[list[float]], burst_mhz: float, held_mhz: float) -> dict:
    return {"kind": "sustained", "name": f"sustained_m{m}", "m": m, "n": 6144, "k": 4096, "s": 1.0, "bytes": 0,
            "flops": 1, "steady_flops_per_s": steady, "series": series, "burst_sm_mhz": burst_mhz,
            "steady_sm_mhz": held_mhz}


def test_sustained_figures_take_the_lab_cases_only():
    """M >= 2048 only (validate/clients/calibrate.py probe_ceilings); settling: the end of the first 50 ms bin from
    which every bin is within 2 % of steady. Worked by hand: row A settles at the bin starting 0.10 s (0.15 s),
    row B's last bin is 3 % off (never settled: its last bin's end, 0.20 s), row C is within 2 % from 0 (0.05 s)."""
    raw = _synthetic_raw()
    raw["rows"] += [
        _sustained_row(2048, 100.0, [[0.0, 130.0], [0.05, 110.0], [0.10, 101.0], [0.15, 99.0]], 1500, 1450),
        _sustained_row(8192, 200.0, [[0.0, 200.0], [0.05, 200.0], [0.10, 200.0], [0.15, 206.0]], 1520, 1460),
        _sustained_row(16384, 300.0, [[0.0, 303.0], [0.05, 297.0], [0.10, 300.0], [0.15, 300.0]], 1480, 1440),
        _sustained_row(512, 999.0, [[0.0, 1.0], [0.05, 999.0]], 1980, 1980),  # not a lab case: left out
    ]
    for prompt, rate in ((8192, 5.0e14), (16384, 5.5e14)):  # the longest prompt's steady rate is the figure
        raw["rows"].append({"kind": "sustained_flash", "name": f"flash_{prompt}", "prompt": prompt, "head_dim": 128,
                            "s": 1.0, "bytes": 0, "flops": 1, "steady_flops_per_s": rate, "series": []})
    m = measured_section(raw, "raw.json")
    assert m["sustained_attention_flops_per_s"] == {128: 5.5e14}
    assert m["sustained_gemm_flops_per_s"] == {"bf16": 200.0}  # median of 100, 200, 300
    assert m["sustained_after_s"] == pytest.approx(0.15)  # median of 0.15, 0.20, 0.05
    assert m["burst_sm_clock_hz"] == 1.5e9 and m["sustained_sm_clock_hz"] == 1.45e9


def test_aten_figure_is_the_census_pass_and_the_bare_pass_is_noted():
    """aten_kernel_s weights the "aten" chains by the calls one eager layer makes of each op (add 4 of 32 calls:
    validate/clients/calibrate.py EAGER_LAYER_CALLS): add at 3 us, the other 28 calls at 2 us -> 68 / 32 us."""
    from roofline.calibrate.section import EAGER_LAYER_CALLS

    raw = _synthetic_raw()
    for op in EAGER_LAYER_CALLS:
        raw["rows"].append({"kind": "aten", "name": f"aten_{op}", "op": op, "s": 3e-6 if op == "add" else 2e-6,
                            "bytes": 0, "flops": 0})
        raw["rows"].append({"kind": "aten_bare", "name": f"aten_bare_{op}", "op": op, "s": 1.5e-6, "bytes": 0,
                            "flops": 0})
    m = measured_section(raw, "raw.json")
    assert m["aten_kernel_s"] == pytest.approx(68 / 32 * 1e-6)
    assert any("1.5 us" in note and "2.125 us" in note for note in raw["notes"])


def test_law_rows_compare_the_time_each_law_predicts():
    """Calibrated grouped law 20 us + S / 2.8 TB/s against 13 us + S / 2.7 TB/s at the span's ends, by hand:
    S = 234881024: 103.886 / 99.993 us -> +3.89 %; S = 1879048192: 691.09 / 708.94 us -> -2.52 %."""
    from roofline.calibrate.compare import law_rows
    from roofline.catalogue import load_hardware

    reference = load_hardware("H200")
    mine = reference.model_copy(update={"measured": reference.measured.model_copy(update={
        "grouped_gemm_latency_s": 20e-6, "grouped_gemm_stream_bytes_per_s": 2.8e12})})
    ref = reference.model_copy(update={"measured": reference.measured.model_copy(update={
        "grouped_gemm_latency_s": 13e-6, "grouped_gemm_stream_bytes_per_s": 2.7e12})})
    rows = {law: (small, large) for law, small, large in law_rows(mine, ref)}
    assert rows["grouped_gemm"] == (pytest.approx(0.03893, abs=2e-5), pytest.approx(-0.02518, abs=2e-5))
    assert rows["memory"] == (0.0, 0.0)  # the same section otherwise


def test_check_prints_the_table_after_writing(tmp_path, capsys):
    raw = tmp_path / "raw.json"
    synthetic = _synthetic_raw()
    synthetic["rows"].append({"kind": "sustained_flash", "name": "f", "prompt": 16384, "head_dim": 128, "s": 1.0,
                              "bytes": 0, "flops": 1, "steady_flops_per_s": 5.53e14, "series": []})
    raw.write_text(json.dumps(synthetic))
    out = tmp_path / "mine.yaml"
    code, table, err = run(capsys, "calibrate", "--from-json", str(raw), "--out", str(out), "--check", "H200")
    assert code == 0, err
    assert out.exists() and "ceilings within 3% of H200's measured section" in table and "grouped_gemm" in table
    # the catalogue H200's sustained flash rate at head dim 128 is 553 TFLOP/s: the same figure reads +0.0 %
    assert any(line.startswith("sustained_attention_flops_per_s.128") and "+0.0%" in line
               for line in table.splitlines())


@pytest.mark.parametrize("argv,rule", [(["--check", "A40"], "--check: A40 has no measured section"),
                                       (["--check", "Nope"], "unknown name 'Nope'")])
def test_check_refuses_before_anything_is_written(tmp_path, capsys, argv, rule):
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(_synthetic_raw()))
    code, _, err = run(capsys, "calibrate", "--from-json", str(raw), "--out", str(tmp_path / "x.yaml"), *argv)
    assert code == 2 and rule in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.yaml").exists()


def test_check_is_not_for_compare_to(tmp_path, capsys):
    code, _, err = run(capsys, "calibrate", "--compare-to", "H200", "x.yaml", "--check", "H200")
    assert code == 2 and "--check" in err


def test_cpu_run_keeps_the_lab_sessions_order():
    """The toy run's rows come in the lab's order: the kernel chain first (micro.all_micro), the square bf16 GEMM
    right after the last copy and before the launch row (Ceilings.cases), the other dtypes after it, and every
    profiler-free aten chain before the census pass."""
    pytest.importorskip("torch")
    from roofline.calibrate.measure import run as measure_run

    rows = measure_run("cpu", "cpu", 30.0, False)["rows"]
    names = [r["name"] for r in rows]
    kinds = [r["kind"] for r in rows]
    assert kinds[0] == "kernel"
    last_copy = max(i for i, k in enumerate(kinds) if k == "copy")
    bf16 = names.index("gemm_bf16_256")
    launch = kinds.index("launch")
    assert last_copy + 1 == bf16 and bf16 < launch < names.index("gemm_fp32_256")
    assert max(i for i, k in enumerate(kinds) if k == "aten_bare") < min(i for i, k in enumerate(kinds) if k == "aten")
    assert kinds.index("gemm") < kinds.index("read")  # the clients session before the ceilings
