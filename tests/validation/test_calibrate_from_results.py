"""calibrate: measured ceilings into a hardware YAML, the rest of the file kept, validated, atomic."""

import copy
import json

import pytest

from roofline.validation.calibrate import measured_section
from validate.__main__ import main

MIB = 1 << 20


def _ceilings() -> dict:
    reads = [(s, 0.001 * s / MIB) for s in (MIB, 64 * MIB, 1024 * MIB, 2048 * MIB, 4096 * MIB)]
    cases = [{"family": "ceilings", "name": f"read_{s // MIB}MiB", "params": {"kind": "read", "bytes": s},
              "ms": ms, "bytes": s, "flops": s // 4} for s, ms in reads]
    cases[-1]["ms"] *= 0.5  # the largest read twice as fast: the median of the three largest ignores it
    cases += [
        {"family": "ceilings", "name": "copy_4096MiB", "params": {"kind": "copy", "bytes": 4096 * MIB},
         "ms": 2.0, "bytes": 8192 * MIB, "flops": 0},
        {"family": "ceilings", "name": "gemm_bf16_8192", "params": {"kind": "gemm", "dtype": "bf16", "size": 8192},
         "ms": 1.5, "bytes": 1, "flops": 2 * 8192**3},
        {"family": "ceilings", "name": "gemm_fp8_8192", "params": {"kind": "gemm", "dtype": "fp8", "size": 8192},
         "skipped": "no fp8"},
        {"family": "ceilings", "name": "launch_empty", "params": {"kind": "launch", "launches": 1000},
         "ms": 0.0025, "bytes": 0, "flops": 0},
    ]
    env = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-01-02T03:04:05+00:00", "driver": "570.1",
           "torch": "2.11.0", "triton": "3.6.0"}
    return {"env": env, "cases": cases}


def test_measured_section_by_hand() -> None:
    m = measured_section(_ceilings(), "validate/results/x.json")
    assert m["read_bytes_per_s"] == pytest.approx(MIB / 1e-6, rel=1e-3)  # 1 MiB per microsecond
    assert m["copy_bytes_per_s"] == pytest.approx(8192 * MIB / 2e-3, rel=1e-3)
    assert m["gemm_flops_per_s"] == {"bf16": pytest.approx(2 * 8192**3 / 1.5e-3, rel=1e-3)}
    assert m["launch_latency_s"] == pytest.approx(2.5e-6)
    assert [b for b, _ in m["bandwidth_curve"]] == [MIB, 64 * MIB, 1024 * MIB, 2048 * MIB, 4096 * MIB]
    assert str(m["date"]) == "2026-01-02"


def test_calibrate_writes_and_keeps_the_rest(tmp_path, root, capsys) -> None:
    from roofline.catalogue import load_hardware

    original = (root / "hardware" / "H100-SXM.yaml").read_text()
    original = original.split("\nmeasured:")[0]  # start uncalibrated whatever the catalogue holds
    target = tmp_path / "H100-SXM.yaml"
    target.write_text(original)
    results = tmp_path / "r.json"
    results.write_text(json.dumps(_ceilings()))
    for _ in range(2):  # idempotent: a second run replaces the block it wrote
        assert main(["calibrate", "--results", str(results), "--hardware-file", str(target)]) == 0
    text = target.read_text()
    assert text.startswith(original.rstrip("\n")) and text.count("measured:") == 1
    assert "# 1979 TF sparse / 2" in text  # comments kept
    hw = load_hardware(str(target))
    assert hw.measured.read_bytes_per_s == pytest.approx(MIB / 1e-6, rel=1e-3)
    assert hw.measured.source == str(results)
    assert hw.bf16_dense_flops_per_s == 989.4e12  # datasheet untouched
    assert "wrote measured ceilings" in capsys.readouterr().out


def test_calibrate_rejects_without_writing(tmp_path, root, capsys) -> None:
    target = tmp_path / "H100-SXM.yaml"
    before = (root / "hardware" / "H100-SXM.yaml").read_text()
    target.write_text(before)
    bad = copy.deepcopy(_ceilings())
    bad["cases"] = [c for c in bad["cases"] if c["params"]["kind"] != "launch"]
    results = tmp_path / "r.json"
    results.write_text(json.dumps(bad))
    assert main(["calibrate", "--results", str(results), "--hardware-file", str(target)]) == 2
    assert "launch" in capsys.readouterr().err
    bad = _ceilings()
    bad["cases"][0]["bytes"] = 0  # a bandwidth-curve point of 0 bytes: Measured rejects it
    results.write_text(json.dumps(bad))
    assert main(["calibrate", "--results", str(results), "--hardware-file", str(target)]) == 2
    assert "bandwidth_curve" in capsys.readouterr().err
    assert target.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["H100-SXM.yaml", "r.json"]  # no temporary left
