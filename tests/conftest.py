"""Shared fixtures. Every test gets a private results store and a session-wide weights cache,
so nothing touches the user's own files and repeated baselines train once per session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    cache = tmp_path_factory.mktemp("weights-cache")
    os.environ["COMPRESSION_BENCH_CACHE"] = str(cache)
    os.environ.setdefault("COMPRESSION_BENCH_STORE", str(cache / "default-store.db"))
    yield cache


@pytest.fixture
def store_path(tmp_path) -> Path:
    return tmp_path / "results.db"


@pytest.fixture(scope="session")
def digits():
    from benchmarks.datasets import load_dataset
    return load_dataset("digits")


def run_cli(*args: str, timeout: float = 300, env: dict | None = None):
    """The CLI in a fresh process, as a user runs it."""
    import subprocess
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=full_env)


def process_holding_a_run(store_path: Path):
    """A separate process that opens ``store_path``, starts a run, stores its baseline and then
    sleeps: the stand-in for a sweep that will be killed. Returns (process, run_id)."""
    import subprocess
    code = (f"import sys,time; sys.path.insert(0, {str(ROOT)!r});"
            "from benchmarks.store import ResultsStore;"
            f"s=ResultsStore({str(store_path)!r});"
            "r=s.start_run(model='m',dataset='d',device='cpu',spec={},environment={});"
            "s.add_variant(r, {'name':'baseline'}); print(r, flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session", autouse=True)
def _no_worker_outlives_the_session():
    """Job-queue workers exit with their parent; pytest is their parent here, so stop any a
    test left behind before the session ends (CI must not keep processes around)."""
    yield
    import signal
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"benchmarks.jobs" in cmdline:
            try:
                os.kill(int(stat.parent.name), signal.SIGTERM)
            except ProcessLookupError:
                pass
