"""Runtimes swept from the Experiment page in a real browser: ONNX Runtime picked beside eager
and batch sizes 1 and 8 under "Where it will run", the sweep runs through the job queue, and
the page draws the variant x runtime grid; the stored run holds the cells."""

from __future__ import annotations

import pytest
from helpers import chromium, open_tab, scaled_ms

from tools.browser import running_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SWEEP_TIMEOUT_MS = 300_000


def _pick(page, label: str, options: list[str]) -> None:
    """Pick ``options`` in the multiselect named ``label``."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    box = page.get_by_role("combobox", name=label)
    for option in options:
        # A rerun (the URL follows every widget) can close the menu as it opens: open again.
        for attempt in range(3):
            box.click()
            try:
                page.get_by_role("option", name=option, exact=True).click(
                    timeout=scaled_ms(10_000))
                break
            except PlaywrightTimeout:
                if attempt == 2:
                    raise
                page.keyboard.press("Escape")
                page.wait_for_timeout(1000)
    page.keyboard.press("Escape")


def test_runtimes_swept_from_the_page_draw_the_grid(tmp_path):
    pytest.importorskip("onnxruntime")
    from playwright.sync_api import expect
    store = tmp_path / "results.db"
    with chromium() as browser, running_server(store) as (_, url):
        page = browser.new_context(viewport={"width": 1600, "height": 1100}).new_page()
        page.goto(url)
        expect(page.get_by_role("button", name="Run benchmark")).to_be_visible(
            timeout=scaled_ms(60_000))
        # INT8 alone, one epoch: the smallest sweep with a quantized variant (Combine follows
        # the techniques left: off and disabled with one).
        for label in ("Pruning: l1", "Knowledge distillation", "Automatic mixed precision"):
            page.get_by_text(label).first.click()
        epochs = page.get_by_role("spinbutton", name="Training epochs")
        epochs.fill("1")
        epochs.press("Enter")
        page.get_by_text("Where it will run: runtimes, batch sizes, threads").click()
        page.wait_for_timeout(1000)  # the reruns of the settings above settle
        _pick(page, "Runtimes", ["ort"])
        _pick(page, "Eval batch sizes", ["1", "8"])
        page.wait_for_timeout(1500)  # the rerun that takes the new values
        page.get_by_role("button", name="Run benchmark").click()
        expect(page.get_by_text("Complete.", exact=True)).to_be_visible(
            timeout=scaled_ms(SWEEP_TIMEOUT_MS))
        # The run's Runtimes tab (only the open tab is drawn).
        expect(page.get_by_role("tab", name="Runtimes")).to_be_visible(
            timeout=scaled_ms(60_000))
        open_tab(page, "Runtimes", page.get_by_role("heading", name="Where it will run"))
        # A grid per batch size: batch 8's among them.
        expect(page.locator(".js-plotly-plot", has_text="batch 8").first).to_be_visible(
            timeout=scaled_ms(30_000))
        # The grid drawn: a heatmap per batch size.
        page.wait_for_function(
            "[...document.querySelectorAll('.js-plotly-plot .heatmaplayer')].length >= 2",
            timeout=scaled_ms(60_000))
        assert not page.get_by_text("Traceback").count()
    from benchmarks.store.database import ResultsStore
    run = ResultsStore(store).runs()[0]
    names = [v["name"] for v in run["variants"]]
    assert names[:2] == ["baseline", "int8-static"]
    assert {"baseline@ort", "int8-static@ort b8", "baseline b8"} <= set(names)
    cell = next(v for v in run["variants"] if v["name"] == "int8-static@ort")
    assert cell["runtime"]["name"] == "ort" and cell["runtime"]["ops"]["int8_real"]
