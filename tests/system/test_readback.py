"""Tampered widget values are visible (issue 26.6). Streamlit resets a value that arrives out
of its widget's range to the widget's default without a word (epochs 10⁶ over the WebSocket),
so the page reads back what the job will run with, from the spec it submits, and the job's
progress shows its settings again; and the page's bounds are the engine's (epochs up to
10,000, where the page used to stop at 1,000)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from benchmarks.service.queue import JobQueue
from benchmarks.spec.sweep import MAX_EPOCHS
from helpers import ROOT, scaled


def readback(at: AppTest) -> str:
    (line,) = [c.value for c in at.caption if c.value.startswith("Runs: ")]
    return line


def test_the_page_reads_back_what_the_job_runs_with(tmp_path, monkeypatch):
    store = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(store))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60)).run()
    try:
        for key in ("exp_prune", "exp_distill", "exp_amp", "exp_int8", "exp_combine"):
            at.toggle(key=key).set_value(False)
        at.number_input(key="exp_epochs").set_value(5000).run()  # beyond the old page cap
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert " · 5000 epochs · " in readback(at)
        assert at.number_input(key="exp_epochs").max == MAX_EPOCHS
        # Out of range, as a tampered WebSocket message would send it: Streamlit puts the
        # default back, and the read-back line says so before anything is submitted.
        at.number_input(key="exp_epochs").set_value(10**6).run()
        assert " · 8 epochs · " in readback(at)
        at.button(key="exp_run").click().run()
        assert not at.exception
        queue = JobQueue(store)
        (job,) = queue.jobs()
        assert job.payload["epochs"] == 8
        # Next to its progress, the job's own settings, once: the page's line, the same,
        # steps aside (issue 32.15); compact, with every variant's settings on hover.
        (shown,) = [c for c in at.caption if c.value.startswith("Runs: ")]
        assert " · 8 epochs · " in shown.value and "variants: " not in shown.value
        assert "variants: " in shown.help
        queue.cancel(job.job_id)
    finally:
        JobQueue(store).stop_worker("cpu")
