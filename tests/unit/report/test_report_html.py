"""The HTML report: built from the run report object, every chart of the Results page and the
table present, nothing loaded over the network, under 5 MB for the default sweep, drawn by a
real Chromium with the network off; `report` refuses a missing run in one line."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from benchmarks.report.document import RunReport

FAST = ["--min-time", "0.05", "--epochs", "2", "--quiet"]
# The default sweep (`make bench`), and one with an axis, so trade-off curves are drawn too.
DEFAULT_SWEEP = ["--prune", "0.5", "--distill", "--temperature", "4", "--amp", "--int8",
                 "static", "--combine"]
AXIS_SWEEP = ["--prune", "0.3,0.6", "--int8", "static"]
MAX_BYTES = 5 * 10**6


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One store holding the default sweep and an axis sweep, run through the CLI."""
    from helpers import run_cli
    path = tmp_path_factory.mktemp("report") / "s.db"
    for args in (DEFAULT_SWEEP, AXIS_SWEEP):
        p = run_cli("run", *args, *FAST, "--store", str(path))
        assert p.returncode == 0, p.stderr
    return path


def runs(store) -> tuple[dict, dict]:
    """(default sweep, axis sweep) as the store returns them."""
    from benchmarks.store.database import ResultsStore
    newest_first = ResultsStore(store).runs(kind="sweep")
    return newest_first[1], newest_first[0]


class Scan(HTMLParser):
    """What an HTML file would load: every src/href, <link>, <iframe>, CSS url() and
    @import; and the ids and data-chart names of its chart divs."""

    def __init__(self):
        super().__init__()
        self.loads, self.charts, self.scripts, self.in_style = [], [], 0, False
        self.tables = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("src", "href", "data", "poster", "srcset"):
            if attrs.get(key):
                self.loads.append((tag, attrs[key]))
        if tag in ("link", "iframe", "object", "embed", "img"):
            self.loads.append((tag, str(attrs)))
        if tag == "script":
            self.scripts += 1
        if tag == "style":
            self.in_style = True
        if "data-chart" in attrs:
            self.charts.append(attrs["data-chart"])
        if tag == "table" and attrs.get("id"):
            self.tables.add(attrs["id"])

    def handle_endtag(self, tag):
        if tag == "style":
            self.in_style = False

    def handle_data(self, data):
        if self.in_style and ("url(" in data or "@import" in data):
            self.loads.append(("style", data))


def test_the_report_holds_every_chart_and_the_table_and_loads_nothing(store):
    from benchmarks.report.figures import run_figures
    from benchmarks.report.html import render
    _, axis_run = runs(store)
    report = RunReport.from_stored(axis_run)
    html = render(report)
    scan = Scan()
    scan.feed(html)
    expected = list(run_figures(report))
    # Every chart of the Results page, curves and roofline included, each drawn once.
    assert scan.charts == expected
    assert {"accuracy", "latency", "memory", "size", "pareto", "roofline",
            "sparsity"} <= set(expected)
    assert "curve:prune.ratio" in expected
    assert scan.loads == []  # no script, stylesheet, image or frame from anywhere
    assert html.count("Plotly.newPlot") == len(expected)
    assert html.count("<script>") == scan.scripts  # plotly inline, once
    assert {"comparison", "settings", "environment", "peaks", "variants"} <= scan.tables
    for variant in report.variants:
        assert f"<td>{variant.name}</td>" in html
    assert "95% CI" in html and "p (paired)" in html and "% peak" in html
    assert "How this was measured" in html and report.measurement_line() in html


def test_the_default_sweep_report_is_one_file_under_5_mb_from_the_cli(store, tmp_path, cli):
    default_run, axis_run = runs(store)
    out = tmp_path / "report.html"
    p = cli("report", default_run["run_id"], "--compare", axis_run["run_id"], "--html",
            str(out), "--store", str(store))
    assert p.returncode == 0, p.stderr
    size = out.stat().st_size
    assert 1_000_000 < size < MAX_BYTES  # plotly's ~4.8 MB of JavaScript is inside
    html = out.read_text()
    assert f"Compared with run {axis_run['run_id']}" in html
    assert 'id="compare-shared"' in html
    # The names are HTML-escaped: a variant name can never open a tag.
    assert "prune-l1-0.5+distill-T4+int8-static+amp" in html


