"""Prefix caching (serving.prefix): hits skip prefill, LRU eviction of unused tails, and compression keeping more
prefixes warm.

Expected values are counted by hand from the workload's definition: which requests find their prefix already
computed, in whole pages of 16 tokens, when every request runs alone; an LRU cache cycled over more items than it
holds never hits (the classic cyclic-access result: Belady, Nelson & Shedler 1969), and holds them all when it has
room for all of them.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from roofline.catalogue import load_hardware, load_model
from roofline.cli import main
from roofline.methods import parse_method
from roofline.serving.pool import KVPool
from roofline.serving.prefix import _tree, parse_prefix, sessions
from roofline.serving.prefix_cache import PrefixCache
from roofline.serving.requests import LengthDist, Requests, poisson_requests
from roofline.serving.simulate import Simulator
from roofline.specs import Workload

MODEL, H100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")


def test_cache_hits_whole_pages_and_leaves_the_last_token():
    tree = _tree([-1], [0], [100], [0, 0], [100, 100], "system")
    cache = PrefixCache(tree, np.arange(4097, dtype=np.float64), 16)  # 1 byte per token
    assert cache.hit(0, 150) == 0
    cache.acquire(0, 0.0)
    assert cache.publish(0, 96) == 0  # 96 = the whole pages of its 100 shared tokens
    assert cache.bytes == 96 and cache.hit(1, 150) == 96
    assert cache.hit(1, 90) == 80  # at most todo - 1 = 89 tokens, in whole pages


def test_eviction_is_lru_and_takes_a_chain_from_its_tail():
    # roots A, B of 64 tokens; C is a child of A of 32 tokens (starting at token 64)
    tree = _tree([-1, -1, 0], [0, 0, 64], [64, 64, 32], [2, 1], [96, 64], "tree")
    cache = PrefixCache(tree, np.arange(4097, dtype=np.float64), 16)
    for i, t in ((0, 1.0), (1, 2.0)):
        cache.acquire(i, t)
        cache.publish(i, int(tree.shared[i]))
        cache.release(i, t)
    assert cache.bytes == 96 + 64
    assert cache.take(16) == 16 and cache.cached.tolist() == [64, 64, 16]  # A's chain, C's tail first
    assert cache.take(40) == 48 and cache.cached.tolist() == [32, 64, 0]  # C, then A's tail (page by page)
    cache.acquire(1, 3.0)  # B in use: not evictable
    assert cache.take(1000) == 32 and cache.cached.tolist() == [0, 64, 0]


def sim(spec: str, max_tokens: int, pool: KVPool | None = None) -> Simulator:
    wl = Workload(context_tokens=max_tokens, prefill_chunk_tokens=8192)
    return Simulator(MODEL, H100, wl, parse_method(spec), max_tokens=max_tokens, pool=pool)


def alone(n: int, prompt: int, output: int, seed: int = 0) -> Requests:
    """Requests 1,000 s apart on average: each runs alone."""
    return poisson_requests(0.001, n, LengthDist.parse(str(prompt), "p"), LengthDist.parse(str(output), "o"), seed)


def test_system_prompt_hits_skip_its_prefill():
    reqs, _ = parse_prefix("system:1024", alone(20, 512, 16), 0)
    s = sim("bf16", 1536 + 16)
    trace = s.run(reqs)
    stats = trace.prefix_cache
    assert stats["hit_tokens"] == 19 * 1024  # everyone after the first finds the 1024 system tokens cached
    assert stats["hit_rate"] == pytest.approx(19 * 1024 / (20 * 1536))
    full = s.phases.prefill_time(1, 1536)
    assert trace.ttft_s[0] == pytest.approx(full, rel=1e-9)
    assert np.all(trace.ttft_s[1:] < 0.6 * full)  # a third of the prompt left to compute (plus reading the rest)
    off = replace(s.engine, prefix_caching=False)
    s.engine = off
    assert s.run(reqs).ttft_s == pytest.approx(np.full(20, full), rel=1e-9)


def test_prefix_tree_hits_count_what_was_seen_before():
    reqs, tree = parse_prefix("tree:3x512,4x256", alone(60, 300, 8), 5)
    trace = sim("bf16", 768 + 300 + 8).run(reqs)
    seen_roots, seen_leaves, expected = set(), set(), 0
    for leaf in tree.leaf.tolist():
        root = int(tree.parent[leaf])
        expected += 512 * (root in seen_roots) + 256 * (leaf in seen_leaves)
        seen_roots.add(root), seen_leaves.add(leaf)
    assert trace.prefix_cache["hit_tokens"] == expected


def test_sessions_reuse_the_conversation_so_far():
    base = alone(6, 200, 40)
    reqs, _ = sessions(base, 3)
    assert reqs.prompt_tokens.tolist()[:3] == [200, 200 + 40 + 200, 440 + 40 + 200]
    trace = sim("bf16", 680 + 40).run(reqs)
    # a finished turn has computed all but its last answer token (it is sampled, never fed back): turn 1 leaves
    # 239 tokens, 14 whole pages = 224; turn 2 leaves 440 + 39 = 479 tokens, 29 pages = 464
    assert trace.prefix_cache["hit_tokens"] == 2 * (224 + 464)


def test_a_compressed_cache_keeps_more_prefixes_warm():
    """200 system prompts of 2048 tokens, used in turn twice over; a pool that holds 150 of them in bf16 holds all
    200 in KIVI-2. LRU over a cycle longer than the cache never hits; a cache that holds the cycle hits every
    second-round request."""
    k, n, system, user, out = 200, 400, 2048, 256, 4
    base = alone(n, user, out, seed=2)
    tree = _tree(np.full(k, -1), np.zeros(k), np.full(k, system), np.arange(n) % k, np.full(n, system), "system")
    reqs = replace(base, prompt_tokens=base.prompt_tokens + system, prefix=tree)
    total = system + user + out
    bf16 = sim("bf16", total)
    cap = 150 * float(bf16.pool.seq_bytes[system]) + float(bf16.pool.seq_bytes[total])
    bf16.pool = replace(bf16.pool, capacity_bytes=cap)
    kivi = sim("kivi-2", total)
    assert 200 * float(kivi.pool.seq_bytes[system]) + float(kivi.pool.seq_bytes[total]) < cap
    kivi.pool = replace(kivi.pool, capacity_bytes=cap)
    assert bf16.run(reqs).prefix_cache["hit_tokens"] == 0
    assert kivi.run(reqs).prefix_cache["hit_tokens"] == (n - k) * system


BASE = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H100-SXM", "--method", "bf16", "--json"]


@pytest.mark.parametrize("spec", ["system:0", "hit:1.5", "tree:3x", "radix:4"])
def test_bad_prefix_specs_are_one_line_errors(capsys, spec):
    assert main([*BASE, "--rate", "1", "--requests", "5", "--prefix", spec]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--prefix" in err[0]


def test_cli_reports_the_hit_rate(capsys):
    assert main([*BASE, "--rate", "0.01", "--requests", "10", "--prompt-tokens", "256", "--output-tokens", "4",
                 "--prefix", "hit:0.5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["prefix_cache"]["hit_tokens"] == 9 * 128  # half of 256, from the second request on


def test_cli_text_names_the_hit_rate(capsys):
    argv = [a for a in BASE if a != "--json"]
    assert main([*argv, "--rate", "0.01", "--requests", "10", "--prompt-tokens", "256", "--output-tokens", "4",
                 "--prefix", "hit:0.5"]) == 0
    assert "prefix cache hit rate 45.0% (hit workload)" in capsys.readouterr().out  # 9 x 128 / (10 x 256)
