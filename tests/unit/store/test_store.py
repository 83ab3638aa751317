import multiprocessing as mp
import signal
import sqlite3
import threading

import pytest

from benchmarks.report.results import VariantResult
from benchmarks.store.database import ResultsStore
from helpers import process_holding_a_run


def _result(name, i=0):
    return VariantResult.of(name=name, accuracy=0.5 + i / 100, latency_samples_ms=[1.0, 2.0],
                            batch_size=4, size_bytes=100)


def test_round_trip(store):
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


def test_sessions_opening_a_fresh_store_together_all_get_it(tmp_path):
    # The one switching a new file to WAL may find another doing the same, and SQLite then
    # answers "locked" at once, without its busy timeout. The race is narrow: 150 fresh files
    # opened by 8 threads each lost about 5 of them before the switch retried.
    errors: list[BaseException] = []

    def open_store(path, barrier):
        try:
            barrier.wait(30)
            ResultsStore(path)
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    for k in range(150):
        barrier = threading.Barrier(8)
        threads = [threading.Thread(target=open_store, args=(tmp_path / f"{k}.db", barrier))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors[0]


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


def test_a_fast_models_variant_stays_small_and_its_samples_round_trip(tmp_path, cli):
    """A fast model's variant held 10,000+ latency samples as JSON text: 200 KB per variant.
    Now at most KEPT_SAMPLES float32 values are kept, packed, with the statistics of every
    sample: each stored variant is 20 KB or less, and what is stored reads back exactly."""
    import json

    from benchmarks.report.records import KEPT_SAMPLES
    store, report = tmp_path / "s.db", tmp_path / "r.json"
    out = cli("run", "--model", "mlp", "--batch-size", "1", "--epochs", "1", "--min-time",
              "1.5", "--store", str(store), "--json", str(report), "--quiet")
    assert out.returncode == 0, out.stderr
    (variant,) = json.loads(report.read_text())["variants"]
    assert variant["latency_ms"]["n"] > 2 * KEPT_SAMPLES  # statistics from every sample
    raw = variant["raw"]
    assert len(raw["latency_samples_ms"]) == KEPT_SAMPLES
    assert raw["sample_stats"]["latency_samples_ms"]["n"] == variant["latency_ms"]["n"]
    sizes = [n for (n,) in sqlite3.connect(store).execute(
        "SELECT length(result) FROM variants")]
    assert sizes and max(sizes) <= 20 * 1024, sizes
    (run,) = json.loads(cli("history", "--json", "--store", str(store)).stdout)
    stored = run["variants"][0]
    assert stored["raw"] == raw and stored["latency_ms"] == variant["latency_ms"]
    assert VariantResult.from_dict(stored).to_dict()["raw"] == raw


def test_samples_that_are_not_float32_exact_round_trip_too(store):
    run_id = store.start_run(model="m", dataset="d", device="cpu", spec={}, environment={})
    result = VariantResult.of(name="baseline", latency_samples_ms=[0.1, 1 / 3, 2.5e-7],
                              batch_size=1)
    store.add_variant(run_id, result)
    assert store.variant_results(run_id) == [result]


def test_an_older_store_gains_the_owner_column(store_path):
    db = sqlite3.connect(store_path)
    db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, "
               "finished_at TEXT, kind TEXT NOT NULL DEFAULT 'sweep', model TEXT NOT NULL, "
               "dataset TEXT NOT NULL, device TEXT, status TEXT NOT NULL, error TEXT, "
               "spec TEXT NOT NULL, environment TEXT NOT NULL, host TEXT NOT NULL, "
               "pid INTEGER NOT NULL, pid_start TEXT)")
    db.execute("INSERT INTO runs VALUES ('old', '2020', NULL, 'sweep', 'm', 'd', 'cpu', "
               "'complete', NULL, '{}', '{}', 'h', 1, NULL)")
    db.commit()
    db.close()
    store = ResultsStore(store_path)
    assert store.run("old")["owner"] is None
    run_id = store.start_run(model="m", dataset="d", device="cpu", spec={}, environment={},
                             owner="session:abc")
    assert [r["run_id"] for r in store.runs(owner="session:abc")] == [run_id]
    with pytest.raises(PermissionError):
        store.delete_run(run_id, by="session:other")
    assert store.delete_run(run_id, by="session:abc")


# -- a full disk -------------------------------------------------------------------------------

def test_a_store_that_cannot_be_created_says_the_disk_is_full_and_leaves_no_file(
        tmp_path, monkeypatch):
    """Injected: SQLite's "database or disk is full" while the schema is written read as
    corruption ("not a usable SQLite database") and left a 0-byte store behind."""
    from contextlib import contextmanager

    from benchmarks.spec.atomic import DiskFull

    class Full:
        def executescript(self, script):
            raise sqlite3.OperationalError("database or disk is full")

    @contextmanager
    def connect(self):
        yield Full()
    monkeypatch.setattr(ResultsStore, "connect", connect)
    path = tmp_path / "results.db"
    with pytest.raises(DiskFull, match=f"no space left on device in {tmp_path} .* writing "
                                       f"results.db"):
        ResultsStore(path)
    assert list(tmp_path.iterdir()) == []


def test_a_write_to_a_store_on_a_full_disk_is_one_line(store, monkeypatch):
    from benchmarks.spec.atomic import DiskFull
    run_id = store.start_run(model="m", dataset="d", device="cpu", spec={}, environment={})
    real = sqlite3.connect

    class FullOnInsert:
        def __init__(self, db):
            self.db = db

        def execute(self, sql, *args):
            if sql.startswith("INSERT"):
                raise sqlite3.OperationalError("database or disk is full")
            return self.db.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.db, name)
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: FullOnInsert(real(*a, **k)))
    with pytest.raises(DiskFull, match="no space left on device in"):
        store.add_variant(run_id, _result("baseline"))


def test_a_store_on_a_real_full_tmpfs(tmp_path):
    from benchmarks.spec.atomic import DiskFull
    from helpers import small_tmpfs
    with small_tmpfs(tmp_path / "mnt", "600k", leave_free=0) as mnt:
        with pytest.raises(DiskFull, match=f"no space left on device in {mnt}"):
            ResultsStore(mnt / "results.db")
        assert sorted(p.name for p in mnt.iterdir()) == ["filler"]
