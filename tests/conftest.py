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


@pytest.fixture
def cli():
    return run_cli
