"""Prefix caching in the compiled record loop (serving.kernel_prefix) against the Python loop's PrefixCache: the same
engine records, hit statistics, routing and per-request first token, finish, TTFT and TPOT to float rounding (1e-9
relative), on a shared system prompt, a prefix tree, a hit rate and multi-turn sessions; vLLM's profile with its
admission lag and the ideal engine; a pool small enough that cached prefixes are evicted and requests preempted; one
replica and fleets behind the prefix-aware router.

Each case also checks that the cache did something in the reference run (tokens hit, bytes evicted), so a run where
the feature idled on both sides could not pass unnoticed.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.engines.scheduling import scheduling  # noqa: E402
from roofline.serving import kernel  # noqa: E402
from roofline.serving.clients import Clients  # noqa: E402
from roofline.serving.fleet import Fleet  # noqa: E402
from roofline.serving.pool import KVPool  # noqa: E402
from roofline.serving.prefix import parse_prefix, sessions  # noqa: E402
from roofline.serving.prefix_cache import PrefixCache  # noqa: E402
from roofline.serving.router import CacheAware  # noqa: E402
from roofline.serving.scheduler import Scheduler, SchedulerConfig  # noqa: E402
from tests.serving.test_serving_kernel import H100, assert_same, python_loop, requests, simulator  # noqa: E402
from tests.serving.test_serving_kernel_clients import vllm  # noqa: E402

BF16_TOKEN_BYTES = 131072  # Llama-3.1-8B's bf16 KV: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes


@pytest.fixture
def evicted(monkeypatch):
    """Bytes PrefixCache.take freed in the Python loop's runs (the reference: the kernel must match it)."""
    freed = [0.0]
    original = PrefixCache.take

    def counting(self, need_bytes):
        out = original(self, need_bytes)
        freed[0] += out
        return out

    monkeypatch.setattr(PrefixCache, "take", counting)
    return freed


@pytest.fixture
def kept(monkeypatch):
    """Failed admissions and failed room tests in the Python loop's runs while unused cached prefixes were there: each
    left them cached (the rule before evicted them at the test)."""
    seen = [0, 0]
    take, room = Scheduler._take, Scheduler._room

    def counting_take(self, i, todo, budget, free):
        out = take(self, i, todo, budget, free)
        seen[0] += out is None and self.cache is not None and self.cache.unused_bytes > 0
        return out

    def counting_room(self, need):
        out = room(self, need)
        seen[1] += not out and self.cache is not None and self.cache.unused_bytes > 0
        return out

    monkeypatch.setattr(Scheduler, "_take", counting_take)
    monkeypatch.setattr(Scheduler, "_room", counting_room)
    return seen


def small_pool(sim, reqs, tokens: int) -> None:
    """A pool of `tokens` bf16 tokens in 16-token pages: prefixes compete with running requests for it."""
    sim.pool = KVPool.uniform(tokens * BF16_TOKEN_BYTES, 16, BF16_TOKEN_BYTES, reqs.max_tokens, "test: a small pool")


def same_run(sim, reqs, clients=None):
    fast, slow = sim.run(reqs, clients=clients), python_loop(sim).run(reqs, clients=clients)
    assert_same(fast, slow)
    assert fast.prefix_cache == slow.prefix_cache
    assert slow.prefix_cache["hit_tokens"] > 0
    return fast, slow


def assert_same_fleet(sim, n: int, router: str, reqs, clients=None, rule=None):
    fast = Fleet(sim, n, router, rule).run(reqs, clients)
    slow = Fleet(python_loop(sim), n, router, rule).run(reqs, clients)
    assert np.array_equal(fast.routed, slow.routed)
    assert_same(fast.trace, slow.trace)
    assert fast.trace.prefix_cache == slow.trace.prefix_cache
    for mine, theirs in zip(fast.replicas, slow.replicas, strict=True):
        assert_same(mine, theirs)
        assert mine.prefix_cache == theirs.prefix_cache
    assert slow.trace.prefix_cache["hit_tokens"] > 0
    return fast, slow


