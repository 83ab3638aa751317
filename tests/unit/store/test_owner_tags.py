"""Issue 31.6: a run's and a job's owner are signed by the server (its session secret, which the
worker never reads) and believed only where the signature verifies, so job code that rewrites
the store (a fresh connection, triggers dropped) takes nobody's run or job."""

from __future__ import annotations

import sqlite3

import pytest

from benchmarks.service.queue import CapReached, JobQueue
from benchmarks.spec.limits import Limits
from benchmarks.store.database import ResultsStore
from benchmarks.store.tags import job_tag, owner_tag, tagged_job, tagged_owner

SECRET = b"k" * 32


def test_a_tag_verifies_only_with_its_secret_its_run_and_its_owner():
    tag = owner_tag(SECRET, "run-1", "session:alice")
    assert tagged_owner(SECRET, "run-1", tag) == "session:alice"
    assert tagged_owner(b"x" * 32, "run-1", tag) is None             # wrong secret
    assert tagged_owner(SECRET, "run-2", tag) is None                # swapped run id
    forged = tag[:64] + " session:mallory"                           # swapped owner
    assert tagged_owner(SECRET, "run-1", forged) is None
    for junk in (None, "", "abc", tag[:64], tag.replace(" ", "x", 1)):
        assert tagged_owner(SECRET, "run-1", junk) is None
    job = job_tag(SECRET, "j1", "user:a@x", "session:s")
    assert tagged_job(SECRET, "j1", job) == ("user:a@x", "session:s")
    assert tagged_job(SECRET, "j2", job) is None
    assert tagged_job(b"x" * 32, "j1", job) is None


def rewrite_everything(path, owner: str) -> None:
    """What job code in the worker can do to the file: drop the triggers, rewrite owners."""
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER runs_owner_is_fixed")
        db.execute("DROP TRIGGER jobs_owner_is_fixed")
        db.execute("UPDATE runs SET owner=?", (owner,))
        db.execute("UPDATE jobs SET owner=?, session=?", (owner, owner))


def test_a_rewritten_owner_takes_nothing_and_an_unsigned_one_is_nobodys(tmp_path):
    path = tmp_path / "results.db"
    queue = JobQueue(path, secret=SECRET)
    job = queue.get(queue.submit("sweep", {"model": "mlp"}, session="session:a",
                                 owner="session:alice"))
    assert job.new_run_id and tagged_owner(SECRET, job.new_run_id, job.run_tag) == \
        "session:alice"
    # The worker (no secret) creates the pre-assigned run with the server's tag.
    worker_store = ResultsStore(path)
    theirs = worker_store.start_run(model="mlp", dataset="digits", device="cpu", spec={},
                                    environment={}, owner=job.owner, run_id=job.new_run_id,
                                    owner_tag=job.run_tag)
    unsigned = worker_store.start_run(model="mlp", dataset="digits", device="cpu", spec={},
                                      environment={}, owner="session:mallory")
    cli = worker_store.start_run(model="mlp", dataset="digits", device="cpu", spec={},
                                 environment={})
    store = queue.store
    assert store.run(theirs)["owner"] == "session:alice"
    assert store.run(unsigned)["owner"] is None and store.run(unsigned)["owner_unverified"]
    assert store.run(cli)["owner"] is None and not store.run(cli)["owner_unverified"]

    rewrite_everything(path, "session:mallory")
    assert [r["run_id"] for r in store.runs(owner="session:mallory")] == []
    assert [r["run_id"] for r in store.runs(owner="session:alice")] == [theirs]
    assert store.run(theirs)["owner"] == "session:alice"
    with pytest.raises(PermissionError, match="only the person who ran it can export"):
        queue.submit("export", {"run_id": theirs, "variant": "baseline"}, session="m",
                     owner="session:mallory")
    with pytest.raises(PermissionError, match="can delete"):
        store.delete_run(theirs, by="session:mallory")
    with pytest.raises(PermissionError, match="can cancel"):
        queue.cancel(job.job_id, by="session:mallory")
    assert queue.get(job.job_id).owner == "session:alice"
    assert [j.job_id for j in queue.jobs(owner="session:alice")] == [job.job_id]
    assert queue.jobs(owner="session:mallory") == [] and queue.jobs(session="session:mallory") == []
    # Without the secret (the CLI, the worker) the columns are read as stored.
    assert ResultsStore(path).run(theirs)["owner"] == "session:mallory"
    # The signing is the server's: a (CLI) run given to a session needs the secret.
    cli = worker_store.start_run(model="mlp", dataset="digits", device="cpu", spec={},
                                 environment={})
    with pytest.raises(ValueError, match="secret"):
        ResultsStore(path).sign_owner(cli, "session:mallory")
    store.sign_owner(cli, "session:bob")
    assert store.run(cli)["owner"] == "session:bob"
    assert store.delete_run(cli, by="session:bob")


def test_rewriting_a_jobs_owner_frees_no_slot_under_the_cap(tmp_path):
    path = tmp_path / "results.db"
    queue = JobQueue(path, limits=Limits(max_jobs=1), secret=SECRET)
    queue.submit("sweep", {"model": "mlp"}, session="session:m", owner="session:m")
    rewrite_everything(path, "session:someone-else")
    with pytest.raises(CapReached, match="you already have 1 job"):
        queue.submit("sweep", {"model": "mlp"}, session="session:m", owner="session:m")


def test_a_jobs_id_device_and_folder_are_fixed_and_the_worker_queues_nothing(tmp_path):
    """The server names a job's folder by its id and starts the worker its device names: the
    worker's connections may change neither (nor the folder column), nor queue a job; any
    connection meets the trigger."""
    from benchmarks.store.guard import GuardedConnection
    path = tmp_path / "results.db"
    queue = JobQueue(path)
    job_id = queue.submit("sweep", {"model": "mlp"}, session="a")
    guarded = sqlite3.connect(path, factory=GuardedConnection)
    for sql in ("UPDATE jobs SET job_id='000000000000'", "UPDATE jobs SET device='cuda:9'",
                "UPDATE jobs SET folder='/etc'",
                "INSERT INTO jobs (job_id, kind, status, session, device, payload, "
                "submitted_at) SELECT 'x', kind, status, session, device, payload, "
                "submitted_at FROM jobs"):
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            guarded.execute(sql)
    plain = sqlite3.connect(path)
    with pytest.raises(sqlite3.IntegrityError, match="set when it is submitted"):
        plain.execute("UPDATE jobs SET folder='/etc'")
    assert queue.get(job_id).folder is None
