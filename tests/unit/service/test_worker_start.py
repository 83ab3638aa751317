"""Issue 31.7: a worker that cannot start (its interpreter not executable, or exiting before
it takes a job) ends its queued job, failed with the reason, after a bounded number of tries,
and the supervisor says so once, not twice a second forever."""

from __future__ import annotations

import sys

import pytest

from benchmarks.service.queue import JobQueue
from benchmarks.service.supervisor import START_TRIES
from helpers import finished_job


@pytest.mark.parametrize("interpreter, said", [
    ("#!/bin/sh\nexit 0\n", "Permission denied"),        # not executable (mode 0644)
    ("#!/bin/sh\nexit 3\n", "exited with status 3 before taking a job"),
])
def test_a_worker_that_cannot_start_fails_its_job_once_with_the_reason(
        tmp_path, monkeypatch, capfd, interpreter, said):
    python = tmp_path / "python"
    python.write_text(interpreter)
    python.chmod(0o644 if "Permission" in said else 0o755)
    monkeypatch.setattr(sys, "executable", str(python))
    queue = JobQueue(tmp_path / "results.db")
    try:
        job_id = queue.submit("sweep", {"model": "mlp"}, session="a")
        queue.supervise()
        job = finished_job(queue, job_id, timeout=60)
        assert job.status == "failed"
        assert job.error.startswith(f"its worker could not start ({START_TRIES} tries)")
        assert said in job.error
        # A later job tries afresh, and fails the same way, said once more.
        second = finished_job(queue, queue.submit("sweep", {"model": "mlp"}, session="a"),
                              timeout=60)
        assert second.status == "failed" and said in second.error
    finally:
        queue.stop_supervising()
    lines = [ln for ln in capfd.readouterr().err.splitlines() if "supervisor" in ln]
    assert len(lines) == 2, lines
    assert all("could not start" in ln and "1 queued job(s) failed" in ln for ln in lines)


def test_the_same_supervisor_error_is_said_once_not_every_tick(tmp_path, capfd):
    import shutil

    from benchmarks.service.supervisor import Supervisor
    from helpers import wait_until
    folder = tmp_path / "store"
    queue = JobQueue(folder / "results.db")
    shutil.rmtree(folder)  # every pass now fails: the store cannot be opened
    supervisor = Supervisor(queue, interval=0.01)
    ticks = []
    real_watch = supervisor.watch
    supervisor.watch = lambda: (ticks.append(1), real_watch())
    supervisor.start()
    try:
        wait_until(lambda: len(ticks) >= 20, 60, "20 supervisor passes")
    finally:
        supervisor.stop()
        supervisor.join(10)
    lines = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("supervisor:")]
    assert len(lines) == 1, lines
