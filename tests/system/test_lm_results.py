"""A language model's run on the dashboard (issue 35): the run made by the CLI on tiny-lm,
opened by its link on the Results page, answers in LM terms first (the answer line, then
one table row per cell with perplexity change, agreement, decode time and stored size, and
the speed/quality chart), and History lists it; no page raises."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from helpers import ROOT, run_cli, scaled

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


def test_history_lists_the_language_model_run(lm_run):
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    at.switch_page("pages/history.py").run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    shown = " ".join(str(df.value.to_dict()) for df in at.dataframe) + " ".join(
        m.value for m in at.markdown)
    assert "tiny-lm" in shown
