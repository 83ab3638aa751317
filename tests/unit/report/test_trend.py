"""History as a trend (benchmarks/report/trend.py): a run made slower on purpose is flagged
against the run before it on the same machine, and only there; an accuracy change is flagged
by the paired test on the same examples."""

from __future__ import annotations

from benchmarks.report import stats
from benchmarks.report.results import VariantResult
from benchmarks.report.trend import machine_of, p50_interval, trend, trend_figure
from benchmarks.store.database import ResultsStore
from helpers import store_history


def test_a_run_made_slower_on_purpose_is_flagged_and_the_steady_ones_are_not(store_path):
    ids = store_history(store_path, runs=5, slow_run=3)
    points = trend(ResultsStore(store_path).runs(kind="sweep"))
    assert [p.run_id for p in points if p.variant == "baseline"] == ids  # oldest first
    flagged = {(p.run_id, p.variant): p.flags for p in points if p.flags}
    for variant in ("baseline", "prune-l1-0.5"):
        assert any("slower" in f for f in flagged[(ids[3], variant)])
        assert any("faster" in f for f in flagged[(ids[4], variant)])  # back to normal
    assert all(run_id in ids[3:] for run_id, _ in flagged)
    assert not any("accuracy" in f for flags in flagged.values() for f in flags)
    first = next(p for p in points if p.run_id == ids[0] and p.variant == "baseline")
    assert (first.commit, first.machine) == ("c0ffee0", "bench-a")
    fig = trend_figure(points)
    assert {t.name for t in fig.data if t.showlegend is not False} >= {
        "baseline", "prune-l1-0.5", "change beyond its noise (hover for why)"}


def test_latency_is_compared_only_on_the_same_machine(store_path):
    ids = store_history(store_path, runs=2, slow_run=1)
    import sqlite3
    import json
    with sqlite3.connect(store_path) as db:
        db.execute("UPDATE runs SET environment=? WHERE run_id=?",
                   (json.dumps({"host": "bench-b"}), ids[1]))
    points = trend(ResultsStore(store_path).runs(kind="sweep"))
    assert not any(p.flags for p in points)
    assert {p.machine for p in points} == {"bench-a", "bench-b"}


def test_an_accuracy_drop_beyond_its_noise_is_flagged():
    right = [True] * 340 + [False] * 20
    worse = [False] * 30 + right[30:]  # 30 examples lost, none gained: p << 0.05

    def run(i, bits):
        return {"run_id": f"r{i}", "created_at": f"2026-01-0{i}", "environment": {},
                "variants": [VariantResult.of("baseline", accuracy=sum(bits) / 360,
                                              correct_bits=stats.pack_bits(bits), n_test=360,
                                              batch_size=32).to_dict()]}
    a, b = trend([run(2, worse), run(1, right)])
    assert a.run_id == "r1" and not a.flags
    assert len(b.flags) == 1 and b.flags[0].startswith("accuracy down 8.33 pts")


def test_p50_interval_from_rounds_or_samples_and_the_machine_named():
    timed = VariantResult.of("v", latency_samples_ms=[1.0 + 0.01 * k for k in range(100)],
                             batch_size=1)
    low, high = p50_interval(timed)
    assert low < timed.timing.latency.p50 < high
    timed.timing.round_p50_ms = [1.0, 1.1, 0.9]
    low, high = p50_interval(timed)
    assert low < 1.0 < high
    assert p50_interval(VariantResult.of("v", batch_size=1)) is None
    assert machine_of({"peaks": {"cpu": {"host": "h1"}}}) == "h1"
    assert machine_of({"cpu": "EPYC", "device_name": "EPYC"}) == "EPYC · EPYC"
