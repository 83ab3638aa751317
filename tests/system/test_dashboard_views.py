"""The dashboard as a team uses it (issue 25), through streamlit.testing.v1.AppTest: links
that carry the whole experiment (and refuse bad parameters in one warning, submitting
nothing), a Results link that opens a tab and a variant, the answer cards, the tab of a
further view drawn by its module once it exists, History's trend flagging a run made slower
on purpose. The browser's side (two contexts, dark mode, clicks) is test_browser_dashboard.py."""

from __future__ import annotations

import sys
import types

import pytest
from streamlit.testing.v1 import AppTest

from helpers import ROOT, scaled, store_answer_run, store_history

APP = str(ROOT / "app.py")


@pytest.fixture
def app_env(tmp_path, monkeypatch):
    """A private store for the app; the worker it starts is stopped after the test."""
    path = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(path))
    yield path
    from benchmarks.service.queue import JobQueue
    JobQueue(path).stop_worker("cpu")


def opened(query: dict, page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    for name, value in query.items():
        at.query_params[name] = value
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def form_link(at: AppTest) -> dict:
    return {k: v for k, v in at.query_params.items() if k != "session"}


LINK = {"model": "torchvision:mobilenet_v3_small", "dataset": "synthetic",
        "prune.ratio": "0.7", "int8.mode": "dynamic", "distill": "off", "epochs": "2"}


def test_a_link_fills_the_same_form_and_writes_itself_back(app_env):
    at = opened(LINK)
    assert not at.warning
    assert at.selectbox(key="exp_source").value == "torchvision"
    assert at.selectbox(key="exp_torchvision_model").value == "mobilenet_v3_small"
    assert at.selectbox(key="exp_dataset").value == "synthetic"
    assert at.slider(key="exp_prune_ratio").value == 0.7
    assert at.selectbox(key="exp_int8_mode").value == "dynamic"
    assert at.toggle(key="exp_distill").value is False
    assert at.number_input(key="exp_epochs").value == 2
    # What the form holds is the link, defaults left out: distillation's is off for a model
    # with no student to default to (mobilenet_v3_small has no smaller sibling).
    assert form_link(at) == {k: v for k, v in LINK.items() if k != "distill"}
    estimate = [c.value for c in at.caption if "variant" in c.value and "**" in c.value]
    # Moving a knob writes it into the URL.
    at.slider(key="exp_prune_ratio").set_value(0.3).run()
    assert at.query_params["prune.ratio"] == "0.3"
    # The copied link in another session: the same form, the same count and estimate.
    again = opened(form_link(at))
    assert again.slider(key="exp_prune_ratio").value == 0.3
    assert [c.value for c in again.caption if "variant" in c.value and "**" in c.value] \
        == estimate
    from benchmarks.service.queue import JobQueue
    assert JobQueue(app_env).jobs() == []  # a link never submits anything


def test_a_swept_setting_travels_as_a_range_and_choices_as_a_list(app_env):
    at = opened({"prune.sweep": "on", "prune.ratio": "0.1:0.9:3",
                 "prune.method": "l1,channel", "amp": "off", "int8": "off",
                 "distill": "off", "combine": "off"})
    assert not at.warning
    assert at.slider(key="exp_prune_ratio_range").value == (0.1, 0.9)
    assert at.number_input(key="exp_prune_ratio_count").value == 3
    assert at.multiselect(key="exp_prune_method_multi").value == ["l1", "channel"]
    assert any(c.value.startswith("**7 variants") for c in at.caption)  # 3 x 2 and baseline


def test_where_it_runs_travels_in_the_link_under_the_commands_words(app_env):
    """Issue 32.4: runtimes, batch sizes and threads are in the URL (``runtime=`` as the
    CLI's ``--runtime``), a link fills them and a knob moved writes itself back."""
    link = {"runtime": "ort", "eval_batch_size": "1,32", "threads": "1"}
    at = opened(link)
    assert not at.warning, [w.value for w in at.warning]
    assert at.multiselect(key="exp_deploy_runtimes_multi").value == ["ort"]
    assert at.multiselect(key="exp_deploy_eval_batch_sizes_multi").value == [1, 32]
    assert at.multiselect(key="exp_deploy_threads_multi").value == [1]
    assert form_link(at) == link
    # eager beside ORT, at two batch sizes: three cells beyond each variant's first row.
    assert any("runtime cells" in c.value for c in at.caption)
    at.multiselect(key="exp_deploy_runtimes_multi").set_value(["eager", "ort"]).run()
    assert at.query_params["runtime"] == "eager,ort"
    again = opened(form_link(at))
    assert again.multiselect(key="exp_deploy_runtimes_multi").value == ["eager", "ort"]
    bad = opened({"runtime": "tensorrt", "threads": "0"})
    (warning,) = [w.value for w in bad.warning]
    assert "**runtime**" in warning and "**threads**" in warning, warning
    assert bad.multiselect(key="exp_deploy_runtimes_multi").value == ["eager"]


def test_a_sweep_opens_where_the_trade_off_happens(app_env):
    # The prune ratio's declared sweep range, not a no-op 0 up to the single default 0.5;
    # the CLI's single default stays 0.5.
    at = opened({"prune.sweep": "on"})
    assert at.slider(key="exp_prune_ratio_range").value == (0.3, 0.9)
    from optimizers.settings import PruneSettings
    assert PruneSettings().ratio == 0.5


def _legible_table(table) -> None:
    """An AppTest dataframe a person reads without "None", a snake_case header or a float
    past four decimals: its headers (the column settings' labels where given) and cells."""
    import json
    import re
    labels = json.loads(table.proto.columns or "{}")
    for column in table.value.columns:
        header = (labels.get(column) or {}).get("label", column)
        assert not re.match(r"^[a-z0-9]+(_[a-z0-9]+)+$", header), header
        for cell in table.value[column]:
            if isinstance(cell, str):
                assert "None" not in cell and not re.search(r"\d\.\d{5,}", cell), cell
            elif isinstance(cell, float) and column not in labels:
                assert cell == round(cell, 4), (column, cell)


def test_history_and_compare_tables_read_in_words(app_env):
    store_history(app_env, runs=2)
    at = opened({}, "pages/history.py")
    tables = list(at.dataframe)
    assert len(tables) >= 4  # the runs, the shared variants, each run's comparison
    for table in tables:
        _legible_table(table)
    shared = next(t.value for t in tables if "Accuracy (first)" in t.value.columns)
    assert all(c.endswith("%") for c in shared["Accuracy (first)"])  # 96.94%, never 0.9694


def test_bad_parameters_fall_back_to_defaults_with_one_warning_and_no_job(app_env):
    at = opened({"model": "nosuch", "prune.ratio": "2", "epochs": "abc", "bogus": "1",
                 "int8.mode": "fast"})
    [warning] = at.warning
    for name in ("model", "prune.ratio", "epochs", "bogus", "int8.mode"):
        assert f"**{name}**" in warning.value
    assert at.selectbox(key="exp_model").value == "seed_cnn"
    assert at.slider(key="exp_prune_ratio").value == 0.5
    assert at.number_input(key="exp_epochs").value == 8
    assert at.selectbox(key="exp_int8_mode").value == "static"
    assert form_link(at) == {}  # the refused parameters left the URL
    at.run()
    assert not at.warning  # said once
    from benchmarks.service.queue import JobQueue
    assert JobQueue(app_env).jobs() == []


def test_the_results_figures_are_built_once_for_the_same_data_and_again_when_it_changes(
        app_env, monkeypatch):
    """The Overview's figures are shared by reruns and sessions showing the same data (a
    fingerprint of what they are drawn from), never a stale copy once a variant lands."""
    import json

    from benchmarks.report.results import VariantResult
    from benchmarks.store.database import ResultsStore
    from dashboard import charts, results_view
    run_id = store_answer_run(app_env)
    built = []
    real = charts.run_figures
    monkeypatch.setattr(charts, "run_figures",
                        lambda *a, **k: built.append(sorted(k["only"])) or real(*a, **k))
    results_view._built_figures.clear()

    def latency_bars(at) -> int:
        specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
        [latency] = [f for f in specs if "Latency p50" in json.dumps(f["layout"]["title"])]
        return sum(len(trace["y"]) for trace in latency["data"] if trace["type"] == "bar")

    at = opened({"run": run_id}, "pages/results.py")
    at.run()
    opened({"run": run_id}, "pages/results.py")  # another session, the same run
    assert built == [list(charts.FOUR)]
    before = latency_bars(at)
    ResultsStore(app_env).add_variant(run_id, VariantResult.of(
        name="prune-l1-0.9", techniques=["prune"], accuracy=0.5, batch_size=32,
        latency_samples_ms=[0.1 + 0.001 * k for k in range(40)],
        size_bytes=100_000, peak_memory_bytes=10**6, memory_method="live_tensor_bytes"))
    at.run()
    assert len(built) == 2 and latency_bars(at) == before + 1


def test_the_answer_comes_first_and_a_results_link_opens_its_tab_and_variant(app_env,
                                                                            monkeypatch):
    # A link opens someone else's run: its export menu is there where the operator shares
    # exports (by default only the owner's page has one, tests/system/test_read_only.py).
    monkeypatch.setenv("COMPRESSION_BENCH_SHARED_EXPORTS", "1")
    run_id = store_answer_run(app_env)
    view = f"results-{run_id}"
    at = opened({"run": run_id}, "pages/results.py")
    labels = [m.label for m in at.metric]
    assert labels == ["Variant (exploratory)", "Speed-up (p50)", "Accuracy change", "Size",
                      "Peak memory"]
    # The fastest within 1 point of the baseline at 95%: prune-l1-0.2 (2 of 2,000 lost).
    assert at.metric[0].value == "prune-l1-0.2"
    assert at.metric[1].value.endswith("×") and "95% CI" in at.metric[1].delta
    assert at.session_state[f"{view}-export-variant"] == "prune-l1-0.2"  # the selection
    assert at.query_params["variant"] == "prune-l1-0.2"
    # A wider margin admits a faster variant.
    at.number_input(key=f"{view}-margin").set_value(5.0).run()
    assert at.metric[0].value == "prune-l1-0.5" and at.query_params["margin"] == "5"

    link = {"run": run_id, "tab": "Table", "variant": "prune-l1-0.8"}
    at = opened(link, "pages/results.py")
    assert not at.warning
    assert list(at.dataframe[0].value["variant"])[:2] == ["baseline", "prune-l1-0.2"]
    assert at.session_state[f"{view}-export-variant"] == "prune-l1-0.8"
    assert at.subheader[0].value == "Selected: prune-l1-0.8"
    assert dict(at.query_params) | link == dict(at.query_params)
    # The export menu selects too: the URL follows.
    at.selectbox(key=f"{view}-export-variant").set_value("prune-l1-0.5").run()
    assert at.query_params["variant"] == "prune-l1-0.5"
    assert at.subheader[0].value == "Selected: prune-l1-0.5"

    bad = opened({"run": run_id, "tab": "Nope", "variant": "ghost"}, "pages/results.py")
    [warning] = bad.warning
    assert "**tab**" in warning.value and "**variant**" in warning.value
    assert bad.metric  # the page drew, at its defaults


def test_a_further_view_gets_its_tab_once_its_module_exists(app_env, monkeypatch):
    """The Runtimes tab is drawn by dashboard/runtimes_view.py's draw(run, key) where a run
    has runtime cells; a stand-in module shows the dispatch needs no edit when it lands."""
    from dashboard import results_view
    run_id = store_answer_run(app_env, {"runtime": {"name": "ort", "precision": "fp32",
                                                 "variant": "prune-l1-0.2", "batch_size": 32,
                                                 "threads": 1}})
    plain = opened({"run": run_id, "tab": "Runtimes"}, "pages/results.py")
    if results_view.view_module("dashboard.runtimes_view") is None:
        assert "**tab**" in plain.warning[0].value  # no module yet: no tab
    stand_in = types.ModuleType("dashboard.runtimes_view")
    seen = []

    def draw(run, key):
        import streamlit as st
        seen.append((run["run_id"], key))
        st.markdown("stand-in runtimes view")
    stand_in.draw = draw
    monkeypatch.setitem(sys.modules, "dashboard.runtimes_view", stand_in)
    at = opened({"run": run_id, "tab": "Runtimes"}, "pages/results.py")
    assert not at.warning
    assert seen == [(run_id, f"results-{run_id}")]
    assert any(m.value == "stand-in runtimes view" for m in at.markdown)
    # A run without runtime cells has no such tab.
    other = store_answer_run(app_env)
    opened({"run": other}, "pages/results.py")
    assert len(seen) == 1
    assert results_view.has_sensitivity({"sensitivity": [{"group": ["conv1"]}]})


def test_a_recommend_runs_answer_is_its_certificates():
    from benchmarks.recommend.certificate import Certificate, Tested
    from dashboard.answer_cards import certificate_of, certified_figures
    assert certificate_of({"variants": []}) is None
    assert certificate_of({"recommendation": None}) is None
    cert = Certificate(
        margin_pts=1.5, margin="1.5pt", confidence=0.95, objective="p50", split={},
        candidates=[Tested(0, "int8-static", 2.0, -0.5, tested=True, certified=True,
                           theta_pts=-0.4, interval_pts=[-1.2, 0.4], lower_pts=-1.1)],
        winner="int8-static", speedup={"ratio": 3.1, "ci": [2.5, 3.6]})
    assert certificate_of({"recommendation": {"certificate": cert.to_dict()}}) == cert
    # The winner's figures as the held-out split measured them, not the search's.
    assert certified_figures(cert) == ("3.10×", "95% CI 2.50–3.60×", "-0.40 pts",
                                       "95% CI -1.20 to +0.40")
    # Timed in three search rounds (an interrupted run): the interval says what it covers.
    cert.speedup.update(rounds=3, coverage=0.75)
    assert certified_figures(cert)[1] == "75% CI 2.50–3.60× (3 rounds)"


def test_history_draws_the_trend_and_flags_the_run_made_slower(app_env):
    ids = store_history(app_env, runs=5, slow_run=3)
    at = opened({}, "pages/history.py")
    assert at.selectbox(key="history_trend_pair").value == ("seed_cnn", "digits")
    assert len(at.get("plotly_chart")) >= 1
    flags = next(d.value for d in at.dataframe if "change" in d.value.columns)
    slowed = flags[flags["run"] == ids[3]]
    assert len(slowed) == 2 and slowed["change"].str.contains("slower").all()
    assert set(flags["run"]) == {ids[3], ids[4]}  # the slow run, and the one back to normal
    assert set(flags["machine"]) == {"bench-a"} and set(flags["commit"]) == {"c0ffee3",
                                                                            "c0ffee4"}


def test_a_click_event_names_its_variant():
    """What st.dataframe's and st.plotly_chart's selection events say, read as a variant:
    every figure puts the variant's name first in its points' customdata."""
    from benchmarks.report.figures import pareto_chart, pareto_front_of
    from dashboard.selection import point_picked, row_picked
    names = ["baseline", "prune-l1-0.5"]
    assert row_picked({"selection": {"rows": [1], "columns": []}}, names) == "prune-l1-0.5"
    assert row_picked({"selection": {"rows": []}}, names) is None
    rows = [{"variant": n, "accuracy": 0.9 - i / 10, "p50_ms": 1.0 - i / 2, "size_mb": 1.0,
             "is_baseline": i == 0} for i, n in enumerate(names)]
    fig = pareto_chart(rows, pareto_front_of(rows))
    points = [{"curve_number": c, "point_index": i, "customdata": list(t.customdata[i])}
              for c, t in enumerate(fig.data) if t.customdata is not None
              for i in range(len(t.customdata))]
    assert {point_picked({"selection": {"points": [p]}}) for p in points} == set(names)
    assert point_picked({"selection": {"points": [{"x": 1, "y": 2}]}}) is None