def test_report_refuses_bad_input_in_one_line(store, tmp_path, cli):
    from benchmarks.store.database import ResultsStore
    default_run, _ = runs(store)
    ddp = ResultsStore(store).start_run(model="seed_cnn", dataset="digits", device="cpu",
                                        spec={}, environment={}, kind="distributed")
    for args, needle in [
            ([ddp, "--html", str(tmp_path / "r.html")], "is a distributed run"),
            (["no-such-run", "--html", str(tmp_path / "r.html")], "'no-such-run' is not in"),
            ([default_run["run_id"], "--compare", "nope", "--html", str(tmp_path / "r.html")],
             "--compare 'nope'"),
            ([default_run["run_id"], "--html", str(tmp_path / "missing" / "r.html")],
             "does not exist")]:
        p = cli("report", *args, "--store", str(store))
        assert p.returncode == 2, p.stderr
        assert p.stderr.count("\n") == 1 and needle in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.browser
def test_the_report_draws_every_chart_in_chromium_with_the_network_off(store, tmp_path):
    from playwright.sync_api import sync_playwright

    from benchmarks.report.html import render
    from tools.browser import CHROMIUM, CHROMIUM_ARGS
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    _, axis_run = runs(store)
    path = tmp_path / "report.html"
    path.write_text(render(RunReport.from_stored(axis_run)), encoding="utf-8")
    expected = Scan()
    expected.feed(path.read_text())
    attempted, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000},
                                          offline=True)

            def only_the_file(route):
                if route.request.url.startswith("file://"):
                    route.continue_()
                else:
                    attempted.append(route.request.url)
                    route.abort()
            context.route("**/*", only_the_file)
            page = context.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(path.as_uri())
            # Drawn: every chart div holds marks (bars, points, lines or a heatmap's image)
            # and its title.
            marks = "'.point path, path.point, path.js-line, image'"
            page.wait_for_function(
                f"[...document.querySelectorAll('[data-chart]')].length == "
                f"{len(expected.charts)} && [...document.querySelectorAll('[data-chart]')]"
                f".every(d => d.querySelectorAll({marks}).length > 0)", timeout=60_000)
            drawn = page.evaluate(f"""() => [...document.querySelectorAll('[data-chart]')]
                .map(d => [d.dataset.chart, d.querySelectorAll({marks}).length,
                           d.querySelectorAll('.gtitle').length ? 1 : 0])""")
        finally:
            browser.close()
    assert [name for name, _, _ in drawn] == expected.charts
    assert all(marks > 0 and titled for _, marks, titled in drawn), drawn
    assert attempted == [] and errors == []


def test_history_offers_the_report_of_the_two_runs_it_compares(store, monkeypatch):
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(store))
    from benchmarks.service.queue import JobQueue
    try:
        at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"),
                               default_timeout=60).run()
        at.switch_page("pages/history.py").run()
        assert not at.exception
        assert len(at.multiselect(key="history_runs").value) == 2
        assert [b.label for b in at.get("download_button")] == ["Download report"]
    finally:
        JobQueue(store).stop_worker("cpu")  # the app starts one a few seconds after opening


@pytest.mark.browser
@pytest.mark.slow
def test_the_results_page_download_gives_the_report_in_a_real_browser(store, tmp_path):
    """A real server and Chromium: the Results page's "Download report" button hands over
    the HTML report of the run shown (built when clicked)."""
    from playwright.sync_api import expect, sync_playwright

    from tools.browser import CHROMIUM, CHROMIUM_ARGS, running_server
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    _, axis_run = runs(store)
    with running_server(store) as (_, url), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(accept_downloads=True,
                                       viewport={"width": 1500, "height": 1000}).new_page()
            page.goto(f"{url}/results?run={axis_run['run_id']}")  # the run's shared link
            button = page.get_by_role("button", name="Download report")
            expect(button).to_be_visible(timeout=60_000)
            with page.expect_download(timeout=60_000) as download:
                button.click()
            saved = tmp_path / download.value.suggested_filename
            download.value.save_as(saved)
        finally:
            browser.close()
    assert saved.name == f"report-{axis_run['run_id']}.html"
    html = saved.read_text()
    scan = Scan()
    scan.feed(html)
    assert "roofline" in scan.charts and scan.loads == []
    assert len(html.encode()) < MAX_BYTES
