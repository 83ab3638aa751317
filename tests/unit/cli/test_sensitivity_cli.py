"""`compression-bench sensitivity` and `run --schedule FILE` from outside: bad input is one
line and exit 2 (naming the groups or the model); a map writes its rows, its stored run and
the schedule, which `run --schedule` then applies and measures beside the baseline."""

from __future__ import annotations

import json

import pytest

from helpers import FAST_CLI, run_cli

CONVS_ONLY = '''from torch import nn


def build(num_classes, in_channels):
    return nn.Sequential(nn.Conv2d(in_channels, num_classes, 8), nn.Flatten())
'''


def assert_one_line(p, *fragments):
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert_line_of(p.stderr, *fragments)


def assert_line_of(stderr: str, *fragments):
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in stderr


def assert_refused(capsys, args, *fragments):
    """In process (torch is loaded once for the suite): exit 2 and one line."""
    from benchmarks.cli.main import main
    assert main(args) == 2
    assert_line_of(capsys.readouterr().err, *fragments)


@pytest.mark.parametrize("levels, message", [
    ("0.5,1.5", "sensitivity.levels must each be in (0, 1) (the fraction removed); got 1.5"),
    ("0,0.5", "sensitivity.levels must each be in (0, 1) (the fraction removed); got 0.0"),
    ("", "sensitivity.levels needs at least one level in (0, 1)"),
])
def test_levels_outside_0_1_or_none_at_all_are_refused(levels, message):
    assert_one_line(run_cli("sensitivity", "--levels", levels, "--no-store"), message)


def test_a_drop_budget_reads_as_points():
    assert_one_line(run_cli("sensitivity", "--max-drop", "1%", "--no-store"),
              "sensitivity.max_drop must be points of accuracy", "1pt")


def test_a_technique_with_no_groups_on_this_model_names_the_model(tmp_path, capsys):
    model = tmp_path / "convs.py"
    model.write_text(CONVS_ONLY)
    assert_refused(capsys, ["sensitivity", "--model", f"{model}:build", "--technique",
                      "int8.dynamic", "--no-store", *FAST_CLI],
             f"int8.dynamic finds no groups on model {model}:build",
             "Linear/LSTM/GRU layers and this model has none")


def test_a_schedule_for_another_model_or_naming_groups_it_lacks_is_refused(tmp_path, capsys):
    schedule, store = tmp_path / "s.json", tmp_path / "s.db"
    schedule.write_text(json.dumps({"model": "resnet18", "technique": "prune.channel",
                                    "groups": {"conv1": 0.5}}))
    assert_refused(capsys, ["run", "--schedule", str(schedule), *FAST_CLI],
             "was written for model resnet18; this run's model is seed_cnn")
    schedule.write_text(json.dumps({"model": "seed_cnn", "technique": "prune.channel",
                                    "groups": {"0": 0.5, "features.3": 0.25}}))
    assert_refused(capsys, ["run", "--schedule", str(schedule), *FAST_CLI, "--store", str(store)],
             "names groups model seed_cnn does not have for prune.channel: features.3",
             "(its groups: ")
    assert not store.exists()  # refused before the store records anything
    schedule.write_text("{not json")
    assert_refused(capsys, ["run", "--schedule", str(schedule), *FAST_CLI],
             f"--schedule {schedule}: a schedule must be JSON")


def test_a_map_writes_its_schedule_and_run_schedule_measures_it(tmp_path):
    store, out, doc = tmp_path / "s.db", tmp_path / "schedule.json", tmp_path / "map.json"
    p = run_cli("sensitivity", "--levels", "0.5", "--max-drop", "1pt", "--out", str(out),
                "--json", str(doc), "--store", str(store), *FAST_CLI)
    assert p.returncode == 0, p.stderr
    assert "group root" in p.stdout and f"written to {out}" in p.stderr
    # The predicted saving beside the measured one, and a verify command fine-tuning as the
    # prediction assumed (the map's cells: none).
    assert "latency saved (p50): predicted" in p.stderr
    assert f"--schedule {out} --finetune-epochs 0`" in p.stderr
    found = json.loads(doc.read_text())["sensitivity"]
    assert {r["root"] for r in found["rows"]} == {"0", "2"}
    assert all(r["kind"] == "prune.channel" and len(r["accuracy_change_ci"]) == 2
               for r in found["rows"])
    schedule = json.loads(out.read_text())
    assert schedule["model"] == "seed_cnn" and set(schedule["groups"]) == {"0", "2"}
    from benchmarks.store.database import ResultsStore
    (stored,) = ResultsStore(store).runs(kind="sensitivity")
    assert stored["status"] == "complete" and len(stored["variants"]) == 2

    verified = tmp_path / "verified.json"
    # No --finetune-epochs: the schedule's own (0), not the usual 2.
    p = run_cli("run", "--schedule", str(out), "--json", str(verified), "--store", str(store),
                *FAST_CLI)
    assert p.returncode == 0, p.stderr
    variants = json.loads(verified.read_text())["variants"]
    assert [v["name"] for v in variants][0] == "baseline" and len(variants) == 2
    scheduled = variants[1]
    assert scheduled["name"].startswith("prune-channel-schedule-")
    config = scheduled["config"]["prune"]
    assert config["finetune_epochs"] == 0
    assert config["schedule"]["groups"] == schedule["groups"]
    assert config["schedule"]["predicted"] == schedule["predicted"]
    assert scheduled["p_value_vs_baseline"] is not None
    assert scheduled["diagnostics"]["output"]["sqnr_db"] is not None
    assert "flips_vs_baseline" in scheduled

