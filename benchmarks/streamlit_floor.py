"""Streamlit's own floor in the browser (not a test): how long a one-line Streamlit page takes to settle, beside the
dashboard's shared link, at the same machine load.

    python benchmarks/streamlit_floor.py [--runs 5]

Starts two servers with the dashboard's own command (dashboard.appdata.streamlit_command: 127.0.0.1, the repository's
.streamlit/config.toml, no file watcher): a page that only writes a title and a line ("floor"), and app/main.py.
Each run opens, in a fresh Chromium profile (nothing cached: a first-time visitor) and then in a new tab of that
browser (its JavaScript cached), first the floor page, then the dashboard's shared link (the browser test's link:
H200, batch 4, kivi-2 and bf16, fp8 weights), and times each from `goto` until the page's last element is drawn
(the floor's line; the dashboard's Summary table) with no running script, stale element or skeleton (the browser
test's settle rule, tests/app/test_app_browser.py). Prints the median and range of each, in ms, with the load average.
Issue 16's target for the shared link is <= 1 s in the browser; the floor page is what Streamlit itself costs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

FLOOR_PAGE = 'import streamlit as st\nst.title("floor")\nst.write("one line of text")\n'
LINK = "/?hardware=H200&batch=4&methods=kivi-2%2Cbf16&weight_dtype=fp8"
BUSY = '[data-testid="stStatusWidget"], [data-stale="true"], [data-testid="stSpinner"], [data-testid="stSkeleton"]'


def settled_ms(page, url: str, last: str) -> float:
    """ms from goto(url) until the text `last` is visible and nothing is busy (the browser test's settle rule)."""
    start = time.perf_counter()
    page.goto(url, wait_until="domcontentloaded")
    page.get_by_text(last, exact=False).first.wait_for(state="visible", timeout=90_000)
    while page.locator(BUSY).count():
        page.wait_for_timeout(25)
    return (time.perf_counter() - start) * 1e3


def main(argv: list[str] | None = None) -> None:
    """Time the floor page and the dashboard's shared link, `--runs` times each, interleaved."""
    from playwright import sync_api
    from test_app_browser import CHROMIUM, CHROMIUM_ARGS, _free_port, _wait_healthy

    from roofline.dashboard import appdata

    parser = argparse.ArgumentParser(description="Streamlit's floor beside the dashboard's shared link")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        floor_script = Path(tmp) / "floor.py"
        floor_script.write_text(FLOOR_PAGE)
        servers, urls = [], {}
        try:
            for name, script in (("floor", floor_script), ("dashboard", None)):
                port = _free_port()
                cmd = appdata.streamlit_command(port=port, python=sys.executable)
                if script is not None:
                    cmd[cmd.index(str(appdata.app_path()))] = str(script)
                proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                        env={**os.environ, "ROOFLINE_APP_WARMUP": "off"})
                servers.append(proc)
                urls[name] = f"http://127.0.0.1:{port}"
                _wait_healthy(urls[name], proc)
            times = {key: [] for key in ("floor fresh", "floor tab", "link fresh", "link tab")}
            with sync_api.sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
                settled_ms(browser.new_page(), urls["dashboard"] + LINK, "TPOT error")  # the server's first run
                for _ in range(args.runs):
                    for name, url, last in (("floor", urls["floor"], "one line of text"),
                                            ("link", urls["dashboard"] + LINK, "TPOT error")):
                        context = browser.new_context(viewport={"width": 1366, "height": 768})
                        times[f"{name} fresh"].append(settled_ms(context.new_page(), url, last))
                        times[f"{name} tab"].append(settled_ms(context.new_page(), url, last))
                        context.close()
                browser.close()
        finally:
            for proc in servers:
                proc.terminate()
                proc.wait(timeout=15)
    load = os.getloadavg()
    print(f"browser ms, {args.runs} runs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
          f"{os.cpu_count()} CPUs")
    for key, values in times.items():
        print(f"{key:<12} median {statistics.median(values):6.0f}   range {min(values):6.0f} - {max(values):6.0f}")


if __name__ == "__main__":
    main()
