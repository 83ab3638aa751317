"""The queue's worker process: one per device, running its jobs one at a time.

A separate process, not a thread of the Streamlit server: its timings share no interpreter
lock with the server, and a crash in a kernel cannot take the UI down. It holds its device's
``flock`` (``queue.lock_path``) for as long as it lives, exits when the process that started it
(the server) is gone, and claims its next job before it imports torch, so a job queued behind
a killed one starts within a second or two. It runs under the operator's hard memory limit
(RLIMIT_DATA, ``benchmarks.measure.machine``): a job that goes over it fails with "out of memory
(limit X)" instead of taking the machine.

Job kinds: sweep, distributed, export and sensitivity (a map of a sweep's baseline).

``python -m benchmarks.service.worker --store FILE --device cpu --parent PID``
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from benchmarks.executors.devices import try_lock
from benchmarks.measure.machine import apply_memory_limit, is_out_of_memory, out_of_memory_label
from benchmarks.service.interrupt import Interruptible
from benchmarks.service.queue import (
    CLUSTER_REFRESH_S,
    POLL_S,
    PROGRESS_EVERY_S,
    Job,
    JobQueue,
    lock_path,
    ray_address,
)
from benchmarks.spec.folders import data_dir, private_folder
from benchmarks.store.database import guard_worker_connections, now_iso, process_start_token
from benchmarks.zoo.models import models_dir
from optimizers.errors import first_line


class Worker:
    """Runs one device's jobs, one at a time, until its parent process is gone."""

    def __init__(self, store_path: str, device: str, parent: int | None):
        self.queue = JobQueue(store_path)
        self.store = self.queue.store
        self.device = device
        self.parent = parent
        self._last_progress = 0.0
        self._last_phase = None
        self._last_cancel_check = 0.0
        self._cancel = False
        self._over_time: float | None = None  # the limit a job overran, in seconds
        self._limit = self.queue.limits.job_time_s
        self._deadline = float("inf")
        self._registered = False
        self._cluster_at = 0.0
        # Set when a long step was interrupted (benchmarks.service.interrupt): the worker
        # leaves after that job, and a fresh one serves the next.
        self.retire = False

    def parent_alive(self) -> bool:
        return self.parent is None or os.getppid() == self.parent

    def take_over(self) -> None:
        """Holding the lock, no other worker of this device is alive: what it left running
        was interrupted (unless the supervisor ended it already, with its cause)."""
        with self.store.transaction() as db:
            db.execute("UPDATE jobs SET status='interrupted', finished_at=?, "
                       "error=COALESCE(error, 'the worker stopped (server restart or crash) "
                       "while this job ran; run it again') "
                       "WHERE device=? AND status='running'", (now_iso(), self.device))
            # The device's row is this process's from now on: a dead predecessor's card
            # (its pid, its state) is not shown while this one warms up.
            db.execute("INSERT OR REPLACE INTO workers (device, pid, started_at, card) "
                       "VALUES (?,?,?,?)", (self.device, os.getpid(), now_iso(),
                                            json.dumps({"starting": True,
                                                        "worker_pid": os.getpid()})))
        self.store.mark_dead_runs()
        # What a killed predecessor's export left (a 43 MB staging folder, a partial zip):
        # removed now that no worker runs those jobs.
        from benchmarks.export.files import remove_dead_exports
        with self.store.connect() as db:
            live = {r["job_id"] for r in db.execute(
                "SELECT job_id FROM jobs WHERE status IN ('queued', 'running')")}
        remove_dead_exports(self.store.path, live)

    def register(self) -> None:
        """Publish this worker's environment card (imports torch: after the first claim, so
        a queued job starts without waiting for it)."""
        if self._registered:
            return
        import torch  # noqa: F401  (the import itself: the card and the first job wait on it)

        from benchmarks.measure.environment import (
            default_threads,
            environment_card,
            quiet_library_noise,
            resolve_device,
        )
        quiet_library_noise()
        from benchmarks.executors.devices import gpu_devices
        devices = ["cpu"] + gpu_devices()
        from benchmarks.executors.devices import compute_device
        dev = resolve_device("cuda" if compute_device(self.device).startswith("cuda")
                             else "cpu")
        # The threads a sweep is timed with (pinned), not the process's default.
        import pwd
        card = {**environment_card(dev, default_threads()), "devices": devices,
                "worker_pid": os.getpid(), "memory_limit": self.queue.limits.worker_memory,
                "user": pwd.getpwuid(os.getuid()).pw_name, "uid": os.getuid()}
        # Warm the engine first: its imports (the loaders' splitter too) and the first
        # meta-device dry run cost seconds that a job's admission check, or a cancel while it
        # loads its data, should not wait for.
        import sklearn.model_selection  # noqa: F401

        from benchmarks.measure.peaks import sweep_peaks
        from benchmarks.run import runner  # noqa: F401
        from benchmarks.run.footprint import activation_bytes
        from benchmarks.zoo.models import build_model
        activation_bytes(lambda: build_model("mlp", 2, 1, (8, 8)), (1, 8, 8))
        # The roofline's roofs, measured once per device and machine (then read from the
        # store): here, before the worker's card is published.
        card["peaks"] = sweep_peaks(self.store, dev, default_threads())
        card["queue_device"] = self.device
        if ray_address():
            card["cluster"] = self._cluster()
        with self.store.transaction() as db:
            db.execute("INSERT OR REPLACE INTO workers (device, pid, started_at, card) "
                       "VALUES (?,?,?,?)", (self.device, os.getpid(), now_iso(),
                                            json.dumps(card, default=str)))
        self._registered = True

    def claim(self) -> Job | None:
        """The oldest queued job for this worker: its device's, or on a GPU worker one for
        any GPU (``cuda``), so jobs from different sessions run on different GPUs at once."""
        kinds = (self.device, "cuda") if self.device.startswith("cuda:") else (self.device,)
        with self.store.transaction() as db:
            row = db.execute("SELECT * FROM jobs WHERE device IN (%s) AND status='queued' "
                             "ORDER BY seq LIMIT 1" % ",".join("?" * len(kinds)),
                             kinds).fetchone()
            if row is None:
                return None
            db.execute("UPDATE jobs SET status='running', started_at=?, worker_pid=?, "
                       "worker_token=? WHERE job_id=?",
                       (now_iso(), os.getpid(), process_start_token(os.getpid()),
                        row["job_id"]))
        return self.queue.get(row["job_id"])

    def _update(self, job_id: str, **fields) -> None:
        sets = ", ".join(f"{k}=?" for k in fields)
        values = [json.dumps(v) if k == "progress" else v for k, v in fields.items()]
        with self.store.transaction() as db:
            db.execute(f"UPDATE jobs SET {sets} WHERE job_id=?", (*values, job_id))

    def progress(self, job_id: str, **progress) -> None:
        now = time.monotonic()
        phase = (progress.get("variant"), progress.get("phase"))
        if phase == self._last_phase and now - self._last_progress < PROGRESS_EVERY_S:
            return
        self._last_phase, self._last_progress = phase, now
        self._update(job_id, progress=progress)

    def should_stop(self, job_id: str) -> bool:
        """Cancelled by its owner, past its wall-time limit, or the server is gone (the store
        is read at most every POLL_S)."""
        now = time.monotonic()
        if not self._cancel and now >= self._deadline:
            self._cancel, self._over_time = True, self._limit
        if not self._cancel and now - self._last_cancel_check >= POLL_S:
            self._last_cancel_check = now
            self.stop_wanted(job_id)
        return self._cancel

    def stop_wanted(self, job_id: str) -> bool:
        """should_stop without the throttle, safe from another thread (``Interruptible``'s
        watcher asks it): reads the store, and records why the job stops."""
        if time.monotonic() >= self._deadline:
            self._over_time = self._limit
        else:
            with self.store.connect() as db:
                row = db.execute("SELECT cancel_requested FROM jobs WHERE job_id=?",
                                 (job_id,)).fetchone()
            if not (row and row["cancel_requested"]) and self.parent_alive():
                return False
        self._cancel = True
        return True

    def stopper(self, job: Job):
        """The ``should_stop`` every job kind is handed: job code calls
        ``benchmarks.spec.cancel.check_stop(stop)`` wherever stopping is safe (between
        phases, files, artefacts, chunks) and removes its partial files on Cancelled."""
        return lambda: self.should_stop(job.job_id)

    @staticmethod
    def signed(job: Job) -> dict:
        """The run a job creates: its owner, with the run id and signature the server made
        at submission (the worker cannot sign: it never reads the secret)."""
        return {"owner": job.owner, "run_id": job.new_run_id, "owner_tag": job.run_tag}

    def finish(self, job_id: str, status: str, error: str | None = None) -> None:
        self._update(job_id, status=status, error=error, finished_at=now_iso())

    def _stopped_how(self) -> tuple[str, str | None, str]:
        """(job status, job error, run error) of a job that stopped early."""
        if self._over_time is not None:
            why = (f"stopped at its time limit ({self._over_time:g} s, "
                   f"COMPRESSION_BENCH_JOB_TIME_LIMIT); the variants finished before are kept")
            return "failed", why, why
        if not self.parent_alive():  # the server went away mid-job: not the user's doing
            return "interrupted", "the server stopped while this job ran; run it again", \
                "the server stopped"
        return "cancelled", None, "cancelled by the user"

    def run_job(self, job: Job) -> None:
        """One job; on a GPU, holding the GPU's busy lock throughout, so no sweep borrows it
        to train while this one times (``executors.devices``)."""
        if not self.device.startswith("cuda:"):
            return self._run_job(job)
        from benchmarks.executors.devices import busy
        with busy(self.store.path, self.device):
            return self._run_job(job)

    def _run_job(self, job: Job) -> None:
        from benchmarks.service.memory_guard import new_shm_files, remove_shm_files, shm_files
        # The /dev/shm files this job's processes create are removed when it ends: no
        # process maps them once it has, so nothing else would ever free that memory.
        shm_before = shm_files(os.getuid())
        try:
            self._run_job_kind(job)
        finally:
            remove_shm_files(new_shm_files(shm_before, os.getuid()))

    def _run_job_kind(self, job: Job) -> None:
        from benchmarks.spec.cancel import Cancelled
        self._cancel, self._over_time = False, None
        self._last_phase = None
        self._limit = job.time_limit_s or self.queue.limits.job_time_s
        self._deadline = time.monotonic() + self._limit
        try:
            if job.kind == "sweep":
                self.run_sweep_job(job)
            elif job.kind == "export":
                self.run_export_job(job)
            elif job.kind == "recommend":
                self.run_recommend_job(job)
            elif job.kind == "sensitivity":
                self.run_sensitivity_job(job)
            else:
                self.run_distributed_job(job)
        except Cancelled:  # stopped before its run was recorded (while loading data)
            status, error, _ = self._stopped_how()
            self.finish(job.job_id, status, error)
        except ValueError as exc:  # bad input found by the engine: the user's to fix
            self.finish(job.job_id, "failed", f"{out_of_memory_label()}: {first_line(exc, 300)}"
                        if is_out_of_memory(exc) else f"invalid input: {first_line(exc, 400)}")
        except Exception as exc:  # a failing job never takes the queue down
            if is_out_of_memory(exc):
                reason = f"{out_of_memory_label()}: {first_line(exc, 300)}"
            else:
                reason = f"{type(exc).__name__}: {first_line(exc, 400)}"
            self.finish(job.job_id, "failed", reason)
        finally:
            self.queue._remove_folder(job.folder)

    def _record(self, job: Job, recorder, run) -> None:
        """Run ``run(recorder)`` with the stored run sharing the job's fate: interrupted when
        the worker is stopped or the server goes away, failed with the reason when it raises
        (run_job records the job's error), cancelled when the user asked, failed when it
        reached its time limit."""
        from benchmarks.spec.cancel import Cancelled
        self._update(job.job_id, run_id=recorder.run_id)
        with recorder:
            try:
                run(recorder)
            except (SystemExit, KeyboardInterrupt):
                recorder.finish("interrupted", "the worker was stopped")
                self.finish(job.job_id, "interrupted", "the worker was stopped; run it again")
                raise
            except Cancelled:
                pass  # self._cancel says why
            except Exception as exc:
                if is_out_of_memory(exc):
                    recorder.finish("failed", f"{out_of_memory_label()}: {first_line(exc)}")
                raise
            if self._cancel:
                status, error, run_error = self._stopped_how()
                recorder.finish("failed" if status == "failed" else "interrupted", run_error)
                self.finish(job.job_id, status, error)
                return
            status = recorder.finish()
        failed = list(recorder.failed.values())
        self.finish(job.job_id, status, f"{len(failed)} failed: {', '.join(failed)}"
                    if failed else None)

    def run_sweep_job(self, job: Job) -> None:
        from benchmarks.run.runner import prepare_sweep
        from benchmarks.spec.sweep import SweepSpec
        spec = SweepSpec.from_dict(job.payload)
        self.progress(job.job_id, variant="", index=-1, total=len(spec.variants),
                      phase="preparing", fraction=0.0, message="loading data and model")
        stop = self.stopper(job)
        # Jobs come from the dashboard: model files and image folders only from the
        # operator's folders; the data set is checked against memory before it is loaded.
        sweep = prepare_sweep(self._on_this_device(spec), allowed_models_dir=models_dir(),
                              allowed_data_dir=data_dir(), should_stop=stop,
                              memory_share=self.queue.limits.memory_share,
                              executor=self._executor())
        if ray_address():
            from benchmarks.executors.ray_executor import RaySweep
            sweep = RaySweep(sweep, ray_address())

        def on_progress(event):
            self.progress(job.job_id, variant=event.variant, index=event.index,
                          total=event.total, phase=event.phase, fraction=event.fraction,
                          message=event.describe())

        def run(recorder):
            for index, result in enumerate(sweep.run(
                    on_progress, stop, on_partial=lambda i, r: recorder.add(r, i),
                    on_environment=recorder.set_environment)):
                recorder.add(result, index)

        sweep.attach_peaks(self.store)
        sweep.environment["queue_device"] = self.device
        sweep.environment["estimate"] = self._estimate(spec, sweep)
        recorder = self.store.record(model=spec.model, dataset=spec.dataset,
                                     device=str(sweep.device), spec=spec.to_dict(),
                                     environment=sweep.environment, **self.signed(job))
        self._record(job, recorder, run)

    def _estimate(self, spec, sweep) -> dict | None:
        """The sweep's estimate (benchmarks.run.estimate), stored with the run beside what it
        took so History shows its error; None where it cannot be made (never a failure)."""
        from benchmarks.run.estimate import estimate_sweep
        try:
            return estimate_sweep(spec, self.store, sweep.baseline_cached()).to_dict()
        except Exception:  # an estimate is no reason to fail a sweep
            return None

    def run_recommend_job(self, job: Job) -> None:
        """A recommendation (``benchmarks.recommend``): searched, certified, stored as a run;
        cancelled, it certifies what it found (the same stop check as every kind)."""
        from benchmarks.recommend.job import from_payload
        from benchmarks.recommend.pipeline import Recommender
        request, spec, space = from_payload(job.payload)
        self.progress(job.job_id, variant="", index=-1, total=0, phase="preparing",
                      fraction=0.0, message="loading data and model")
        trials = []

        def on_trial(record):
            trials.append(record)
            self.progress(job.job_id, variant=record.name, index=len(trials) - 1,
                          total=request.max_trials or 0, phase=record.state, fraction=1.0,
                          message=f"trial {len(trials)}: {record.name} ({record.state})")

        def on_progress(event):
            self.progress(job.job_id, variant=event.variant, index=max(0, len(trials) - 1),
                          total=request.max_trials or 0, phase=event.phase,
                          fraction=event.fraction, message=f"trial {len(trials) + 1}: "
                                                           f"{event.describe()}")
        recommender = Recommender(
            request, self._on_this_device(spec), space, store=self.store,
            allowed_models_dir=models_dir(), allowed_data_dir=data_dir(),
            should_stop=lambda: self.should_stop(job.job_id),
            memory_share=self.queue.limits.memory_share, executor=self._executor(),
            ray_address=ray_address(), on_progress=on_progress, on_trial=on_trial)
        recommender.prepare_baseline()
        recorder = self.store.record(**{**recommender.run_fields(owner=job.owner),
                                        **self.signed(job)})
        self._record(job, recorder, recommender.run)

    def _on_this_device(self, spec):
        """The spec as this worker runs it: a fake GPU computes on the CPU."""
        from dataclasses import replace

        from benchmarks.executors.devices import compute_device
        if self.device.startswith("cuda:") and compute_device(self.device) == "cpu":
            return replace(spec, device="cpu")
        return spec

    def _executor(self):
        """On a machine with several GPUs, a GPU worker's sweep trains on the idle ones."""
        from benchmarks.executors.devices import gpu_devices
        gpus = gpu_devices() if self.device.startswith("cuda:") else []
        if len(gpus) < 2 or ray_address():
            return None
        from benchmarks.executors.pool import DevicePool
        return DevicePool(self.store.path, gpus, own=self.device)

    def run_distributed_job(self, job: Job) -> None:
        from dataclasses import replace

        from benchmarks.distributed.launcher import distributed_environment, run_distributed
        from benchmarks.spec.distributed import DistributedConfig
        config = DistributedConfig.from_dict(job.payload)
        if ray_address():  # the dashboard's worker drives the operator's cluster
            config = replace(config, executor="ray", ray_address=ray_address())
        environment = distributed_environment(config)
        stop = self.stopper(job)

        def run(recorder):
            def on_progress(done, total, result):
                recorder.add(result)
                self.progress(job.job_id, variant=result.get("name", ""), index=done - 1,
                              total=total, phase="done", fraction=done / max(total, 1),
                              message=f"{done}/{total} runs")

            def on_step(index, total, name, steps, of):
                self.progress(job.job_id, variant=name, index=index, total=total,
                              phase="training", fraction=steps / max(of, 1),
                              message=f"{index + 1}/{total} {name}: step {steps}/{of}")
            run_distributed(config, on_progress=on_progress, warn=lambda m: None,
                            should_stop=stop, on_step=on_step,
                            memory_share=self.queue.limits.memory_share)

        recorder = self.store.record(model=config.model, dataset=config.dataset,
                                     device=environment["device"], spec=config.to_dict(),
                                     environment=environment, kind="distributed",
                                     **self.signed(job))
        self._record(job, recorder, run)

    def run_sensitivity_job(self, job: Job) -> None:
        """A sensitivity map of a sweep's baseline (``benchmarks.sensitivity``): its rows
        stored as they are measured, cancellable between cells like a sweep between
        phases."""
        from benchmarks.run.runner import prepare_sweep
        from benchmarks.sensitivity.config import SensitivityConfig, baseline_spec
        from benchmarks.sensitivity.mapper import record_map
        config = SensitivityConfig.from_dict(job.payload["sensitivity"])
        spec = self._on_this_device(baseline_spec(job.payload["sweep"]))
        self.progress(job.job_id, variant="", index=-1, total=1, phase="preparing",
                      fraction=0.0, message="loading data and model")
        stop = lambda: self.should_stop(job.job_id)  # noqa: E731
        sweep = prepare_sweep(spec, allowed_models_dir=models_dir(), allowed_data_dir=data_dir(),
                              should_stop=stop, memory_share=self.queue.limits.memory_share)

        def on_progress(phase, done, total, message):
            self.progress(job.job_id, variant=phase, index=done if total else -1,
                          total=max(total, 1), phase=phase, fraction=0.0, message=message)

        def run(recorder):
            record_map(sweep, config, recorder, on_progress=on_progress, should_stop=stop)

        sweep.environment["queue_device"] = self.device
        recorder = self.store.record(
            model=spec.model, dataset=spec.dataset, device=str(sweep.device),
            spec={"sweep": spec.to_dict(), "sensitivity": config.to_dict(),
                  "source_run": job.payload.get("source_run")},
            environment=sweep.environment, kind="sensitivity", **self.signed(job))
        self._record(job, recorder, run)

    def run_export_job(self, job: Job) -> None:
        """A variant of a stored run rebuilt and written as files, zipped for the page's
        download (``benchmarks.export``: the dashboard never imports torch), into the job's
        own folder under its run's exports (removed with the run). The exports together are
        capped (COMPRESSION_BENCH_EXPORT_MB): least recently used ones go first. Cancelled,
        failed or over the cap, the job's folder is removed whole."""
        import shutil

        from benchmarks.export.files import archive, evict_exports, export_folder, exports
        from benchmarks.export.variant import export_variant
        from benchmarks.spec.cancel import check_stop
        from benchmarks.spec.limits import MIB
        run_id, variant = job.payload["run_id"], job.payload["variant"]
        stop = self.stopper(job)
        self.progress(job.job_id, variant=variant, index=0, total=1, phase="exporting",
                      fraction=0.0, message=f"rebuilding {variant} and writing its files")
        folder = export_folder(self.store.path, run_id, variant, job.job_id)
        mine = folder.parent
        guard = Interruptible(lambda: self.stop_wanted(job.job_id))
        try:
            private_folder(mine)
            with guard:  # torch.export and the ONNX exporter run for seconds, checking nothing
                export_variant(self.store, run_id, variant, folder,
                               allowed_models_dir=models_dir(), should_stop=stop)
                check_stop(stop)
            self.progress(job.job_id, variant=variant, index=0, total=1, phase="zipping",
                          fraction=0.9, message=f"zipping {variant}'s files")
            archive(folder, should_stop=stop)
            check_stop(stop)
            cap = self.queue.limits.export_mb * MIB
            size = next((size for _, size, f in exports(self.store.path) if f == mine), 0)
            if size > cap:
                raise ValueError(f"the export of {variant} takes {size / MIB:,.0f} MB, more than "
                                 f"the dashboard's exports may take together ({cap // MIB:,} "
                                 f"MB, COMPRESSION_BENCH_EXPORT_MB)")
            evict_exports(self.store.path, cap, keep=mine)
        except BaseException:
            self.retire = self.retire or guard.fired
            shutil.rmtree(mine, ignore_errors=True)
            try:
                mine.parent.rmdir()  # the run's exports folder, if this was its only one
            except OSError:
                pass
            raise
        self.finish(job.job_id, "complete")

    def _cluster(self) -> dict:
        from benchmarks.executors.ray_executor import cluster_card, connect
        try:
            connect(ray_address())
            return cluster_card()
        except ValueError as exc:
            return {"error": first_line(exc)}

    def _refresh_cluster(self) -> None:
        """The sidebar's view of the cluster (nodes, free GPUs or slots), kept current while
        the worker waits for jobs."""
        now = time.monotonic()
        if not ray_address() or now - self._cluster_at < CLUSTER_REFRESH_S:
            return
        self._cluster_at = now
        with self.store.transaction() as db:
            row = db.execute("SELECT card FROM workers WHERE device=?", (self.device,)
                             ).fetchone()
            if row is not None:
                card = {**json.loads(row["card"]), "cluster": self._cluster()}
                db.execute("UPDATE workers SET card=? WHERE device=?",
                           (json.dumps(card, default=str), self.device))

    def loop(self) -> None:
        while self.parent_alive():
            job = self.claim()
            self.register()
            if job is None:
                self._refresh_cluster()
                time.sleep(POLL_S)
                continue
            self.run_job(job)
            if self.retire:
                return  # a fresh worker (the supervisor starts one) serves the next job


