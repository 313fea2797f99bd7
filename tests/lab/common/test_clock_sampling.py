"""validate.common.clocks: the per-case SM clock of a bench, from nvidia-smi samples (no GPU needed here)."""

import datetime as dt

from validate.common import clocks


def _line(epoch: float, mhz: float, watts: float) -> str:
    stamp = dt.datetime.fromtimestamp(epoch).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    return f"{stamp}, {mhz:.0f}, {watts:.2f}"


def test_parse_line_reads_local_time_like_time_time() -> None:
    got = clocks.parse_line(_line(1795411400.25, 1785, 612.5))
    assert got is not None and abs(got[0] - 1795411400.25) < 1e-3 and got[1:] == (1785.0, 612.5)
    assert clocks.parse_line("timestamp, clocks.current.sm [MHz], power.draw [W]") is None
    assert clocks.parse_line("2026/11/23 05:22:35.903, [N/A], 81.36") is None


def test_summarize_keeps_only_samples_inside_the_timed_windows() -> None:
    samples = [(0.0, 1980, 80), (1.0, 1785, 650), (1.5, 1740, 690), (2.0, 1800, 640), (5.0, 1980, 90)]
    got = clocks.summarize(samples, [(0.9, 2.1)])
    # the three samples at 1.0, 1.5, 2.0: median clock 1785, lowest 1740, median power 650
    assert got == {"sm_mhz": 1785, "sm_mhz_min": 1740, "power_w": 650, "samples": 3}
    assert clocks.summarize(samples, [(3.0, 4.0)]) is None


def test_windows_are_taken_once() -> None:
    clocks.take_windows()
    clocks.mark(1.0, 2.0)
    clocks.mark(3.0, 4.0)
    assert clocks.take_windows() == [(1.0, 2.0), (3.0, 4.0)]
    assert clocks.take_windows() == []


def test_sampler_without_nvidia_smi_records_nothing(monkeypatch) -> None:
    monkeypatch.setattr(clocks.shutil, "which", lambda name: None)
    sampler = clocks.Sampler().start()
    clocks.mark(1.0, 2.0)
    assert sampler.case_clocks() is None
    sampler.stop()
    assert not sampler.path.exists()


def test_sampler_reads_only_new_complete_lines(tmp_path) -> None:
    sampler = clocks.Sampler()
    sampler.proc = object()  # as if nvidia-smi were writing the file
    sampler.path.write_text(_line(10.0, 1980, 100) + "\n" + _line(11.0, 1700, 690) + "\n" + "2026/11")
    clocks.take_windows()
    clocks.mark(10.5, 11.5)
    assert sampler.case_clocks() == {"sm_mhz": 1700, "sm_mhz_min": 1700, "power_w": 690, "samples": 1}
    with sampler.path.open("a") as f:  # the partial line ends (unreadable, skipped); a new sample follows
        f.write("\n" + _line(12.0, 1650, 700) + "\n")
    clocks.mark(11.9, 12.1)
    assert sampler.case_clocks() == {"sm_mhz": 1650, "sm_mhz_min": 1650, "power_w": 700, "samples": 1}
    sampler.proc = None
    sampler.stop()


def test_probes_reduce_to_their_median_and_are_taken_once() -> None:
    clocks.take_probes()
    assert clocks.take_probes() == {}
    clocks.PROBE["mhz"] += [1858.04, 1700.0, 1866.5]  # three graphs timed in one case
    assert clocks.take_probes() == {"probe_mhz": 1858.0, "probe_mhz_min": 1700.0, "probes": 3}
    assert clocks.take_probes() == {}


def test_probe_graph_records_nothing_unless_on() -> None:
    class Graph:
        def replay(self) -> None:
            raise AssertionError("the probe must not run when PROBE is off")

    clocks.PROBE["on"] = False
    clocks.probe_graph(Graph(), 1.0)
    assert clocks.take_probes() == {}
