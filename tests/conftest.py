"""Shared fixtures. Every test gets a private results store and a session-wide weights cache
(and empty torch hub and Hugging Face caches), so nothing touches the user's own files and
repeated baselines train once per session. The sweeps that a unit file and a system file both
read (the export's, the HTML report's) run once per session here. Everything under
tests/system/ is marked ``system``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import FAST_CLI, ROOT, run_cli

SYSTEM = ROOT / "tests" / "system"


def pytest_report_header(config):
    """The factor the suite's waits start from (helpers.machine_slowdown), in the header of
    CI's log: a slow run on a loaded machine reads as such."""
    from helpers import machine_slowdown
    return f"machine slowdown at start: x{machine_slowdown():.1f} (load per core; every " \
           f"wait of the suite is scaled by it, helpers.scaled)"


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_protocol(item):
    """pytest-timeout's limit per test (pyproject's ``timeout``, or --timeout) granted the
    machine's slowdown when the test starts, as its waits are: a test whose waits scale must
    not be cut off at the quiet machine's limit. A test's own timeout marker is left alone."""
    from helpers import scaled
    try:  # --timeout first (0 turns the limit off), then pyproject's
        given = item.config.getoption("timeout", None)
        limit = float(item.config.getini("timeout") or 0) if given is None else float(given)
    except (ValueError, TypeError):  # pytest-timeout absent
        limit = 0
    if limit > 0 and item.get_closest_marker("timeout") is None:
        item.add_marker(pytest.mark.timeout(scaled(limit)))
    yield


def pytest_collection_modifyitems(items):
    """``-m system`` / ``-m "not system"`` select the tier by folder, so no file can forget."""
    for item in items:
        if SYSTEM in Path(item.fspath).parents:
            item.add_marker(pytest.mark.system)


@pytest.fixture(autouse=True)
def _main_module_kept():
    """Streamlit's AppTest runs a page as ``__main__`` and leaves it there; a process started
    later with multiprocessing's spawn then runs that page first (app.py: a session, the
    server's secret) before its own target. Each test gets the interpreter's own back."""
    import sys
    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main


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
    # The cores timings claim (benchmarks.measure.cores), the session's own: the parallel
    # files' runs would share the machine's, and each say so on the stderr tests read.
    os.environ["COMPRESSION_BENCH_CORE_LOCKS"] = str(tmp_path_factory.mktemp("core-locks"))
    # Run as root (a container), the suite keeps its workers as root: its private folders
    # live under pytest's 0700 temporary root, which an unprivileged worker could not enter.
    # tests/system/test_worker_user.py starts a root server whose worker runs as another user.
    os.environ.setdefault("COMPRESSION_BENCH_WORKER_USER", "root")
    yield cache


@pytest.fixture
def store_path(tmp_path) -> Path:
    """Where this test's private results store lives (not created)."""
    return tmp_path / "results.db"


@pytest.fixture
def store(store_path):
    """This test's private ResultsStore (created, empty)."""
    from benchmarks.store.database import ResultsStore
    return ResultsStore(store_path)


@pytest.fixture
def queue(store_path):
    """A real JobQueue over this test's private store. The test starts the worker when it
    wants one (``queue.ensure_worker``); it is stopped after the test. A module that needs the
    worker warm, or an environment set before the queue reads its limits, overrides this
    fixture or sets the environment in an autouse fixture (set up first)."""
    from benchmarks.service.queue import JobQueue
    q = JobQueue(store_path)
    yield q
    q.stop_worker("cpu")


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


# The default sweep's techniques with channel pruning (the pruning that changes shapes).
EXPORT_SWEEP = ["--prune", "0.5", "--prune-method", "channel", "--distill", "--temperature", "4",
                "--amp", "--int8", "static"]
# The shared sweeps train two epochs, as their tests always have.
SWEEP_FAST = [*FAST_CLI, "--epochs", "2"]


@pytest.fixture(scope="session")
def export_sweep(tmp_path_factory):
    """(store path, run id): one CLI sweep for the export tests, its trained weights in the
    session's cache."""
    from benchmarks.store.database import ResultsStore
    store = tmp_path_factory.mktemp("export") / "s.db"
    p = run_cli("run", *EXPORT_SWEEP, *SWEEP_FAST, "--store", str(store))
    assert p.returncode == 0, p.stderr
    return store, ResultsStore(store).runs()[0]["run_id"]


# The default sweep (`make bench`), and one with an axis, so trade-off curves are drawn too.
DEFAULT_SWEEP = ["--prune", "0.5", "--distill", "--temperature", "4", "--amp", "--int8",
                 "static", "--combine"]
AXIS_SWEEP = ["--prune", "0.3,0.6", "--int8", "static"]


@pytest.fixture(scope="session")
def report_store(tmp_path_factory):
    """One store holding the default sweep and an axis sweep, run through the CLI, for the
    HTML report tests (``helpers.report_runs`` reads the two back)."""
    path = tmp_path_factory.mktemp("report") / "s.db"
    for args in (DEFAULT_SWEEP, AXIS_SWEEP):
        p = run_cli("run", *args, *SWEEP_FAST, "--store", str(path))
        assert p.returncode == 0, p.stderr
    return path
