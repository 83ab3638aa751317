"""Several GPUs on one machine, no Ray: one queue worker per GPU, jobs from different sessions
on different GPUs at once, a sweep's trainable variants spread over the GPUs that are idle,
and never two timings on one GPU. Tested with fake GPUs (COMPRESSION_BENCH_FAKE_GPUS): the
real queue, workers, locks and processes, computing on the CPU."""

from __future__ import annotations

from datetime import datetime

import pytest

from benchmarks.service.queue import JobQueue
from benchmarks.spec.sweep import SweepSpec
from helpers import finished_jobs

pytestmark = pytest.mark.slow
SMALL = dict(epochs=1, min_time_s=0.05, finetune_epochs=1, device="cuda")


def _wait(queue: JobQueue, job_ids: list[str], timeout: float = 480):
    return finished_jobs(queue, job_ids, timeout)


def _span(job):
    return datetime.fromisoformat(job.started_at), datetime.fromisoformat(job.finished_at)


@pytest.fixture
def two_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPRESSION_BENCH_FAKE_GPUS", "2")
    queue = JobQueue(tmp_path / "results.db")
    yield queue
    for device in ("cuda:0", "cuda:1"):
        queue.stop_worker(device)


def test_a_sweep_alone_trains_its_variants_on_the_idle_gpu(two_gpus):
    queue = two_gpus
    spec = SweepSpec.from_toggles(prune=(0.3, 0.6), distill=True, **SMALL)
    job_id = queue.submit("sweep", spec.to_dict(), session="alone", device="cuda")
    queue.ensure_worker("cuda")
    (job,) = _wait(queue, [job_id])
    assert job.status == "complete", job.error
    run = queue.store.run(job.run_id)
    own = run["environment"]["queue_device"]
    assert own in ("cuda:0", "cuda:1")
    trained = {v["name"]: v["built_on"] for v in run["variants"] if v["techniques"]}
    # Every trainable variant was trained by the other GPU's process, not the sweep's own.
    worker_pid = queue.worker_card(own)["worker_pid"]
    assert trained and all(places for places in trained.values()), trained
    assert all(f"pid {worker_pid}" not in p for places in trained.values() for p in places)


def test_sessions_run_on_different_gpus_at_once_and_timings_never_share_one(two_gpus):
    queue = two_gpus
    spec = SweepSpec.from_toggles(prune=0.5, amp=True, **SMALL)
    ids = [queue.submit("sweep", spec.to_dict(), session=f"s{i}", device="cuda")
           for i in range(3)]
    queue.ensure_worker("cuda")
    jobs = _wait(queue, ids)
    assert [j.status for j in jobs] == ["complete"] * 3, [j.error for j in jobs]
    devices = [queue.store.run(j.run_id)["environment"]["queue_device"] for j in jobs]
    assert set(devices) == {"cuda:0", "cuda:1"}
    # Two jobs ran at the same time, on different GPUs.
    spans = [_span(j) for j in jobs]
    overlapping = [(a, b) for a in range(3) for b in range(a + 1, 3)
                   if spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]]
    assert overlapping and all(devices[a] != devices[b] for a, b in overlapping)
    # On one GPU, one job (and so one timing) at a time.
    for device in set(devices):
        mine = sorted(s for s, d in zip(spans, devices) if d == device)
        assert all(a[1] <= b[0] for a, b in zip(mine, mine[1:])), mine
