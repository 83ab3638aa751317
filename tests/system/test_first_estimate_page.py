"""Issue 32.5 on the page: before any run here, the Experiment page's estimate comes from the
machine's speed in the worker's card, and says so; without a card it says what it can."""

from __future__ import annotations

import json
import os

from streamlit.testing.v1 import AppTest

from helpers import ROOT

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
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
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
