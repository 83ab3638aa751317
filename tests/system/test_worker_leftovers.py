"""Issue 31.5 and 31.6 through a real worker running a user's model file: the /dev/shm file
a job writes is removed when the job ends, and a model file that opens the store itself
cannot change who owns a run: in the worker's process its connections are refused, and a
process of its own that drops the triggers and rewrites every owner takes nothing, since the
server believes only owners it signed."""

from __future__ import annotations

import json
import os
import textwrap
import uuid
from pathlib import Path

import pytest

from benchmarks.service.queue import JobQueue
from benchmarks.spec.sweep import SweepSpec
from benchmarks.store.database import ResultsStore, owner_tag
from helpers import FAST, finished_job, scaled

THIEF = textwrap.dedent("""
    import json
    import os
    import sqlite3
    import subprocess
    import sys

    from torch import nn

    # A process of its own (no authorizer): drops the triggers, then gives itself every run
    # and every job, and puts its own job's signed tag on one of Alice's runs.
    ATTACK = '''
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1], timeout=60)
    me, tag = db.execute("SELECT owner, run_tag FROM jobs WHERE status='running'").fetchone()
    db.execute("DROP TRIGGER runs_owner_is_fixed")
    db.execute("DROP TRIGGER jobs_owner_is_fixed")
    db.execute("UPDATE runs SET owner=?", (me,))
    db.execute("UPDATE runs SET owner_tag=? WHERE run_id='alice-tag-copied'", (tag,))
    db.execute("UPDATE jobs SET owner=?, session=?", (me, me))
    db.commit()
    print(db.execute("SELECT COUNT(*) FROM runs WHERE owner=?", (me,)).fetchone()[0])
    '''

    def build(num_classes, in_channels):
        model = nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 64, num_classes))
        if os.path.exists({report!r}):  # built again (each variant): tried once already
            return model
        said = {{}}
        db = sqlite3.connect({store!r}, timeout=60)
        for name, sql in (("runs", "UPDATE runs SET owner='thief'"),
                          ("jobs", "UPDATE jobs SET owner='thief', session='thief'"),
                          ("drop", "DROP TRIGGER runs_owner_is_fixed"),
                          ("delete", "DELETE FROM runs WHERE owner LIKE '%alice'")):
            try:
                db.execute(sql)
                db.commit()
                said[name] = "done"
            except sqlite3.Error as exc:
                db.rollback()
                said[name] = str(exc)
        db.close()
        # Below sqlite3.connect (no authorizer): the store's own trigger still refuses.
        raw = sqlite3.Connection({store!r}, timeout=60)
        try:
            raw.execute("UPDATE runs SET owner='thief'")
            raw.commit()
            said["raw"] = "done"
        except sqlite3.Error as exc:
            said["raw"] = str(exc)
        raw.close()
        done = subprocess.run([sys.executable, "-c", ATTACK, {store!r}],
                              capture_output=True, text=True, timeout={timeout})
        said["process"] = done.stdout.strip() or done.stderr[-400:]
        with open({report!r}, "w") as f:
            json.dump(said, f)
        return model
""")

SHM_WRITER = textwrap.dedent("""
    from torch import nn

    def build(num_classes, in_channels):
        with open({shm!r}, "wb") as f:
            f.write(b"\\1" * (1 << 20))
        return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 64, num_classes))
""")


def models_folder(tmp_path, queue, monkeypatch, **files: str) -> Path:
    models = tmp_path / "models"
    models.mkdir()
    for name, text in files.items():
        (models / name).write_text(text)
    monkeypatch.setenv("COMPRESSION_BENCH_MODELS_DIR", str(models))
    queue.ensure_worker("cpu", wait=True)
    return models


ALICE, MALLORY = "session:alice", "session:mallory"


def test_a_model_file_cannot_take_who_owns_a_run(tmp_path, queue, monkeypatch):
    # The server's queue: it holds the secret, signs owners at submission, verifies on read.
    server = JobQueue(queue.path, secret=b"s" * 32)
    store = ResultsStore(queue.path)
    for run_id in ("alice-run", "alice-tag-copied"):
        store.start_run(model="mlp", dataset="digits", device="cpu", spec={}, environment={},
                        owner=ALICE, run_id=run_id,
                        owner_tag=owner_tag(server.secret, run_id, ALICE))
        store.finish_run(run_id, "complete")
    alices_job = server.submit("sweep", SweepSpec(**FAST).to_dict(), session="a", owner=ALICE)
    assert server.cancel(alices_job, by=ALICE)  # queued: cancelled before any worker runs
    report = tmp_path / "said.json"
    models = models_folder(tmp_path, queue, monkeypatch, **{
        "thief.py": THIEF.format(store=str(queue.path), report=str(report),
                              timeout=scaled(120))})
    job = finished_job(server, server.submit(
        "sweep", SweepSpec(model=f"{models / 'thief.py'}:build", **FAST).to_dict(),
        session=MALLORY), 240)
    assert report.exists(), (job.status, job.error)  # the model file ran to its end
    said = json.loads(report.read_text())
    attack = said.pop("process")
    assert all(outcome != "done" for outcome in said.values()), said
    assert "never changed" in said["raw"], said  # the trigger, from any connection
    assert job.status == "complete", job.error
    # Its own process rewrote every owner in the file...
    assert attack.isdigit() and int(attack) >= 2, attack
    assert ResultsStore(queue.path).run("alice-run")["owner"] == MALLORY
    # ...and took nothing: the server offers Mallory only her own run; Alice keeps the run
    # whose owner column was rewritten, and the one with Mallory's tag is nobody's (read-only
    # for everyone: a tag is bound to its run).
    assert job.run_id == job.new_run_id
    assert [r["run_id"] for r in server.store.runs(owner=MALLORY)] == [job.run_id]
    assert server.store.run("alice-run")["owner"] == ALICE
    copied = server.store.run("alice-tag-copied")
    assert copied["owner"] is None and copied["owner_unverified"]
    for run_id in ("alice-run", "alice-tag-copied"):
        with pytest.raises(PermissionError, match="only the person who ran it can export"):
            server.submit("export", {"run_id": run_id, "variant": "baseline"},
                          session=MALLORY)
    assert server.get(alices_job).owner == ALICE
    assert [j.job_id for j in server.jobs(owner=MALLORY)] == [job.job_id]


def test_a_jobs_dev_shm_file_is_removed_when_the_job_ends(tmp_path, queue, monkeypatch):
    shm = Path("/dev/shm") / f"compression-bench-test-{uuid.uuid4().hex[:8]}"
    models = models_folder(tmp_path, queue, monkeypatch, **{
        "shm.py": SHM_WRITER.format(shm=str(shm))})
    try:
        job = finished_job(queue, queue.submit(
            "sweep", SweepSpec(model=f"{models / 'shm.py'}:build", **FAST).to_dict(),
            session="a"), 240)
        assert job.status == "complete", job.error
        assert not shm.exists()  # removed before its status said it ended
    finally:
        if shm.exists():
            os.unlink(shm)
