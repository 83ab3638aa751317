"""The Recommend panel through streamlit.testing.v1.AppTest: bad input ends in one st.error
on the page and queues nothing; a good one queues a recommend job with the page's settings."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from helpers import ROOT


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(tmp_path / "results.db"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    at.toggle(key="rec_open").set_value(True).run()  # the panel is drawn on demand
    yield at
    from benchmarks.service.queue import JobQueue
    JobQueue(tmp_path / "results.db").stop_worker("cpu")


@pytest.mark.parametrize("within, words", [("-1pt", "--within must be a margin"),
                                           ("0", "--within must be a margin"),
                                           ("60pt", "--within must be a margin")])
def test_bad_input_is_one_error_on_the_page(app, within, words):
    app.text_input(key="rec_within").set_value(within).run()
    app.button(key="rec_run").click().run()
    assert not app.exception
    assert [e.value for e in app.error if words in e.value] and len(app.error) == 1
    from benchmarks.service.queue import JobQueue
    from dashboard import state
    assert not [j for j in JobQueue(state.store_path()).jobs() if j.kind == "recommend"]


def test_the_panel_queues_a_recommend_job_with_the_page_settings(app):
    for key in ("exp_prune", "exp_distill", "exp_amp", "exp_combine"):
        app.toggle(key=key).set_value(False)
    app.number_input(key="exp_epochs").set_value(2)
    app.text_input(key="rec_within").set_value("2%")
    app.number_input(key="rec_trials").set_value(3)
    app.run()
    app.button(key="rec_run").click().run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    from benchmarks.recommend.job import from_payload
    from benchmarks.service.queue import JobQueue
    from dashboard import state
    (job,) = [j for j in JobQueue(state.store_path()).jobs() if j.kind == "recommend"]
    request, spec, space = from_payload(job.payload)
    assert (request.within, request.trials, spec.epochs) == ("2%", 3, 2)
    assert space.techniques == ("int8",) and space.knobs  # free: int8's settings searched
    assert JobQueue(state.store_path()).cancel(job.job_id)


def test_distill_asked_for_a_model_with_no_student_is_one_error_on_the_page(app):
    # seed_cnn_narrow is seed_cnn's student: nothing smaller to distil it into. Refused on
    # the page, not as a job that fails in the worker.
    app.selectbox(key="exp_model").set_value("seed_cnn_narrow")
    for key in ("exp_prune", "exp_amp", "exp_int8", "exp_combine"):
        app.toggle(key=key).set_value(False)
    app.toggle(key="exp_distill").set_value(True)
    app.run()
    app.button(key="rec_run").click().run()
    assert not app.exception
    assert [e.value for e in app.error if "give --student" in e.value] and \
        len(app.error) == 1, [e.value for e in app.error]
    from benchmarks.service.queue import JobQueue
    from dashboard import state
    assert not [j for j in JobQueue(state.store_path()).jobs() if j.kind == "recommend"]
