"""The results store's disk full (issue "a server that trusts nothing the worker writes", item
10), on a real full tmpfs: SQLite answers even a read with "disk I/O error" there, which the
store now reports as the disk-full line with the free space; the Results page reads through
History's guard (one line, no traceback, the rest of the app still drawn), before and after
the server's queue was opened; the CLI exits 2 with the line. Nothing is lost: once space is
freed the run reads back whole. And where others reach the server, an error no page caught
shows its type only, never a traceback naming the server's files."""

from __future__ import annotations

import shutil

import pytest
from streamlit.testing.v1 import AppTest

from benchmarks.service.queue import JobQueue
from benchmarks.spec.atomic import DiskFull
from benchmarks.store.database import ResultsStore
from helpers import ROOT, run_cli, scaled, small_tmpfs, store_answer_run

FULL = "no space left on device in "


def page(path: str, run_id: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / path), default_timeout=scaled(60))
    at.session_state["cb_session"] = "me"
    at.session_state["cb_worker_started"] = True  # no worker: these pages only read
    at.query_params["run"] = run_id
    return at.run()


def fill(folder) -> None:
    with open(folder / "filler", "wb") as f:
        f.write(b"\0" * shutil.disk_usage(folder).free)


def assert_one_line(at: AppTest, folder) -> None:
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"Cannot read the results store: {FULL}{folder} (0 B free)")
    assert "\n" not in errors[0] and "disk I/O error" not in errors[0]


def test_a_full_disk_is_one_line_on_the_pages_and_the_cli_and_nothing_is_lost(
        tmp_path, monkeypatch):
    from dashboard.identity import server_secret
    with small_tmpfs(tmp_path / "mnt", "3m") as mnt:
        store = mnt / "results.db"
        monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(store))
        run_id = store_answer_run(store)
        server_secret(store)  # the server made its secret when it started
        before = page("pages/results.py", run_id)  # the server's queue opened, then...
        assert not before.exception and not before.error
        supervising = JobQueue.shared(store)  # the page's own: stopped when the test ends
        try:
            filled(mnt, store, run_id, tmp_path)
        finally:
            supervising.stop_supervising()


def filled(mnt, store, run_id, tmp_path) -> None:
    """The disk filled: every read is one line; freed, the run reads back whole."""
    fill(mnt)
    with pytest.raises(DiskFull, match=f"^{FULL}{mnt} \\(0 B free\\)"):
        _read(store)  # SQLite's "disk I/O error", said as what it is
    for path in ("pages/results.py", "pages/history.py"):
        assert_one_line(page(path, run_id), mnt)
    from dashboard import state
    state._queue.clear()  # a server started on the full disk: no queue could open
    at = page("pages/results.py", run_id)
    assert_one_line(at, mnt)
    said = [str(e.value) for e in [*at.sidebar.caption, *at.sidebar.warning]]
    assert any("no space left on device" in text for text in said), said  # the sidebar too
    for args in (["history"], ["report", run_id, "--html", str(tmp_path / "r.html")]):
        done = run_cli(*args, "--store", str(store), timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr == f"error: {FULL}{mnt} (0 B free); free some space there or " \
                              f"point the path elsewhere\n"
    (mnt / "filler").unlink()
    run = ResultsStore(store).run(run_id)
    assert run["status"] == "complete" and len(run["variants"]) == 4


def _read(store):
    """A read of the store as a page makes it (no write of its own)."""
    s = ResultsStore.__new__(ResultsStore)
    s.path, s.secret, s.open_as = store, None, None
    return s.runs(limit=5)


def test_a_server_others_reach_shows_an_uncaught_errors_type_only(tmp_path, monkeypatch):
    from streamlit import config
    before = config.get_option("client.showErrorDetails")
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(tmp_path / "results.db"))
    try:
        AppTest.from_file(str(ROOT / "pages/history.py"), default_timeout=scaled(60)).run()
        assert config.get_option("client.showErrorDetails") == before  # this machine only
        monkeypatch.setenv("COMPRESSION_BENCH_TRUSTED_PROXIES", "loopback")  # behind a proxy
        AppTest.from_file(str(ROOT / "pages/history.py"), default_timeout=scaled(60)).run()
        assert config.get_option("client.showErrorDetails") == "type"
    finally:
        config.set_option("client.showErrorDetails", before)
