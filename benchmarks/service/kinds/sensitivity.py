"""The ``sensitivity`` job kind: a sensitivity map of a sweep's baseline
(``benchmarks.sensitivity``), its rows stored as they are measured, cancellable between cells
like a sweep between phases. Payload: ``{"sweep": ..., "sensitivity": ..., "source_run":
...}``."""

from __future__ import annotations

from benchmarks.service.kinds import JobKind, register
from benchmarks.spec.folders import data_dir
from benchmarks.zoo.models import models_dir


def run(worker, job) -> None:
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.sensitivity.config import SensitivityConfig, baseline_spec
    from benchmarks.sensitivity.mapper import record_map
    config = SensitivityConfig.from_dict(job.payload["sensitivity"])
    spec = worker.on_this_device(baseline_spec(job.payload["sweep"]))
    worker.progress(job.job_id, variant="", index=-1, total=1, phase="preparing",
                    fraction=0.0, message="loading data and model")
    stop = worker.stopper(job)
    sweep = prepare_sweep(spec, allowed_models_dir=models_dir(), allowed_data_dir=data_dir(),
                          should_stop=stop, memory_share=worker.queue.limits.memory_share)

    def on_progress(phase, done, total, message):
        worker.progress(job.job_id, variant=phase, index=done if total else -1,
                        total=max(total, 1), phase=phase, fraction=0.0, message=message)

    def measure(recorder):
        record_map(sweep, config, recorder, on_progress=on_progress, should_stop=stop)

    sweep.environment["queue_device"] = worker.device
    recorder = worker.store.record(
        model=spec.model, dataset=spec.dataset, device=str(sweep.device),
        spec={"sweep": spec.to_dict(), "sensitivity": config.to_dict(),
              "source_run": job.payload.get("source_run")},
        environment=sweep.environment, kind="sensitivity", **worker.signed(job))
    worker.record_run(job, recorder, measure)


KIND = register(JobKind(
    name="sensitivity", run=run,
    description="a per-group sensitivity map of a sweep's baseline (where to compress)"))
