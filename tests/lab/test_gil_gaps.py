"""validate/engines/gil_gaps.py: a waiter against a pure Python spin gets the GIL by its drop request, about one
switch interval (CPython's take_gil: 5 ms by default) after it asks."""

import sys

from validate.engines import gil_gaps


def test_a_pure_spin_hands_the_gil_over_after_about_a_switch_interval():
    p = gil_gaps.point("none", 0, run_s=0.5)
    interval_ms = sys.getswitchinterval() * 1e3
    assert p["n"] >= 20
    assert 0.4 * interval_ms <= p["p50_ms"] <= 6 * interval_ms


def test_a_syscall_gap_hands_the_gil_over_at_once():
    p = gil_gaps.point("syscall", 100, run_s=0.5)
    # time.sleep(0) lets the kernel run the woken waiter: far under a switch interval at the median
    assert p["p50_ms"] < 0.5 * sys.getswitchinterval() * 1e3
