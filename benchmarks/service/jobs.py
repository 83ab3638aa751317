"""The job queue the dashboard submits to: one worker process per device.

Jobs live in the results store's SQLite file, so they survive a server restart and every page
(every session) sees every job's state. A worker is a separate process, not a thread of the
Streamlit server: its timings share no interpreter lock with the server, and a crash in a
kernel cannot take the UI down. One worker per device holds an exclusive ``flock`` on a lock
file beside the store; the kernel drops the lock when the process dies, however it dies, so
"is a worker alive?" is a non-blocking lock attempt, and two sessions that both start a worker
end up with one. The worker exits when the process that started it (the server) is gone; the
next worker marks the jobs it left running as interrupted.

The supervisor is a daemon thread of the process that starts the workers (the dashboard's
server, through its one shared ``JobQueue``), not a page load and not a further process:
only a parent can reap its child, so the parent watches. Every WATCH_S it reaps workers that
exited (no zombies), ends the job a dead worker held (``interrupted`` when it was killed from
outside, ``failed`` when it crashed, with the signal or status) together with its stored run,
kills a worker whose job overran its wall-time limit, and starts a fresh worker when jobs
wait. A worker claims its next job before it imports torch, so a job queued behind a killed
one starts within a second or two.

The worker runs under the operator's hard memory limit (RLIMIT_DATA, ``limits.py``): a job
that goes over it fails with "out of memory (limit X)" instead of taking the machine. Files a
job needs (an uploaded checkpoint) are moved into the job's own folder at submission and
removed when it ends, so a closed browser session never breaks a queued job. Jobs carry an
owner (signed-in user, else the browser session, as a digest): only the owner or an admin
cancels them, and the operator caps how many one owner may have queued or running.

Import-light on purpose (no torch): the dashboard imports this module; only the worker loads
the engine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from optimizers.errors import first_line
from ..executors.devices import fake_gpus, try_lock
from ..folders import data_dir, private_file, private_folder
from ..models import models_dir
from .limits import Limits, apply_memory_limit, is_out_of_memory, out_of_memory_label
from .store import (ResultsStore, add_missing_columns, default_store_path, now_iso,
                    process_alive, process_start_token)

JOB_KINDS = ("sweep", "distributed", "export")
JOB_STATUSES = ("queued", "running", "complete", "failed", "cancelled", "interrupted")
FINISHED = ("complete", "failed", "cancelled", "interrupted")
POLL_S = 0.25            # how often an idle worker looks for work
PROGRESS_EVERY_S = 0.2   # progress writes are throttled; a phase change is always written
WORKER_START_TIMEOUT_S = 60.0
WATCH_S = 0.5            # how often the supervisor looks at its workers and their jobs
# A job past its wall-time limit is asked to stop (between phases); one still running this
# long after the limit is stopped by killing its worker.
TIME_LIMIT_GRACE_S = 30.0
# Signals that mean someone (an operator, a shutdown, the kernel's OOM killer) stopped the
# worker: its job was interrupted, not broken, and can run again.
STOP_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

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
    worker_pid    INTEGER,
    worker_token  TEXT,
    owner         TEXT,
    time_limit_s  REAL,
    folder        TEXT
);
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs(device, status, seq);
CREATE TABLE IF NOT EXISTS workers (
    device      TEXT PRIMARY KEY,
    pid         INTEGER NOT NULL,
    started_at  TEXT NOT NULL,
    card        TEXT NOT NULL
);
"""
JOB_COLUMNS = {"worker_token": "TEXT", "owner": "TEXT", "time_limit_s": "REAL",
               "folder": "TEXT"}


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
    owner: str | None = None
    time_limit_s: float | None = None
    folder: str | None = None    # the job's own files (an uploaded checkpoint), removed at its end
    worker_pid: int | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


