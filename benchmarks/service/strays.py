"""What a job leaves behind: processes of job code that outlive their job or their worker.

Job code runs in the worker, and may fork: a child that calls ``setsid`` leaves the worker's
session and, once its parent is gone, its tree too. Such a stray keeps what it inherited,
the worker's lock among it (a lock held is a worker alive, so no new worker would start),
and runs as the worker's user. The supervisor ends them (``WorkerProcesses.end_strays``):

- every process holding a dead worker's lock;
- every process left in a dead worker's session (the worker starts in a session of its own);
- where the worker runs as a user of its own, every process of that user that descends from
  no live worker: nothing legitimate runs as that user outside a worker's tree.

Everything here reads /proc (Linux).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
GONE_WAIT_S = 2.0  # how long ``end`` waits for the processes it killed to be gone


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    session: int
    uid: int
    state: str


def processes() -> dict[int, Proc]:
    """Every process this one may see, by pid."""
    found = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        # /proc/PID/status, not the folder's owner: a process that makes itself
        # non-dumpable shows its folder as root's.
        try:
            fields = dict(line.split(":", 1) for line in
                          (entry / "status").read_text().splitlines() if ":" in line)
            found[int(entry.name)] = Proc(int(entry.name), int(fields["PPid"]),
                                          int(fields["NSsid"].split()[-1]),
                                          int(fields["Uid"].split()[0]),
                                          fields["State"].split()[0])
        except (OSError, KeyError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


def holding(path: Path, table: dict[int, Proc]) -> set[int]:
    """The processes with a descriptor open on file ``path`` (the same inode)."""
    try:
        target = os.stat(path)
    except OSError:
        return set()
    key = (target.st_dev, target.st_ino)
    found = set()
    for pid in table:
        try:
            fds = os.listdir(PROC / str(pid) / "fd")
        except OSError:
            continue
        for fd in fds:
            try:
                info = os.stat(PROC / str(pid) / "fd" / fd)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) == key:
                found.add(pid)
                break
    return found


def in_session(session: int, table: dict[int, Proc]) -> set[int]:
    """The processes of session ``session`` other than its leader."""
    return {p.pid for p in table.values() if p.session == session and p.pid != session}


def outside_trees(uid: int, live: set[int], table: dict[int, Proc]) -> set[int]:
    """The processes of user ``uid`` that are neither one of ``live`` nor below one (nor a
    worker a server is starting: ``_rooted``)."""
    return {p.pid for p in table.values() if p.uid == uid and not _rooted(p, uid, live, table)}


def _rooted(proc: Proc, uid: int, live: set[int], table: dict[int, Proc]) -> bool:
    """Whether ``proc`` is in a worker's tree: its chain of ``uid``'s processes reaches one of
    ``live``, or ends at a worker whose parent is another user's process (a server starting
    it) other than the init process, which adopts orphans."""
    here, seen = proc, set()
    while here.pid not in seen:
        if here.pid in live:
            return True
        seen.add(here.pid)
        parent = table.get(here.ppid)
        if parent is None or here.ppid <= 1:
            return False
        if parent.uid != uid:
            return _is_worker(here.pid)
        here = parent
    return False


def _is_worker(pid: int) -> bool:
    try:
        return b"benchmarks.service.worker" in (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False


def end(pids: set[int]) -> set[int]:
    """SIGKILL ``pids`` (never this process), and wait up to GONE_WAIT_S for them to be gone
    or zombies (what they held is released then). Returns those signalled."""
    pids = set(pids) - {os.getpid()}
    killed = set()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        except (ProcessLookupError, PermissionError):
            continue
    deadline = time.monotonic() + GONE_WAIT_S
    while killed and time.monotonic() < deadline:
        table = processes()
        if not any(pid in table and table[pid].state not in ("Z", "X") for pid in killed):
            break
        time.sleep(0.01)
    return killed
