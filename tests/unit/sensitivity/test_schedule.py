"""The schedule: the multiple-choice knapsack on hand-made tables, the JSON round trip, and
its refusals (torch-free)."""

from __future__ import annotations

import itertools
import json

import pytest

from benchmarks.sensitivity.schedule import (
    Option,
    build_schedule,
    composed_saving,
    greedy,
    lagrangian,
    read_schedule,
    schedule_variant,
    solve,
    write_schedule,
)
from benchmarks.spec.variant import VariantSpec
from optimizers.schedules import canonical, parse_schedule

# Three groups: "a" cheap to cut and slow (cut it hard), "b" fragile (leave it), "c" in
# between. Levels 0 / 0.5 / 0.75 as (drop in points, ms saved).
TABLE = {
    "a": [Option(0.0, 0.0, 0.0), Option(0.5, 0.1, 4.0), Option(0.75, 0.3, 6.0)],
    "b": [Option(0.0, 0.0, 0.0), Option(0.5, 3.0, 1.0), Option(0.75, 9.0, 1.5)],
    "c": [Option(0.0, 0.0, 0.0), Option(0.5, 0.4, 2.0), Option(0.75, 1.2, 3.0)],
}


def brute_force(table, budget):
    best, best_saved = None, -1.0
    for pick in itertools.product(*table.values()):
        drop, saved = sum(o.drop for o in pick), sum(o.saved for o in pick)
        if drop <= budget + 1e-12 and saved > best_saved:
            best, best_saved = dict(zip(table, pick)), saved
    return best


@pytest.mark.parametrize("budget", [0.05, 0.1, 0.5, 1.0, 1.5, 4.0, 20.0])
@pytest.mark.parametrize("solver", [greedy, lagrangian])
def test_the_knapsack_stays_within_its_budget_and_finds_the_best_choice(solver, budget):
    choice = solver(TABLE, budget)
    assert set(choice) == set(TABLE)
    drop = sum(o.drop for o in choice.values())
    saved = sum(o.saved for o in choice.values())
    best = brute_force(TABLE, budget)
    assert drop <= budget + 1e-12
    assert saved == pytest.approx(sum(o.saved for o in best.values()))


def test_within_one_point_the_fragile_group_is_left_whole():
    choice = solve(TABLE, 1.0)
    assert choice["b"].level == 0.0 and choice["a"].level == 0.75 and choice["c"].level == 0.5


def test_greedy_by_rate_can_miss_what_the_lagrangian_sweep_and_its_fill_find():
    # Greedy takes "x" first (the best rate) and then cannot afford "y"; the optimum is "y".
    table = {"x": [Option(0, 0, 0), Option(0.5, 0.2, 1.0)],
             "y": [Option(0, 0, 0), Option(0.5, 1.0, 4.0)]}
    assert sum(o.saved for o in greedy(table, 1.0).values()) == pytest.approx(1.0)
    assert sum(o.saved for o in lagrangian(table, 1.0).values()) == pytest.approx(4.0)


def test_a_budget_must_be_positive_and_the_solver_known():
    with pytest.raises(ValueError, match="above 0 points"):
        solve(TABLE, 0.0)
    with pytest.raises(ValueError, match="solver must be one of lagrangian, greedy"):
        solve(TABLE, 1.0, "exact")


def _rows():
    """Map rows of two groups, as the mapper writes them."""
    def cell(root, level, change, saving, removed):
        return {"root": root, "kind": "prune.channel", "level": level, "error": None,
                "accuracy_change": change, "saving": saving, "latency_share": 0.5,
                "macs_removed_by_module": removed}
    return [cell("conv1", 0.5, -0.2, 0.2, {"conv1": 0.5, "conv2": 0.5}),
            cell("conv1", 0.75, -2.0, 0.3, {"conv1": 0.75, "conv2": 0.75}),
            cell("conv2", 0.5, -0.3, 0.2, {"conv2": 0.5, "fc": 0.5}),
            cell("conv2", 0.75, +0.3, 0.3, {"conv2": 0.75, "fc": 0.75})]


