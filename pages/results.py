"""Results: every figure of one stored sweep, charts side by side, table, downloads (CSV,
JSON, the HTML report), and a chosen variant's model as files."""

from __future__ import annotations

import streamlit as st

from dashboard import state, widgets

st.title("Results")

runs = widgets.stored_runs("No stored runs yet: start one on the Experiment page.", limit=200,
                           kind="sweep")


def _session_run_id() -> str | None:
    """The run of this session's latest sweep job, if it has one."""
    try:
        job_id = st.session_state.get(state.JOB_ID)
        job = state.queue().get(job_id) if job_id else None
        if job is None:
            jobs = state.queue().jobs(session=state.session_key(), limit=20)
            job = next((j for j in jobs if j.kind == "sweep" and j.run_id), None)
        return job.run_id if job else None
    except Exception:
        return None


ids = [r["run_id"] for r in runs]
by_id = {r["run_id"]: r for r in runs}
mine = _session_run_id()
run_id = st.selectbox("Run", ids, index=ids.index(mine) if mine in ids else 0,
                      format_func=lambda i: widgets.run_label(by_id[i]), key="results_run")
run = state.store().run(run_id)
if run is None:
    st.warning("This run was deleted meanwhile.")
    st.stop()
if run.get("status") == "running":
    st.info("This run is still going: variants appear as they finish (reload to update).")
elif run.get("error"):
    st.warning(f"Run {run['status']}: {run['error']}")
widgets.run_report(run, key=f"results-{run_id}")
widgets.export_panel(run, key=f"results-{run_id}")
