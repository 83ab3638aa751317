"""Issue 32, items 5, 11 and 17 on the pages (streamlit.testing.v1.AppTest over stored runs:
nothing here is browser-specific): the countdown that never reaches 0 s before the end and the
estimate beside what the run took in History; the Distributed page's noise warning, each
run's interval and a title that fits; a recommend run listed as "recommend"; a peak memory
that was not measured said with its reason, never "— MB"."""

from __future__ import annotations

import random

import pytest
from streamlit.testing.v1 import AppTest

from helpers import ROOT, scaled, signed

APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def app_store(tmp_path_factory):
    """A private store (and so a private queue and worker) for this module; the worker is
    stopped at the end so no process outlives the tests."""
    path = tmp_path_factory.mktemp("issue32-store") / "results.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPRESSION_BENCH_STORE", str(path))
        yield path
        from benchmarks.service.queue import JobQueue
        JobQueue(path).stop_worker("cpu")


def new_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=scaled(60)).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _steps(throughput: float, workers: int, spread: float, rng) -> list[float]:
    """Step times (ms) of a run at ``throughput`` samples/s with a 64-sample batch each."""
    mean = 1000.0 * 64 * workers / throughput
    return [mean * (1 + rng.gauss(0, spread)) for _ in range(40)]


def test_distributed_flags_one_worker_runs_apart_beyond_their_noise(app_store):
    from benchmarks.store.database import ResultsStore
    from dashboard.identity import session_owner
    rng = random.Random(0)
    at = new_app()
    rs = ResultsStore(app_store)
    run_id = rs.start_run(model="seed_cnn", dataset="digits", device="cpu", spec={},
                          environment={}, kind="distributed",
                          **signed(app_store, session_owner(at.session_state["cb_session"])))
    # The case: w1-fp16 and w1-none should be alike but differ 1.75x, so 59% and 92%
    # efficiencies read as a real difference.
    figures = {("none", 1): 1750.0, ("fp16", 1): 1000.0, ("none", 2): 3220.0,
               ("fp16", 2): 1180.0}
    for (comp, w), tput in figures.items():
        one = figures[(comp, 1)]
        rs.add_variant(run_id, {
            "name": f"w{w}-{comp}", "workers": w, "compression": comp, "amp": False,
            "throughput": tput, "scaling_efficiency": None if w == 1 else tput / (w * one),
            "step_ms_samples": _steps(tput, w, 0.03, rng), "bytes_per_step": 4e5,
            "comm_ms_per_step": 1.0, "loss": 0.5, "accuracy": 0.9, "error": None})
    rs.finish_run(run_id, "complete")
    at.switch_page("pages/distributed.py").run()
    assert not at.exception, [e.value for e in at.exception]
    warnings = [w.value for w in at.warning]
    assert any("w1-none and w1-fp16 should be alike" in w and "1.75x" in w
               and "95% intervals" in w for w in warnings), warnings
    table = at.dataframe[0].value
    assert {"Samples/s 95% CI", "Efficiency 95% CI"} <= set(table.columns)  # in words
    assert all("–" in cell for cell in table["Samples/s 95% CI"])
    titles = [c.proto.spec for c in at.get("plotly_chart")]
    assert "Throughput vs workers" in titles[0]
    assert not any("(dashed" in t for t in titles)  # the title that was cut off


def test_a_distributed_runs_progress_says_nothing_of_latency():
    from dashboard.jobs_view import headline
    line = headline({"name": "w2-none", "workers": 2, "throughput": 3220.0, "accuracy": 0.9})
    assert "latency" not in line and "3,220 samples/s" in line
    assert "timed with the others" in headline({"name": "baseline", "accuracy": 0.9})


