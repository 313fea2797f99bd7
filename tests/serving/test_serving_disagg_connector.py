"""A disaggregated pair's KV connector under vLLM (roofline/engines/timing.py mechanism 10; serving.disagg).

By hand: vLLM's NixlConnector reads one descriptor per (KV region, block): two regions a cached layer (K and V),
one for MLA's latent (vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py@v0.24.0 register_kv_caches,
FlashAttention's split K/V caches). Llama-3.1-8B: 32 layers x 2 regions x ceil(1,024 / 16) = 64 blocks = 4,096
descriptors for a 1,024-token prompt (run 12's decode server logged a mean of 4,080.5 per transfer over 780
requests: validate/results/engines/nvidia-h200x2-vllm-2026-11-29-run12/Llama-3.1-8B-pd-metrics-decode.txt,
vllm:nixl_num_descriptors sum / count); at pp 2 a stage holds 16 layers: 2,048. DeepSeek-V2-Lite (MLA, 27
layers): 27 x 1 x ceil(1,000 / 16) = 63 blocks = 1,701. Gemma-2-9B alternates sliding and full layers, all 42
cached: 42 x 2 x 2 = 168 for 17 tokens.
The connector's time is the profile's law on those counts; the ideal engine has none.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.engines.timing import PROFILES
from roofline.methods import parse_method
from roofline.serving.disagg import Disaggregated, KvLink
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

H200 = load_hardware("H200")
PROBE = Path(__file__).resolve().parents[2] / "validate/results/engines/nvidia-h200x2-vllm-2026-11-29-run12"


def pools(name: str, engine: str = "vllm", pp: int = 1) -> Disaggregated:
    wl = Workload(context_tokens=4096, pp=pp, engine=engine)
    s = Simulator(load_model(name), H200, wl, parse_method("bf16"), max_tokens=4096)
    return Disaggregated(s, s, 1, 1, KvLink(50e9, 5e-6))


@pytest.mark.parametrize(("name", "pp", "prompt", "expected"), [
    ("Llama-3.1-8B", 1, 1024, 4096), ("Llama-3.1-8B", 2, 1024, 2048), ("Llama-3.1-8B", 1, 1025, 4160),
    ("DeepSeek-V2-Lite", 1, 1000, 1701), ("Gemma-2-9B", 1, 17, 168)])
def test_descriptors_per_gpu(name, pp, prompt, expected):
    assert pools(name, pp=pp).descriptors(np.array([prompt]))[0] == expected


def test_connector_time_is_the_measured_law_on_the_descriptors():
    """kv_transfer_s + 4,096 x kv_descriptor_s from the profile's figures (derive.py --nixl of run 12's isolated
    probe: ~0.16 ms + 4.9 us each, so ~20 ms for a 1,024-token Llama-3.1-8B prompt, against ~0.5 ms of its 134 MB
    over NVLink); the transfer adds the wire."""
    prof = json.loads((PROFILES / "vllm.json").read_text())
    p = pools("Llama-3.1-8B")
    expected = prof["kv_transfer_s"] + 4096 * prof["kv_descriptor_s"]
    assert p.connector_s(np.array([1024]))[0] == pytest.approx(expected, rel=1e-12)
    assert 0.015 < expected < 0.03
    wire = 1024 * 131_072 / 50e9 + 5e-6
    assert p.transfer_s(np.array([1024]))[0] == pytest.approx(wire + expected, rel=1e-12)
    assert pools("Llama-3.1-8B", engine="ideal").connector_s(np.array([1024]))[0] == 0.0


def test_probe_law_follows_the_spaced_reads():
    """The probe's spaced reads cost ~5 us a descriptor whatever their size (8 KiB and 32 KiB at 4,096 descriptors
    within 6 %), while back-to-back ones merge (4,096 x 32 KiB in well under a tenth of the spaced time)."""
    d = json.loads((PROBE / "nixl_probe_isolated.json").read_text())
    case = {(c["descriptors"], c["bytes_each"], c["spacing"]): c["done_s"] for c in d["cases"]}
    assert case[(4096, 8192, 2)] == pytest.approx(case[(4096, 32768, 2)], rel=0.06)
    assert case[(4096, 32768, 1)] < 0.1 * case[(4096, 32768, 2)]
    assert 4e-6 < case[(4096, 32768, 2)] / 4096 < 6e-6


PROBE14 = PROBE.parent / "nvidia-h200x2-vllm-2026-11-29-run14"


def test_the_post_is_a_share_of_the_transfer_with_the_connectors_threads():
    """With the connector's 4 UCX threads (nixl_probe.py NUM_THREADS=4, run 14) the post returns before the READs
    complete: at 2,048 - 8,192 spaced descriptors it is 1.3 - 2.6 us a descriptor and below the completion, which it
    equalled with NIXL's default threads (run 12's probe: post ~ completion)."""
    d = json.loads((PROBE14 / "nixl_probe_t4.json").read_text())
    assert d["num_threads"] == 4 and d["isolate"]
    for c in d["cases"]:
        if c["spacing"] > 1 and c["descriptors"] >= 2048:
            assert 1.3e-6 < c["post_s"] / c["descriptors"] < 2.7e-6
            assert c["post_s"] < 0.9 * c["done_s"]
    d12 = json.loads((PROBE / "nixl_probe_isolated.json").read_text())
    big = [c for c in d12["cases"] if c["spacing"] > 1 and c["descriptors"] >= 2048]
    assert all(c["post_s"] > 0.95 * c["done_s"] for c in big)


def test_the_post_law_is_the_profiles_and_counted_once_in_a_requests_ttft():
    """kv_post_s + descriptors x kv_post_descriptor_s from the profile (derive.py --nixl-post); the request pays its
    post in the step that admits it, and its transfer's wait is shortened by it, so the TTFT of a lone request moves
    only by what the step adds beyond its own host work: with the post far above the step (here x 50), doubling it
    leaves the TTFT where the transfer's measured time puts it."""
    prof = json.loads((PROFILES / "vllm.json").read_text())
    p = pools("Llama-3.1-8B")
    post = p.load_host_s(np.array([1024]))[0]
    assert post == pytest.approx(prof["kv_post_s"] + 4096 * prof["kv_post_descriptor_s"], rel=1e-12)
    assert 0.3 * p.connector_s(np.array([1024]))[0] < post < p.connector_s(np.array([1024]))[0]
    assert pools("Llama-3.1-8B", engine="ideal").load_host_s(np.array([1024])) is None
    from roofline.serving.requests import Requests
    lone = Requests(np.array([0.0]), np.array([1024]), np.array([8]))
    ttft = []
    for scale in (50.0, 100.0):
        q = pools("Llama-3.1-8B")
        engine = q.decode.phases.engine
        object.__setattr__(engine, "kv_post_descriptor_s", prof["kv_post_descriptor_s"] * scale)
        object.__setattr__(engine, "kv_descriptor_s", prof["kv_descriptor_s"] * scale)
        try:
            ttft.append(float(q.run(lone).trace.ttft_s[0]))
            post_s = float(q.load_host_s(np.array([1024]))[0])
            transfer = float(q.transfer_s(np.array([1024]))[0])
        finally:
            object.__setattr__(engine, "kv_post_descriptor_s", prof["kv_post_descriptor_s"])
            object.__setattr__(engine, "kv_descriptor_s", prof["kv_descriptor_s"])
        assert post_s > 0.1  # far above a decode step
        assert ttft[-1] > transfer  # the whole transfer, post included, once
        assert ttft[-1] < transfer + 0.1  # ... and not the post twice


def test_a_short_prompt_is_never_ready_before_its_prefill_and_the_wire():
    """Below ~170 descriptors the post's fit (0.67 ms + 1.90 us each) exceeds the connector's (0.16 ms + 4.9 us):
    a 16-token prompt (64 descriptors) still waits for its bytes on the wire after its prefill, never less."""
    from roofline.serving.requests import Requests
    p = pools("Llama-3.1-8B")
    prompt = np.array([16])
    assert p.load_host_s(prompt)[0] > p.connector_s(prompt)[0]
    run = p.run(Requests(np.array([0.0]), prompt, np.array([4])))
    wire = p.transfer_s(prompt)[0] - p.connector_s(prompt)[0]
    assert run.trace.first_token_s[0] >= run.prefill.finish_s[0] + wire
