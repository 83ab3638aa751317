"""Experiment: pick a model, data and techniques; Run benchmark submits the sweep to the job
queue; progress and results stream in below the button."""

from __future__ import annotations

import re
from pathlib import Path

import streamlit as st

from dashboard import catalog, state, widgets

AUTO_STUDENT = "(registry default)"
ZOO, FILE = "Model zoo", "Model file (server folder)"
AMP_DEFAULT = "default (fp16 on CUDA, bf16 on CPU)"
UPLOAD_TYPES = ["safetensors", "pt", "pth"]
MAX_UPLOAD_MB = 200

st.title("Compression experiment")
st.caption("Pick a model and the techniques, click **Run benchmark**, and compare every "
           "variant's accuracy, latency, peak memory and size against the baseline.")

models = catalog.models()
names = list(models)
choices = catalog.technique_choices()
card = widgets.worker_card("cpu")
machine_devices = (card or {}).get("devices") or ["cpu"]
has_cuda = any(str(d).startswith("cuda") for d in machine_devices)

left, right = st.columns([1, 1], gap="large")

with left:
    st.subheader("Model and data")
    source = st.selectbox("Model from", [ZOO, FILE], key="exp_source")
    model = None
    if source == ZOO:
        model = st.selectbox("Zoo model", names, key="exp_model",
                             index=names.index("seed_cnn") if "seed_cnn" in names else 0,
                             format_func=lambda n: f"{n} — {models[n]['description']}")
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
    if st.toggle("Start from my checkpoint", key="exp_use_checkpoint"):
        upload = st.file_uploader(
            "Checkpoint", type=UPLOAD_TYPES, key="exp_checkpoint", max_upload_size=MAX_UPLOAD_MB,
            help="Weights only: .safetensors, or a .pt/.pth state dict (loaded with "
                 f"weights_only=True: a pickle carrying code is refused). At most "
                 f"{MAX_UPLOAD_MB} MB.")

    datasets = catalog.datasets()
    dataset_label = st.selectbox("Data set", datasets, key="exp_dataset",
                                 format_func=lambda d: d.split(":", 1)[0])
    dataset, input_shape = dataset_label, None
    shape_text = ""
    if dataset_label.startswith("imagefolder"):
        directory = st.text_input("Image folder (one sub-folder per class, on the server)",
                                  key="exp_imagefolder")
        dataset = f"imagefolder:{directory.strip()}" if directory.strip() else None
        shape_text = st.text_input("Resize to C,H,W (optional)", key="exp_shape_if")
    elif dataset_label == "synthetic":
        shape_text = st.text_input("Input shape C,H,W", value="3,32,32", key="exp_shape",
                                   help="Synthetic data measures speed only: accuracy is empty.")

    device = st.selectbox("Device", choices["devices"], key="exp_device",
                          help="auto: the GPU when the worker sees one")
    st.caption("This machine's worker: " + (", ".join(machine_devices) if card else
                                            "starting…"))
    c1, c2, c3 = st.columns(3)
    epochs = c1.number_input("Training epochs", 1, 1000, 8, key="exp_epochs",
                             help="Budget of the baseline (and of the students)")
    finetune = c2.number_input("Fine-tune epochs", 0, 1000, 2, key="exp_finetune",
                               help="Fine-tuning after pruning")
    batch_size = c3.number_input("Batch size", 1, 65536, 32, key="exp_batch")

