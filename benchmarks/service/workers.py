"""The queue's worker processes: one per device, started when a job needs it, supervised by a
thread of the server (reaped within a second of its death, with the cause), under the memory
limit where one is set. ``JobQueue`` is made of this and the jobs' table.

A device's worker is alive while its lock (``lock_path``) is held and the process the server
recorded behind it (pid and start time, written by the server) runs. The lock and the log
live in the server's own folder (``server_folder``), which the worker's user can neither
write nor enter: the server opens them and hands the worker descriptors (its stdout, and the
locked lock, read-only). A lock still held once its worker is dead is held by what that
worker's job left (``strays``): those processes are ended and a new worker starts.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.executors.devices import fake_gpus, try_lock
from benchmarks.service.supervisor import Supervisor
from benchmarks.spec.folders import own_folder, server_folder
from benchmarks.store.processes import process_alive, process_start_token

WORKER_START_TIMEOUT_S = 60.0
RECORD_SETTLE_S = 0.1
# The devices a worker serves: its name is part of file names and of the worker's command.
DEVICE = re.compile(r"cpu|cuda(:\d{1,3})?")


def check_device(device: str) -> str:
    if not isinstance(device, str) or not DEVICE.fullmatch(device):
        raise ValueError(f"device {str(device)[:40]!r} is not one a worker serves (cpu, cuda "
                         f"or cuda:N)")
    return device


def lock_path(store_path: Path, device: str) -> Path:
    return server_folder(store_path) / f"worker-{check_device(device).replace(':', '-')}.lock"


def log_path(store_path: Path, device: str) -> Path:
    return server_folder(store_path) / f"worker-{check_device(device).replace(':', '-')}.log"


def read_record(lock: Path) -> tuple[int, str | None] | None:
    """(pid, start time) of the worker the server recorded in ``lock``, or None."""
    try:
        words = lock.read_text().split()
    except OSError:
        return None
    if not words or not words[0].isdigit():
        return None
    return int(words[0]), (words[1] if len(words) > 1 else None)


def write_record(lock: Path, pid: int | None) -> None:
    """Record worker ``pid`` (with its start time) in ``lock``; None clears it."""
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        if pid is not None:
            os.write(fd, f"{pid} {process_start_token(pid) or ''}".strip().encode())
    finally:
        os.close(fd)


class WorkerProcesses:
    """The worker processes of a ``JobQueue`` (its ``path``, ``store``, ``limits`` and
    locks are the queue's)."""

    # -- workers -------------------------------------------------------------------------

    def worker_alive(self, device: str = "cpu") -> bool:
        """Whether the device's worker runs: its lock is held, and the process recorded behind
        it (by the server that started it) is alive. A lock held by something else once that
        worker is dead is ended with what the job left (``end_strays``): False then."""
        lock = lock_path(self.path, device)
        if not lock.parent.is_dir():
            return False
        with self._lock:
            fd = try_lock(lock)
            if fd is not None:
                os.close(fd)  # closing releases the lock
                return False
            record = read_record(lock)
            if record is None or process_alive(*record):
                # No record: a worker started by hand holds it (it records itself once it
                # has the lock), or a server is starting one now.
                return True
            # A server that took the lock a moment ago clears the old record at once: only a
            # dead record that stays is a dead worker's.
            time.sleep(RECORD_SETTLE_S)
            if read_record(lock) != record:
                return True
            self.end_strays(dead=[record[0]], lock=lock)
            fd = try_lock(lock)
            if fd is None:
                return True  # still held: left for the next look
            os.close(fd)
            return False

    def live_workers(self) -> set[int]:
        """The pids of the workers alive now: this queue's children, and every worker
        recorded in a lock of the server's folder whose process still runs."""
        live = {p.pid for p in self._spawned if p.poll() is None}
        folder = server_folder(self.path)
        for lock in (folder.glob("worker-*.lock") if folder.is_dir() else []):
            record = read_record(lock)
            if record is not None and process_alive(*record):
                live.add(record[0])
        return live

    def end_strays(self, dead=(), lock: Path | None = None) -> set[int]:
        """End what jobs left (``benchmarks.service.strays``): the processes holding
        ``lock`` (a dead worker's), those left in the sessions of the ``dead`` workers, and
        where the worker runs as a user of its own, every process of that user that no live
        worker is an ancestor of. Returns the pids ended; says them in one line."""
        from benchmarks.service import strays
        with self._lock:
            table = strays.processes()
            live = self.live_workers()
            found = set()
            if lock is not None:
                found |= strays.holding(lock, table)
            for pid in dead:
                if pid not in live:
                    found |= strays.in_session(pid, table)
            account = self._account[0] if self._account else None
            if account is not None:
                found |= strays.outside_trees(account.uid, live, table)
            found -= live | {os.getpid()}
            ended = strays.end(found)
        if ended:
            print(f"supervisor: ended {len(ended)} process(es) a job left behind "
                  f"({', '.join(map(str, sorted(ended)))})", file=sys.stderr)
        return ended

    def ensure_worker(self, device: str = "cpu", *, wait: bool = False) -> None:
        """Start the device's worker unless one is alive; ``cuda`` starts one per GPU
        (``cuda:0`` ...). Several sessions (or servers) may call this at once: the lock,
        taken here before the start, lets one through."""
        if device == "cuda":
            from benchmarks.executors.devices import gpu_devices
            for gpu in gpu_devices() or ["cuda:0"]:
                self.ensure_worker(gpu, wait=wait)
            return
        check_device(device)
        self.supervise()
        with self._lock:
            if self.worker_alive(device):
                return
            root = Path(__file__).resolve().parents[2]
            env, user = self._worker_env(root)
            own_folder(server_folder(self.path))
            lock = lock_path(self.path, device)
            if device.startswith("cuda:") and not fake_gpus():
                # The worker sees only its GPU (as cuda:0): a sweep there never touches
                # another, and its borrowed GPUs are set per process (executors.pool).
                env["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
            # The worker holds the lock through this descriptor, read-only: job code in it
            # can neither write the record nor reach the file by name.
            held = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(held)
                return  # another server started one a moment ago
            try:
                write_record(lock, None)
                log = os.open(log_path(self.path, device),
                              os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                try:
                    # A session of its own: what its jobs leave in it is ended with it.
                    proc = subprocess.Popen(
                        [sys.executable, "-m", "benchmarks.service.worker", "--store",
                         str(self.path), "--device", device, "--parent", str(os.getpid()),
                         "--lock-fd", str(held)],
                        cwd=root, stdin=subprocess.DEVNULL, stdout=log,
                        stderr=subprocess.STDOUT, env=env, pass_fds=(held,),
                        start_new_session=True, **user)
                finally:
                    os.close(log)
                write_record(lock, proc.pid)
            finally:
                os.close(held)  # the worker's copy holds the lock now
            self._spawned.append(proc)
            self._limit_memory(proc.pid, device)
        if wait:
            self.wait_for_worker(device)

    def kill_worker(self, pid: int) -> bool:
        """SIGKILL ``pid`` if it is one of the live workers (``live_workers``), never a pid
        that only a row names (job code may write any there). Whether it was."""
        with self._lock:
            for proc in self._spawned:
                if proc.pid == pid and proc.poll() is None:
                    proc.kill()
                    return True
            if pid not in self.live_workers():
                return False
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        return True

    def _worker_env(self, root: Path) -> tuple[dict, dict]:
        """The worker's environment and, where it runs as another user, Popen's user,
        group and groups; that user's files are set up first (``account.prepare``)."""
        from benchmarks.service.account import home_of, prepare, worker_environment
        from benchmarks.spec.folders import default_cache_dir
        from benchmarks.zoo.models import models_dir
        account = self.worker_account()
        if account is None:
            return worker_environment(None, PYTHONPATH=root), {}
        cache = default_cache_dir().resolve()
        prepare(account, self.path, cache, Path(models_dir()).resolve(), root)
        env = worker_environment(account, PYTHONPATH=root, HOME=home_of(self.path.resolve()),
                                 COMPRESSION_BENCH_CACHE=cache,
                                 COMPRESSION_BENCH_STORE=self.path.resolve())
        return env, {"user": account.uid, "group": account.gid, "extra_groups": []}

    # -- the supervisor ------------------------------------------------------------------

    def _limit_memory(self, pid: int, device: str) -> None:
        """The worker in a cgroup of its own under the memory limit, where this server may
        make one; else the supervisor's watchdog counts it (``memory_guard``)."""
        from benchmarks.service.memory_guard import enter, oom_kills, worker_cgroup
        limit = self.limits.worker_memory
        if limit is None:
            return
        slot = worker_cgroup(device, limit)
        if slot is not None and enter(slot, pid):
            self._cgroups[pid] = (slot, oom_kills(slot))

    def death_cause(self, pid: int) -> tuple[str, str] | None:
        """(status, reason) where the memory limit ended worker ``pid``, else None."""
        from benchmarks.service.memory_guard import oom_kills, over_limit_line
        if pid in self._causes:
            return self._causes.pop(pid)
        slot = self._cgroups.pop(pid, None)
        if slot is not None and oom_kills(slot[0]) > slot[1]:
            limit = self.limits.worker_memory or 0
            return "failed", over_limit_line(limit, limit)
        return None

    def supervise(self) -> None:
        """Start this queue's supervisor thread (once), and the memory watchdog with it."""
        from benchmarks.service.memory_guard import MemoryGuard
        with self._lock:
            if self._supervisor is None or not self._supervisor.is_alive():
                self._supervisor = Supervisor(self)
                self._supervisor.start()
            limit = self.limits.worker_memory
            if limit is not None and (self._guard is None or not self._guard.is_alive()):
                self._guard = MemoryGuard(self, limit)
                self._guard.start()

    def stop_supervising(self) -> None:
        if self._supervisor is not None:
            self._supervisor.stop()
            # The pass under way ends before this returns: a job it ended is said on stderr by
            # then too, not after the caller has moved on (a test read stderr in that gap).
            if self._supervisor is not threading.current_thread():
                self._supervisor.join(timeout=30)
            self._supervisor = None
        if self._guard is not None:
            self._guard.stop()
            self._guard = None

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
        """The live worker's environment card (torch version, devices...), or None: no
        worker, one still starting, or a row whose process is gone."""
        with self.store.connect() as db:
            row = db.execute("SELECT pid, card FROM workers WHERE device=?", (device,)
                             ).fetchone()
        if row is None or not process_alive(row["pid"], None):
            return None
        card = json.loads(row["card"])
        return None if card.get("starting") else card

    def forget_worker(self, pid: int) -> None:
        """A reaped worker's row goes with it (the supervisor calls this)."""
        with self.store.transaction() as db:
            db.execute("DELETE FROM workers WHERE pid=?", (pid,))

    def stop_worker(self, device: str = "cpu", timeout: float = 10.0) -> None:
        """Ask the device's worker to exit (used by tests and shutdown), including one that is
        still starting: the server recorded its pid with the lock before it runs. This queue
        stops supervising first, so it does not start another."""
        self.stop_supervising()
        pids = set()
        record = read_record(lock_path(self.path, device))
        if record is not None and process_alive(*record):
            pids.add(record[0])
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
