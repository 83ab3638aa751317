import json
import statistics

import pytest
import torch

from benchmarks.measure.latency import Clock, LatencyTracker
from benchmarks.report.comparisons import comparison_rows, pareto_front
from benchmarks.report.records import LatencyStats
from benchmarks.report.results import VariantResult


class FakeClock(Clock):
    """Each timed call 'takes' the next value of a script, so statistics are exact."""

    def __init__(self, script_ms):
        self.script = list(script_ms)
        self.i = 0

    def start(self):
        return None

    def stop(self, token):
        ms = self.script[self.i % len(self.script)]
        self.i += 1
        return ms


def test_tracker_runs_warmup_then_at_least_min_runs_and_keeps_samples():
    calls = []
    tracker = LatencyTracker(min_runs=10, min_time_s=0.0, warmup=3,
                             clock=FakeClock([float(i) for i in range(1, 11)]))
    samples = tracker.run(lambda: calls.append(1))
    assert len(calls) == 13  # 3 warm-up calls are never timed
    assert samples == [float(i) for i in range(1, 11)]


def test_tracker_collects_about_min_time_of_samples():
    tracker = LatencyTracker(min_runs=10, min_time_s=1.0, warmup=0, clock=FakeClock([50.0]))
    samples = tracker.run(lambda: None)
    assert len(samples) == 20  # 20 x 50 ms = 1 s


def test_statistics_are_derived_from_samples():
    samples = [float(i) for i in range(1, 101)]
    stats = LatencyStats.from_samples(samples, batch_size=4)
    assert stats.p50 == pytest.approx(50.5)
    assert stats.p90 == pytest.approx(90.1)
    assert stats.p99 == pytest.approx(99.01)
    assert stats.mean == pytest.approx(50.5)
    assert stats.std == pytest.approx(statistics.pstdev(samples))
    assert stats.n == 100
    assert stats.noisy  # IQR of 1..100 is ~50% of the median


def test_a_steady_measurement_is_not_flagged():
    stats = LatencyStats.from_samples([10.0, 10.1, 9.9, 10.0, 10.05] * 4, batch_size=1)
    assert not stats.noisy
    assert stats.iqr_over_median < 0.1


def test_result_round_trips_through_json():
    r = VariantResult.of(name="prune-l1-0.5", techniques=["prune"],
                         config={"prune": {"ratio": 0.5}},
                         accuracy=0.97, latency_samples_ms=[1.0, 2.0, 3.0], batch_size=32,
                         peak_memory_bytes=2048, memory_method="m", size_bytes=1000,
                         size_gzip_bytes=500, params=10, nonzero_params=5, flops=100,
                         layer_sparsity={"0": 0.5}, phase_s={"latency": 1.2})
    back = VariantResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r
    d = r.to_dict()
    assert d["latency_ms"]["p50"] == 2.0 and d["latency_ms"]["batch_size"] == 32
    assert d["throughput"] == pytest.approx(32 / 0.002)
    for key in ("name", "techniques", "config", "device", "accuracy", "latency_ms", "throughput",
                "peak_memory_mb", "memory_method", "size_mb", "size_gzip_mb", "params",
                "nonzero_params", "flops", "error"):
        assert key in d


def test_every_records_field_round_trips_under_its_flat_name():
    """The records split VariantResult, not its JSON: each field of Timing, Scores, Cost and
    Provenance is written under the name the flat result used (top level or ``raw``), is read
    back into its record, and ``of`` routes the same flat names."""
    from dataclasses import asdict, fields

    from benchmarks.report.records import Cost, Provenance, Scores, Timing
    host = asdict(LatencyStats.from_samples([0.5, 0.7], 4))
    figures = {"latency_samples_ms": [1.0, 2.0], "batch_size": 4, "timing": {"method": "m"},
               "cpu_latency_samples_ms": [3.0], "host_samples_ms": [0.5], "round_p50_ms": [1.5],
               "cpu_round_p50_ms": [3.0], "timed_calls": 2, "timed_window_s": 0.1,
               "sample_stats": {"host_samples_ms": host},
               "accuracy": 0.5, "correct_bits": "AQ==", "n_test": 2, "seeds": [0, 1],
               "seed_accuracies": [0.5, 0.4], "predictions": "u1:AAE=",
               "size_bytes": 10, "size_gzip_bytes": 5, "params": 3, "nonzero_params": 2,
               "flops": 7, "flops_effective": 6, "layer_sparsity": {"0": 0.1},
               "peak_memory_bytes": 9, "memory_method": "live", "traffic_bytes": 8,
               "mac_census": {"fp32": 1}, "energy": {"joules_per_inference": 0.1},
               "started_at": "t", "wall_s": 1.0, "phase_s": {"build": 0.5},
               "cache": {"hits": 1}, "built_on": ["n"], "timed_on": "n"}
    # Every field of every record is named above: a field added later must be placed too.
    named = {f.name for r in (Timing, Scores, Cost, Provenance) for f in fields(r)
             if not f.name.startswith("_")} - {"how"}
    assert named == set(figures) - {"timing"}
    r = VariantResult.of("v", ["prune"], **figures)
    assert r.timing.how == {"method": "m"} and r.scores.seeds == [0, 1]
    assert r.cost.energy == {"joules_per_inference": 0.1} and r.provenance.timed_on == "n"
    d = json.loads(json.dumps(r.to_dict()))
    assert VariantResult.from_dict(d) == r
    for name, value in figures.items():
        where = d if name in ("timing", "accuracy", "params", "nonzero_params", "flops",
                              "flops_effective", "memory_method", "mac_census", "energy",
                              "built_on", "timed_on") else d["raw"]
        assert where[name] == value, name


def test_comparison_rows_give_changes_against_the_baseline():
    base = VariantResult.of("baseline", accuracy=0.9, latency_samples_ms=[10.0], size_bytes=400)
    fast = VariantResult.of("int8", ["int8"], accuracy=0.89, latency_samples_ms=[2.5],
                            size_bytes=100)
    broken = VariantResult.of("x", ["prune"], error="boom")
    rows = comparison_rows([base, fast, broken])
    assert rows[1]["accuracy_vs_base"] == pytest.approx(-1.0)
    assert rows[1]["p50_ms_vs_base"] == pytest.approx(0.25)
    assert rows[1]["size_mb_vs_base"] == pytest.approx(0.25)
    assert rows[2]["p50_ms_vs_base"] is None and rows[2]["error"] == "boom"


def test_pareto_front_keeps_non_dominated_points():
    pts = [("a", 0.9, 10.0), ("b", 0.95, 20.0), ("c", 0.85, 15.0), ("d", 0.96, 30.0)]
    assert pareto_front(pts) == ["a", "b", "d"]


def test_tracker_nearest_stops_at_the_call_nearest_the_budget():
    # A 90 ms call against a 100 ms budget: one call falls 10 ms short, two go 80 ms over.
    nearest = LatencyTracker(min_runs=1, min_time_s=0.1, warmup=0, clock=FakeClock([90.0]),
                             nearest=True)
    past = LatencyTracker(min_runs=1, min_time_s=0.1, warmup=0, clock=FakeClock([90.0]))
    assert len(nearest.run(lambda: None)) == 1 and len(past.run(lambda: None)) == 2
    # Short calls still fill the budget, within half a call of it.
    filled = LatencyTracker(min_runs=1, min_time_s=0.1, warmup=0, clock=FakeClock([7.0]),
                            nearest=True)
    assert abs(sum(filled.run(lambda: None)) - 100.0) <= 3.5
