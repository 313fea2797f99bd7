"""validate.engines.itl_by_batch's reading of a saved `vllm bench serve` result, on two requests counted by hand."""

from __future__ import annotations

from validate.engines.itl_by_batch import measured


def test_batches_by_hand():
    """A: sent 0, TTFT 0.100, ITLs 10 / 10 / 10 ms (tokens at 0.110, 0.120, 0.130; decode span 0.100-0.130); B: sent
    0.105, TTFT 0.010, ITLs 20 / 20 ms (tokens at 0.135, 0.155; span 0.115-0.155). A's token at 0.110 decodes alone
    (B's first token comes at 0.115), its tokens at 0.120 and 0.130 beside B; B's at 0.135 and 0.155 alone (A ended at
    0.130). So B 1: 10, 20, 20 ms (median 20, 3); B 2: 10, 10 ms (median 10, 2); a 30 ms ITL would be left out."""
    meas = {"start_times": [0.0, 0.105], "ttfts": [0.100, 0.010], "itls": [[0.010, 0.010, 0.010], [0.020, 0.020]]}
    assert measured(meas, 25.0) == {1: (20.0, 3), 2: (10.0, 2)}
    assert measured(meas, 15.0) == {1: (10.0, 1), 2: (10.0, 2)}
