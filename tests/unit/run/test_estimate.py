"""The estimate before a run (issue 32.5): runtime cells and a run's time outside its rows
counted from what earlier runs spent on them, a lower bound for the first run here, the
estimate stored with the run beside what it took; and a recommend run shown as its own kind
(32.17) without changing the stored kind that trend and export readers filter on."""

from __future__ import annotations

import pytest

from benchmarks.run.estimate import (actual_seconds, estimate_error, estimate_recommend,
                                     estimate_sweep, shown_kind)
from benchmarks.spec.sweep import SweepSpec


def _row(name: str, phases: dict, runtime: str | None = None, of: str | None = None) -> dict:
    row = {"name": name, "error": None, "raw": {"phase_s": phases,
                                                "cache": {"hits": 1, "misses": 0}}}
    if runtime:
        row["runtime"] = {"name": runtime, "variant": of or name}
    return row


def _run(spec: SweepSpec, rows: list[dict], wall_s: float) -> dict:
    return {"run_id": "r1", "kind": "sweep", "model": spec.model, "dataset": spec.dataset,
            "spec": spec.to_dict(), "variants": rows, "status": "complete",
            "created_at": "2020-01-01T00:00:00.000+00:00",
            "finished_at": f"2020-01-01T00:00:{wall_s:06.3f}+00:00"}


def test_runtime_cells_and_the_runs_overhead_count_what_they_cost_before():
    spec = SweepSpec.from_toggles(prune=0.5, epochs=1, runtimes=("eager", "ort"))
    rows = [_row("baseline", {"latency": 1.0}, "eager"),
            _row("baseline@ort", {"prepare": 6.0, "accuracy": 1.0, "latency": 1.0}, "ort",
                 "baseline"),
            _row("prune-l1-0.5", {"latency": 1.0}, "eager"),
            _row("prune-l1-0.5@ort", {"prepare": 6.0, "accuracy": 1.0, "latency": 1.0},
                 "ort", "prune-l1-0.5")]
    history = [_run(spec, rows, wall_s=30.0)]  # 18 s in rows, 12 s outside them
    estimate = estimate_sweep(spec, history)
    # Each variant's own measuring (1 s), its ORT cell (8 s), the run's 12 s outside rows:
    # the same sweep again is estimated at what it took (the variants only measured before).
    assert estimate.cells == 2 and estimate.overhead_s == pytest.approx(12.0)
    assert estimate.seconds == pytest.approx(2 * (1.0 + 8.0) + 12.0)
    assert estimate.seconds == pytest.approx(actual_seconds(history[0]))
    assert "2 runtime cells" in estimate.describe()


def test_the_first_run_here_is_told_its_timing_floor_and_later_unknowns_count_it():
    spec = SweepSpec.from_toggles(prune=(0.3, 0.6), epochs=1, min_time_s=2.0)
    first = estimate_sweep(spec, [])
    assert first.seconds is None and first.floor_s == pytest.approx(3 * 2.0)
    assert "at least 6 s of timing, training on top" in first.describe()


def test_the_estimate_is_shown_beside_what_the_run_took():
    spec = SweepSpec.from_toggles(prune=0.5, epochs=1)
    run = _run(spec, [], wall_s=40.0)
    assert estimate_error(run) == "took 40 s, no estimate"
    run["environment"] = {"estimate": estimate_sweep(spec, []).to_dict() | {"seconds": 10.0}}
    assert estimate_error(run) == "took 40 s, estimated 10 s (-75%)"
    assert estimate_error({**run, "finished_at": None}).startswith("not finished")


def test_a_recommend_run_shows_as_recommend_but_stays_a_sweep_for_its_readers():
    spec = SweepSpec.from_toggles(prune=0.5, epochs=1)
    run = {**_run(spec, [], 1.0), "spec": {**spec.to_dict(), "recommend": {"margin": "1pt"}}}
    assert run["kind"] == "sweep" and shown_kind(run) == "recommend"
    assert shown_kind(_run(spec, [], 1.0)) == "sweep"
    assert shown_kind({"kind": "distributed", "spec": {}}) == "distributed"


def test_a_recommendation_is_estimated_from_earlier_ones_else_at_least_from_sweeps():
    """Issue 32.14: the Recommend panel says how long before it is queued."""
    spec = SweepSpec.from_toggles(prune=0.5, epochs=1)
    assert "no earlier run of this model and data set" in estimate_recommend(8, []).describe()
    sweep = _run(spec, [_row("baseline", {"train": 30.0, "latency": 10.0}),
                        _row("prune-l1-0.5", {"train": 50.0, "latency": 10.0}),
                        _row("prune-l1-0.5@ort", {"prepare": 99.0}, "ort", "prune-l1-0.5")],
                 wall_s=59.0)
    from_sweeps = estimate_recommend(3, [sweep])  # 4 variants at the median row (50 s)
    assert from_sweeps.at_least and from_sweeps.seconds == pytest.approx(4 * 50.0)
    assert from_sweeps.describe().startswith("at least 3 min (4 variants at the median of 2")
    rec = {**_run(spec, [], 0.0), "finished_at": "2020-01-01T00:15:00+00:00",
           "recommendation": {"search": {"trials": [{"name": f"t{i}"} for i in range(9)]}}}
    assert shown_kind(rec) == "recommend"
    # 900 s for 9 trials and the baseline: 90 s a variant, whatever the sweeps took.
    again = estimate_recommend(4, [rec, sweep])
    assert not again.at_least and again.seconds == pytest.approx(5 * 90.0)
    assert again.describe() == ("about 8 min (from 1 earlier recommendation of this model "
                                "and data set here)")
    capped = estimate_recommend(4, [rec], budget_s=120.0).describe()
    assert capped.startswith("about 2 min (the budget ends the search; about 8 min without")
    unfinished = {**rec, "status": "running"}
    assert estimate_recommend(4, [unfinished, sweep]).at_least  # only what ended counts


def test_history_on_the_cli_lists_the_kind_and_the_estimate_beside_the_time(tmp_path, capsys):
    from types import SimpleNamespace

    from benchmarks.cli.listing import cmd_history
    from benchmarks.store.database import ResultsStore
    store = ResultsStore(tmp_path / "s.db")
    spec = SweepSpec.from_toggles(prune=0.5, epochs=1).to_dict()
    run_id = store.start_run(model="seed_cnn", dataset="digits", device="cpu",
                             spec={**spec, "recommend": {"margin": "1pt"}},
                             environment={"estimate": {"seconds": 12.0}})
    store.finish_run(run_id, "complete")
    assert cmd_history(SimpleNamespace(store=str(store.path), limit=5, json=False)) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert f"{run_id}  " in line and " recommend " in line and " sweep " not in line
    assert "estimated 12 s" in line and "took " in line
