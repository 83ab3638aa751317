"""Issue 31.3: one malformed variant row is one warning line on History and on its run's
Results page, never a traceback, and the rest of each page stands."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from helpers import ROOT, scaled, store_history

APP = str(ROOT / "app.py")


@pytest.fixture
def broken_store(tmp_path, monkeypatch):
    import sqlite3
    path = tmp_path / "results.db"
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(path))
    ids = store_history(path, runs=2)
    db = sqlite3.connect(path)
    (text,) = db.execute("SELECT result FROM variants WHERE run_id=? AND position=1",
                         (ids[-1],)).fetchone()
    db.execute("UPDATE variants SET result=? WHERE run_id=? AND position=1",
               (text[:len(text) // 2], ids[-1]))
    db.commit()
    db.close()
    yield path, ids
    from benchmarks.service.queue import JobQueue
    JobQueue(path).stop_worker("cpu")


def unreadable(at: AppTest) -> list[str]:
    return [w.value for w in at.warning if "unreadable" in w.value]


def test_history_and_results_show_one_line_for_the_bad_row(broken_store):
    _, ids = broken_store
    at = AppTest.from_file(APP, default_timeout=scaled(60)).run()
    at.switch_page("pages/history.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert len(at.dataframe[0].value) == 2  # both runs listed
    lines = unreadable(at)
    assert lines and all("stored row 1" in line and ids[-1] in line for line in lines)
    assert len(set(lines)) == len(lines)  # each bad row said once per view, not per read
    at = AppTest.from_file(APP, default_timeout=scaled(60))
    at.query_params["run"] = ids[-1]
    at.run()
    at.switch_page("pages/results.py").run()
    assert not at.exception, [e.value for e in at.exception]
    (line,) = unreadable(at)
    assert "stored row 1" in line and "prune" in line
