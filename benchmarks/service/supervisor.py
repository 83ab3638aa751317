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

from benchmarks.store.database import process_alive
from optimizers.errors import first_line

WATCH_S = 0.5            # how often the supervisor looks at its workers and their jobs
# A job past its wall-time limit is asked to stop (between phases); one still running this
# long after the limit is stopped by killing its worker.
TIME_LIMIT_GRACE_S = 30.0
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

    def run(self) -> None:
        while not self._stopped.wait(self.interval):
            try:
                self.watch()
            except Exception as exc:  # a busy or broken store: try again next tick
                print(f"supervisor: {first_line(exc)}", file=sys.stderr)

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
                    reaped.append(p.pid)
        for pid in reaped:
            self.queue.forget_worker(pid)
        with self.queue.store.connect() as db:
            running = db.execute("SELECT * FROM jobs WHERE status='running'").fetchall()
            waiting = {r["device"] for r in db.execute(
                "SELECT DISTINCT device FROM jobs WHERE status='queued'")}
        for row in running:
            pid = row["worker_pid"] or 0
            if not holder_alive(row):
                code = self._exit_code(pid)
                status, reason = self.queue.death_cause(pid) or exit_cause(code)
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
            if device == "cuda" or not self.queue.worker_alive(device):
                self.queue.ensure_worker(device)

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
        self.queue._remove_folder(row["folder"])
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
