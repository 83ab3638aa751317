"""The ``export`` job kind: a variant of a stored run rebuilt and written as files, zipped for
the page's download (``benchmarks.export``: the dashboard never imports torch), into the
job's own folder under its run's exports (removed with the run). The exports together are
capped (COMPRESSION_BENCH_EXPORT_MB): least recently used ones go first. Cancelled, failed or
over the cap, the job's folder is removed whole. Payload: ``{"run_id": ..., "variant":
...}``; it stores no run of its own."""

from __future__ import annotations

from benchmarks.service.interrupt import Interruptible
from benchmarks.service.kinds import JobKind, register
from benchmarks.spec.folders import data_dir, private_folder
from benchmarks.zoo.models import models_dir


def run(worker, job) -> None:
    import shutil

    from benchmarks.export.files import archive, evict_exports, export_folder, exports
    from benchmarks.export.variant import export_variant
    from benchmarks.spec.cancel import check_stop
    from benchmarks.spec.limits import MIB
    run_id, variant = job.payload["run_id"], job.payload["variant"]
    stop = worker.stopper(job)
    worker.progress(job.job_id, variant=variant, index=0, total=1, phase="exporting",
                    fraction=0.0, message=f"rebuilding {variant} and writing its files")
    folder = export_folder(worker.store.path, run_id, variant, job.job_id)
    mine = folder.parent
    guard = Interruptible(lambda: worker.stop_wanted(job.job_id))
    try:
        private_folder(mine)
        with guard:  # torch.export and the ONNX exporter run for seconds, checking nothing
            # The run's model and data only from the operator's folders, as every kind's.
            export_variant(worker.store, run_id, variant, folder,
                           allowed_models_dir=models_dir(), allowed_data_dir=data_dir(),
                           should_stop=stop)
            check_stop(stop)
        worker.progress(job.job_id, variant=variant, index=0, total=1, phase="zipping",
                        fraction=0.9, message=f"zipping {variant}'s files")
        archive(folder, should_stop=stop)
        check_stop(stop)
        cap = worker.queue.limits.export_mb * MIB
        size = next((size for _, size, f in exports(worker.store.path) if f == mine), 0)
        if size > cap:
            raise ValueError(f"the export of {variant} takes {size / MIB:,.0f} MB, more than "
                             f"the dashboard's exports may take together ({cap // MIB:,} "
                             f"MB, COMPRESSION_BENCH_EXPORT_MB)")
        evict_exports(worker.store.path, cap, keep=mine)
    except BaseException:
        worker.retire = worker.retire or guard.fired
        shutil.rmtree(mine, ignore_errors=True)
        try:
            mine.parent.rmdir()  # the run's exports folder, if this was its only one
        except OSError:
            pass
        raise
    worker.finish(job.job_id, "complete")


KIND = register(JobKind(
    name="export", run=run, shared_with_link=True,
    not_yours="only the person who ran it can export this run's models (a shared link is "
              "read-only; the operator may allow it with COMPRESSION_BENCH_SHARED_EXPORTS=on)",
    description="a stored variant rebuilt and written as files (safetensors, ONNX, ...), "
                "zipped for download"))
