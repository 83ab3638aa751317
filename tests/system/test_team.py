"""Team members kept apart, through the dashboard itself (AppTest sessions over a real queue
and worker): uploads belong to their job (finding 3), session keys are the server's (6), runs
belong to their owner (7), server paths stay in the data folder (8), one person cannot hold
the queue (9), uploads are capped (10)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from benchmarks.service.queue import JobQueue
from benchmarks.spec.sweep import SweepSpec
from dashboard.identity import session_owner
from helpers import FAST, ROOT, finished_job, scaled, wait_until

APP = str(ROOT / "app.py")
SLOW = SweepSpec.from_toggles(prune=0.5, amp=True, **{**FAST, "min_time_s": 3.0}).to_dict()


@pytest.fixture
def app_store(tmp_path, monkeypatch):
    """A private store, data folder and upload area: each test its own queue and worker."""
    path = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(path))
    monkeypatch.setenv("COMPRESSION_BENCH_DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "data" / "cats" / "a").mkdir(parents=True)
    yield path
    JobQueue(path).stop_worker("cpu")


def app(query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    for key, value in (query or {}).items():
        at.query_params[key] = value
    return at.run()


def clean(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def baseline_only(at: AppTest, epochs: int = 1) -> AppTest:
    for key in ("exp_prune", "exp_distill", "exp_amp", "exp_int8", "exp_combine"):
        at.toggle(key=key).set_value(False)
    at.number_input(key="exp_epochs").set_value(epochs)
    return at.run()


def owner_of(at: AppTest) -> str:
    return session_owner(at.session_state["cb_session"])


def my_jobs_panel():
    from dashboard import widgets
    widgets.my_jobs_panel()


def checkpoint_bytes() -> bytes:
    """A real seed_cnn checkpoint for digits, as safetensors."""
    from safetensors.torch import save

    from benchmarks.zoo.models import create_model
    model = create_model("seed_cnn", 10, 1, (8, 8))
    return save({k: v.contiguous() for k, v in model.state_dict().items()})


def busy_worker(app_store: Path) -> tuple[JobQueue, str]:
    """The worker busy with someone else's long job, so the next one waits in line."""
    queue = JobQueue(app_store)
    job_id = queue.submit("sweep", SLOW, session="other")
    queue.ensure_worker("cpu")
    wait_until(lambda: queue.get(job_id).status == "running", 120, "the long job starting")
    return queue, job_id


# -- finding 3: an upload belongs to its job -------------------------------------------------

def test_a_queued_job_keeps_its_uploaded_checkpoint_after_the_session_is_gone(app_store):
    queue, long_job = busy_worker(app_store)
    at = baseline_only(app())
    at.toggle(key="exp_use_checkpoint").set_value(True)
    at.run()
    at.file_uploader(key="exp_checkpoint").set_value(
        ("mine.safetensors", checkpoint_bytes(), "application/octet-stream"))
    at.run()
    at.button(key="exp_run").click().run()
    clean(at)
    job = queue.get(at.session_state["cb_job_id"])
    assert job.status == "queued" and job.folder
    checkpoint = Path(job.payload["checkpoint"])
    assert checkpoint.parent == Path(job.folder) and checkpoint.is_file()
    assert Path(job.folder).parent == queue.jobs_dir
    assert (Path(job.folder).stat().st_mode & 0o077) == 0
    assert checkpoint.stat().st_mode & 0o777 == 0o600  # the upload itself too (issue 21.8)
    # The browser refreshes, then the old session is dropped with its upload folder.
    at.session_state["cb_upload_dir"].clear()
    refreshed = clean(app({"session": at.session_state["cb_session"]}))
    assert any("Queued: place 1" in i.value for i in refreshed.info)  # found again
    queue.cancel(long_job)  # the line moves on
    done = finished_job(queue, job.job_id, 240)
    assert done.status == "complete", done.error
    assert queue.store.run(done.run_id)["variants"][0]["accuracy"] is not None
    assert not Path(job.folder).exists()  # removed when the job ended


