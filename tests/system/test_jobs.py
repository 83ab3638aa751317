"""The job queue with its real worker process: order, isolation, cancel, restart recovery."""

import os
import signal

import helpers
from benchmarks.service.queue import JobQueue
from benchmarks.spec.sweep import SweepSpec
from helpers import finished_job, wait_until

FAST = {**helpers.FAST, "epochs": 2}  # two epochs, as these tests have always trained


def test_jobs_run_one_at_a_time_in_order_and_a_failure_does_not_stop_the_queue(queue):
    good = SweepSpec(**FAST).to_dict()
    bad = SweepSpec(model="no_such_model", **FAST).to_dict()
    ids = [queue.submit("sweep", good, session="a"),
           queue.submit("sweep", bad, session="b"),
           queue.submit("sweep", good, session="b")]
    assert [queue.get(i).position for i in ids] == [1, 2, 3]
    queue.ensure_worker("cpu")
    queue.ensure_worker("cpu")  # a second call starts no second worker
    jobs = [finished_job(queue, i) for i in ids]
    assert [j.status for j in jobs] == ["complete", "failed", "complete"]
    assert jobs[1].error.startswith("invalid input: unknown model 'no_such_model'")
    run = queue.store.run(jobs[0].run_id)
    assert run["status"] == "complete" and run["variants"][0]["name"] == "baseline"
    # One worker, one job at a time: no two jobs overlap.
    spans = sorted((j.started_at, j.finished_at) for j in jobs)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert [j.job_id for j in queue.jobs(session="b")] == [ids[2], ids[1]]
    card = queue.worker_card("cpu")
    assert card["devices"][0] == "cpu" and "torch" in card


def test_cancel_a_queued_and_a_running_job(queue):
    spec = SweepSpec.from_toggles(amp=True, prune=0.5, **{**FAST, "min_time_s": 1.0}).to_dict()
    first = queue.submit("sweep", spec, session="a")
    second = queue.submit("sweep", spec, session="a")
    assert queue.cancel(second)
    assert queue.get(second).status == "cancelled"
    queue.ensure_worker("cpu")
    wait_until(lambda: queue.get(first).status == "running", 120, "the first job starting",
               every=0.1)
    assert queue.cancel(first)
    job = finished_job(queue, first)
    assert job.status == "cancelled"
    assert queue.store.run(job.run_id)["status"] == "interrupted"


def test_a_killed_worker_leaves_its_job_interrupted_and_the_next_worker_goes_on(queue):
    spec = SweepSpec.from_toggles(amp=True, prune=0.5, **{**FAST, "min_time_s": 2.0}).to_dict()
    job_id = queue.submit("sweep", spec, session="a")
    queue.ensure_worker("cpu", wait=True)
    wait_until(lambda: queue.get(job_id).run_id
               and queue.store.run(queue.get(job_id).run_id)["variants"], 120,
               "the job's first variant", every=0.1)
    queue.stop_supervising()  # what a worker started afresh does on its own (no supervisor)
    os.kill(queue.worker_card("cpu")["worker_pid"], signal.SIGKILL)
    wait_until(lambda: not queue.worker_alive("cpu"), 60, "the killed worker's end")
    assert queue.get(job_id).status == "running"  # nobody has noticed yet
    again = queue.submit("sweep", SweepSpec(**FAST).to_dict(), session="a")
    queue.ensure_worker("cpu")
    assert finished_job(queue, again).status == "complete"
    job = queue.get(job_id)
    assert job.status == "interrupted" and "run it again" in job.error
    run = queue.store.run(job.run_id)
    assert run["status"] == "interrupted" and len(run["variants"]) >= 1
    assert queue.store.integrity_ok()


def test_a_distributed_job_runs_through_the_same_queue(queue):
    payload = {"model": "seed_cnn", "dataset": "digits", "workers": [1, 2],
               "compressions": ["none", "fp16"], "steps": 8, "batch_size": 16,
               "device": "cpu", "seed": 0, "amp": False}
    job_id = queue.submit("distributed", payload, session="a")
    queue.ensure_worker("cpu")
    job = finished_job(queue, job_id)
    assert job.status == "complete", job.error
    run = queue.store.run(job.run_id)
    assert run["kind"] == "distributed" and run["device"] == "cpu"
    assert "torch" in run["environment"]
    by_name = {v["name"]: v for v in run["variants"]}
    assert set(by_name) == {"w1-none", "w2-none", "w1-fp16", "w2-fp16"}
    assert by_name["w2-fp16"]["bytes_per_step"] * 2 == by_name["w2-none"]["bytes_per_step"]


def test_an_older_jobs_table_gains_its_new_columns(store_path):
    """A store made before owners, time limits and job folders: opened, its jobs table gains
    the columns and its old jobs still read."""
    import sqlite3
    db = sqlite3.connect(store_path)
    db.executescript("""
        CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, job_id TEXT UNIQUE NOT NULL,
            kind TEXT NOT NULL, status TEXT NOT NULL, session TEXT NOT NULL,
            device TEXT NOT NULL, payload TEXT NOT NULL, submitted_at TEXT NOT NULL,
            started_at TEXT, finished_at TEXT, run_id TEXT, progress TEXT NOT NULL DEFAULT '{}',
            error TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0, worker_pid INTEGER);
        INSERT INTO jobs (job_id, kind, status, session, device, payload, submitted_at)
            VALUES ('old', 'sweep', 'complete', 's', 'cpu', '{}', '2020-01-01T00:00:00+00:00');
    """)
    db.close()
    queue = JobQueue(store_path)
    old = queue.get("old")
    assert old.status == "complete" and old.owner is None and old.time_limit_s is None
    new = queue.submit("sweep", SweepSpec(**FAST).to_dict(), session="s", owner="user:a")
    assert queue.get(new).owner == "user:a" and queue.get(new).time_limit_s == 7200
    assert queue.cancel(new, by="user:a")
