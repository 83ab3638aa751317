"""Issue 31.3 and 31.9: one malformed variant row (truncated JSON) is left out with one line
naming the store, the run and the row; the run's other rows, the other runs and the commands
still work."""

from __future__ import annotations

import json
import sqlite3

import pytest

from helpers import store_history

from benchmarks.cli.main import main
from benchmarks.store.database import ResultsStore


def truncated(path, run_id: str, position: int = 1) -> None:
    db = sqlite3.connect(path)
    (text,) = db.execute("SELECT result FROM variants WHERE run_id=? AND position=?",
                         (run_id, position)).fetchone()
    db.execute("UPDATE variants SET result=? WHERE run_id=? AND position=?",
               (text[:len(text) // 2], run_id, position))
    db.commit()
    db.close()


def test_a_truncated_row_is_skipped_with_one_line_naming_run_and_row(tmp_path):
    path = tmp_path / "s.db"
    ids = store_history(path, runs=2)
    truncated(path, ids[-1])
    store = ResultsStore(path)
    run = store.run(ids[-1])
    assert [v["name"] for v in run["variants"]] == ["baseline"]
    (line,) = run["unreadable"]
    assert line.startswith(f"run {ids[-1]}: stored row 1 (prune-l1-0.5) unreadable, skipped")
    assert "\n" not in line
    assert store.run(ids[0])["unreadable"] == []
    runs = store.runs()
    assert [len(r["variants"]) for r in runs] == [1, 2]
    assert [v.name for v in store.variant_results(ids[-1])] == ["baseline"]
    # A row that is JSON but not a variant's result is left out the same way.
    db = sqlite3.connect(path)
    db.execute("UPDATE variants SET result=? WHERE run_id=? AND position=0",
               (json.dumps([1, 2]), ids[0]))
    db.commit()
    db.close()
    assert ResultsStore(path).run(ids[0])["unreadable"][0].startswith(
        f"run {ids[0]}: stored row 0 (baseline) unreadable")


def test_history_prints_the_runs_and_one_warning_line_per_bad_row(tmp_path, capsys):
    path = tmp_path / "s.db"
    ids = store_history(path, runs=2)
    truncated(path, ids[-1])
    assert main(["history", "--store", str(path)]) == 0
    out, err = capsys.readouterr()
    assert ids[0] in out and ids[-1] in out
    (warning,) = [line for line in err.splitlines() if "unreadable" in line]
    assert warning.startswith(f"warning: store {path}: run {ids[-1]}: stored row 1 "
                              f"(prune-l1-0.5) unreadable, skipped")
    assert main(["history", "--json", "--store", str(path)]) == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)) == 2  # stdout stays JSON; the warning goes to stderr
    assert err.count("unreadable") == 1


@pytest.mark.slow  # two small recommend searches (about 40 s on 2 loaded cores)
def test_recommend_reads_past_a_bad_row_of_an_earlier_run_and_names_it(tmp_path, capsys):
    """Issue 31.9: it exited 2 with only "Expecting ',' delimiter"."""
    path = tmp_path / "s.db"
    argv = ["recommend", "--model", "mlp", "--trials", "2", "--epochs", "1", "--within",
            "3pt", "--quiet", "--store", str(path)]
    assert main(argv) == 0
    (earlier,) = [r["run_id"] for r in ResultsStore(path).runs(with_variants=False)]
    truncated(path, earlier)
    capsys.readouterr()
    assert main(argv) == 0
    (warning,) = [ln for ln in capsys.readouterr().err.splitlines() if "unreadable" in ln]
    assert warning.startswith(f"warning: store {path}: run {earlier}: stored row 1 ")
