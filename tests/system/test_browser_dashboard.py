"""The dashboard as a team uses it in a demo (issue 25), in Chromium against the real server:
a copied Experiment link opens the same form in another browser; the Results page's first
screen is the answer; the page follows a dark colour scheme and no chart draws dark text on
it (screenshots of both saved under results/); a click on a table row selects the variant
for the export panel and the URL; History draws a model's trend and flags a run made slower
on purpose. One server for the module."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

from helpers import (ROOT, choose, chromium, scaled_ms, store_answer_run,
                     store_history, wait_until)
from tools.browser import running_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTEFACTS = ROOT / "results"
SCREEN = {"width": 1500, "height": 1000}
MIN_CONTRAST = 3.0  # WCAG's floor for large text and graphics


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(browser, url, the answer run's id, the history runs' ids)."""
    store = tmp_path_factory.mktemp("dashboard-browser") / "results.db"
    history = store_history(store, runs=5, slow_run=3, model="resnet10")
    run_id = store_answer_run(store)
    # The stored runs are nobody's session's: their export panel is there for a link's
    # viewer where the operator shares exports (by default only an owner's page has one).
    with chromium() as browser, running_server(
            store, env={"COMPRESSION_BENCH_SHARED_EXPORTS": "1"}) as (_, url):
        yield browser, url, run_id, history


def _query(page) -> dict:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items() if k != "session"}


def _estimate(page) -> str:
    from playwright.sync_api import expect
    line = page.get_by_text(re.compile(r"^\d+ variants?"))
    expect(line).to_be_visible(timeout=scaled_ms(30_000))
    return line.inner_text()


def test_a_copied_link_opens_the_same_form_in_another_browser(site):
    from playwright.sync_api import expect
    browser, url, _, _ = site
    page = browser.new_context(viewport=SCREEN).new_page()
    page.goto(url)
    expect(page.get_by_role("button", name="Run benchmark")).to_be_visible(timeout=scaled_ms(60_000))
    choose(page, "Zoo model", "resnet10")
    choose(page, "Data set", "cifar10")
    # resnet10 has no smaller sibling: distillation opens off for it (its default, so not in
    # the link); a switch turned off by hand is.
    expect(page.get_by_role("switch", name=re.compile("^Knowledge distillation"))
           ).not_to_be_checked()
    page.locator('[data-testid="stCheckbox"]', has_text="Automatic mixed precision").click()
    epochs = page.get_by_role("spinbutton", name="Training epochs")
    epochs.fill("3")
    epochs.press("Enter")
    choose(page, "Mode", "dynamic")
    wanted = {"model": "resnet10", "dataset": "cifar10", "amp": "off", "epochs": "3",
              "int8.mode": "dynamic"}
    page.wait_for_function(
        "w => { const q = new URLSearchParams(location.search); "
        "return Object.entries(w).every(([k, v]) => q.get(k) === v); }", arg=wanted,
        timeout=scaled_ms(30_000))
    estimate = _estimate(page)
    # The link as copied from the address bar, less this browser's own session key.
    parts = urlparse(page.url)
    link = parts._replace(query=urlencode(_query(page))).geturl()

    other = browser.new_context(viewport=SCREEN).new_page()  # another person's browser
    other.goto(link)
    expect(other.get_by_role("button", name="Run benchmark")).to_be_visible(timeout=scaled_ms(60_000))
    # The same estimate there (read once it has drawn: a page draws itself again as the
    # worker's card appears).
    expect(other.get_by_text(estimate, exact=True)).to_be_visible(timeout=scaled_ms(30_000))
    assert _query(other) == _query(page) == wanted
    for label, shown in (("Zoo model", "resnet10 —"), ("Data set", "cifar10"),
                         ("Mode", "dynamic")):
        assert other.get_by_role("combobox", name=label, exact=True).input_value(
        ).startswith(shown), label
    expect(other.get_by_role("spinbutton", name="Training epochs")).to_have_value("3")
    for switch in ("Knowledge distillation", "Automatic mixed precision"):
        expect(other.get_by_role("switch", name=re.compile(f"^{switch}"))).not_to_be_checked()
    assert not other.get_by_text("Traceback").count()
    assert not other.locator('[data-testid="stAlert"]', has_text="ignored").count()
    # A knob moved there keeps the rest of what the link set.
    epochs = other.get_by_role("spinbutton", name="Training epochs")
    epochs.fill("4")
    epochs.press("Enter")
    other.wait_for_function("new URLSearchParams(location.search).get('epochs') === '4'",
                            timeout=scaled_ms(30_000))
    assert _query(other) == {**wanted, "epochs": "4"}
    assert other.get_by_role("combobox", name="Zoo model", exact=True).input_value(
    ).startswith("resnet10 —")


