"""Ten questions a capacity planner asks, each answered in the dashboard in a real browser (streamlit run on
127.0.0.1, Debian's Chromium through Playwright, as tests/test_app_browser.py) and checked on screen, each within a
minute: the five of issue 32 (a-e) and five more (f-j).

Expected answers come from the library called here (the page only draws library numbers, STYLE 14) and, where a
figure can be had by hand, from that figure: question a's does-not-fit holds by arithmetic alone (below).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from test_app_browser import CHROMIUM, CHROMIUM_ARGS, SETTLE_S, Clock, server  # noqa: F401  (server: a fixture)

from roofline.catalogue import load_hardware, load_model
from roofline.dashboard import appdata
from roofline.methods import parse_method
from roofline.planner import plan
from roofline.report.answer import answer_plan, headline

sync_api = pytest.importorskip("playwright.sync_api")
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "ci-artifacts" / "screenshots"
MINUTE_S = 60


def _nav(page, title: str):
    return lambda: page.locator('[data-testid="stSidebarNav"] a', has_text=title).first.click()


def _answer(page) -> str:
    """The answer banner's text as the user reads it."""
    return page.locator('[data-testid="stAlert"]').filter(has_text="Answer:").first.inner_text()


def _main(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def _sidebar(page) -> str:
    return page.locator('[data-testid="stSidebar"]').inner_text()


def _library(model: str, hardware: str, specs, **fields) -> dict:
    m, h = load_model(model), load_hardware(hardware)
    result = plan(m, h, appdata.workload_from(fields), [parse_method(s) for s in specs])
    answer_plan(result, m, h)
    return result


class Asker:
    """Opens a question's link in the page, times it until settled, checks it took under a minute."""

    def __init__(self, page, url: str) -> None:
        self.page, self.url, self.clock = page, url, Clock(page)

    def ask(self, label: str, query: str = "", then=None, path: str = "") -> None:
        start = time.perf_counter()
        self.clock.time(label, lambda: self.page.goto(f"{self.url}/{path}?{query}", wait_until="domcontentloaded"))
        if then is not None:
            self.clock.time(label + " (action)", then)
        elapsed = time.perf_counter() - start
        assert elapsed < MINUTE_S, f"{label}: {elapsed:.0f} s"
        self.page.screenshot(path=str(SHOTS / f"q_{label.split(':')[0]}.png"))


def test_ten_questions_answered_on_screen(server):  # noqa: F811
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            page.set_default_timeout(SETTLE_S * 1000)
            q = Asker(page, server)

            # a: does Llama-3.1-70B fit on 2 x H100 at 64K, batch 8, with KIVI-2, and how fast? By hand it cannot:
            # bf16 weights 70.6e9 x 2 B / 2 GPUs = 65.7 GiB of the 79.18 x 0.9 = 71.3 GiB usable leave < 5.6 GiB,
            # and 8 sequences of 65,536 tokens at no less than KIVI's 2 bits over 80 layers x 8 KV heads x 128 x
            # (K, V) need 8 x 65,536 x 163,840 x 2 / 8 / 2 GPUs = 10.0 GiB per GPU.
            q.ask("a: 70B on 2 x H100", "model=Llama-3.1-70B&tp=2&batch=8&context=65536&methods=kivi-2")
            expected = _library("Llama-3.1-70B", "H100-SXM", ["kivi-2"], tp=2, batch=8, context_tokens=65536)
            assert expected["answer"]["best"] is None
            assert "none of the 1 methods fits" in _answer(page)
            why = expected["results"][0]["verdict"]["why"]
            assert f"kivi-2 ({why})" in _main(page)
            assert "What would" in _main(page)  # the fit solver says what would fit

            # b: which KV method gives the most tokens/s at 128K on one H200 for Qwen3-8B? Compare all methods:
            # none, past the model's 40,960 positions (its config.json); at 40,960 the best is named.
            q.ask("b: Qwen3-8B 128K on H200", "model=Qwen3-8B&hardware=H200&context=131072&batch=1",
                  lambda: page.get_by_role("button", name="Compare all methods").click())
            assert "none of the" in _answer(page) and "40,960 positions" in _main(page)
            q.ask("b2: Qwen3-8B 40,960 on H200", "model=Qwen3-8B&hardware=H200&context=40960&batch=1",
                  lambda: page.get_by_role("button", name="Compare all methods").click())
            specs = appdata.applicable_presets(load_model("Qwen3-8B"))
            best = _library("Qwen3-8B", "H200", specs, context_tokens=40960, batch=1)
            assert headline(best).removeprefix("answer: ") in _answer(page)

            # c: requests/s of one H100 serving Llama-3.1-8B at TTFT p99 <= 2 s and TPOT p99 <= 50 ms, bf16 vs fp8
            q.ask("c: serving bf16 vs fp8", "methods=bf16,fp8&srv_requests=50&srv_prompt=1024&srv_output=128",
                  _nav(page, "Serving"))
            q.clock.time("c: simulate", lambda: page.get_by_role("button", name="Simulate").click())
            rows = page.locator("table").last.locator("tbody tr")
            cells = {rows.nth(i).locator("td").nth(0).inner_text(): rows.nth(i).locator("td").nth(1).inner_text()
                     for i in range(rows.count())}
            for method in ("bf16", "fp8"):
                rate = cells[method]  # "12.34 req/s" (two decimals, not whole req/s only), or "none" with why
                assert rate == "none" or re.fullmatch(r"[\d,]+\.\d\d req/s", rate), rate

            # d: my own config.json and hardware spec (uploads), and the link says they cannot travel
            q.ask("d: my own specs")
            page.get_by_text("Upload a hardware or model spec").click()
            inputs = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
            hw = SHOTS.parent / "my-gpu.yaml"
            hw.write_text((ROOT / "hardware" / "H200.yaml").read_text().replace("name: H200", "name: my-gpu"))
            q.clock.time("d: upload hardware", lambda: inputs.nth(0).set_input_files(str(hw)))
            # one upload after the other, as a user does: the hardware's rerun settles before the model is dropped in
            # (two uploads within one rerun raced: the second's rerun could start before the first was stored)
            sync_api.expect(page.locator('[data-testid="stMain"]')).to_contain_text(
                "on 1 x my-gpu", timeout=SETTLE_S * 1000)
            q.clock.time("d: upload config.json", lambda: inputs.nth(1).set_input_files(
                str(ROOT / "tests/data/hf/Llama-3.2-1B/config.json")))
            # a config.json without _name_or_path; retried to the settle limit: under load the upload's own rerun
            # can follow the one the clock saw settle
            sync_api.expect(page.locator('[data-testid="stMain"]')).to_contain_text(
                "uploaded-model on 1 x my-gpu", timeout=SETTLE_S * 1000)
            assert "cannot travel in a link" in _sidebar(page)

            # e: how far to trust a number: measured H100 (the real decoders' band) vs a datasheet-only A40
            q.ask("e: trust on H100")
            # the plan renders after the page loads (a cold server compiles first): wait for it to the settle limit
            sync_api.expect(page.locator('[data-testid="stMain"]')).to_contain_text(
                "trust: ceilings measured on this device", timeout=SETTLE_S * 1000)
            assert "trust: ceilings measured on this device" in _main(page) and "decode ±" in _main(page)
            # beside the numbers, per quantity (roofline.dashboard.trust.page_caption)
            assert "Trust (H100-SXM, measured ceilings): TPOT and tok/s (decode step) ±" in _main(page)
            q.ask("e2: trust on A40", "hardware=A40")
            assert "datasheet only" in _main(page) and "slower" in _main(page)
            assert "Trust (A40, datasheet ceilings): TPOT and tok/s (decode step) not validated" in _main(page)

            # f: is the answer above the fold at 1366 x 768?
            q.ask("f: above the fold")
            box = page.locator('[data-testid="stAlert"]').filter(has_text="Answer:").first.bounding_box()
            assert box["y"] + box["height"] <= 768

            # g: the best method for the longest context instead of the most tokens/s
            q.ask("g: best by context", "", lambda: page.get_by_text("longest context", exact=True).click())
            assert "best by longest context" in _answer(page)

            # h: do the rows that do not fit stay out of the ranking? (the default: bf16 holds 13 of 16 sequences)
            q.ask("h: not ranked", "methods=bf16,kivi-2")
            assert "Do not fit as set (not ranked)" in _main(page) and "at most 13 of 16" in _main(page)

            # i: a link whose tp the model cannot take is said, not silently changed
            q.ask("i: tp 3", "tp=3")
            assert "tp: 3 does not divide" in _sidebar(page)

            # j: no Deploy button, and Claims in human units
            q.ask("j: claims", "", _nav(page, "Claims"))
            assert page.get_by_role("button", name="Deploy").count() == 0
            assert "GiB (" in _main(page) and "(bytes)" not in _main(page)
            print("\n" + q.clock.report())
        finally:
            browser.close()
