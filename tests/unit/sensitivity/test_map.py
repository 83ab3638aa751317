"""A map of a model with one deliberately fragile group (a linear bottleneck of four channels
between wide, redundant convolutions) on digits: the bottleneck ranks most sensitive at every
level that removes at least half of it, with an interval that excludes zero; the second map
of the same model and levels comes from the cache; the map is stored as a run."""

from __future__ import annotations

import time

import pytest

from helpers import FAST_TIMING

FRAGILE = '''from torch import nn


def build(num_classes, in_channels):
    return nn.Sequential(
        nn.Conv2d(in_channels, 96, 3, padding=1), nn.ReLU(),
        nn.Conv2d(96, 96, 3, padding=1), nn.ReLU(),
        nn.Conv2d(96, 4, 1),                      # the bottleneck: 4 channels, linear
        nn.Conv2d(4, 96, 3, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(96 * 8 * 8, num_classes))
'''
BOTTLENECK = "4"


@pytest.fixture(scope="module")
def fragile(tmp_path_factory):
    """(the prepared sweep, the first map, its wall time, the config): built once."""
    from benchmarks.run.cache import WeightsCache
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.sensitivity.config import SensitivityConfig
    from benchmarks.sensitivity.mapper import build_map
    from benchmarks.spec.sweep import SweepSpec
    folder = tmp_path_factory.mktemp("fragile")
    (folder / "fragile.py").write_text(FRAGILE)
    spec = SweepSpec(model=f"{folder}/fragile.py:build", epochs=8, **FAST_TIMING)
    sweep = prepare_sweep(spec, cache=WeightsCache(folder / "cache"))
    sweep.load_baseline()  # trained before the clock starts: the map's own time is compared
    config = SensitivityConfig(levels=(0.25, 0.5, 0.75), max_drop="1pt")
    t0 = time.perf_counter()
    first = build_map(sweep, config)
    return sweep, first, time.perf_counter() - t0, config


def test_the_fragile_group_is_the_most_sensitive_where_half_of_it_goes(fragile):
    _, result, _, _ = fragile
    rows = result.rows
    assert not [r for r in rows if r["error"]]
    assert {r["root"] for r in rows} == {"0", "2", BOTTLENECK, "5"}
    bottleneck = {r["level"]: r for r in rows if r["root"] == BOTTLENECK}
    halved = [level for level, r in bottleneck.items() if r["channels_kept"] <= 2]
    assert halved == [0.5, 0.75]
    for level in halved:
        cells = [r for r in rows if r["level"] == level]
        worst = min(cells, key=lambda r: r["accuracy_change"])
        assert worst["root"] == BOTTLENECK, [(r["root"], r["accuracy_change"]) for r in cells]
        assert worst["accuracy_change_ci"][1] < 0, worst  # the interval excludes zero
        assert worst["p_value"] < 0.05
    # The extremes were measured again on the whole split.
    assert any(r["evaluated_on"] == "full" for r in rows)
    assert result.subset["size"] == round(0.5 * result.subset["of"])


def test_a_row_has_the_designs_fields(fragile):
    _, result, _, _ = fragile
    row = next(r for r in result.rows if r["root"] == BOTTLENECK and r["level"] == 0.5)
    for key in ("group", "root", "kind", "level", "accuracy_change", "accuracy_change_ci",
                "p_value", "params", "macs", "latency_share", "sqnr_db", "group_sqnr_db"):
        assert key in row, key
    assert row["group"] == ["4", "5"] and row["kind"] == "prune.channel"
    assert row["params"] == 96 * 4 + 4 + 4 * 96 * 9 + 96 and row["macs"] > 0
    assert 0 < row["latency_share"] < 1 and row["sqnr_db"] < 20


def test_the_schedule_spares_the_fragile_group(fragile):
    _, result, _, _ = fragile
    schedule = result.schedule
    assert set(schedule["groups"]) == {"0", "2", BOTTLENECK, "5"}
    assert schedule["groups"][BOTTLENECK] <= 0.25
    assert schedule["predicted"]["accuracy_change_pts"] >= -1.0
    assert schedule["predicted"]["saved_ms"] > 0


