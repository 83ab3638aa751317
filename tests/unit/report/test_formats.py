"""Issue 32, items 9, 10 and 12 on the figure and record objects: the one formatting layer
(percent with two decimals, ms to three significant figures, "—" with a reason, headers in
words), Pareto labels that never overlap with the baseline always named, a grouped roofline
legend, curves only over numeric axes."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.report import formats

SNAKE = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")
LONG_FLOAT = re.compile(r"\d\.\d{5,}")


def legible(rows: list[dict]) -> None:
    """What a person should never see in a table: "None", a snake_case header, a float with
    more than four decimals."""
    for row in rows:
        for header, value in row.items():
            assert not SNAKE.match(header), header
            text = str(value)
            assert "None" not in text and "nan" not in text, (header, text)
            assert not LONG_FLOAT.search(text), (header, text)


def test_each_figure_reads_one_way():
    assert formats.percent(0.9694) == "96.94%"
    assert formats.percent(None) == "— (not measured)"
    assert formats.percent(None, "the run failed") == "— (the run failed)"
    assert formats.ms(12.3456) == "12.3 ms" and formats.ms(0.0123456) == "0.0123 ms"
    assert formats.ms(1234.5) == "1,234 ms"  # three significant figures, never 1.23e+03
    assert formats.points(1.254) == "+1.25" and formats.points(-0.5) == "-0.50"
    assert formats.plain(0.30000000000000004) == "0.3" and formats.plain(True) == "yes"
    assert formats.plain(123456) == "123,456" and formats.plain(None) == "— (not measured)"
    assert formats.cell("p_value", 3e-9) == "<0.0001"
    assert formats.cell("accuracy_change_ci", [-1.3, 0.25]) == "[-1.30, +0.25]"
    assert formats.header("comm_ms_per_step") == "Communication (ms per step)"
    assert formats.header("took_s") == "Took (s)" and formats.header("axis:prune.ratio") \
        == "prune.ratio"
    assert formats.header("some_new_figure_mb") == "Some new figure (MB)"


def test_records_become_a_legible_table():
    rows = [{"name": "w1-none", "workers": 1, "accuracy": 0.96941234, "loss": 0.123456789,
             "scaling_efficiency": None, "step_ms": 3.14159265, "amp": False, "error": None},
            {"name": "w2-fp16", "workers": 2, "accuracy": None, "loss": None,
             "scaling_efficiency": 0.5912, "step_ms": None, "amp": True,
             "error": "worker 1 died"}]
    shown = formats.display_rows(rows, reasons={"scaling_efficiency": "one worker: the "
                                                                      "reference"})
    legible(shown)
    first, second = shown
    assert first["Accuracy"] == "96.94%" and first["Step (ms)"] == "3.14 ms"
    assert first["Scaling efficiency"] == "— (one worker: the reference)"
    assert first["Error"] == "" and second["Error"] == "worker 1 died"
    assert second["Accuracy"] == "— (the run failed)"  # a failed row says so, not "None"
    assert second["Scaling efficiency"] == "59.12%" and second["Mixed precision"] == "yes"


def _pareto_rows():
    """A crowded frontier: amp and int8 at nearly one latency and accuracy beside the
    baseline, and prune variants dominated around them."""
    from benchmarks.report.comparisons import comparison_rows
    from benchmarks.report.results import VariantResult

    def v(name, acc, ms, techniques, size=4):
        return VariantResult.of(name, techniques, accuracy=acc, n_test=360,
                                latency_samples_ms=[ms] * 10, batch_size=32,
                                size_bytes=int(size * 2**20))
    results = [v("baseline", 0.9694, 10.0, [], 4), v("amp", 0.9691, 6.0, ["amp"], 4),
               v("int8-static", 0.9688, 5.9, ["int8"], 1),
               v("int8-dynamic", 0.9683, 5.8, ["int8"], 1.2),
               v("prune-l1-0.9+int8-static", 0.9, 5.7, ["prune", "int8"], 0.5),
               *(v(f"prune-l1-0.{k}", 0.97 - 0.01 * k, 9.0 + 0.05 * k, ["prune"], 4)
                 for k in range(3, 9))]
    return comparison_rows(results)


def test_pareto_labels_never_overlap_and_the_baseline_is_named():
    from benchmarks.report.tradeoffs import label_boxes, pareto_chart, pareto_front_of
    rows = _pareto_rows()
    front = pareto_front_of(rows)
    assert {"amp", "int8-static", "int8-dynamic"} <= set(front)
    boxes = label_boxes(rows, front)
    assert "baseline" in boxes  # the reference, always named
    assert set(front) <= set(boxes)  # a crowded frontier still gets every label
    placed = [box for _, _, box in boxes.values()]
    for i, a in enumerate(placed):
        for b in placed[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (a, b)
    fig = pareto_chart(rows, front)
    named = {t for trace in fig.data for t in (trace.text or ()) if t} | \
        {a.text for a in fig.layout.annotations}
    from benchmarks.report.style import short
    assert named == {short(n) for n in ("baseline", *front)}  # the frontier and the baseline
    assert not any(t.startswith("prune-l1-0.") and "+" not in t for t in named)


def test_the_roofline_legend_has_a_few_grouped_entries():
    from benchmarks.report.roofline_chart import ABOVE_ROOF, roofline_chart
    peaks = {"cpu": {"gemm_flops_per_s": {"fp32": 100e9, "bf16": 150e9, "int8": 300e9},
                     "memory_bytes_per_s": 20e9,
                     "theoretical": {"gemm_flops_per_s": {"fp32": 200e9, "int8": 20e9}}}}
    rows = [{"variant": "baseline", "is_baseline": True, "precision": "fp32", "device": "cpu",
             "achieved_flops_per_s": 10e9, "arithmetic_intensity": 5.0}]
    for k in range(14):  # the 15 entries: one per variant
        precision = ("fp32", "bf16", "int8")[k % 3]
        rows.append({"variant": f"v{k}", "precision": precision, "device": "cpu",
                     "is_baseline": False,
                     "achieved_flops_per_s": (1 + k) * 1e9, "arithmetic_intensity": 2.0 + k,
                     "above_theoretical": precision == "int8" and k > 10})
    fig = roofline_chart(rows, peaks)
    listed = [t.name for t in fig.data if t.showlegend is not False]
    assert len(listed) <= 7, listed
    assert set(listed) == {"measured roofs (colour: precision)", "theoretical roofs",
                           "baseline (diamond)", "fp32 variants", "bf16 variants",
                           "int8 variants", ABOVE_ROOF}
    points = [t for t in fig.data if t.mode == "markers"]
    assert len(points) == 15  # still a trace per variant: hover and click name it
    assert {t.customdata[0][0] for t in points} == {r["variant"] for r in rows}


def test_curves_only_over_numeric_axes():
    from benchmarks.report.tradeoffs import curve_axes, curve_chart
    rows = [{"variant": f"prune-{m}-{r}", "axis:prune.method": m, "axis:prune.ratio": r,
             "accuracy": 0.9, "p50_ms": 1.0, "size_mb": 1.0, "techniques": "prune"}
            for m in ("channel", "l1") for r in (0.3, 0.6, 0.9)]
    assert curve_axes(rows) == ["prune.ratio"]  # "channel" and "l1" are never an x axis
    with pytest.raises(ValueError, match="numeric ones here: prune.ratio"):
        curve_chart(rows, "prune.method")
    lines = [t for t in curve_chart(rows, "prune.ratio").data if t.mode == "lines+markers"]
    assert {t.name for t in lines} == {"method=channel", "method=l1"}  # a line per category
    assert all(isinstance(x, float) for t in lines for x in t.x)
    only_categories = [{**r, "axis:prune.ratio": 0.5} for r in rows]
    assert curve_axes(only_categories) == []  # no Curves tab of categories


def test_the_export_table_reads_every_card_without_an_attribute_error():
    from dashboard.tables import export_rows
    card = {"formats": {
        "safetensors": {"file": "model.safetensors", "status": "written",
                        "verification": {"same_predictions": True}},
        "onnx": {"file": None, "status": "not exported", "reason": "int8 has no ONNX export"},
        "pt2": {"file": "model.pt2", "status": "written", "verification": {"accuracy": 0.96}},
        "runtime": "not exported"}}  # an older card: a bare status, not a record
    rows = export_rows(card)
    legible(rows)
    by_format = {r["Format"]: r for r in rows}
    assert by_format["onnx"]["File"] == "— (not written)"
    assert by_format["onnx"]["Why not"] == "int8 has no ONNX export"
    assert by_format["pt2"]["Check"] == "reloaded: accuracy 96.00%"
    assert by_format["runtime"]["Status"] == "not exported"


def test_the_distributed_table_reads_in_words():
    from dashboard.tables import distributed_rows
    results = [{"name": f"none-w{w}", "workers": w, "compression": "none", "amp": False,
                "throughput": tput, "scaling_efficiency": eff, "bytes_per_step": 4e5,
                "comm_ms_per_step": 1.23456789, "loss": None, "accuracy": acc, "error": None}
               for w, tput, eff, acc in ((1, 1000.123456789, None, 0.96941234),
                                         (2, 1700.5, 0.85012, None))]
    rows = distributed_rows(results)
    legible(rows)
    assert [r["Accuracy"] for r in rows] == ["96.94%", "— (not measured)"]
    assert [r["Scaling efficiency"] for r in rows] == [
        "— (no one-worker run to compare with)", "85.01%"]
    assert rows[0]["Communication (ms per step)"] == "1.23 ms"
    assert rows[0]["Mixed precision"] == "no" and rows[0]["Error"] == ""


def test_the_sensitivity_tables_read_in_words():
    from benchmarks.report.results import VariantResult
    from benchmarks.views.sensitivity import schedule_checks
    from benchmarks.report.stats import pack_bits
    from dashboard.sensitivity_view import cell_rows, schedule_rows
    bits = pack_bits([True] * 10)
    schedule = {"technique": "prune.channel", "groups": {"a": 0.5}, "finetune_epochs": 0,
                "predicted": {"accuracy_change_pts": 0.0, "saving": 0.25}}
    rounds = [1.0, 1.1, 0.9, 1.0, 1.2]
    checks = schedule_checks([
        VariantResult.of("baseline", correct_bits=bits, n_test=10, latency_samples_ms=[1.0] * 9,
                         round_p50_ms=rounds),
        VariantResult.of("prune-channel-schedule-x", ["prune"], correct_bits=bits, n_test=10,
                         config={"prune": {"method": "channel", "finetune_epochs": 2,
                                        "schedule": schedule}},
                         latency_samples_ms=[0.7] * 9, round_p50_ms=[0.7 * r for r in rounds])],
        "baseline")
    [row] = schedule_rows(checks)
    legible([row])
    assert row["Measured saving"] == "30.00%" and row["Predicted saving"] == "25.00%"
    cells = cell_rows([
        {"root": "features.0", "level": 0.5, "accuracy_change": -1.23456789,
         "accuracy_change_ci": [-2.5, 0.1], "p_value": 0.0312345, "latency_share": 0.123456,
         "macs_removed": 0.5, "sqnr_db": None, "group_sqnr_db": None, "evaluated_on": 360,
         "error": None},
        {"root": "features.3", "level": 0.9, "accuracy_change": None, "error": "OOM in /srv/x"}],
        own=False)
    legible(cells)
    assert cells[0]["Δ accuracy (points)"] == "-1.23" and cells[0]["Share of latency"] \
        == "12.35%"
    assert cells[0]["SQNR (dB)"] == "— (not a quantization cell)"
    assert cells[1]["Δ accuracy (points)"] == "— (the run failed)"
    assert "/srv/x" not in cells[1]["Error"]  # no server path to another viewer


def test_the_measurement_line_reads_the_normalisation_to_four_figures():
    """The run page's and report's "How this was measured" line (issue 32.12; the tour saw
    "mean [0.304882], std [0.375837]" under the answer)."""
    from benchmarks.report.document import RunReport
    line = RunReport.from_stored({"environment": {"data": {"normalization": {
        "mode": "dataset", "mean": [0.30488201975822449], "std": [0.375837]}}},
        "variants": []}).measurement_line()
    assert "(mean [0.3049], std [0.3758])" in line, line
    assert not LONG_FLOAT.search(line), line


def test_a_record_shown_whole_reads_its_floats_to_four_decimals():
    """The Environment tab's JSON (the tour saw 95084778989.40602 FLOP/s, a 3.240881777617619
    GHz clock)."""
    shown = formats.readable({"peaks": {"fp32": 95084778989.40602, "clock_ghz": 3.240881777617619,
                                        "mean": [0.304882], "threads": 2, "name": "cpu",
                                        "none": None, "inf": float("inf")}})
    assert shown == {"peaks": {"fp32": 95084800000.0, "clock_ghz": 3.2409, "mean": [0.3049],
                               "threads": 2, "name": "cpu", "none": None,
                               "inf": float("inf")}}
    assert not LONG_FLOAT.search(json.dumps(shown))


def test_pareto_labels_sit_clear_of_every_disc_and_where_they_were_placed():
    """The tour saw "student-scratch" over the combined variant's label on the page: plotly
    set a textposition label off by its marker's size, which the placement did not foresee.
    Every label is an annotation at its placed offset, and no label covers a model's disc."""
    from benchmarks.report.tradeoffs import (_pixel, _radius, label_boxes, marker_sizes,
                                             pareto_chart, pareto_front_of, pareto_points)
    rows = pareto_points(_pareto_rows())
    front = pareto_front_of(rows)
    boxes = label_boxes(rows, front)
    for r, size in zip(rows, marker_sizes(rows)):
        cx, cy = _pixel(rows, r)
        disc = (cx - _radius(size), cy - _radius(size), cx + _radius(size), cy + _radius(size))
        for name, (_, _, b) in boxes.items():
            assert not (b[0] < disc[2] and disc[0] < b[2] and b[1] < disc[3] and
                        disc[1] < b[3]), (name, r["variant"])
    fig = pareto_chart(rows, front)
    assert not any(t.text for t in fig.data if t.text)  # no textposition labels
    assert len(fig.layout.annotations) == len(boxes)
