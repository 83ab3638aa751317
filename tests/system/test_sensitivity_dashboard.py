"""The Sensitivity view of the Results page: a map drawn through the job queue (a real
worker), its heatmap and scatter, and *Apply as schedule*, which queues the verification
sweep; in a real browser against the real server."""

from __future__ import annotations

import pytest

from helpers import (FAST_CLI, ROOT, chromium, finished_job, owned_copy, run_cli, scaled,
                     scaled_ms, wait_until)

JOB_TIMEOUT_MS = 420_000


@pytest.fixture
def sweep_store(tmp_path):
    """A store holding one sweep of seed_cnn on digits (the baseline alone)."""
    store = tmp_path / "results.db"
    p = run_cli("run", *FAST_CLI, "--store", str(store))
    assert p.returncode == 0, p.stderr
    from benchmarks.store.database import ResultsStore
    return store, ResultsStore(store).runs()[0]["run_id"]


def test_the_page_queues_a_map_owned_and_capped_like_any_job(sweep_store, monkeypatch):
    """Through Streamlit's AppTest: the form submits a "sensitivity" job for the run's
    baseline; the worker draws the map; the page then draws the heatmap and the scatter."""
    from streamlit.testing.v1 import AppTest

    from benchmarks.service.queue import JobQueue
    from dashboard.identity import session_owner
    store, cli_run = sweep_store
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(store))
    queue = JobQueue(store)
    try:
        at = AppTest.from_file(str(ROOT / "pages" / "results.py"), default_timeout=scaled(120))
        # Only a run's owner maps it (a CLI run has none): this session's copy of the sweep.
        at.session_state["cb_session"] = "the-sweeps-owner"
        run_id = owned_copy(store, cli_run, session_owner("the-sweeps-owner"))
        at.query_params["run"] = run_id
        at.query_params["tab"] = "Sensitivity"  # the run's Sensitivity tab, by its link
        at.run()
        assert not at.exception
        key = f"results-{run_id}-sens"
        # An image model's map: the language models' techniques are not on its menu.
        assert at.selectbox(key=f"{key}_technique").options == [
            "prune.channel", "prune.l1", "int8.static", "int8.dynamic"]
        # Inside the form: the value is taken when the form is submitted.
        at.multiselect(key=f"{key}_levels_multi").set_value([0.5])
        at.button[[b.label for b in at.button].index("Draw sensitivity map")].click().run()
        assert not at.exception and not at.error
        job = next(j for j in queue.jobs() if j.kind == "sensitivity")
        assert job.payload["source_run"] == run_id and job.owner
        assert job.payload["sensitivity"]["levels"] == [0.5]
        done = finished_job(queue, job.job_id, timeout=300)
        assert done.status == "complete", done.error
        at.run()
        assert not at.exception
        charts = [c.proto.spec for c in at.get("plotly_chart")]
        assert any("Where accuracy goes" in spec for spec in charts)
        assert any("against latency share" in spec for spec in charts)
        assert "Apply as schedule" in [b.label for b in at.button]
    finally:
        queue.stop_worker("cpu")


@pytest.mark.browser
@pytest.mark.slow
def test_a_map_drawn_and_applied_in_a_real_browser(sweep_store):
    from playwright.sync_api import expect

    import re
    from urllib.parse import parse_qs, urlsplit

    from benchmarks.store.database import ResultsStore
    from dashboard.identity import session_owner
    from tools.browser import running_server
    store, cli_run = sweep_store
    with chromium() as browser, running_server(store) as (_, url):
        page = browser.new_context(viewport={"width": 1500, "height": 1100}).new_page()
        # Only a run's owner maps it (a CLI run has none): this browser's copy of the sweep.
        page.goto(url)
        page.wait_for_url(re.compile(r"[?&]session="), timeout=scaled_ms(60_000))
        key = parse_qs(urlsplit(page.url).query)["session"][0]
        run_id = owned_copy(store, cli_run, session_owner(key))
        page.goto(f"{url}/results?run={run_id}&session={key}")
        # The run's report drawn first (the page has settled), then its Sensitivity tab.
        page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 4",
                               timeout=scaled_ms(60_000))
        page.get_by_role("tab", name="Sensitivity").click()
        button = page.get_by_role("button", name="Draw sensitivity map")
        expect(button).to_be_visible(timeout=scaled_ms(60_000))
        button.click()
        # The worker draws the map; the page reruns when the job ends and draws its charts.
        heatmap = page.locator(".js-plotly-plot").filter(has_text="Where accuracy goes")
        expect(heatmap).to_be_visible(timeout=scaled_ms(JOB_TIMEOUT_MS))
        expect(page.locator(".js-plotly-plot").filter(
            has_text="against latency share")).to_be_visible(timeout=scaled_ms(30_000))
        # Hatched cells (within noise) are drawn with a pattern.
        assert page.locator("pattern").count() > 0
        apply = page.get_by_role("button", name="Apply as schedule")
        expect(apply).to_be_visible(timeout=scaled_ms(30_000))
        apply.click()
        expect(page.get_by_text("The schedule's verification sweep:")).to_be_visible(
            timeout=scaled_ms(60_000))
        expect(page.get_by_role("link", name="open the run")).to_be_visible(
            timeout=scaled_ms(JOB_TIMEOUT_MS))
        assert not page.get_by_text("Traceback").count()
        # The link is there once the sweep has started: wait for it to end.
        verification = wait_until(lambda: (r := ResultsStore(store).runs(kind="sweep")[0])[
            "status"] != "running" and r, 600, "the verification sweep ending")
    names = [v["name"] for v in verification["variants"]]
    assert names[0] == "baseline" and any(n.startswith("prune-channel-schedule-") for n in names)
    assert {"prune-channel-0.25", "prune-channel-0.5", "prune-channel-0.75"} <= set(names)
    scheduled = next(v for v in verification["variants"] if "schedule" in v["name"])
    assert scheduled["error"] is None
    assert scheduled["config"]["prune"]["schedule"]["predicted"]["accuracy_change_pts"] <= 0
