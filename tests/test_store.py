import multiprocessing as mp
import signal
import sqlite3

import pytest

from helpers import process_holding_a_run

from benchmarks.results import VariantResult
from benchmarks.service.store import ResultsStore


def _result(name, i=0):
    return VariantResult(name=name, accuracy=0.5 + i / 100, latency_samples_ms=[1.0, 2.0],
                         batch_size=4, size_bytes=100)


def test_round_trip(store_path):
    store = ResultsStore(store_path)
    run_id = store.start_run(model="seed_cnn", dataset="digits", device="cpu",
                             spec={"a": 1}, environment={"torch": "x"})
    store.add_variant(run_id, _result("baseline"))
    store.add_variant(run_id, _result("prune", 1))
    store.finish_run(run_id, "complete")
    (run,) = store.runs()
    assert run["run_id"] == run_id and run["status"] == "complete"
    assert [v["name"] for v in run["variants"]] == ["baseline", "prune"]
    assert store.variant_results(run_id)[1] == _result("prune", 1)
    assert store.integrity_ok()
    assert store.delete_run(run_id) and store.runs() == []


def test_wal_mode(store_path):
    ResultsStore(store_path)
    mode = sqlite3.connect(store_path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def _writer(path, tag, n):
    store = ResultsStore(path)
    run_id = store.start_run(model=tag, dataset="d", device="cpu", spec={}, environment={})
    for i in range(n):
        store.add_variant(run_id, _result(f"{tag}-{i}", i))
    store.finish_run(run_id, "complete")


def test_concurrent_writers_lose_nothing(store_path):
    ResultsStore(store_path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(store_path), f"w{k}", 25)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    runs = ResultsStore(store_path).runs()
    assert len(runs) == 4
    assert all(len(r["variants"]) == 25 and r["status"] == "complete" for r in runs)


def test_a_dead_process_run_is_marked_interrupted(store_path):
    proc, run_id = process_holding_a_run(store_path)
    assert ResultsStore(store_path).run(run_id)["status"] == "running"  # alive: left alone
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = ResultsStore(store_path)
    run = store.run(run_id)
    assert run["status"] == "interrupted"
    assert [v["name"] for v in run["variants"]] == ["baseline"]
    assert store.integrity_ok()


def test_a_folder_is_not_a_store(tmp_path):
    with pytest.raises(ValueError, match="is a directory"):
        ResultsStore(tmp_path)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite" * 100)
    with pytest.raises(ValueError, match="not a usable SQLite database"):
        ResultsStore(junk)