# How often an idle worker driving a Ray cluster refreshes the sidebar's view of it.
CLUSTER_REFRESH_S = 10.0
RAY_ADDRESS_ENV = "COMPRESSION_BENCH_RAY_ADDRESS"


def ray_address() -> str | None:
    """The cluster the dashboard's worker drives, if the operator gave one."""
    return os.environ.get(RAY_ADDRESS_ENV) or None


def _lock_path(store_path: Path, device: str) -> Path:
    safe = device.replace(":", "-")
    return store_path.with_name(f"{store_path.name}.worker-{safe}.lock")


def _log_path(store_path: Path, device: str) -> Path:
    return store_path.with_name(f"{store_path.name}.worker-{device.replace(':', '-')}.log")


def exit_cause(returncode: int | None) -> tuple[str, str]:
    """(job status, reason) for a job whose worker died with ``returncode`` (None: not known,
    the worker was not this process's child)."""
    if returncode is None:
        return "interrupted", "its worker stopped while it ran; run it again"
    if returncode < 0:
        name = signal.Signals(-returncode).name if -returncode in signal.valid_signals() \
            else f"signal {-returncode}"
        if -returncode in STOP_SIGNALS:
            return "interrupted", (f"its worker was killed ({name}: stopped by someone, or "
                                   f"by the kernel when memory ran out); run it again")
        return "failed", f"its worker crashed ({name}) while it ran"
    return "failed", f"its worker exited with status {returncode} while it ran"


def _holder_alive(row) -> bool:
    """Whether the worker that claimed a running job still runs (a zombie does not)."""
    pid = row["worker_pid"] or 0
    return pid > 0 and process_alive(pid, row["worker_token"])


def _age_s(iso: str | None) -> float:
    if not iso:
        return 0.0
    return (datetime.now(timezone.utc) - datetime.fromisoformat(iso)).total_seconds()


