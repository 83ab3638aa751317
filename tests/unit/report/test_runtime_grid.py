"""The variant x runtime grid from stored rows (no torch): speed-ups against the eager baseline
at each row's own batch size, the parity badge, "INT8 in name only", a changed accuracy
verdict, the best runtime per variant, the batch size where a speed-up crosses 1x; and the
figures' data (the heatmap, the throughput-latency curves), the CLI's text and the HTML
report's tables, all from the same rows."""

from __future__ import annotations

import pytest

from benchmarks.report import runtimes, stats
from benchmarks.report.document import RunReport
from benchmarks.report.results import VariantResult

N = 100


def _row(name, variant, runtime, batch, p50_ms, *, techniques=(), wrong=0, verdict="float",
         badge="ok", ints=0, floats=3):
    right = [True] * (N - 10 - wrong) + [False] * (10 + wrong)
    return VariantResult.of(
        name=name, techniques=list(techniques), batch_size=batch,
        latency_samples_ms=[p50_ms * (1 + 0.001 * k) for k in range(21)],
        # Ten interleaved rounds, 1% apart: far from each other's cells beyond noise.
        round_p50_ms=[p50_ms * (1 + 0.01 * ((k * 7) % 5 - 2)) for k in range(10)],
        accuracy=sum(right) / N, correct_bits=stats.pack_bits(right), n_test=N,
        axes={"eval_batch_size": batch},
        runtime={"name": runtime, "variant": variant, "batch_size": batch, "threads": 1,
                 "precision": "int8" if ints else "fp32",
                 "parity": {"top1_agree": 1.0 if badge == "ok" else 0.9, "badge": badge},
                 "ops": {"int_kernels": ints, "float_kernels": floats, "quant_dequant": 2,
                         "int8_real": ints >= floats, "verdict": verdict}})


@pytest.fixture
def rows():
    int8 = ("int8",)
    results = [
        _row("baseline", "baseline", "eager", 1, 1.0),
        _row("int8-static", "int8-static", "eager", 1, 1.25, techniques=int8, ints=3, floats=0,
             verdict="INT8"),
        _row("baseline b32", "baseline", "eager", 32, 20.0),
        _row("baseline@ort", "baseline", "ort", 1, 0.5),
        _row("baseline@ort b32", "baseline", "ort", 32, 16.0),
        _row("int8-static b32", "int8-static", "eager", 32, 8.0, techniques=int8, ints=3,
             floats=0, verdict="INT8"),
        # Signed activations left its convs float around Q/DQ, and it lost 30 examples.
        _row("int8-static@ort", "int8-static", "ort", 1, 2.0, techniques=int8, ints=1,
             floats=2, verdict="INT8 in name only", badge="off", wrong=30),
        _row("int8-static@ort b32", "int8-static", "ort", 32, 5.0, techniques=int8, ints=1,
             floats=2, verdict="INT8 in name only", badge="off", wrong=30),
    ]
    return RunReport(variants=results, baseline="baseline").rows()


def test_each_row_is_timed_against_the_eager_baseline_at_its_own_batch(rows):
    by = {r["variant"]: r for r in rows}
    assert by["baseline@ort b32"]["baseline_ref"] == "baseline b32"
    assert runtimes.speedup(by["baseline@ort b32"]) == pytest.approx(20.0 / 16.0, rel=0.01)
    assert runtimes.speedup(by["int8-static b32"]) == pytest.approx(2.5, rel=0.01)
    assert runtimes.speedup(by["baseline@ort"]) == pytest.approx(2.0, rel=0.01)


