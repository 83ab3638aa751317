"""A language model's run on the dashboard (issue 35): the run made by the CLI on tiny-lm,
opened by its link on the Results page, answers in LM terms first (the answer line, then
one table row per cell with perplexity change, agreement, decode time and stored size, and
the speed/quality chart), and History lists it; no page raises. On the Experiment page, a
language model is one more model source: its own techniques' controls (a language model's
choices, no training budgets), the text, the runtime modes; Run benchmark queues an ``lm``
job whose run draws below the form, in AppTest and in Chromium."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from helpers import ROOT, chromium, run_cli, scaled, scaled_ms, wait_until

APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    store = tmp_path_factory.mktemp("lm-store") / "results.db"
    done = run_cli("run", "--model", "tiny-lm", "--dataset", "text", "--int8",
                   "weight-only", "--prune", "0.5", "--prune-method", "wanda-2:4",
                   "--max-windows", "12", "--window", "64", "--prompt-tokens", "16",
                   "--new-tokens", "4", "--timing-rounds", "3", "--quiet", "--store",
                   str(store))
    assert done.returncode == 0, done.stderr[-2000:]
    from benchmarks.store.database import ResultsStore
    (run,) = ResultsStore(store).runs(kind="lm")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPRESSION_BENCH_STORE", str(store))
        yield run
        from benchmarks.service.queue import JobQueue
        JobQueue(store).stop_worker("cpu")


def test_the_results_page_answers_a_language_model_run_in_its_terms(lm_run):
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    at.query_params["run"] = lm_run["run_id"]
    at.switch_page("pages/results.py").run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    answer = next(m.value for m in at.markdown if m.value.startswith("**The answer**"))
    assert "tiny-lm on text" in answer
    assert "12 windows of 64 tokens" in answer
    rows = at.dataframe[0].value
    assert list(rows["Variant"]) == ["baseline", "prune-wanda-2:4-0.5", "int8-weight-only"]
    assert set(rows["Mode"]) == {"eager"}
    assert (rows["Decode ms/token"] > 0).all() and (rows["Weights MB"] > 0).all()
    by = rows.set_index("Variant")
    assert by.loc["int8-weight-only", "Weights MB"] < by.loc["baseline", "Weights MB"]
    assert by.loc["baseline", "dNLL/token"] == 0
    assert len(at.get("plotly_chart")) == 1


def test_a_language_model_recommendation_answers_with_its_certificate(tmp_path, monkeypatch):
    store = tmp_path / "results.db"
    done = run_cli("recommend", "--model", "tiny-lm", "--dataset", "text", "--int8",
                   "weight-only", "--objective", "size", "--within", "5pt", "--max-windows",
                   "16", "--window", "64", "--prompt-tokens", "16", "--new-tokens", "4",
                   "--timing-rounds", "3", "--quiet", "--store", str(store))
    assert done.returncode == 0, done.stderr[-2000:]
    from benchmarks.store.database import ResultsStore
    (run,) = ResultsStore(store).runs(kind="lm")
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(store))
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    at.query_params["run"] = run["run_id"]
    at.switch_page("pages/results.py").run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    shown = at.success[0].value.replace("\u200b", "")  # md() keeps "@" from linking
    assert shown.startswith("certified: int8-weight-only@eager is within 5 points of the "
                            "baseline's next-token accuracy"), shown
    assert any("certify of" in c.value and "evaluation windows" in c.value
               for c in at.caption)
    table = at.dataframe[0].value
    assert list(table["candidate"]) == ["int8-weight-only@eager"]
    assert list(table["test"]) == ["paired t over windows"]
    assert len(at.get("plotly_chart")) == 2  # the grid's cells, then the cells' trade-off


def test_history_lists_the_language_model_run(lm_run):
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    at.switch_page("pages/history.py").run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    shown = " ".join(str(df.value.to_dict()) for df in at.dataframe) + " ".join(
        m.value for m in at.markdown)
    assert "tiny-lm" in shown
    # With its link to the Results page, which draws it (issue 46).
    (table,) = [df.value for df in at.dataframe if "open" in df.value.columns]
    row = table[table["model"] == "tiny-lm"].iloc[0]
    assert row["open"] and row["open"].endswith(f"run={row['run']}")


# A small run from the page: its windows and generation carried by the link.
SMALL_LINK = {"model": "tiny-lm", "dataset": "text", "window": "64", "max_windows": "12",
              "prompt_tokens": "16", "new_tokens": "4", "int4": "off", "amp": "off"}


def test_the_experiment_page_runs_a_language_model(tmp_path, monkeypatch):
    store = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(store))
    from benchmarks.service.queue import JobQueue
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    for name, value in SMALL_LINK.items():
        at.query_params[name] = value
    at.run()
    try:
        assert not at.exception and not at.error, [e.value for e in at.exception]
        assert at.selectbox(key="exp_source").value == "Language model (text)"
        # A language model's choices, no training budget, no image data set.
        assert at.selectbox(key="exp_lm_prune_method").options == [
            "magnitude", "wanda", "magnitude-2:4", "wanda-2:4"]
        assert at.selectbox(key="exp_lm_int8_mode").options == ["weight-only", "dynamic"]
        assert not [w for w in at.number_input if w.key == "exp_epochs"]
        assert not [w for w in at.selectbox if w.key == "exp_dataset"]
        plan = next(c.value for c in at.caption if " cells of tiny-lm" in c.value)
        assert plan.startswith("**3 variants x 1 mode = 3 cells")
        # Certifying is the CLI's for a language model: the page gives its command.
        assert any("compression-bench recommend --model tiny-lm --dataset text" in c.value
                   for c in at.code)
        at.button(key="exp_run").click().run()
        assert not at.error, [e.value for e in at.error]
        queue = JobQueue(store)
        (job,) = queue.jobs()
        assert job.kind == "lm"
        wait_until(lambda: queue.get(job.job_id).status not in ("queued", "running"), 180,
                   "the language model's job ends")
        assert queue.get(job.job_id).status == "complete", queue.get(job.job_id).error
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        answer = next(m.value for m in at.markdown if m.value.startswith("**The answer**"))
        assert "tiny-lm on text: 12 windows of 64 tokens" in answer
        assert list(at.dataframe[0].value["Variant"]) == ["baseline", "prune-magnitude-0.5",
                                                          "int8-weight-only"]
    finally:
        JobQueue(store).stop_worker("cpu")


@pytest.mark.browser
@pytest.mark.slow  # a server, Chromium and a language model's job: about a minute
def test_in_chromium_a_language_model_runs_from_the_page_and_draws_in_its_terms(tmp_path):
    from urllib.parse import urlencode

    from playwright.sync_api import expect

    from tools.browser import running_server
    with chromium() as browser, running_server(tmp_path / "results.db") as (_, url):
        page = browser.new_context(viewport={"width": 1600, "height": 1100}).new_page()
        page.goto(f"{url}/?{urlencode({**SMALL_LINK, 'int8': 'weight-only'})}")
        run = page.get_by_role("button", name="Run benchmark")
        expect(run).to_be_visible(timeout=scaled_ms(60_000))
        expect(page.get_by_text(re.compile(r"^3 variants x 1 mode = 3 cells of tiny-lm"))
               ).to_be_visible(timeout=scaled_ms(30_000))
        run.click()
        answer = page.get_by_text(re.compile(r"^The answer \(a language model, tiny-lm on text"))
        expect(answer).to_be_visible(timeout=scaled_ms(180_000))
        # The cells' grid (drawn on a canvas: its columns are the AppTest's to read) and the
        # speed/quality chart, whose axes say what is compared with what.
        expect(page.locator('[data-testid="stDataFrame"]').last).to_be_visible()
        chart = page.locator(".js-plotly-plot").last
        expect(chart).to_be_visible(timeout=scaled_ms(30_000))
        expect(chart).to_contain_text("decode speed-up over the baseline in the same mode")
        expect(chart).to_contain_text("NLL change per token")
        assert not page.get_by_text("Traceback").count()
