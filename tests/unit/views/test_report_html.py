"""The HTML report: built from the run report object, every chart of the Results page and the
table present, nothing loaded over the network, under 5 MB for the default sweep; `report`
refuses a missing run in one line. Drawn by a real Chromium, and offered by the History and
Results pages, in tests/system/test_report_browser.py; the runs they share are conftest's
``report_store``."""

from __future__ import annotations

from benchmarks.report.document import RunReport
from helpers import REPORT_MAX_BYTES, HtmlScan, report_runs


def test_the_report_holds_every_chart_and_the_table_and_loads_nothing(report_store):
    from benchmarks.report.figures import run_figures
    from benchmarks.views.html import render
    _, axis_run = report_runs(report_store)
    report = RunReport.from_stored(axis_run)
    html = render(report)
    scan = HtmlScan()
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


def test_the_default_sweep_report_is_one_file_under_5_mb_from_the_cli(report_store, tmp_path, cli):
    default_run, axis_run = report_runs(report_store)
    out = tmp_path / "report.html"
    p = cli("report", default_run["run_id"], "--compare", axis_run["run_id"], "--html",
            str(out), "--store", str(report_store))
    assert p.returncode == 0, p.stderr
    size = out.stat().st_size
    assert 1_000_000 < size < REPORT_MAX_BYTES  # plotly's ~4.8 MB of JavaScript is inside
    html = out.read_text()
    assert f"Compared with run {axis_run['run_id']}" in html
    assert 'id="compare-shared"' in html
    # The names are HTML-escaped: a variant name can never open a tag.
    assert "prune-l1-0.5+distill-T4+int8-static+amp" in html


def test_report_refuses_bad_input_in_one_line(report_store, tmp_path, cli):
    from benchmarks.store.database import ResultsStore
    default_run, _ = report_runs(report_store)
    ddp = ResultsStore(report_store).start_run(model="seed_cnn", dataset="digits", device="cpu",
                                        spec={}, environment={}, kind="distributed")
    for args, needle in [
            ([ddp, "--html", str(tmp_path / "r.html")], "is a distributed run"),
            (["no-such-run", "--html", str(tmp_path / "r.html")], "'no-such-run' is not in"),
            ([default_run["run_id"], "--compare", "nope", "--html", str(tmp_path / "r.html")],
             "--compare 'nope'"),
            ([default_run["run_id"], "--html", str(tmp_path / "missing" / "r.html")],
             "does not exist")]:
        p = cli("report", *args, "--store", str(report_store))
        assert p.returncode == 2, p.stderr
        assert p.stderr.count("\n") == 1 and needle in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
    assert not (tmp_path / "r.html").exists()
