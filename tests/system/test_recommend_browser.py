"""The Experiment page's Recommend panel in a real browser: a small recommendation (INT8 only,
one trial, two epochs) run from the page shows its certified winner and certificate; *Run
this* queues the winner's recipe as a sweep, whose results open below."""

from __future__ import annotations

import re

import pytest
from helpers import chromium, wait_until

from tools.browser import running_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_recommendation_from_the_page_shows_its_winner_and_certificate(tmp_path):
    from playwright.sync_api import expect
    store = tmp_path / "results.db"
    with chromium() as browser, running_server(store) as (_, url):
        page = browser.new_context(viewport={"width": 1600, "height": 1100}).new_page()
        page.goto(url)
        expect(page.get_by_role("button", name="Run benchmark")).to_be_visible(
            timeout=60_000)
        # The Recommend panel, drawn on demand.
        page.locator('[data-testid="stCheckbox"]', has_text="Recommend: the fastest").click()
        button = page.get_by_role("button", name="Recommend", exact=True)
        expect(button).to_be_visible(timeout=60_000)
        for name in ("Pruning", "Knowledge distillation", "Automatic mixed"):
            page.locator('[data-testid="stCheckbox"]',
                         has_text=re.compile(f"^{name}")).click()
            expect(page.get_by_role("switch", name=re.compile(f"^{name}"))
                   ).not_to_be_checked()
        for label, value in (("Training epochs", "2"), ("Trials", "1")):
            box = page.get_by_role("spinbutton", name=label)
            box.fill(value)
            box.press("Enter")
        within = page.get_by_role("textbox", name="Within")
        within.fill("3pt")
        within.press("Enter")
        page.wait_for_timeout(1000)
        button.click()
        expect(page.get_by_text(re.compile(r"^certified: int8-"))).to_be_visible(
            timeout=420_000)
        expect(page.get_by_text("The certificate", exact=True)).to_be_visible()
        expect(page.locator(".js-plotly-plot", has_text="certified winner")
               ).to_be_visible(timeout=60_000)
        expect(page.get_by_text(re.compile(r"180 search / 180 certify"))).to_be_visible()
        assert not page.get_by_text("Traceback").count()
        page.get_by_role("button", name="Run this").click()
        # The winner's recipe runs as an ordinary sweep, and its report shows above.
        from benchmarks.store.database import ResultsStore

        def rerun():
            return next((r for r in ResultsStore(store).runs()
                         if not r.get("recommendation") and r["status"] == "complete"),
                        None)
        run = wait_until(rerun, 300, "the winner's sweep completing", every=0.5)
        assert [v["name"] for v in run["variants"]][0] == "baseline"
        assert run["variants"][1]["name"].startswith("int8-")
        # Its results: the answer first, then the tabs.
        expect(page.get_by_role("tab", name="Overview").first).to_be_visible(
            timeout=60_000)
