"""A simulator under the workload's engine (serving.engined), as the dashboard's Serving and Fleet pages build it.

Expected values from the engines' sources, not from roofline: vLLM 0.24's `vllm serve` defaults on a GPU of >= 70
GiB that is not an A100 are max_num_batched_tokens 8192 and max_num_seqs 1024 (vllm/engine/arg_utils.py
_set_default_args; docs/engines.md); SGLang's max_running_requests = min(pool tokens // 2, min(max(pool / context x
512, 2048), 4096)) (python/sglang/srt/server_args.py _handle_gpu_memory_settings), here with the pool's tokens read
from the simulator's own pool (an input to the rule, not its output).
"""

from __future__ import annotations

import numpy as np

from roofline.catalogue import load_hardware, load_model
from roofline.dashboard.appdata import workload_from
from roofline.dashboard.serving_curves import latency_vs_rate
from roofline.methods import parse_method
from roofline.serving.engined import workload_simulator
from roofline.serving.simulate import Slo

MODEL, H200 = load_model("Llama-3.1-8B"), load_hardware("H200")


def test_the_workloads_engine_schedules_the_simulation():
    ideal = workload_simulator(MODEL, H200, workload_from({}), parse_method("bf16"), 2048)
    assert ideal.engine.engine == "ideal"
    vllm_workload = workload_from({"engine": "vllm"})
    assert vllm_workload.page_tokens == 16  # vLLM's block of 16 tokens, as `roofline plan --engine vllm` sets it
    vllm = workload_simulator(MODEL, H200, vllm_workload, parse_method("bf16"), 2048)
    assert (vllm.engine.engine, vllm.engine.max_num_batched_tokens, vllm.engine.max_num_seqs) == ("vllm", 8192, 1024)
    sglang = workload_simulator(MODEL, H200, workload_from({"engine": "sglang"}), parse_method("bf16"), 2048)
    pool = sglang.pool.capacity_pages * sglang.pool.page_tokens
    assert sglang.engine.max_num_seqs == max(1, min(pool // 2, min(max(int(pool / 2048 * 512), 2048), 4096)))


def test_the_serving_page_under_vllm_pays_the_engines_costs():
    """At 0.5 requests/s the requests meet an idle engine: under vLLM each first token also waits for the API
    server's per-request work and the engine's host work, so the p99 TTFT is above the ideal scheduler's; the
    Serving page's curves under vLLM are finite."""
    from roofline.serving.requests import LengthDist, poisson_requests

    requests = poisson_requests(0.5, 40, LengthDist.parse("1024", "prompt"), LengthDist.parse("64", "output"), 0)
    ttft = [float(np.percentile(workload_simulator(MODEL, H200, workload_from(fields), parse_method("bf16"),
                                                   1088).run(requests).ttft_s, 99))
            for fields in ({}, {"engine": "vllm"})]
    assert ttft[1] > ttft[0]
    rows = latency_vs_rate(MODEL, H200, workload_from({"engine": "vllm"}), ["bf16"], 1024, 64, 60,
                           Slo(ttft_s=2.0, tpot_s=0.05))["rows"]
    assert np.isfinite([r["tpot_p99_s"] for r in rows]).all() and np.isfinite([r["ttft_p99_s"] for r in rows]).all()


def test_the_serving_page_reports_the_api_loop_where_the_engine_has_its_costs():
    """Each rate's API-loop load is its streamed tokens a second x the profile's cost a token (timing 25.): rising
    with the rate under vLLM, None under the ideal scheduler; the page's floor is the lowest rate past 90 %."""
    from roofline.dashboard.serving_curves import api_loop_floor
    from roofline.engines.timing import timing

    slo = Slo(ttft_s=2.0, tpot_s=0.05)
    rows = latency_vs_rate(MODEL, H200, workload_from({"engine": "vllm"}), ["bf16"], 1024, 64, 60, slo)["rows"]
    loads = [r["api_loop_load"] for r in rows]
    per_token = timing("vllm").api_output_s + timing("vllm").api_chunk_s
    # 64 output tokens a request: at rate r the loop streams at most about 64 r tokens a second
    assert all(0 < x <= 64 * r["rate_per_s"] * per_token * 1.05 for x, r in zip(loads, rows, strict=True))
    assert loads[-1] > loads[0]
    ideal = latency_vs_rate(MODEL, H200, workload_from({}), ["bf16"], 1024, 64, 60, slo)["rows"]
    assert all(r["api_loop_load"] is None for r in ideal)
    made = [{"method": "a", "rate_per_s": 5.0, "api_loop_load": 0.5},
            {"method": "a", "rate_per_s": 9.0, "api_loop_load": 0.95},
            {"method": "a", "rate_per_s": 12.0, "api_loop_load": 1.3},
            {"method": "b", "rate_per_s": 12.0, "api_loop_load": None}]
    assert api_loop_floor(made) == {"a": 9.0}