def test_the_grid_flags_name_only_parity_and_a_changed_verdict(rows):
    grids = {g["batch_size"]: g for g in runtimes.grids(rows)}
    assert set(grids) == {1, 32}
    g = grids[1]
    assert g["variants"] == ["baseline", "int8-static"] and g["runtimes"] == ["eager", "ort"]
    cell = g["cells"]["int8-static"]["ort"]
    assert cell["name_only"] and cell["badge"] == "off"
    # The eager INT8 variant is within noise of the baseline; under ORT it lost 30 examples.
    assert cell["verdict_differs"]
    assert not g["cells"]["int8-static"]["eager"]["verdict_differs"]
    assert g["best"] == {"baseline": "ort", "int8-static": "eager"}
    assert grids[32]["best"] == {"baseline": "ort", "int8-static": "ort"}
    assert runtimes.cell_text(cell) == "0.50x off name-only ≠"
    best = runtimes.best_runtimes(rows)
    assert best["int8-static"]["runtime"] == "ort" and best["int8-static"]["batch_size"] == 32


def test_the_speedup_crossing_1x_between_two_batch_sizes(rows):
    found = {(c["variant"], c["runtime"]): c for c in runtimes.crossings(rows)}
    int8 = found[("int8-static", "eager")]
    assert int8["speedups"] == pytest.approx({1: 0.8, 32: 2.5}, rel=0.01)
    assert int8["crossing"]["between"] == [1, 32] and int8["below_1x"] == [1]
    assert 1 < int8["crossing"]["batch"] < 32
    assert found[("baseline", "ort")]["crossing"] is None  # above 1x at both
    assert ("baseline", "eager") not in found  # the reference itself


def test_the_grid_chart_and_the_curves_from_the_rows(rows):
    figs = runtimes.runtime_figures(rows)
    assert set(figs) == {"runtime-grid:b1-t1", "runtime-grid:b32-t1", "runtime-curves"}
    heat = figs["runtime-grid:b1-t1"].data[0]
    assert list(heat.x) == ["eager", "ort"] and list(heat.y) == ["baseline", "int8-static"]
    assert heat.z[0][1] == pytest.approx(1.0, abs=0.01)   # log2 of the 2x speed-up
    assert heat.z[1][1] == pytest.approx(-1.0, abs=0.01)  # 0.5x
    assert "name-only" in heat.text[1][1]
    curves = figs["runtime-curves"]
    lines = {t.name: t for t in curves.data if t.mode == "lines+markers+text"}
    assert list(lines["int8-static · eager · t1"].text) == ["b1", "b32"]
    marks = [t for t in curves.data if t.mode == "markers+text"]
    assert any("1x near b" in t.text[0] for t in marks)


def test_the_cli_text_and_the_html_report_carry_the_grid(rows):
    text = runtimes.grid_text(rows)
    assert "speed-up vs eager fp32 baseline, batch 32, 1 thread(s):" in text
    assert "int8-static under eager: speed-up crosses 1x between batch 1 and 32" in text
    from benchmarks.views.html import render
    report = RunReport(variants=[_row("baseline", "baseline", "eager", 1, 1.0),
                                 _row("baseline@ort", "baseline", "ort", 1, 0.5)],
                       baseline="baseline", run_id="r1", model="m", dataset="d")
    html = render(report)
    assert 'class="runtime-grid"' in html and "2.00x" in html
    assert 'data-chart="runtime-grid:b1-t1"' in html


def test_a_run_without_deployment_axes_has_no_runtime_section():
    plain = [VariantResult.of(name="baseline", latency_samples_ms=[1.0] * 5),
             VariantResult.of(name="x", techniques=["prune"], latency_samples_ms=[0.5] * 5)]
    rows = RunReport(variants=plain, baseline="baseline").rows()
    assert not runtimes.has_cells(rows) and runtimes.runtime_figures(rows) == {}
    assert "runtime" not in rows[0]  # its table keeps today's columns


def _cells(rounds: dict[str, list[float]]) -> dict:
    """One variant's cells at one shape: each runtime's rounds (ms), speed-up against 1 ms."""
    import statistics
    return {rt: {"speedup": 1.0 / statistics.median(r), "error": None, "rounds": r}
            for rt, r in rounds.items()}


