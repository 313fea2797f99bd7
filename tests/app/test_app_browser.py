"""The dashboard in a real browser: `streamlit run` on 127.0.0.1, Debian's Chromium through Playwright, every page
and every new view clicked, no exception block anywhere, a sweep's download equal to the library's sweep, a shared
link's plan download equal to the library's plan, a screenshot of each view under ci-artifacts/screenshots/, and
each interaction's time: server-side (the app's own script-run time, $ROOFLINE_APP_TIMINGS) and in the browser
(action until the page has no stale element, no running script and no element still waiting for its lazily loaded
code, which Streamlit draws as a grey skeleton), written to ci-artifacts/browser_timings.txt.

Skipped only when /usr/bin/chromium is missing outside CI; in CI (env CI set) a missing browser fails the test.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from roofline.dashboard import appdata

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "ci-artifacts" / "screenshots"
TIMINGS_FILE = ROOT / "ci-artifacts" / "app_runs.jsonl"
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


def _prewarm() -> None:
    """Compile what this test visits before the server starts (same content-keyed cache folder: conftest's), as a
    deployed dashboard's warm-up would have: the test times interactions, not first compiles on a cold cache. The
    default scenario's pages (dashboard.warm.warm_pages: plan, Pareto table, Roofline page, trust data) are the
    warm-up's first entries; Llama-3.1-70B on tp 2 and the shared link's fp8 weights are left to the app's own
    background warm-up (on a loaded box it has not reached them when the test asks). ROOFLINE_TEST_WARM_ALL=1
    first writes everything the finished warm-up holds for the models and GPUs this test visits (dashboard.warm.warm
    restricted to them): the case where the background work has finished."""
    from roofline.dashboard.warm import warm, warm_pages, warm_scenario

    if os.environ.get("ROOFLINE_TEST_WARM_ALL") == "1":
        warm(models=("Llama-3.1-8B", "Llama-3.1-70B", "Qwen2.5-7B"), hardware=("H100-SXM", "H200"))
    warm_pages()
    for model, hardware, fields in (("Llama-3.1-8B", "H100-SXM", {}), ("Llama-3.1-8B", "H200", {}),
                                    ("Qwen2.5-7B", "H200", {}), ("Qwen2.5-7B", "H200", {"tp": 2})):
        warm_scenario(model, hardware, **fields)


@pytest.fixture(scope="module")
def server():
    _prewarm()
    port = _free_port()
    cmd = appdata.streamlit_command(port=port, python=sys.executable)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    log = (ROOT / "ci-artifacts")
    log.mkdir(parents=True, exist_ok=True)
    with open(log / "streamlit.log", "wb") as out:
        TIMINGS_FILE.unlink(missing_ok=True)
        env = {**os.environ, "ROOFLINE_APP_TIMINGS": str(TIMINGS_FILE)}
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
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


def _runs() -> list[dict]:
    if not TIMINGS_FILE.exists():
        return []
    return [json.loads(line) for line in TIMINGS_FILE.read_text().splitlines() if line.strip()]


class Clock:
    """Times interactions: server-side (the script runs the action caused) and in the browser (until settled)."""

    def __init__(self, page) -> None:
        self.page, self.rows = page, []

    def settle(self, before: int, timeout_s: float = SETTLE_S) -> float:
        start = time.perf_counter()
        deadline = start + timeout_s
        while time.perf_counter() < deadline:
            if len(_runs()) > before:
                # stSkeleton: an element whose lazily loaded code (table, chart, widget bundle) has not arrived
                busy = self.page.locator('[data-testid="stStatusWidget"], [data-stale="true"], '
                                         '[data-testid="stSpinner"], [data-testid="stSkeleton"]').count()
                if not busy:
                    return time.perf_counter() - start
            self.page.wait_for_timeout(25)
        raise TimeoutError("the app kept running")

    def time(self, label: str, action) -> None:
        before = len(_runs())
        start = time.perf_counter()
        action()
        self.settle(before)
        # the charts (static SVG images, roofline_app.charts): decoded and laid out
        self.page.wait_for_function("[...document.querySelectorAll('[data-testid=\"stImage\"] img')]"
                                    ".every(img => img.complete && img.naturalWidth > 0)", timeout=20_000)
        browser = time.perf_counter() - start
        server = max(r["seconds"] for r in _runs()[before:])
        self.rows.append((label, server, browser))
        assert self.page.locator('[data-testid="stException"]').count() == 0, f"exception after: {label}"

    def report(self) -> str:
        load = os.getloadavg()
        lines = [f"{label:<52} {server * 1e3:8.0f} ms {browser * 1e3:8.0f} ms" for label, server, browser in self.rows]
        return (f"interaction times (server-side script run, browser until settled); load average "
                f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs\n" + "\n".join(lines) + "\n")


def _shot(page, name: str) -> None:
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def _nav(page, title: str):
    return lambda: page.locator('[data-testid="stSidebarNav"] a', has_text=title).first.click()


def _select(page, label: str, option: str):
    def act():
        box = page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first
        box.click()
        # the list is virtualized (35 models): type to filter so the option is rendered, then pick it
        page.keyboard.type(option)
        page.get_by_role("option", name=option, exact=True).click()
    return act


def _apply(page, **numbers):
    def act():
        for label, value in numbers.items():
            field = page.get_by_label(label, exact=True)
            field.fill(str(value))
            field.press("Tab")
        page.get_by_role("button", name="Apply").click()
    return act


def _download(page, button: str) -> str:
    with page.expect_download() as info:
        page.get_by_role("button", name=button).first.click()
    return Path(info.value.path()).read_text()


def test_every_view_renders_fast_and_matches_the_library(server):
    from roofline.catalogue import load_hardware, load_model
    from roofline.dashboard import explore
    from roofline.methods import parse_method
    from roofline.planner import plan

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            used = browser.new_context(viewport={"width": 1400, "height": 2400}, accept_downloads=True)
            page = used.new_page()
            page.set_default_timeout(SETTLE_S * 1000)  # a loaded 2-core CI box: clicks wait as long as settling
            clock = Clock(page)
            clock.time("cold first load (Plan)", lambda: page.goto(server, wait_until="domcontentloaded"))
            _shot(page, "01_plan")
            clock.time("batch 8, context 65,536 + Apply", _apply(page, **{"Batch (sequences)": 8,
                                                                          "Context (tokens)": 65536}))
            clock.time("back to batch 16, context 32,768 + Apply", _apply(page, **{"Batch (sequences)": 16,
                                                                                   "Context (tokens)": 32768}))
            clock.time("new hardware: H200", _select(page, "Hardware", "H200"))
            clock.time("new model: Qwen2.5-7B", _select(page, "Model", "Qwen2.5-7B"))
            clock.time("tp 2 + Apply", lambda: (_select(page, "Tensor parallel", "2")(),
                                               page.get_by_role("button", name="Apply").click()))
            clock.time("new model: Llama-3.1-70B on tp 2", _select(page, "Model", "Llama-3.1-70B"))
            clock.time("tp 1 + Apply (fit solver)", lambda: (_select(page, "Tensor parallel", "1")(),
                                                            page.get_by_role("button", name="Apply").click()))
            _shot(page, "02_fit_solver_70b_on_h200")
            clock.time("model back to Llama-3.1-8B", _select(page, "Model", "Llama-3.1-8B"))
            clock.time("hardware back to H100-SXM", _select(page, "Hardware", "H100-SXM"))
            clock.time("page: Sweeps", _nav(page, "Sweeps"))
            _shot(page, "03_sweeps_context")
            rows = explore.sweep(load_model("Llama-3.1-8B"), load_hardware("H100-SXM"), appdata.workload_from({}),
                                 appdata.DEFAULT_METHODS, "context")
            assert _download(page, "Download CSV") == appdata.rows_csv(rows)
            clock.time("sweep against batch", lambda: page.get_by_text("batch", exact=True).first.click())
            _shot(page, "04_sweeps_batch")
            clock.time("page: Side by side", _nav(page, "Side by side"))
            clock.time("pin A", lambda: page.get_by_role("button", name="Pin the current scenario as A").click())
            clock.time("B: hardware H200", _select(page, "Hardware", "H200"))
            _shot(page, "05_side_by_side")
            clock.time("page: Pareto", _nav(page, "Pareto"))
            _shot(page, "06_pareto")
            clock.time("page: Roofline", _nav(page, "Roofline"))
            clock.time("roofline slider one step", lambda: (page.get_by_role("slider").first.focus(),
                                                           page.keyboard.press("ArrowLeft")))
            _shot(page, "07_roofline")
            clock.time("page: Validation (first visit)", _nav(page, "Validation"))
            _shot(page, "08_validation")
            clock.time("page: Claims (first visit)", _nav(page, "Claims"))
            _shot(page, "09_claims")
            clock.time("page: Plan", _nav(page, "Plan"))
            # the capacity charts have their own tab (the first paint draws no chart): drawn when opened
            clock.time("Plan tab: Capacity", lambda: page.get_by_role("tab", name="Capacity").click())
            assert page.locator('[data-testid="stImage"] img').count() == 2  # longest context, largest batch
            _shot(page, "01b_plan_capacity")

            # a shared link twice: in a fresh browser profile (a first-time visitor: nothing cached, as the cold
            # load), then in a new tab of the browser that has used the dashboard (its JS cached)
            shared = f"{server}/?hardware=H200&batch=4&methods=kivi-2%2Cbf16&weight_dtype=fp8"
            link = browser.new_page(viewport={"width": 1366, "height": 768}, accept_downloads=True)
            link.set_default_timeout(SETTLE_S * 1000)
            clock.page = link
            clock.time("open a shared link (H200, batch 4, 2 methods, fp8 weights)", lambda: link.goto(
                shared, wait_until="domcontentloaded"))
            link.screenshot(path=str(SCREENSHOTS / "10_shared_link_1366x768.png"))
            expected = plan(load_model("Llama-3.1-8B"), load_hardware("H200"),
                            appdata.workload_from({"batch": 4, "weight_dtype": "fp8"}),
                            [parse_method("kivi-2"), parse_method("bf16")])
            from roofline.report.answer import answer_plan

            answer_plan(expected, load_model("Llama-3.1-8B"), load_hardware("H200"))  # the page's verdicts and trust
            again = used.new_page()
            again.set_viewport_size({"width": 1366, "height": 768})
            again.set_default_timeout(SETTLE_S * 1000)
            clock.page = again
            clock.time("shared link in a new tab of the same browser", lambda: again.goto(
                shared, wait_until="domcontentloaded"))
            # the settled page holds the link's batch (retried up to the settle limit: a tab of a used browser can
            # report settled before the widget's value from the query string is drawn; a wrong value still fails)
            sync_api.expect(again.get_by_label("Batch (sequences)", exact=True)).to_have_value(
                "4", timeout=SETTLE_S * 1000)
            assert json.loads(_download(link, "Download JSON")) == json.loads(appdata.plan_json(expected))
            text = clock.report()
            print("\n" + text)
            (ROOT / "ci-artifacts" / "browser_timings.txt").write_text(text)
        finally:
            browser.close()


def test_uploads_in_the_browser_a_refused_file_then_a_real_config(server, tmp_path):
    """The model uploader in Chromium (session 28, validate/notes/2026-11-30-new-user-28.md): a config.json whose
    num_key_value_heads is -8 gives its one line and leaves Llama-3.1-8B selected; Trinity-Nano-Preview's config.json
    dropped next (the refused file still in the uploader's list) becomes the model, and the answer is its plan: the
    page's answer equals the library's headline for it. Before, the second file was refused as 'upload one spec or
    config.json ...' (the browser sends both files)."""
    from roofline.catalogue import load_hardware
    from roofline.methods import parse_method
    from roofline.planner import plan
    from roofline.report.answer import answer_plan, headline

    data = ROOT / "tests" / "data" / "hf" / "Trinity-Nano-Preview" / "config.json"
    bad = tmp_path / "bad" / "config.json"
    bad.parent.mkdir()
    bad.write_text(data.read_text().replace('"num_key_value_heads": 2', '"num_key_value_heads": -8'))
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            page.set_default_timeout(SETTLE_S * 1000)
            clock = Clock(page)
            clock.time("load (Plan)", lambda: page.goto(server, wait_until="domcontentloaded"))
            clock.time("open the upload box", lambda: page.get_by_text("Upload a hardware or model spec").click())
            model_input = page.locator('input[type="file"]').nth(1)
            clock.time("upload a config.json with num_key_value_heads -8",
                       lambda: model_input.set_input_files(str(bad)))
            alerts = page.locator('[data-testid="stSidebar"] [data-testid="stAlert"]').all_inner_texts()
            assert any("num_key_value_heads: expected a positive integer, got -8" in a for a in alerts), alerts
            scenario = page.get_by_text(" on 1 x H100-SXM (tp 1, pp 1").first  # the Plan page's scenario caption
            assert scenario.inner_text().startswith("Llama-3.1-8B on ")
            clock.time("upload Trinity-Nano-Preview's config.json",
                       lambda: page.locator('input[type="file"]').nth(1).set_input_files(str(data)))
            _shot(page, "11_upload_after_a_refused_file")
            assert scenario.inner_text().startswith("uploaded-model on ")  # an upload without _name_or_path
            model = appdata.spec_from_text("model", data.read_text(), "config.json")
            expected = plan(model, load_hardware("H100-SXM"), appdata.workload_from({}),
                            [parse_method(s) for s in appdata.DEFAULT_METHODS])
            answer_plan(expected, model, load_hardware("H100-SXM"))
            shown = page.locator('[data-testid="stAlert"]', has_text="Answer:").first.inner_text()
            assert shown.replace("Answer:", "answer:", 1).strip() == headline(expected)
        finally:
            browser.close()