def worker_main(argv: list[str]) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m benchmarks.service.worker")
    parser.add_argument("--store", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--parent", type=int)
    args = parser.parse_args(argv)
    os.umask(0o077)  # the runs, caches and files it writes are its owner's only
    lock = try_lock(lock_path(Path(args.store), args.device))
    if lock is None:
        return 0  # another worker serves this device
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())  # lets stop_worker find a worker still starting
    # SIGTERM ends the process through SystemExit, so the current job is marked by the next
    # worker as interrupted and the store stays consistent.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Job code (a model file) runs in this process: no connection it opens may change who
    # owns a run or a job, nor drop the store's triggers that say so (issue 31.6).
    guard_worker_connections()
    worker = Worker(args.store, args.device, args.parent)
    # The CPU worker's timed threads and a GPU worker's launches (and its INT8 variants' CPU
    # timings) on disjoint cores, where the machine has a GPU (environment.worker_cores).
    if hasattr(os, "sched_setaffinity"):
        from benchmarks.executors.devices import gpu_devices
        from benchmarks.measure.environment import worker_cores
        os.sched_setaffinity(0, worker_cores(args.device, gpus=len(gpu_devices())))
    # Before torch is imported: the limit must cover everything the worker will allocate.
    if worker.queue.limits.worker_memory is not None:
        apply_memory_limit(worker.queue.limits.worker_memory)
    worker.take_over()
    try:
        worker.loop()
    finally:
        os.close(lock)
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
