"""Issue 31.11: what an export killed mid-way leaves (its staging folder, a partial zip) is
removed: by the next export of the same target (the CLI), and when a worker starts (the
dashboard's exports of jobs no worker runs any longer)."""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.export import files
from benchmarks.service.queue import JobQueue
from benchmarks.service.worker import Worker


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_next_export_removes_a_dead_exports_staging_folder(tmp_path):
    target = tmp_path / "out"
    stale = tmp_path / f".out.partial-{dead_pid()}-abc123"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"\0" * 4096)
    running = tmp_path / f".out.partial-{os.getpid()}-def456"  # a live export's: kept
    running.mkdir()
    fresh = files.staging_folder(target)
    assert not stale.exists() and running.is_dir() and fresh.is_dir()
    assert fresh.name.startswith(f".out.partial-{os.getpid()}-")


def test_a_starting_worker_removes_what_killed_export_jobs_left(tmp_path):
    store = tmp_path / "results.db"
    queue = JobQueue(store)
    root = files.exports_root(store)
    killed = root / "run1" / "job1"                   # killed while writing: nothing done
    (killed / ".amp.partial-99999-x").mkdir(parents=True)
    (killed / ".amp.partial-99999-x" / "model.onnx").write_bytes(b"\0" * 4096)
    zipped = root / "run1" / "job2"                    # its zip done, a stale partial beside
    (zipped / "amp").mkdir(parents=True)
    (zipped / "amp.zip").write_bytes(b"PK")
    (zipped / ".amp.zip.partial").write_bytes(b"PK")
    live = queue.submit("sweep", {"model": "mlp"}, session="a")   # a job still queued
    running = root / "run2" / live
    (running / ".amp.partial-1-y").mkdir(parents=True)
    Worker(str(store), "cpu", None).take_over()
    assert not killed.exists()
    assert (zipped / "amp.zip").exists() and (zipped / "amp").is_dir()
    assert not (zipped / ".amp.zip.partial").exists()
    assert (running / ".amp.partial-1-y").is_dir()
