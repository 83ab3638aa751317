"""Many sessions and a server restart, through the dashboard itself."""

from __future__ import annotations

import os
import signal

import pytest
from streamlit.testing.v1 import AppTest

from benchmarks.service.queue import JobQueue
from helpers import ROOT, scaled, scaled_ms, wait_until

APP = str(ROOT / "app.py")


def baseline_only(at: AppTest) -> AppTest:
    for key in ("exp_prune", "exp_distill", "exp_amp", "exp_int8", "exp_combine"):
        at.toggle(key=key).set_value(False)
    at.number_input(key="exp_epochs").set_value(1)
    return at.run()


def test_five_sessions_submit_at_once_and_run_one_at_a_time(tmp_path, monkeypatch):
    store = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(store))
    # Five people here: every AppTest session is one loopback client (the per-address cap).
    monkeypatch.setenv("COMPRESSION_BENCH_MAX_JOBS_PER_ADDRESS", "5")
    sessions = [baseline_only(AppTest.from_file(APP, default_timeout=scaled(60)).run())
                for _ in range(5)]
    # Five clicks in a burst, one right after another. (Not from five threads: CPython 3.11.7
    # compiles ASTs thread-unsafely, gh-106905, and AppTest compiles the page on each run.)
    try:
        for at in sessions:
            at.button(key="exp_run").click().run()
        for at in sessions:
            assert not at.exception, [e.value for e in at.exception]
        queue = JobQueue(store)
        wait_until(lambda: len(jobs := queue.jobs()) == 5 and all(j.finished for j in jobs),
                   300, lambda: f"five jobs ending (left as {queue.jobs()})", every=0.5)
        jobs = queue.jobs()
        assert len(jobs) == 5 and [j.status for j in jobs] == ["complete"] * 5
        assert len({j.session for j in jobs}) == 5
        spans = sorted((j.started_at, j.finished_at) for j in jobs)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans  # never two at once
        # Each session sees its own finished run.
        for at in sessions:
            at.run()
            assert not at.exception
            assert any("Complete" in s.value for s in at.success)
    finally:
        JobQueue(store).stop_worker("cpu")


@pytest.mark.browser
def test_a_server_restart_marks_the_job_interrupted_and_it_can_run_again(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from tools.browser import CHROMIUM, CHROMIUM_ARGS, running_server
    if not os.path.exists(CHROMIUM):
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"{CHROMIUM} is missing and REQUIRE_BROWSER=1")
        pytest.skip("chromium is missing")
    store = tmp_path / "results.db"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            with running_server(store) as (proc, url):
                page.goto(url)
                expect(page.get_by_role("button", name="Run benchmark")).to_be_visible(
                    timeout=scaled_ms(60_000))
                session_url = page.url  # carries ?session=KEY
                page.get_by_role("button", name="Run benchmark").click()
                queue = JobQueue(store)
                wait_until(lambda: any(j.status == "running" and j.run_id for j in queue.jobs()),
                           120, "the job starting", every=0.2)
                os.killpg(proc.pid, signal.SIGKILL)  # the server dies at once
                proc.wait()
            # Its worker (a session of its own) notices its parent gone and stops the job as
            # interrupted, or had no time to: either way the server found on restart says so.
            (job,) = queue.jobs()
            assert job.status in ("running", "interrupted"), job.status
            with running_server(store) as (_, url):
                page.goto(session_url.replace(session_url.split("/?")[0], url))
                # (visible: the sidebar's collapsed My jobs panel says it too)
                expect(page.get_by_text("interrupted", exact=False).filter(visible=True).first
                       ).to_be_visible(timeout=scaled_ms(60_000))
                (job,) = queue.jobs()
                assert job.status == "interrupted"
                assert queue.store.run(job.run_id)["status"] == "interrupted"
                # And it runs again.
                page.get_by_role("button", name="Run benchmark").click()
                expect(page.get_by_text("Complete.", exact=True)).to_be_visible(
                    timeout=scaled_ms(300_000))
                assert queue.jobs()[0].status == "complete"
                assert queue.store.integrity_ok()
        finally:
            browser.close()
