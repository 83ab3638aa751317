"""The job queue the dashboard submits to: one worker process per device.

Jobs live in the results store's SQLite file, so they survive a server restart and every page
(every session) sees every job's state. A worker is a separate process, not a thread of the
Streamlit server: its timings share no interpreter lock with the server, and a crash in a
kernel cannot take the UI down. One worker per device holds an exclusive ``flock`` on a lock
file beside the store; the kernel drops the lock when the process dies, however it dies, so
"is a worker alive?" is a non-blocking lock attempt, and two sessions that both start a worker
end up with one. The worker exits when the process that started it (the server) is gone; the
next worker marks the jobs it left running as interrupted.

Import-light on purpose (no torch): the dashboard imports this module; only the worker loads
the engine.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from optimizers.errors import first_line
from ..models import models_dir
from .store import ResultsStore, now_iso

JOB_KINDS = ("sweep", "distributed", "export")
JOB_STATUSES = ("queued", "running", "complete", "failed", "cancelled", "interrupted")
FINISHED = ("complete", "failed", "cancelled", "interrupted")
POLL_S = 0.25            # how often an idle worker looks for work
PROGRESS_EVERY_S = 0.2   # progress writes are throttled; a phase change is always written
WORKER_START_TIMEOUT_S = 60.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id        TEXT UNIQUE NOT NULL,
    kind          TEXT NOT NULL,
    status        TEXT NOT NULL,
    session       TEXT NOT NULL,
    device        TEXT NOT NULL,
    payload       TEXT NOT NULL,
    submitted_at  TEXT NOT NULL,
    started_at    TEXT,
    finished_at   TEXT,
    run_id        TEXT,
    progress      TEXT NOT NULL DEFAULT '{}',
    error         TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    worker_pid    INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs(device, status, seq);
CREATE TABLE IF NOT EXISTS workers (
    device      TEXT PRIMARY KEY,
    pid         INTEGER NOT NULL,
    started_at  TEXT NOT NULL,
    card        TEXT NOT NULL
);
"""


@dataclass
class Job:
    job_id: str
    kind: str
    status: str
    session: str
    device: str
    payload: dict
    submitted_at: str
    started_at: str | None = None
    finished_at: str | None = None
    run_id: str | None = None
    progress: dict = field(default_factory=dict)
    error: str | None = None
    cancel_requested: bool = False
    position: int | None = None  # 0 running now; n >= 1 the n-th in its device's queue

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


def _lock_path(store_path: Path, device: str) -> Path:
    safe = device.replace(":", "-")
    return store_path.with_name(f"{store_path.name}.worker-{safe}.lock")


