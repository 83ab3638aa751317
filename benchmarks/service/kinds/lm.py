"""The ``lm`` job kind: a language model's run (``benchmarks.run.lm_runner``) from the
Experiment page, stored as a run of kind ``lm`` as its variants are scored and again once
timed; cancelled between variants and before the timing. Payload: ``{"sweep": ..., "lm":
...}`` (``benchmarks.spec.lm.LMRequest``)."""

from __future__ import annotations

from benchmarks.service.kinds import JobKind, register
from benchmarks.spec.folders import data_dir
from benchmarks.spec.lm import LMRequest
from benchmarks.zoo.models import models_dir


def run(worker, job) -> None:
    from benchmarks.run.checks import check_job_paths
    from benchmarks.run.lm_runner import LMSweep
    request = LMRequest.from_dict(job.payload)
    spec = request.sweep
    # Jobs come from the dashboard: an hf: folder only from the operator's models folder,
    # a text: file only from the data folder, checked before either is opened.
    check_job_paths(spec.model, spec.dataset, spec.data_root, models=models_dir(),
                    data=data_dir())
    total = len(spec.variants)
    worker.progress(job.job_id, variant="", index=-1, total=total, phase="preparing",
                    fraction=0.0, message="loading the model and its text")
    stop = worker.stopper(job)
    # Refused in one line before anything is stored or loaded (its sizes against its
    # context and the memory a job may use).
    sweep = LMSweep(spec, request.options, memory_share=worker.queue.limits.memory_share)
    sweep.environment["queue_device"] = worker.device
    done = {"scored": 0}

    def on_progress(line: str) -> None:
        phase = "timing" if line.startswith("timing") else "building"
        worker.progress(job.job_id, variant=line.split()[-1] if phase == "building" else "",
                        index=min(done["scored"], total - 1), total=total, phase=phase,
                        fraction=0.0, message=line)

    def measure(recorder):
        def on_record(position, variant):
            done["scored"] = max(done["scored"], position + 1)
            recorder.add(variant.to_dict(), position)
        sweep.run(on_progress, on_record=on_record, should_stop=stop)

    recorder = worker.store.record(
        model=spec.model, dataset=spec.dataset, device="cpu",
        spec={**spec.to_dict(), "lm": request.options.to_dict()},
        environment=sweep.environment, kind="lm", **worker.signed(job))
    worker.record_run(job, recorder, measure)


KIND = register(JobKind(
    name="lm", run=run, payload=LMRequest,
    description="a language model's variants scored paired on the same text and timed "
                "together, stored as a run"))
