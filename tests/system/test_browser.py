"""End to end in a real browser: Debian's chromium (driven by Playwright, no browser
download) against the real Streamlit server, two sessions at once through one job queue."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from helpers import scaled_ms
from tools.browser import CHROMIUM, CHROMIUM_ARGS, running_server

SWEEP_TIMEOUT_MS = 420_000  # two default sweeps one after the other on a loaded 2-core machine
SCREENSHOT = Path("/tmp/compression-bench-results.png")
# `make perf` holds the dashboard to its targets against a bare Streamlit app of the same pages
# (ratios, docs/performance-notes.md); on the Xeon they were set on, the first page drawn within
# 3 s of `streamlit run` and a page switch within 1 s. Here, inside the suite on a loaded
# machine, five times those: what a regression of that order (a file watcher polling every
# module, a page importing torch) would break, not the noise.
HEALTHY_S = 15.0
FIRST_DRAW_S = 15.0
SWITCH_S = 5.0

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _require_chromium():
    if not os.path.exists(CHROMIUM):
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and REQUIRE_BROWSER=1")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")


@pytest.fixture
def server(tmp_path):
    _require_chromium()
    store = tmp_path / "results.db"
    started = time.monotonic()
    with running_server(store) as (_, url):
        yield url, time.monotonic() - started, store


def test_two_sessions_run_the_default_sweep(server):
    from playwright.sync_api import expect, sync_playwright
    url, healthy_s, _ = server
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            pages = [browser.new_context(viewport={"width": 1600, "height": 1100}).new_page()
                     for _ in range(2)]
            first_draw_s = []
            for page in pages:
                t0 = time.monotonic()
                page.goto(url)
                expect(page.get_by_role("button", name="Run benchmark")).to_be_visible(
                    timeout=scaled_ms(60_000))
                first_draw_s.append(time.monotonic() - t0)
            for page in pages:  # the defaults: the article's full comparison
                page.get_by_role("button", name="Run benchmark").click()
            for page in pages:
                expect(page.get_by_text("Complete.", exact=True)).to_be_visible(
                    timeout=scaled_ms(SWEEP_TIMEOUT_MS))
                page.wait_for_function(
                    "document.querySelectorAll('.js-plotly-plot').length >= 4",
                    timeout=scaled_ms(60_000))
                assert not page.get_by_text("Traceback").count()
            # The Results page shows the session's latest run.
            page = pages[0]
            t0 = time.monotonic()
            page.get_by_role("link", name="Results").click()
            expect(page.get_by_role("heading", name="Results")).to_be_visible(
                timeout=scaled_ms(30_000))
            # The answer first, then the Overview tab's four charts.
            expect(page.locator('[data-testid="stMetric"]').first).to_be_visible(
                timeout=scaled_ms(30_000))
            page.wait_for_function(
                "document.querySelectorAll('.js-plotly-plot').length >= 4",
                timeout=scaled_ms(30_000))
            switch_s = time.monotonic() - t0
            page.wait_for_timeout(1000)  # let plotly finish laying out before the picture
            page.screenshot(path=str(SCREENSHOT), full_page=True)
        finally:
            browser.close()
    timings = (f"server healthy {healthy_s:.1f} s; first page drawn "
               f"{', '.join(f'{t:.1f}' for t in first_draw_s)} s after goto; "
               f"switch to Results {switch_s:.2f} s")
    assert healthy_s <= HEALTHY_S, timings
    assert len(first_draw_s) == 2 and max(first_draw_s) <= FIRST_DRAW_S, timings
    assert switch_s <= SWITCH_S, timings


def test_pick_a_torchvision_model_by_typing_its_name(server):
    """A model from torchvision's catalogue, found by typing part of its name, runs a small
    sweep and its results draw."""
    from playwright.sync_api import expect, sync_playwright
    url, _, store = server
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1600, "height": 1100}).new_page()
            page.goto(url)
            expect(page.get_by_role("button", name="Run benchmark")).to_be_visible(
                timeout=scaled_ms(60_000))
            page.get_by_role("combobox", name="Model from").click()
            page.get_by_role("option", name="torchvision").click()
            picker = page.get_by_role("combobox", name="torchvision model")
            expect(picker).to_be_visible(timeout=scaled_ms(30_000))
            picker.click()
            picker.type("mobilenet_v3_sm")
            page.keyboard.press("Enter")
            # Its weights menu appears once a model is picked.
            expect(page.get_by_role("combobox", name="Weights")).to_be_visible(
                timeout=scaled_ms(30_000))
            # The tiniest budget: pruning alone, one epoch. Distillation opens off (the
            # model has no smaller sibling), Combine follows the techniques left: off.
            expect(page.get_by_role("switch", name=re.compile("^Knowledge distillation"))
                   ).not_to_be_checked()
            for label in ("INT8 quantization", "Automatic mixed precision"):
                page.get_by_text(label).first.click()
            epochs = page.get_by_role("spinbutton", name="Training epochs")
            epochs.fill("1")
            epochs.press("Enter")
            page.wait_for_timeout(1500)  # the rerun that takes the new values
            page.get_by_role("button", name="Run benchmark").click()
            expect(page.get_by_text("Complete.", exact=True)).to_be_visible(
                timeout=scaled_ms(SWEEP_TIMEOUT_MS))
            expect(page.get_by_text("prune-l1-0.5").first).to_be_visible(timeout=scaled_ms(30_000))
            page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 4",
                                   timeout=scaled_ms(60_000))
            assert not page.get_by_text("Traceback").count()
        finally:
            browser.close()
    from benchmarks.store.database import ResultsStore
    run = ResultsStore(store).runs()[0]
    assert run["model"] == "torchvision:mobilenet_v3_small"
    assert [v["name"] for v in run["variants"]] == ["baseline", "prune-l1-0.5"]
