"""validate/engines/loop_lag.py: the monitors read known delays (by hand: a loop that spins 20 ms then idles 20 ms)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from validate.engines import loop_lag

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "validate/engines/looplag_site"

TOY = """
import asyncio, sys, time
async def main(spin):
    t_end = time.perf_counter() + 2.2
    while time.perf_counter() < t_end:
        s = time.perf_counter()
        while time.perf_counter() - s < spin:
            pass
        await asyncio.sleep(0.02)
asyncio.run(main(float(sys.argv[1])))
"""


def _run(tmp_path: Path, spin: float, looplag: bool = True) -> Path:
    out = tmp_path / f"lag-{spin}"
    script = tmp_path / "toy.py"
    script.write_text(TOY)
    env = {**os.environ, "PYTHONPATH": str(SITE)}
    env.pop("LOOPLAG_DIR", None)
    if looplag:
        env["LOOPLAG_DIR"] = str(out)
    subprocess.run([sys.executable, str(script), str(spin)], env=env, check=True, timeout=60)
    return out


def _merged(out: Path) -> dict:
    (path,) = out.glob("lag-*.jsonl")
    head, windows = loop_lag.read(path)
    assert head["pid"] > 0 and head["tick_s"] == loop_lag.TICK_S
    assert len(windows) >= 1 and all(w["loop"] for w in windows)
    return loop_lag.merged(windows)


def test_idle_loop_hops_are_short(tmp_path):
    m = _merged(_run(tmp_path, 0.0))
    # an idle loop: a hop waits only for epoll's wake-up, well under a millisecond at the median
    assert m["hop"].n > 300
    assert m["hop"].quantile(0.5) <= 1e-3
    assert m["hop"].max < 0.02


def test_spinning_loop_delays_hops_and_the_thread(tmp_path):
    m = _merged(_run(tmp_path, 0.02))
    # 20 ms spells holding the GIL: the thread waits up to a switch interval (5 ms) for the GIL at its wake-up, then
    # its hop waits the rest of the spell (under 20 ms); a loop half busy spends about half the wall in CPU
    assert 0.004 <= m["thread"].max <= 0.05
    assert 0.005 <= m["hop"].max <= 0.05
    assert m["hop"].quantile(0.99) >= 0.005
    assert 0.3 <= m["cpu_s"] / m["wall_s"] <= 1.1


def test_without_the_variable_nothing_is_written(tmp_path):
    out = _run(tmp_path, 0.0, looplag=False)
    assert not out.exists()


def test_hist_bins_and_quantiles():
    h = loop_lag.Hist()
    for s in (5e-5, 1.5e-4, 3e-3, 3e-3, 0.7):
        h.add(s)
    assert h.bins[0] == 1 and h.bins[1] == 1 and h.bins[5] == 2 and h.bins[-1] == 1
    assert h.quantile(0.5) == pytest.approx(5e-3)  # the third of five falls in [2, 5) ms: its upper edge
    assert h.quantile(1.0) == pytest.approx(0.7)
    assert h.mean() == pytest.approx((5e-5 + 1.5e-4 + 6e-3 + 0.7) / 5)
    g = loop_lag.Hist()
    g.merge(json.loads(json.dumps(h.as_dict())))
    assert g.as_dict() == h.as_dict()


def test_torn_last_line_is_dropped(tmp_path):
    p = tmp_path / "lag-1.jsonl"
    p.write_text(json.dumps({"pid": 1, "argv": ["python3", "-m", "vllm.entrypoints.cli.main", "serve"], "t": 0,
                             "switch_interval_s": 0.005, "tick_s": 0.002}) + "\n" + '{"t0": 1, "t1"')
    head, windows = loop_lag.read(p)
    assert windows == [] and loop_lag.role(head) == "api"