def test_a_schedule_names_every_group_and_what_the_map_predicts():
    doc = build_schedule(_rows(), model="seed_cnn", technique="prune.channel", budget_pts=1.0,
                         baseline_ms=10.0, dataset="digits")
    # conv2 at 0.75 "gains" 0.3 points: a gain buys no budget, it costs nothing either.
    assert doc["groups"] == {"conv1": 0.5, "conv2": 0.75}
    assert doc["model"] == "seed_cnn" and doc["dataset"] == "digits"
    assert doc["predicted"]["accuracy_change_pts"] == pytest.approx(-0.2)
    assert doc["predicted"]["saved_ms"] == pytest.approx(10.0 * (0.2 + 0.3))
    parse_schedule(doc)


def test_the_predicted_saving_composes_a_layer_cut_by_two_groups():
    shares = {"conv1": 0.2, "conv2": 0.6, "fc": 0.2}
    # conv2 loses half its multiply-adds to conv1's group and half of the rest to its own:
    # 0.75 of them, not 1.0.
    saved = composed_saving(_rows(), {"conv1": 0.5, "conv2": 0.5}, shares)
    assert saved == pytest.approx(0.2 * 0.5 + 0.6 * 0.75 + 0.2 * 0.5)


def test_the_schedule_round_trips_through_its_file_and_as_a_variant(tmp_path):
    doc = build_schedule(_rows(), model="seed_cnn", technique="prune.channel", budget_pts=1.0,
                         baseline_ms=10.0)
    path = tmp_path / "schedule.json"
    write_schedule(path, doc)
    again = read_schedule(path)
    assert again == doc and canonical(again) == canonical(doc)
    # Edited by hand (one group's level changed, keys reordered): still a schedule.
    edited = json.loads(path.read_text())
    edited["groups"] = {"conv2": 0.25, "conv1": 0.5}
    path.write_text(json.dumps(edited))
    variant = schedule_variant(read_schedule(path), finetune_epochs=0)
    assert variant.techniques == ("prune",)
    settings = variant.prune
    assert settings.method == "channel" and settings.ratio == 0.0
    assert settings.finetune_epochs == 0
    assert parse_schedule(settings.schedule)["groups"] == {"conv1": 0.5, "conv2": 0.25}
    assert VariantSpec.from_dict(variant.to_dict()) == variant
    assert variant.name.startswith("prune-channel-schedule-")


def test_an_int8_schedule_keeps_groups_float_by_level_zero():
    rows = [{"root": r, "kind": "int8.static", "level": 1.0, "error": None,
             "accuracy_change": change, "saving": 0.1, "latency_share": 0.1}
            for r, change in (("0", -0.1), ("2", -3.0), ("5", 0.0))]
    doc = build_schedule(rows, model="seed_cnn", technique="int8.static", budget_pts=0.5,
                         baseline_ms=1.0)
    assert doc["groups"] == {"0": 1, "2": 0, "5": 1}
    variant = schedule_variant(doc)
    assert variant.techniques == ("int8",) and variant.int8.mode == "static"


@pytest.mark.parametrize("text, message", [
    ("not json", "a schedule must be JSON"),
    ("[1, 2]", "a JSON object"),
    ('{"technique": "prune.global", "groups": {"a": 0.5}}', "technique must be one of"),
    ('{"technique": "prune.channel", "groups": {}}', "non-empty object"),
    ('{"technique": "prune.channel", "groups": {"a": 1.0}}', "in \\[0, 1\\)"),
    ('{"technique": "prune.channel", "groups": {"a": "half"}}', "must be a number"),
    ('{"technique": "int8.static", "groups": {"a": 0.5}}', "1 \\(quantized\\) or 0"),
])
def test_a_malformed_schedule_file_is_refused_naming_the_file(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as exc:
        read_schedule(path)
    assert str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_a_schedule_for_another_method_is_refused_by_the_settings():
    from optimizers.settings import Int8Settings, PruneSettings
    text = '{"technique": "prune.channel", "groups": {"a": 0.5}}'
    with pytest.raises(ValueError, match="prune.schedule is a prune.channel schedule; it "
                                         "needs prune.method channel, got 'l1'"):
        PruneSettings(0.0, "l1", schedule=text)
    with pytest.raises(ValueError, match="int8.schedule is a prune.channel schedule"):
        Int8Settings("static", schedule=text)
