"""Shared fixtures. Every test gets a private results store and a session-wide weights cache
(and empty torch hub and Hugging Face caches), so nothing touches the user's own files and
repeated baselines train once per session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from helpers import ROOT, run_cli


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    cache = tmp_path_factory.mktemp("weights-cache")
    os.environ["COMPRESSION_BENCH_CACHE"] = str(cache)
    # Pretrained weights come from caches the tests fill themselves, never the user's, and
    # nothing reaches for the network.
    os.environ["TORCH_HOME"] = str(tmp_path_factory.mktemp("torch-home"))
    os.environ["HF_HOME"] = str(tmp_path_factory.mktemp("hf-home"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("COMPRESSION_BENCH_STORE", str(cache / "default-store.db"))
    yield cache


@pytest.fixture
def store_path(tmp_path) -> Path:
    return tmp_path / "results.db"


@pytest.fixture(scope="session")
def digits():
    from benchmarks.zoo.datasets import load_dataset
    return load_dataset("digits")


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
        if ppid == os.getpid() and b"benchmarks.service.worker" in cmdline:
            try:
                os.kill(int(stat.parent.name), signal.SIGTERM)
            except ProcessLookupError:
                pass
