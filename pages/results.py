"""Results: every figure of one stored sweep, charts side by side, table, downloads (CSV,
JSON, the HTML report), and a chosen variant's model as files.

By default this session's (or signed-in user's) own runs; ``?run=RUN_ID`` opens any run,
read-only: that is the link to share, never the session's URL. Other people's runs are one
click away under History."""

from __future__ import annotations

import streamlit as st

from dashboard import recommend_panel, runtimes_view, sensitivity_view, shell, state, widgets

shell.standalone()

st.title("Results")

shared = st.query_params.get(state.RUN_PARAM)
if shared:
    run_id = shared
else:
    runs = widgets.stored_runs("You have no runs yet: start one on the Experiment page. "
                               "Everyone's runs are listed under History, where one click "
                               "opens any of them here.", limit=200, kind="sweep",
                               owner=state.owner())
    ids = [r["run_id"] for r in runs]
    by_id = {r["run_id"]: r for r in runs}
    mine = state.current_run_id(state.JOB_ID, "sweep")
    run_id = st.selectbox("Your runs", ids, index=ids.index(mine) if mine in ids else 0,
                          format_func=lambda i: widgets.run_label(by_id[i]), key="results_run")
run = state.store().run(run_id)
if run is None:
    st.warning("No such run: it was deleted, or the link is wrong." if shared
               else "This run was deleted meanwhile.")
    st.stop()
if shared:
    st.caption(f"A shared run (read-only): {widgets.run_label(run)}")
st.caption(f"Link to this run, read-only, for anyone who can open this dashboard: "
           f"`{state.run_link(run_id)}`")
if run.get("kind") == "sensitivity":  # a map opened by its link: the map alone
    sensitivity_view.draw(run, key=f"results-{run_id}")
    st.stop()
if run.get("status") == "running":
    st.info("This run is still going: variants appear as they finish (reload to update).")
elif run.get("error"):
    st.warning(f"Run {run['status']}: {run['error']}")
if run.get("recommendation"):  # a recommend run leads with its certified answer
    recommend_panel.show(run, key=f"results-rec-{run_id}")
widgets.run_report(run, key=f"results-{run_id}")
runtimes_view.draw(run, key=f"results-{run_id}")  # the runtime grid, where it was swept
widgets.export_panel(run, key=f"results-{run_id}")
sensitivity_view.draw(run, key=f"results-{run_id}")
