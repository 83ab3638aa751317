"""Distributed jobs and data loading through the queue: Cancel reaches the launcher and every
rank, and a loader between files (finding 4); on one machine every rendezvous socket listens
on loopback only (finding 5)."""

from __future__ import annotations

import os
import time
from datetime import datetime

import pytest

from benchmarks.spec.sweep import SweepSpec
from helpers import descendants, finished_job, listening_addresses, png_folder, scaled, wait_until

LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1 as /proc shows


@pytest.fixture(autouse=True)
def _data_folder(tmp_path, monkeypatch):
    """The images under the data folder (set before the queue and its worker start)."""
    monkeypatch.setenv("COMPRESSION_BENCH_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def queue(queue):
    """conftest's real queue over a private store, its worker started and ready."""
    queue.ensure_worker("cpu", wait=True)
    return queue


def test_cancel_stops_a_distributed_job_and_every_rank_and_it_listens_on_loopback(queue):
    payload = {"model": "seed_cnn", "dataset": "digits", "workers": [2],
               "compressions": ["none"], "steps": 100_000, "batch_size": 16, "device": "cpu",
               "seed": 0, "amp": False}
    job_id = queue.submit("distributed", payload, session="a")
    worker = queue.worker_card("cpu")["worker_pid"]
    # Progress shows the ranks' steps while they train.
    wait_until(lambda: "step" in ((queue.get(job_id).progress or {}).get("message") or ""),
               120, "step progress")
    (server,) = [p for p in descendants(worker) if "forkserver" in _cmdline(p)
                 and _parent(p) == worker]
    ranks = [p for p in descendants(worker) if _parent(p) == server]
    assert len(ranks) == 2
    addresses = listening_addresses([worker, *ranks])
    assert addresses, "nothing listens: the rendezvous store should"
    assert {a.rsplit(":", 1)[0] for a in addresses} <= LOOPBACK, addresses
    asked = time.monotonic()
    assert queue.cancel(job_id, by="a")
    job = finished_job(queue, job_id, 30)
    assert time.monotonic() - asked <= 5.0
    assert job.status == "cancelled"
    assert queue.store.run(job.run_id)["status"] == "interrupted"
    assert not [p for p in descendants(worker) if _parent(p) == server]  # no rank left


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_cancel_during_data_loading_stops_between_files(queue, tmp_path):
    folder = png_folder(tmp_path / "data" / "many", 60_000)
    spec = SweepSpec(model="mlp", dataset=f"imagefolder:{folder}", input_shape=(3, 64, 64),
                     epochs=1, min_time_s=0.05)
    job_id = queue.submit("sweep", spec.to_dict(), session="a")
    wait_until(lambda: queue.get(job_id).status == "running", 60, "the job starting")
    time.sleep(1.5)  # well into decoding 60,000 images
    asked = time.monotonic()
    assert queue.cancel(job_id, by="a")
    job = finished_job(queue, job_id, 60)
    assert time.monotonic() - asked <= scaled(2.0), time.monotonic() - asked
    assert job.status == "cancelled" and job.run_id is None  # stopped before its run began
    took = (datetime.fromisoformat(job.finished_at)
            - datetime.fromisoformat(job.started_at)).total_seconds()
    assert took < scaled(5.0)  # loading all of it takes far longer
    assert os.path.exists(folder)
