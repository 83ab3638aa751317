"""Trade-off curves in a real browser: sweeping the prune ratio from the Experiment page draws
its curve chart (its Curves tab); the Results page stays legible at 7 and at 30 variants
(checked on the drawn page's geometry, and saved as screenshots under results/ for a person
to look at): labels apart, no text on the latency bars, accuracy as dots on a fitted axis."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from helpers import ROOT, open_tab, scaled_ms, wait_until
from tools.browser import CHROMIUM, CHROMIUM_ARGS, running_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTEFACTS = ROOT / "results"


def _require_chromium():
    if not os.path.exists(CHROMIUM):
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and REQUIRE_BROWSER=1")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")


def _store_sweep(store: Path, n: int) -> str:
    """A stored run of ``n`` variants with long chained names, swept on two axes."""
    from benchmarks.report import stats
    from benchmarks.report.results import VariantResult
    from benchmarks.store.database import ResultsStore
    s = ResultsStore(store)
    run_id = s.start_run(model="seed_cnn", dataset="digits", device="cpu", spec={},
                         environment={"torch": "-", "cpu": "test", "threads": 1})
    right = [True] * 350 + [False] * 10
    for i in range(n):
        base = i == 0
        method = ("l1", "channel", "global")[i % 3]
        ratio = round(0.05 + 0.9 * i / max(n - 1, 1), 3)
        name = "baseline" if base else (
            f"prune-{method}-{ratio:g}+distill-T4+int8-static+amp-bf16" if i % 4 == 0
            else f"prune-{method}-{ratio:g}")
        mine = list(right)
        for k in range(min(i, 40)):
            mine[k] = False
        s.add_variant(run_id, VariantResult.of(
            name=name, techniques=[] if base else ["prune"],
            axes={} if base else {"prune.method": method, "prune.ratio": ratio},
            accuracy=sum(mine) / 360, correct_bits=stats.pack_bits(mine), n_test=360,
            latency_samples_ms=[1.0 - 0.5 * ratio * (not base) + 0.001 * k for k in range(30)],
            batch_size=32, peak_memory_bytes=10**6, memory_method="live_tensor_bytes",
            size_bytes=400_000 * (1 - 0.5 * ratio * (not base)), size_gzip_bytes=300_000,
            params=95_000, nonzero_params=95_000 - i * 1000, flops=3_000_000,
            timing={"method": "interleaved", "rounds": 5}))
    s.finish_run(run_id, "complete")
    return run_id


# Bounding boxes of the accuracy chart's axis labels and of the Pareto chart's point labels:
# none may overlap another of its kind.
OVERLAPS_JS = """(root, sel) => {
  const boxes = [...root.querySelectorAll(sel)].map(e => e.getBoundingClientRect())
      .filter(b => b.width > 0 && b.height > 0);
  let n = 0;
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) n++;
  }
  return [boxes.length, n];
}"""


@pytest.mark.parametrize("n", [7, 30])
def test_the_results_page_stays_legible(tmp_path, n):
    from playwright.sync_api import expect, sync_playwright
    _require_chromium()
    store = tmp_path / "results.db"
    run_id = _store_sweep(store, n)
    with running_server(store) as (_, url), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1600, "height": 1100}).new_page()
            page.goto(f"{url}/results?run={run_id}")
            expect(page.get_by_role("heading", name="Results")).to_be_visible(
                timeout=scaled_ms(60_000))
            # The Overview tab: the four charts.
            page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 4",
                                   timeout=scaled_ms(60_000))
            page.wait_for_timeout(1500)  # plotly's layout settles
            ARTEFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTEFACTS / f"results-{n}-variants.png"), full_page=True)
            accuracy = page.locator(".js-plotly-plot").first
            ticks = accuracy.locator(".ytick text")
            assert ticks.count() == n  # every variant labelled on its own line
            labels = ticks.all_text_contents()
            assert max(len(t) for t in labels) <= 22  # short labels; full names on hover
            count, overlapping = accuracy.evaluate(OVERLAPS_JS, ".ytick text")
            assert overlapping == 0, f"{overlapping} of {count} axis labels overlap"
            # Accuracy is dots (no bars from a truncated axis); the latency bars carry no
            # text: noise is a hatch, explained in the legend.
            assert accuracy.locator(".bars path").count() == 0
            assert accuracy.locator(".points path").count() >= n
            # The accuracy axis is fitted to the data, not 0-100.
            first_tick = float(accuracy.locator(".xtick text").first.text_content())
            assert first_tick > 50
            latency = page.locator(".js-plotly-plot", has_text="Latency p50").first
            assert latency.locator(".bartext, .textpoint").count() == 0
            page.get_by_role("tab", name="Pareto").click()
            pareto = page.locator(".js-plotly-plot", has_text="Pareto front").first
            expect(pareto).to_be_visible(timeout=scaled_ms(30_000))
            page.wait_for_timeout(1000)
            # Its labels are annotations placed in pixels from their points (plotly's own
            # .textpoint labels are no longer used): none over another, the baseline named.
            count, overlapping = pareto.evaluate(OVERLAPS_JS, ".annotation-text-g")
            assert overlapping == 0, f"{overlapping} of {count} Pareto labels overlap"
            assert count >= 2 and pareto.locator(".annotation-text-g", has_text="baseline"
                                                 ).count() == 1, count
        finally:
            browser.close()


def test_sweeping_the_prune_ratio_from_the_page_draws_its_curve(tmp_path):
    from playwright.sync_api import expect, sync_playwright
    _require_chromium()
    store = tmp_path / "results.db"
    with running_server(store) as (_, url), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1600, "height": 1100}).new_page()
            page.goto(url)
            run = page.get_by_role("button", name="Run benchmark")
            expect(run).to_be_visible(timeout=scaled_ms(60_000))
            for name in ("Knowledge distillation", "INT8 quantization", "Automatic mixed",
                         "Combine"):  # a toggle is clicked on its label, as a person does
                page.locator('[data-testid="stCheckbox"]', has_text=name).click()
                expect(page.get_by_role("switch", name=re.compile(f"^{name}"))
                       ).not_to_be_checked()
            page.locator('[data-testid="stCheckbox"]', has_text="Sweep prune settings").click()
            expect(page.get_by_text("Ratio (sweep from, to)")).to_be_visible(
                timeout=scaled_ms(30_000))
            epochs = page.get_by_role("spinbutton", name="Training epochs")
            epochs.fill("1")
            epochs.press("Enter")
            # Five ratios from 0.3 to 0.9 and the baseline: the count updates before Run.
            expect(page.get_by_text(re.compile(r"^6 variants"))).to_be_visible(
                timeout=scaled_ms(30_000))
            time.sleep(1)
            run.click()
            expect(page.get_by_text("Complete.", exact=True)).to_be_visible(
                timeout=scaled_ms(420_000))
            curve = page.locator(".js-plotly-plot", has_text="Trade-off against prune.ratio")
            open_tab(page, "Curves", curve)
            # Drawn once: a copy left from the run's progress view goes as it settles.
            wait_until(lambda: curve.count() == 1, 60, "the Curves tab with its one curve")
            expect(curve).to_be_visible(timeout=scaled_ms(60_000))
            # Issue 32.10: the ratio a numeric axis (never lines between categories), the
            # default range where trade-offs happen (0.3 to 0.9, not from a no-op 0).
            axis, xs = curve.evaluate("g => [g._fullLayout.xaxis.type, g._fullData"
                                      ".filter(t => t.mode === 'lines+markers')"
                                      ".flatMap(t => Array.from(t.x))]")
            assert axis == "linear" and all(isinstance(x, (int, float)) for x in xs), (axis, xs)
            assert xs and min(xs) == pytest.approx(0.3) and max(xs) == pytest.approx(0.9), xs
            assert not page.get_by_text("Traceback").count()
        finally:
            browser.close()
