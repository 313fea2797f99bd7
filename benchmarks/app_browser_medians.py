"""The dashboard's interaction times, medians of repeated browser-test runs, optionally against another checkout.

    python benchmarks/app_browser_medians.py [--runs 3] [--before DIR]

Runs tests/app/test_app_browser.py `--runs` times in this checkout (and, with --before, in DIR: another checkout, e.g.
`git archive BASE | tar -x -C DIR`), interleaved before/after so both sides see the same machine load, each with
its own PYTHONPATH and the same $ROOFLINE_CACHE_DIR; reads each run's ci-artifacts/browser_timings.txt and prints a
Markdown table of the median server-side and browser ms per interaction (and the load averages of the runs).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"(.*?)\s+(\d+) ms\s+(\d+) ms$")


def run_once(checkout: Path) -> tuple[str, dict[str, tuple[int, int]]]:
    """One browser-test run in `checkout`: (load averages, {interaction: (server ms, browser ms)})."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "tests/app/test_app_browser.py"]
    done = subprocess.run(argv, cwd=checkout, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise SystemExit(f"{checkout}: the browser test failed:\n{done.stdout[-2000:]}")
    lines = (checkout / "ci-artifacts" / "browser_timings.txt").read_text().splitlines()
    rows = {m.group(1).strip(): (int(m.group(2)), int(m.group(3))) for m in map(ROW.match, lines[1:]) if m}
    return lines[0].split("load average ")[1].split(",")[0], rows


def median(runs: list[dict], label: str, i: int) -> str:
    values = [r[label][i] for r in runs if label in r]
    return f"{statistics.median(values):,.0f}" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout to compare with (run interleaved)")
    args = parser.parse_args()
    sides = {"before": args.before, "after": ROOT} if args.before else {"after": ROOT}
    results: dict[str, list] = {side: [] for side in sides}
    for _ in range(args.runs):
        for side, checkout in sides.items():
            results[side].append(run_once(checkout))
    for side, runs in results.items():
        print(f"{side}: load averages {[load for load, _ in runs]}")
    labels = list(dict.fromkeys(label for runs in results.values() for _, rows in runs for label in rows))
    heads = [f"{side} {what}" for side in sides for what in ("server", "browser")]
    print("| interaction (ms, median of " + str(args.runs) + ") | " + " | ".join(heads) + " |")
    print("|---|" + "--:|" * len(heads))
    for label in labels:
        cells = [median([rows for _, rows in results[side]], label, i) for side in sides for i in (0, 1)]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
