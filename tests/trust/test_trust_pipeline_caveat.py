"""Every real engine run committed here ran one pipeline stage: a plan or a simulation at pp > 1 says its pipeline is
not timed (roofline.trust.pipeline_caveat), and one at pp 1 says nothing of it."""

from roofline.catalogue.store import load_hardware, load_model
from roofline.methods.registry import parse_method
from roofline.planner.plan import plan
from roofline.specs import Workload
from roofline.trust import pipeline_caveat, plan_trust

H200 = load_hardware("H200")
MODEL = load_model("Llama-3.1-8B")


def _trust(pp):
    wl = Workload(context_tokens=8192, batch=8, pp=pp, micro_batches=pp, engine="vllm")
    result = plan(MODEL, H200, wl, [parse_method("bf16")])
    return plan_trust(result, H200, MODEL)


def test_a_pipelined_plan_says_its_pipeline_is_not_timed():
    trust = _trust(2)
    assert "pipeline parallelism (pp 2) not timed in any real engine" in trust["text"]
    assert trust["pipeline_validated"] is False


def test_one_stage_says_nothing_of_it():
    trust = _trust(1)
    assert "pipeline parallelism" not in trust["text"] and "pipeline_validated" not in trust


def test_the_caveat_leaves_pp_1_untouched():
    assert pipeline_caveat({"text": "t"}, 1) == {"text": "t"}
    assert pipeline_caveat({"text": "t"}, 4)["text"].startswith("t; pipeline parallelism (pp 4)")
