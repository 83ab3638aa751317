"""The ``distributed`` job kind: a data-parallel training benchmark
(``benchmarks.distributed``), each world size's result stored as it lands; Cancel stops
every rank."""

from __future__ import annotations

from benchmarks.service.kinds import JobKind, register
from benchmarks.spec.distributed import DistributedConfig
from benchmarks.spec.folders import data_dir
from benchmarks.zoo.models import models_dir


def run(worker, job) -> None:
    from dataclasses import replace

    from benchmarks.distributed.launcher import distributed_environment, run_distributed
    from benchmarks.run.checks import check_job_paths
    from benchmarks.service.queue import ray_address
    config = DistributedConfig.from_dict(job.payload)
    # Jobs come from the dashboard: a model file only from the operator's models folder,
    # data (an image folder, a data root) only from the data folder, as a sweep's; checked
    # before any rank starts.
    check_job_paths(config.model, config.dataset, config.data_root, models=models_dir(),
                    data=data_dir())
    if ray_address():  # the dashboard's worker drives the operator's cluster
        config = replace(config, executor="ray", ray_address=ray_address())
    environment = distributed_environment(config)
    stop = worker.stopper(job)

    def measure(recorder):
        def on_progress(done, total, result):
            recorder.add(result)
            worker.progress(job.job_id, variant=result.get("name", ""), index=done - 1,
                            total=total, phase="done", fraction=done / max(total, 1),
                            message=f"{done}/{total} runs")

        def on_step(index, total, name, steps, of):
            worker.progress(job.job_id, variant=name, index=index, total=total,
                            phase="training", fraction=steps / max(of, 1),
                            message=f"{index + 1}/{total} {name}: step {steps}/{of}")
        run_distributed(config, on_progress=on_progress, warn=lambda m: None,
                        should_stop=stop, on_step=on_step,
                        memory_share=worker.queue.limits.memory_share)

    recorder = worker.store.record(model=config.model, dataset=config.dataset,
                                   device=environment["device"], spec=config.to_dict(),
                                   environment=environment, kind="distributed",
                                   **worker.signed(job))
    worker.record_run(job, recorder, measure)


KIND = register(JobKind(
    name="distributed", run=run, payload=DistributedConfig,
    description="data-parallel training (DDP) timed at each world size and compression"))
