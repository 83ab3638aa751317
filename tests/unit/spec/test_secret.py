"""The server's session-signing secret is made once, whole, however many processes start at
once: created empty and then filled, a second process could read 0 bytes and refuse it as too
short (seen when four store writers and a Streamlit page started together)."""

from __future__ import annotations

import multiprocessing as mp
import stat

import pytest

from benchmarks.spec.folders import read_or_make_secret


def _read(path, out):
    out.put(read_or_make_secret(path))


def test_processes_starting_at_once_share_one_whole_secret(tmp_path):
    ctx = mp.get_context("fork")
    for trial in range(5):
        path = tmp_path / f"t{trial}" / "store.db.secret"
        out = ctx.Queue()
        procs = [ctx.Process(target=_read, args=(path, out)) for _ in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * 8
        secrets = {out.get(timeout=10) for _ in procs}
        assert len(secrets) == 1 and len(secrets.pop()) == 32
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert [f.name for f in path.parent.iterdir()] == [path.name]  # no draft left


def test_a_short_secret_is_refused_in_one_line(tmp_path):
    path = tmp_path / "store.db.secret"
    path.write_bytes(b"short")
    path.chmod(0o600)
    with pytest.raises(RuntimeError, match="not a usable secret"):
        read_or_make_secret(path)
    assert sorted(f.name for f in tmp_path.iterdir()) == [path.name]
