"""The dashboard in a real browser: `streamlit run` on 127.0.0.1, Debian's Chromium through Playwright, every page
clicked, no exception block anywhere, a screenshot of each page under ci-artifacts/screenshots/.

Skipped only when /usr/bin/chromium is missing outside CI; in CI (env CI set) a missing browser fails the test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from roofline.report import dashboard as appdata

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "ci-artifacts" / "screenshots"
PAGES = ("Plan", "Roofline", "Compare", "Validation", "Claims")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SETTLE_S = 90

if not CHROMIUM.exists():
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing in CI: install Debian's chromium (see .ci/run)", pytrace=False)
    pytest.skip(f"{CHROMIUM} is missing (not in CI): apt-get install chromium", allow_module_level=True)

from playwright import sync_api  # noqa: E402  (the `browser` extra; after the browser check on purpose)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"streamlit did not answer on {url} within {timeout_s} s")


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    cmd = appdata.streamlit_command(port=port, python=sys.executable)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    log = (ROOT / "ci-artifacts")
    log.mkdir(parents=True, exist_ok=True)
    with open(log / "streamlit.log", "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_healthy(url, proc)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _settle(page) -> None:
    """Wait until the script has finished (no status widget for a while) and the charts have drawn."""
    deadline = time.monotonic() + SETTLE_S
    quiet_since = None
    while time.monotonic() < deadline:
        running = page.locator('[data-testid="stStatusWidget"]').count() > 0
        spinning = page.locator('[data-testid="stSpinner"]').count() > 0
        if running or spinning:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 1.5:
            break
        page.wait_for_timeout(250)
    else:
        raise TimeoutError("the app kept running")
    for chart in page.locator('[data-testid="stVegaLiteChart"]').all():
        chart.locator("canvas, svg").first.wait_for(timeout=20_000)


def test_every_page_renders_without_exception(server):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 4000})
            start = time.perf_counter()
            page.goto(server, wait_until="domcontentloaded")
            for i, title in enumerate(PAGES):
                if i:
                    start = time.perf_counter()
                    page.locator('[data-testid="stSidebarNav"] a', has_text=title).first.click()
                page.locator("h1", has_text=title).first.wait_for(timeout=60_000)
                _settle(page)
                # the settle check waits 1.5 s of quiet after the script ends: not part of the render
                print(f"\nbrowser: {title} rendered in {time.perf_counter() - start - 1.5:.1f} s (first visit)")
                assert page.locator('[data-testid="stException"]').count() == 0, f"exception on {title}"
                page.screenshot(path=str(SCREENSHOTS / f"{i + 1}_{title.lower()}.png"), full_page=True)
        finally:
            browser.close()
