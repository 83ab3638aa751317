"""A real Streamlit server and Debian's Chromium for the browser tests and ``make perf``: start
``streamlit run serve.py`` (app.py behind the Host check) on a free port in its own process
group, wait for its health check, stop it and the queue's worker together. Nothing here
imports Streamlit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
# Headless flags for a machine with no network but loopback: without the background-networking
# flags Chromium keeps trying to reach Google's hosts.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the server did not become healthy")


def start_server(store: Path, env: dict | None = None,
                 log: Path | None = None) -> tuple[subprocess.Popen, str]:
    """`streamlit run serve.py` on a free port, in its own process group (so the server and the
    worker it starts are stopped together); its output goes to ``log`` when given (a test that
    fails shows why the server thought so), else nowhere."""
    port = free_port()
    out = subprocess.DEVNULL if log is None else open(log, "ab")  # noqa: SIM115 (the child's)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.port", str(port),
         "--server.headless", "true"], cwd=ROOT,
        # As root, the worker stays root unless the caller says otherwise: the tests' and
        # perf's folders are closed to an unprivileged worker (tests/system/test_worker_user.py
        # starts its own root server whose worker is another user).
        env={"COMPRESSION_BENCH_WORKER_USER": "root", **os.environ,
             "COMPRESSION_BENCH_STORE": str(store), **(env or {})},
        stdout=out, stderr=out, start_new_session=True)
    if log is not None:
        out.close()  # the server holds its own copy
    return proc, f"http://localhost:{port}"


def stop_server(proc: subprocess.Popen, store: Path | None) -> None:
    """Stop the server's process group, and first the queue's worker over ``store`` (an app
    with no store, such as the one-button floor, has none)."""
    if store is not None:
        try:
            from benchmarks.service.queue import JobQueue
            JobQueue(store).stop_worker("cpu", timeout=5)
        except Exception:
            pass
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


@contextmanager
def running_server(store: Path, env: dict | None = None, log: Path | None = None):
    proc, url = start_server(store, env, log)
    try:
        wait_healthy(url, proc)
        yield proc, url
    finally:
        stop_server(proc, store)


