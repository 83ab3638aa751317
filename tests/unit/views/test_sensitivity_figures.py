"""The sensitivity map's figures, from rows: the heatmap's grid (coloured by the interval's
lower bound, hatched within noise), the scatter's points, a variant's layers, and a
schedule's prediction beside its measured change."""

from __future__ import annotations

import pytest

from benchmarks.report.results import VariantResult
from benchmarks.views.sensitivity import (
    HATCH,
    MISSING_COLOR,
    heatmap,
    heatmap_data,
    layers_chart,
    scatter,
    scatter_data,
    schedule_checks,
)
from benchmarks.sensitivity.record import MapCell, StoredMap
from benchmarks.report.stats import pack_bits


def _row(root, level, change, ci, share=0.3, error=None):
    return {"name": f"{root}@{level:g}", "root": root, "group": [root], "kind": "prune.channel",
            "level": level, "accuracy_change": None if error else change,
            "accuracy_change_ci": None if error else ci, "latency_share": share,
            "error": error}


STORED = [_row("conv1", 0.5, -0.3, [-1.2, 0.6]), _row("conv1", 0.75, -1.0, [-2.1, -0.2]),
          _row("neck", 0.5, -8.0, [-11.0, -5.5], 0.1),
          _row("neck", 0.75, -14.0, [-18.0, -10.0], 0.1),
          _row("fc_in", 0.5, 0.2, [-0.5, 0.9], 0.6), _row("fc_in", 0.75, None, None, 0.6, "boom")]
CELLS = [MapCell.from_dict(r) for r in STORED]


def test_the_heatmap_grid_puts_the_most_sensitive_group_first():
    data = heatmap_data(CELLS)
    assert data["groups"] == ["neck", "conv1", "fc_in"] and data["levels"] == [0.5, 0.75]
    assert data["lower"] == [[-11.0, -18.0], [-1.2, -2.1], [-0.5, None]]
    assert data["hatched"] == [[False, False], [True, False], [True, False]]
    assert data["text"][2][1] == "failed"
    assert data["text"][0][0] == "-8.00 [-11.00, -5.50]"


def test_the_heatmap_hatches_cells_within_noise_and_greys_failed_ones():
    fig = heatmap(CELLS)
    assert [t.name for t in fig.data] == ["level 0.5", "level 0.75"]
    first, second = fig.data
    assert list(first.marker.pattern.shape) == ["", HATCH, HATCH]
    assert list(first.marker.color) == [-11.0, -1.2, -0.5]
    assert list(second.marker.color)[2] == MISSING_COLOR
    # A symmetric colour axis: no loss is white whatever the worst cell.
    assert fig.layout.coloraxis.cmin == -18.0 and fig.layout.coloraxis.cmax == 18.0
    assert list(fig.layout.yaxis.ticktext) == ["neck", "conv1", "fc_in"]


def test_the_scatter_has_a_point_per_measured_cell():
    points = scatter_data(CELLS)
    assert len(points) == 5
    neck = next(p for p in points if p["root"] == "neck" and p["level"] == 0.75)
    assert neck == {"root": "neck", "level": 0.75, "share_pct": 10.0, "change": -14.0,
                    "low": -18.0, "high": -10.0}
    fig = scatter(CELLS)
    assert [t.name for t in fig.data] == ["level 0.5", "level 0.75"]
    assert list(fig.data[1].error_y.array) == [pytest.approx(0.8), pytest.approx(4.0)]


def test_a_variants_layers_chart():
    fig = layers_chart({"layers": [{"layer": "0", "sqnr_db": 35.0, "cosine": 0.999},
                                   {"layer": "2", "sqnr_db": 4.0, "cosine": 0.8}]}, "v")
    assert list(fig.data[0].y) == [35.0, 4.0] and fig.layout.title.text == "v"


def test_a_stored_map_gives_back_its_rows_and_summary():
    run = {"kind": "sensitivity", "model": "m", "variants": STORED,
           "environment": {"sensitivity": {"technique": "prune.channel", "levels": [0.5]}},
           "spec": {}}
    found = StoredMap.from_run(run)
    assert list(found.rows) == STORED and list(found.cells) == CELLS
    assert found.technique == "prune.channel" and found.levels == (0.5,)
    assert found.cells[-1].error == "boom" and not found.cells[-1].measured
    assert found.cells[0].accuracy_change_ci == (-1.2, 0.6) and found.cells[0].within_noise


def test_a_schedule_is_set_beside_what_was_measured():
    n = 100
    base = [True] * 90 + [False] * 10
    mine = [True] * 85 + [False] * 5 + [True] * 2 + [False] * 8   # 5 lost, 2 gained
    schedule = {"technique": "prune.channel", "groups": {"a": 0.5}, "max_drop_pts": 1.0,
                "predicted": {"accuracy_change_pts": -0.5}}
    variants = [
        VariantResult.of("baseline", correct_bits=pack_bits(base), n_test=n),
        VariantResult.of("prune-channel-schedule-x", ["prune"],
                         config={"prune": {"method": "channel", "schedule": schedule}},
                         correct_bits=pack_bits(mine), n_test=n),
        VariantResult.of("prune-channel-0.5", ["prune"], config={"prune": {"method": "channel"}},
                         correct_bits=pack_bits(mine), n_test=n)]
    (check,) = schedule_checks(variants, "baseline")
    assert check["variant"] == "prune-channel-schedule-x"
    assert check["predicted_pts"] == -0.5 and check["measured_pts"] == pytest.approx(-3.0)
    low, high = check["measured_ci"]
    assert low < -3.0 < high and check["within_budget"] is False
    assert 0 < check["p_value"] < 1


def test_a_schedules_predicted_saving_and_fine_tuning_are_set_beside_the_measured():
    bits = pack_bits([True] * 10)
    schedule = {"technique": "prune.channel", "groups": {"a": 0.5}, "finetune_epochs": 0,
                "predicted": {"accuracy_change_pts": 0.0, "saving": 0.25}}
    # Five interleaved rounds: the schedule's p50 about 0.7 of the baseline's in each.
    base_rounds = [1.0, 1.1, 0.9, 1.0, 1.2]
    variants = [
        VariantResult.of("baseline", correct_bits=bits, n_test=10,
                         latency_samples_ms=[1.0] * 9, round_p50_ms=base_rounds),
        VariantResult.of("prune-channel-schedule-x", ["prune"], correct_bits=bits, n_test=10,
                         config={"prune": {"method": "channel", "finetune_epochs": 2,
                                        "schedule": schedule}},
                         latency_samples_ms=[0.7] * 9,
                         round_p50_ms=[0.7 * r for r in base_rounds])]
    (check,) = schedule_checks(variants, "baseline")
    assert check["predicted_saving"] == 0.25
    assert check["measured_saving"] == pytest.approx(0.3)
    low, high = check["measured_saving_ci"]
    assert low == pytest.approx(0.3) and high == pytest.approx(0.3)
    # The schedule was predicted without fine-tuning and applied with two epochs: said.
    assert check["predicted_finetune_epochs"] == 0 and check["finetune_epochs"] == 2
    assert check["same_finetuning"] is False
