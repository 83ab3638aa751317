"""Distributed: data-parallel training throughput against workers, through the job queue."""

from __future__ import annotations

import streamlit as st

from dashboard import catalog, charts, shell, state, widgets

shell.standalone()

st.title("Distributed data-parallel training")
st.caption("DDP with gradient compression as a communication hook (PyTorch's equivalent of "
           "the article's Horovod). Each worker count and compression is one run; the "
           "throughput is set beside the ideal N × one worker.")

models = list(catalog.models())
datasets = [d for d in catalog.datasets() if not d.startswith("imagefolder")]

with st.form("dist_form"):
    c1, c2 = st.columns(2)
    model = c1.selectbox("Model", models, key="dist_model",
                         index=models.index("seed_cnn") if "seed_cnn" in models else 0)
    dataset = c2.selectbox("Data set", datasets, key="dist_dataset")
    c1, c2, c3 = st.columns(3)
    workers = c1.multiselect("Workers", [1, 2, 3, 4, 6, 8], default=[1, 2], key="dist_workers")
    compressions = c2.multiselect("Gradient compression", list(catalog.COMPRESSIONS),
                                  default=["none", "fp16"], key="dist_compressions")
    device = c3.radio("Device", ["auto", "cpu", "cuda"], horizontal=True, key="dist_device")
    c1, c2, c3 = st.columns(3)
    steps = c1.number_input("Steps", 1, 100_000, 50, key="dist_steps")
    batch_size = c2.number_input("Batch size per worker", 1, 65536, 32, key="dist_batch")
    amp = c3.toggle("AMP", value=False, key="dist_amp")
    submitted = st.form_submit_button("Run distributed benchmark", type="primary")

if submitted:
    from benchmarks.spec.distributed import DistributedConfig
    try:  # the same self-validating config the launcher runs, checked before submitting
        config = DistributedConfig(model=model, dataset=dataset, workers=tuple(sorted(workers)),
                                   compressions=tuple(compressions), amp=bool(amp),
                                   steps=int(steps), batch_size=int(batch_size), device=device)
    except ValueError as exc:
        st.error(str(exc))
    else:
        try:
            st.session_state[state.DIST_JOB_ID] = state.submit(
                "distributed", config.to_dict(), device)
        except Exception as exc:
            st.error(f"The job could not be submitted: {state.one_line(exc)}")


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
        st.caption(f"Your latest distributed run: {widgets.run_label(run)}")

if run and run["variants"]:
    results = run["variants"]
    for col, fig, name in zip(st.columns(3), (charts.throughput_chart(results),
                                              charts.efficiency_chart(results),
                                              charts.bytes_chart(results)),
                              ("tput", "eff", "bytes")):
        with col:
            st.plotly_chart(fig, config=charts.PLOTLY_CONFIG, key=f"dist-{name}")
    failed = [r for r in results if r.get("error")]
    if failed:
        st.warning("Failed runs:\n\n" + "\n".join(f"- **{r.get('name')}**: {r['error']}"
                                                  for r in failed))
    keys = ["name", "workers", "compression", "amp", "throughput", "scaling_efficiency",
            "bytes_per_step", "comm_ms_per_step", "step_ms", "loss", "accuracy",
            "oversubscribed", "error"]
    st.dataframe([{k: r.get(k) for k in keys} for r in results], hide_index=True,
                 key="dist-table")
    if any(r.get("oversubscribed") for r in results):
        st.info("Some runs had more workers than cores: their timings share cores.")
elif job_id is None:
    st.info("No distributed run yet: pick worker counts and run.")
