"""The first estimate (issue 32.5): before any run of a model and data set here, a sweep's
time from this machine's measured speed and the work it does, refined by every earlier run
of any model; the speed measured once per machine and read back."""

from __future__ import annotations

import json

import pytest

from benchmarks.run.estimate import SPEED, actual_seconds, estimate_sweep
from benchmarks.run.first_estimate import TRAIN_PASSES, model_seconds, refinement
from benchmarks.spec.sweep import SweepSpec

# A made-up machine: 1 G multiply-adds per second training, 2 G scoring; seed_cnn on digits
# does 1 M per example over 1,000 training and 100 test examples.
SPEED_CARD = {"train_macs_per_s": 1e9, "score_macs_per_s": 2e9,
              "work": {"seed_cnn@digits": {"macs": 1_000_000, "train": 1000, "test": 100}}}


def _finished(spec: SweepSpec, wall_s: float) -> dict:
    return {"run_id": "old", "kind": "sweep", "model": spec.model, "dataset": spec.dataset,
            "spec": spec.to_dict(), "variants": [], "status": "complete",
            "created_at": "2020-01-01T00:00:00+00:00",
            "finished_at": f"2020-01-01T00:{int(wall_s // 60):02d}:{wall_s % 60:06.3f}+00:00"}


def test_the_speed_model_counts_training_scoring_and_timing_per_variant():
    # baseline trains 2 epochs; int8 static only measures; every row is timed 1 s
    spec = SweepSpec.from_toggles(int8="static", epochs=2, min_time_s=1.0).to_dict()
    train = 2 * 1000 * TRAIN_PASSES * 1e6 / 1e9       # 6 s, the baseline alone
    score = 100 * 1e6 / 2e9                             # 0.05 s per row
    assert model_seconds(spec, SPEED_CARD) == pytest.approx(train + 2 * (score + 1.0))


def test_a_pruning_that_fine_tunes_trains_and_one_that_does_not_only_measures():
    tuned = SweepSpec.from_toggles(prune=0.5, epochs=2, min_time_s=0.0).to_dict()
    plain = SweepSpec.from_toggles(prune=0.5, epochs=2, min_time_s=0.0,
                                   finetune_epochs=0).to_dict()
    assert model_seconds(tuned, SPEED_CARD) > model_seconds(plain, SPEED_CARD)


def test_what_the_speed_model_cannot_size_is_said_as_before():
    spec = SweepSpec.from_toggles(prune=0.5, epochs=1, min_time_s=2.0)
    assert model_seconds({**spec.to_dict(), "dataset": "imagefolder:/x"}, SPEED_CARD) is None
    estimate = estimate_sweep({**spec.to_dict(), "model": "resnet18"}, [], speed=SPEED_CARD)
    assert estimate.seconds is None and estimate.source != SPEED
    assert "no earlier run of this model and data set here to estimate" in estimate.describe()


def test_the_first_estimate_is_refined_by_what_earlier_runs_took_against_the_model():
    spec = SweepSpec.from_toggles(int8="static", epochs=2, min_time_s=1.0)
    said = model_seconds(spec.to_dict(), SPEED_CARD)
    # Two earlier runs (of another sweep, its baseline trained): their rows took twice and
    # four times what the model says, and 3 s and 5 s went outside their rows.
    other = SweepSpec.from_toggles(prune=0.5, epochs=1, min_time_s=1.0)
    base = model_seconds(other.to_dict(), SPEED_CARD)

    def run(rows_factor, outside):
        row = {"name": "baseline", "raw": {"phase_s": {"build": rows_factor * base},
                                           "cache": {"hits": 0, "misses": 1}}}
        return {**_finished(other, rows_factor * base + outside), "variants": [row]}

    earlier = [run(2, 3.0), run(4, 5.0)]
    assert actual_seconds(earlier[0]) == pytest.approx(2 * base + 3.0, abs=1e-3)
    factor, overhead, runs = refinement(SPEED_CARD, earlier)
    assert (factor, overhead, runs) == (pytest.approx(3.0, rel=1e-3),
                                        pytest.approx(4.0, abs=1e-2), 2)
    estimate = estimate_sweep(spec, [], speed=SPEED_CARD, earlier=earlier)
    assert estimate.source == SPEED and estimate.refined_by == 2
    assert estimate.seconds == pytest.approx(3 * said + 4.0, rel=1e-3)
    assert "from this machine's measured speed" in estimate.describe()
    assert "refined by 2 earlier runs" in estimate.describe()
    assert estimate.to_dict()["source"] == SPEED  # stored with the run, shown in History


