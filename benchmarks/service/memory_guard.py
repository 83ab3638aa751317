"""A memory limit that counts everything the worker holds, shared memory included.

``RLIMIT_DATA`` (``benchmarks.measure.machine``) stops ordinary allocations, but a shared
mapping is not data: a model factory that fills a 5 GiB ``MAP_SHARED | MAP_ANONYMOUS`` region
passed it, and each build re-ran the factory until the machine ran short. Two ways to count
it, the first that is available:

- **cgroup v2**: the worker runs in a cgroup of its own (``compression-bench-worker-DEVICE``
  beside this server's) with ``memory.max`` = the limit, swap 0, ``memory.oom.group``: the
  kernel charges every page (shared memory, page cache, its children) and kills the worker at
  the limit; the supervisor reads ``memory.events`` to tell why it died. Used where the
  server's cgroup already delegates the memory controller to its children, or where the
  server is alone in its cgroup (it then moves itself into a leaf, as the cgroup v2 rule of no
  processes in inner cgroups requires). ``COMPRESSION_BENCH_CGROUP=off`` never tries.
- **a watchdog** (everywhere else, such as the cgroup v1 machine these tests run on): a thread
  of the supervisor reads, every ``WATCH_S``, each worker's and its children's resident
  anonymous and shared memory (``/proc/PID/status``: RssAnon + RssShmem, file pages left out
  as the kernel can drop them). One process past the limit is killed at once; a process tree
  past it is first counted exactly, shared pages split among the processes that map them
  (``/proc/PID/smaps_rollup``: Pss_Anon + Pss_Shmem), so memory two of its processes share is
  not counted twice. Killed, the worker's job fails with "exceeded its memory limit of N GiB".

What the watchdog cannot see: a process that left the worker's tree (double fork, then
reparented). A cgroup counts it. Files in /dev/shm that no process maps are counted apart:
those of the worker's user written since the worker started (``shm_bytes``) add to what it
holds; and a job's own are removed when it ends (``new_shm_files``: the worker snapshots
/dev/shm before each job; the supervisor, for a worker that died mid-job, removes its user's
files written since that job started, where the worker runs as a user of its own).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from benchmarks.spec.limits import gib

CGROUP_FS = Path("/sys/fs/cgroup")
CGROUP_ENV = "COMPRESSION_BENCH_CGROUP"
WATCH_S = 0.1
SLOT = "compression-bench-worker-{device}"
LEAF = "compression-bench-server"


def over_limit_line(limit: int, held: int) -> str:
    return (f"exceeded its memory limit of {gib(limit)} (COMPRESSION_BENCH_WORKER_MEMORY; it "
            f"held {gib(held)}, shared memory included): its worker was stopped")


# -- cgroup v2 ----------------------------------------------------------------------------------

def own_cgroup(fs: Path = CGROUP_FS, proc_self: Path = Path("/proc/self/cgroup")) -> Path | None:
    """This process's cgroup v2 folder, where the memory controller is available there."""
    try:
        if "memory" not in (fs / "cgroup.controllers").read_text().split():
            return None
        line = next(ln for ln in proc_self.read_text().splitlines() if ln.startswith("0::"))
    except (OSError, StopIteration):
        return None
    folder = fs / line[3:].strip().lstrip("/")
    try:
        return folder if "memory" in (folder / "cgroup.controllers").read_text().split() \
            else None
    except OSError:
        return None


def worker_cgroup(device: str, limit: int, fs: Path = CGROUP_FS,
                  proc_self: Path = Path("/proc/self/cgroup")) -> Path | None:
    """A cgroup for the device's worker with ``memory.max`` = ``limit``, or None where this
    server may not make one (then the watchdog counts)."""
    if os.environ.get(CGROUP_ENV, "").strip().lower() in ("0", "off", "no", "false"):
        return None
    base = own_cgroup(fs, proc_self)
    if base is None:
        return None
    try:
        control = base / "cgroup.subtree_control"
        if "memory" not in control.read_text().split():
            procs = (base / "cgroup.procs").read_text().split()
            if procs != [str(os.getpid())]:
                return None  # other processes share this cgroup: not ours to rearrange
            leaf = base / LEAF
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
            control.write_text("+memory")
        slot = base / SLOT.format(device=device.replace(":", "-"))
        slot.mkdir(exist_ok=True)
        (slot / "memory.max").write_text(str(int(limit)))
        for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
            if (slot / name).exists():
                (slot / name).write_text(value)
        return slot
    except OSError:
        return None


def enter(slot: Path, pid: int) -> bool:
    try:
        (slot / "cgroup.procs").write_text(str(pid))
        return True
    except OSError:
        return False


def oom_kills(slot: Path) -> int:
    """How many processes the kernel killed in ``slot`` at its limit."""
    try:
        for line in (slot / "memory.events").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


