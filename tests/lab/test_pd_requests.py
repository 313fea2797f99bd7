"""validate.engines.pd_requests' binning by second of sends and its share of a pooled sum, on numbers by hand."""

from __future__ import annotations

import numpy as np
import pytest

from validate.engines.pd_requests import api_share, by_second


def test_by_second_by_hand():
    """Sends at 10.2, 10.9, 11.3 and 13.5 s, seconds counted from the first (0, 0.7, 1.1, 3.3): second 0 holds the
    first two (median of 4 and 6 ms = 5), second 1 the third (8), second 3 the fourth (20); second 2 no row."""
    sent = np.array([10.2, 10.9, 11.3, 13.5])
    rows = by_second(sent, {"leg": np.array([0.004, 0.006, 0.008, 0.020])})
    assert [(s, n) for s, n, _ in rows] == [(0, 2), (1, 1), (3, 1)]
    assert [m["leg"] for _, _, m in rows] == pytest.approx([0.005, 0.008, 0.020])


def test_api_share_by_hand():
    """29.3 s pooled over 780 requests, the other 420 at 17.3 ms each (7.266 s): (29.3 - 7.266) / 360 = 61.2 ms;
    with the others at nothing, 29.3 / 360 = 81.4 ms."""
    assert api_share(29.3, 360, 420, 0.0173) == pytest.approx(0.0612056, rel=1e-5)
    assert api_share(29.3, 360, 420, 0.0) == pytest.approx(0.0813889, rel=1e-5)
