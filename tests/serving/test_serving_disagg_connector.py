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
import statistics
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
    """kv_transfer_s + 4,096 x kv_descriptor_s from the profile's figures (derive.py --nixl of run 14's isolated
    probe with the connector's 4 UCX threads: ~0.44 ms + 3.4 us each, so ~14 ms for a 1,024-token Llama-3.1-8B
    prompt, against ~0.5 ms of its 134 MB over NVLink); the transfer adds the wire."""
    prof = json.loads((PROFILES / "vllm.json").read_text())
    p = pools("Llama-3.1-8B")
    expected = prof["kv_transfer_s"] + 4096 * prof["kv_descriptor_s"]
    assert p.connector_s(np.array([1024]))[0] == pytest.approx(expected, rel=1e-12)
    assert 0.010 < expected < 0.018
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
    """Below ~150 descriptors the post's fit (0.67 ms + 1.90 us each) exceeds the connector's (0.44 ms + 3.4 us):
    a 16-token prompt (64 descriptors) still waits for its bytes on the wire after its prefill, never less."""
    from roofline.serving.requests import Requests
    p = pools("Llama-3.1-8B")
    prompt = np.array([16])
    assert p.load_host_s(prompt)[0] > p.connector_s(prompt)[0]
    run = p.run(Requests(np.array([0.0]), prompt, np.array([4])))
    wire = p.transfer_s(prompt)[0] - p.connector_s(prompt)[0]
    assert run.trace.first_token_s[0] >= run.prefill.finish_s[0] + wire


# The decode servers' own "KV Transfer metrics" lines (vLLM's periodic log, nixl/stats.py: the mean over a ~10 s window
# of NIXL's xferDuration, from the post to the poll in a later step that found the READs done), in windows of low
# load on the pair of runs 12-14 (Llama-3.1-8B, 16-token blocks; each run's Llama-3.1-8B-pd-decode.log, the line at
# the time given): (run, log time, transfers, mean xfer ms, descriptors a transfer).
LOGGED_XFER = [("run14", "19:46:58", 5, 9.511, 2048), ("run14", "19:47:18", 18, 10.801, 2048),
               ("run12", "16:55:47", 15, 20.662, 4096),
               ("run13", "17:17:17", 19, 30.304, 8192), ("run13", "17:17:27", 4, 30.476, 8192)]
NVLINK = KvLink(301.4e9, 5e-6)  # the pair's link (hardware/H200.yaml scale_up; run 13's and 14's cases files)


@pytest.mark.parametrize(("run", "at", "transfers", "xfer_ms", "descriptors"), LOGGED_XFER)
def test_the_transfer_completes_before_the_decode_engine_logged_it_done(run, at, transfers, xfer_ms, descriptors):
    """A READ the engine found done xfer_ms after its post cannot complete later than that: the profile's transfer
    (connector law + the wire) of each window's prompts is at most the engine's logged mean. By hand: 2 regions x 32
    layers x 32 / 64 / 128 blocks = 2,048 / 4,096 / 8,192 descriptors for the 512 / 1,024 / 2,048-token prompts of
    runs 14 / 12 / 13, as logged. With NIXL's default UCX threads the law (run 12's probe: 0.16 ms + 4.9 us a
    descriptor) would put 8,192 descriptors at 40.4 ms + 0.9 ms of wire, past run 13's logged 30.3 ms; with the
    connector's own 4 threads (base_worker.py@v0.24.0 lines 319-329) the probe completes 8,192 in 27.2 ms."""
    s = Simulator(load_model("Llama-3.1-8B"), H200, Workload(context_tokens=4096, engine="vllm"),
                  parse_method("bf16"), max_tokens=4096)
    p = Disaggregated(s, s, 1, 1, NVLINK)
    prompt = np.array([descriptors // 64 * 16])
    assert p.descriptors(prompt)[0] == descriptors
    assert 0.0 < p.transfer_s(prompt)[0] <= xfer_ms / 1e3


def test_the_transfer_law_follows_the_probe_with_the_connectors_threads():
    """The profile's connector law is derived from nixl_probe.py run with the connector's 4 UCX threads (its source
    names that file, which says so), and it stays within 10 % of that probe's spaced completions at 2,048 - 8,192
    descriptors (the prompts of 512 - 2,048 tokens), each less its bytes at the probe's back-to-back rate."""
    prof = json.loads((PROFILES / "vllm.json").read_text())
    assert "nixl_probe_t4.json" in prof["sources"]["kv_descriptor_s"]
    d = json.loads((PROBE14 / "nixl_probe_t4.json").read_text())
    assert d["num_threads"] == 4 and d["isolate"]
    rate = statistics.median(c["bytes_per_s"] for c in d["cases"] if c["spacing"] == 1 and c["bytes"] >= 1 << 27)
    for c in d["cases"]:
        if c["spacing"] > 1 and c["descriptors"] >= 2048:
            law = prof["kv_transfer_s"] + c["descriptors"] * prof["kv_descriptor_s"]
            assert law == pytest.approx(c["done_s"] - c["bytes"] / rate, rel=0.10)
