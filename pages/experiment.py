"""Experiment: pick a model, data and techniques (each knob one value or a sweep); the number
of variants and an estimate of the time update as the knobs move; Run benchmark submits the
sweep to the job queue; progress and results stream in below the button."""

from __future__ import annotations

import re

import streamlit as st

from benchmarks.spec.sweep import MAX_BATCH, MAX_EPOCHS
from dashboard import (
    catalog,
    readback,
    recommend_panel,
    runtimes_view,
    settings_form,
    shell,
    state,
    technique_form,
    widgets,
)

shell.standalone()

ZOO, FILE = "Model zoo", "Model file (server folder)"
SCRATCH = "none: train from scratch"
UPLOAD_TYPES = ["safetensors", "pt", "pth"]
MAX_UPLOAD_MB = 200
NORMALIZE_CUSTOM = "MEAN,STD"
WEIGHTS_NORMALIZE = "the weights' own"

st.title("Compression experiment")
st.caption("Pick a model and the techniques, click **Run benchmark**, and compare every "
           "variant's accuracy, latency, peak memory and size against the baseline. Any "
           "setting can be swept to draw its trade-off curve.")

models = catalog.models()
names = list(models)
choices = catalog.sweep_choices()
card = widgets.worker_card("cpu")
machine_devices = (card or {}).get("devices") or ["cpu"]

left, right = st.columns([1, 1], gap="large")

with left:
    st.subheader("Model and data")
    hub_sources = catalog.hub_sources()
    source = st.selectbox("Model from", [ZOO, *hub_sources, FILE], key="exp_source",
                          help="The zoo's small models, any classification model of "
                               "torchvision's or timm's registry, or a model file")
    model = weights = None
    if source == ZOO:
        model = st.selectbox("Zoo model", names, key="exp_model",
                             index=names.index("seed_cnn") if "seed_cnn" in names else 0,
                             format_func=lambda n: f"{n} — {models[n]['description']}")
    elif source in hub_sources:
        listed = catalog.hub_models(source)
        picked = st.selectbox(f"{source} model", list(listed), key=f"exp_{source}_model",
                              index=None, placeholder=f"type part of a name ({len(listed)} "
                                                      f"models)",
                              format_func=lambda n: f"{n} · {listed[n]['family']}")
        if picked is not None:
            model = f"{source}:{picked}"
            offered = [SCRATCH, *listed[picked]["weights"]]
            chosen = st.selectbox(
                "Weights", offered, key=f"exp_{source}_weights",
                help="Pretrained weights come from this server's caches (torch hub's "
                     "checkpoints folder, the Hugging Face cache); the run then resizes, "
                     "crops and normalises inputs as the weights were trained.")
            weights = None if chosen == SCRATCH else chosen
    else:
        folder = state.models_dir()
        files = catalog.model_files(folder)
        if not files:
            st.info(f"No model files in the server's models folder ({folder}). The operator "
                    f"adds them there (COMPRESSION_BENCH_MODELS_DIR).")
        else:
            file = st.selectbox("Model file", files, key="exp_model_file",
                                help=f"Python files in {folder}")
            factory = st.text_input("Factory function", value="build", key="exp_factory",
                                    help="factory(num_classes, in_channels) -> nn.Module")
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", factory or ""):
                st.error("The factory must be a Python function name, e.g. build.")
            else:
                model = f"{folder / file}:{factory}"
    # Behind a toggle: the uploader's browser code is the heaviest of the page, and most
    # first runs train their own baseline.
    upload = None
    use_checkpoint = st.toggle("Start from my checkpoint", key="exp_use_checkpoint")
    if use_checkpoint:
        upload = st.file_uploader(
            "Checkpoint", type=UPLOAD_TYPES, key="exp_checkpoint", max_upload_size=MAX_UPLOAD_MB,
            help="Weights only: .safetensors, or a .pt/.pth state dict (loaded with "
                 f"weights_only=True: a pickle carrying code is refused). At most "
                 f"{MAX_UPLOAD_MB} MB.")
    # A checkpoint has no safe default: it expects the inputs scaled as in its training.
    # Pretrained weights bring their own mean and std: the default is theirs.
    norm_options = ([WEIGHTS_NORMALIZE] if weights else []) + list(choices["normalize"]) + \
        [NORMALIZE_CUSTOM]
    normalize = st.selectbox(
        "Input normalisation", norm_options,
        index=0 if weights else norm_options.index("none" if use_checkpoint else "dataset"),
        key="exp_normalize_weights" if weights else
        "exp_normalize_ckpt" if use_checkpoint else "exp_normalize",
        help="dataset: the training split's per-channel mean and std; none: [0, 1] pixels; "
             "imagenet: ImageNet's mean and std; MEAN,STD: your own (per channel joined by "
             "':').")
    if normalize == NORMALIZE_CUSTOM:
        normalize = st.text_input("Mean,std", value="0.5,0.25", key="exp_normalize_custom")
    elif normalize == WEIGHTS_NORMALIZE:
        normalize = None
    if use_checkpoint:
        st.caption("A checkpoint sees its inputs scaled as in its own training: pick that "
                   "here. 'none' feeds [0, 1] pixels; a wrong choice scores near chance, and "
                   "the run then says so.")

    datasets = catalog.datasets()
    dataset_label = st.selectbox("Data set", datasets, key="exp_dataset",
                                 format_func=lambda d: d.split(":", 1)[0])
    dataset, input_shape, labels = dataset_label, None, None
    shape_text = ""
    if dataset_label.startswith("imagefolder"):
        folders = state.data_folders()
        directory = st.text_input(
            "Image folder (in the server's data folder; one sub-folder per class)",
            key="exp_imagefolder",
            help="A path relative to the operator's data folder (COMPRESSION_BENCH_DATA_DIR)" +
                 (f"; it holds: {', '.join(folders)}" if folders else "; it is empty"))
        dataset = directory.strip() or None  # checked against the data folder below
        shape_text = st.text_input("Resize to C,H,W (optional)", key="exp_shape_if")
        if st.checkbox("Class folders are ImageNet ids (n01440764 …)", key="exp_labels",
                       help="Scored by the model's own 1000-class head (pretrained weights, "
                            "no head change); unticked, the folders are the classes and a new "
                            "head is trained."):
            labels = "imagenet"
    elif dataset_label == "synthetic":
        shape_text = st.text_input("Input shape C,H,W", value="3,32,32", key="exp_shape",
                                   help="Synthetic data measures speed only: accuracy is empty.")

    device = st.selectbox("Device", choices["devices"], key="exp_device",
                          help="auto: the GPU when the worker sees one")
    st.caption("This machine's worker: " + (", ".join(machine_devices) if card else
                                            "starting…"))
    c1, c2, c3 = st.columns(3)
    epochs = c1.number_input("Training epochs", 0, MAX_EPOCHS, 8, key="exp_epochs",
                             help="Budget of the baseline (and of the students); 0: the "
                                  "baseline is the model as loaded, untrained")
    batch_size = c2.number_input("Batch size", 1, MAX_BATCH, 32, key="exp_batch")
    seeds = c3.number_input("Repeats (seeds)", 1, choices["max_repeats"], 1, key="exp_seeds",
                            help="Rebuild every trained variant with this many seeds: "
                                 "accuracy as mean ± std, distillation's gain over its "
                                 "scratch twin with its interval. Timings are not repeated.")
    # Deployment axes, from DeploymentConfig's setting metadata (runtimes, batch sizes,
    # threads): measured, never retrained.
    with st.expander("Where it will run: runtimes, batch sizes, threads"):
        from benchmarks.spec.runtimes import DeploymentConfig
        deployment_values = settings_form.config_form(DeploymentConfig, "exp_deploy")

