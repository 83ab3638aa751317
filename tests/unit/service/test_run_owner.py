"""One owner check for every job on a stored run (issue 31.1), on a real queue over a private
store: whatever the payload calls the run (an export's ``run_id``, a sensitivity map's
``source_run``, a schedule's ``map_run`` inside a variant's settings, a "Run this" sweep's
``source_run``), a person who does not own it is refused in one line and nothing is queued."""

from __future__ import annotations

import json

import pytest

from benchmarks.service.queue import JobQueue, runs_named
from benchmarks.spec.limits import Limits


def queue(store_path, **limits) -> JobQueue:
    return JobQueue(store_path, limits=Limits(**limits))


def stored_run(q: JobQueue, owner: str, kind: str = "sweep") -> str:
    return q.store.start_run(model="mlp", dataset="digits", device="cpu", spec={},
                             environment={}, owner=owner, kind=kind)


def schedule_sweep(map_run: str, **extra) -> dict:
    """The verification sweep "Apply as schedule" queues: the schedule travels as JSON text in
    the schedule variant's settings, naming the map it came from."""
    schedule = {"model": "mlp", "technique": "prune.l1", "groups": {"0": 0.5},
                "map_run": map_run}
    return {"model": "mlp", "dataset": "digits", "variants": [
        {"name": "baseline", "techniques": [], "settings": {}},
        {"name": "prune-l1-schedule", "techniques": ["prune"],
         "settings": {"prune": {"ratio": 0.0, "method": "l1",
                                "schedule": json.dumps(schedule)}}}], **extra}


def test_every_way_a_payload_names_a_run_is_found():
    assert runs_named({"run_id": "r1", "variant": "amp"}) == ["r1"]
    assert runs_named({"sweep": {"model": "m"}, "source_run": "r2"}) == ["r2"]
    assert runs_named(schedule_sweep("r3", source_run="r4")) == ["r3", "r4"]
    assert runs_named({"model": "m", "variants": [], "run_id": None, "dry_run": True}) == []


@pytest.mark.parametrize("kind,payload", [
    ("export", lambda r: {"run_id": r, "variant": "baseline"}),
    ("sensitivity", lambda r: {"model": "mlp", "dataset": "digits", "sweep": {},
                               "sensitivity": {}, "source_run": r}),
    ("sweep", lambda r: schedule_sweep(r)),                        # Apply as schedule
    ("sweep", lambda r: {"model": "mlp", "variants": [], "source_run": r}),  # Run this
])
def test_a_job_on_someone_elses_run_is_refused_in_one_line(store_path, kind, payload):
    q = queue(store_path)
    run_id = stored_run(q, "session:alice")
    with pytest.raises(PermissionError) as refused:
        q.submit(kind, payload(run_id), session="b", owner="session:bob")
    message = str(refused.value)
    assert "\n" not in message and "only the person who ran it" in message
    assert q.jobs() == []  # nothing queued: nothing runs on the worker
    # Its owner and an admin may.
    assert q.submit(kind, payload(run_id), session="a", owner="session:alice")
    assert q.submit(kind, payload(run_id), session="c", owner="user:admin@x", admin=True)


def test_sharing_exports_shares_exports_only(store_path):
    shared = queue(store_path, shared_exports=True)
    run_id = stored_run(shared, "session:alice")
    assert shared.submit("export", {"run_id": run_id, "variant": "baseline"}, session="b",
                         owner="session:bob")
    with pytest.raises(PermissionError, match="queue a sensitivity job on run"):
        shared.submit("sensitivity", {"sweep": {}, "sensitivity": {}, "source_run": run_id},
                      session="b", owner="session:bob")


def test_a_schedule_naming_a_map_that_is_not_stored_is_refused(store_path):
    q = queue(store_path)
    with pytest.raises(ValueError, match="not in the store"):
        q.submit("sweep", schedule_sweep("nope"), session="a", owner="session:alice")