# The contrast of every chart's text against what is behind it (the chart's paper, or the
# page where the paper is transparent), by the computed fill of each <text> element.
CONTRAST_JS = """() => {
  const probe = document.createElement('div'); document.body.appendChild(probe);
  const rgba = c => { probe.style.color = ''; probe.style.color = c;
    const m = getComputedStyle(probe).color.match(/[\\d.]+/g).map(Number);
    return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1]; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92
                                       : ((v + 0.055) / 1.055) ** 2.4; };
                     return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
                            return (x + 0.05) / (y + 0.05); };
  const page = rgba(getComputedStyle(document.querySelector('.stApp')).backgroundColor);
  let worst = 99, texts = 0, sample = null;
  const charts = [...document.querySelectorAll('.js-plotly-plot')];
  for (const plot of charts) {
    const paper = rgba(plot._fullLayout.paper_bgcolor);
    const behind = paper[3] < 0.5 ? page : paper;
    for (const t of plot.querySelectorAll('text')) {
      if (!t.textContent.trim() || getComputedStyle(t).visibility === 'hidden') continue;
      const fill = rgba(getComputedStyle(t).fill);
      if (fill[3] < 0.1) continue;
      texts++;
      const r = ratio(fill, behind);
      if (r < worst) { worst = r; sample = [t.textContent, getComputedStyle(t).fill]; }
    }
  }
  probe.remove();
  return {page: lum(page), charts: charts.length, texts, worst, sample,
          fonts: charts.map(p => p._fullLayout.font.color),
          papers: charts.map(p => p._fullLayout.paper_bgcolor)};
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_first_screen_is_the_answer_and_charts_read_in_light_and_dark(site, scheme):
    from playwright.sync_api import expect
    browser, url, run_id, _ = site
    page = browser.new_context(viewport=SCREEN, color_scheme=scheme).new_page()
    page.goto(f"{url}/results?run={run_id}")
    expect(page.get_by_role("heading", name="Results")).to_be_visible(timeout=scaled_ms(60_000))
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 4",
                           timeout=scaled_ms(60_000))
    page.wait_for_timeout(1500)  # plotly's layout settles
    ARTEFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTEFACTS / f"dashboard-results-{scheme}.png"))
    cards = page.locator('[data-testid="stMetric"]')
    expect(cards).to_have_count(5)
    for card in cards.all():  # on the first screen, without scrolling
        box = card.bounding_box()
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= SCREEN["height"], box
    expect(cards.first).to_contain_text("prune-l1-0.2")
    seen = page.evaluate(CONTRAST_JS)
    assert seen["charts"] >= 4 and seen["texts"] > 40, seen
    assert seen["worst"] >= MIN_CONTRAST, seen
    if scheme == "dark":
        assert seen["page"] < 0.05, seen  # the page itself follows the dark scheme
    else:
        assert seen["page"] > 0.9, seen
    # The Pareto tab's charts too (drawn only when their tab opens).
    page.get_by_role("tab", name="Pareto").click()
    page.locator(".js-plotly-plot", has_text="Accuracy vs latency").wait_for(timeout=scaled_ms(30_000))
    page.wait_for_timeout(1000)
    page.screenshot(path=str(ARTEFACTS / f"dashboard-pareto-{scheme}.png"), full_page=True)
    seen = page.evaluate(CONTRAST_JS)
    assert seen["worst"] >= MIN_CONTRAST, seen
    page.wait_for_function("new URLSearchParams(location.search).get('tab') === 'Pareto'",
                           timeout=scaled_ms(30_000))


def test_clicking_a_table_row_selects_the_variant_for_export_and_the_url(site):
    from playwright.sync_api import expect
    browser, url, run_id, _ = site
    page = browser.new_context(viewport=SCREEN).new_page()
    page.goto(f"{url}/results?run={run_id}&tab=Table&variant=prune-l1-0.5")
    grid = page.locator('[data-testid="stDataFrame"]')
    expect(grid).to_be_visible(timeout=scaled_ms(60_000))
    menu = page.get_by_role("combobox", name="Variant to export", exact=True)
    expect(menu).to_have_value("prune-l1-0.5", timeout=scaled_ms(30_000))  # the link's, at first
    page.wait_for_timeout(1000)  # the grid's canvas is drawn
    box = grid.bounding_box()
    row, height = 3, 35  # baseline, prune-l1-0.2, prune-l1-0.5, prune-l1-0.8: the fourth
    page.mouse.click(box["x"] + 15, box["y"] + height * (row + 1) + height / 2)
    expect(menu).to_have_value("prune-l1-0.8", timeout=scaled_ms(30_000))
    page.wait_for_function("new URLSearchParams(location.search).get('variant') === "
                           "'prune-l1-0.8'", timeout=scaled_ms(30_000))
    expect(page.get_by_role("heading", name="Selected: prune-l1-0.8")).to_be_visible()
    assert _query(page)["tab"] == "Table"


def test_history_draws_the_trend_and_flags_the_run_made_slower(site):
    from playwright.sync_api import expect
    browser, url, _, history = site
    page = browser.new_context(viewport=SCREEN).new_page()
    page.goto(f"{url}/history")
    expect(page.get_by_role("heading", name="Trend")).to_be_visible(timeout=scaled_ms(60_000))
    choose(page, "Model and data set", "resnet10 on digits")
    chart = page.locator(".js-plotly-plot", has_text="Trend across runs")
    expect(chart).to_be_visible(timeout=scaled_ms(30_000))
    expect(page.get_by_text(re.compile(r"change\(s\) bigger than their noise"))
           ).to_be_visible()
    flags = chart.evaluate("""p => p._fullData.filter(t => t.name.startsWith('change beyond'))
                                  .map(t => t.customdata.map(c => c[1]))""")
    marked = [text for trace in flags for text in trace]
    assert any("slower" in text for text in marked), marked
    lines = chart.evaluate("p => p._fullData.map(t => [t.name, (t.x || []).length])")
    assert ["baseline", 5] in lines, lines
    assert not page.get_by_text("Traceback").count()
