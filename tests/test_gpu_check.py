"""``make perf-gpu`` (benchmarks/gpu_check.py): the script a session with a lent GPU runs once.
Here it runs on the CPU with --quick, so it stays working on machines without a GPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT

torch = pytest.importorskip("torch")


def _gpu_check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.gpu_check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_quick_run_on_the_cpu_writes_every_figure_and_labels_int8_placement(tmp_path):
    proc = _gpu_check("--device", "cpu", "--quick", "--rounds", "2", "--output", str(tmp_path))
    # 1 is a missed latency threshold (this machine is noisy); 2 or a traceback is a bug.
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    raw = json.loads((tmp_path / "gpu.json").read_text())["results"]
    assert set(raw) == {"kernels", "routing"}  # --quick leaves DDP out
    kernels = raw["kernels"]
    assert len(kernels["engine_p50_ms"]) == len(kernels["timer_median_ms"]) == 2
    assert all(v > 0 for v in kernels["engine_p50_ms"] + kernels["bfloat16_p50_ms"])
    assert kernels["memory_method"] == "live_tensor_bytes"
    routing = {c["target"]: c for c in raw["routing"]["checks"]}
    assert all(c["ok"] for c in routing.values()), routing
    variants = {v["name"]: v for v in raw["routing"]["variants"]}
    assert "int8-static" in variants and all(v["device"] == "cpu" for v in variants.values())
    table = (tmp_path / "gpu.md").read_text()
    assert "| INT8 variants labelled cpu" in table and "AMP bfloat16 speed-up" in table


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_cuda_without_one_is_one_line_and_exit_2(tmp_path):
    proc = _gpu_check("--output", str(tmp_path))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA device" in lines[0] and "--device cpu" in lines[0]
    assert not (tmp_path / "gpu.json").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_int8_runs_on_the_cpu_and_memory_is_read_from_cuda(tmp_path):
    proc = _gpu_check("--device", "cuda", "--quick", "--output", str(tmp_path))
    raw = json.loads((tmp_path / "gpu.json").read_text())["results"]
    variants = {v["name"]: v["device"] for v in raw["routing"]["variants"]}
    assert variants["int8-static"] == "cpu"
    assert variants["baseline"].startswith("cuda") and variants["amp"].startswith("cuda")
    assert raw["kernels"]["memory_method"] == "cuda_max_memory_allocated"
    # Speed thresholds are make perf-gpu's to report (quick shapes are launch-bound).
    assert proc.returncode in (0, 1), proc.stderr
