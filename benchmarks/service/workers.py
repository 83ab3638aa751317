"""The queue's worker processes: one per device, started when a job needs it and found
alive by its lock (``lock_path``), supervised by a thread of the server (reaped within a
second of its death, with the cause), under the memory limit where one is set. ``JobQueue``
is made of this and the jobs' table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.executors.devices import fake_gpus, try_lock
from benchmarks.service.supervisor import Supervisor
from benchmarks.spec.folders import private_file

WORKER_START_TIMEOUT_S = 60.0


def lock_path(store_path: Path, device: str) -> Path:
    safe = device.replace(":", "-")
    return store_path.with_name(f"{store_path.name}.worker-{safe}.lock")


def log_path(store_path: Path, device: str) -> Path:
    return store_path.with_name(f"{store_path.name}.worker-{device.replace(':', '-')}.log")


class WorkerProcesses:
    """The worker processes of a ``JobQueue`` (its ``path``, ``store``, ``limits`` and
    locks are the queue's)."""

    # -- workers -------------------------------------------------------------------------

    def worker_alive(self, device: str = "cpu") -> bool:
        fd = try_lock(lock_path(self.path, device))
        if fd is None:
            return True
        os.close(fd)  # closing releases the lock
        return False

    def ensure_worker(self, device: str = "cpu", *, wait: bool = False) -> None:
        """Start the device's worker unless one is alive; ``cuda`` starts one per GPU
        (``cuda:0`` ...). Several sessions may call this at once: surplus workers find the
        lock taken and exit."""
        if device == "cuda":
            from benchmarks.executors.devices import gpu_devices
            for gpu in gpu_devices() or ["cuda:0"]:
                self.ensure_worker(gpu, wait=wait)
            return
        self.supervise()
        with self._lock:
            if self.worker_alive(device):
                return
            log = log_path(self.path, device)
            private_file(log)
            root = Path(__file__).resolve().parents[2]
            env, user = self._worker_env(root)
            if device.startswith("cuda:") and not fake_gpus():
                # The worker sees only its GPU (as cuda:0): a sweep there never touches
                # another, and its borrowed GPUs are set per process (executors.pool).
                env["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.service.worker", "--store",
                     str(self.path), "--device", device, "--parent", str(os.getpid())],
                    cwd=root, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    env=env, **user)
            self._spawned.append(proc)
            self._limit_memory(proc.pid, device)
        if wait:
            self.wait_for_worker(device)

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
        from benchmarks.store.database import process_alive
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
        still starting: its pid is in the lock file before it registers. This queue stops
        supervising first, so it does not start another."""
        self.stop_supervising()
        pids = set()
        try:
            text = lock_path(self.path, device).read_text().strip()
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
