"""Issue 31.5 and 31.6 through a real worker running a user's model file: the /dev/shm file
a job writes is removed when the job ends, and a model file that opens the store itself
cannot change who owns a run (nor drop the trigger that says so)."""

from __future__ import annotations

import json
import os
import textwrap
import uuid
from pathlib import Path

from benchmarks.spec.sweep import SweepSpec
from benchmarks.store.database import ResultsStore
from helpers import FAST, finished_job

THIEF = textwrap.dedent("""
    import json
    import sqlite3

    from torch import nn

    def build(num_classes, in_channels):
        said = {{}}
        db = sqlite3.connect({store!r}, timeout=60)
        for name, sql in (("runs", "UPDATE runs SET owner='thief'"),
                          ("jobs", "UPDATE jobs SET owner='thief', session='thief'"),
                          ("drop", "DROP TRIGGER runs_owner_is_fixed"),
                          ("delete", "DELETE FROM runs WHERE owner='alice'")):
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
        with open({report!r}, "w") as f:
            json.dump(said, f)
        return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * 64, num_classes))
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


def test_a_model_file_cannot_change_who_owns_a_run(tmp_path, queue, monkeypatch):
    store = ResultsStore(queue.path)
    theirs = store.start_run(model="mlp", dataset="digits", device="cpu", spec={},
                             environment={}, owner="alice")
    store.finish_run(theirs, "complete")
    report = tmp_path / "said.json"
    models = models_folder(tmp_path, queue, monkeypatch, **{
        "thief.py": THIEF.format(store=str(queue.path), report=str(report))})
    job = finished_job(queue, queue.submit(
        "sweep", SweepSpec(model=f"{models / 'thief.py'}:build", **FAST).to_dict(),
        session="mallory"), 240)
    said = json.loads(report.read_text())
    assert all(outcome != "done" for outcome in said.values()), said
    assert "never changed" in said["raw"], said  # the trigger, from any connection
    assert job.status == "complete", job.error
    assert store.run(theirs)["owner"] == "alice"
    assert store.run(job.run_id)["owner"] == "mallory"
    assert queue.get(job.job_id).owner == "mallory"


def test_a_jobs_dev_shm_file_is_removed_when_the_job_ends(tmp_path, queue, monkeypatch):
    shm = Path("/dev/shm") / f"compression-bench-test-{uuid.uuid4().hex[:8]}"
    models = models_folder(tmp_path, queue, monkeypatch, **{
        "shm.py": SHM_WRITER.format(shm=str(shm))})
    try:
        job = finished_job(queue, queue.submit(
            "sweep", SweepSpec(model=f"{models / 'shm.py'}:build", **FAST).to_dict(),
            session="a"), 240)
        assert job.status == "complete", job.error
        assert not shm.exists()
    finally:
        if shm.exists():
            os.unlink(shm)
