"""Trade-off curves: axes on the CLI (lists, ranges, bad input), the variant set for each
combination of axes, the cap, the estimate before a run, and the curves drawn from rows."""

from __future__ import annotations

import pytest

from benchmarks.cli.main import main
from benchmarks.cli.parser import build_parser
from benchmarks.cli.run import technique_choices
from benchmarks.spec.plan import plan_variants
from benchmarks.spec.sweep import SweepSpec


def choices(*argv: str):
    return technique_choices(build_parser().parse_args(["run", *argv]))


def names(*argv: str, combine=False, max_variants=64) -> list[str]:
    picked, enabled = choices(*argv)
    return [v.name for v in plan_variants(picked, enabled, combine=combine,
                                          max_variants=max_variants)]


# -- parsing ---------------------------------------------------------------------------------

def test_lists_and_ranges_parse_to_values():
    assert choices("--prune", "0.2,0.4,0.6,0.8")[0] == {("prune", "ratio"): (0.2, 0.4, 0.6, 0.8)}
    assert choices("--prune", "0.1:0.9:5")[0] == {("prune", "ratio"): (0.1, 0.3, 0.5, 0.7, 0.9)}
    assert choices("--prune", "0.5")[0] == {("prune", "ratio"): (0.5,)}
    assert choices("--prune-method", "l1,channel", "--prune", "0.5")[0][("prune", "method")] \
        == ("l1", "channel")
    picked, enabled = choices("--distill", "--temperature", "1,2,4,8", "--alpha", "0.3,0.7")
    assert enabled == {"distill"}
    assert picked == {("distill", "temperature"): (1.0, 2.0, 4.0, 8.0),
                      ("distill", "alpha"): (0.3, 0.7)}
    assert choices("--int8", "dynamic,static,qat")[0] == {("int8", "mode"):
                                                          ("dynamic", "static", "qat")}
    assert choices("--amp", "bf16,fp16")[0] == {("amp", "dtype"): ("bf16", "fp16")}
    assert choices("--amp") == ({}, {"amp"})
    # Integer settings: a range rounds to whole values.
    assert choices("--prune", "0.5", "--finetune-epochs", "1:3:3")[0][
        ("prune", "finetune_epochs")] == (1, 2, 3)