with right:
    st.subheader("Techniques")
    enabled, technique_choices = technique_form.all_controls(catalog.student_choices())
    for picked in technique_form.model_fields(enabled, technique_choices):
        note = catalog.student_note(model, picked)
        if note:
            st.warning(note)
    combine = st.toggle("Combine (chain every enabled technique)", value=True,
                        key="exp_combine")


def _shape(text: str):
    if not text.strip():
        return None
    try:
        parts = tuple(int(p) for p in text.replace("x", ",").split(","))
    except ValueError:
        raise ValueError(f"input shape must be three integers C,H,W, got {text!r}") from None
    return parts


def _sweep_fields(checkpoint: str | None = None) -> dict:
    if model is None:
        raise ValueError("choose a model file and its factory function")
    if dataset is None:
        raise ValueError("give the image folder's directory")
    return dict(model=model, dataset=state.image_folder(dataset) if dataset_label.startswith(
                    "imagefolder") else dataset, checkpoint=checkpoint,
                input_shape=_shape(shape_text), device=device, batch_size=int(batch_size),
                epochs=int(epochs), seeds=int(seeds), normalize=normalize, weights=weights,
                labels=labels, **_deployment().sweep_fields())


def _deployment():
    from benchmarks.spec.runtimes import DeploymentConfig, check_available, check_threads
    deployment = DeploymentConfig(**deployment_values)
    # Refused here, as the worker on this server would: not installed, more threads than cores.
    check_available(deployment.runtimes)
    check_threads(deployment.threads or ())
    return deployment


def _plan():
    """The sweep as it stands (no checkpoint yet): its spec, or the reason it is refused."""
    from benchmarks.spec.sweep import SweepSpec
    from benchmarks.zoo.models import preflight
    try:
        spec = SweepSpec.from_choices(technique_choices, enabled, combine=combine,
                                      **_sweep_fields())
        preflight(spec.model, spec.weights)  # an unknown name, weights absent from the caches
        return spec, None
    except ValueError as exc:
        return None, str(exc)


planned, problem = _plan()
if problem:
    st.error(problem)
else:
    st.caption(f"**{state.describe_estimate(planned)}**")
    # What the job will run with, read back from the spec it submits (not the widgets).
    st.caption(readback.settings_line("sweep", planned.to_dict()))


def submit() -> None:
    from benchmarks.spec.sweep import SweepSpec
    try:
        checkpoint = state.save_upload(upload, UPLOAD_TYPES) if upload is not None else None
        spec = SweepSpec.from_choices(technique_choices, enabled, combine=combine,
                                      **_sweep_fields(checkpoint))
    except ValueError as exc:
        st.error(str(exc))
        return
    try:  # the checkpoint moves into the job's own folder: it lives as long as the job
        st.session_state[state.JOB_ID] = state.submit(
            "sweep", spec.to_dict(), device,
            attachments={"checkpoint": checkpoint} if checkpoint else None)
    except ValueError as exc:
        st.error(str(exc))
    except Exception as exc:
        st.error(f"The job could not be submitted: {state.one_line(exc)}")


if st.button("Run benchmark", type="primary", key="exp_run"):
    submit()


job_id = state.current_job_id(state.JOB_ID, "sweep")
if job_id:
    job = widgets.track_job(job_id)
    if job is not None and job.run_id:
        run = state.store().run(job.run_id)
        if run:
            widgets.run_report(run, key=f"exp-{job.run_id}")
            runtimes_view.draw(run, key=f"exp-{job.run_id}")


st.divider()
recommend_panel.draw(_sweep_fields, technique_choices, enabled, device)