def test_the_countdown_never_shows_zero_before_the_end():
    from dashboard.jobs_view import countdown_text
    assert countdown_text(40.0, 10.0, 0.2) == "about 40 s left (estimated from earlier runs here)"
    assert countdown_text(40.0, 10.0, 0.2, "this machine's speed") == \
        "about 40 s left (estimated from this machine's speed)"
    # The estimate ran out at a third of the way: the pace so far, said as such.
    late = countdown_text(-5.0, 30.0, 1 / 3)
    assert late == "longer than estimated: about 60 s left at the pace so far"
    assert "0 s" not in countdown_text(0.3, 30.0, 0.999)
    assert countdown_text(-5.0, 1.0, 0.01).startswith("longer than estimated")
    # The first run here (no estimate): the pace, once there is one.
    assert countdown_text(None, 20.0, 0.5) == "about 20 s left at the pace so far"
    assert countdown_text(None, 1.0, 0.0) is None


def test_history_lists_a_recommend_run_as_such_with_its_estimate_and_time(app_store):
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.store.database import ResultsStore
    rs = ResultsStore(app_store)
    spec = SweepSpec.from_toggles(prune=0.5, epochs=1).to_dict()
    run_id = rs.start_run(model="seed_cnn", dataset="digits", device="cpu",
                          spec={**spec, "recommend": {"margin": "1pt"}},
                          environment={"estimate": {"seconds": 12.0}})
    rs.finish_run(run_id, "complete")
    assert rs.run(run_id)["kind"] == "sweep"  # what trend and export readers filter on
    at = new_app()
    at.switch_page("pages/history.py").run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    row = table[table["run"] == run_id].iloc[0]
    assert row["kind"] == "recommend"
    assert row["estimated_s"] == 12.0 and row["took_s"] >= 0


def test_a_peak_memory_not_measured_says_why():
    from dashboard.results_view import _summary
    from dashboard.tables import memory_text
    ort = {"peak_memory_mb": None, "memory_method": "not measured: the runtime's own allocator"}
    assert memory_text(ort) == "— (not measured: the runtime's own allocator)"
    assert memory_text({"peak_memory_mb": 1.5}) == "1.50 MB"
    summary = _summary({**ort, "size_mb": 0.25})
    assert "— MB" not in summary and "not measured: the runtime" in summary


@pytest.mark.slow  # a worker's start and one sweep: 30-45 s on a loaded machine
def test_the_worker_stores_the_estimate_with_the_run_beside_what_it_took(queue):
    """Through the real worker: the first run here is stored with its estimate (from the
    machine's speed: nothing earlier of this model to estimate from) beside what it took.
    What a later run's estimate draws from the first is test_estimate.py's, over stored-run
    dicts."""
    import helpers
    from benchmarks.run.estimate import estimate_error
    from benchmarks.spec.sweep import SweepSpec
    from helpers import finished_job
    spec = SweepSpec(**helpers.FAST).to_dict()
    first = queue.submit("sweep", spec, session="a")
    queue.ensure_worker("cpu")
    done = finished_job(queue, first)
    assert done.status == "complete", done.error
    run = queue.store.run(done.run_id)
    estimate = run["environment"]["estimate"]
    assert estimate["source"] == "machine speed" and estimate["seconds"] > 0
    assert estimate["floor_s"] > 0
    assert estimate_error(run).startswith("took ") and ", estimated " in estimate_error(run)


def test_the_distributed_cli_gives_each_runs_throughput_its_interval(tmp_path):
    import subprocess
    import sys
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.distributed", "--workers", "1", "--compression",
         "none,fp16", "--steps", "8", "--batch-size", "16", "--device", "cpu", "--store",
         str(tmp_path / "s.db")], cwd=ROOT, capture_output=True, text=True, timeout=scaled(120))
    assert proc.returncode == 0, proc.stderr
    progress = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 2 and all("samples/s (95% CI " in line for line in progress)
    # Whether the two differ beyond their noise depends on the machine's load; when they do,
    # the table is followed by the warning that says so.
    for line in proc.stdout.splitlines():
        if line.startswith("warning: w1-"):
            assert "should be alike" in line
