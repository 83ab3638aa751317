"""The queue's worker process: one per device, running its jobs one at a time.

A separate process, not a thread of the Streamlit server: its timings share no interpreter
lock with the server, and a crash in a kernel cannot take the UI down. It holds its device's
``flock`` (``workers.lock_path``) for as long as it lives, exits when the process that started it
(the server) is gone, and claims its next job before it imports torch, so a job queued behind
a killed one starts within a second or two. It runs under the operator's hard memory limit
(RLIMIT_DATA, ``benchmarks.measure.machine``): a job that goes over it fails with "out of memory
(limit X)" instead of taking the machine.

Job kinds: each one a module of ``benchmarks.service.kinds``, run by ``kind.run(worker, job)``
with this worker's progress, stop check and recorder (``record_run``).

``python -m benchmarks.service.worker --store FILE --device cpu --parent PID``
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path

from benchmarks.executors.devices import try_lock
from benchmarks.measure.machine import apply_memory_limit, is_out_of_memory, out_of_memory_label
from benchmarks.service.memory_guard import new_shm_files, remove_shm_files, shm_files
from benchmarks.service.queue import (
    CLUSTER_REFRESH_S,
    HAND_OVER_S,
    POLL_S,
    PROGRESS_EVERY_S,
    Job,
    JobQueue,
    ray_address,
)
from benchmarks.service.workers import lock_path, write_record
from benchmarks.spec.cpu_env import clear_inherited
from benchmarks.spec.folders import private_folder
from benchmarks.store.database import guard_worker_connections, now_iso, process_start_token
from optimizers.errors import first_line


class Worker:
    """Runs one device's jobs, one at a time, until its parent process is gone."""

    def __init__(self, store_path: str, device: str, parent: int | None):
        self.queue = JobQueue(store_path, serving=False)
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
        self._shm_before: dict | None = None  # /dev/shm as the running job found it
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
        from benchmarks.run.speed import cached_speed
        from benchmarks.zoo.models import build_model
        activation_bytes(lambda: build_model("mlp", 2, 1, (8, 8)), (1, 8, 8))
        # The roofline's roofs, measured once per device and machine (then read from the
        # store): here, before the worker's card is published.
        card["peaks"] = sweep_peaks(self.store, dev, default_threads())
        # The first estimate of a sweep (benchmarks.run.first_estimate) shown before any run
        # of its model here: measured once per machine (about a second), then read back.
        try:
            card["speed"] = cached_speed()
        except Exception:  # an estimate is no reason to keep the worker from starting
            card["speed"] = None
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
        self._release_shm()  # first: a job shown ended holds no /dev/shm memory
        self._update(job_id, status=status, error=error, finished_at=now_iso())

    def _release_shm(self) -> None:
        """The /dev/shm files this job's processes created since it began, removed: no
        process maps them once it has ended, so nothing else would ever free that memory."""
        if self._shm_before is not None:
            remove_shm_files(new_shm_files(self._shm_before, os.getuid()))

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
        # The /dev/shm files this job's processes create are removed when it ends, before
        # its status says so (``finish``), and again here for a job that ended otherwise.
        self._shm_before = shm_files(os.getuid())
        try:
            self._run_job_kind(job)
        finally:
            self._release_shm()
            self._shm_before = None

    def _run_job_kind(self, job: Job) -> None:
        from benchmarks.service.kinds import UnknownKind, get
        from benchmarks.spec.cancel import Cancelled
        self._cancel, self._over_time = False, None
        self._last_phase = None
        self._limit = job.time_limit_s or self.queue.limits.job_time_s
        self._deadline = time.monotonic() + self._limit
        try:
            if job.payload_error is not None:  # written around the server: nothing to run
                raise ValueError(job.payload_error)
            if job.folder is not None and not self.received(job):
                self.finish(job.job_id, "failed", f"its uploaded files did not reach the "
                            f"worker within {HAND_OVER_S:g} s of the job's start (the server "
                            f"hands them over once a worker claims it); run it again")
                return
            get(job.kind).run(self, job)
        except UnknownKind as exc:  # an older or newer server's job: said; the next one runs
            self.finish(job.job_id, "failed", first_line(exc, 600))
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
            self.queue._remove_folder(job.job_id)

    def received(self, job: Job) -> bool:
        """Whether the job's own folder (its uploads) is here, waiting up to HAND_OVER_S for
        the server to hand it over: where the worker is another user, a queued job's uploads
        stay the server's until a worker claims it."""
        folder = self.queue.job_folder(job.job_id)
        deadline = time.monotonic() + HAND_OVER_S
        while not folder.is_dir():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def record_run(self, job: Job, recorder, run) -> None:
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

    def on_this_device(self, spec):
        """The spec as this worker runs it: a fake GPU computes on the CPU."""
        from dataclasses import replace

        from benchmarks.executors.devices import compute_device
        if self.device.startswith("cuda:") and compute_device(self.device) == "cpu":
            return replace(spec, device="cpu")
        return spec

    def executor(self):
        """On a machine with several GPUs, a GPU worker's sweep trains on the idle ones."""
        from benchmarks.executors.devices import gpu_devices
        gpus = gpu_devices() if self.device.startswith("cuda:") else []
        if len(gpus) < 2 or ray_address():
            return None
        from benchmarks.executors.pool import DevicePool
        return DevicePool(self.store.path, gpus, own=self.device)

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
    parser.add_argument("--lock-fd", type=int,
                        help="the device's lock, taken by the server that started this worker")
    args = parser.parse_args(argv)
    os.umask(0o077)  # the runs, caches and files it writes are its owner's only
    # Before torch: an instruction-set cap the server inherited would cap every native cell
    # (benchmarks.spec.cpu_env); the worker's card records what was cleared.
    clear_inherited()
    if args.lock_fd is not None:
        # The server took the lock and recorded this process behind it; the descriptor is
        # read-only, and closed to whatever job code executes.
        lock = args.lock_fd
        os.set_inheritable(lock, False)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    else:  # started by hand: it takes the lock itself, and records itself behind it
        path = lock_path(Path(args.store), args.device)
        private_folder(path.parent)
        lock = try_lock(path)
        if lock is None:
            return 0  # another worker serves this device
        write_record(path, os.getpid())
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
