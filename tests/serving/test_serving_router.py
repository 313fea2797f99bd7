"""The prefix-aware router's rule (serving.router: SGLang's cache-aware policy) in a fleet, by hand.

Setting of the fleet cases: two replicas, one system prompt of 1,024 tokens; a first request runs alone at t = 0
and leaves the prompt cached on replica 0 only; a burst then arrives at one instant, so no replica commits a step
while it is routed: replica 0 matches 1,024 tokens of every prompt, replica 1 none, and the loads are the requests
routed so far. SGLang's rule (sgl-router/src/policies/cache_aware.rs at 026f853ba7ae): to the least loaded when
max - min > balance_abs_threshold and max > min x balance_rel_threshold, else to the longest match when its share
of the prompt is > cache_threshold, else to the smallest tree.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from roofline.cli import main
from roofline.serving.fleet import Fleet
from roofline.serving.prefix import parse_prefix
from roofline.serving.requests import Requests
from roofline.serving.router import CacheAware, choose, imbalanced
from tests.serving.test_serving_fleet import simulator

SYSTEM = 1024


LOOPS = pytest.mark.parametrize("kernel", [False, True], ids=["python", "compiled"])


def warm_then_burst(burst: int, kernel: bool, tail_tokens: int = 128):
    """One request at t = 0, then `burst` at t = 100 s (the first long done), all behind one system prompt; the
    Python loop or the compiled one (serving.kernel, where numba is installed)."""
    n = burst + 1
    arrival = np.concatenate([[0.0], np.full(burst, 100.0)])
    base = Requests(arrival, np.full(n, tail_tokens), np.full(n, 4))
    reqs, _ = parse_prefix(f"system:{SYSTEM}:1", base, 0)
    sim = simulator(SYSTEM + tail_tokens + 4)
    sim.kernel = kernel
    return reqs, sim


@LOOPS
def test_sglangs_defaults_move_the_66th_request_of_a_burst_to_the_idle_replica(kernel):
    """Defaults 0.3 / 64 / 1.5: the burst's first 65 requests match replica 0 (1,024 / 1,152 = 0.89 > 0.3) and the
    loads [k, 0] are balanced while k - 0 <= 64; at [65, 0] (65 > 64 and 65 > 0 x 1.5) the 66th goes to replica 1;
    then [65, 1] is balanced again (64 is not > 64) and replica 0 takes the next, [66, 1] is not, and so on:
    replica 1 takes every second request."""
    reqs, sim = warm_then_burst(80, kernel)
    routed = Fleet(sim, 2, "prefix-aware").run(reqs).routed.tolist()
    assert routed[0] == 0  # nothing cached anywhere: the smallest tree, ties by load then index
    assert routed[1:66] == [0] * 65
    assert routed[66:] == [1, 0] * 7 + [1]


@LOOPS
def test_below_the_thresholds_the_burst_stays_on_the_prefix(kernel):
    """With balance_abs_threshold 200 the loads [k, 0] of an 80-request burst never differ by more than 200:
    every request follows its cached prefix to replica 0 (the pile-up the thresholds exist to stop)."""
    reqs, sim = warm_then_burst(80, kernel)
    routed = Fleet(sim, 2, "prefix-aware", CacheAware(balance_abs_threshold=200)).run(reqs).routed
    assert routed.tolist() == [0] * 81


@LOOPS
def test_the_relative_threshold_keeps_a_request_on_the_prefix_until_max_exceeds_min_times_it(kernel):
    """abs 4, rel 3, loads before each burst request (-> replica): [0..4, 0] balanced -> 0; [5, 0] -> 1; [5, 1]
    (4 not > 4) -> 0; [6, 1] -> 1; [6, 2] -> 0; [7, 2] (7 > 6) -> 1; [7, 3] -> 0; [8, 3] (8 > 9? no) -> 0;
    [9, 3] (9 > 9? no) -> 0; [10, 3] -> 1; [10, 4] (10 > 12? no), [11, 4], [12, 4] -> 0; [13, 4] -> 1."""
    reqs, sim = warm_then_burst(18, kernel)
    routed = Fleet(sim, 2, "prefix-aware", CacheAware(balance_abs_threshold=4, balance_rel_threshold=3.0)).run(reqs)
    assert routed.routed.tolist()[1:] == [0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]


def sequential(n: int, tail_tokens: int, kernel: bool):
    """`n` requests each arriving after the previous one finished (100 s apart), one system prompt."""
    base = Requests(np.arange(n) * 100.0, np.full(n, tail_tokens), np.full(n, 4))
    reqs, _ = parse_prefix(f"system:{SYSTEM}:1", base, 0)
    sim = simulator(SYSTEM + tail_tokens + 4)
    sim.kernel = kernel
    return reqs, sim


@LOOPS
def test_a_match_below_the_cache_threshold_goes_to_the_smallest_tree(kernel):
    """Prompts of 1,024 shared + 4,096 own tokens: a cached prompt matches 1,024 / 5,120 = 0.2 of it. Under the
    default cache_threshold 0.3 the match does not count and the smallest tree wins. Trees (tokens inserted:
    prompt less that replica's match): r0 -> 0 (both 0: lowest index), tree [5120, 0]; r1 -> 1, [5120, 5120];
    r2: equal trees, equal loads -> 0, [9216, 5120]; r3 -> 1, [9216, 9216]; so they alternate. With
    cache_threshold 0.1 the 0.2 match counts: every request follows the prompt to replica 0."""
    reqs, sim = sequential(6, 4096, kernel)
    assert Fleet(sim, 2, "prefix-aware").run(reqs).routed.tolist() == [0, 1, 0, 1, 0, 1]
    keep = Fleet(sim, 2, "prefix-aware", CacheAware(cache_threshold=0.1)).run(reqs)
    assert keep.routed.tolist() == [0] * 6


def test_choose_applies_the_rule_in_sglangs_order():
    """The pure rule on chosen numbers: imbalance first (least loaded, first of equals), then the match rate's
    strict test, then the smallest tree; the chosen tree grows by the prompt less its match."""
    rule = CacheAware()
    trees = [0, 0, 0]
    assert choose([70, 5, 5], [900, 0, 0], 1000, trees, rule) == 1  # 65 > 64 and 70 > 7.5
    assert trees == [0, 1000, 0]
    assert choose([69, 5, 5], [900, 0, 0], 1000, trees, rule) == 0  # 64 is not > 64: the 0.9 match wins
    assert trees == [100, 1000, 0]
    assert choose([0, 0, 0], [300, 0, 0], 1000, trees, rule) == 2  # 0.3 is not > 0.3: smallest tree
    assert trees == [100, 1000, 1000]
    assert choose([0, 0, 0], [301, 0, 0], 1000, trees, rule) == 0  # 0.301 > 0.3
    assert imbalanced([100, 66], CacheAware(balance_abs_threshold=10)) is True  # 100 > 99
    assert imbalanced([99, 66], CacheAware(balance_abs_threshold=10)) is False  # 99 is not > 66 x 1.5


@pytest.mark.parametrize(("field", "value"), [("cache_threshold", 1.5), ("cache_threshold", float("nan")),
                                              ("balance_abs_threshold", -1), ("balance_abs_threshold", 2.5),
                                              ("balance_rel_threshold", 0.5), ("balance_rel_threshold", float("inf"))])
def test_bad_thresholds_are_refused_naming_the_flag(field, value):
    with pytest.raises(ValueError, match="--" + field.replace("_", "-")):
        CacheAware(**{field: value})


@pytest.mark.parametrize(("flag", "value"), [("--cache-threshold", "-0.1"), ("--balance-abs-threshold", "-3"),
                                             ("--balance-rel-threshold", "0.9"), ("--balance-abs-threshold", "x")])
def test_cli_refuses_bad_thresholds_with_exit_status_2(capsys, flag, value):
    argv = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H100-SXM", "--method", "bf16", "--json",
            "--rate", "20", "--requests", "20", "--prompt-tokens", "512", "--output-tokens", "16",
            "--replicas", "2", "--router", "prefix-aware", flag, value]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusal of a value that is not a number
        code = exc.code
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]


def test_cli_reports_the_thresholds_and_the_per_replica_spread(capsys):
    argv = ["simulate", "--model", "Llama-3.1-8B", "--hardware", "H100-SXM", "--method", "bf16", "--json",
            "--rate", "inf", "--requests", "40", "--prompt-tokens", "128", "--output-tokens", "4",
            "--prefix", "system:1024:1", "--replicas", "2", "--router", "prefix-aware",
            "--balance-abs-threshold", "4", "--balance-rel-threshold", "3"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)["replicas"]
    assert data["router_thresholds"] == {"cache_threshold": 0.3, "balance_abs_threshold": 4,
                                         "balance_rel_threshold": 3.0}
    assert sum(data["requests"]) == 40 and min(data["requests"]) > 0
