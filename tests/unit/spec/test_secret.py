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


def test_a_secret_an_older_version_kept_beside_the_store_moves_into_the_servers_folder(
        tmp_path):
    from benchmarks.spec.folders import secret_path
    store = tmp_path / "results.db"
    legacy = tmp_path / "results.db.secret"
    legacy.write_bytes(b"k" * 32)
    legacy.chmod(0o600)
    assert read_or_make_secret(secret_path(store)) == b"k" * 32  # its signatures still verify
    assert not legacy.exists()
    assert stat.S_IMODE(secret_path(store).parent.stat().st_mode) == 0o700


def test_a_servers_folder_someone_else_planted_is_refused_in_one_line(tmp_path):
    from benchmarks.spec.folders import secret_path
    store = tmp_path / "results.db"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    secret_path(store).parent.symlink_to(elsewhere)  # made before the server's
    with pytest.raises(RuntimeError, match="results.db.server") as caught:
        read_or_make_secret(secret_path(store))
    assert "\n" not in str(caught.value)
    assert list(elsewhere.iterdir()) == []
