"""The ``sweep`` job kind: the variants of one sweep built and measured (``benchmarks.run``),
stored as one run as they land; cancelled between phases."""

from __future__ import annotations

from benchmarks.service.kinds import JobKind, register
from benchmarks.spec.folders import data_dir
from benchmarks.spec.sweep import SweepSpec
from benchmarks.zoo.models import models_dir


def run(worker, job) -> None:
    from benchmarks.run.runner import prepare_sweep
    from benchmarks.service.queue import ray_address
    spec = SweepSpec.from_dict(job.payload)
    worker.progress(job.job_id, variant="", index=-1, total=len(spec.variants),
                    phase="preparing", fraction=0.0, message="loading data and model")
    stop = worker.stopper(job)
    # Jobs come from the dashboard: model files and image folders only from the
    # operator's folders; the data set is checked against memory before it is loaded.
    sweep = prepare_sweep(worker.on_this_device(spec), allowed_models_dir=models_dir(),
                          allowed_data_dir=data_dir(), should_stop=stop,
                          memory_share=worker.queue.limits.memory_share,
                          executor=worker.executor())
    if ray_address():
        from benchmarks.executors.ray_executor import RaySweep
        sweep = RaySweep(sweep, ray_address())

    def on_progress(event):
        worker.progress(job.job_id, variant=event.variant, index=event.index,
                        total=event.total, phase=event.phase, fraction=event.fraction,
                        message=event.describe())

    def measure(recorder):
        for index, result in enumerate(sweep.run(
                on_progress, stop, on_partial=lambda i, r: recorder.add(r, i),
                on_environment=recorder.set_environment)):
            recorder.add(result, index)

    sweep.attach_peaks(worker.store)
    sweep.environment["queue_device"] = worker.device
    sweep.environment["estimate"] = _estimate(worker, spec, sweep)
    recorder = worker.store.record(model=spec.model, dataset=spec.dataset,
                                   device=str(sweep.device), spec=spec.to_dict(),
                                   environment=sweep.environment, **worker.signed(job))
    worker.record_run(job, recorder, measure)


def _estimate(worker, spec, sweep) -> dict | None:
    """The sweep's estimate (benchmarks.run.estimate), stored with the run beside what it
    took so History shows its error; None where it cannot be made (never a failure)."""
    from benchmarks.run.speed import estimate_here
    try:
        return estimate_here(spec, worker.store, sweep.baseline_cached()).to_dict()
    except Exception:  # an estimate is no reason to fail a sweep
        return None


KIND = register(JobKind(
    name="sweep", run=run, payload=SweepSpec,
    description="the variants of one sweep built, measured and stored as a run"))
