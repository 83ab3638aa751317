"""Export through the job queue: the worker writes a variant's artefacts into a zip, and the
Results page queues that export and offers the zip once it is done (a real worker process).
The sweep they export is conftest's ``export_sweep``; the artefacts themselves are checked in
tests/unit/export/test_export.py."""

from __future__ import annotations

import zipfile

from benchmarks.export import files
from helpers import ROOT, scaled, wait_until


def test_the_worker_exports_a_variant_into_a_zip(export_sweep, tmp_path):
    """The dashboard's path: an export job run by the queue's worker (in this process)."""
    from benchmarks.service.queue import JobQueue
    from benchmarks.service.worker import Worker
    store_path, run_id = export_sweep
    queue = JobQueue(store_path)
    # The CLI's run belongs to no dashboard user: an admin may export it.
    job_id = queue.submit("export", {"run_id": run_id, "variant": "prune-channel-0.5"},
                          session="test", admin=True)
    worker = Worker(str(store_path), "cpu", None)
    worker.run_job(worker.claim())
    job = queue.get(job_id)
    assert job.status == "complete", job.error
    folder = files.export_folder(store_path, run_id, "prune-channel-0.5", job_id)
    with zipfile.ZipFile(files.archive_path(folder)) as z:
        assert {files.CARD_NAME, files.WEIGHTS_NAME, files.PT2_NAME,
                files.ONNX_NAME} <= set(z.namelist())
    bad = queue.submit("export", {"run_id": run_id, "variant": "nope"}, session="test",
                       admin=True)
    worker.run_job(worker.claim())
    assert queue.get(bad).status == "failed"
    assert queue.get(bad).error.startswith("invalid input: variant 'nope' is not in run")


def test_the_results_page_exports_a_chosen_variant(export_sweep, monkeypatch):
    """The Results page queues the export on the worker and offers the zip once it is done;
    its other downloads include the HTML report."""
    from streamlit.testing.v1 import AppTest

    from benchmarks.service.queue import JobQueue
    store_path, run_id = export_sweep
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(store_path))
    # A shared link is read-only unless the operator shares exports (see test_read_only).
    monkeypatch.setenv("COMPRESSION_BENCH_SHARED_EXPORTS", "on")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60)).run()
    try:
        at.query_params["run"] = run_id  # the CLI's run, opened by its read-only link
        at.switch_page("pages/results.py").run()
        assert not at.exception
        labels = [b.label for b in at.get("download_button")]
        assert labels == ["Download CSV", "Download JSON", "Download report"]
        key = f"results-{run_id}"
        at.selectbox(key=f"{key}-export-variant").set_value("prune-channel-0.5").run()
        at.button(key=f"{key}-export").click().run()

        def zip_offered() -> bool:
            assert not at.exception and not at.error, [e.value for e in at.error]
            if any(b.label.endswith("(zip)") for b in at.get("download_button")):
                return True
            at.run()
            return False
        wait_until(zip_offered, 240, "the export's zip on the page", every=1)
        assert "Download prune-channel-0.5 (zip)" in [b.label for b in
                                                      at.get("download_button")]
        formats = at.table[-1].value
        assert list(formats["Format"]) == ["safetensors", "pt2", "onnx"]  # headers in words
        assert set(formats["Status"]) == {"written"}
        assert all(c.startswith("reloaded") for c in formats["Check"])  # each file read back
    finally:
        JobQueue(store_path).stop_worker("cpu")
