"""The server's decode time by the slots it shared its steps with (timing mechanism 20): for every task of a
llama-server log (-lv 4), the busy slots and their runs of consecutive ids over its decode, and its time a token.

With one KV stream a slot (-np N without -kvu), llama_decode splits a batch with split_equal, whose ubatch holds only
consecutive sequence ids (src/llama-batch.cpp split_equal, sequential): busy slots {0, 1, 4, 5} decode in two
ubatches, each a pass over the weights. This table is the evidence: the decode time a token grouped by (busy, runs).
  python -m validate.engines.llamacpp_slots LOG[.gz] ..
"""

from __future__ import annotations

import argparse
import gzip
import statistics
from collections import defaultdict
from pathlib import Path

from validate.engines.llamacpp_logs import busy_runs, slot_tasks


def table(path: Path) -> list[dict]:
    """Rows (busy, runs, tasks, median decode ms a token) of one log, busy and runs rounded per task."""
    text = (gzip.open(path, "rt", errors="replace") if path.suffix == ".gz" else path.open(errors="replace")).read()
    tasks = slot_tasks(text)
    groups: dict[tuple[int, int], list[float]] = defaultdict(list)
    for t in tasks:
        if t.get("decode_tokens"):
            busy, runs = busy_runs(tasks, t)
            groups[(round(busy), round(runs))].append(t["decode_ms"] / t["decode_tokens"])
    return [{"busy": b, "runs": r, "tasks": len(v), "ms_per_token": statistics.median(v)}
            for (b, r), v in sorted(groups.items())]


def main() -> None:
    p = argparse.ArgumentParser(prog="llamacpp_slots", description=__doc__.splitlines()[0])
    p.add_argument("logs", nargs="+", type=Path)
    for log in p.parse_args().logs:
        print(log)
        for row in table(log):
            print(f"  busy {row['busy']:2d} in {row['runs']} run(s): {row['tasks']:4d} tasks, decode "
                  f"{row['ms_per_token']:6.2f} ms a token (median)")


if __name__ == "__main__":
    main()
