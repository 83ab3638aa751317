"""The cores a timing runs on, claimed across the product's processes (torch-free).

Several processes of the product time models at once on one machine: the dashboard's worker
per device, CLI runs, Ray nodes on one host, ``--isa`` profile processes. Each pinning to
the last core stacked them there (timed 1.5-1.6x slower than on the other core of two). A
core is claimed by an exclusive ``flock`` on its own lock file in a folder of the machine's
temp dir, tried from the last core down: the kernel drops a dead process's locks, so a
killed run leaks no claim. Where every eligible core is held, one is taken anyway and the
claim says it was shared. A claim nested in one thread (a timing inside a timing) reuses the
cores its thread already holds rather than waiting on its own locks.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: cores are pinned unclaimed
    fcntl = None

# A private folder instead (the test suite's, so its parallel files never share a core).
LOCKS_ENV = "COMPRESSION_BENCH_CORE_LOCKS"


def lock_folder() -> Path:
    """Where the cores' lock files live: one folder per machine, every user's processes."""
    given = os.environ.get(LOCKS_ENV)
    return Path(given) if given else Path(tempfile.gettempdir()) / "compression-bench-cores"


@dataclass(frozen=True)
class CoreClaim:
    """The cores a timing is pinned to, and those of them another timing process held."""
    cores: tuple[int, ...]
    shared: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {"cores": list(self.cores), "shared": list(self.shared)}

    def note(self) -> str | None:
        return shared_note(self.to_dict())


def shared_note(record: dict | None) -> str | None:
    """The line a run says of a claim record (``CoreClaim.to_dict``) that shared a core;
    None when it shared none."""
    shared = (record or {}).get("shared") or []
    if not shared:
        return None
    cores = ", ".join(map(str, shared))
    one = len(shared) == 1
    return (f"timed on core{'' if one else 's'} {cores}, shared: another timing process of "
            f"this machine held {'it' if one else 'them'} (no free core was left), so its "
            f"latencies may read high")


def shared_notes(records: Iterable[dict | None]) -> list[str]:
    """``shared_note`` of each record, each line once (a run's rows share its claim)."""
    return list(dict.fromkeys(note for note in map(shared_note, records) if note))


@dataclass
class _Hold:
    fd: int | None  # None: no lock file could be opened (pinned, but unclaimed)
    threads: Counter = field(default_factory=Counter)  # thread id -> nesting depth


_guard = threading.Lock()
_held: dict[int, _Hold] = {}   # the cores this process holds, by core
_active = threading.local()    # this thread's claims, innermost last


def _lock(core: int) -> tuple[bool, int | None]:
    """(whether the core is ours now, the descriptor holding its lock)."""
    if fcntl is None:
        return True, None
    folder = lock_folder()
    try:
        try:
            folder.mkdir(mode=0o1777, parents=True)
            os.chmod(folder, 0o1777)  # as /tmp: a worker run as another user claims too
        except FileExistsError:
            if folder.is_symlink():  # planted in the shared temp dir: not followed
                return True, None
        # Read-only is enough for flock, and opens a file another user created.
        fd = os.open(folder / f"core-{core}.lock",
                     os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError:  # a read-only or foreign folder: pin as before, unclaimed
        return True, None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held by another process (or another thread of this one)
        os.close(fd)
        return False, None
    return True, fd


@contextmanager
def claimed_cores(count: int, eligible: Iterable[int]) -> Iterator[CoreClaim]:
    """``count`` of the ``eligible`` cores (all of them where there are fewer), claimed until
    the block ends, exceptions included: first those this thread already holds, then free
    ones from the last down, then, where none is free, held ones from the last down (shared)."""
    me = threading.get_ident()
    order = sorted(set(eligible), reverse=True)
    count = min(max(count, 1), len(order))
    mine: list[int] = []
    with _guard:
        taken = [c for c in order if c in _held and _held[c].threads[me] > 0][:count]
        mine.extend(taken)
        for core in order:
            if len(taken) >= count:
                break
            if core in taken or core in _held:  # _held: another thread of this process
                continue
            ours, fd = _lock(core)
            if ours:
                _held[core] = _Hold(fd)
                taken.append(core)
                mine.append(core)
        shared = [c for c in order if c not in taken][:count - len(taken)]
        for core in mine:
            _held[core].threads[me] += 1
    claim = CoreClaim(tuple(sorted(taken + shared)), tuple(sorted(shared)))
    stack = _active.__dict__.setdefault("claims", [])
    stack.append(claim)
    try:
        yield claim
    finally:
        stack.pop()
        with _guard:
            for core in mine:
                hold = _held[core]
                hold.threads[me] -= 1
                if hold.threads[me] <= 0:
                    del hold.threads[me]
                if not hold.threads:
                    del _held[core]
                    if hold.fd is not None:
                        fcntl.flock(hold.fd, fcntl.LOCK_UN)  # a forked child's copy too
                        os.close(hold.fd)


def current_claim() -> dict | None:
    """This thread's innermost claim (``CoreClaim.to_dict``), None outside one: what a
    timing record says it ran on."""
    stack = getattr(_active, "claims", None)
    return stack[-1].to_dict() if stack else None
