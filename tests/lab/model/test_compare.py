"""compare(): APE and bandwidth figures on a synthetic results file, computed by hand; the CLI's one-line
errors; compare of the committed results without torch or triton, as it printed before the move."""

import copy
import json
import subprocess
import sys

import pytest

from validate.__main__ import main
from validate.model.compare import compare, hardware_for_device
from validate.model.families import FAMILIES

HEADS = {"num_heads": 32, "num_kv_heads": 8, "head_dim": 128, "dtype": "bf16", "block_n": 128}
GIB = 1 << 30
RESULTS = {
    "env": {"device": "NVIDIA H100 80GB HBM3", "date": "2026-01-02T03:04:05+00:00", "driver": "570.1",
            "torch": "2.11.0", "triton": "3.6.0"},
    "cases": [
        {"family": "ceilings", "name": "read_1024MiB", "params": {"kind": "read", "bytes": GIB, "dtype": "fp32"},
         "ms": 0.4, "bytes": GIB, "flops": GIB // 4},
        {"family": "ceilings", "name": "gemm_fp8_8192", "params": {"kind": "gemm", "dtype": "fp8", "size": 8192},
         "skipped": "no fp8 here"},
        {"family": "fp16_attention", "name": "b1_l4096", "params": {"batch": 1, "context": 4096, **HEADS},
         "ms": 0.010, "bytes": None, "flops": None},
        {"family": "fp16_attention", "name": "b8_l16384", "params": {"batch": 8, "context": 16384, **HEADS},
         "ms": 0.2, "bytes": 539_131_904, "flops": 1},
        {"family": "fp16_attention", "name": "b8_l16384_slow", "params": {"batch": 8, "context": 16384, **HEADS},
         "ms": 0.1, "bytes": 539_131_904, "flops": 1},
    ],
}
BW = 3.35e12  # H100-SXM datasheet bytes/s
# decode attention bytes by hand: K and V (2 x B x L x 8 heads x 128 x 2 bytes) + q and o (2 x B x 32 x 128 x 2)
# + the split partials, written by the split kernel and read by the reduce: B x 32 heads x ceil(L / 2048)
# splits x (128 + 2) fp32 values, twice
B1_BYTES = 2 * 4096 * 8 * 128 * 2 + 2 * 32 * 128 * 2 + 2 * 32 * 2 * 130 * 4  # 16,860,160
B8_BYTES = 2 * 8 * 16384 * 8 * 128 * 2 + 2 * 8 * 32 * 128 * 2 + 2 * 8 * 32 * 8 * 130 * 4  # 539,131,904


@pytest.fixture(scope="module")
def hw():
    from validate.model.hardware import load_hardware

    # datasheet only: a calibrated catalogue must not change the hand-computed numbers
    return load_hardware("H100-SXM").model_copy(update={"measured": None})


def test_ape_by_hand(hw) -> None:
    report = compare(copy.deepcopy(RESULTS), hw)
    rows = {r["name"]: r for r in report["families"]["fp16_attention"]["rows"]}
    t1, t8 = B1_BYTES / BW * 1e3, B8_BYTES / BW * 1e3  # predicted ms: memory-bound
    apes = [abs(t1 - 0.010) / 0.010 * 100, abs(t8 - 0.2) / 0.2 * 100, abs(t8 - 0.1) / 0.1 * 100]
    assert rows["b1_l4096"]["predicted_ms"] == pytest.approx(t1)
    assert [rows[n]["ape_pct"] for n in ("b1_l4096", "b8_l16384", "b8_l16384_slow")] == pytest.approx(apes)
    t1, t8 = B1_BYTES / BW * 1e3, B8_BYTES / BW * 1e3
    assert apes == pytest.approx([abs(t1 - 0.010) / 0.010 * 100, abs(t8 - 0.2) / 0.2 * 100,
                                  abs(t8 - 0.1) / 0.1 * 100])
    low, mid, high = sorted(apes)
    s = report["summary"]
    assert s["cases"] == 3 and s["median_ape_pct"] == pytest.approx(mid)
    assert s["p90_ape_pct"] == pytest.approx(mid + 0.8 * (high - mid))  # linear: rank 0.9 x (3 - 1) = 1.8
    assert s["per_family"] == {"fp16_attention": pytest.approx(mid)}  # ceilings stay out of the suite


def test_bandwidth_against_measured_read(hw) -> None:
    report = compare(copy.deepcopy(RESULTS), hw)
    read = GIB / 0.4e-3
    assert report["reference_bytes_per_s"] == pytest.approx(read)
    assert report["reference_source"] == "measured streaming read"
    b1 = report["families"]["fp16_attention"]["rows"][0]
    assert b1["bytes"] == B1_BYTES  # filled from the prediction: the same roofline op
    assert b1["achieved_bytes_per_s"] == pytest.approx(B1_BYTES / 1e-5)
    assert b1["bandwidth_fraction"] == pytest.approx(B1_BYTES / 1e-5 / read)
    ceil = {r["name"]: r for r in report["families"]["ceilings"]["rows"]}
    assert ceil["read_1024MiB"]["ape_pct"] == pytest.approx(abs(GIB / BW * 1e3 - 0.4) / 0.4 * 100)
    assert ceil["gemm_fp8_8192"]["ape_pct"] is None and "no fp8 here" in ceil["gemm_fp8_8192"]["note"]


def test_datasheet_reference_without_ceilings(hw) -> None:
    results = copy.deepcopy(RESULTS)
    results["cases"] = [c for c in results["cases"] if c["family"] != "ceilings"]
    report = compare(results, hw)
    assert report["reference_source"] == "datasheet" and report["reference_bytes_per_s"] == BW
    row = report["families"]["fp16_attention"]["rows"][1]
    assert row["bandwidth_fraction"] == pytest.approx(B8_BYTES / 0.2e-3 / BW)


def test_unregistered_family_is_a_note(hw) -> None:
    results = copy.deepcopy(RESULTS)
    results["cases"].append({"family": "nope", "name": "x", "params": {}, "ms": 1.0})
    row = compare(results, hw)["families"]["nope"]["rows"][0]
    assert row["ape_pct"] is None and "not registered" in row["note"]


def test_device_names() -> None:
    assert hardware_for_device("NVIDIA H100 80GB HBM3") == "H100-SXM"
    assert hardware_for_device("NVIDIA H100 PCIe") == "H100-PCIe"
    assert hardware_for_device("NVIDIA H200") == "H200"
    with pytest.raises(ValueError, match="--hardware"):
        hardware_for_device("NVIDIA A10")


@pytest.mark.parametrize("text", ['{"env": {}, "cases": [{"family": "x"}]}', '{"env":', "[]",
                                  '{"env": {}, "cases": [{"family": "a", "name": "b", "params": {}, "ms": -1}]}'])
def test_cli_malformed_results_one_line(tmp_path, capsys, text: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert main(["compare", "--results", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and err.startswith("validate: ")


def test_cli_subprocess_exit_status(tmp_path, root) -> None:
    path = tmp_path / "bad.json"
    path.write_text("not json")
    done = subprocess.run([sys.executable, "-m", "validate", "compare", "--results", str(path)], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "not valid JSON" in done.stderr


def test_cli_json_and_bad_hardware(tmp_path, capsys) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(RESULTS))
    assert main(["compare", "--results", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["hardware"] == "H100-SXM" and report["summary"]["cases"] == 3
    assert main(["compare", "--results", str(path), "--hardware", "H999"]) == 2
    assert "H999" in capsys.readouterr().err


def test_the_explicit_list_of_predicted_families() -> None:
    assert list(FAMILIES) == ["ceilings", "fp16_attention", "quant_attention", "xquant", "aquakv", "zack"]
    for name, module in FAMILIES.items():
        assert module.NAME == name and callable(module.predict) and callable(module.work)


def test_each_results_file_predicts_with_its_own_ceilings(hw) -> None:
    from validate.model.compare import calibrated

    results = copy.deepcopy(RESULTS)
    results["cases"][:2] = [
        {"family": "ceilings", "name": f"{kind}_{n}GiB", "params": {"kind": kind, "bytes": n * GIB, "dtype": "fp32"},
         "ms": ms, "bytes": n * GIB * (2 if kind == "copy" else 1), "flops": 0}
        for kind, n, ms in (("read", 1, 0.40), ("read", 2, 0.75), ("copy", 1, 0.8))]
    results["cases"] += [
        {"family": "ceilings", "name": "gemm_bf16_8192", "params": {"kind": "gemm", "dtype": "bf16", "size": 8192},
         "ms": 1.6, "bytes": 3 * 8192 ** 2 * 2, "flops": 2 * 8192 ** 3},
        {"family": "ceilings", "name": "launch_empty", "params": {"kind": "launch"}, "ms": 0.001, "bytes": 0,
         "flops": 0}]
    m = calibrated(hw, results).measured
    # two read sizes fit t = alpha + bytes / bw exactly: 0.35 ms per GiB, alpha = 0.40 - 0.35 = 0.05 ms
    assert m.stream_bytes_per_s == pytest.approx(GIB / 0.35e-3, rel=1e-3)
    assert m.memory_latency_s == pytest.approx(0.05e-3, rel=1e-3)
    assert m.gemm_flops_per_s == {"bf16": pytest.approx(2 * 8192 ** 3 / 1.6e-3, rel=1e-3)}
    assert m.launch_latency_s == pytest.approx(1e-6) and m.source == "this results file"
    assert compare(results, hw)["measured_source"] == "this results file"
    assert calibrated(hw, RESULTS) is hw  # no copy, gemm or launch ceilings: the spec as given
    assert compare(copy.deepcopy(RESULTS), hw)["measured_source"] is None


NO_TORCH = """
import runpy, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("torch", "triton"):
            raise ImportError(f"{name} is blocked in this test")
sys.meta_path.insert(0, Block())
sys.argv = ["validate", *sys.argv[1:]]
try:
    runpy.run_module("validate", run_name="__main__", alter_sys=True)
finally:
    print("imported:", sorted(m for m in sys.modules if m.partition(".")[0] in ("torch", "triton")), file=sys.stderr)
"""


@pytest.mark.parametrize("device", ["nvidia-h200", "nvidia-h100"])
def test_compare_without_torch_or_triton_prints_the_committed_report(root, device: str) -> None:
    """`python -m validate compare` on a box where torch and triton cannot be imported prints, byte for byte,
    the report committed beside the measurements (validate/results/<device>-compare.txt)."""
    results = root / "validate" / "results" / f"{device}.json"
    done = subprocess.run([sys.executable, "-c", NO_TORCH, "compare", "--results", str(results.relative_to(root))],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().endswith("imported: []")
    assert done.stdout == (root / "validate" / "results" / f"{device}-compare.txt").read_text()