def test_uploads_held_on_the_server_are_capped(app_store, monkeypatch):
    monkeypatch.setenv("COMPRESSION_BENCH_UPLOAD_MB", "1")
    at = baseline_only(app())
    at.toggle(key="exp_use_checkpoint").set_value(True)
    at.run()
    at.file_uploader(key="exp_checkpoint").set_value(
        ("big.pt", b"\0" * (2 * 2**20), "application/octet-stream"))
    clean(at.run())
    # Known before the click (issue 46): the line at the top, Run benchmark disabled.
    (error,) = [e.value for e in at.error]
    assert "COMPRESSION_BENCH_UPLOAD_MB" in error and "\n" not in error
    assert at.button(key="exp_run").disabled
    assert JobQueue(app_store).jobs() == []


# -- finding 6: session keys are minted by the server ----------------------------------------

def test_a_session_key_the_server_did_not_mint_is_refused(app_store):
    """AppTest has no HTTP layer, so no identity cookie: a session with no browser keeps its
    key through the URL, where only a key this server minted for such a session is taken (on
    a real server the key is the identity cookie's: tests/system/test_identity_cookie.py)."""
    first = clean(app())
    key = first.session_state["cb_session"]
    assert clean(app({"session": key})).session_state["cb_session"] == key  # a refresh
    for forged in ("anything", "0" * 40, key[:16] + "f" * 24, key.upper()):
        at = clean(app({"session": forged}))
        assert at.session_state["cb_session"] != forged
        assert any("was not issued to this browser" in w.value for w in at.warning)


# -- finding 7: runs belong to their owner ----------------------------------------------------

def test_a_new_session_sees_only_its_own_results_and_cannot_delete_others_runs(app_store):
    alice = baseline_only(app())
    alice.button(key="exp_run").click().run()
    queue = JobQueue(app_store)
    job = finished_job(queue, alice.session_state["cb_job_id"], 240)
    assert job.status == "complete"
    run = queue.store.run(job.run_id)
    assert run["owner"] == owner_of(alice) and job.owner == owner_of(alice)

    bob = clean(app())
    bob.switch_page("pages/results.py").run()
    clean(bob)
    assert not bob.dataframe  # not alice's run
    assert any("You have no runs yet" in i.value for i in bob.info)
    bob.switch_page("pages/history.py").run()
    clean(bob)
    table = bob.dataframe[0].value
    row = table[table["run"] == run["run_id"]].iloc[0]
    assert not row["yours"] and row["open"].endswith(f"results?run={run['run_id']}")
    assert not [s for s in bob.selectbox if s.key == "history_delete_pick"]
    with pytest.raises(PermissionError):
        queue.store.delete_run(run["run_id"], by=owner_of(bob))
    # The shared link opens the run read-only (here on its Table tab).
    shared = clean(app({"run": run["run_id"]}))
    shared.session_state[f"results-{run['run_id']}-tab"] = "Table"
    shared.switch_page("pages/results.py").run()
    clean(shared)
    assert list(shared.dataframe[0].value["variant"]) == ["baseline"]
    # Alice's own Results page opens on her run, and she may delete it.
    alice.session_state[f"results-{run['run_id']}-tab"] = "Table"
    alice.switch_page("pages/results.py").run()
    clean(alice)
    assert list(alice.dataframe[0].value["variant"]) == ["baseline"]
    assert queue.store.delete_run(run["run_id"], by=owner_of(alice))


# -- finding 8: server paths only inside the data folder --------------------------------------

def test_image_folders_outside_the_data_folder_get_one_line_that_reveals_nothing(app_store,
                                                                               tmp_path):
    (tmp_path / "outside" / "a").mkdir(parents=True)
    at = app()
    at.selectbox(key="exp_dataset").set_value("imagefolder:DIR").run()
    messages = set()
    for typed in ("/", "..", "../..", "/etc", "/nonexistent-xyz", str(tmp_path / "outside"),
                  "cats/../../outside", "/root"):
        at.text_input(key="exp_imagefolder").set_value(typed).run()
        clean(at)
        (error,) = [e.value for e in at.error]
        messages.add(error)
    assert len(messages) == 1, messages  # the same line whether it exists or not
    (line,) = messages
    assert "COMPRESSION_BENCH_DATA_DIR" in line and "\n" not in line
    at.text_input(key="exp_imagefolder").set_value("cats").run()
    assert not [e.value for e in clean(at).error if "data folder" in e.value]


