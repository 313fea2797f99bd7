"""`roofline calibrate`: the fits recover known laws from synthetic timings, a raw file becomes the measured section
the lab's definitions give, the CPU toy run writes a YAML that `plan` loads, and bad input is one line, status 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from roofline.calibrate.fit import FitError, latency_bandwidth
from roofline.calibrate.section import SectionError, measured_section
from tests.cli_run import run

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20


def _law(alpha: float, bw: float, size: float) -> float:
    return alpha + size / bw


def test_fit_recovers_exact_law():
    sizes = [MIB << i for i in range(13)]
    alpha, bw = latency_bandwidth(sizes, [_law(2.0e-6, 4.1e12, s) for s in sizes])
    assert alpha == pytest.approx(2.0e-6, rel=1e-9)
    assert bw == pytest.approx(4.1e12, rel=1e-9)


def test_fit_recovers_law_under_noise():
    # +-1 % alternating multiplicative noise: the relative least-squares fit stays within a few % of the truth
    sizes = [MIB << i for i in range(13)]
    times = [_law(8.0e-6, 4.5e12, s) * (1.01 if i % 2 else 0.99) for i, s in enumerate(sizes)]
    alpha, bw = latency_bandwidth(sizes, times)
    assert alpha == pytest.approx(8.0e-6, rel=0.05)
    assert bw == pytest.approx(4.5e12, rel=0.02)


def test_fit_matches_numpy_lstsq():
    # the lab solves the same relative least squares with numpy (validate/clients/calibrate.latency_bandwidth)
    np = pytest.importorskip("numpy")
    sizes = [3e6, 5e7, 2e8, 9e8]
    times = [1.1e-5, 2.2e-5, 5.8e-5, 2.3e-4]
    t = np.asarray(times)
    (a, inv), *_ = np.linalg.lstsq(np.stack([1 / t, np.asarray(sizes) / t], 1), np.ones_like(t), rcond=None)
    alpha, bw = latency_bandwidth(sizes, times)
    assert alpha == pytest.approx(a, rel=1e-9) and bw == pytest.approx(1 / inv, rel=1e-9)


@pytest.mark.parametrize("sizes,times,rule", [([1e6], [1e-5], "at least two"), ([1e6, 1e6], [1e-5, 1e-5], "span"),
                                              ([1e6, 2e6], [2e-5, 1e-5], "not physical")])
def test_fit_refuses(sizes, times, rule):
    with pytest.raises(FitError, match=rule):
        latency_bandwidth(sizes, times)


def _synthetic_raw() -> dict:
    """Rows timed by known laws: read alpha 2 us at 4.2 TB/s (copy at 4.0), skinny GEMMs 6 us + weights at 4.3 TB/s,
    decode attention 8 us + KV at 4.5 TB/s, grouped 13 us + active bytes at 2.7 TB/s, GEMMs at fixed rates."""
    rows = [{"kind": "cuda_context", "name": "cuda_context", "bytes": 552402944, "total_memory_bytes": 150109880320,
             "s": 0.0, "flops": 0}]
    for i in range(13):
        size = MIB << i
        rows.append({"kind": "read", "name": f"read_{i}", "bytes": size, "flops": 0, "s": _law(2e-6, 4.2e12, size)})
        rows.append({"kind": "copy", "name": f"copy_{i}", "bytes": 2 * size, "flops": 0,
                     "s": _law(2e-6, 4.0e12, 2 * size)})
    for dtype, rate in (("bf16", 7.0e14), ("fp8", 1.3e15)):
        rows.append({"kind": "gemm_peak", "name": f"gemm_{dtype}", "dtype": dtype, "bytes": 0, "flops": 2 * 8192 ** 3,
                     "s": 2 * 8192 ** 3 / rate})
    for n, k in ((6144, 4096), (28672, 4096), (4096, 14336)):
        for m in (1, 16, 64):
            rows.append({"kind": "gemm", "name": f"g{m}_{n}", "m": m, "n": n, "k": k, "bytes": 0,
                         "flops": 2 * m * n * k,
                         "s": _law(6e-6, 4.3e12, 2 * n * k)})
        for m, rate in ((2048, 7.1e14), (8192, 7.3e14), (16384, 7.5e14)):
            rows.append({"kind": "gemm", "name": f"g{m}_{n}", "m": m, "n": n, "k": k, "bytes": 0,
                         "flops": 2 * m * n * k,
                         "s": 2 * m * n * k / rate})
    for d, rate in ((64, 4.7e14), (128, 6.6e14)):
        for p in (2048, 16384):
            flops = 4 * 32 * d * p * (p + 1) // 2
            rows.append({"kind": "flash", "name": f"f{d}_{p}", "head_dim": d, "prompt": p, "bytes": 0, "flops": flops,
                         "s": flops / (rate if p == 16384 else rate / 2)})
    for kv in (2e7, 3e8, 1.1e9):
        rows.append({"kind": "decode_attention", "name": f"d{kv}", "bytes": int(kv), "flops": 0,
                     "s": _law(8e-6, 4.5e12, kv)})
    for active in (2, 3.5, 5.5, 8):
        for per in (234881024, 117440512):
            rows.append({"kind": "grouped_gemm", "name": f"gr{active}_{per}", "bytes": int(active * per), "flops": 0,
                         "s": _law(13e-6, 2.7e12, int(active * per))})
    rows.append({"kind": "launch", "name": "launch", "bytes": 0, "flops": 0, "s": 8.4e-7})
    rows.append({"kind": "kernel", "name": "chain", "tokens": 1, "bytes": 0, "flops": 0, "s": 9.3e-7})
    return {"format": "roofline-calibrate-raw/1", "env": {"device": "NVIDIA H200", "date": "2026-11-28T19:00:00",
            "driver": "580.159.04", "torch": "2.11.0", "device_kind": "cuda"}, "rows": rows}


def test_section_recovers_synthetic_laws():
    m = measured_section(_synthetic_raw(), "raw.json")
    assert m["kind"] == "calibrated"
    assert m["memory_latency_s"] == pytest.approx(2e-6, rel=1e-3)
    assert m["stream_bytes_per_s"] == pytest.approx(4.2e12, rel=1e-3)
    # read_bytes_per_s: median of the three largest sizes' S / t (1, 2 and 4 GiB): the 2 GiB one
    assert m["read_bytes_per_s"] == pytest.approx((2 << 30) / _law(2e-6, 4.2e12, 2 << 30), rel=1e-3)
    assert m["copy_bytes_per_s"] == pytest.approx((4 << 30) / _law(2e-6, 4.0e12, 4 << 30), rel=1e-3)
    assert m["gemm_flops_per_s"] == {"bf16": pytest.approx(7.0e14, rel=1e-3), "fp8": pytest.approx(1.3e15, rel=1e-3)}
    assert m["gemm_latency_s"] == pytest.approx(6e-6, rel=1e-3)
    assert m["gemm_stream_bytes_per_s"] == pytest.approx(4.3e12, rel=1e-3)
    assert m["gemm_shape_flops_per_s"]["bf16"] == pytest.approx(7.3e14, rel=1e-3)  # median of 7.1, 7.3, 7.5
    assert m["attention_flops_per_s"] == {64: pytest.approx(4.7e14, rel=1e-3), 128: pytest.approx(6.6e14, rel=1e-3)}
    assert m["decode_attention_latency_s"] == pytest.approx(8e-6, rel=1e-3)
    assert m["decode_attention_bytes_per_s"] == pytest.approx(4.5e12, rel=1e-3)
    assert m["grouped_gemm_latency_s"] == pytest.approx(13e-6, rel=1e-3)
    assert m["grouped_gemm_stream_bytes_per_s"] == pytest.approx(2.7e12, rel=1e-3)
    assert m["launch_latency_s"] == 8.4e-7 and m["kernel_overhead_s"] == 9.3e-7
    assert m["cuda_context_bytes"] == 552402944


def test_section_refuses_a_file_without_read_rows():
    raw = _synthetic_raw()
    raw["rows"] = [r for r in raw["rows"] if r["kind"] != "read"]
    with pytest.raises(SectionError, match="read"):
        measured_section(raw, "raw.json")


def test_from_json_writes_a_spec_plan_loads(tmp_path, capsys):
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(_synthetic_raw()))
    out = tmp_path / "mine.yaml"
    code, _, err = run(capsys, "calibrate", "--from-json", str(raw), "--out", str(out), "--name", "my-h200")
    assert code == 0, err
    assert "is catalogue H200" in err  # matched from the driver's device name
    from roofline.catalogue import load_hardware

    spec = load_hardware(str(out))
    assert spec.name == "my-h200" and spec.measured.kind == "calibrated"
    assert spec.driver_memory_bytes == 150109880320 and spec.memory_bytes_per_s == 4.8e12  # the H200 datasheet's
    code, out_text, err = run(capsys, "plan", "--hardware", str(out), "--method", "bf16", "--json")
    assert code == 0, err
    assert json.loads(out_text)["hardware"] == "my-h200"
    code, _, err = run(capsys, "capacity", "--hardware", str(out), "--model", "Llama-3.1-8B", "--engine", "vllm")
    assert code == 0, err
    code, table, _ = run(capsys, "calibrate", "--compare-to", "H200", str(out))
    assert code == 0
    line = next(x for x in table.splitlines() if x.startswith("memory_latency_s"))
    # 2.0 us against the catalogue H200's 2.037 us: -1.8 %
    assert "-1.8%" in line and line.endswith("ok")


def test_bad_inputs_are_one_line(tmp_path, capsys):
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps({"format": "something-else"}))
    code, _, err = run(capsys, "calibrate", "--from-json", str(raw), "--out", str(tmp_path / "x.yaml"))
    assert code == 2 and "format" in err and len(err.strip().splitlines()) == 1
    unknown = _synthetic_raw()
    unknown["env"]["device"] = "Tesla T4"
    raw.write_text(json.dumps(unknown))
    code, _, err = run(capsys, "calibrate", "--from-json", str(raw), "--out", str(tmp_path / "x.yaml"))
    assert code == 2 and "--base" in err and not (tmp_path / "x.yaml").exists()
    code, _, err = run(capsys, "calibrate", "--from-json", str(raw), "--out", str(tmp_path / "x.txt"))
    assert code == 2 and "--out" in err
    code, _, err = run(capsys, "calibrate", "--compare-to", "H200")
    assert code == 2 and "--compare-to" in err


def test_cpu_toy_run_end_to_end(tmp_path, capsys):
    """The command CI runs: a toy calibration on the CPU, its YAML planned with."""
    pytest.importorskip("torch")
    out = tmp_path / "x.yaml"
    code, summary, err = run(capsys, "calibrate", "--device", "cpu", "--quick", "--base", "H200", "--out", str(out))
    raw = json.loads(out.with_suffix(".raw.json").read_text())
    assert raw["env"]["device_kind"] == "cpu" and {r["kind"] for r in raw["rows"]} >= {"read", "copy", "gemm_peak"}
    assert all(math.isfinite(r["s"]) and r["s"] > 0 for r in raw["rows"])
    # a 2-core CPU's GEMM can sit under the spec's 1e11 FLOP/s floor (its load decides): then no hardware file is
    # written, in one line naming the field, rather than one `plan` refuses
    best = max(r["flops"] / r["s"] for r in raw["rows"] if r["kind"] == "gemm_peak")
    if best < 1e11:
        assert code == 2 and "gemm_flops_per_s has no figure" in err
        assert err.strip().splitlines()[-1].startswith("roofline: error: calibrate:") and not out.exists()
        return
    assert code == 0, err
    assert "read_bytes_per_s" in summary
    code, _, err = run(capsys, "plan", "--hardware", str(out), "--method", "bf16", "--json")
    assert code == 0, err


def test_measure_imports_no_pydantic():
    """`python -m roofline.calibrate.measure` runs where only torch is installed: its imports pull in no pydantic,
    sympy or triton (checked in a fresh interpreter)."""
    pytest.importorskip("torch")
    code = ("import sys; import roofline.calibrate.measure, roofline.calibrate.bench_compute, "
            "roofline.calibrate.bench_memory, roofline.calibrate.section, roofline.calibrate.allreduce, "
            "roofline.calibrate.kernels; "
            "print(sorted(m for m in ('pydantic', 'sympy', 'triton', 'yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]"


def test_upload_takes_a_raw_file_or_a_calibrated_yaml(tmp_path, capsys):
    from roofline.calibrate.hardware_file import from_upload
    from roofline.errors import SpecError

    raw_text = json.dumps(_synthetic_raw())
    spec = from_upload(raw_text, "raw.json", base="H100-SXM")
    assert spec.name == "H100-SXM-calibrated" and spec.memory_bytes_per_s == 3.35e12  # H100 SXM datasheet's 3.35 TB/s
    out = tmp_path / "mine.yaml"
    raw = tmp_path / "raw.json"
    raw.write_text(raw_text)
    assert run(capsys, "calibrate", "--from-json", str(raw), "--out", str(out))[0] == 0
    again = from_upload(out.read_text(), "mine.yaml")
    assert again.measured.kind == "calibrated" and again.measured.stream_bytes_per_s == pytest.approx(4.2e12, rel=1e-3)
    with pytest.raises(SpecError, match="notes.txt"):
        from_upload("just: words", "notes.txt")


def test_cli_refusals_name_the_flag(tmp_path, capsys):
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(_synthetic_raw()))
    cases = [(["--from-json", str(tmp_path / "none.json"), "--out", str(tmp_path / "x.yaml")], "cannot read"),
             (["--from-json", str(raw), "--base", "Nope", "--out", str(tmp_path / "x.yaml")], "unknown name 'Nope'"),
             (["--from-json", str(raw), "--out", str(tmp_path / "no" / "x.yaml")], "--out: folder"),
             (["--compare-to", "A100-80GB", str(tmp_path / "x.yaml")], "cannot read"),
             (["stray.yaml"], "only read with --compare-to")]
    for argv, rule in cases:
        code, _, err = run(capsys, "calibrate", *argv)
        assert code == 2 and rule in err and err.count("\n") == 1, (argv, err)
    assert not (tmp_path / "x.yaml").exists()


def test_a_base_other_than_the_device_is_noted(tmp_path, capsys):
    raw = tmp_path / "raw.json"
    raw.write_text(json.dumps(_synthetic_raw()))
    code, _, err = run(capsys, "calibrate", "--from-json", str(raw), "--base", "H100-SXM", "--out",
                       str(tmp_path / "x.yaml"))
    assert code == 0 and "is catalogue H200" in err and "--base H100-SXM" in err


def test_routing_ops_route_as_a_loop_does():
    """bench_routing's ops (moe_mlp's routing) on the CPU: expert offsets and the weighted scatter of the expert
    outputs back to their tokens, against a plain loop over tokens and their top-2 experts."""
    torch = pytest.importorskip("torch")
    from roofline.calibrate.bench_routing import TOP_K, _routing

    gen = torch.Generator().manual_seed(3)
    tokens, experts, d, inter = 5, 4, 8, 6
    x = torch.randn(tokens, d, generator=gen)
    logits = torch.randn(tokens, experts, generator=gen)
    gu = torch.randn(tokens * TOP_K, 2 * inter, generator=gen)
    ys = torch.randn(tokens * TOP_K, d, generator=gen)
    out, offs, xs, hidden = _routing(x, logits, gu, ys, experts)
    chosen = [sorted(range(experts), key=lambda e: -float(logits[t, e]))[:TOP_K] for t in range(tokens)]
    pairs = sorted((e, t, j) for t in range(tokens) for j, e in enumerate(chosen[t]))  # by expert, stable in token
    counts = [sum(1 for e, _, _ in pairs if e == k) for k in range(experts)]
    assert offs.tolist() == [sum(counts[: k + 1]) for k in range(experts)]
    assert torch.equal(xs, torch.stack([x[t] for _, t, _ in pairs]))
    want = torch.zeros_like(x)
    for row, (_, t, j) in enumerate(pairs):
        top = torch.tensor([float(logits[t, e]) for e in chosen[t]])
        want[t] += torch.softmax(top, 0)[j] * ys[row]
    assert torch.allclose(out, want, atol=1e-5)
    assert hidden.shape == (tokens * TOP_K, inter)
