"""The CUDA-only timing paths of `roofline calibrate` on a fake device (CI has no GPU): CUDA events read a simulated
GPU clock that each graph replay advances by a set duration, so the schedules and the figures they give are checked
against numbers worked by hand from the lab's procedures (triton.testing.do_bench; the probe's burst, idle and
back-to-back window)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


class SimGpu:
    """A GPU clock (seconds) that replays advance; events stamp it."""

    def __init__(self, durations):
        self.now, self.durations, self.replays = 0.0, list(durations), 0

    def replay(self):
        self.now += self.durations[min(self.replays, len(self.durations) - 1)]
        self.replays += 1


@pytest.fixture
def sim(monkeypatch):
    gpu = SimGpu([1e-3])

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = gpu.now

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3  # ms, as torch.cuda.Event

    class Graph:
        def replay(self):
            gpu.replay()

    real_empty = torch.empty
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch, "empty", lambda *shape, device=None, **kw: real_empty(1, **kw))
    from roofline.calibrate import timing

    monkeypatch.setattr(timing.Timer, "capture", lambda self, fn, warm_calls=2: Graph())
    return gpu


def test_do_bench_follows_triton(sim):
    """Triton 3.x do_bench at warm-up 25 ms and rep 100 ms on a 2^-10 s = 0.9765625 ms replay (the first 3.9 ms): one
    replay, five for the estimate (0.9765625 ms), int(25 / 0.9765625) = 25 warm-up and int(100 / 0.9765625) = 102
    timed: 133 replays, median 0.9765625 ms."""
    from roofline.calibrate.timing import Timer

    sim.durations = [2 ** -8, 2 ** -10]
    s = Timer("cuda").do_bench_s(lambda: None, calls=4)
    assert sim.replays == 1 + 5 + 25 + 102
    assert s == pytest.approx(2 ** -10 / 4)


def test_do_bench_median_is_the_lower_middle(sim):
    """torch.median of an even count is the lower of the two middle values: 102 timed replays at 2^-10 s (as above),
    the first 51 at 2^-10 s and the last 51 at 3 x 2^-10 s -> 2^-10 s, where statistics.median would give twice it."""
    from roofline.calibrate.timing import Timer

    sim.durations = [2 ** -10] * (1 + 5 + 25 + 51) + [3 * 2 ** -10]
    assert Timer("cuda").do_bench_s(lambda: None) == pytest.approx(2 ** -10)


def test_back_to_back_stamps_each_replay(sim):
    from roofline.calibrate.timing import Timer

    sim.durations = [2e-3, 3e-3]
    class Graph:
        def replay(self):
            sim.replay()

    starts, durations = Timer("cuda").back_to_back(Graph(), 0.01)
    assert durations[:3] == pytest.approx([2e-3, 3e-3, 3e-3])
    assert starts[:3] == pytest.approx([0.0, 2e-3, 5e-3])


def test_sustained_case_rates_and_series(sim, monkeypatch):
    """One probe case on the fake device: burst 10 timed replays of 4 ms for 2 calls (2 ms per call), so
    reps = ceil(30 ms / 4 ms) = 8 calls of the window graph per replay; window replays of 32 ms, the first 0.1 s at
    40 ms: steady (starts >= 0.5 s) at work / 32 ms, work = 8 replays x 2 calls x 1e12 FLOP."""
    from roofline.calibrate import bench_sustained as S
    from roofline.calibrate.bench import SCALES, Bench

    b = Bench("cpu", SCALES["cpu"], 30.0)
    monkeypatch.setattr(b.timer, "device", "cuda")
    monkeypatch.setattr(S.time, "sleep", lambda s: None)
    # burst: 2 warm-up + 10 timed replays at 4 ms; the window: 40 ms replays until 0.1 s, then 32 ms
    sim.durations = [4e-3] * 12 + [40e-3] * 3 + [32e-3]
    monkeypatch.setattr(b.timer, "back_to_back", lambda graph, seconds: _window(sim, 1.0))
    S._case(b, "sustained", "case", lambda: None, 2, int(1e12), m=2048, n=1, k=1)
    row = b.rows[-1]
    assert row["burst_s"] == pytest.approx(2e-3) and row["calls"] == 16
    assert row["steady_flops_per_s"] == pytest.approx(16e12 / 32e-3)
    assert row["series"][0] == [0.0, pytest.approx(16e12 / 40e-3)]


def _window(sim, seconds):
    starts, durations = [], []
    while sim.now - 0.048 < seconds:  # the burst's 12 replays took 48 ms of the simulated clock
        t = sim.now
        sim.replay()
        starts.append(t - 0.048)
        durations.append(sim.now - t)
    return starts, durations
