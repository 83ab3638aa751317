"""Issue 32.13, state that outlived its truth: the sidebar said "Worker: starting" until a
reload, and its fp32 peak (measured when the worker started) sat beside a run's figure that a
later measurement had changed, with nothing saying which threads or when. In Chromium, with no
reload: the card replaces "starting" once the worker is up; through AppTest: the card shows
the store's current peaks with their thread count and time."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from helpers import ROOT, chromium, scaled, scaled_ms
from tools.browser import running_server


@pytest.mark.browser
def test_the_worker_card_replaces_starting_without_a_reload(tmp_path):
    from playwright.sync_api import expect
    with chromium() as browser, running_server(tmp_path / "results.db") as (_, url):
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.goto(url)
        sidebar = page.get_by_test_id("stSidebar")
        # A fresh server: its worker starts a few seconds after the first page has drawn.
        expect(sidebar.get_by_text(re.compile("^Worker: starting"))).to_be_visible(
            timeout=scaled_ms(60_000))
        loads = []
        page.on("load", lambda _: loads.append(1))
        expect(sidebar.get_by_text(re.compile(r"peaks \(cpu, \d+ threads?, measured "))
               ).to_be_visible(timeout=scaled_ms(180_000))
        expect(sidebar.get_by_text(re.compile("^Worker: starting"))).to_have_count(0)
        expect(page.get_by_text(re.compile("^This machine's worker: cpu"))).to_be_visible()
        assert not loads  # nobody reloaded: the page drew itself again


def test_the_sidebar_shows_the_peaks_a_later_measurement_left_in_the_store(tmp_path,
                                                                          monkeypatch):
    from benchmarks.service.queue import JobQueue
    from benchmarks.store.database import PEAKS_KEY, ResultsStore
    path = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(path))
    queue = JobQueue(path)
    key = {"host": "vm", "device": "cpu", "device_name": "cpu", "torch": "2", "threads": 1}
    started = {**key, "gemm_flops_per_s": {"fp32": 49e9}, "memory_bytes_per_s": 10e9,
               "measured_at": "2026-12-05T08:00:00+00:00"}
    later = {**started, "gemm_flops_per_s": {"fp32": 151e9},
             "measured_at": "2026-12-05T09:30:00+00:00"}
    ResultsStore(path).save_device_peaks({k: key[k] for k in PEAKS_KEY}, later)
    with queue.store.transaction() as db:  # a worker that published its card at 08:00
        db.execute("INSERT OR REPLACE INTO workers (device, pid, started_at, card) VALUES "
                   "(?,?,?,?)", ("cpu", __import__("os").getpid(), "2026-12-05T08:00:00",
                                 __import__("json").dumps({"devices": ["cpu"],
                                                           "peaks": {"cpu": started}})))
    import os

    from benchmarks.executors.devices import try_lock
    from benchmarks.service.workers import lock_path
    held = try_lock(lock_path(path, "cpu"))  # this process is that worker: none is started
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60)).run()
    finally:
        os.close(held)
    assert not at.exception, [e.value for e in at.exception]
    card = " ".join(m.value for m in at.sidebar.markdown)
    assert "peaks (cpu, 1 thread, measured 2026-12-05 09:30 UTC): fp32 151 GFLOP/s" in card, \
        card
    assert "fp32 49 " not in card


@pytest.mark.browser
def test_a_map_being_measured_draws_itself_again_as_it_ends(tmp_path):
    from playwright.sync_api import expect

    from benchmarks.store.database import ResultsStore
    path = tmp_path / "results.db"
    store = ResultsStore(path)
    sweep = {"model": "seed_cnn", "dataset": "digits", "variants": [
        {"name": "baseline", "techniques": [], "settings": {}}]}
    map_id = store.start_run(model="seed_cnn", dataset="digits", device="cpu",
                             kind="sensitivity", spec={"sweep": sweep, "sensitivity": {
                                 "technique": "prune.l1", "levels": [0.5]}},
                             environment={"sensitivity": {
                                 "technique": "prune.l1", "levels": [0.5],
                                 "config": {"objective": "p50"},
                                 "baseline": {"accuracy": 0.95, "latency_ms": {"p50": 1.0}}}})

    def cell(root: str) -> dict:
        return {"name": f"{root}@0.5", "root": root, "group": [root], "kind": "prune.l1",
                "level": 0.5, "accuracy_change": -0.1, "accuracy_change_ci": [-0.6, 0.4],
                "p_value": 0.8, "latency_share": 0.5, "saving": 0.2, "error": None}
    store.add_variant(map_id, cell("0"))
    with chromium() as browser, running_server(path) as (_, url):
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.goto(f"{url}/results?run={map_id}")
        going = page.get_by_text(re.compile("^The map is still being measured"))
        expect(going).to_be_visible(timeout=scaled_ms(120_000))
        # The worker up first: its card's arrival draws the page again too, by design.
        expect(page.get_by_test_id("stSidebar").get_by_text(re.compile(r"peaks \(cpu"))
               ).to_be_visible(timeout=scaled_ms(180_000))
        loads = []
        page.on("load", lambda _: loads.append(1))
        store.add_variant(map_id, cell("3"))
        store.finish_run(map_id, "complete")
        # No reload: the page polls while the map runs and draws it once more as it ends.
        expect(going).to_have_count(0, timeout=scaled_ms(60_000))
        expect(page.get_by_role("spinbutton", name="Accuracy budget of the schedule")
               ).to_be_visible(timeout=scaled_ms(60_000))
        assert not loads and not page.get_by_text("Traceback").count()


def test_the_progress_header_counts_what_the_step_list_shows():
    """The header of a running job is counted from the variants stored (what the step list
    lists), never from the worker's index, which restarts at the timing rounds."""
    from types import SimpleNamespace

    from dashboard.jobs_view import status_label, steps_total
    variants = [{"name": n} for n in ("baseline", "prune-l1-0.5", "int8-static")]
    job = SimpleNamespace(kind="sweep", payload={"variants": variants}, cancel_requested=False,
                          progress={"total": 9, "index": 0, "phase": "timing round 1"})
    assert steps_total(job) == 3  # the variants submitted, not the worker's row count
    assert [status_label(job, done, 3) for done in (0, 2, 3)] == [
        "Running: 0 of 3 done", "Running: 2 of 3 done", "Running: 3 of 3 done"]
    other = SimpleNamespace(kind="recommend", payload={}, cancel_requested=True,
                            progress={"total": 8})
    assert status_label(other, 1, steps_total(other)) == "Running: 1 of 8 done (cancelling…)"
    starting = SimpleNamespace(kind="export", payload={}, cancel_requested=False, progress={})
    assert status_label(starting, 0, steps_total(starting)) == "Running"
