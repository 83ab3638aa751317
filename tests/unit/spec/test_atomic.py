"""Every file the engine writes goes through a temporary file renamed into place, removed on
any error; a full disk is one line naming the folder and its free space. Tested with an
injected ENOSPC (runs everywhere) and on a real, small tmpfs where one can be mounted."""

from __future__ import annotations

import errno
import os
import sqlite3
import stat

import pytest

from benchmarks.spec import atomic
from benchmarks.spec.atomic import DiskFull, is_disk_full, write_atomic, write_text
from helpers import small_tmpfs

SAFETENSORS_ENOSPC = ('Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
                      'message: "No space left on device" })')


def enospc(tmp: str) -> None:
    with open(tmp, "wb") as f:
        f.write(b"x" * 4096)  # a partial file, as a full disk leaves one
    raise OSError(errno.ENOSPC, "No space left on device")


def test_an_injected_enospc_is_one_line_and_leaves_nothing(tmp_path):
    target = tmp_path / "out.json"
    with pytest.raises(DiskFull) as caught:
        write_atomic(target, enospc)
    line = str(caught.value)
    assert line.startswith(f"no space left on device in {tmp_path} (") and "free)" in line
    assert "writing out.json" in line and "\n" not in line
    assert os.listdir(tmp_path) == []


def test_a_failed_write_keeps_the_old_file_and_any_error_removes_the_temporary(tmp_path):
    target = tmp_path / "card.json"
    target.write_text("old")
    with pytest.raises(DiskFull):
        write_atomic(target, enospc)

    def broken(tmp):
        open(tmp, "w").write("half")
        raise KeyError("not a disk problem")
    with pytest.raises(KeyError):
        write_atomic(target, broken)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["card.json"]
    write_text(target, "new")
    assert target.read_text() == "new" and os.listdir(tmp_path) == ["card.json"]


def test_the_mode_is_what_open_gives_unless_told(tmp_path):
    old = os.umask(0o022)
    try:
        assert stat.S_IMODE(write_text(tmp_path / "a", "x").stat().st_mode) == 0o644
        assert stat.S_IMODE(write_text(tmp_path / "b", "x", mode=0o600).stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_what_a_full_disk_looks_like_from_each_writer(monkeypatch, tmp_path):
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert is_disk_full(Exception(SAFETENSORS_ENOSPC))  # safetensors' SafetensorError
    assert is_disk_full(sqlite3.OperationalError("database or disk is full"))
    try:
        try:
            raise OSError(errno.ENOSPC, "full")
        except OSError as inner:
            raise RuntimeError("save failed") from inner
    except RuntimeError as outer:
        assert is_disk_full(outer)
    assert not is_disk_full(ValueError("bad input")) and not is_disk_full(OSError(2, "gone"))
    # torch's zip writer says only "unexpected pos": with almost no space left, it is full.
    monkeypatch.setattr(atomic, "free_bytes", lambda folder: 100)
    with pytest.raises(DiskFull, match=r"\(100 B free\)"):
        atomic.raise_if_disk_full(RuntimeError("unexpected pos 64 vs 0"), tmp_path)
    atomic.raise_if_disk_full(ValueError("a caller's bad value"), tmp_path)  # not converted


def test_a_real_full_tmpfs(tmp_path):
    with small_tmpfs(tmp_path / "mnt", "600k") as mnt:
        with pytest.raises(DiskFull, match=f"no space left on device in {mnt}"):
            write_text(mnt / "big.json", "x" * 2_000_000)
        assert os.listdir(mnt) == []
        write_text(mnt / "small.json", "{}")
        assert os.listdir(mnt) == ["small.json"]
