"""Reliability under concurrency and faults, and hostile files: the engine side of the
hardening issue. Property-based input checks live in test_properties.py."""

from __future__ import annotations

import json
import os
import pickle
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
import zipfile
import zlib
from datetime import datetime
from pathlib import Path

import pytest
import torch

from benchmarks.cli.main import main
from benchmarks.service.queue import JobQueue
from benchmarks.spec.sweep import SweepSpec
from benchmarks.store.database import ResultsStore
from benchmarks.zoo.checkpoints import load_into, read_state_dict
from benchmarks.zoo.datasets import load_dataset
from benchmarks.zoo.models import create_model
from helpers import ROOT, process_holding_a_run

FAST_CLI = ["--epochs", "1", "--min-time", "0.1", "--quiet"]


def spawn(*args: str, env: dict | None = None) -> subprocess.Popen:
    """``python -m benchmarks ...`` in its own process, not waited for."""
    return subprocess.Popen([sys.executable, "-m", "benchmarks", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def rows(store: Path, sql: str, args=()) -> list[tuple]:
    """Read the store without creating it (a plain connect would make an empty file)."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def integrity(store: Path) -> str:
    return rows(store, "PRAGMA integrity_check")[0][0]


# -- concurrency ---------------------------------------------------------------------------

def test_two_cli_sweeps_into_one_store_both_complete(tmp_path, cli):
    store = tmp_path / "shared.db"
    # A private weights cache: both processes miss, train and write the same entry at once.
    env = {"COMPRESSION_BENCH_CACHE": str(tmp_path / "cache")}
    procs = [spawn("run", "--prune", "0.5", "--store", str(store), "--json",
                   str(tmp_path / f"r{i}.json"), *FAST_CLI, env=env) for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "Traceback" not in err
    names = ["baseline", "prune-l1-0.5"]
    for i in range(2):
        report = json.loads((tmp_path / f"r{i}.json").read_text())
        assert [v["name"] for v in report["variants"]] == names
        assert all(v["error"] is None for v in report["variants"])
    h = cli("history", "--json", "--store", str(store))
    runs = json.loads(h.stdout)
    assert len(runs) == 2
    assert all(r["status"] == "complete" for r in runs)
    assert all([v["name"] for v in r["variants"]] == names for r in runs)
    # The SQLite rows themselves: two runs, two variants each, positions 0 and 1.
    assert rows(store, "SELECT COUNT(*) FROM runs WHERE status='complete'") == [(2,)]
    per_run = rows(store, "SELECT run_id, GROUP_CONCAT(position) FROM "
                          "(SELECT run_id, position FROM variants ORDER BY position) "
                          "GROUP BY run_id")
    assert sorted(p for _, p in per_run) == ["0,1", "0,1"]
    assert integrity(store) == "ok"


def test_five_jobs_submitted_at_once_all_finish_one_at_a_time(store_path):
    spec = SweepSpec.from_toggles(amp=True, epochs=1, min_time_s=0.05, min_runs=10,
                                  warmup=1).to_dict()
    barrier = threading.Barrier(5)
    ids: list[str] = []
    errors: list[BaseException] = []

    def session(k: int):
        try:
            # Each session its own queue object (own connections), all on a fresh file.
            q = JobQueue(store_path)
            barrier.wait(timeout=60)
            ids.append(q.submit("sweep", spec, session=f"s{k}"))
            q.ensure_worker("cpu")  # five sessions race to start a worker: one survives
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=session, args=(k,)) for k in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    queue = JobQueue(store_path)
    try:
        assert not errors, errors
        assert len(ids) == 5
        deadline = time.monotonic() + 240
        while not all(queue.get(i).finished for i in ids):
            assert time.monotonic() < deadline, [queue.get(i) for i in ids]
            time.sleep(0.2)
        jobs = [queue.get(i) for i in ids]
        assert [j.status for j in jobs] == ["complete"] * 5, [j.error for j in jobs]
        for j in jobs:
            run = queue.store.run(j.run_id)
            assert run["status"] == "complete"
            assert [v["name"] for v in run["variants"]] == ["baseline", "amp"]
        # One worker ran them all, one at a time: the spans never overlap.
        pids = {p for (p,) in rows(store_path, "SELECT worker_pid FROM jobs")}
        assert len(pids) == 1
        spans = sorted((datetime.fromisoformat(j.started_at),
                        datetime.fromisoformat(j.finished_at)) for j in jobs)
        assert all(start < end for start, end in spans)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
    finally:
        queue.stop_worker("cpu")


# -- faults --------------------------------------------------------------------------------

def test_sigkill_mid_sweep_keeps_finished_variants_and_marks_the_run(tmp_path, cli):
    store = tmp_path / "s.db"
    proc = spawn("run", "--prune", "0.5", "--amp", "--store", str(store), "--epochs", "1",
                 "--min-time", "2", "--quiet")
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 240
        while not seen:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no variant was stored in time"
            if store.exists():
                try:
                    seen = [n for (n,) in rows(store, "SELECT name FROM variants "
                                                      "ORDER BY position")]
                except sqlite3.OperationalError:  # tables not created yet
                    pass
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert integrity(store) == "ok"
    assert rows(store, "SELECT status FROM runs") == [("running",)]  # nobody noticed yet

    h = cli("history", "--json", "--store", str(store))  # the next process to open it
    (run,) = json.loads(h.stdout)
    assert run["status"] == "interrupted"
    stored = [v["name"] for v in run["variants"]]
    assert stored[:len(seen)] == seen
    # Cut short: a variant missing, or one whose latency (timed last) never landed.
    assert len(stored) < 3 or any(v["latency_ms"] is None for v in run["variants"])
    # Each is kept with what was measured before the kill: accuracy and size at once, the
    # latency once every variant is built (interleaved timing), marked pending until then.
    assert all(v["error"] is None and v["accuracy"] and v["size_mb"] for v in run["variants"])
    assert all(v["timing"]["method"] == "pending" if v["latency_ms"] is None
               else v["latency_ms"]["n"] >= 10 for v in run["variants"])

    p = cli("run", "--store", str(store), "--epochs", "1", "--min-time", "0.05", "--quiet")
    assert p.returncode == 0, p.stderr
    newest, older = json.loads(cli("history", "--json", "--store", str(store)).stdout)
    assert newest["status"] == "complete" and older["run_id"] == run["run_id"]
    assert older["status"] == "interrupted" and len(older["variants"]) == len(stored)
    assert integrity(store) == "ok"


def test_a_killed_but_unreaped_process_counts_as_dead(store_path):
    """A zombie still answers kill(pid, 0): its run must be marked all the same."""
    proc, run_id = process_holding_a_run(store_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        run = ResultsStore(store_path).run(run_id)  # the zombie is not reaped yet
        assert run["status"] == "interrupted"
        assert [v["name"] for v in run["variants"]] == ["baseline"]
    finally:
        proc.kill()
        proc.wait()


def test_an_environment_error_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    """STYLE: RuntimeError is the environment's fault; the CLI still shows one line."""
    from benchmarks.zoo import datasets

    def refuse(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory\nmore detail")

    monkeypatch.setattr(datasets, "_digits", refuse)
    store = tmp_path / "s.db"
    assert main(["run", "--store", str(store), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "error: RuntimeError: DefaultCPUAllocator: can't allocate memory"]
    assert not store.exists()


@pytest.mark.parametrize("args, expected", [
    (["--dataset", "synthetic", "--input-shape", "3,4096,4096", "--model", "mlp"],
     "COMPRESSION_BENCH_MEMORY_SHARE"),
    (["--dataset", "synthetic", "--input-shape", "3,256,256", "--model", "mlp",
      "--batch-size", "65536"], "at batch size 65536 needs about"),
])
def test_inputs_too_large_for_memory_are_refused_before_allocating(args, expected, tmp_path,
                                                                   capsys):
    store = tmp_path / "s.db"
    assert main(["run", "--store", str(store), "--quiet", *args]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error:") and expected in line
    assert not store.exists()


# -- hostile checkpoints (beyond tests/test_checkpoints.py) --------------------------------

class _System:
    """Pickles as a call to os.system: a checkpoint that would run a shell command."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Exec:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


def _zip_with_data_pkl(valid: Path, out: Path, payload: bytes) -> None:
    """A real torch zip checkpoint with its data.pkl swapped for ``payload``."""
    with zipfile.ZipFile(valid) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = payload if info.filename.endswith("/data.pkl") else src.read(info)
            dst.writestr(info, data)


@pytest.mark.parametrize("make", ["_System", "_Exec", "protocol0"])
@pytest.mark.parametrize("container", ["zip", "raw"])
def test_checkpoints_that_run_code_are_refused_before_it_runs(make, container, tmp_path):
    marker = tmp_path / "PWNED"
    if make == "protocol0":  # hand-written: GLOBAL posix.system, no Python class needed
        payload = f"cposix\nsystem\n(Vtouch {marker}\ntR.".encode()
    else:
        payload = pickle.dumps({"0.weight": globals()[make](marker)}, protocol=2)
    path = tmp_path / "evil.pt"
    if container == "zip":
        valid = tmp_path / "valid.pt"
        torch.save({"0.weight": torch.zeros(2)}, valid)
        _zip_with_data_pkl(valid, path, payload)
    else:
        path.write_bytes(payload)
    with pytest.raises(ValueError, match="refused|corrupt") as err:
        read_state_dict(path)
    assert "\n" not in str(err.value)
    assert not marker.exists()


def test_a_zip_checkpoint_whose_data_pkl_runs_code_names_it(tmp_path):
    marker = tmp_path / "PWNED"
    valid, evil = tmp_path / "valid.pt", tmp_path / "evil.pth"
    torch.save({"0.weight": torch.zeros(2)}, valid)
    _zip_with_data_pkl(valid, evil, pickle.dumps(_System(marker), protocol=2))
    with pytest.raises(ValueError, match="carries pickled code, which is refused"):
        read_state_dict(evil)
    assert not marker.exists()


def test_non_tensor_and_nested_state_dicts_are_refused(tmp_path):
    for i, obj in enumerate([{"0.weight": 5}, {"a": {"b": torch.zeros(1)}},
                             {1: torch.zeros(1)}, "weights", None]):
        path = tmp_path / f"s{i}.pt"
        torch.save(obj, path)
        with pytest.raises(ValueError, match="not a state_dict"):
            read_state_dict(path)


def test_right_keys_and_shapes_with_an_unusable_dtype_is_one_line(tmp_path):
    model = create_model("seed_cnn", 10, 1, (8, 8))
    state = {k: torch.zeros(v.shape, dtype=torch.complex64) for k, v in
             model.state_dict().items()}
    with pytest.raises(ValueError, match="complex.pt does not match the model "
                                         r"\(dtype mismatch: 0.weight torch.complex64") as err:
        load_into(model, state, "complex.pt")
    assert "\n" not in str(err.value)


def test_safetensors_header_that_lies_about_offsets_dtypes_and_shapes(tmp_path):
    def write(header: dict, body: bytes) -> Path:
        raw = json.dumps(header).encode()
        path = tmp_path / "lie.safetensors"
        path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)
        return path

    lies = [
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 1000]}},      # past the end
        {"w": {"dtype": "F32", "shape": [400], "data_offsets": [0, 16]}},      # shape > data
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}},        # reversed
        {"w": {"dtype": "NOPE", "shape": [4], "data_offsets": [0, 16]}},       # no such dtype
        {"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 16]}},       # negative dim
        {"w": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 16]}},  # overflow
        {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "v": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}},        # overlapping
        {"w": "not a tensor"},
    ]
    for header in lies:
        with pytest.raises(ValueError, match="corrupt|truncated") as err:
            read_state_dict(write(header, b"\0" * 16))
        assert "\n" not in str(err.value)


# -- image folders -------------------------------------------------------------------------

def _png(path: Path, color: int = 0, size: int = 8) -> None:
    from PIL import Image
    Image.new("RGB", (size, size), (color, color, color)).save(path)


def _png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG whose header claims width x height pixels, with almost no data behind it."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b""))


def _folder(root: Path, counts: dict[str, int]) -> str:
    for cls, n in counts.items():
        (root / cls).mkdir(parents=True)
        for i in range(n):
            _png(root / cls / f"{i}.png", color=40 * i)
    return str(root)


def _refused(dataset: str, match: str) -> str:
    with pytest.raises(ValueError, match=match) as err:
        load_dataset(dataset, input_shape=(3, 8, 8))
    assert "\n" not in str(err.value)
    return str(err.value)


def test_image_folder_text_file_with_image_suffix(tmp_path):
    root = _folder(tmp_path / "imgs", {"a": 3, "b": 3})
    (tmp_path / "imgs" / "b" / "notes.png").write_text("this is not an image\n" * 10)
    assert "notes.png is not a readable image" in _refused(f"imagefolder:{root}", "readable")


def test_image_folder_decompression_bomb_header(tmp_path):
    root = _folder(tmp_path / "imgs", {"a": 3, "b": 3})
    _png_header_only(tmp_path / "imgs" / "a" / "bomb.png", 60000, 60000)
    assert "bomb.png is not a readable image" in _refused(f"imagefolder:{root}", "readable")


def test_image_folder_truncated_png(tmp_path):
    root = _folder(tmp_path / "imgs", {"a": 3, "b": 3})
    good = tmp_path / "imgs" / "a" / "0.png"
    _png(good, size=64)
    good.write_bytes(good.read_bytes()[:60])
    message = _refused(f"imagefolder:{root}", "0.png is not a readable image")
    assert message.startswith("imagefolder:")


def test_image_folder_empty_class_folder(tmp_path):
    root = _folder(tmp_path / "imgs", {"a": 4, "b": 4, "empty": 0})
    assert "'empty'" in _refused(f"imagefolder:{root}", "has no images")


def test_image_folder_one_class_only_and_no_images(tmp_path):
    messages = [_refused(f"imagefolder:{_folder(tmp_path / 'one', {'a': 6})}", "at least 2"),
                _refused(f"imagefolder:{_folder(tmp_path / 'none', {'a': 0, 'b': 0})}",
                         "no images"),
                _refused("imagefolder:" + str(tmp_path / "missing"), "is not a directory")]
    assert all(m.startswith("imagefolder:") for m in messages), messages


def test_image_folder_that_is_fine_loads(tmp_path):
    data = load_dataset(f"imagefolder:{_folder(tmp_path / 'ok', {'a': 4, 'b': 4})}",
                        input_shape=(3, 8, 8))
    assert data.num_classes == 2 and data.input_shape == (3, 8, 8)