def _try_lock(path: Path):
    """An open, exclusively locked file, or None if another process holds the lock."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class JobQueue:
    def __init__(self, store_path: str | os.PathLike | None = None):
        self.store = ResultsStore(store_path)  # creates the file and the results tables
        self.path = self.store.path
        with self.store.connect() as db:
            db.executescript(SCHEMA)
        self._spawned: list[subprocess.Popen] = []

    # -- submitting and reading ----------------------------------------------------------

    def submit(self, kind: str, payload: dict, *, session: str, device: str = "cpu") -> str:
        if kind not in JOB_KINDS:
            raise ValueError(f"job kind must be one of {', '.join(JOB_KINDS)}; got {kind!r}")
        job_id = uuid.uuid4().hex[:12]
        with self.store.transaction() as db:
            db.execute("INSERT INTO jobs (job_id, kind, status, session, device, payload, "
                       "submitted_at) VALUES (?,?,?,?,?,?,?)",
                       (job_id, kind, "queued", session, device, json.dumps(payload), now_iso()))
        return job_id

    def _job(self, db, row) -> Job:
        position = None
        if row["status"] == "running":
            position = 0
        elif row["status"] == "queued":
            (ahead,) = db.execute("SELECT COUNT(*) FROM jobs WHERE device=? AND status='queued' "
                                  "AND seq < ?", (row["device"], row["seq"])).fetchone()
            position = ahead + 1
        return Job(job_id=row["job_id"], kind=row["kind"], status=row["status"],
                   session=row["session"], device=row["device"],
                   payload=json.loads(row["payload"]), submitted_at=row["submitted_at"],
                   started_at=row["started_at"], finished_at=row["finished_at"],
                   run_id=row["run_id"], progress=json.loads(row["progress"] or "{}"),
                   error=row["error"], cancel_requested=bool(row["cancel_requested"]),
                   position=position)

    def get(self, job_id: str) -> Job | None:
        with self.store.connect() as db:
            row = db.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
            return None if row is None else self._job(db, row)

    def jobs(self, session: str | None = None, limit: int = 50) -> list[Job]:
        sql, args = "SELECT * FROM jobs", []
        if session is not None:
            sql += " WHERE session=?"
            args.append(session)
        sql += " ORDER BY seq DESC LIMIT ?"
        args.append(int(limit))
        with self.store.connect() as db:
            return [self._job(db, r) for r in db.execute(sql, args).fetchall()]

    def cancel(self, job_id: str) -> bool:
        """A queued job is cancelled at once; a running one stops between phases."""
        with self.store.transaction() as db:
            cur = db.execute("UPDATE jobs SET status='cancelled', finished_at=? "
                             "WHERE job_id=? AND status='queued'", (now_iso(), job_id))
            if cur.rowcount:
                return True
            cur = db.execute("UPDATE jobs SET cancel_requested=1 WHERE job_id=? "
                             "AND status='running'", (job_id,))
            return cur.rowcount > 0

    # -- workers -------------------------------------------------------------------------

    def worker_alive(self, device: str = "cpu") -> bool:
        fd = _try_lock(_lock_path(self.path, device))
        if fd is None:
            return True
        os.close(fd)  # closing releases the lock
        return False

    def ensure_worker(self, device: str = "cpu", *, wait: bool = False) -> None:
        """Start the device's worker unless one is alive. Several sessions may call this at
        once: surplus workers find the lock taken and exit."""
        if self.worker_alive(device):
            return
        log = self.path.with_name(f"{self.path.name}.worker-{device.replace(':', '-')}.log")
        root = Path(__file__).resolve().parents[2]
        with open(log, "ab") as out:
            self._spawned.append(subprocess.Popen(
                [sys.executable, "-m", "benchmarks.service.jobs", "worker", "--store", str(self.path),
                 "--device", device, "--parent", str(os.getpid())],
                cwd=root, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(root)}))
        if wait:
            self.wait_for_worker(device)

    def wait_for_worker(self, device: str = "cpu", timeout: float = WORKER_START_TIMEOUT_S
                        ) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            card = self.worker_card(device)
            if card is not None and self.worker_alive(device):
                return card
            time.sleep(0.1)
        return None

    def worker_card(self, device: str = "cpu") -> dict | None:
        """The live worker's environment card (torch version, devices...), or None."""
        with self.store.connect() as db:
            row = db.execute("SELECT card FROM workers WHERE device=?", (device,)).fetchone()
        return json.loads(row["card"]) if row else None

    def stop_worker(self, device: str = "cpu", timeout: float = 10.0) -> None:
        """Ask the device's worker to exit (used by tests and shutdown), including one that is
        still starting: its pid is in the lock file before it registers."""
        pids = set()
        try:
            text = _lock_path(self.path, device).read_text().strip()
            if text.isdigit():
                pids.add(int(text))
        except OSError:
            pass
        with self.store.connect() as db:
            row = db.execute("SELECT pid FROM workers WHERE device=?", (device,)).fetchone()
        if row is not None:
            pids.add(row["pid"])
        pids.update(p.pid for p in self._spawned if p.poll() is None)
        for pid in pids:
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.worker_alive(device):
            time.sleep(0.05)
        for p in self._spawned:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._spawned = [p for p in self._spawned if p.poll() is None]


