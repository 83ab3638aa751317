"""Reading and removing what another user may have swapped: the server's way into the folders
its worker writes.

On a team server the worker runs job code as a user of its own, and that user owns the store's
files, the exports and the jobs' folders (``benchmarks.service.account``). Job code may replace
any of them with a symbolic link (to the session secret, to a file of root's), or a folder on
the way with one, at any moment. So the server never opens a path there by name: each folder
below a folder it trusts (the store's own, the operator's) is opened with
``O_DIRECTORY | O_NOFOLLOW`` from the one above it and checked on its descriptor; a file is
opened the same way and checked (a regular file with one name, of an expected owner); a folder
is removed by name from its parent's descriptor after an ``lstat`` (``shutil.rmtree(name,
dir_fd=...)``, which follows nothing below). A refusal is ``Refused``: one line naming the
path and why.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
from collections.abc import Collection
from contextlib import contextmanager
from pathlib import Path

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted under a file's name would otherwise hold the opening thread.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Refused(PermissionError):
    """A path another user could have planted, refused (one line: the path and why)."""


def _parts(path: Path, top: Path) -> tuple[str, ...]:
    try:
        parts = Path(path).relative_to(top).parts
    except ValueError:
        raise Refused(f"{path} is not inside {top}") from None
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise Refused(f"{path} is not a plain name inside {top}")
    return parts


def _owned(fd: int, owners: Collection[int] | None, shown: Path, kind: str
           ) -> os.stat_result:
    info = os.fstat(fd)
    if owners is not None and info.st_uid not in owners:
        raise Refused(f"{shown} is owned by uid {info.st_uid}, not by the worker that writes "
                      f"there (uid {', '.join(map(str, sorted(owners)))}): refused")
    if kind == "file" and not stat.S_ISREG(info.st_mode):
        raise Refused(f"{shown} is not a regular file: refused")
    if kind == "file" and info.st_nlink != 1:
        raise Refused(f"{shown} has {info.st_nlink} names (a hard link): refused")
    return info


def open_folder(path: Path, top: Path, owners: Collection[int] | None) -> int:
    """A descriptor of folder ``path`` reached from ``top`` (trusted: opened by name) one
    folder at a time, none of them a link, each owned by one of ``owners`` (None: anyone);
    ``Refused`` otherwise, FileNotFoundError where one is missing. The caller closes it."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    here = Path(top)
    try:
        for part in ([] if Path(path) == Path(top) else _parts(path, top)):
            here = here / part
            try:
                below = os.open(part, FOLDER_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError:  # ELOOP (a link) or ENOTDIR (a file)
                raise Refused(f"{here} is not a folder (a link or a file): refused") from None
            os.close(fd)
            fd = below
            _owned(fd, owners, here, "folder")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: Path, top: Path, owners: Collection[int]):
    """File ``path`` below ``top``, opened for reading (binary) without following a link on
    the way, checked on its descriptor: a regular file with one name, owned by one of
    ``owners``. ``Refused`` otherwise; FileNotFoundError where it is missing."""
    path = Path(path)
    _parts(path, top)
    folder = open_folder(path.parent, top, owners)
    try:
        try:
            fd = os.open(path.name, FILE_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            raise
        except OSError:  # ELOOP
            raise Refused(f"{path} is a link, not a file: refused") from None
    finally:
        os.close(folder)
    try:
        _owned(fd, owners, path, "file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_bytes(path: Path, top: Path, owners: Collection[int]) -> bytes:
    with open_file(path, top, owners) as f:
        return f.read()


def touch_folder(path: Path, top: Path, owners: Collection[int]) -> None:
    """Set folder ``path``'s times to now through its descriptor (a use, for eviction)."""
    fd = open_folder(path, top, owners)
    try:
        os.utime(fd)
    finally:
        os.close(fd)


def remove_folder(path: Path, top: Path, owners: Collection[int] | None = None) -> bool:
    """Remove folder ``path`` below ``top`` and all it holds, reached without following a
    link: its parent by descriptor, then ``path`` itself only if it is a folder (not a link)
    owned by one of ``owners`` (by default this process's user or the parent's owner: what
    that owner could remove itself). False where it was missing or refused; nothing outside
    it is touched."""
    path = Path(path)
    try:
        _parts(path, top)
        probe = open_folder(path.parent, top, None)
    except (OSError, Refused):
        return False
    try:
        if owners is None:
            owners = {os.geteuid(), os.fstat(probe).st_uid}
        try:
            info = os.lstat(path.name, dir_fd=probe)
        except OSError:
            return False
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in owners:
            return False
        shutil.rmtree(path.name, dir_fd=probe, ignore_errors=True)
        return True
    finally:
        os.close(probe)


def tree_bytes(path: Path, top: Path, owners: Collection[int]) -> int:
    """Bytes the regular files below folder ``path`` take, walked without following a link."""
    try:
        fd = open_folder(path, top, owners)
    except (OSError, Refused):
        return 0
    total = 0
    try:
        for _, _, files, at in os.fwalk(".", dir_fd=fd):
            for name in files:
                try:
                    info = os.stat(name, dir_fd=at, follow_symlinks=False)
                except OSError:
                    continue  # removed meanwhile
                if stat.S_ISREG(info.st_mode):
                    total += info.st_size
    finally:
        os.close(fd)
    return total


@contextmanager
def files_as(uid: int | None, gid: int | None):
    """Within the block, this thread opens files with user ``uid``'s and group ``gid``'s
    rights (Linux's per-thread file-system ids, ``setfsuid``): a link another user planted
    leads only where that user could go itself (or this process's supplementary groups:
    root's is group 0 alone). A no-op for None or where this process is not root."""
    if uid is None or os.geteuid() != 0:
        yield
        return
    libc = _libc()
    # The group first, while the user still has the right to set it; root's back first
    # after (setting the user to 0 again restores its file-system capabilities).
    before_gid = libc.setfsgid(gid)
    before_uid = libc.setfsuid(uid)
    try:
        yield
    finally:
        libc.setfsuid(before_uid)
        libc.setfsgid(before_gid)


@functools.lru_cache(maxsize=1)
def _libc():
    import ctypes
    return ctypes.CDLL(None, use_errno=True)
