"""A toy job kind, "echo", for the registry's tests: what adding a job kind takes, one module
and one registration. Named in COMPRESSION_BENCH_KIND_MODULES ("tests.toy_kind"), it is
registered in every process that reads the registry: the test's queue, the worker it starts
and the CLI. It waits ``seconds`` (checking Cancel every 50 ms, as a job's code does between
safe steps), then ends complete with nothing stored."""

from __future__ import annotations

import time

from benchmarks.service.kinds import JobKind, register


def run(worker, job) -> None:
    from benchmarks.spec.cancel import check_stop
    stop = worker.stopper(job)
    seconds = float(job.payload.get("seconds", 0.0))
    worker.progress(job.job_id, variant="echo", index=0, total=1, phase="echoing",
                    fraction=0.0, message=f"echo: {job.payload.get('message', '')}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        check_stop(stop)
        time.sleep(0.05)
    worker.finish(job.job_id, "complete")


KIND = register(JobKind(name="echo", run=run, description="a toy kind: says its message"))
