"""A pure-Python probe of the host CPU, printed as JSON: the median of 7 runs of a fixed dict-and-list workload (the
kind of work an engine's scheduler and input preparation do), seconds. Run 7
(validate/notes/2026-11-29-vllm-h200-run6.md) found the same host-bound vLLM step 58 ms on one lent H200 box and
76 ms on another; every run's env header records this probe so a run's host laws can be placed against the machine
they came from (run 7's box: 55.2 ms, the same workload written inline in run7.sh).

Usage: python3 host_probe.py
"""
import json
import statistics
import time


def work() -> list[int]:
    d: dict[int, int] = {}
    for i in range(200000):
        d[i % 997] = d.get(i % 997, 0) + i
    return [x * 2 for x in range(100000)]


def main() -> None:
    times = []
    for _ in range(7):
        t = time.perf_counter()
        work()
        times.append(time.perf_counter() - t)
    print(json.dumps({"python_probe_s": statistics.median(times)}))


if __name__ == "__main__":
    main()
