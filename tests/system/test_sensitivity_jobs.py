"""A sensitivity map as a job of the queue's worker: its rows stored as they are measured,
and a cancel honoured between cells, as every job kind honours it."""

from __future__ import annotations

import threading

from helpers import FAST, scaled, wait_until


def test_a_map_job_is_cancelled_between_cells(store_path):
    from benchmarks.sensitivity.config import SensitivityConfig
    from benchmarks.service.queue import JobQueue
    from benchmarks.service.worker import Worker
    from benchmarks.spec.sweep import SweepSpec
    queue = JobQueue(store_path)
    config = SensitivityConfig(levels=tuple(round(0.05 * i, 2) for i in range(1, 20)))
    payload = {"model": "seed_cnn", "dataset": "digits",
               "sweep": SweepSpec(**FAST).to_dict(), "sensitivity": config.to_dict()}
    job_id = queue.submit("sensitivity", payload, session="test")
    worker = Worker(str(store_path), "cpu", None)
    job = worker.claim()
    thread = threading.Thread(target=worker.run_job, args=(job,), daemon=True)
    thread.start()
    wait_until(lambda: (p := queue.get(job_id).progress).get("phase") == "screening"
               and p.get("index", 0) >= 2, 300, "the map screening its third cell")
    assert queue.cancel(job_id)
    thread.join(timeout=scaled(120))
    assert not thread.is_alive()
    ended = queue.get(job_id)
    assert ended.status == "cancelled", ended.error
    run = queue.store.run(ended.run_id)
    assert run["kind"] == "sensitivity" and run["status"] == "interrupted"
    assert 2 <= len(run["variants"]) < 2 * len(config.levels)
    assert run["spec"]["sensitivity"]["levels"] == list(config.levels)
