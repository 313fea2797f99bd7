import collections
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# validate/ is a folder of the checkout, not an installed package (DESIGN.md): make it importable here.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
# the tests mirror the tree (tests/<floor>/...); their shared helpers (cli_run, hostile_harness) live here
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

os.environ.setdefault("MPLBACKEND", "Agg")
# compiled plans go to a cache folder of this run (roofline.numbers.codegen), never the user's ~/.cache
if "ROOFLINE_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["ROOFLINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="roofline-test-cache-")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


class HostileCounts(collections.Counter):
    """(category, outcome) -> cases, and the failing cases' lines, for the hostile-input harness."""

    def __init__(self) -> None:
        super().__init__()
        self.failures: list[str] = []


HOSTILE = pytest.StashKey[HostileCounts]()


@pytest.fixture(scope="session")
def hostile_counts(request) -> HostileCounts:
    return request.config.stash.setdefault(HOSTILE, HostileCounts())


def pytest_sessionfinish(session) -> None:
    """Under pytest-xdist, a worker hands its hostile-input counts to the controller (workeroutput is
    serialised by execnet: plain lists only), which sums them in pytest_testnodedown."""
    workeroutput = getattr(session.config, "workeroutput", None)
    counts = session.config.stash.get(HOSTILE, None)
    if workeroutput is not None and counts:
        workeroutput["hostile"] = [[c, k, n] for (c, k), n in counts.items()]
        workeroutput["hostile_failures"] = list(counts.failures)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """The controller's side: add one finished worker's hostile-input counts to this run's."""
    output = getattr(node, "workeroutput", None) or {}
    if "hostile" not in output:
        return
    counts = node.config.stash.setdefault(HOSTILE, HostileCounts())
    for cat, kind, n in output["hostile"]:
        counts[(cat, kind)] += n
    counts.failures.extend(output.get("hostile_failures", []))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if getattr(config, "workeroutput", None) is not None:
        return  # a worker's summary is not shown; the controller prints the sum
    counts = config.stash.get(HOSTILE, None)
    if not counts:
        return
    kinds = ["ok", "error", "traceback", "hang", "bad-error", "bad-json"]
    categories = sorted({c for c, _ in counts})
    terminalreporter.section("hostile-input harness")
    terminalreporter.write_line(f"{'category':<18}" + "".join(f"{k:>11}" for k in kinds) + f"{'total':>8}")
    for cat in categories + ["all"]:
        row = [sum(n for (c, k), n in counts.items() if k == kind and cat in (c, "all")) for kind in kinds]
        terminalreporter.write_line(f"{cat:<18}" + "".join(f"{n:>11}" for n in row) + f"{sum(row):>8}")
    for line in counts.failures[:40]:
        terminalreporter.write_line(line[:300])
