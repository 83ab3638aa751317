"""Distributed: data-parallel training throughput against workers, through the job queue."""

from __future__ import annotations

import streamlit as st

from benchmarks.spec.distributed import DistributedConfig  # torch-free
from dashboard import catalog, charts, settings_form, shell, state, tables, widgets
from dashboard.markup import md

shell.standalone()

st.title("Distributed data-parallel training")
st.caption("DDP with gradient compression as a communication hook (PyTorch's equivalent of "
           "the article's Horovod). Each worker count and compression is one run; the "
           "throughput is set beside the ideal N × one worker.")

with st.form("dist_form"):
    # The config's own fields (DistributedConfig's setting metadata): defaults, bounds, help.
    values = settings_form.config_form(DistributedConfig, "dist", options={
        "model": list(catalog.models()), "dataset": catalog.datasets(folders=False)})
    submitted = st.form_submit_button("Run distributed benchmark", type="primary")

if submitted:
    try:  # the same self-validating config the launcher runs, checked before submitting
        config = DistributedConfig(**values)
    except ValueError as exc:
        st.error(md(exc))
    else:
        try:
            st.session_state[state.DIST_JOB_ID] = state.submit(
                "distributed", config.to_dict(), config.device)
        except Exception as exc:
            st.error(f"The job could not be submitted: {md(state.one_line(exc))}")


job_id = state.current_job_id(state.DIST_JOB_ID, "distributed")
run = None
if job_id:
    job = widgets.track_job(job_id)
    if job is not None and job.run_id:
        run = state.store().run(job.run_id)
if run is None:
    past = state.store().runs(limit=1, kind="distributed", owner=state.owner())
    if past:
        run = past[0]
        st.caption(f"Your latest distributed run: {md(widgets.run_label(run))}")

if run and run["variants"]:
    results = run["variants"]
    table = charts.scaling_table(results)
    for col, fig, name in zip(st.columns(3), (charts.throughput_chart(table),
                                              charts.efficiency_chart(table),
                                              charts.bytes_chart(table)),
                              ("tput", "eff", "bytes")):
        with col:
            charts.show(fig, key=f"dist-{name}")
    from benchmarks.views import scaling  # torch-free
    for line in scaling.noise_warnings(table):
        st.warning(md(line))
    alike = scaling.within_noise(table)
    if alike:
        st.caption("Within noise: " + md("; ".join(alike)) + ".")
    failed = [r for r in results if r.get("error")]
    if failed:
        st.warning("Failed runs:\n\n" + "\n".join(f"- **{md(r.get('name'))}**: {md(r['error'])}"
                                                  for r in failed))
    # Each figure beside its 95% interval, formatted by the one layer (dashboard.tables).
    st.dataframe(tables.distributed_rows(results), hide_index=True, key="dist-table",
                 column_config={
                     "Samples/s 95% CI": st.column_config.TextColumn(
                         "Samples/s 95% CI", help="from the spread of the run's timed steps"),
                     "Efficiency 95% CI": st.column_config.TextColumn(
                         "Efficiency 95% CI", help="against the one-worker run of the same "
                         "compression; both runs' intervals combined")})
    if any(r.get("oversubscribed") for r in results):
        st.info("Some runs had more workers than cores: their timings share cores.")
elif job_id is None:
    st.info("No distributed run yet: pick worker counts and run.")
