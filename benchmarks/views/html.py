"""One self-contained HTML file per run: what a team reads without the dashboard.

Built from the run report object (``RunReport``), never by scraping a page: every chart of the
Results page (``figures.run_figures``), the comparison table with its intervals and noise
flags (the text table's cells and marks), the environment card with the device's peaks, the
sweep's settings, and how it was measured. Plotly's JavaScript is embedded once, so the file
draws offline (a mail attachment); it loads nothing over the network. Torch-free: the
dashboard builds it in its own process.

    html = render(report, compare=other_report)
"""

from __future__ import annotations

import json
from importlib import resources

from benchmarks.measure.theory import clock_text
from benchmarks.report import formats
from benchmarks.report.document import (
    SWEEP_COLUMNS,
    RunReport,
    compare_runs,
    format_cells,
    peak_notes,
    sweep_marks,
    table_notes,
)

# The comparison table of the report: the text table's columns plus the paired p-value and
# the roofline's figures.
REPORT_COLUMNS = [
    *SWEEP_COLUMNS[:5], ("p_value_vs_base", "p (paired)", "{:.3g}"), *SWEEP_COLUMNS[5:],
    ("precision", "precision", "{}"),
    ("achieved_flops_per_s", "GFLOP/s", lambda v: f"{v / 1e9:,.2f}"),
    ("arithmetic_intensity", "FLOP/byte", "{:.2f}"), ("bound", "bound", "{}"),
]
# Two runs side by side, through the one formatting layer the dashboard's History uses
# (benchmarks.report.formats): the same cells, percents and headers in both.
COMPARE_COLUMNS = [
    (key, formats.header(key), lambda v, key=key: formats.cell(key, v))
    for key in ("variant", "accuracy_a", "accuracy_b", "accuracy_change_pts",
                # The change's interval and p from one paired test (they never disagree).
                "accuracy_change_ci", "p_value", "within_noise", "p50_ms_a", "p50_ms_b",
                "p50_ratio")]


def _script_json(value) -> str:
    """JSON safe inside a <script> element: no '</script>' or '<!--' can close it early."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _figure_json(fig) -> tuple[dict, dict]:
    """(figure without its template, template): the template is written once per file. Every
    text in it shown as text, never as Plotly's markup (``chart_text.safe_figure``)."""
    import plotly.io as pio

    from benchmarks.report.chart_text import safe_figure
    data = json.loads(pio.to_json(safe_figure(fig), validate=False))
    template = data.get("layout", {}).pop("template", {})
    return data, template


def _table(rows: list[dict], columns: list[tuple], marks=None) -> dict:
    return {"heads": [h for _, h, _ in columns],
            "rows": [{"cells": format_cells(r, columns, marks),
                      "baseline": bool(r.get("is_baseline")), "error": r.get("error"),
                      "not_applicable": r.get("not_applicable"),
                      "variant": r.get("variant")} for r in rows]}


def _environment_rows(environment: dict) -> list[tuple[str, str]]:
    return [(key, value if isinstance(value, str) else json.dumps(value, default=str))
            for key, value in environment.items() if key != "peaks" and value is not None]


def _peak_rows(peaks: dict) -> list[dict]:
    return [{"device": device, "name": p.get("device_name"), "threads": p.get("threads"),
             "gemm": ", ".join(f"{k} {v / 1e9:,.1f}" for k, v in
                               (p.get("gemm_flops_per_s") or {}).items()),
             "bandwidth": f"{(p.get('memory_bytes_per_s') or 0) / 1e9:,.1f}",
             "theoretical": ("; ".join(f"{k} {v / 1e9:,.1f}" for k, v in
                                       ((p.get("theoretical") or {}).get("gemm_flops_per_s")
                                        or {}).items()) or "-")
             + (f" {clock_text(p.get('theoretical'))}" if clock_text(p.get("theoretical"))
                else "")
             + "".join(f"; believed low: {why}" for why in
                       (p.get("kernel_limited") or {}).values()),
             "measured_at": p.get("measured_at"),
             "method": "; ".join(f"{k}: {v}" for k, v in (p.get("method") or {}).items()
                                 if k not in ("candidates", "version", "best_of"))}
            for device, p in peaks.items()]


def _settings(report: RunReport) -> dict:
    """The sweep's settings (the spec but its variants) and what each variant applied."""
    return {"sweep": [(k, v if isinstance(v, str) else json.dumps(v, default=str))
                      for k, v in report.spec.items() if k != "variants"],
            "variants": [{"name": v.name, "techniques": " → ".join(v.techniques) or "-",
                          "config": json.dumps(v.config, default=str)}
                         for v in report.variants]}