def test_the_worker_refuses_a_job_naming_a_path_outside_the_data_folder(app_store):
    queue = JobQueue(app_store)
    job_id = queue.submit("sweep", SweepSpec(dataset="imagefolder:/etc", **FAST).to_dict(),
                          session="a")
    queue.ensure_worker("cpu")
    job = finished_job(queue, job_id, 120)
    assert job.status == "failed"
    assert job.error == ("invalid input: the image folder must be a folder inside the "
                         "server's data folder (COMPRESSION_BENCH_DATA_DIR); give its path "
                         "relative to that folder")


# -- finding 9: one person cannot hold the queue ---------------------------------------------

def test_five_quick_clicks_make_at_most_the_cap_and_my_jobs_lists_and_cancels_them(app_store):
    queue, long_job = busy_worker(app_store)
    at = baseline_only(app(), epochs=50)
    for _ in range(5):
        at.button(key="exp_run").click().run()
        clean(at)
    mine = queue.jobs(owner=owner_of(at))
    assert len(mine) == 3  # COMPRESSION_BENCH_MAX_JOBS
    refusals = [e.value for e in at.error]
    assert refusals and all("the most one person may have here (3" in e for e in refusals)
    # My jobs (the sidebar's panel) lists every one of them, each with its Cancel. (Drawn on
    # its own: AppTest drops the sidebar of a multipage app while a fragment polls.)
    panel = AppTest.from_function(my_jobs_panel, default_timeout=scaled(60))
    panel.session_state["cb_session"] = at.session_state["cb_session"]
    panel.run()
    clean(panel)
    assert sorted(b.key.removeprefix("myjobs-cancel-") for b in panel.button) == \
        sorted(j.job_id for j in mine)
    for job in mine:
        panel.button(key=f"myjobs-cancel-{job.job_id}").click().run()
        clean(panel)
    assert [queue.get(j.job_id).status for j in mine] == ["cancelled"] * 3
    # Someone else's job cannot be cancelled by this session.
    with pytest.raises(PermissionError):
        queue.cancel(long_job, by=owner_of(at))
    queue.cancel(long_job)


# -- issue 21.5: a new session does not reset the cap -------------------------------------------

def test_a_second_session_from_the_same_address_is_told_which_cap_it_met(app_store,
                                                                        monkeypatch):
    """Without sign-in the owner is the session, one page load from a new one: the cap per
    address (every AppTest session is a loopback client) holds across sessions, and the page
    says which cap was hit."""
    monkeypatch.setenv("COMPRESSION_BENCH_MAX_JOBS", "1")
    monkeypatch.setenv("COMPRESSION_BENCH_MAX_JOBS_PER_ADDRESS", "2")
    queue, long_job = busy_worker(app_store)
    first = baseline_only(app(), epochs=50)
    for _ in range(2):
        first.button(key="exp_run").click().run()
    assert [e.value for e in clean(first).error] == [first.error[0].value]
    assert "the most one person may have here (1, COMPRESSION_BENCH_MAX_JOBS)" in \
        first.error[0].value
    second = baseline_only(app(), epochs=50)  # the bare URL again: a new session
    second.button(key="exp_run").click().run()
    assert not clean(second).error  # its own first job: the address has one place left
    third = baseline_only(app(), epochs=50)
    third.button(key="exp_run").click().run()
    (error,) = [e.value for e in clean(third).error]
    assert "your address already has 2 jobs" in error
    assert "COMPRESSION_BENCH_MAX_JOBS_PER_ADDRESS" in error and "\n" not in error
    assert len([j for j in queue.jobs() if j.owner.startswith("session:")]) == 2
    for job in queue.jobs():
        queue.cancel(job.job_id)
