"""serving.kernel_rng against numpy: the PCG64 stream drawn inline is Generator.random's, double for double, and
the leading acceptances of each K-draw row are those of Speculative.draw's (n, K) array (the reference here is
numpy's own Generator, not the module's arithmetic)."""

import numpy as np
import pytest
from numba import njit

from roofline.serving.kernel_rng import leading_below, pcg_table, stream


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**63 + 7])
def test_the_stream_is_generator_randoms(seed):
    table = pcg_table(np.random.default_rng(seed), 1)
    assert np.array_equal(stream(table, 50_000), np.random.default_rng(seed).random(50_000))


def test_the_stream_continues_from_a_generator_already_drawn_from():
    rng = np.random.default_rng(3)
    rng.random(17)
    table = pcg_table(rng, 2)
    assert np.array_equal(stream(table, 1000), rng.random(1000))


@njit
def _leading(table, acceptance, n):
    """n rows drawn through leading_below, the state carried in locals as serving.kernel_spec.accept carries it."""
    out = np.empty(n, dtype=np.int64)
    hi, lo = table[0, 0], table[0, 1]
    for j in range(n):
        out[j], hi, lo = leading_below(hi, lo, table, acceptance)
    return out


@pytest.mark.parametrize("acceptance", [[0.7], [0.7, 0.6, 0.5], [1.0, 0.0, 0.9], [0.9, 0.8, 0.7, 0.6, 0.5]])
def test_leading_acceptances_match_numpys_rows(acceptance):
    acc = np.array(acceptance)
    rows = np.random.default_rng(0).random((3000, len(acc)))
    below = rows < acc
    expected = np.where(below.all(axis=1), len(acc), np.argmin(below, axis=1))
    got = _leading(pcg_table(np.random.default_rng(0), len(acc)), acc, 3000)
    assert np.array_equal(got, expected)
    assert 0 < expected.sum() < len(acc) * 3000 or acceptance[0] in (0.0, 1.0)


def test_another_seed_gives_other_acceptances():
    acc = np.array([0.7, 0.6, 0.5])
    a = _leading(pcg_table(np.random.default_rng(0), 3), acc, 500)
    b = _leading(pcg_table(np.random.default_rng(1), 3), acc, 500)
    assert not np.array_equal(a, b)


def test_a_generator_other_than_pcg64_is_refused():
    with pytest.raises(ValueError, match="PCG64"):
        pcg_table(np.random.Generator(np.random.MT19937(0)), 3)