def test_the_groups_shares_and_other_add_to_one_and_a_cut_counts_the_relu_it_feeds(fragile):
    _, result, _, _ = fragile
    shares = result.baseline["latency_shares"]
    assert shares["method"] == "hooks-median" and shares["rounds"] >= 15
    # Every convolution but the last is held by two groups (its output channels, the next
    # one's input): split between them, the parts and "other" add to one.
    assert set(shares["groups"]) == {"0", "2", BOTTLENECK, "5"}
    assert sum(shares["groups"].values()) + shares["other"] == pytest.approx(1.0, abs=0.01)
    assert 0 < shares["other"] < 0.5
    by_root = {r["root"]: r["latency_share"] for r in result.rows}
    assert by_root == pytest.approx(shares["groups"])
    # Half of conv "0"'s channels gone: the ReLU after it ("1") does half the work.
    row = next(r for r in result.rows if r["root"] == "0" and r["level"] == 0.5)
    assert row["work_removed_by_module"]["1"] == pytest.approx(
        1 - row["channels_kept"] / row["channels"])
    assert "1" not in row["macs_removed_by_module"]


def test_the_schedule_says_its_fine_tuning_and_its_measured_saving(fragile):
    _, result, _, config = fragile
    schedule = result.schedule
    assert schedule["finetune_epochs"] == config.finetune_epochs
    predicted, measured = schedule["predicted"], schedule["measured"]
    assert predicted["saving"] == pytest.approx(predicted["saved_ms"] / predicted["baseline_ms"])
    assert measured["rounds"] == config.verify_rounds and measured["objective"] == "p50"
    assert len(measured["round_baseline_ms"]) == config.verify_rounds
    low, high = measured["saving_ci"]
    assert low <= measured["saving"] <= high < 1


def test_a_second_map_runs_from_the_cache(fragile):
    from benchmarks.sensitivity.mapper import build_map
    sweep, first, first_s, config = fragile
    t0 = time.perf_counter()
    second = build_map(sweep, config)
    second_s = time.perf_counter() - t0
    assert second.timing["measured"] == 0 and second.timing["from_cache"] > 0
    assert [r["accuracy_change"] for r in second.rows] == \
        [r["accuracy_change"] for r in first.rows]
    assert second_s < 0.35 * first_s, (second_s, first_s)


def test_a_map_from_the_cache_reads_its_cells_paired_tests_back(fragile, monkeypatch):
    """An exact interval takes a tenth of a second: kept with its cell, a map from the
    cache (another process: no in-memory memo) computes none, and its rows are the same."""
    import dataclasses

    from benchmarks.report import stats
    from benchmarks.sensitivity.mapper import build_map
    sweep, first, _, config = fragile
    computed = []

    def counted(*args, **kwargs):
        computed.append(args)
        return stats._paired_difference.__wrapped__(*map(int, args[:3]), float(args[3]),
                                                    None)
    monkeypatch.setattr(stats, "paired_difference", counted)
    again = build_map(sweep, dataclasses.replace(config, max_drop=None))  # no schedule checks
    assert computed == []
    assert again.rows == first.rows


def test_the_map_is_stored_as_a_run_and_read_back(fragile, store):
    from benchmarks.sensitivity.record import StoredMap
    from benchmarks.views.sensitivity import heatmap_data
    from benchmarks.sensitivity.mapper import record_map
    sweep, first, _, config = fragile
    recorder = store.record(model=sweep.spec.model, dataset="digits", device="cpu",
                            spec={"sensitivity": config.to_dict()},
                            environment=sweep.environment, kind="sensitivity")
    with recorder:
        record_map(sweep, config, recorder)
    run = store.run(recorder.run_id)
    assert run["kind"] == "sensitivity" and run["status"] == "complete"
    loaded = StoredMap.from_run(run)
    assert [c.name for c in loaded.cells] == [r["name"] for r in first.rows]
    assert loaded.schedule["groups"] == first.schedule["groups"]
    assert heatmap_data(list(loaded.cells))["groups"][0] == BOTTLENECK
