"""The dashboard through streamlit.testing.v1.AppTest: every page draws, the Experiment page
drives a real (small) sweep through the real job queue and worker, bad input ends in
st.error, History lists and deletes, Results draws 20 variants."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import time

import pytest
from streamlit.testing.v1 import AppTest

from helpers import ROOT, scaled, signed, wait_until

APP = str(ROOT / "app.py")
PAGES = ["pages/experiment.py", "pages/results.py", "pages/history.py", "pages/distributed.py"]
JOB_WAIT_S = 240


@pytest.fixture(scope="module")
def app_store(tmp_path_factory):
    """A private store (and so a private queue and worker) for this module; the worker is
    stopped at the end so no process outlives the tests."""
    path = tmp_path_factory.mktemp("app-store") / "results.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPRESSION_BENCH_STORE", str(path))
        yield path
        from benchmarks.service.queue import JobQueue
        JobQueue(path).stop_worker("cpu")


def new_app() -> AppTest:
    return AppTest.from_file(APP, default_timeout=scaled(60)).run()


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def small_sweep(at: AppTest) -> AppTest:
    """Only pruning on, one training epoch: the smallest sweep with a real comparison."""
    for key in ("exp_distill", "exp_amp", "exp_int8", "exp_combine"):
        at.toggle(key=key).set_value(False)
    at.number_input(key="exp_epochs").set_value(1)
    return at.run()


def wait_for_job(at: AppTest) -> AppTest:
    """Rerun the page (as the fragment's polling does) until the job has ended."""
    def ended() -> bool:
        assert_clean(at)
        if at.success or at.error or any("Cancelled" in w.value for w in at.warning):
            return True
        at.run()
        return False
    wait_until(ended, JOB_WAIT_S, "the job's end on the page", every=0.5)
    return at


def job_run(at: AppTest, app_store) -> str:
    """The run of the session's sweep job."""
    from benchmarks.service.queue import JobQueue
    return JobQueue(app_store).get(at.session_state["cb_job_id"]).run_id


def table_tab(at: AppTest, view: str):
    """The comparison table of a run's view (``exp-RUN`` or ``results-RUN``): its Table tab
    opened (only the open tab is drawn), as a click on the tab does."""
    at.session_state[f"{view}-tab"] = "Table"
    at.run()
    assert_clean(at)
    return at.dataframe[0].value


def test_every_page_draws(app_store):
    at = new_app()
    assert_clean(at)
    assert [b.label for b in at.button] == ["Run benchmark"]
    # The Recommend panel is drawn on demand: its toggle, then its button.
    at.toggle(key="rec_open").set_value(True).run()
    assert [b.label for b in at.button] == ["Run benchmark", "Recommend"]
    # The embedded default is selected, so a first click runs a full comparison.
    assert at.selectbox(key="exp_model").value == "seed_cnn"
    assert at.selectbox(key="exp_dataset").value == "digits"
    assert at.toggle(key="exp_prune").value and at.toggle(key="exp_distill").value
    assert at.slider(key="exp_prune_ratio").value == 0.5
    assert at.selectbox(key="exp_int8_mode").value == "static"
    for page in PAGES:
        at.switch_page(page).run()
        assert_clean(at)
        assert not errors(at)


def test_invalid_toggles_show_error_and_submit_nothing(app_store):
    at = new_app()
    for key in ("exp_distill", "exp_amp", "exp_int8"):
        at.toggle(key=key).set_value(False)
    at.run()  # pruning alone: Combine is off and disabled, nothing is refused
    assert_clean(at)
    assert not errors(at)
    combine = at.toggle(key="exp_combine")
    assert combine.value is False and combine.disabled
    assert not at.button(key="exp_run").disabled
    # Distillation with no training epochs: refused in the page's words before the click,
    # Run benchmark disabled, and a click that arrives anyway queues nothing.
    at.toggle(key="exp_distill").set_value(True)
    at.number_input(key="exp_epochs").set_value(0)
    at.run()
    assert errors(at) == ["Distillation trains its student for the training epochs, which "
                          "are 0 here: give it epochs under More distill settings, or turn "
                          "distillation off."]
    assert at.button(key="exp_run").disabled
    from benchmarks.service.queue import JobQueue
    from dashboard.identity import session_owner
    assert JobQueue(app_store).jobs(owner=session_owner(at.session_state["cb_session"])) == []


def test_small_sweep_end_to_end(app_store):
    at = small_sweep(new_app())
    at.button(key="exp_run").click().run()
    assert_clean(at)
    assert not errors(at)
    wait_for_job(at)
    assert not errors(at), errors(at)
    assert [s.value for s in at.success] == ["Complete."]
    # The answer first: its cards, then the Overview tab's four figures.
    assert [m.label for m in at.metric][:3] == ["Variant (exploratory)", "Speed-up (p50)",
                                                "Accuracy change"]
    assert len(at.get("plotly_chart")) >= 4
    run_id = job_run(at, app_store)
    table = table_tab(at, f"exp-{run_id}")
    assert list(table["variant"]) == ["baseline", "prune-l1-0.5"]
    assert table["accuracy"].between(0.5, 1.0).all()
    assert (table["p50_ms"] > 0).all()
    assert table.loc[0, "size_mb_vs_base"] == pytest.approx(1.0)

    # A refreshed page (new session state, same URL) finds the session's job again.
    key = at.session_state["cb_session"]
    again = AppTest.from_file(APP, default_timeout=scaled(60))
    again.query_params["session"] = key
    again.run()
    assert_clean(again)
    assert list(table_tab(again, f"exp-{run_id}")["variant"]) == ["baseline", "prune-l1-0.5"]

    # Results shows this session's run by default.
    at.switch_page("pages/results.py").run()
    assert_clean(at)
    assert list(table_tab(at, f"results-{run_id}")["variant"]) == ["baseline",
                                                                   "prune-l1-0.5"]
    assert [b.label for b in at.get("download_button")] == [
        "Download CSV", "Download JSON", "Download report"]

    # History lists it; deleting removes it from the store.
    from benchmarks.store.database import ResultsStore
    at.switch_page("pages/history.py").run()
    assert_clean(at)
    assert run_id in list(at.dataframe[0].value["run"])
    at.selectbox(key="history_delete_pick").set_value(run_id)
    at.checkbox(key="history_delete_sure").check()
    at.run()
    at.button(key="history_delete").click().run()
    assert_clean(at)
    assert ResultsStore(app_store).run(run_id) is None
    assert any(run_id in s.value for s in at.success)


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {self.mark}",))


def test_code_carrying_checkpoint_is_refused(app_store, tmp_path):
    mark = tmp_path / "pwned"
    evil = _Evil()
    evil.mark = mark
    at = small_sweep(new_app())
    at.toggle(key="exp_prune").set_value(False)  # Combine follows: off with one technique
    at.toggle(key="exp_use_checkpoint").set_value(True)
    at.run()
    at.file_uploader(key="exp_checkpoint").set_value(
        ("evil.pt", pickle.dumps(evil), "application/octet-stream"))
    at.run()
    # Refused before anything is queued (the worker's own check, asked by the form), with
    # Run benchmark disabled.
    assert_clean(at)
    assert any("evil" in e and "checkpoint" in e.lower() for e in errors(at)), errors(at)
    assert at.button(key="exp_run").disabled
    assert not mark.exists(), "the checkpoint's code ran"
    upload_dir = at.session_state["cb_upload_dir"].path
    assert upload_dir.is_dir() and (upload_dir.stat().st_mode & 0o077) == 0  # private
    # The app keeps working: every page still draws.
    for page in PAGES:
        at.switch_page(page).run()
        assert_clean(at)
    shutil.rmtree(upload_dir, ignore_errors=True)


def _synthetic_variants(n: int):
    from benchmarks.report.results import VariantResult
    out = []
    for i in range(n):
        base = i == 0
        out.append(VariantResult.of(
            name="baseline" if base else f"prune-l1-{i / 25:g}",
            techniques=[] if base else ["prune"], device="cpu", accuracy=0.95 - 0.01 * i,
            latency_samples_ms=[1.0 + 0.05 * i + 0.01 * (k % 7) * (1 + (i % 3 == 0) * 20)
                                for k in range(40)],
            batch_size=32, peak_memory_bytes=(10 + i) * 2**20, memory_method="rss",
            size_bytes=(5 - 0.1 * i) * 2**20, size_gzip_bytes=(4 - 0.15 * i) * 2**20,
            params=100_000, nonzero_params=100_000 - 4000 * i, flops=10**6,
            layer_sparsity=None if base else {"0": i / 25, "2": i / 30, "5": i / 40},
            error="RuntimeError: boom" if i == n - 1 else None))
    return out


def test_results_page_draws_20_variants(app_store):
    from benchmarks.store.database import ResultsStore
    rs = ResultsStore(app_store)
    run_id = rs.start_run(model="seed_cnn", dataset="digits", device="cpu", spec={},
                          environment={"torch": "x", "cpu": "test", "threads": 1})
    for v in _synthetic_variants(20):
        rs.add_variant(run_id, v)
    rs.finish_run(run_id, "failed")
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    at.query_params["run"] = run_id  # the read-only link to one run
    at.switch_page("pages/results.py").run()
    start = time.perf_counter()
    at.run()
    elapsed = time.perf_counter() - start
    assert_clean(at)
    assert any("boom" in w.value for w in at.warning)      # failed variant listed
    assert any("Noisy latency" in w.value for w in at.warning)
    assert elapsed < 3.0, f"Results page with 20 variants took {elapsed:.2f} s"
    assert len(table_tab(at, f"results-{run_id}")) == 20


def test_distributed_page_charts_a_stored_run(app_store):
    from benchmarks.store.database import ResultsStore
    from dashboard.identity import session_owner
    at = new_app()
    rs = ResultsStore(app_store)
    run_id = rs.start_run(model="seed_cnn", dataset="digits", device="cpu", spec={},
                          environment={}, kind="distributed",
                          **signed(app_store, session_owner(at.session_state["cb_session"])))
    for w, tput in ((1, 1000.0), (2, 1700.0)):
        for comp in ("none", "fp16"):
            rs.add_variant(run_id, {
                "name": f"{comp}-w{w}", "workers": w, "compression": comp, "amp": False,
                "throughput": tput, "scaling_efficiency": tput / (w * 1000.0),
                "bytes_per_step": 4e5 / (2 if comp == "fp16" else 1),
                "comm_ms_per_step": 1.0, "loss": 0.5, "accuracy": 0.9, "error": None})
    rs.finish_run(run_id, "complete")
    at.switch_page("pages/distributed.py").run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 3
    assert len(at.dataframe[0].value) == 4


def _submit_distributed(at: AppTest) -> AppTest:
    [button] = [b for b in at.button if b.label == "Run distributed benchmark"]
    return button.click().run()


def test_distributed_form_is_the_config_fields_and_refuses_in_one_line(store):
    """The form is DistributedConfig's setting metadata: its defaults, no widget for what the
    operator (ports, clusters, data roots) or a test (fault hooks) sets, and the config's own
    check behind st.error."""
    from benchmarks.spec.distributed import DistributedConfig
    from optimizers.settings import setting_fields
    at = new_app()
    at.switch_page("pages/distributed.py").run()
    assert_clean(at)
    default = DistributedConfig()
    assert at.selectbox(key="dist_model").value == default.model
    assert at.selectbox(key="dist_dataset").value == default.dataset
    assert "imagefolder:DIR" not in at.selectbox(key="dist_dataset").options
    assert tuple(at.multiselect(key="dist_workers_multi").value) == default.workers
    assert tuple(at.multiselect(key="dist_compressions_multi").value) == default.compressions
    assert at.toggle(key="dist_amp").value is default.amp
    assert at.number_input(key="dist_steps").value == default.steps
    assert at.number_input(key="dist_batch_size").value == default.batch_size
    assert at.number_input(key="dist_timeout_s").value == default.timeout_s
    assert at.selectbox(key="dist_device").value == default.device
    for field, meta, _ in setting_fields(DistributedConfig):
        drawn = any(key in at.session_state for key in (f"dist_{field}", f"dist_{field}_multi"))
        assert drawn is (meta.form and not meta.hidden), field

    at.multiselect(key="dist_workers_multi").set_value([])
    at = _submit_distributed(at)
    assert errors(at) == ["distributed.workers must be an integer >= 1, one or more distinct, "
                          "comma-separated; got ()"]
    at.multiselect(key="dist_workers_multi").set_value([1])
    at.selectbox(key="dist_dataset").set_value("synthetic")
    at = _submit_distributed(at)
    assert errors(at) == ["synthetic needs --input-shape C,H,W (for example 3,64,64)"]
    at.text_input(key="dist_input_shape").set_value("3,x,8")
    at = _submit_distributed(at)
    assert len(errors(at)) == 1 and "distributed.input_shape must be" in errors(at)[0]
    assert_clean(at)
    assert state_job(at) is None  # nothing was submitted


def state_job(at: AppTest):
    from dashboard.state import DIST_JOB_ID
    return at.session_state[DIST_JOB_ID] if DIST_JOB_ID in at.session_state else None


def test_every_compression_offered_has_a_ddp_hook_and_wire_dtype():
    from benchmarks.distributed.worker import HOOKS, WIRE_DTYPES
    from dashboard.catalog import COMPRESSIONS as shown
    assert shown and set(shown) == set(HOOKS) == set(WIRE_DTYPES)


def test_no_page_imports_torch(tmp_path):
    """Draw every page in a fresh interpreter and check torch never loaded there."""
    script = f"""
import sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({APP!r}, default_timeout={scaled(60)!r}).run()
for page in {PAGES!r}:
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
from benchmarks.service.queue import JobQueue
JobQueue().stop_worker("cpu")
print(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
"""
    env = {**os.environ, "COMPRESSION_BENCH_STORE": str(tmp_path / "r.db")}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, text=True,
                         capture_output=True, timeout=scaled(120))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_a_torchvision_model_from_the_catalogue(app_store, tmp_path, monkeypatch):
    """The catalogue's models are picked like the zoo's; absent weights are refused on the
    page, in one line naming the file and its folder, before anything is submitted."""
    at = new_app()
    at.selectbox(key="exp_source").set_value("torchvision").run()
    assert_clean(at)
    picker = at.selectbox(key="exp_torchvision_model")
    assert len(picker.options) == 80 and "resnet50 · resnet" in picker.options
    picker.set_value("mobilenet_v3_large").run()
    weights = at.selectbox(key="exp_torchvision_weights")
    assert weights.options == ["none: train from scratch", "DEFAULT", "IMAGENET1K_V1",
                               "IMAGENET1K_V2"]
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    weights.set_value("DEFAULT").run()
    assert_clean(at)
    assert any("mobilenet_v3_large-5c1a4163.pth" in e and str(tmp_path / "torch") in e
               for e in errors(at)), errors(at)
    at.selectbox(key="exp_torchvision_model").set_value("mobilenet_v3_small").run()
    at.selectbox(key="exp_torchvision_weights").set_value("none: train from scratch")
    small_sweep(at)
    assert not errors(at), errors(at)
    at.button(key="exp_run").click().run()
    wait_for_job(at)
    assert not errors(at), errors(at)
    table = table_tab(at, f"exp-{job_run(at, app_store)}")
    assert list(table["variant"]) == ["baseline", "prune-l1-0.5"]
    assert table["accuracy"].notna().all()


