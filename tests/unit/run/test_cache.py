"""Finding 10: the weights cache grew without bound. It is capped, least recently used
entries go first, and the sidebar shows its use against the cap."""

from __future__ import annotations

import os
import time

import torch
from streamlit.testing.v1 import AppTest
from torch import nn

from benchmarks.run.cache import WeightsCache, usage_bytes
from helpers import ROOT


def _entry_bytes(tmp_path) -> int:
    probe = WeightsCache(tmp_path / "probe", max_bytes=2**30)
    probe(("probe",), lambda: nn.Linear(64, 64), lambda m: None)
    return usage_bytes(tmp_path / "probe")


def test_the_cache_keeps_its_cap_evicting_the_least_recently_used(tmp_path):
    size = _entry_bytes(tmp_path)
    cache = WeightsCache(tmp_path / "cache", max_bytes=int(2.5 * size))
    trained = []

    def train(m):
        trained.append(m)

    build = lambda: nn.Linear(64, 64)  # noqa: E731
    cache(("a",), build, train)
    time.sleep(0.02)
    cache(("b",), build, train)
    time.sleep(0.02)
    cache(("a",), build, train)  # a hit: "a" is now the most recently used
    time.sleep(0.02)
    cache(("c",), build, train)  # over the cap: "b", the least recently used, goes
    assert len(trained) == 3
    assert cache.path(("a",)).exists() and cache.path(("c",)).exists()
    assert not cache.path(("b",)).exists()
    assert usage_bytes(cache.directory) <= cache.max_bytes
    assert (cache.directory.stat().st_mode & 0o777) == 0o700
    assert all((p.stat().st_mode & 0o777) == 0o600 for p in cache.directory.iterdir())
    # An evicted entry is only a retrain: the same key gives the same weights again.
    torch.manual_seed(0)
    again = cache(("b",), lambda: nn.Linear(64, 64), train)
    assert len(trained) == 4 and isinstance(again, nn.Linear)


def test_the_sidebar_shows_the_cache_use_against_its_cap(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(tmp_path / "results.db"))
    monkeypatch.setenv("COMPRESSION_BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COMPRESSION_BENCH_CACHE_MB", "64")
    WeightsCache(tmp_path / "cache")(("x",), lambda: nn.Linear(512, 512), lambda m: None)
    used = os.path.getsize(next((tmp_path / "cache").glob("*.safetensors"))) / 2**20
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    captions = [c.value for c in at.sidebar.caption]
    assert f"Weights cache: {used:,.0f} MB of 64 MB (least recently used entries are " \
           f"evicted beyond)" in captions, captions
    from benchmarks.service.queue import JobQueue
    JobQueue(tmp_path / "results.db").stop_worker("cpu")


# -- a full disk -------------------------------------------------------------------------------

def test_a_full_cache_disk_is_one_line_and_leaves_no_partial_entry(tmp_path, monkeypatch):
    """Injected: safetensors fails half-way with its own error (the issue's 28-line
    SafetensorError traceback, and the partial file it left)."""
    import pytest

    from benchmarks.spec.atomic import DiskFull
    from benchmarks.zoo import checkpoints

    def full(model, path):
        with open(path, "wb") as f:
            f.write(b"\0" * 8192)
        raise Exception('Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
                        'message: "No space left on device" })')
    monkeypatch.setattr(checkpoints, "save_state_dict", full)
    cache = WeightsCache(tmp_path / "cache")
    with pytest.raises(DiskFull) as caught:
        cache(("a",), lambda: nn.Linear(64, 64), lambda m: None)
    assert str(caught.value).startswith(f"no space left on device in {tmp_path / 'cache'} (")
    assert cache.path(("a",)).name in str(caught.value)
    assert os.listdir(tmp_path / "cache") == []


def test_the_cli_on_a_full_cache_file_system_exits_2_in_one_line(tmp_path, cli):
    """A real 600 KB tmpfs with 100 KB left: the digits cache does not fit (skipped, nothing
    left), nor the baseline's weights: exit 2, one line naming the folder and its free space,
    no temporary file, and the run stored as failed with that line."""
    from benchmarks.store.database import ResultsStore
    from helpers import FAST_CLI, small_tmpfs
    with small_tmpfs(tmp_path / "mnt", "600k", leave_free=100_000) as mnt:
        store = tmp_path / "s.db"
        p = cli("run", *FAST_CLI, "--store", str(store),
                env={"COMPRESSION_BENCH_CACHE": str(mnt)})
        assert p.returncode == 2, p.stderr
        line = p.stderr.strip()
        assert "\n" not in line and "Traceback" not in p.stderr
        assert line.startswith(f"error: no space left on device in {mnt} (")
        assert "KiB free) writing " in line and line.count(".safetensors") == 1
        # Nothing of the weights left; the machine's speed and roofs (benchmarks.run.speed,
        # benchmarks.measure.machine_peaks: a few KB, written whole) are the cache's to keep.
        assert sorted(n for n in os.listdir(mnt)
                      if not n.startswith(("speed-", "peaks-"))) == ["filler"]
        (run,) = ResultsStore(store).runs()
        assert run["status"] == "failed" and run["error"] == line[len("error: "):]
