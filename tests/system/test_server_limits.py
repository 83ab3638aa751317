"""Issue 31.12: an out-of-bounds limit at server start is one line and exit 2 (validated by
``Limits``, read once before the server listens), not the lifespan's 31-line traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import ROOT, scaled


@pytest.mark.parametrize("variable, value, said", [
    ("COMPRESSION_BENCH_MAX_JOBS", "0", "an integer between 1 and 1000"),
    ("COMPRESSION_BENCH_WORKER_MEMORY", "12 parsecs", "bytes such as 12G"),
    ("COMPRESSION_BENCH_JOB_TIME_LIMIT", "1e9", "seconds between 10 and a week"),
])
def test_a_bad_limit_stops_the_server_in_one_line(tmp_path, variable, value, said):
    env = {**os.environ, variable: value, "COMPRESSION_BENCH_STORE": str(tmp_path / "s.db")}
    done = subprocess.run(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true",
         "--server.port", "0"], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=scaled(120))
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert line.startswith(f"error: {variable} must be") and said in line
    assert "Traceback" not in done.stdout + done.stderr