# -- the worker process ---------------------------------------------------------------------

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

    def parent_alive(self) -> bool:
        return self.parent is None or os.getppid() == self.parent

    def register(self) -> None:
        from ..environment import default_threads, environment_card, resolve_device
        from ..peaks import sweep_peaks
        import torch
        devices = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        dev = resolve_device("cuda" if self.device.startswith("cuda") else "cpu")
        # The threads a sweep is timed with (pinned), not the process's default.
        card = {**environment_card(dev, default_threads()), "devices": devices,
                "worker_pid": os.getpid()}
        # The roofline's roofs, measured once per device and machine (then read from the
        # store): here, before any job, on an idle worker.
        card["peaks"] = sweep_peaks(self.store, dev, default_threads())
        with self.store.transaction() as db:
            db.execute("INSERT OR REPLACE INTO workers (device, pid, started_at, card) "
                       "VALUES (?,?,?,?)", (self.device, os.getpid(), now_iso(),
                                            json.dumps(card, default=str)))
            # Holding the lock, no other worker of this device is alive: what it left running
            # was interrupted.
            db.execute("UPDATE jobs SET status='interrupted', finished_at=?, "
                       "error=COALESCE(error, 'the worker stopped (server restart or crash) "
                       "while this job ran; run it again') "
                       "WHERE device=? AND status='running'", (now_iso(), self.device))
        self.store.mark_dead_runs()

    def claim(self) -> Job | None:
        with self.store.transaction() as db:
            row = db.execute("SELECT * FROM jobs WHERE device=? AND status='queued' "
                             "ORDER BY seq LIMIT 1", (self.device,)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE jobs SET status='running', started_at=?, worker_pid=? "
                       "WHERE job_id=?", (now_iso(), os.getpid(), row["job_id"]))
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
        now = time.monotonic()
        if not self._cancel and now - self._last_cancel_check >= POLL_S:
            self._last_cancel_check = now
            with self.store.connect() as db:
                row = db.execute("SELECT cancel_requested FROM jobs WHERE job_id=?",
                                 (job_id,)).fetchone()
            self._cancel = bool(row and row["cancel_requested"]) or not self.parent_alive()
        return self._cancel

    def finish(self, job_id: str, status: str, error: str | None = None) -> None:
        self._update(job_id, status=status, error=error, finished_at=now_iso())

    def run_job(self, job: Job) -> None:
        self._cancel = False
        self._last_phase = None
        try:
            if job.kind == "sweep":
                self.run_sweep_job(job)
            elif job.kind == "export":
                self.run_export_job(job)
            else:
                self.run_distributed_job(job)
        except ValueError as exc:  # bad input found by the engine: the user's to fix
            self.finish(job.job_id, "failed", f"invalid input: {first_line(exc, 400)}")
        except Exception as exc:  # a failing job never takes the queue down
            self.finish(job.job_id, "failed", f"{type(exc).__name__}: {first_line(exc, 400)}")

    def _record(self, job: Job, recorder, run) -> None:
        """Run ``run(recorder)`` with the stored run sharing the job's fate: interrupted when
        the worker is stopped or the server goes away, failed with the reason when it raises
        (run_job records the job's error), cancelled when the user asked."""
        self._update(job.job_id, run_id=recorder.run_id)
        with recorder:
            try:
                run(recorder)
            except (SystemExit, KeyboardInterrupt):
                recorder.finish("interrupted", "the worker was stopped")
                self.finish(job.job_id, "interrupted", "the worker was stopped; run it again")
                raise
            if self._cancel:
                if not self.parent_alive():  # the server went away mid-job: not the user's
                    recorder.finish("interrupted", "the server stopped")
                    self.finish(job.job_id, "interrupted",
                                "the server stopped while this job ran; run it again")
                else:
                    recorder.finish("interrupted", "cancelled by the user")
                    self.finish(job.job_id, "cancelled", None)
                return
            status = recorder.finish()
        failed = list(recorder.failed.values())
        self.finish(job.job_id, status, f"{len(failed)} failed: {', '.join(failed)}"
                    if failed else None)

    def run_sweep_job(self, job: Job) -> None:
        from ..peaks import sweep_peaks
        from ..runner import prepare_sweep
        from ..specs import SweepSpec
        spec = SweepSpec.from_dict(job.payload)
        self.progress(job.job_id, variant="", index=-1, total=len(spec.variants),
                      phase="preparing", fraction=0.0, message="loading data and model")
        # Jobs come from the dashboard: model files only from the operator's folder.
        sweep = prepare_sweep(spec, allowed_models_dir=models_dir())

        def on_progress(event):
            self.progress(job.job_id, variant=event.variant, index=event.index,
                          total=event.total, phase=event.phase, fraction=event.fraction,
                          message=event.describe())

        def run(recorder):
            stop = lambda: self.should_stop(job.job_id)  # noqa: E731
            for index, result in enumerate(sweep.run(
                    on_progress, stop, on_partial=lambda i, r: recorder.add(r, i))):
                recorder.add(result, index)

        sweep.environment["peaks"] = sweep_peaks(self.store, sweep.device, sweep.threads)
        recorder = self.store.record(model=spec.model, dataset=spec.dataset,
                                     device=str(sweep.device), spec=spec.to_dict(),
                                     environment=sweep.environment)
        self._record(job, recorder, run)

    def run_distributed_job(self, job: Job) -> None:
        from ..distributed.config import DistributedConfig
        from ..distributed.launcher import distributed_environment, run_distributed
        config = DistributedConfig.from_dict(job.payload)
        environment = distributed_environment(config)

        def run(recorder):
            def on_progress(done, total, result):
                recorder.add(result)
                self.progress(job.job_id, variant=result.get("name", ""), index=done - 1,
                              total=total, phase="done", fraction=done / max(total, 1),
                              message=f"{done}/{total} runs")
            run_distributed(config, on_progress=on_progress, warn=lambda m: None)

        recorder = self.store.record(model=config.model, dataset=config.dataset,
                                     device=environment["device"], spec=config.to_dict(),
                                     environment=environment, kind="distributed")
        self._record(job, recorder, run)

    def run_export_job(self, job: Job) -> None:
        """A variant of a stored run rebuilt and written as files, zipped for the page's
        download (``benchmarks.export``; the dashboard never imports torch)."""
        from ..export import archive, export_folder, export_variant
        run_id, variant = job.payload["run_id"], job.payload["variant"]
        self.progress(job.job_id, variant=variant, index=0, total=1, phase="exporting",
                      fraction=0.0, message=f"rebuilding {variant} and writing its files")
        folder = export_folder(self.store.path, run_id, variant)
        folder.parent.mkdir(parents=True, exist_ok=True)
        export_variant(self.store, run_id, variant, folder, allowed_models_dir=models_dir())
        archive(folder)
        self.finish(job.job_id, "complete")

    def loop(self) -> None:
        while self.parent_alive():
            job = self.claim()
            if job is None:
                time.sleep(POLL_S)
                continue
            self.run_job(job)


def worker_main(argv: list[str]) -> int:
    import argparse
    import signal
    parser = argparse.ArgumentParser(prog="python -m benchmarks.service.jobs worker")
    parser.add_argument("--store", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--parent", type=int)
    args = parser.parse_args(argv)
    from ..environment import quiet_library_noise
    quiet_library_noise()
    lock = _try_lock(_lock_path(Path(args.store), args.device))
    if lock is None:
        return 0  # another worker serves this device
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())  # lets stop_worker find a worker still starting
    # SIGTERM ends the process through SystemExit, so the current job is marked by the next
    # worker as interrupted and the store stays consistent.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    worker = Worker(args.store, args.device, args.parent)
    worker.register()
    try:
        worker.loop()
    finally:
        os.close(lock)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(worker_main(sys.argv[2:]))
    print("usage: python -m benchmarks.service.jobs worker --store FILE [--device cpu] [--parent PID]",
          file=sys.stderr)
    sys.exit(2)