@pytest.mark.parametrize("spec", ["system:1024:4", "tree:3x512,4x256", "hit:0.6"])
@pytest.mark.parametrize("engine", ["vllm", "ideal"])
def test_shared_prefixes_in_a_small_pool_give_the_python_loops_times(spec, engine, evicted):
    """vLLM with its admission lag (async scheduling) and the ideal engine; a pool of 9,000 tokens against prompts
    up to ~4,000: cached prefixes are evicted LRU and requests preempted (hit:RATE's one shared segment is in use
    by a running request whenever the pool is short, so it is never evicted)."""
    reqs, _ = parse_prefix(spec, requests(20.0, 160), 0)
    sim = vllm(reqs.max_tokens) if engine == "vllm" else simulator(reqs.max_tokens)
    small_pool(sim, reqs, 9000)
    assert kernel.covers(sim, reqs) is None
    fast, slow = same_run(sim, reqs)
    assert evicted[0] > 0 or spec.startswith("hit")
    assert slow.preemptions > 0
    off = dataclasses.replace(sim.engine, prefix_caching=False)
    plain = python_loop(sim)
    plain.engine = off
    assert np.median(plain.run(reqs).ttft_s) > np.median(fast.ttft_s)  # the hits skipped prefill


@pytest.mark.parametrize("full", [False, True], ids=["first-chunk", "whole-prompt"])
def test_failed_admissions_keep_the_unused_prefixes_alike_in_both_loops(full, kept, evicted):
    """Eight system prompts of 1,024 tokens in a 7,000-token pool under vLLM's profile, 512-token chunks: the
    queue's head often waits while idle prefixes are cached, and preemptions find them too; neither test evicts
    them (serving.scheduler._take, _room), only the pages a step takes (evicted > 0)."""
    reqs, _ = parse_prefix("system:1024:8", requests(20.0, 160), 7)
    profile = scheduling("vllm", H100, "api", 1, context_len=reqs.max_tokens)
    profile = dataclasses.replace(profile, max_num_batched_tokens=512, max_num_seqs=64, admit_full_prompt=full)
    sim = simulator(reqs.max_tokens, engine=profile)
    assert sim.scheduler.admit_full_prompt == full and sim.engine.admission_lag
    small_pool(sim, reqs, 7000)
    same_run(sim, reqs)
    assert kept[0] > 0 and evicted[0] > 0


@pytest.fixture
def choices(monkeypatch):
    """The most unused cached nodes PrefixCache.take chose among, over the Python loop's evictions that freed
    bytes: more than one means its LRU order decided what stayed warm."""
    most = [0]
    original = PrefixCache.take

    def counting(self, need_bytes):
        idle = {node for t, _, node in self._heap if self._evictable(node) and t == self.last_use[node]}
        out = original(self, need_bytes)
        if out:
            most[0] = max(most[0], len(idle))
        return out

    monkeypatch.setattr(PrefixCache, "take", counting)
    return most


@pytest.mark.parametrize("spec,tokens", [("system:1024:40", 24000), ("tree:4x512,6x256", 24000)])
def test_many_idle_prefixes_are_evicted_least_recently_used_first(spec, tokens, choices):
    """A light load (2-3 req/s, few requests at once) over many prefixes (40 system prompts; a tree of 4 x 6
    paths), a pool where they compete with the spent pages of the requests that ended: an eviction picks among ten
    or more idle prefixes, so the free queue's order decides the later hits."""
    reqs, _ = parse_prefix(spec, requests(2.0 if spec.startswith("system") else 3.0, 200), 0)
    sim = simulator(reqs.max_tokens)
    small_pool(sim, reqs, tokens)
    same_run(sim, reqs)
    assert choices[0] >= 10


def test_a_roomy_pool_keeps_the_system_prompts_warm():
    """The default pool: nothing is evicted, every request after its system prompt's first use hits it."""
    reqs, tree = parse_prefix("system:2048:3", requests(8.0, 120), 1)
    sim = vllm(reqs.max_tokens)
    fast, _ = same_run(sim, reqs)
    firsts = len(np.unique(tree.leaf))
    assert fast.prefix_cache["hit_tokens"] >= (len(reqs) - firsts - 10) * 2048  # a few may start before one is done


def test_multi_turn_sessions_reuse_the_conversation_so_far(evicted):
    """Chats of 4 turns (serving.prefix.sessions: each turn's prompt is the last turn's prompt and answer plus a new
    message), in a pool that evicts: a node per turn, chains of cached segments evicted from their tails."""
    base = requests(12.0, 160, seed=5)
    base = dataclasses.replace(base, prompt_tokens=np.minimum(base.prompt_tokens, 700))
    reqs, _ = sessions(base, 4)
    sim = simulator(reqs.max_tokens, scheduler=SchedulerConfig(max_num_batched_tokens=1024, max_num_seqs=32))
    small_pool(sim, reqs, 12000)
    same_run(sim, reqs)
    assert evicted[0] > 0


