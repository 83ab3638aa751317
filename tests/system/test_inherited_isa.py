"""An instruction-set cap inherited from the environment (issue "a server that trusts nothing
the worker writes", item 8): ``ONEDNN_MAX_CPU_ISA=SSE41`` set in the shell that starts the
CLI, or the server whose worker runs the jobs, no longer caps the native cells. It is cleared
before native work starts (oneDNN's own log shows kernels above SSE4.1 running), recorded on
the environment card with its value and said in words where the card is shown: the Results
page's measurement line, the report, the sidebar's worker card. A deliberate cap, an
instruction-set profile (``--isa``), keeps its own process's cap:
tests/unit/run/test_isa_profiles.py."""

from __future__ import annotations

import json
import os
import re

import pytest

from benchmarks.report.document import RunReport
from benchmarks.spec.cpu_env import card_variables, clear_inherited, variables_text
from benchmarks.spec.isa import cap_rank, cpu_flags, machine_rank, onednn_obeys
from helpers import FAST_CLI, run_cli

pytestmark = pytest.mark.slow
CAPPED = {"ONEDNN_MAX_CPU_ISA": "SSE41", "DNNL_MAX_CPU_ISA": "SSE41"}


def test_an_inherited_cap_is_cleared_for_native_cells_and_recorded(tmp_path):
    if machine_rank(cpu_flags()) <= cap_rank("sse41"):
        pytest.skip("this CPU has nothing above SSE4.1: a cap to it would change nothing")
    out = tmp_path / "run.json"
    done = run_cli("run", "--model", "seed_cnn", "--dataset", "digits", *FAST_CLI,
                   "--json", str(out), "--store", str(tmp_path / "results.db"),
                   env={**CAPPED, "ONEDNN_VERBOSE": "1", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-1500:]
    # oneDNN's own log of the convolutions it ran: some above the SSE4.1 cap.
    kernels = set(re.findall(r"exec,cpu,convolution,([\w:]+),", done.stdout))
    assert kernels and any(not onednn_obeys(k, cap_rank("sse41")) for k in kernels), kernels
    assert "warning: ONEDNN_MAX_CPU_ISA=SSE41 from the environment cleared" in done.stderr
    environment = json.loads(out.read_text())["environment"]
    assert environment["variables"] == {"cleared": CAPPED, "in_force": {},
                                        "threads": {"OMP_NUM_THREADS": "1"}}
    line = RunReport(environment=environment, spec={}).measurement_line()
    assert ("inherited ONEDNN_MAX_CPU_ISA=SSE41, DNNL_MAX_CPU_ISA=SSE41 cleared: native cells "
            "ran on this machine's own instruction sets; thread variables OMP_NUM_THREADS=1"
            ) in line


def test_the_queues_worker_clears_what_the_server_inherited_and_the_sidebar_says_so(
        queue, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from helpers import ROOT, scaled
    for name, value in CAPPED.items():
        monkeypatch.setenv(name, value)
    queue.ensure_worker("cpu", wait=True)
    card = queue.worker_card("cpu")
    assert card["variables"]["cleared"] == CAPPED and card["variables"]["in_force"] == {}
    monkeypatch.setenv("COMPRESSION_BENCH_STORE", str(queue.store.path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=scaled(60)).run()
    assert not at.exception, [e.value for e in at.exception]
    said = [str(c.value).replace("\\", "") for c in at.sidebar.caption
            if "Environment:" in str(c.value)]
    assert said and "inherited ONEDNN_MAX_CPU_ISA=SSE41, DNNL_MAX_CPU_ISA=SSE41 cleared" in \
        said[0], said


def test_clearing_and_the_words(monkeypatch):
    monkeypatch.setattr("benchmarks.spec.cpu_env._CLEARED", {})
    environ = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "default",
               "MKL_NUM_THREADS": "2", "PATH": os.environ.get("PATH", "")}
    assert clear_inherited(environ) == {"ONEDNN_MAX_CPU_ISA": "AVX2",
                                        "ATEN_CPU_CAPABILITY": "default"}
    assert set(environ) == {"MKL_NUM_THREADS", "PATH"}
    variables = card_variables(environ)
    assert variables["threads"] == {"MKL_NUM_THREADS": "2"} and variables["in_force"] == {}
    assert variables_text(variables).startswith(
        "inherited ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=default cleared")
    # A profile's own process: its cap in force, said so.
    assert variables_text(card_variables({"ONEDNN_MAX_CPU_ISA": "SSE41"})).endswith(
        "kernels capped by ONEDNN_MAX_CPU_ISA=SSE41")
    assert variables_text({"cleared": {}, "in_force": {}, "threads": {}}) is None
    assert variables_text(None) is None