def test_cells_within_noise_are_a_tie_with_the_interval_and_the_same_verdict_twice():
    """The issue's flip: one run named OpenVINO (8.00x against eager's 6.56x), the next
    eager. Rounds as noisy as those (IQR 15-60%, five rounds) cannot tell the two apart: the
    grid says tie, with the ratio's interval, and says the same on the same stored rounds."""
    import random
    rng = random.Random(3)
    drift = [rng.uniform(0.7, 1.4) for _ in range(5)]  # the host, shared by the round
    rounds = {"eager": [0.152 * d * rng.uniform(0.75, 1.35) for d in drift],
              "openvino": [0.125 * d * rng.uniform(0.75, 1.35) for d in drift]}
    first = runtimes.verdict(_cells(rounds))
    assert first["runtime"] is None and first["tied"] == ["eager"]
    assert first["text"].startswith("tie: openvino ≈ eager (openvino/eager ")
    low, high = first["against"]["eager"]["ci"]
    assert low <= 1.0 < high and "95% CI [" in first["text"] and "over 5 rounds" in first["text"]
    assert runtimes.verdict(_cells(rounds)) == first  # resampled with a fixed seed


def test_a_runtime_faster_beyond_noise_is_named_and_a_10pct_gap_separates_on_a_quiet_host():
    """On a quiet host (rounds within ±3% of each other, the drift shared by the round) the
    default rounds separate a 10% difference; the fastest is named only when it beats every
    other cell, a third within noise of it making the whole a tie."""
    import random

    from benchmarks.spec.sweep import DEFAULT_TIMING_ROUNDS
    rng = random.Random(0)
    n = DEFAULT_TIMING_ROUNDS
    drift = [rng.uniform(0.97, 1.03) for _ in range(n)]
    eager = [1.0 * d * rng.uniform(0.985, 1.015) for d in drift]
    ort = [0.9 * d * rng.uniform(0.985, 1.015) for d in drift]
    named = runtimes.verdict(_cells({"eager": eager, "ort": ort}))
    assert named["runtime"] == "ort" and named["text"] == "ort" and not named["tied"]
    assert named["against"]["eager"]["ci"][0] > 1.0
    close = [0.905 * d * rng.uniform(0.985, 1.015) for d in drift]  # 0.5% behind ort
    tie = runtimes.verdict(_cells({"eager": eager, "ort": ort, "openvino": close}))
    assert tie["runtime"] is None and tie["tied"] == ["openvino"]
    assert tie["text"].startswith("tie: ort ≈ openvino (ort/openvino 1.0")
    # Rounds not stored (an older run): no interval, so no name.
    legacy = runtimes.verdict(_cells({"eager": [1.0], "ort": [0.5]}))
    assert legacy["runtime"] is None and "no interval from 1 round(s)" in legacy["text"]
    assert runtimes.verdict(_cells({"eager": eager}))["runtime"] == "eager"  # nothing to beat


def test_the_best_runtime_table_says_tie_where_the_grid_does(rows):
    by = {r["variant"]: r for r in rows}
    # Two cells of one variant a hair apart: the stored rounds cannot tell them apart.
    by["int8-static@ort"]["round_p50_ms"] = [x * 0.995 for x in reversed(by["int8-static"][
        "round_p50_ms"])]
    by["int8-static@ort"]["p50_ms_vs_base"] = by["int8-static"]["p50_ms_vs_base"] * 0.995
    grid = {g["batch_size"]: g for g in runtimes.grids(rows)}[1]
    assert grid["best"]["int8-static"].startswith("tie: ort ≈ eager")
    assert grid["best"]["baseline"] == "ort"
    assert "tie: ort ≈ eager" in runtimes.grid_text(rows)


def test_the_page_tables_show_the_verdict(rows):
    from dashboard.runtimes_view import best_frame, grid_frame
    by = {r["variant"]: r for r in rows}
    by["int8-static@ort b32"]["round_p50_ms"] = None  # rounds not stored: cannot tell
    best = best_frame(rows).set_index("variant")["best runtime"]
    assert best["baseline"] == "ort"
    assert best["int8-static"].startswith("tie: ort ≈ eager (ort/eager ")
    grid = {g["batch_size"]: g for g in runtimes.grids(rows)}
    assert list(grid_frame(grid[1])["best runtime"]) == ["ort", "eager"]
