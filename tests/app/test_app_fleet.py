"""The Fleet page, driven headless by streamlit.testing's AppTest as the other pages are (tests/app/test_app_pages.py):
it renders without an exception element and shows the library's answer (roofline.dashboard.fleet, called again here
outside the app); the library side without Streamlit: the answer meets the SLO and one replica fewer does not, and the
cost per million output tokens is the price of the GPUs over the output tokens they serve, computed here by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofline import report as fmt
from roofline.catalogue import load_hardware, load_model
from roofline.dashboard import appdata
from roofline.dashboard.fleet import FLEET_TRUST, fleet_answer, fleet_table
from roofline.serving.simulate import Slo

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
ENTRY = Path(__file__).resolve().parents[2] / "app" / "main.py"
MODEL, H100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")
INPUTS = {"prompt": 1024, "output": 128, "requests": 150, "rate": 60.0, "ttft_ms": 500.0, "tpot_ms": 30.0, "price": 2.5}


def library_answer(spec: str, router: str = "least-outstanding") -> dict:
    return fleet_answer(MODEL, H100, appdata.workload_from({}), spec, INPUTS["prompt"], INPUTS["output"],
                        INPUTS["requests"], Slo(INPUTS["ttft_ms"] / 1e3, INPUTS["tpot_ms"] / 1e3), INPUTS["rate"],
                        router, INPUTS["price"])


def test_fleet_answer_meets_the_slo_and_one_fewer_does_not():
    answer = library_answer("bf16")
    n = answer["replicas"]
    assert answer["per_replica_rate_per_s"] < INPUTS["rate"]
    assert n is not None and n >= 2  # above one replica's largest rate at the SLO
    assert answer["at"]["meets_slo"] and not answer["fewer"]["meets_slo"]
    assert answer["at"]["ttft_p99_s"] <= 0.5 and answer["at"]["tpot_p99_s"] <= 0.03
    assert sum(answer["at"]["requests_per_replica"]) == INPUTS["requests"]
    # $2.5 per GPU-hour x n GPUs over 60 req/s x 128 output tokens each, per million tokens
    assert answer["usd_per_million_output_tokens"] == pytest.approx(2.5 * n / 3600 / (60.0 * 128) * 1e6, rel=1e-12)
    assert answer["gpus"] == n  # tp 1, pp 1
    assert answer["trust"].endswith(FLEET_TRUST) and "kernels" in answer["trust"]


def test_fleet_rows_replay_the_requests_at_the_target_rate():
    """The answer's rows are the fleets size_fleet judged, at the target rate: 300 requests of 128 output tokens
    at 20 req/s arrive over 15 s, so the answer serves at least 38,400 tokens in 15 s plus its drain (< 1 s at this
    load): >= 2,400 tok/s. The Poisson draw itself offers 0.86 x 20 req/s (n / last arrival at seed 0); replayed
    unscaled, one replica fewer met the SLO the sizing had found it missing, and the rows read 2,131 tok/s."""
    answer = fleet_answer(MODEL, load_hardware("H200"), appdata.workload_from({}), "bf16", 1024, 128, 300,
                          Slo(0.15, 0.012), 20.0, "least-outstanding", None)
    assert answer["replicas"] == 2
    assert answer["at"]["meets_slo"] and not answer["fewer"]["meets_slo"]
    assert 20.0 * 128 >= answer["at"]["output_tokens_per_s"] >= 38_400 / 16


def test_fleet_answer_rejects_an_unknown_router():
    with pytest.raises(ValueError, match="router: 'random' is not one of"):
        library_answer("bf16", "random")


def test_fleet_page_shows_the_librarys_answer():
    at = AppTest.from_file(str(ENTRY), default_timeout=300).run()
    at.switch_page("views/fleet.py").run()
    assert not at.exception, [e.value for e in at.exception]
    spec = at.selectbox(key="fleet_method").value
    at.number_input(key="fleet_rate").set_value(INPUTS["rate"])
    at.number_input(key="fleet_prompt").set_value(INPUTS["prompt"])
    at.number_input(key="fleet_output").set_value(INPUTS["output"])
    at.number_input(key="fleet_requests").set_value(INPUTS["requests"])
    at.number_input(key="fleet_ttft").set_value(INPUTS["ttft_ms"])
    at.number_input(key="fleet_tpot").set_value(INPUTS["tpot_ms"])
    at.number_input(key="fleet_price").set_value(INPUTS["price"])
    next(b for b in at.button if b.label == "Size the fleet").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error
    answer = library_answer(spec)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["replicas"] == fmt.count(answer["replicas"])
    assert metrics["GPUs"] == fmt.count(answer["gpus"])
    assert metrics["$ per million output tokens"] == f"${answer['usd_per_million_output_tokens']:,.3f}"
    shown = next(e.value for e in at.markdown if e.value.startswith("| fleet"))
    for row in fleet_table(answer):
        for cell in row.values():
            assert fmt.md_escape(cell) in shown or cell in shown
    assert any(FLEET_TRUST in c.value.replace("\\", "") for c in at.caption)


def test_fleet_trust_under_vllm_cites_the_engine_runs_as_plan_does():
    """The Fleet page sized a vLLM fleet but its trust line cited the plain decoders' bands ("real decoders (6
    models)"): it now carries the same ceilings line `roofline plan --engine vllm` prints on that GPU."""
    from roofline.trust import ceilings_trust

    h200, qwen = load_hardware("H200"), load_model("Qwen3-8B")
    answer = fleet_answer(qwen, h200, appdata.workload_from({"engine": "vllm"}), "bf16", 512, 32, 60,
                          Slo(2.0, 0.05), 4.0, "least-outstanding", None)
    plan_line = ceilings_trust(h200, engine="vllm", model=qwen)["text"]
    assert "under vllm: vLLM run" in plan_line
    assert answer["trust"].startswith(plan_line + "; ") and answer["trust"].endswith(FLEET_TRUST)
