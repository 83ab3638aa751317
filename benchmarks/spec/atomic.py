"""Every file the engine writes: whole or not at all, and a full disk said in one line.

``write_atomic(path, write)`` writes through a temporary file in the same folder (the same
file system, so the rename into place is atomic: a reader sees the old file or the new one,
never half of one), and removes the temporary file on any error, so a full disk leaves
nothing behind (a partial ``tmp*.npz.tmp`` once filled what was left of one).

``DiskFull`` is what a full disk becomes, one line naming the folder and what is free there
("no space left on device in /cache (12 KiB free) writing 1a2b.safetensors"), whatever
raised it: ``OSError(ENOSPC)``, safetensors' ``SafetensorError ... No space left on device``,
SQLite's "database or disk is full", or a writer's own error while the folder has almost no
space left (torch's zip writer says only "unexpected pos"). The CLI exits 2 with the line and
a run stores it as its error. A RuntimeError: the environment's fault, not the input's.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
FULL_TEXTS = ("no space left on device", "database or disk is full", "disk quota exceeded",
              "storagefull", "os error 28")
# An error from a writer while its folder has less than this free is taken for a full disk.
LOW_SPACE_BYTES = 1 << 20


class DiskFull(RuntimeError):
    """A write that found no space; its message is the one line to show."""


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says the disk is full."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFull):
            return True
        if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
            return True
        if any(text in str(exc).lower() for text in FULL_TEXTS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def free_bytes(folder: str | os.PathLike) -> int | None:
    """Bytes free in the file system holding ``folder`` (its nearest existing parent)."""
    path = Path(folder)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def size_text(n: int | None) -> str:
    if n is None:
        return "unknown space"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def disk_full(folder: str | os.PathLike, what: str | None = None) -> DiskFull:
    """The one line of a full disk at ``folder``."""
    writing = f" writing {what}" if what else ""
    return DiskFull(f"no space left on device in {folder} ({size_text(free_bytes(folder))} "
                    f"free){writing}; free some space there or point the path elsewhere")


def _writer_error(exc: BaseException) -> bool:
    """An error a writer raises on a failed write (not a caller's bad value)."""
    return isinstance(exc, (OSError, RuntimeError, sqlite3.Error)) or \
        type(exc).__module__.split(".")[0] in ("safetensors", "safetensors_rust")


def raise_if_disk_full(exc: BaseException, folder: str | os.PathLike,
                       what: str | None = None) -> None:
    """Raise ``DiskFull`` for ``folder`` when ``exc`` says the disk is full, or is a writer's
    error while ``folder`` has less than ``LOW_SPACE_BYTES`` free; else return."""
    if isinstance(exc, DiskFull):
        raise exc
    if is_disk_full(exc):
        raise disk_full(folder, what) from None
    if _writer_error(exc):
        free = free_bytes(folder)
        if free is not None and free < LOW_SPACE_BYTES:
            raise disk_full(folder, what) from None


@contextmanager
def disk_full_as_one_line(folder: str | os.PathLike, what: str | None = None):
    """Any error of the block that means a full disk at ``folder`` becomes ``DiskFull``."""
    try:
        yield
    except Exception as exc:
        raise_if_disk_full(exc, folder, what)
        raise


def _default_mode() -> int:
    """The mode ``open()`` would give a new file: 0666 less the umask (read without changing
    it, where /proc says it; otherwise 0644)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644


def write_atomic(path: str | os.PathLike, write: Callable[[str], None],
                 mode: int | None = None) -> Path:
    """Write ``path`` through ``write(temporary path)``: a temporary file in the same folder,
    given ``mode`` (default: what ``open()`` gives) and renamed into place; on any error it
    is removed, and a full disk raises ``DiskFull``."""
    path = Path(path)
    folder = path.parent
    with disk_full_as_one_line(folder, path.name):
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
        try:
            os.close(fd)
            write(tmp)
            os.chmod(tmp, _default_mode() if mode is None else mode)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
    return path


def write_text(path: str | os.PathLike, text: str, mode: int | None = None,
               encoding: str = "utf-8") -> Path:
    return write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding=encoding), mode)


def write_bytes(path: str | os.PathLike, data: bytes, mode: int | None = None) -> Path:
    return write_atomic(path, lambda tmp: Path(tmp).write_bytes(data), mode)
