"""CI gate (issue 6): `compare` re-run on the committed GPU measurements. Model changes that break the
agreement between the roofline and kernels that reach the device's ceilings fail here.

The gate is the median APE <= 10% over the gated suite: the families whose kernels reach >= 85% of the
measured ceilings (validate.model.compare.kernel_efficiency, from physical bytes and FLOPs over measured time,
no prediction involved). Families below it are printed with their shortfall: there the error measures the
kernel, not the model. The XQuant crossover (where remat turns the step compute-bound) is a ratio of two
measured slopes, so it tests the model's compute/memory balance even where the kernel is slow: it must stay
within 20% of the prediction wherever a batch's crossover was measured.
"""

from pathlib import Path

import pytest

from roofline.validation.results_file import load as load_results
from validate.model import targets
from validate.model.compare import compare, hardware_for_device, render

RESULTS = sorted(p for p in (Path(__file__).resolve().parents[3] / "validate" / "results").glob("*.json")
                 if not p.stem.endswith("-quick"))


def test_measurements_are_committed() -> None:
    assert RESULTS, "issue 6 requires at least one committed GPU run in validate/results/"


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.stem)
def test_gated_median_ape_within_10_percent(path: Path) -> None:
    from validate.model.hardware import load_hardware

    results = load_results(path)
    env = results["env"]
    for key in ("device", "driver", "torch", "triton", "date"):
        assert env.get(key), f"{path.name}: env.{key} missing"
    report = compare(results, load_hardware(hardware_for_device(env["device"])))
    print("\n" + render(report))
    gated = report["summary"]["gated"]
    assert "fp16_attention" in gated["families"], "the bf16 reference kernel must reach the ceilings"
    assert gated["median_ape_pct"] <= 10.0, f"gated median APE {gated['median_ape_pct']:.1f}% > 10%"


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.stem)
def test_xquant_crossover_within_20_percent(path: Path) -> None:
    from validate.model.hardware import load_hardware

    results = load_results(path)
    hardware = load_hardware(hardware_for_device(results["env"]["device"]))
    verdicts = targets.targets(results, compare(results, hardware), hardware)
    print("\n" + targets.render(verdicts))
    t = verdicts["xquant_crossover"]
    assert t["verdict"] != "missed", {b: c["ratio"] for b, c in t["batches"].items()}


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.stem)
def test_suite_median_ape_within_12_percent(path: Path) -> None:
    """Issue 14's CI gate: the median APE over EVERY family (ceilings excluded), not only those at their ceilings,
    <= 12 % per committed device. Met since the lone-warp chain waits for its asynchronous copies (DEPBAR.LE SB0:
    validate.common.chain._CopyGroups) and a BAR.SYNC takes its measured 20.2 cycles: 8.4 % (H100), 7.5 % (H200),
    was 14.7 / 13.6 % (strict xfail until then)."""
    from validate.model.hardware import load_hardware

    results = load_results(path)
    report = compare(results, load_hardware(hardware_for_device(results["env"]["device"])))
    assert report["summary"]["median_ape_pct"] <= 12.0


def test_shipped_summaries_are_current() -> None:
    """The kernel summaries the planner ships (roofline/validation/kernel_summaries/) are what the lab's compare
    gives on the committed results now: a model or results change that is not re-summarized fails here
    (`python -m validate summarize` rewrites them)."""
    from validate.model import summary

    assert summary.write(RESULTS, check=True) == []
