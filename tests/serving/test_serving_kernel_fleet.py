"""serving.kernel_fleet's compiled assembly against the numpy operations Fleet's reference assembly uses: a stable
argsort by replica, np.lexsort by (start, replica), serving.clients.emission_delay_s on each replica's records."""

import numpy as np
import pytest

pytest.importorskip("numba")

from roofline.serving.clients import emission_delay_s  # noqa: E402
from roofline.serving.kernel_fleet import (  # noqa: E402
    REPLICA,
    KernelReplicas,
    emission_delays,
    merge_order,
    merged_steps,
    split,
)
from roofline.serving.kernel_layout import REC_FIELDS  # noqa: E402
from roofline.serving.requests import Requests  # noqa: E402


def _records(rng, m: int, n: int, tie_every: int = 0) -> np.ndarray:
    """m records of n replicas in event order: starts nondecreasing (every `tie_every`-th equal to the one before,
    its replica drawn afresh, so runs of equal starts come in any replica order)."""
    rec = np.zeros((m, REC_FIELDS))
    rec[:, 0] = np.cumsum(rng.uniform(0.001, 0.01, m))
    if tie_every:
        rec[tie_every::tie_every, 0] = rec[tie_every - 1:-1:tie_every, 0]
    rec[:, 1] = rng.uniform(0.001, 0.01, m)
    rec[:, 2] = rng.integers(0, 64, m)
    rec[:, REPLICA] = rng.integers(0, n, m)
    return rec


@pytest.mark.parametrize("n", [1, 3, 32])
def test_split_is_a_stable_argsort(n):
    keys = np.random.default_rng(n).integers(0, n, 5000)
    order, bounds = split(keys, n)
    assert np.array_equal(order, np.argsort(keys, kind="stable"))
    assert np.array_equal(bounds, np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=n))]))


def test_split_leaves_an_empty_replica_an_empty_range():
    order, bounds = split(np.array([2, 0, 2, 0]), 4)
    assert bounds.tolist() == [0, 2, 2, 4, 4] and order.tolist() == [1, 3, 0, 2]


@pytest.mark.parametrize("tie_every", [0, 2, 3, 7])
def test_merged_steps_sort_by_start_then_replica(tie_every):
    rec = _records(np.random.default_rng(tie_every), 3000, 5, tie_every)
    expected = rec[np.lexsort((rec[:, REPLICA], rec[:, 0])), :REPLICA]
    how = merge_order(rec[:, 0], rec[:, REPLICA])[0]
    assert how == (0 if not tie_every else 1)
    assert np.array_equal(merged_steps(rec), expected)


def test_merged_steps_view_when_already_ordered():
    rec = _records(np.random.default_rng(1), 100, 4)
    assert np.shares_memory(merged_steps(rec), rec)


def test_merged_steps_sort_in_full_when_a_start_decreases():
    rec = _records(np.random.default_rng(2), 500, 4)
    rec[[10, 20]] = rec[[20, 10]]
    assert merge_order(rec[:, 0], rec[:, REPLICA])[0] == 2
    assert np.array_equal(merged_steps(rec), rec[np.lexsort((rec[:, REPLICA], rec[:, 0])), :REPLICA])


def test_emission_delays_are_each_replicas_own():
    """Each request against its own replica's records, as emission_delay_s on that replica's Trace: first tokens
    before, between, at and after its records' starts, NaN, and a replica with no records."""
    rng = np.random.default_rng(3)
    n, m, k = 4, 400, 300
    rec = _records(rng, m, n)
    rec[rec[:, REPLICA] == 3, REPLICA] = 2  # replica 3 keeps no records
    routed = rng.integers(0, n, k)
    first = rng.uniform(-0.1, rec[-1, 0] + 0.1, k)
    first[::17] = rec[rng.integers(0, m, len(first[::17])), 0]  # exactly a start: side "left"
    first[5] = np.nan
    order, bounds = split(rec[:, REPLICA], n)
    got = emission_delays(rec, order, bounds, routed, first, 4e-5)
    for j in range(n):
        mine = routed == j
        own = np.full(k, np.nan)
        own[mine] = first[mine]
        assert np.array_equal(got[mine], emission_delay_s(own, rec[rec[:, REPLICA] == j, :REPLICA], 4e-5)[mine])
    assert got[5] == 0.0 and np.all(got[routed == 3] == 0.0) and np.any(got > 0)


def test_replicas_are_built_when_read_with_the_reference_values():
    rng = np.random.default_rng(4)
    n, k = 3, 50
    rec = _records(rng, 200, n)
    routed = rng.integers(0, n, k)
    first, finish = rng.uniform(0, 1, k), rng.uniform(1, 2, k)
    sent = Requests(np.zeros(k), np.ones(k, dtype=np.int64), np.ones(k, dtype=np.int64))
    reps = KernelReplicas(sent, first, finish, routed, rec, split(rec[:, REPLICA], n), 1e9, np.array([1, 0, 2]), None)
    assert len(reps) == n and not reps._built
    t = reps[-1]
    assert list(reps._built) == [2] and t is reps[2] and t.preemptions == 2
    assert np.array_equal(t.steps, rec[rec[:, REPLICA] == 2, :REPLICA])
    assert np.array_equal(np.isnan(t.first_token_s), routed != 2)
    assert np.array_equal(t.finish_s[routed == 2], finish[routed == 2])
    assert [r.preemptions for r in reps] == [1, 0, 2] and len(reps[0:2]) == 2
    with pytest.raises(IndexError):
        reps[3]
