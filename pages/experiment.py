"""Experiment: pick a model, data and techniques (each knob one value or a sweep); the number
of variants and an estimate of the time update as the knobs move; Run benchmark, on the first
screen beside the estimate and the settings read back in one line, submits the sweep to the
job queue; its progress shows under the button, the results below the form. A form the
worker would refuse says why there instead, in one sentence with its fix, and cannot be
submitted."""

from __future__ import annotations

import streamlit as st

from dashboard import (
    catalog,
    estimates,
    experiment_form,
    links,
    model_files,
    readback,
    recommend_panel,
    settings_form,
    shell,
    state,
    technique_form,
    widgets,
)
from dashboard.markup import md

shell.standalone()

st.title("Compression experiment")
st.caption("Pick a model and the techniques, click **Run benchmark**, and compare every "
           "variant's accuracy, latency, peak memory and size against the baseline. Any "
           "setting can be swept to draw its trade-off curve. The page's address carries "
           "every setting: copy it to share this experiment.")
# Every widget below reads its first value from the URL and writes its value back; a link
# only fills the form (Run benchmark still needs a click).
url = links.UrlForm("experiment", experiment_form.url_names())
# What to do, on the first screen (filled once the form below is read): the estimate, the
# settings read back once, Run benchmark and the job's progress.
top = st.container()

choices = catalog.sweep_choices()
card = widgets.worker_card("cpu")
machine_devices = (card or {}).get("devices") or ["cpu"]

left, right = st.columns([1, 1], gap="large")

with left:
    st.subheader("Model and data")
    picked_model = experiment_form.model_picker(url)
    language = picked_model.language  # a causal LM: text, its own techniques, the CPU
    experiment_form.checkpoint_and_normalisation(url, picked_model, choices)
    modes, deployment_values = ("eager",), {}
    if language:
        data = experiment_form.text_picker(url)
        modes = experiment_form.lm_modes(url)
        device, epochs, batch_size, seeds = "cpu", 0, 1, 1
        st.caption("A language model is measured as loaded, on the CPU: nothing is trained.")
    else:
        data = experiment_form.data_picker(url)
        device = experiment_form.budget("device", url)
        st.caption("This machine's worker: " + (md(", ".join(machine_devices)) if card else
                                                "starting…"))
        c1, c2, c3 = st.columns(3)
        with c1:
            epochs = experiment_form.budget("epochs", url)
        with c2:
            batch_size = experiment_form.budget("batch_size", url)
        with c3:
            seeds = experiment_form.budget("seeds", url)
        # Deployment axes, from DeploymentConfig's setting metadata (runtimes, batch sizes,
        # threads): measured, never retrained.
        with st.expander("Where it will run: runtimes, batch sizes, threads"):
            from benchmarks.spec.runtimes import DeploymentConfig
            deployment_values = settings_form.config_form(DeploymentConfig, "exp_deploy",
                                                          url=url)

with right:
    st.subheader("Techniques")
    # Distillation on where the model has a student to default to; the student menu names it.
    defaults, means = ({}, {}) if language else \
        experiment_form.technique_defaults(picked_model.model)
    enabled, technique_choices = technique_form.all_controls(
        catalog.student_choices(), url, family="lm" if language else "image",
        defaults=defaults, none_means=means)
    # A language model's variants take one technique each (int8 and int4 do not chain).
    combine = False if language else experiment_form.combine_toggle(url, enabled)
url.finish()

experiment = experiment_form.Experiment(
    picked_model, data, dict(device=device, epochs=epochs, batch_size=batch_size, seeds=seeds,
                             combine=combine), enabled, technique_choices,
    deployment_values, modes=modes)
# Everything the worker would refuse before it loads data is refused here, before the click:
# one sentence at the top, Run benchmark disabled, the fix a click away. (A model file's or a
# checkpoint's check says it is running there too.)
with top:
    checkpoint, problem = experiment_form.saved_checkpoint(picked_model)
    planned = None
    if problem is None:
        planned, problem = experiment.plan(checkpoint)
job_id = state.current_job_id(state.JOB_ID, experiment.kind)


def submit() -> None:
    if problem:  # the button is disabled; a click that arrives anyway queues nothing
        return
    try:  # the checkpoint moves into the job's own folder: it lives as long as the job
        st.session_state[state.JOB_ID] = state.submit(
            experiment.kind, planned.to_dict(), device,
            attachments={"checkpoint": checkpoint} if checkpoint else None)
    except ValueError as exc:
        st.error(md(model_files.said(exc)))
    except Exception as exc:
        st.error(f"The job could not be submitted: {md(model_files.said(state.one_line(exc)))}")


def _job(job_id: str | None):
    try:
        return state.queue().get(job_id) if job_id else None
    except Exception:
        return None


with top:
    plan, go = st.columns([5, 1], vertical_alignment="center")
    with go:
        clicked = st.button("Run benchmark", type="primary", key="exp_run", width="stretch",
                            disabled=problem is not None)
    if clicked:
        submit()
        job_id = state.current_job_id(state.JOB_ID, experiment.kind)
    shown_job = _job(job_id)
    same = experiment_form.runs_the_plan(shown_job, planned)
    with plan:
        if problem:
            experiment_form.refusal(problem)
        elif language:
            st.caption(f"**{md(experiment_form.describe_lm(planned))}**")
        else:
            st.caption(f"**{md(estimates.describe_estimate(planned))}**")
            # While the job runs what the form plans, its progress reads the settings back.
            if not (same and shown_job.status in widgets.ACTIVE):
                # What the job will run with, read back from the spec it submits (not the
                # widgets): one line, every variant's settings on hover.
                st.caption(md(readback.compact_line("sweep", planned.to_dict())),
                           help=md(readback.settings_line("sweep", planned.to_dict())))
    # A finished job of other settings than the form's now: its results below are said to be
    # of the previous settings, not "Complete." under a form that changed.
    job = widgets.track_job(job_id, current=same) if job_id else None

if job is not None and job.run_id:
    run = state.store().run(job.run_id)
    if run:
        widgets.run_report(run, key=f"exp-{job.run_id}")


st.divider()
if language:
    st.caption("A language model's run answers with the fastest cell within noise. To certify "
               "one within a margin of next-token accuracy, on windows the search never read "
               "(its run opens on Results):")
    # A code block, not Markdown: the model may be a folder the link named.
    st.code(f"compression-bench recommend --model {picked_model.model or 'tiny-lm'} "
            f"--dataset text --within 1pt --runtime eager,compile", language="bash")
else:
    recommend_panel.draw(experiment.fields, technique_choices, enabled, device,
                         form_refused=problem is not None)
