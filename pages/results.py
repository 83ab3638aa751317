"""Results: the answer first (metric cards), then one stored sweep's figures in tabs
(Overview, Curves, Pareto, Table, Environment, and further views where the run has them), the
downloads (CSV, JSON, the HTML report), and the selected variant's details and model as files.

By default this session's (or signed-in user's) own runs, the one shown named in the address;
``?run=RUN_ID`` opens any run, read-only for anyone but its owner: the address is the link to
share; it also carries the open tab, the selected variant and the margin
(``&tab=Table&variant=prune-l1-0.5``). Other people's runs are one click away under History."""

from __future__ import annotations

import streamlit as st

from dashboard import (history_view, links, lm_view, results_view, sensitivity_view, shell,
                       state, widgets)
from dashboard.markup import md, shown_error

shell.standalone()

st.title("Results")
url = links.UrlForm("results", ("tab", "variant", "margin"), reserved=(state.RUN_PARAM,))

linked = st.query_params.get(state.RUN_PARAM)
# Every read through History's guard: a store that cannot be read (a full disk) is one line.
linked_run = widgets.from_store(lambda: state.store().run(linked)) if linked else None
# A link to one of this person's own runs (their own address, copied to a new tab) opens it
# among their runs; anyone else's is the read-only view.
own_link = linked_run is not None and linked_run.get("owner") == state.owner() and \
    linked_run.get("kind", "sweep") == "sweep"
shared = linked if linked and not own_link else None
if shared:
    run_id = shared
else:
    runs = widgets.stored_runs("You have no runs yet: start one on the Experiment page. "
                               "Everyone's runs are listed under History, where one click "
                               "opens any of them here.", limit=200, kind="sweep",
                               owner=state.owner())
    ids = [r["run_id"] for r in runs]
    by_id = {r["run_id"]: r for r in runs}
    mine = linked if linked in ids else state.current_run_id(state.JOB_ID, "sweep")
    run_id = st.selectbox("Your runs", ids, index=ids.index(mine) if mine in ids else 0,
                          format_func=lambda i: widgets.run_label(by_id[i]), key="results_run")
    # The address is the view: copied to a colleague it opens this run (read-only for them),
    # never "no runs yet".
    st.query_params[state.RUN_PARAM] = run_id
run = linked_run if linked_run is not None and run_id == linked else \
    widgets.from_store(lambda: state.store().run(run_id))
if run is None:
    st.warning("No such run: it was deleted, or the link is wrong." if shared
               else "This run was deleted meanwhile.")
    st.stop()
history_view.unreadable_warning(run)  # a stored row left out: one line each, the rest shown
if shared:
    st.caption(f"A shared run (read-only): {md(widgets.run_label(run))}")
if run.get("kind") == "sensitivity":  # a map opened by its link: the map alone
    st.caption(f"Link to this map, read-only: `{state.run_link(run_id)}`")
    sensitivity_view.draw(run, key=f"results-{run_id}")
    st.stop()
if run.get("kind") == "lm":  # a language model's run: its cells in LM terms
    lm_view.draw(run, key=f"results-{run_id}")
    st.stop()
link = st.empty()  # filled once the view has said which tab and variant are shown
if run.get("status") == "running":  # polled while it goes: no reload needed
    results_view.follow(run, key=f"results-{run_id}")
elif run.get("error"):
    st.warning(f"Run {md(run['status'])}: {shown_error(run['error'], state.owns(run))}")
results_view.run_report(run, key=f"results-{run_id}", url=url, export=True)
url.finish()
link.caption("Link to this view (this run, read-only, with its tab and selected variant) for "
             "anyone who can open this dashboard: "
             f"`{state.run_link(run_id, **state.view_params(url))}`")