def _runtimes(rows: list[dict]) -> dict | None:
    """The variant x runtime grids as tables, the 1x crossings, the best runtime per variant."""
    from benchmarks.report import runtimes
    if not runtimes.has_cells(rows):
        return None
    tables = [{"title": f"batch {g['batch_size']}, {g['threads']} thread(s)",
               "heads": ["variant", *g["runtimes"], "best runtime"],
               "rows": [[v, *(runtimes.cell_text(g["cells"][v].get(rt)) for rt in g["runtimes"]),
                         g["best"].get(v, "-")] for v in g["variants"]]}
              for g in runtimes.grids(rows)]
    crossings = [f"{c['variant']} under {c['runtime']}: crosses 1x between batch "
                 f"{c['crossing']['between'][0]} and {c['crossing']['between'][1]} (about "
                 f"{c['crossing']['batch']:g}); speed-ups "
                 + ", ".join(f"b{b} {s:.2f}x" for b, s in c["speedups"].items())
                 for c in runtimes.crossings(rows) if c["crossing"]]
    return {"tables": tables, "crossings": crossings, "legend": runtimes.LEGEND}


def _recommendation(report: RunReport) -> dict | None:
    """A recommend run's certificate as the template shows it (None for other runs)."""
    if not report.recommendation:
        return None
    from benchmarks.recommend.record import Recommended
    from benchmarks.views.recommendation import CANDIDATE_COLUMNS, candidate_rows, summary_lines
    rec = Recommended.from_dict(report.recommendation)
    return {"winner": rec.certificate.winner, "lines": summary_lines(rec, report.environment),
            "test": rec.certificate.test, "record": rec,
            "table": {"heads": list(CANDIDATE_COLUMNS),
                      "rows": [["-" if r[c] is None else r[c] for c in CANDIDATE_COLUMNS]
                               for r in candidate_rows(rec)]}}


def report_template(name: str):
    """One of the package's report templates (they share ``head.html``: the style and the
    embedded plotly), escaping every value it is given."""
    import jinja2

    class PackageTemplates(jinja2.BaseLoader):
        """The templates read as package data (a wheel's files, not a path on disk)."""
        def get_source(self, environment, template):
            text = resources.files(__package__).joinpath("templates", template).read_text(
                encoding="utf-8")
            return text, None, lambda: True
    env = jinja2.Environment(loader=PackageTemplates(), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    return env.get_template(name)


def render(report: RunReport, compare: RunReport | None = None) -> str:
    """The run's report as one HTML document (str). ``compare``: a second sweep whose shared
    variants are set side by side with the paired test, as the History page does."""
    import plotly.offline

    from benchmarks.report.figures import PLOTLY_CONFIG, run_figures
    from benchmarks.report.runtimes import runtime_figures

    if report.kind != "sweep":
        raise ValueError(f"run {report.run_id} is a {report.kind} run; the HTML report covers "
                         f"sweeps (its JSON is in `history --json`)")
    if compare is not None and compare.kind != "sweep":
        raise ValueError(f"run {compare.run_id} is a {compare.kind} run; --compare takes a "
                         f"sweep")
    rows = report.shown_rows()
    figures, template = [], {}
    named = {**run_figures(report, rows), **runtime_figures(rows)}
    recommendation = _recommendation(report)
    if recommendation is not None:  # the search's trials first, the winner marked
        from benchmarks.views.recommendation import trials_figure
        named = {"trials": trials_figure(recommendation["record"]), **named}
    for name, fig in named.items():
        data, template = _figure_json(fig)
        figures.append({"id": f"chart-{len(figures)}", "name": name,
                        "json": _script_json(data)})
    page = report_template("report.html")
    return page.render(
        report=report, title=f"{report.model} on {report.dataset}",
        plotly_js=plotly.offline.get_plotlyjs(), template_json=_script_json(template),
        config_json=_script_json({**PLOTLY_CONFIG, "responsive": True}), figures=figures,
        table=_table(rows, REPORT_COLUMNS, sweep_marks),
        notes=table_notes(rows) + peak_notes(report.environment),
        measurement=report.measurement_line(), settings=_settings(report),
        runtimes=_runtimes(rows),
        recommendation=recommendation,
        environment=_environment_rows(report.environment), peaks=_peak_rows(report.peaks),
        compare=None if compare is None else {
            "run": compare, "table": _table(compare_runs(report, compare), COMPARE_COLUMNS),
            "rows": _table(compare.shown_rows(), REPORT_COLUMNS, sweep_marks)})
