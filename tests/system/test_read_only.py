"""Read-only means read-only (issue 21.6): a ``?run=`` link shows the run, its report and CSV,
and offers nothing that runs on the worker or hands out weights unless the viewer owns the
run; the queue refuses such a job too. Exports live in their job's folder, count against a
disk cap with the least recently used going first, and go when their run is deleted. Over a
copy of conftest's export sweep (its weights in the session's cache)."""

from __future__ import annotations

import os
import sqlite3

import pytest
from streamlit.testing.v1 import AppTest

from benchmarks.export import files
from benchmarks.service.queue import JobQueue
from dashboard.identity import session_owner
from helpers import ROOT, scaled, sign_owner


@pytest.fixture
def own_store(export_sweep, tmp_path, monkeypatch):
    """A copy of the export sweep's store, for this test alone."""
    source, run_id = export_sweep
    path = tmp_path / "srv" / "results.db"
    path.parent.mkdir()
    with sqlite3.connect(source) as a, sqlite3.connect(path) as b:
        a.backup(b)
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(path))
    monkeypatch.delenv("COMPRESSION_BENCH_SHARED_EXPORTS", raising=False)
    return path, run_id


def results_page(run_id: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60))
    at.query_params["run"] = run_id
    at.run()
    at.switch_page("pages/results.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_non_owner_on_a_run_link_cannot_export_and_the_owner_can(own_store):
    path, run_id = own_store
    queue = JobQueue(path)
    key = f"results-{run_id}"
    viewer = results_page(run_id)
    # The run, its report and CSV: yes. Export (a job on the worker, the weights): no.
    assert [b.label for b in viewer.get("download_button")] == \
        ["Download CSV", "Download JSON", "Download report"]
    assert not [b for b in viewer.button if b.key == f"{key}-export"]
    assert any("Only the person who ran it can export" in c.value for c in viewer.caption)
    # (The copied store holds the jobs earlier tests ran on the export sweep: none added.)
    before = [j.job_id for j in queue.jobs()]
    with pytest.raises(PermissionError, match="only the person who ran it can export"):
        queue.submit("export", {"run_id": run_id, "variant": "amp"}, session="x",
                     owner=session_owner(viewer.session_state["cb_session"]))
    assert [j.job_id for j in queue.jobs()] == before
    # An owner the server did not sign (written straight into the store, as job code in the
    # worker could) is nobody's: still no export, and the page says why; History too.
    me = session_owner(viewer.session_state["cb_session"])
    with queue.store.transaction() as db:
        db.execute("UPDATE runs SET owner=? WHERE run_id=?", (me, run_id))
    viewer.run()
    assert not [b for b in viewer.button if b.key == f"{key}-export"]
    assert any("Ownership unverifiable" in c.value for c in viewer.caption)
    viewer.switch_page("pages/history.py").run()
    [row] = [r for _, r in viewer.dataframe[0].value.iterrows() if r["run"] == run_id]
    assert row["ownership"] == "unverifiable" and not row["yours"]
    # Its owner, signed as the server signs, on the same link, is offered the export.
    sign_owner(path, run_id, me)
    viewer.switch_page("pages/results.py").run()
    assert [b for b in viewer.button if b.key == f"{key}-export"]


def test_exports_are_capped_least_recently_used_first_and_go_with_their_run(own_store,
                                                                             monkeypatch):
    from benchmarks.service.worker import Worker
    path, run_id = own_store
    monkeypatch.setenv("COMPRESSION_BENCH_EXPORT_MB", "16")
    queue = JobQueue(path)
    # An older export of the same run, 20 MB: over the cap once the new one lands.
    stale = files.export_folder(path, run_id, "amp", "oldjob").parent
    stale.mkdir(parents=True)
    (stale / "amp.zip").write_bytes(b"\0" * (20 * 2**20))
    os.utime(stale, (1, 1))
    # INT8 static: its files are written without ONNX (the slowest exporter here).
    ids = [queue.submit("export", {"run_id": run_id, "variant": "int8-static"},
                        session="a", admin=True) for _ in range(2)]
    worker = Worker(str(path), "cpu", None)
    for _ in ids:
        worker.run_job(worker.claim())
    jobs = [queue.get(i) for i in ids]
    assert [j.status for j in jobs] == ["complete", "complete"], [j.error for j in jobs]
    # Two people exporting one variant: two folders, neither overwriting the other.
    folders = [files.export_folder(path, run_id, "int8-static", i) for i in ids]
    assert all(files.archive_path(f).is_file() for f in folders)
    assert not stale.exists()  # evicted: least recently used, and the cap was passed
    assert sum(size for _, size, _ in files.exports(path)) <= 16 * 2**20
    # Deleting the run removes its exports.
    assert queue.store.delete_run(run_id)
    assert not (files.exports_root(path) / run_id).exists()
