"""A sensitivity map as a job of the queue's worker: its rows stored as they are measured,
and a cancel honoured between cells, as every job kind honours it."""

from __future__ import annotations

import threading

from helpers import FAST, scaled


def test_a_map_job_is_cancelled_between_cells(store_path, monkeypatch):
    """The cancel is requested while the third cell is screened, and the worker has read it
    before that cell ends: the map stops before the fourth. Where the cancel lands is fixed,
    not raced: cells take milliseconds (from the session's cell cache, less), and the worker
    reads the store at most every POLL_S, so a cancel timed from outside landed anywhere, or
    after the last cell (CI: all 38 screened)."""
    from benchmarks.sensitivity import mapper
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
    screened = []
    real_row = mapper._Cells._row

    def row(cells, index, which):
        out = real_row(cells, index, which)
        screened.append(index)
        if len(screened) == 3:  # the user clicks Cancel; the worker reads it (unthrottled)
            assert queue.cancel(job_id)
            assert worker.stop_wanted(job_id)
        return out

    monkeypatch.setattr(mapper._Cells, "_row", row)
    job = worker.claim()
    thread = threading.Thread(target=worker.run_job, args=(job,), daemon=True)
    thread.start()
    thread.join(timeout=scaled(300))
    assert not thread.is_alive()
    ended = queue.get(job_id)
    assert ended.status == "cancelled", ended.error
    assert screened == [0, 1, 2]
    run = queue.store.run(ended.run_id)
    assert run["kind"] == "sensitivity" and run["status"] == "interrupted"
    assert [v["name"] for v in run["variants"]] == ["2@0.05", "2@0.1", "2@0.15"]
    assert run["spec"]["sensitivity"]["levels"] == list(config.levels)
