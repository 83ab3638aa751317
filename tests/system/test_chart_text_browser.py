"""Text is never markup in a chart, where the red team saw it: layer and variant names a model
file chose (``<a href="https://evil.example">Sign in again</a>``) drew a "Sign in again" link
in the Results page's charts and in the offline report. Here the real server and Debian's
Chromium draw a run whose names are that link, and the report of the same run: the charts'
DOM holds no link to evil.example, neither on the axes and legends nor in a hover label, and
the names read as the text they are. Every figure builder's output is checked without a
browser in tests/unit/report/test_chart_text.py."""

from __future__ import annotations

import pytest

from helpers import chromium, scaled_ms

pytestmark = [pytest.mark.browser, pytest.mark.slow]
EVIL = '<a href="https://evil.example">Sign in again</a>'
PAGE_MS = 60_000

# What the charts of a page hold: links (an SVG <a> keeps its target in xlink:href), the text
# they draw, and how many are drawn.
CHART_DOM = """() => {
  const charts = [...document.querySelectorAll('.js-plotly-plot')];
  const links = charts.flatMap(c => [...c.querySelectorAll('a')]).map(a =>
    a.getAttribute('href') || a.getAttribute('xlink:href') ||
    a.getAttributeNS('http://www.w3.org/1999/xlink', 'href') || '');
  return {charts: charts.length, links: links.filter(h => h.includes('evil.example')),
          text: charts.map(c => c.textContent).join(' ')};
}"""


def store_hostile_run(path) -> str:
    """A complete sweep: a baseline and two pruned variants named by a hostile model file,
    their layers too (the per-layer figures)."""
    from benchmarks.report import stats
    from benchmarks.report.results import VariantResult
    from benchmarks.store.database import ResultsStore
    s = ResultsStore(path)
    run_id = s.start_run(model="models/hostile.py:build", dataset="digits", device="cpu",
                         spec={}, environment={"cpu": "test", "threads": 1})
    for i, name in enumerate(["baseline", f"prune {EVIL}", f"{EVIL} 2"]):
        right = [True] * (1900 - 30 * i) + [False] * (100 + 30 * i)
        rounds = [1.0 - 0.3 * i + 0.01 * r for r in range(5)]
        s.add_variant(run_id, VariantResult.of(
            name=name, techniques=[] if i == 0 else ["prune"], accuracy=sum(right) / 2000,
            correct_bits=stats.pack_bits(right), n_test=2000, batch_size=32,
            latency_samples_ms=[x + 0.001 * k for x in rounds for k in range(8)],
            round_p50_ms=rounds, size_bytes=400_000 - 50_000 * i, peak_memory_bytes=10**6,
            memory_method="live_tensor_bytes", timing={"method": "interleaved", "rounds": 5},
            layer_sparsity=None if i == 0 else {EVIL: 0.2 * i, "fc": 0.1},
            axes={} if i == 0 else {"prune.ratio": 0.3 * i}).to_dict())
    s.finish_run(run_id, "complete")
    return run_id


def hover_each_bar(page) -> list[str]:
    """Move the mouse over a bar of every bar chart: what each hover label said."""
    said = []
    for bar in page.locator(".js-plotly-plot .bars path").all()[:12]:
        try:
            bar.hover(timeout=scaled_ms(2_000), force=True)
            page.wait_for_timeout(150)
            said.append(page.evaluate("""() => [...document.querySelectorAll('.hoverlayer')]
                .map(h => [h.textContent, h.querySelectorAll('a').length])"""))
        except Exception:  # a bar redrawn away under the mouse
            continue
    return said


def test_hostile_names_in_the_charts_and_the_report_are_text(tmp_path):
    from benchmarks.report.document import RunReport
    from benchmarks.store.database import ResultsStore
    from benchmarks.views.html import render
    from tools.browser import running_server
    store = tmp_path / "results.db"
    run_id = store_hostile_run(store)
    report = tmp_path / "report.html"
    report.write_text(render(RunReport.from_stored(ResultsStore(store).run(run_id))),
                      encoding="utf-8")
    with chromium() as browser, running_server(store) as (_, url):
        page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
        page.goto(f"{url}/results?run={run_id}")
        # The four of the Overview and the selected variant's layers.
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot .xtick').length"
                               " > 0 && document.querySelectorAll('.js-plotly-plot')"
                               ".length >= 5", timeout=scaled_ms(PAGE_MS))
        page.get_by_text("Per-layer sparsity of every pruned variant").click()
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 6",
                               timeout=scaled_ms(PAGE_MS))
        page.wait_for_timeout(1000)  # the last chart's ticks drawn
        on_page = page.evaluate(CHART_DOM)
        hovers = hover_each_bar(page)
        page.get_by_role("tab", name="Pareto", exact=True).click()
        page.wait_for_function("[...document.querySelectorAll('.js-plotly-plot')].some("
                               "c => c.textContent.includes('Pareto'))",
                               timeout=scaled_ms(PAGE_MS))
        pareto = page.evaluate(CHART_DOM)
        offline = browser.new_context(viewport={"width": 1400, "height": 1000},
                                      offline=True).new_page()
        offline.goto(report.as_uri())
        offline.wait_for_function("document.querySelectorAll('[data-chart]').length > 0 && "
                                  "[...document.querySelectorAll('[data-chart]')].every("
                                  "d => d.querySelector('.main-svg'))",
                                  timeout=scaled_ms(PAGE_MS))
        in_report = offline.evaluate(CHART_DOM)
    for where, dom in (("page", on_page), ("pareto", pareto), ("report", in_report)):
        assert dom["charts"] >= 1 and dom["links"] == [], (where, dom["links"])
        # The layer's whole name, as the text it is: on the per-layer axes (never shortened).
        assert EVIL in dom["text"] or "Sign in again" in dom["text"], (where, dom["text"][:400])
    assert on_page["charts"] >= 6 and EVIL in on_page["text"]
    assert in_report["charts"] >= 5 and EVIL in in_report["text"]
    shown = [label for said in hovers for label in said]
    assert any("Sign in again" in text for text, _ in shown), hovers
    assert all(links == 0 for _, links in shown), hovers