def test_cancel_stops_a_running_job(app_store):
    at = small_sweep(new_app())
    at.number_input(key="exp_epochs").set_value(20)  # long enough to be caught running
    at.run()
    at.button(key="exp_run").click().run()
    assert_clean(at)

    def steps():  # the running job as steps: its current variant and phase, the bar
        at.run()
        assert_clean(at)
        found = [s for s in at.get("status") if s.label.startswith("Running: 0 of 2 done")
                 and any("**baseline" in str(getattr(m, "value", ""))
                         for m in s.children.values())]
        return found and found[0]
    status = wait_until(steps, 120, "the running job's steps", every=0.5)
    texts = [str(m.value) for m in status.children.values() if hasattr(m, "value")]
    assert any("**baseline" in t for t in texts), texts  # the current step, named
    at.button(key=f"cancel-{at.session_state['cb_job_id']}").click().run()
    wait_for_job(at)
    from benchmarks.service.queue import JobQueue
    job = JobQueue(app_store).get(at.session_state["cb_job_id"])
    assert job.status == "cancelled", (job.status, job.error)
    assert any("Cancelled" in w.value for w in at.warning)


def test_upload_folder_is_deleted_with_the_session():
    import gc

    from dashboard.state import UploadFolder
    folder = UploadFolder()
    path = folder.path
    (path / "weights.pt").write_bytes(b"x")
    assert path.is_dir() and (path.stat().st_mode & 0o077) == 0
    del folder  # what happens when Streamlit drops a closed session's state
    gc.collect()
    assert not path.exists()


def test_history_shows_a_killed_cli_run_as_interrupted(app_store):
    import signal

    from helpers import process_holding_a_run
    proc, run_id = process_holding_a_run(app_store)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    at = new_app()
    at.switch_page("pages/history.py").run()
    assert_clean(at)
    table = at.dataframe[0].value
    row = table[table["run"] == run_id].iloc[0]
    assert row["status"] == "interrupted" and row["variants"] == 1


def test_a_team_server_says_how_a_model_file_gets_there(app_store):
    """Bound to every interface (a team server), the page takes no model file: one line says
    the operator copies it into the models folder; on a local run, the uploader."""
    from streamlit import config
    local = new_app()
    local.selectbox(key="exp_source").set_value("Model file").run()
    assert_clean(local)
    assert local.file_uploader(key="exp_model_upload")
    address = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    try:
        team = new_app()
        team.selectbox(key="exp_source").set_value("Model file").run()
    finally:
        config.set_option("server.address", address)
    assert_clean(team)
    assert not team.get("file_uploader")
    assert any(c.value.startswith("A model file reaches this server through its operator")
               for c in team.caption)
