"""The queue's supervisor: a daemon thread of the process that starts the workers.

Not a page load and not a further process: only a parent can reap its child, so the parent
(the dashboard's server, through its one shared ``JobQueue``) watches. Every WATCH_S it reaps
workers that exited (no zombies), ends the job a dead worker held (``interrupted`` when it was
killed from outside, ``failed`` when it crashed, with the signal or status) together with its
stored run, kills a worker whose job overran its wall-time limit, and starts a fresh worker
when jobs wait.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from datetime import datetime, timezone

from benchmarks.store.processes import process_alive
from optimizers.errors import first_line

WATCH_S = 0.5            # how often the supervisor looks at its workers and their jobs
# A job past its wall-time limit is asked to stop (between phases); one still running this
# long after the limit is stopped by killing its worker.
TIME_LIMIT_GRACE_S = 30.0
# A device's worker that fails to start this many times in a row (it cannot be executed, or
# exits before it takes a job) ends the jobs waiting for it, failed with the reason, said once.
START_TRIES = 3
# Signals that mean someone (an operator, a shutdown, the kernel's OOM killer) stopped the
# worker: its job was interrupted, not broken, and can run again.
STOP_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


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



def _device_of(proc) -> str | None:
    """The ``--device`` a worker process was started with."""
    args = list(proc.args) if isinstance(proc.args, (list, tuple)) else []
    return str(args[args.index("--device") + 1]) if "--device" in args[:-1] else None


def _age_s(iso: str | None) -> float:
    if not iso:
        return 0.0
    return (datetime.now(timezone.utc) - datetime.fromisoformat(iso)).total_seconds()


def holder_alive(row) -> bool:
    """Whether the worker that claimed a running job still runs (a zombie does not)."""
    pid = row["worker_pid"] or 0
    return pid > 0 and process_alive(pid, row["worker_token"])


class Supervisor(threading.Thread):
    """The queue's watchdog thread: ``watch`` every WATCH_S until stopped or the process
    exits (a daemon thread). ``queue`` is the ``JobQueue`` whose workers it started."""

    def __init__(self, queue, interval: float = WATCH_S):
        super().__init__(name="bench-queue-supervisor", daemon=True)
        self.queue, self.interval = queue, interval
        self._stopped = threading.Event()
        # device -> (failed starts in a row, the last one's reason)
        self._start_failures: dict[str, tuple[int, str]] = {}
        self._running: set[str] = set()  # the jobs running at the last pass

    def run(self) -> None:
        said = None  # the last error said: the same one is not said again every tick
        while not self._stopped.wait(self.interval):
            try:
                self.watch()
                said = None
            except Exception as exc:  # a busy or broken store: try again next tick
                line = f"supervisor: {first_line(exc)}"
                if line != said:
                    print(line, file=sys.stderr)
                said = line

    def stop(self) -> None:
        self._stopped.set()

    def watch(self) -> None:
        """One pass: reap, end dead workers' jobs, enforce time limits,
        start a worker where jobs wait."""
        reaped = []
        with self.queue._lock:
            for p in list(self.queue._spawned):
                code = p.poll()  # reaps an exited child: no zombie is left behind
                if code is not None:
                    self.queue._exits[p.pid] = code
                    self.queue._spawned.remove(p)
                    reaped.append((p.pid, code, _device_of(p)))
        for pid, _, _ in reaped:
            self.queue.forget_worker(pid)
        if reaped:  # what their jobs left (a process that kept the lock) goes with them
            self.queue.end_strays(dead=[pid for pid, _, _ in reaped])
        with self.queue.store.connect() as db:
            running = db.execute("SELECT * FROM jobs WHERE status='running'").fetchall()
            waiting = {r["device"] for r in db.execute(
                "SELECT DISTINCT device FROM jobs WHERE status='queued'")}
            took = {r["worker_pid"] for r in db.execute(
                "SELECT worker_pid FROM jobs WHERE worker_pid IN (%s)" %
                ",".join("?" * len(reaped)), [pid for pid, _, _ in reaped])} if reaped else set()
        for pid, code, device in reaped:
            # Exited with an error before it took any job: it could not start.
            if code > 0 and pid not in took and device is not None:
                kind = "cuda" if device.startswith("cuda:") and "cuda" in waiting else device
                self._start_failed(kind, f"it exited with status {code} before taking a job "
                                         f"(its log: {self._log(device)})")
        dead = []
        for row in running:
            pid = row["worker_pid"] or 0
            if not holder_alive(row):
                code = self._exit_code(pid)
                status, reason = self.queue.death_cause(pid) or exit_cause(code)
                self._finish_dead(row, status, reason)
                dead.append(pid)
            elif row["time_limit_s"] and _age_s(row["started_at"]) > \
                    row["time_limit_s"] + TIME_LIMIT_GRACE_S:
                # Only a worker this server knows is killed: the row's pid is job code's to
                # write.
                self.queue.kill_worker(pid)
                self._finish_dead(row, "failed", f"stopped at its time limit "
                                  f"({row['time_limit_s']:g} s, COMPRESSION_BENCH_JOB_TIME_"
                                  f"LIMIT): it did not stop between phases, so its worker "
                                  f"was killed")
        now_running = {row["job_id"] for row in running}
        if dead or self._running - now_running:
            # A job ended, or its worker died: nothing it started outlives it.
            self.queue.end_strays(dead=dead)
        self._running = now_running
        self.queue.hand_over_claimed()
        for device in waiting:
            try:
                if device != "cuda" and self.queue.worker_alive(device):
                    self._start_failures.pop(device, None)  # it started: the count anew
                    continue
                self.queue.ensure_worker(device)
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                self._start_failed(device, first_line(exc))

    def _log(self, device: str) -> str:
        from benchmarks.service.workers import log_path
        return str(log_path(self.queue.path, device))

    def _start_failed(self, device: str, reason: str) -> None:
        """One more failed start of ``device``'s worker; the START_TRIES-th in a row ends the
        jobs waiting for it (failed, with the reason), and says so once on stderr."""
        tries = self._start_failures.get(device, (0, ""))[0] + 1
        if tries < START_TRIES:
            self._start_failures[device] = (tries, reason)
            return
        self._start_failures.pop(device, None)  # a job queued later tries afresh
        why = f"its worker could not start ({tries} tries): {reason}"
        with self.queue.store.transaction() as db:
            rows = db.execute("SELECT * FROM jobs WHERE device=? AND status='queued'",
                              (device,)).fetchall()
            for row in rows:
                self.queue._end(db, row, "failed", why)
        for row in rows:
            self.queue._remove_folder(row["job_id"])
        print(f"supervisor: the {device} worker could not start ({tries} tries): {reason}; "
              f"{len(rows)} queued job(s) failed with that reason", file=sys.stderr)

    def _exit_code(self, pid: int) -> int | None:
        """How a dead worker ended, if it was this queue's child (reaped now if it died
        since this pass began)."""
        with self.queue._lock:
            for p in list(self.queue._spawned):
                if p.pid == pid:
                    try:
                        self.queue._exits[pid] = p.wait(timeout=5)
                        self.queue._spawned.remove(p)
                    except subprocess.TimeoutExpired:
                        pass
        if pid in self.queue._exits:
            self.queue.forget_worker(pid)
        return self.queue._exits.get(pid)

    def _finish_dead(self, row, status: str, reason: str) -> None:
        with self.queue.store.transaction() as db:
            self.queue._end(db, row, status, reason)
        self.queue._remove_folder(row["job_id"])
        self._remove_shm(row)

    def _remove_shm(self, row) -> None:
        """The /dev/shm files a worker that died mid-job left (its own end would have removed
        them): where it ran as a user of its own, that user's files written since the job
        started. A worker of this server's own user is not told apart from the server here."""
        from benchmarks.service.memory_guard import remove_shm_files, shm_files
        account = self.queue._account[0] if self.queue._account else None
        if account is None or account.uid == os.getuid() or not row["started_at"]:
            return
        since = datetime.fromisoformat(row["started_at"]).timestamp()
        remove_shm_files(shm_files(account.uid, since=since))