def test_a_cached_baseline_is_not_trained_again_in_the_first_estimate():
    spec = SweepSpec.from_toggles(int8="static", epochs=2, min_time_s=0.0)
    cold = estimate_sweep(spec, [], baseline_cached=False, speed=SPEED_CARD).seconds
    warm = estimate_sweep(spec, [], baseline_cached=True, speed=SPEED_CARD).seconds
    assert cold - warm == pytest.approx(2 * 1000 * TRAIN_PASSES * 1e6 / 1e9)


def test_earlier_runs_of_the_same_model_and_data_set_take_over_from_the_speed_model():
    spec = SweepSpec.from_toggles(int8="static", epochs=2, min_time_s=1.0)
    row = {"name": "baseline", "error": None,
           "raw": {"phase_s": {"latency": 1.0}, "cache": {"hits": 1, "misses": 0}}}
    history = [{**_finished(spec, 30.0), "variants": [row]}]
    estimate = estimate_sweep(spec, history, speed=SPEED_CARD, earlier=history)
    assert estimate.source != SPEED and "from 1 earlier run" in estimate.describe()


def test_split_sizes_are_the_loaded_splits(digits):
    from benchmarks.zoo.datasets import load_dataset, split_sizes, stored_size
    assert split_sizes("digits", stored_size("digits").samples) == (len(digits.train.y),
                                                                   len(digits.test.y))
    mnist = load_dataset("mnist5k")
    assert split_sizes("mnist5k", stored_size("mnist5k").samples) == (len(mnist.train.y),
                                                                     len(mnist.test.y))


def test_the_speed_is_measured_once_per_machine_and_read_back(tmp_path):
    from benchmarks.run.speed import cached_speed, speed_file
    speed = cached_speed(tmp_path)
    assert speed["train_macs_per_s"] > 0 and speed["score_macs_per_s"] > 0
    work = speed["work"]["seed_cnn@digits"]
    assert work["macs"] > 0 and (work["train"], work["test"]) == (1257, 360)
    # Read back, not measured again: a marker written into the file comes back.
    path = speed_file(tmp_path)
    path.write_text(json.dumps({**speed, "marker": 1}))
    assert cached_speed(tmp_path)["marker"] == 1
    path.write_text("{not json")  # a file that does not read is measured again
    assert "marker" not in cached_speed(tmp_path)
    assert json.loads(path.read_text())["train_macs_per_s"] > 0


def test_measuring_the_speed_leaves_the_random_state_as_it_was(tmp_path):
    import torch

    from benchmarks.run.speed import cached_speed
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    cached_speed(tmp_path)  # measured here: the file is not there yet
    assert torch.equal(torch.rand(3), expected)


def test_a_sweep_counts_the_work_of_its_own_model_and_a_worker_the_whole_zoos(tmp_path):
    """A CLI run's first estimate needs one model's work, not the zoo's (most of a second of
    a cold run): counted per entry as asked for, the probe's rates measured once; a worker's
    card then completes it."""
    from benchmarks.run.speed import cached_speed, speed_file
    own = cached_speed(tmp_path, only={"seed_cnn@digits", "mine.py:build@digits"})
    assert set(own["work"]) == {"seed_cnn@digits"} and own["work_complete"] is False
    rates = own["train_macs_per_s"]
    # Asked again (a model outside the zoo never has work): read back, nothing counted again.
    path = speed_file(tmp_path)
    path.write_text(json.dumps({**own, "marker": 1}))
    assert cached_speed(tmp_path, only={"seed_cnn@digits", "mine.py:build@digits"})["marker"]
    more = cached_speed(tmp_path, only={"mlp@digits"})
    assert set(more["work"]) == {"seed_cnn@digits", "mlp@digits"}
    assert more["train_macs_per_s"] == rates  # read back, not probed again
    whole = cached_speed(tmp_path)
    assert whole["work_complete"] and len(whole["work"]) > 2
    assert whole["work"]["seed_cnn@digits"] == own["work"]["seed_cnn@digits"]
    assert json.loads(speed_file(tmp_path).read_text())["work"] == whole["work"]
