"""The handshake's growth with the remote pool (roofline/engines/timing.py mechanism 13; Disaggregated.handshake_s).

vLLM 0.24's decode worker builds one descriptor per (region, block) of the remote rank's WHOLE pool before
prep_xfer_dlist (nixl/base_worker.py@v0.24.0:1308-1364, 1555-1585): Llama-3.1-8B has 32 layers, a K and a V region
each, so a pool of P pages is 64 P descriptors. Without the per-descriptor law (a profile with run 17's one figure
alone) every pool waits kv_handshake_s; with a law fixed + D x per, by hand below (0.1 s + 5e-7 s a descriptor, made
up for the arithmetic, not a measurement)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.engines.timing import PROFILES, EngineTiming, on_host
from roofline.methods import parse_method
from roofline.serving.disagg import Disaggregated, KvLink
from roofline.serving.pool import KVPool
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

H200 = load_hardware("H200")
HANDSHAKE_S = json.loads((PROFILES / "vllm.json").read_text())["kv_handshake_s"]
PAGE_BYTES = 16 * 131_072  # Llama-3.1-8B bf16: 2 x 8 heads x 128 x 32 layers x 2 bytes a token


def pair(pages: int, prefill_tp: int = 1) -> Disaggregated:
    model, method = load_model("Llama-3.1-8B"), parse_method("bf16")
    dec = Simulator(model, H200, Workload(context_tokens=4096, engine="vllm"), method, max_tokens=4096)
    pool = KVPool.uniform(pages * PAGE_BYTES, 16, 131_072, 4096, "a test pool")
    pre = Simulator(model, H200, Workload(context_tokens=4096, tp=prefill_tp, engine="vllm"), method,
                    max_tokens=4096, engine=dec.engine, pool=pool)
    dec.cold_start = True
    return Disaggregated(pre, dec, 1, 1, KvLink(386e9, 5e-6))


def with_law(pairs: list[Disaggregated], fixed: float, per: float) -> tuple[float, float]:
    """Sets the law on the pairs' (shared, cached) engine profile; returns what it had."""
    engine = pairs[0].decode.phases.engine
    was = (engine.kv_handshake_fixed_s, engine.kv_handshake_descriptor_s)
    for p in pairs:
        object.__setattr__(p.decode.phases.engine, "kv_handshake_fixed_s", fixed)
        object.__setattr__(p.decode.phases.engine, "kv_handshake_descriptor_s", per)
    return was


def test_the_remote_pool_is_64_descriptors_a_page_of_llama_8b():
    # run 17's pool: 839,648 tokens = 52,478 pages; 52,478 x 64 = 3,358,592 (validate/notes/2026-11-30-disagg-27.md)
    assert pair(52_478).remote_pool_descriptors() == 3_358_592
    assert pair(6_560).remote_pool_descriptors() == 419_840


def test_without_the_per_descriptor_law_every_pool_waits_the_one_figure():
    pairs = [pair(52_478), pair(6_560)]
    was = with_law(pairs, 0.0, 0.0)
    try:
        assert pairs[0].handshake_s() == HANDSHAKE_S
        assert pairs[1].handshake_s() == HANDSHAKE_S
    finally:
        with_law(pairs, *was)


def test_with_the_law_the_handshake_grows_with_the_remote_pool():
    pairs = [pair(52_478), pair(13_120), pair(13_120, prefill_tp=2)]
    was = with_law(pairs, 0.1, 5e-7)
    try:
        assert pairs[0].handshake_s() == pytest.approx(0.1 + 3_358_592 * 5e-7)  # 1.779296 s
        assert pairs[1].handshake_s() == pytest.approx(0.1 + 839_680 * 5e-7)  # 0.51984 s
        # a tp 2 prefill engine: the decode rank meets both remote ranks, one after the other
        assert pairs[2].handshake_s() == pytest.approx(2 * 0.51984)
    finally:
        with_law(pairs, *was)


def test_engine_timing_handshake_s_and_its_host_speed():
    t = EngineTiming(engine="x", version="", kv_handshake_s=2.0)
    assert t.handshake_s(1e6) == 2.0
    law = replace(t, kv_handshake_fixed_s=0.2, kv_handshake_descriptor_s=4e-7)
    assert law.handshake_s(1e6) == pytest.approx(0.6)
    # host work (mechanism 11): both terms halve on a host twice as fast
    assert on_host(law, 2.0).handshake_s(1e6) == pytest.approx(0.3)