# -- /dev/shm ---------------------------------------------------------------------------------

SHM = Path("/dev/shm")


def shm_files(uid: int, root: Path = SHM, since: float | None = None) -> dict[str, int]:
    """Regular files directly in ``root`` owned by ``uid`` (modified at or after ``since``,
    where given): name -> bytes they take. Named semaphores (``sem.*``) are left out: they
    may be shared with processes that outlive a job."""
    found = {}
    try:
        entries = list(os.scandir(root))
    except OSError:
        return found
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # removed meanwhile
        if entry.name.startswith("sem.") or not entry.is_file(follow_symlinks=False):
            continue
        if info.st_uid == uid and (since is None or info.st_mtime >= since):
            found[entry.name] = info.st_blocks * 512
    return found


def shm_bytes(uid: int, since: float, root: Path = SHM) -> int:
    return sum(shm_files(uid, root, since).values())


def remove_shm_files(names, root: Path = SHM) -> list[str]:
    """Unlink ``names`` from ``root``; returns those removed."""
    removed = []
    for name in names:
        try:
            (root / name).unlink()
            removed.append(name)
        except OSError:
            continue
    return removed


def new_shm_files(before: dict[str, int], uid: int, root: Path = SHM) -> list[str]:
    """The files of ``uid`` in ``root`` that were not there in the ``before`` snapshot."""
    return sorted(set(shm_files(uid, root)) - set(before))


# -- the watchdog -------------------------------------------------------------------------------

def _status_kb(pid: int, fields=("RssAnon", "RssShmem")) -> int:
    total = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.split(":", 1)[0] in fields:
                total += int(line.split()[1])
    return total


def _pss_kb(pid: int) -> int:
    total = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.split(":", 1)[0] in ("Pss_Anon", "Pss_Shmem"):
                total += int(line.split()[1])
    return total


def _children(pid: int) -> list[int] | None:
    """``pid``'s children from /proc/PID/task/*/children (cheap), None where the kernel
    lacks that file."""
    found, any_file = [], False
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
            any_file = True
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            any_file = True
    return found if any_file or not Path(f"/proc/{pid}").exists() else None


def tree(pid: int) -> list[int]:
    """``pid`` and every live process below it."""
    out, todo = [pid], [pid]
    while todo:
        kids = _children(todo.pop())
        if kids is None:
            return _tree_by_scan(pid)
        out += kids
        todo += kids
    return out


def _tree_by_scan(pid: int) -> list[int]:
    """The same from every process's parent (slow: every /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [pid], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def held_bytes(pid: int, limit: int) -> int:
    """What the worker ``pid`` and its children hold, as the watchdog counts it (see the
    module's docstring); exact (proportional) only when the cheap count passes ``limit``."""
    processes = tree(pid)
    each = []
    for p in processes:
        try:
            each.append(_status_kb(p) * 1024)
        except (OSError, ValueError):
            continue
    biggest, total = max(each, default=0), sum(each)
    if biggest > limit:
        return biggest  # one process alone: nothing can be counted twice
    if total <= limit:
        return total
    exact = 0
    for p in processes:
        try:
            exact += _pss_kb(p) * 1024
        except (OSError, ValueError):
            continue
    return exact


def kill_tree(pid: int) -> None:
    for p in reversed(tree(pid)):  # children first: none is left to the init process
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


class MemoryGuard(threading.Thread):
    """The watchdog thread: every WATCH_S, each of ``queue``'s live workers that runs
    without a cgroup is counted, and killed past ``limit`` with the cause recorded in
    ``queue._causes`` for the supervisor to end its job with."""

    def __init__(self, queue, limit: int, interval: float = WATCH_S):
        super().__init__(name="bench-memory-guard", daemon=True)
        self.queue, self.limit, self.interval = queue, limit, interval
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    def _shm_owner(self, pid: int) -> tuple[int, float]:
        """(uid, start time) of worker ``pid``: the /dev/shm files it may have written."""
        if pid not in self._shm_since:  # first seen within an interval of its start
            self._shm_since[pid] = (os.stat(f"/proc/{pid}").st_uid,
                                  time.time() - 2 * self.interval)
        return self._shm_since[pid]

    def run(self) -> None:
        self._shm_since: dict[int, tuple[int, float]] = {}
        while not self._stopped.wait(self.interval):
            for proc in list(self.queue._spawned):
                if proc.poll() is not None or proc.pid in self.queue._cgroups:
                    continue
                try:
                    held = held_bytes(proc.pid, self.limit)
                    held += shm_bytes(*self._shm_owner(proc.pid))
                except Exception:  # a process gone meanwhile
                    continue
                if held > self.limit:
                    self.queue._causes[proc.pid] = ("failed", over_limit_line(self.limit, held))
                    kill_tree(proc.pid)