with right:
    st.subheader("Techniques")
    prune_on = st.toggle("Pruning", value=True, key="exp_prune")
    if prune_on:
        a, b = st.columns([2, 1])
        ratio = a.slider("Prune ratio", float(choices["prune_range"][0]),
                         float(choices["prune_range"][1]), 0.5, 0.05, key="exp_ratio")
        method = b.selectbox("Method", choices["prune_methods"], key="exp_prune_method")
    distill_on = st.toggle("Distillation", value=True, key="exp_distill")
    if distill_on:
        a, b = st.columns(2)
        temperature = a.slider("Temperature", 1.0, 20.0, 4.0, 0.5, key="exp_temperature")
        alpha = b.slider("Alpha (weight of the teacher)", 0.0, 1.0, 0.7, 0.05, key="exp_alpha")
        default = models.get(model or "", {}).get("student")
        options = [AUTO_STUDENT] + names
        student = st.selectbox("Student", options, key="exp_student",
                               index=options.index(default) if default in options else 0)
    amp_on = st.toggle("AMP (mixed precision)", value=True, key="exp_amp")
    if amp_on:
        amp_dtype = st.selectbox("AMP dtype", [AMP_DEFAULT, *choices["amp_dtypes"]],
                                 key="exp_amp_dtype")
    int8_on = st.toggle("INT8 quantization", value=True, key="exp_int8")
    if int8_on:
        modes = list(choices["int8_modes"])
        int8_mode = st.selectbox("INT8 mode", modes, key="exp_int8_mode",
                                 index=modes.index("static") if "static" in modes else 0,
                                 help="PyTorch's x86 INT8 kernels run on the CPU.")
    combine = st.toggle("Combine (one variant chaining every enabled technique)", value=True,
                        key="exp_combine")


def _shape(text: str):
    if not text.strip():
        return None
    try:
        parts = tuple(int(p) for p in text.replace("x", ",").split(","))
    except ValueError:
        raise ValueError(f"input shape must be three integers C,H,W, got {text!r}") from None
    return parts


def _save_upload(file) -> str:
    """Write the upload into this session's private folder; its path goes to the worker."""
    suffix = Path(file.name).suffix.lower()
    if suffix.lstrip(".") not in UPLOAD_TYPES:
        raise ValueError(f"checkpoint {file.name}: accepted formats are .safetensors, .pt, .pth")
    data = file.getvalue()
    if not data:
        raise ValueError(f"checkpoint {file.name} is empty")
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(file.name).stem)[:64] or "checkpoint"
    path = state.upload_dir() / f"{stem}-{file.file_id[:8]}{suffix}"
    if not path.exists():
        path.write_bytes(data)
    return str(path)


def submit() -> None:
    from benchmarks.specs import SweepSpec
    try:
        if model is None:
            raise ValueError("choose a model file and its factory function")
        if dataset is None:
            raise ValueError("give the image folder's directory")
        spec = SweepSpec.from_toggles(
            prune=ratio if prune_on else None,
            prune_method=method if prune_on else "l1",
            finetune_epochs=int(finetune),
            distill=distill_on,
            temperature=temperature if distill_on else 4.0,
            alpha=alpha if distill_on else 0.7,
            student=(None if not distill_on or student == AUTO_STUDENT else student),
            amp=(False if not amp_on else True if amp_dtype == AMP_DEFAULT else amp_dtype),
            int8=int8_mode if int8_on else None,
            combine=combine,
            model=model, dataset=dataset,
            checkpoint=_save_upload(upload) if upload is not None else None,
            input_shape=_shape(shape_text), device=device,
            batch_size=int(batch_size), epochs=int(epochs))
    except ValueError as exc:
        st.error(str(exc))
        return
    queue_device = "cuda" if device == "cuda" or (device == "auto" and has_cuda) else "cpu"
    try:
        q = state.queue()
        q.ensure_worker(queue_device)
        job_id = q.submit("sweep", spec.to_dict(), session=state.session_key(),
                          device=queue_device)
    except ValueError as exc:
        st.error(str(exc))
        return
    except Exception as exc:
        st.error(f"The job could not be submitted: {state.one_line(exc)}")
        return
    st.session_state[state.JOB_ID] = job_id


if st.button("Run benchmark", type="primary", key="exp_run"):
    submit()


def _current_job_id() -> str | None:
    job_id = st.session_state.get(state.JOB_ID)
    if job_id:
        return job_id
    try:  # a refreshed page: find this session's latest sweep through the key in the URL
        jobs = state.queue().jobs(session=state.session_key(), limit=20)
    except Exception:
        return None
    job = next((j for j in jobs if j.kind == "sweep"), None)
    if job is not None:
        st.session_state[state.JOB_ID] = job.job_id
        return job.job_id
    return None


job_id = _current_job_id()
if job_id:
    job = widgets.track_job(job_id)
    if job is not None and job.run_id:
        run = state.store().run(job.run_id)
        if run:
            widgets.run_report(run, key=f"exp-{job.run_id}")
