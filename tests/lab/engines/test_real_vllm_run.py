"""roofline against a real vLLM 0.24.0 on an H200 (validate/results/engines/nvidia-h200-vllm-2026-11-28/, the
engine's own start-up logs and timings): the engine's memory rules on its logged budget, the budget the planner
promises, and the step times of the dense models. The expected values are the engine's logged and timed figures."""

import json
import statistics
from pathlib import Path

import pytest

from validate.engines.compare import compare, parse_log
from validate.engines.predict import predict

RESULTS = Path(__file__).resolve().parents[3] / "validate" / "results" / "engines"
RUN = RESULTS / "nvidia-h200-vllm-2026-11-28"
# dense models; the MoE runs ran on dummy weights, whose router does not spread tokens as a trained one does, and
# two of their cases paid Triton's first compile inside the timing (validate/notes: the 2026-11-28 engine run)
DENSE = ("Llama-3.1-8B", "Mistral-7B-v0.1", "Llama-2-7B")


@pytest.fixture(scope="module")
def rows():
    return compare(RUN, json.loads((RESULTS / "h200-vllm-predicted.json").read_text()), predict("H200"), "H200")


def test_the_engines_rules_on_its_logged_budget_give_its_logged_concurrency(rows):
    assert len(rows["capacity"]) == 7
    for r in rows["capacity"]:
        logged = r["log"]["max_concurrency"]
        assert r["rule_from_logged_budget"]["max_concurrency"] == pytest.approx(logged, rel=5e-4), r["model"]


def test_the_planner_gives_the_engines_concurrency_within_half_a_percent_on_dense_models(rows):
    # the MoE models are over (DeepSeek-V2-Lite +0.7 %, Qwen3-30B-A3B +4.4 %): the fused-MoE workspace of vLLM's
    # profile run (and Qwen3's logged 0.65 GiB CUDA-graph estimate) is not in the planner's activation estimate
    dense = [r for r in rows["capacity"] if r["model"] in DENSE]
    assert len(dense) == 4
    for r in dense:
        assert abs(r["now"]["max_concurrency"] / r["log"]["max_concurrency"] - 1) <= 0.005, r["model"]


def test_dense_decode_steps_within_the_issue_median(rows):
    errs = [abs(r["now_s"] / r["measured_s"] - 1) for r in rows["decode"] if r["model"] in DENSE]
    assert len(errs) == 20
    assert statistics.median(errs) <= 0.05


def test_the_logged_weights_match_the_planners_weights():
    # "Model loading took 15.0 GiB" (Llama-3.1-8B, bf16): 8,030,261,248 parameters x 2 B = 14.96 GiB
    log = parse_log((RUN / "Llama-3.1-8B-lat.log").read_text(errors="replace"))
    assert log["weights_gib"] == pytest.approx(8_030_261_248 * 2 / 2**30, abs=0.05)