def test_a_compressed_kv_format_caches_its_own_bytes(evicted):
    """KIVI-2's pool table (packed codes and a full-precision window: bytes per token not uniform) for the cached
    segments' sizes and the evictions."""
    reqs, _ = parse_prefix("system:1536:6", requests(30.0, 150), 2)
    sim = simulator(reqs.max_tokens, method="kivi-2")
    sim.pool = dataclasses.replace(sim.pool, capacity_bytes=float(sim.pool.seq_bytes[reqs.max_tokens]) * 3)
    same_run(sim, reqs)
    assert evicted[0] > 0


def test_closed_loop_clients_with_a_shared_prefix():
    reqs, _ = parse_prefix("system:1024:2", requests(float("inf"), 100), 3)
    sim = vllm(reqs.max_tokens)
    clients = Clients(max_concurrency=8, think_s=0.2)
    assert kernel.covers(sim, reqs, clients) is None
    fast, slow = same_run(sim, reqs, clients)
    assert fast.requests.arrival_s == pytest.approx(slow.requests.arrival_s, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("router", ["prefix-aware", "least-outstanding", "round-robin"])
def test_a_fleet_with_prefix_caches_gives_the_python_loops_routing_and_times(router, evicted):
    """Three replicas, each with its own cache, eight system prompts; the prefix-aware router (serving.router's
    rule at its defaults) sends a request to the replica holding the longest cached prefix of it when that is over
    0.3 of the prompt, so its fleet hits more than round-robin's on the same stream."""
    reqs, _ = parse_prefix("system:1024:8", requests(45.0, 180), 4)
    sim = vllm(reqs.max_tokens)
    small_pool(sim, reqs, 9000)
    fast, slow = assert_same_fleet(sim, 3, router, reqs)
    assert evicted[0] > 0
    if router == "prefix-aware":
        spread = Fleet(python_loop(sim), 3, "round-robin").run(reqs).trace.prefix_cache["hit_tokens"]
        assert fast.trace.prefix_cache["hit_tokens"] > spread


@pytest.mark.parametrize("rule", [CacheAware(balance_abs_threshold=3, balance_rel_threshold=1.2),
                                  CacheAware(cache_threshold=0.9)], ids=["load-balance", "match-rate"])
def test_the_routers_thresholds_switch_routing_alike_in_both_loops(rule, evicted):
    """Thresholds that act on this run (a load gap of 3 requests; a match rate of 0.9, above what a 1,024-token
    prompt on these prompts reaches): both loops route and time it alike, and the routing differs from the same run
    with the thresholds out of play (no load gap is that large, any match counts)."""
    reqs, _ = parse_prefix("system:1024:8", requests(45.0, 180), 4)
    sim = vllm(reqs.max_tokens)
    small_pool(sim, reqs, 9000)
    fast, _ = assert_same_fleet(sim, 3, "prefix-aware", reqs, rule=rule)
    idle = CacheAware(cache_threshold=0.0, balance_abs_threshold=10**6)
    assert not np.array_equal(fast.routed, Fleet(python_loop(sim), 3, "prefix-aware", idle).run(reqs).routed)


def test_a_fleet_of_one_replays_the_single_replica():
    reqs, _ = parse_prefix("tree:2x512,3x256", requests(25.0, 120), 6)
    sim = vllm(reqs.max_tokens)
    small_pool(sim, reqs, 9000)
    one = Fleet(sim, 1, "prefix-aware").run(reqs)
    assert_same(one.trace, python_loop(sim).run(reqs))
    assert one.trace.prefix_cache["hit_tokens"] > 0


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_prefill_first_and_reserving_engines_with_a_prefix_cache(engine, evicted):
    """SGLang's prefill-only steps (its RadixAttention cache on) and TensorRT-LLM's whole-prompt admission with a
    reservation to the last token (its KV-cache reuse turned on here): eviction at admission and in _room."""
    reqs, _ = parse_prefix("system:1024:4", requests(20.0, 160), 0)
    profile = dataclasses.replace(scheduling(engine, H100, "api", 1, context_len=reqs.max_tokens), prefix_caching=True)
    sim = simulator(reqs.max_tokens, engine=profile)
    small_pool(sim, reqs, 12000)
    assert kernel.covers(sim, reqs) is None
    same_run(sim, reqs)
    assert evicted[0] > 0