@pytest.mark.parametrize("argv, expected", [
    (["--prune", "0.1:0.9:0"], "range count must be at least 1"),
    (["--prune", "0.1:0.9:x"], "start:stop:count"),
    (["--prune", "0.1:0.99:3"], "prune.ratio must be >= 0.0 and <= 0.95, got 0.99"),
    (["--prune", "0.5,0.99"], "prune.ratio must be >= 0.0 and <= 0.95, got 0.99"),
    (["--prune", "0.5,0.5"], "--prune lists 0.5 twice"),
    (["--prune", "0.5", "--prune-method", "l1,l1"], "--prune-method lists 'l1' twice"),
    (["--temperature", "1,2"], "--temperature sweeps distill, which is off; add --distill"),
    (["--int8", "int4,static"], "invalid choice: 'int4'"),
    (["--prune", "0.05:0.95:70"], "this sweep has 71 variants, above the cap of 64"),
    (["--prune", "0.1:0.9:5", "--prune-method", "l1,global,channel", "--distill",
      "--temperature", "1:8:8", "--combine"], "drop --combine, or raise --max-variants"),
    (["--int8", "static", "--qat-epochs", "1,2"], "--qat-epochs"),
])
def test_bad_axes_are_one_line_exit_2_before_anything_runs(argv, expected, capsys, tmp_path):
    store = tmp_path / "s.db"
    assert main(["run", "--store", str(store), "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0], err
    assert not store.exists()


def test_the_cap_message_says_how_to_narrow_it(capsys):
    assert main(["run", "--prune", "0.05:0.95:70", "--quiet"]) == 2
    line = capsys.readouterr().err
    assert "give fewer values to --prune (70 values)" in line and "--max-variants" in line
    picked, enabled = choices("--prune", "0.05:0.95:70")
    assert len(plan_variants(picked, enabled, max_variants=100)) == 71


# -- the variant set for each combination of axes -------------------------------------------

def test_methods_times_ratios_and_readable_names():
    assert names("--prune", "0.2,0.6", "--prune-method", "l1,channel") == [
        "baseline", "prune-l1-0.2", "prune-l1-0.6", "prune-channel-0.2", "prune-channel-0.6"]


def test_distillation_axes_and_one_control_per_student():
    got = names("--distill", "--temperature", "1,4", "--alpha", "0.3,0.7")
    assert got == ["baseline", "distill-T1-a0.3", "distill-T1-a0.7", "distill-T4-a0.3",
                   "distill-T4-a0.7", "student-scratch"]
    got = names("--distill", "--student", "seed_cnn_narrow,mlp_small")
    assert got == ["baseline", "distill-T4-seed_cnn_narrow", "distill-T4-mlp_small",
                   "student-scratch-seed_cnn_narrow", "student-scratch-mlp_small"]


def test_int8_modes_amp_dtypes_and_the_combined_cross_product():
    assert names("--int8", "dynamic,static,qat") == ["baseline", "int8-dynamic", "int8-static",
                                                     "int8-qat"]
    assert names("--amp", "bf16,fp16") == ["baseline", "amp-bf16", "amp-fp16"]
    got = names("--prune", "0.3,0.6", "--int8", "static,dynamic", combine=True)
    assert got[-4:] == ["prune-l1-0.3+int8-static", "prune-l1-0.3+int8-dynamic",
                        "prune-l1-0.6+int8-static", "prune-l1-0.6+int8-dynamic"]
    assert len(got) == 1 + 2 + 2 + 4


def test_every_variant_carries_its_axes():
    picked, enabled = choices("--prune", "0.2,0.6", "--prune-method", "l1,channel", "--distill",
                              "--temperature", "2,4")
    variants = {v.name: v for v in plan_variants(picked, enabled)}
    assert variants["prune-channel-0.6"].axes_dict() == {"prune.method": "channel",
                                                         "prune.ratio": 0.6}
    assert variants["distill-T2"].axes_dict() == {"distill.temperature": 2.0}
    assert variants["baseline"].axes_dict() == {}
    assert variants["student-scratch"].axes_dict() == {}
    # A spec with axes round-trips (jobs carry specs as JSON).
    spec = SweepSpec.from_choices(picked, enabled)
    assert SweepSpec.from_dict(spec.to_dict()) == spec


# -- the estimate ------------------------------------------------------------------------------

def _stored(spec: SweepSpec, phases: dict[str, tuple[float, float, int]]) -> dict:
    """A stored run of ``spec`` whose variants took (build s, measure s, cache misses)."""
    variants = []
    for v in spec.variants:
        build, measure, misses = phases[v.name]
        variants.append({"name": v.name, "error": None,
                         "raw": {"phase_s": {"build": build, "latency": measure},
                                 "cache": {"hits": 1 - misses, "misses": misses}}})
    return {"run_id": "r1", "kind": "sweep", "model": spec.model, "dataset": spec.dataset,
            "spec": spec.to_dict(), "variants": variants}


def test_the_estimate_from_a_fake_history():
    from benchmarks.run.estimate import estimate_sweep
    old = SweepSpec.from_toggles(prune=0.5, epochs=2)
    history = [_stored(old, {"baseline": (10.0, 1.0, 1), "prune-l1-0.5": (4.0, 1.0, 1)})]
    # The same sweep again: everything cached, only the measuring remains.
    again = estimate_sweep(old, history)
    assert again.seconds == pytest.approx(2.0) and again.cached == 2 and again.known == 2
    assert "2 variants; about 2 s (from 1 earlier run; 2 cached)" == again.describe()
    # A new ratio: its training is estimated from the same technique's earlier one.
    wider = SweepSpec.from_toggles(prune=(0.5, 0.7), epochs=2)
    estimate = estimate_sweep(wider, history)
    assert estimate.seconds == pytest.approx(1.0 + 1.0 + (4.0 + 1.0))
    assert estimate.cached == 2 and estimate.variants == 3
    # The baseline not cached any more (the CLI knows): its training counts again.
    assert estimate_sweep(old, history, baseline_cached=False).seconds == pytest.approx(12.0)
    # A technique never run here: said, not guessed.
    distill = SweepSpec.from_toggles(distill=True, epochs=2)
    partial = estimate_sweep(distill, history)
    assert partial.known == 1 and "2 without an estimate" in partial.describe()
    assert "no earlier run" in estimate_sweep(distill, []).describe()


@pytest.mark.slow
def test_the_cli_prints_the_count_and_estimate_before_running(tmp_path, cli):
    store = str(tmp_path / "s.db")
    first = cli("run", "--prune", "0.3,0.6", "--epochs", "1", "--finetune-epochs", "1",
                "--min-time", "0.02", "--store", store)
    assert first.returncode == 0, first.stderr
    # The first run here: from the machine's speed (benchmarks.run.first_estimate).
    assert first.stderr.splitlines()[0].startswith("3 variants; about "), first.stderr
    assert "from this machine's measured speed" in first.stderr.splitlines()[0]
    second = cli("run", "--prune", "0.3,0.6,0.9", "--epochs", "1", "--finetune-epochs", "1",
                 "--min-time", "0.02", "--store", store)
    assert second.returncode == 0, second.stderr
    assert second.stderr.splitlines()[0].startswith("4 variants; about ")
    assert "3 cached" in second.stderr.splitlines()[0]


# -- curves from rows (figure data, not pixels) -------------------------------------------------

def _rows():
    from benchmarks.report.comparisons import comparison_rows
    from benchmarks.report.results import VariantResult
    results = [VariantResult.of("baseline", accuracy=0.98, latency_samples_ms=[10.0] * 10,
                                size_bytes=4 * 2**20, batch_size=32)]
    for method in ("l1", "channel"):
        for ratio in (0.2, 0.5, 0.8):
            failed = method == "channel" and ratio == 0.8
            results.append(VariantResult.of(
                f"prune-{method}-{ratio}", ["prune"],
                accuracy=None if failed else 0.98 - ratio / 10,
                latency_samples_ms=[] if failed else [10.0 * (1 - ratio / 2)] * 10,
                size_bytes=None if failed else 4 * 2**20 * (1 - ratio), batch_size=32,
                axes={"prune.method": method, "prune.ratio": ratio},
                error="channel pruning failed" if failed else None))
    return comparison_rows(results)


def test_curves_are_built_per_swept_axis_with_a_line_per_method():
    from dashboard import charts
    rows = _rows()
    assert charts.swept_axes(rows) == ["prune.method", "prune.ratio"]
    # Curves only over the numeric setting: the method is a line each, never an x axis.
    assert charts.curve_axes(rows) == ["prune.ratio"]
    with pytest.raises(ValueError, match="prune.method takes categories"):
        charts.curve_chart(rows, "prune.method")
    fig = charts.curve_chart(rows, "prune.ratio")
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert {t.name for t in lines} == {"method=l1", "method=channel"}
    accuracy_l1 = next(t for t in lines if t.name == "method=l1" and t.xaxis == "x")
    assert list(accuracy_l1.x) == [0.2, 0.5, 0.8]
    assert list(accuracy_l1.y) == pytest.approx([96.0, 93.0, 90.0])
    failed = [t for t in fig.data if t.name == "failed"]
    assert failed and all(list(t.x) == [0.8] for t in failed)
    baselines = [s for s in fig.layout.shapes if s.line.dash == "dash"]
    assert len(baselines) == 3  # accuracy, p50 and size: the baseline across each subplot
    assert sorted(s.y0 for s in baselines) == pytest.approx(sorted([98.0, 10.0, 4.0]))


def test_charts_stay_legible_with_long_names_and_an_axis_fitted_to_accuracy():
    from dashboard import charts
    rows = _rows()
    rows[1]["variant"] = "prune-channel-0.5+distill-T4+int8-static+amp-bf16"
    fig = charts.accuracy_chart(rows)
    assert all(len(label) <= charts.SHORT_LABEL for trace in fig.data for label in trace.y)
    # The full name on hover (the dots are one trace per kind of change, in the legend).
    assert rows[1]["variant"] in [c[0] for trace in fig.data for c in trace.customdata]
    low, high = fig.layout.xaxis.range
    assert low > 80 and high <= 100  # fitted, not 0-100
    front = ["baseline"]
    pareto = charts.pareto_chart(rows, front)
    # Labels are annotations placed clear of every marker (no trace text).
    labelled = [t for trace in pareto.data for t in (trace.text or ()) if t] + \
        [a.text for a in pareto.layout.annotations]
    assert labelled == ["baseline"]  # the frontier only; the rest on hover
