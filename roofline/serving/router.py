"""The prefix-aware router's rule: SGLang's cache-aware routing policy (sgl-router), with its thresholds.

SGLang's router (sgl-project/sglang, sgl-router/src/policies/cache_aware.rs at commit 026f853ba7ae, select_worker)
decides each request in this order:
1. load: every worker's in-flight request count (`w.load()`); the fleet is imbalanced when
   `max_load - min_load > balance_abs_threshold` AND `max_load > min_load * balance_rel_threshold`; then the request
   goes to the least-loaded worker (the first of equal loads: Rust's `min_by_key`), whatever the cache holds;
2. otherwise the worker whose prefix tree matches the longest prefix of the request's text; the match rate is
   `matched / text length`; if it is `> cache_threshold` the request goes to that worker,
3. else to the worker with the smallest tree (`tree.get_smallest_tenant()`: "most available cache capacity").
Either way the request's text is inserted into the chosen worker's tree (in the imbalanced case too).
Defaults, those of the router's command line (sgl-router/py_src/sglang_router/router_args.py at commit
083d601378d0, RouterArgs): cache_threshold 0.3, balance_abs_threshold 64, balance_rel_threshold 1.5. (The Rust
library's CacheAwareConfig::default in sgl-router/src/policies/mod.rs is 0.5 / 32 / 1.1; a launched router takes the
command line's.)

How the simulator reads it (`choose`):
- load = a replica's outstanding requests (running, waiting, or routed and not yet seen): what the router counts
  from sending a request until its response ends;
- the match = the replica's prefix-cache hit for the request in whole pages (serving.prefix_cache.PrefixCache.hit): the
  router's approximate tree stands for the engine's cache (SGLang builds it from the requests it routed instead of
  asking the engine; the two agree until the engine evicts). Equal matches: the least loaded, then the lowest index
  (SGLang takes the tree node's first tenant, an arbitrary one);
- the tree's size = the tokens the router inserted for that replica: each routed request adds its prompt tokens
  less that replica's match (the text its tree already held). SGLang also evicts a tree's least recently used
  leaves when it passes max_tree_size (2**26 characters, every 120 s): not modelled, it needs ~16M tokens a
  replica. Equal sizes: the least loaded, then the lowest index.
The arithmetic is float64 (SGLang's f32 differs only at a load exactly on the relative threshold).
Without a prefix cache in use the router is least-outstanding (serving.fleet).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheAware:
    """The cache-aware router's thresholds (SGLang's names; defaults: its command line's)."""

    cache_threshold: float = 0.3  # match rate above which the longest match wins
    balance_abs_threshold: int = 64  # max - min outstanding above which (and the relative test) load wins
    balance_rel_threshold: float = 1.5  # max outstanding above min x this (and the absolute test): load wins

    def __post_init__(self) -> None:
        c, a, r = self.cache_threshold, self.balance_abs_threshold, self.balance_rel_threshold
        if not (isinstance(c, int | float) and math.isfinite(c) and 0.0 <= c <= 1.0):
            raise ValueError(f"--cache-threshold: {c!r} must be a match rate in [0, 1]")
        if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a <= 2**53:
            raise ValueError(f"--balance-abs-threshold: {a!r} must be a whole number of requests in [0, 2**53]")
        if not (isinstance(r, int | float) and math.isfinite(r) and r >= 1.0):
            raise ValueError(f"--balance-rel-threshold: {r!r} must be a finite ratio >= 1 (max load > min load x it)")


def imbalanced(loads: list[int], rule: CacheAware) -> bool:
    """SGLang's imbalance test: max - min > balance_abs_threshold and max > min x balance_rel_threshold."""
    hi, lo = max(loads), min(loads)
    return hi - lo > rule.balance_abs_threshold and hi > lo * rule.balance_rel_threshold


def choose(loads: list[int], hits: list[int], prompt_tokens: int, tree_tokens: list[int], rule: CacheAware) -> int:
    """The replica for one request (module docstring): least loaded when imbalanced, else the longest match when
    its rate passes cache_threshold, else the smallest tree. Adds the request to the chosen replica's tree_tokens."""
    n = len(loads)
    if imbalanced(loads, rule):
        j = loads.index(min(loads))
    else:
        j = min(range(n), key=lambda x: (-hits[x], loads[x], x))
        rate = hits[j] / prompt_tokens if prompt_tokens else 0.0  # SGLang: an empty text matches 0.0
        if not rate > rule.cache_threshold:
            j = min(range(n), key=lambda x: (tree_tokens[x], loads[x], x))
    tree_tokens[j] += prompt_tokens - hits[j]
    return j
