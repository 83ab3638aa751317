"""History as a trend: did this model get slower or less accurate since last week? For one
model and data set, the accuracy and p50 of the baseline and of every variant across runs
over time, the commit and machine of each run, and the changes bigger than their noise
(``benchmarks.report.trend``: the paired test for accuracy, the timing intervals for latency
between runs on the same machine)."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, tables
from dashboard.markup import md, no_paths
from dashboard import state
from dashboard.state import one_line, store

TREND_RUNS = 50  # the latest runs of a model and data set a trend reads
# The kinds of run the Results page draws by their link (a distributed run has its own page).
RESULTS_KINDS = ("sweep", "lm", "sensitivity")


def results_link(run: dict) -> str | None:
    """A History row's "results" link: every kind the Results page opens."""
    return state.run_link(run["run_id"]) if run.get("kind", "sweep") in RESULTS_KINDS \
        else None


def unreadable_warning(runs: dict | list[dict] | None, shown: set | None = None) -> None:
    """One warning line per stored row the store left out as unreadable (its reader names
    the run and the row): the rest of the page stands. ``shown``: the lines this page run
    has warned of already (two views reading one run say it once)."""
    shown = set() if shown is None else shown
    for run in [runs] if isinstance(runs, dict) else runs or []:
        for line in run.get("unreadable") or []:
            if line not in shown:
                shown.add(line)
                st.warning(md(one_line(line, 400)))  # a variant's name is the row's: literal


def pairs(runs: list[dict]) -> list[tuple[str, str]]:
    """(model, data set) of the sweeps listed, the most recently run first."""
    return list(dict.fromkeys((r["model"], r["dataset"]) for r in runs
                              if r.get("kind", "sweep") == "sweep" and r.get("model")))


def trend_section(runs: list[dict], shown: set | None = None) -> None:
    from benchmarks.report.trend import trend, trend_figure
    options = pairs(runs)
    if not options:
        st.caption("No sweeps yet: a trend needs runs of one model and data set.")
        return
    model, dataset = st.selectbox("Model and data set", options, key="history_trend_pair",
                                  format_func=lambda p: f"{no_paths(p[0])} on "
                                                        f"{no_paths(p[1])}")
    try:
        full = store().runs(limit=TREND_RUNS, kind="sweep", model=model, dataset=dataset)
    except Exception as exc:
        st.error(f"Cannot read the results store: {md(one_line(exc))}")
        return
    unreadable_warning(full, shown)
    points = trend(full)
    if len({p.run_id for p in points}) < 2:
        st.caption(f"One run of {md(no_paths(model))} on {md(no_paths(dataset))} so far: a "
                   f"trend needs two.")
        return
    charts.show(trend_figure(points), key="history-trend")
    flagged = [p for p in points if p.flags]
    if flagged:
        import pandas as pd
        st.warning(f"{len(flagged)} change(s) bigger than their noise since the variant's "
                   f"previous run:")
        st.dataframe(pd.DataFrame([{
            "date": p.created_at[:19].replace("T", " "), "run": p.run_id,
            "variant": p.variant, "change": "; ".join(p.flags), "commit": p.commit,
            "machine": p.machine} for p in flagged]), hide_index=True, key="history-flags",
            placeholder=tables.NOT_APPLICABLE)
    else:
        st.success("No change bigger than its noise between consecutive runs.")
    st.caption("Accuracy: the paired test on the same test examples (p < 0.05). Latency: "
               "the runs' 95% intervals of the p50 do not overlap, compared only between "
               "runs on the same machine.")
