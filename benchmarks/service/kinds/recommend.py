"""The ``recommend`` job kind: a recommendation (``benchmarks.recommend``) searched,
certified and stored as a run; cancelled, it certifies what it found (the same stop check
as every kind)."""

from __future__ import annotations

from benchmarks.service.kinds import JobKind, register
from benchmarks.spec.folders import data_dir
from benchmarks.zoo.models import models_dir


def run(worker, job) -> None:
    from benchmarks.recommend.job import from_payload
    from benchmarks.recommend.pipeline import Recommender
    from benchmarks.service.queue import ray_address
    request, spec, space = from_payload(job.payload)
    worker.progress(job.job_id, variant="", index=-1, total=0, phase="preparing",
                    fraction=0.0, message="loading data and model")
    trials = []

    def on_trial(record):
        trials.append(record)
        worker.progress(job.job_id, variant=record.name, index=len(trials) - 1,
                        total=request.max_trials or 0, phase=record.state, fraction=1.0,
                        message=f"trial {len(trials)}: {record.name} ({record.state})")

    def on_progress(event):
        worker.progress(job.job_id, variant=event.variant, index=max(0, len(trials) - 1),
                        total=request.max_trials or 0, phase=event.phase,
                        fraction=event.fraction, message=f"trial {len(trials) + 1}: "
                                                         f"{event.describe()}")
    recommender = Recommender(
        request, worker.on_this_device(spec), space, store=worker.store,
        allowed_models_dir=models_dir(), allowed_data_dir=data_dir(),
        should_stop=worker.stopper(job),
        memory_share=worker.queue.limits.memory_share, executor=worker.executor(),
        ray_address=ray_address(), on_progress=on_progress, on_trial=on_trial)
    recommender.prepare_baseline()
    recorder = worker.store.record(**{**recommender.run_fields(owner=job.owner),
                                      **worker.signed(job)})
    worker.record_run(job, recorder, recommender.run)


# Its payload is read by ``benchmarks.recommend.job.from_payload`` (a request, a sweep spec
# and a search space together), so no single config class stands for it here.
KIND = register(JobKind(
    name="recommend", run=run,
    description="the fastest variant provably within a margin of the baseline, certified"))