class JobQueue:
    def __init__(self, store_path: str | os.PathLike | None = None,
                 limits: Limits | None = None):
        self.store = ResultsStore(store_path)  # creates the file and the results tables
        self.path = self.store.path
        self.limits = limits if limits is not None else Limits.from_env()
        self.jobs_dir = self.path.with_name(f"{self.path.name}.jobs")
        with self.store.connect() as db:
            db.executescript(SCHEMA)
        with self.store.transaction() as db:
            add_missing_columns(db, "jobs", JOB_COLUMNS)
        self._spawned: list[subprocess.Popen] = []
        self._exits: dict[int, int] = {}  # pid -> return code of reaped workers
        self._lock = threading.Lock()
        self._supervisor: Supervisor | None = None

    @classmethod
    def shared(cls, store_path: str | os.PathLike | None = None) -> "JobQueue":
        """This process's one queue over a store, supervising: the workers it starts are its
        children, so it alone can reap them and tell how they died. The dashboard's server
        takes it at start-up (serve.py) and in its pages."""
        path = Path(store_path) if store_path is not None else None
        with _SHARED_LOCK:
            key = str((path or default_store_path()).resolve())
            queue = _SHARED.get(key)
            if queue is None:
                queue = _SHARED[key] = cls(path)
        queue.supervise()
        return queue

    # -- submitting and reading ----------------------------------------------------------

    def submit(self, kind: str, payload: dict, *, session: str, device: str = "cpu",
               owner: str | None = None, attachments: dict[str, str] | None = None) -> str:
        """Queue a job. ``attachments`` maps payload fields to files (an uploaded checkpoint)
        that are moved into the job's own folder; the payload then names them there."""
        if kind not in JOB_KINDS:
            raise ValueError(f"job kind must be one of {', '.join(JOB_KINDS)}; got {kind!r}")
        owner = owner or session
        self._check_cap(owner)
        job_id = uuid.uuid4().hex[:12]
        payload, folder = dict(payload), None
        if attachments:
            folder = self.jobs_dir / job_id
            private_folder(folder)
            for key, source in attachments.items():
                target = folder / Path(source).name
                shutil.move(source, target)
                payload[key] = str(target)
        try:
            with self.store.transaction() as db:
                self._check_cap(owner, db)
                db.execute("INSERT INTO jobs (job_id, kind, status, session, device, payload, "
                           "submitted_at, owner, time_limit_s, folder) "
                           "VALUES (?,?,?,?,?,?,?,?,?,?)",
                           (job_id, kind, "queued", session, device, json.dumps(payload),
                            now_iso(), owner, self.limits.job_time_s,
                            None if folder is None else str(folder)))
        except BaseException:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            raise
        return job_id

    def _check_cap(self, owner: str, db=None) -> None:
        """One person may have at most ``limits.max_jobs`` jobs queued or running."""
        sql = "SELECT COUNT(*) FROM jobs WHERE owner=? AND status IN ('queued', 'running')"
        if db is None:
            with self.store.connect() as conn:
                (active,) = conn.execute(sql, (owner,)).fetchone()
        else:
            (active,) = db.execute(sql, (owner,)).fetchone()
        cap = self.limits.max_jobs
        if active >= cap:
            raise ValueError(f"you already have {active} job{'s' * (active != 1)} queued or "
                             f"running, the most one person may have here ({cap}, "
                             f"COMPRESSION_BENCH_MAX_JOBS): cancel one under My jobs or wait "
                             f"for it to finish")

    def attachment_bytes(self) -> int:
        """What the queued and running jobs' own folders hold (uploads count against a cap)."""
        total = 0
        if self.jobs_dir.is_dir():
            for path in self.jobs_dir.rglob("*"):
                try:
                    total += path.stat().st_size if path.is_file() else 0
                except OSError:
                    continue
        return total

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
                   position=position, owner=row["owner"], time_limit_s=row["time_limit_s"],
                   folder=row["folder"], worker_pid=row["worker_pid"])

    def get(self, job_id: str) -> Job | None:
        with self.store.connect() as db:
            row = db.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
            return None if row is None else self._job(db, row)

    def jobs(self, session: str | None = None, limit: int = 50, owner: str | None = None
             ) -> list[Job]:
        """Jobs, newest first; optionally only one session's or one owner's."""
        sql, args, where = "SELECT * FROM jobs", [], []
        for column, value in (("session", session), ("owner", owner)):
            if value is not None:
                where.append(f"{column}=?")
                args.append(value)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC LIMIT ?"
        args.append(int(limit))
        with self.store.connect() as db:
            return [self._job(db, r) for r in db.execute(sql, args).fetchall()]

    def cancel(self, job_id: str, *, by: str | None = None, admin: bool = False) -> bool:
        """A queued job is cancelled at once, and so is a running one whose worker is dead; a
        running one stops between phases (a distributed one at once: every rank is stopped).
        With ``by``, only the job's owner (or ``admin``) may: PermissionError otherwise."""
        with self.store.transaction() as db:
            row = db.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
            if row is None or row["status"] in FINISHED:
                return False
            if by is not None and not admin and row["owner"] != by:
                raise PermissionError("only the person who submitted it can cancel this job")
            if row["status"] == "queued" or not _holder_alive(row):
                self._end(db, row, "cancelled",
                          None if row["status"] == "queued" else "cancelled (its worker had "
                          "stopped)")
            else:
                db.execute("UPDATE jobs SET cancel_requested=1 WHERE job_id=?", (job_id,))
                return True
        self._remove_folder(row["folder"])
        return True

    def _end(self, db, row, status: str, error: str | None) -> None:
        """End a job that no worker will finish, and its stored run with it (a cancelled
        job's run reads interrupted)."""
        db.execute("UPDATE jobs SET status=?, error=?, finished_at=? WHERE job_id=? "
                   "AND status IN ('queued', 'running')", (status, error, now_iso(),
                                                           row["job_id"]))
        if row["run_id"]:
            run_status = "interrupted" if status == "cancelled" else status
            db.execute("UPDATE runs SET status=?, error=?, finished_at=? WHERE run_id=? "
                       "AND status IN ('running', 'interrupted')",
                       (run_status, error or "cancelled by the user", now_iso(), row["run_id"]))

    @staticmethod
    def _remove_folder(folder: str | None) -> None:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)

    # -- workers -------------------------------------------------------------------------

    def worker_alive(self, device: str = "cpu") -> bool:
        fd = try_lock(_lock_path(self.path, device))
        if fd is None:
            return True
        os.close(fd)  # closing releases the lock
        return False

    def ensure_worker(self, device: str = "cpu", *, wait: bool = False) -> None:
        """Start the device's worker unless one is alive; ``cuda`` starts one per GPU
        (``cuda:0`` ...). Several sessions may call this at once: surplus workers find the
        lock taken and exit."""
        if device == "cuda":
            from ..executors.devices import gpu_devices
            for gpu in gpu_devices() or ["cuda:0"]:
                self.ensure_worker(gpu, wait=wait)
            return
        self.supervise()
        with self._lock:
            if self.worker_alive(device):
                return
            log = _log_path(self.path, device)
            private_file(log)
            root = Path(__file__).resolve().parents[2]
            env = {**os.environ, "PYTHONPATH": str(root)}
            if device.startswith("cuda:") and not fake_gpus():
                # The worker sees only its GPU (as cuda:0): a sweep there never touches
                # another, and its borrowed GPUs are set per process (executors.pool).
                env["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
            with open(log, "ab") as out:
                self._spawned.append(subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.service.jobs", "worker", "--store",
                     str(self.path), "--device", device, "--parent", str(os.getpid())],
                    cwd=root, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    env=env))
        if wait:
            self.wait_for_worker(device)

    # -- the supervisor ------------------------------------------------------------------

    def supervise(self) -> None:
        """Start this queue's supervisor thread (once)."""
        with self._lock:
            if self._supervisor is None or not self._supervisor.is_alive():
                self._supervisor = Supervisor(self)
                self._supervisor.start()

    def watch(self) -> None:
        """One pass of the supervisor: reap, end dead workers' jobs, enforce time limits,
        start a worker where jobs wait."""
        with self._lock:
            for p in list(self._spawned):
                code = p.poll()  # reaps an exited child: no zombie is left behind
                if code is not None:
                    self._exits[p.pid] = code
                    self._spawned.remove(p)
        with self.store.connect() as db:
            running = db.execute("SELECT * FROM jobs WHERE status='running'").fetchall()
            waiting = {r["device"] for r in db.execute(
                "SELECT DISTINCT device FROM jobs WHERE status='queued'")}
        for row in running:
            pid = row["worker_pid"] or 0
            if not _holder_alive(row):
                status, reason = exit_cause(self._exit_code(pid))
                self._finish_dead(row, status, reason)
            elif row["time_limit_s"] and _age_s(row["started_at"]) > \
                    row["time_limit_s"] + TIME_LIMIT_GRACE_S:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self._finish_dead(row, "failed", f"stopped at its time limit "
                                  f"({row['time_limit_s']:g} s, COMPRESSION_BENCH_JOB_TIME_"
                                  f"LIMIT): it did not stop between phases, so its worker "
                                  f"was killed")
        for device in waiting:
            if device == "cuda" or not self.worker_alive(device):
                self.ensure_worker(device)

    def _exit_code(self, pid: int) -> int | None:
        """How a dead worker ended, if it was this queue's child (reaped now if it died
        since this pass began)."""
        with self._lock:
            for p in list(self._spawned):
                if p.pid == pid:
                    try:
                        self._exits[pid] = p.wait(timeout=5)
                        self._spawned.remove(p)
                    except subprocess.TimeoutExpired:
                        pass
        return self._exits.get(pid)

    def _finish_dead(self, row, status: str, reason: str) -> None:
        with self.store.transaction() as db:
            self._end(db, row, status, reason)
        self._remove_folder(row["folder"])

    def stop_supervising(self) -> None:
        if self._supervisor is not None:
            self._supervisor.stop()
            self._supervisor = None

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
        still starting: its pid is in the lock file before it registers. This queue stops
        supervising first, so it does not start another."""
        self.stop_supervising()
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


_SHARED: dict[str, JobQueue] = {}
_SHARED_LOCK = threading.Lock()


class Supervisor(threading.Thread):
    """The queue's watchdog thread: ``JobQueue.watch`` every WATCH_S until stopped or the
    process exits (a daemon thread)."""

    def __init__(self, queue: JobQueue, interval: float = WATCH_S):
        super().__init__(name="bench-queue-supervisor", daemon=True)
        self.queue, self.interval = queue, interval
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.interval):
            try:
                self.queue.watch()
            except Exception as exc:  # a busy or broken store: try again next tick
                print(f"supervisor: {first_line(exc)}", file=sys.stderr)

    def stop(self) -> None:
        self._stopped.set()


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
        self._over_time: float | None = None  # the limit a job overran, in seconds
        self._limit = self.queue.limits.job_time_s
        self._deadline = float("inf")
        self._registered = False
        self._cluster_at = 0.0

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
        self.store.mark_dead_runs()

    def register(self) -> None:
        """Publish this worker's environment card (imports torch: after the first claim, so
        a queued job starts without waiting for it)."""
        if self._registered:
            return
        from ..environment import (default_threads, environment_card, quiet_library_noise,
                                   resolve_device)
        import torch
        quiet_library_noise()
        from ..executors.devices import gpu_devices
        devices = ["cpu"] + gpu_devices()
        from ..executors.devices import compute_device
        dev = resolve_device("cuda" if compute_device(self.device).startswith("cuda")
                             else "cpu")
        # The threads a sweep is timed with (pinned), not the process's default.
        card = {**environment_card(dev, default_threads()), "devices": devices,
                "worker_pid": os.getpid(), "memory_limit": self.queue.limits.worker_memory}
        # Warm the engine first: its imports (the loaders' splitter too) and the first
        # meta-device dry run cost seconds that a job's admission check, or a cancel while it
        # loads its data, should not wait for.
        import sklearn.model_selection  # noqa: F401

        from .. import runner  # noqa: F401
        from ..footprint import activation_bytes
        from ..models import build_model
        from ..peaks import sweep_peaks
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
        """Cancelled by its owner, past its wall-time limit, or the server is gone."""
        now = time.monotonic()
        if not self._cancel and now >= self._deadline:
            self._cancel, self._over_time = True, self._limit
        if not self._cancel and now - self._last_cancel_check >= POLL_S:
            self._last_cancel_check = now
            with self.store.connect() as db:
                row = db.execute("SELECT cancel_requested FROM jobs WHERE job_id=?",
                                 (job_id,)).fetchone()
            self._cancel = bool(row and row["cancel_requested"]) or not self.parent_alive()
        return self._cancel

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
        from ..executors.devices import busy
        with busy(self.store.path, self.device):
            return self._run_job(job)

    def _run_job(self, job: Job) -> None:
        from ..cancel import Cancelled
        self._cancel, self._over_time = False, None
        self._last_phase = None
        self._limit = job.time_limit_s or self.queue.limits.job_time_s
        self._deadline = time.monotonic() + self._limit
        try:
            if job.kind == "sweep":
                self.run_sweep_job(job)
            elif job.kind == "export":
                self.run_export_job(job)
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
        from ..cancel import Cancelled
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
        from ..runner import prepare_sweep
        from ..specs import SweepSpec
        spec = SweepSpec.from_dict(job.payload)
        self.progress(job.job_id, variant="", index=-1, total=len(spec.variants),
                      phase="preparing", fraction=0.0, message="loading data and model")
        stop = lambda: self.should_stop(job.job_id)  # noqa: E731
        # Jobs come from the dashboard: model files and image folders only from the
        # operator's folders; the data set is checked against memory before it is loaded.
        sweep = prepare_sweep(self._on_this_device(spec), allowed_models_dir=models_dir(),
                              allowed_data_dir=data_dir(), should_stop=stop,
                              memory_share=self.queue.limits.memory_share,
                              executor=self._executor())
        if ray_address():
            from ..executors.ray_executor import RaySweep
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
        recorder = self.store.record(model=spec.model, dataset=spec.dataset,
                                     device=str(sweep.device), spec=spec.to_dict(),
                                     environment=sweep.environment, owner=job.owner)
        self._record(job, recorder, run)

    def _on_this_device(self, spec):
        """The spec as this worker runs it: a fake GPU computes on the CPU."""
        from dataclasses import replace

        from ..executors.devices import compute_device
        if self.device.startswith("cuda:") and compute_device(self.device) == "cpu":
            return replace(spec, device="cpu")
        return spec

    def _executor(self):
        """On a machine with several GPUs, a GPU worker's sweep trains on the idle ones."""
        from ..executors.devices import gpu_devices
        gpus = gpu_devices() if self.device.startswith("cuda:") else []
        if len(gpus) < 2 or ray_address():
            return None
        from ..executors.pool import DevicePool
        return DevicePool(self.store.path, gpus, own=self.device)

    def run_distributed_job(self, job: Job) -> None:
        from dataclasses import replace

        from ..distributed.config import DistributedConfig
        from ..distributed.launcher import distributed_environment, run_distributed
        config = DistributedConfig.from_dict(job.payload)
        if ray_address():  # the dashboard's worker drives the operator's cluster
            config = replace(config, executor="ray", ray_address=ray_address())
        environment = distributed_environment(config)
        stop = lambda: self.should_stop(job.job_id)  # noqa: E731

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
                                     owner=job.owner)
        self._record(job, recorder, run)

    def run_export_job(self, job: Job) -> None:
        """A variant of a stored run rebuilt and written as files, zipped for the page's
        download (``benchmarks.export``; the dashboard never imports torch)."""
        from ..export import archive, export_folder, export_variant
        run_id, variant = job.payload["run_id"], job.payload["variant"]
        self.progress(job.job_id, variant=variant, index=0, total=1, phase="exporting",
                      fraction=0.0, message=f"rebuilding {variant} and writing its files")
        folder = export_folder(self.store.path, run_id, variant)
        private_folder(folder.parent)
        export_variant(self.store, run_id, variant, folder, allowed_models_dir=models_dir())
        archive(folder)
        self.finish(job.job_id, "complete")

    def _cluster(self) -> dict:
        from ..executors.ray_executor import cluster_card, connect
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


def worker_main(argv: list[str]) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m benchmarks.service.jobs worker")
    parser.add_argument("--store", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--parent", type=int)
    args = parser.parse_args(argv)
    os.umask(0o077)  # the runs, caches and files it writes are its owner's only
    lock = try_lock(_lock_path(Path(args.store), args.device))
    if lock is None:
        return 0  # another worker serves this device
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())  # lets stop_worker find a worker still starting
    # SIGTERM ends the process through SystemExit, so the current job is marked by the next
    # worker as interrupted and the store stays consistent.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    worker = Worker(args.store, args.device, args.parent)
    # The CPU worker's timed threads and a GPU worker's launches (and its INT8 variants' CPU
    # timings) on disjoint cores, where the machine has a GPU (environment.worker_cores).
    if hasattr(os, "sched_setaffinity"):
        from ..environment import worker_cores
        from ..executors.devices import gpu_devices
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
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(worker_main(sys.argv[2:]))
    print("usage: python -m benchmarks.service.jobs worker --store FILE [--device cpu] [--parent PID]",
          file=sys.stderr)
    sys.exit(2)
