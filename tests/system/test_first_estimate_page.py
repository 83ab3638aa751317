"""Issue 32.5 on the page: before any run here, the Experiment page's estimate comes from the
machine's speed in the worker's card, and says so; without a card it says what it can."""

from __future__ import annotations

import json
import os

from streamlit.testing.v1 import AppTest

from helpers import ROOT, scaled

SPEED = {"train_macs_per_s": 1e9, "score_macs_per_s": 2e9, "probe": "made up",
         "work": {"seed_cnn@digits": {"macs": 1_000_000, "train": 1000, "test": 100}}}


def _page(path, card: dict | None) -> list[str]:
    from benchmarks.executors.devices import try_lock
    from benchmarks.service.queue import JobQueue
    from benchmarks.service.workers import lock_path
    queue = JobQueue(path)
    if card is not None:
        with queue.store.transaction() as db:
            db.execute("INSERT OR REPLACE INTO workers (device, pid, started_at, card) "
                       "VALUES (?,?,?,?)", ("cpu", os.getpid(), "2026-12-05T08:00:00",
                                            json.dumps(card)))
    held = try_lock(lock_path(path, "cpu"))  # this process stands for the worker
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60)).run()
    finally:
        os.close(held)
    assert not at.exception, [e.value for e in at.exception]
    return [c.value for c in at.caption]


def test_the_first_estimate_comes_from_the_machines_speed(tmp_path, monkeypatch):
    path = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(path))
    captions = _page(path, {"devices": ["cpu"], "speed": SPEED})
    said = [c for c in captions if "variants; " in c]
    assert said and "from this machine's measured speed: no earlier run of this model and " \
                    "data set here" in said[0], captions
    assert "about " in said[0]


def test_without_the_workers_speed_the_first_estimate_says_what_it_can(tmp_path, monkeypatch):
    path = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(path))
    said = [c for c in _page(path, {"devices": ["cpu"]}) if "variants; " in c]
    assert said and "no earlier run of this model and data set here to estimate" in said[0]


def test_a_run_that_ends_is_in_the_next_estimate_drawn_at_once(tmp_path, monkeypatch):
    """The page keeps earlier runs a few seconds between redraws; a run ending is what
    changes them, so a redraw right after one draws its estimate from it (the demo tour's
    failure on a fast machine: back on Experiment within seconds, the old estimate)."""
    from benchmarks.executors.devices import try_lock
    from benchmarks.service.queue import JobQueue
    from benchmarks.service.workers import lock_path
    from benchmarks.spec.sweep import SweepSpec
    path = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(path))
    queue = JobQueue(path)
    with queue.store.transaction() as db:
        db.execute("INSERT OR REPLACE INTO workers (device, pid, started_at, card) "
                   "VALUES (?,?,?,?)", ("cpu", os.getpid(), "2026-12-05T08:00:00",
                                        json.dumps({"devices": ["cpu"], "speed": SPEED})))
    held = try_lock(lock_path(path, "cpu"))
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60)).run()
        first = [c.value for c in at.caption if "variants; " in c.value]
        assert first and "measured speed" in first[0], first
        spec = SweepSpec.from_toggles(prune=0.5)
        run_id = queue.store.start_run(model=spec.model, dataset=spec.dataset, device="cpu",
                                       spec=spec.to_dict(), environment={})
        queue.store.add_variant(run_id, {"name": "baseline",
                                         "raw": {"phase_s": {"build": 2.0, "latency": 1.0},
                                                 "cache": {"misses": 1}}})
        queue.store.finish_run(run_id, "complete")
        at.run()  # at once: well inside the page's cache lifetime
    finally:
        os.close(held)
    assert not at.exception, [e.value for e in at.exception]
    said = [c.value for c in at.caption if "variants; " in c.value]
    assert said and "from 1 earlier run" in said[0], said
