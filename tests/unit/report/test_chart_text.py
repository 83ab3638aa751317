"""Text is never markup in a chart (issue "a server that trusts nothing the worker writes",
item 5): every figure builder of the pages and the report, given names a model file or a
stored row chose (a variant, a layer, a device, a runtime, a group, a trial, a mode), holds
them as text once through the one seam (``chart_text.safe_figure``): no string Plotly draws
starts a tag, a template keeps only the product's harmless tags, the names are all there,
escaped (Plotly shows ``&lt;`` as ``<``), and the product's own ``<br>`` still breaks lines.
Drawn by Chromium, on the real server and in the offline report:
tests/system/test_chart_text_browser.py."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from benchmarks.report import runtimes, stats
from benchmarks.report.chart_text import (SAFE_TAGS, Markup, escape, join, markup,
                                          safe_figure, unescape)
from benchmarks.report.document import RunReport
from benchmarks.report.results import VariantResult

EVIL = '<a href="https://evil.example">Sign in again</a>'
SPAN = '<span style="font-size:80px">big</span>'
ROOT = Path(__file__).resolve().parents[3]
N = 200


def _variant(name, i, **more):
    right = [True] * (N - 10 - 3 * i) + [False] * (10 + 3 * i)
    rounds = [1.0 - 0.2 * i + 0.01 * r for r in range(5)]
    return VariantResult.of(
        name=name, techniques=[] if i == 0 else ["prune"], accuracy=sum(right) / N,
        correct_bits=stats.pack_bits(right), n_test=N,
        latency_samples_ms=[x + 0.001 * k for x in rounds for k in range(8)],
        round_p50_ms=rounds, size_bytes=400_000 - 50_000 * i, peak_memory_bytes=10**6,
        memory_method=EVIL, timing={"method": "interleaved", "rounds": 5},
        **{"batch_size": 32, **more})


def sweep_report() -> RunReport:
    """A baseline and two pruned variants named by a hostile model file, their layers too."""
    variants = [_variant("baseline", 0)] + [
        _variant(f"prune {EVIL} {i}", i, layer_sparsity={EVIL: 0.3 * i, SPAN: 0.2},
                 axes={"prune.ratio": 0.3 * i}) for i in (1, 2)]
    return RunReport(variants=variants, baseline="baseline")


def runtime_rows() -> list[dict]:
    def cell(name, variant, runtime, batch, p50, i):
        return _variant(name, i, batch_size=batch, axes={"eval_batch_size": batch}, runtime={
            "name": runtime, "variant": variant, "batch_size": batch, "threads": 1,
            "precision": EVIL, "parity": {"top1_agree": 1.0, "badge": "ok"},
            "ops": {"int_kernels": 0, "float_kernels": 3, "quant_dequant": 0,
                    "int8_real": False, "verdict": EVIL}})
    hostile = f"v {EVIL}"
    variants = [cell("baseline", "baseline", "eager", 1, 1.0, 0),
                cell("baseline b32", "baseline", "eager", 32, 20.0, 0),
                cell(hostile, hostile, "eager", 1, 0.8, 1),
                cell(f"{hostile} b32", hostile, "eager", 32, 10.0, 1),
                cell(f"{hostile}@{EVIL}", hostile, EVIL, 1, 0.5, 1),
                cell(f"{hostile}@{EVIL} b32", hostile, EVIL, 32, 30.0, 1)]
    return RunReport(variants=variants, baseline="baseline").rows()


def every_figure() -> dict:
    """Every figure builder of the pages and the report, fed hostile names."""
    from benchmarks.distributed.record import ScalingRun
    from benchmarks.recommend.record import Recommended
    from benchmarks.report.figures import layer_chart, run_figures
    from benchmarks.report.roofline_chart import roofline_chart
    from benchmarks.report.trend import trend, trend_figure
    from benchmarks.sensitivity.record import MapCell
    from benchmarks.views import lm, scaling, sensitivity
    from benchmarks.views.recommendation import trials_figure
    report = sweep_report()
    figures = dict(run_figures(report))
    figures["layers"] = layer_chart(f"prune {EVIL}", {EVIL: 0.5, "0": 0.2})
    peaks = {EVIL: {"gemm_flops_per_s": {"fp32": 100e9}, "memory_bytes_per_s": 20e9,
                    "theoretical": {"gemm_flops_per_s": {"fp32": 400e9},
                                    "derivation": {"fp32": EVIL}}}}
    figures["roofline"] = roofline_chart(
        [{"variant": name, "is_baseline": i == 0, "precision": "fp32", "device": EVIL,
          "achieved_flops_per_s": 10e9, "arithmetic_intensity": 5.0 + i, "bound": EVIL}
         for i, name in enumerate(("baseline", f"v {EVIL}"))], peaks)
    rows = runtime_rows()
    figures.update(runtimes.runtime_figures(rows))
    assert "runtime-curves" in figures
    runs = [{"run_id": f"r{i}", "created_at": f"2026-01-0{i + 1}",
             "environment": {"host": EVIL, "git_commit": EVIL},
             "variants": [_variant("baseline", 0).to_dict(),
                          _variant(f"v {EVIL}", 1).to_dict()]}
            for i in range(3)]
    figures["trend"] = trend_figure(trend(runs))
    trials = [{"name": f"t{i} {EVIL}", "state": "complete", "ratio": 1.0 + i,
               "search_change_pts": -0.1 * i, "front": i == 1} for i in range(3)]
    from benchmarks.recommend.certificate import Certificate, Tested
    cert = Certificate(
        margin_pts=1.0, margin="1pt", confidence=0.95, objective="p50", split={},
        candidates=[Tested(0, f"t2 {EVIL}", 3.0, -0.2, tested=True, certified=True,
                           theta_pts=0.0, interval_pts=[-0.5, 0.5], lower_pts=-0.5)],
        winner=f"t2 {EVIL}", speedup={"ratio": 3.0, "ci": [2.9, 3.1]}).to_dict()
    figures["trials"] = trials_figure(Recommended.from_dict({
        "certificate": cert, "split": {"seed": 0, "search_size": 100, "certify_size": 100,
                                       "test_examples": 200},
        "search": {"trials": trials + [{"name": f"p {EVIL}", "state": "pruned"}]}}))
    scaling_runs = [ScalingRun.from_dict({"name": f"w{w} {EVIL}", "workers": w,
                                          "compression": EVIL, "amp": False,
                                          "throughput": 100.0 * w, "scaling_efficiency": 0.9,
                                          "bytes_per_step": 1e6, "step_ms_samples": [10.0]})
                    for w in (1, 2)]
    figures["throughput"] = scaling.throughput_chart(scaling_runs)
    figures["efficiency"] = scaling.efficiency_chart(scaling_runs)
    figures["bytes"] = scaling.bytes_chart(scaling_runs)
    cells = [MapCell.from_dict({"name": f"{EVIL}@{level}", "root": EVIL, "group": [EVIL],
                                "kind": "prune.channel", "level": level,
                                "accuracy_change": -1.0, "accuracy_change_ci": [-2.0, 0.5],
                                "latency_share": 0.3, "error": None})
             for level in (0.5, 0.75)]
    figures["heatmap"] = sensitivity.heatmap(cells)
    figures["scatter"] = sensitivity.scatter(cells)
    figures["sqnr"] = sensitivity.layers_chart(
        {"layers": [{"layer": EVIL, "sqnr_db": 30.0, "cosine": 0.99}]}, f"{EVIL}: SQNR")
    quality = {"delta_nll": 0.01, "delta_nll_interval": [0.0, 0.02],
               "variant": {"perplexity": 10.0}}
    lm_variants = [{"name": name, "ok": True, "axes": {EVIL: value}, "quality": quality,
                    "cells": [{"mode": EVIL, "ok": True,
                               "decode_speedup": {"ratio": 1.2, "ci": [1.1, 1.3]}}]}
                   for name, value in ((f"a {EVIL}", 0.3), (f"b {EVIL}", 0.6))]
    figures["lm-tradeoff"] = lm.lm_tradeoff_figure(lm_variants)
    for axis, points in lm.lm_curves(lm_variants).items():
        figures[f"lm-curve:{axis}"] = lm.lm_curve_figure(axis, points)
    figures["lm-map"] = lm.lm_map_figure([{"group": EVIL, "level": 0.5, "delta_nll": 0.1,
                                           "delta_nll_interval": [0.0, 0.2],
                                           "within_noise": EVIL}])
    return figures


def strings(value, key="", template=False):
    """(key, string, inside a template) of every string a figure's JSON holds, the theme's
    template left out (the product's, never data)."""
    if isinstance(value, str):
        yield key, value, template
    elif isinstance(value, dict):
        for k, item in value.items():
            if k != "template":
                yield from strings(item, k, template or k.endswith("template"))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings(item, key, template)


def test_every_figure_shows_hostile_names_as_text_and_keeps_its_own_line_breaks():
    figures = every_figure()
    for name, fig in figures.items():
        drawn = list(strings(safe_figure(fig).to_plotly_json()))
        for key, text, template in drawn:
            if template:  # the product's own: only its harmless tags
                tags = re.findall(r"<[^<>]*>", text)
                assert all(SAFE_TAGS.fullmatch(t) for t in tags), (name, key, text)
            elif isinstance(text, Markup):
                assert "<a" not in text and "<span" not in text, (name, key, text)
            else:
                assert "<" not in text and ">" not in text, (name, key, text)
        shown = " ".join(html.unescape(text) for _, text, _ in drawn)
        assert "Sign in again" in shown, name  # the data is drawn, as text
        escaped = escape(EVIL)
        assert any(escaped[:12] in text for _, text, _ in drawn), name
    # Sparsity's layers, in full, and the product's line breaks between lines it wrote.
    sparsity = figures["sparsity"].to_plotly_json()["data"][0]
    assert escape(EVIL) in list(sparsity["y"]) and escape(SPAN) in list(sparsity["y"])
    grid = next(f for n, f in figures.items() if n.startswith("runtime-grid"))
    hovers = [h for row in grid.data[0].customdata for h in row if "census" in h]
    assert hovers and all(h.count("<br>") == 2 and "&lt;a href" in h for h in hovers)
    assert figures["heatmap"].layout.coloraxis.colorbar.title.text == "lower bound<br>Δ pts"


def test_a_figure_is_escaped_once_however_often_it_is_handed_over():
    fig = every_figure()["layers"]
    safe_figure(fig)
    safe_figure(fig)
    assert list(fig.data[0].y)[0] == escape(EVIL)
    assert unescape(escape(EVIL)) == EVIL and unescape(escape("&lt;")) == "&lt;"


def test_the_helpers_escape_values_and_keep_the_products_markup():
    assert escape(EVIL) == ('&lt;a href="https://evil.example"&gt;Sign in again&lt;/a&gt;')
    assert markup("{}<br>{}", EVIL, "x") == f"{escape(EVIL)}<br>x"
    assert join("<br>", [EVIL, Markup("<b>ok</b>")]) == f"{escape(EVIL)}<br><b>ok</b>"
    from benchmarks.report.chart_text import safe_template
    assert safe_template(f"%{{x}}<br>{EVIL}<extra></extra>") == \
        f"%{{x}}<br>{escape(EVIL)}<extra></extra>"


@pytest.mark.parametrize("folder", ["dashboard", "pages"])
def test_pages_hand_every_figure_over_through_the_one_seam(folder):
    """``st.plotly_chart`` only in ``dashboard/charts.py``'s ``show``, which escapes."""
    for path in (ROOT / folder).rglob("*.py"):
        if path.name == "charts.py":
            continue
        calls = re.findall(r"\bst\.plotly_chart\(", path.read_text())
        assert not calls, path
