"""``make perf-gpu`` (tools/gpu_check.py): the script a session with a lent GPU runs once.
Here it runs on the CPU with --quick, on a machine made to look bare (tqdm and safetensors not
importable), so it stays working where there is no GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT, scaled

torch = pytest.importorskip("torch")

SECTIONS = {"timing", "memory", "fp32", "amp", "sweep", "runtimes", "ddp", "peaks"}


def _gpu_check(*args: str, hide: tuple[str, ...] = (), tmp=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if hide:
        # A sitecustomize that makes these packages unimportable, here and in every
        # subprocess the script starts: what a bare lent machine looks like.
        (tmp / "site").mkdir(exist_ok=True)
        (tmp / "site" / "sitecustomize.py").write_text(
            "import sys\n"
            f"for name in {list(hide)!r}:\n"
            "    sys.modules[name] = None\n")
        env["PYTHONPATH"] = os.pathsep.join([str(tmp / "site"), str(ROOT)])
    return subprocess.run([sys.executable, "-m", "tools.gpu_check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=scaled(600), env=env)


def test_quick_run_on_a_bare_cpu_writes_every_section_and_labels_int8(tmp_path):
    out = tmp_path / "out"
    proc = _gpu_check("--device", "cpu", "--quick", "--rounds", "2", "--output", str(out),
                      hide=("tqdm", "safetensors"), tmp=tmp_path)
    # 1 is a missed speed threshold (this machine is noisy); 2 or a traceback is a bug.
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    raw = json.loads((out / "gpu.json").read_text())["results"]
    assert set(raw) == SECTIONS
    broken = {name: s["error"] for name, s in raw.items() if "error" in s}
    assert not broken, broken
    assert raw["memory"]["with_resident_bytes"] == raw["memory"]["alone_bytes"]
    assert raw["timing"]["small_cnn"]["launch_bound"] is None  # no host/device split on CPU
    sweep = {c["target"]: c for c in raw["sweep"]["checks"]}
    assert all(c["ok"] for c in sweep.values()), sweep
    variants = {v["name"]: v["device"] for v in raw["sweep"]["variants"]}
    assert variants["int8-static"] == variants["int8-qat"] == "cpu"
    assert raw["ddp"]["checks"][0]["measured"] == 0.5  # fp16 halves the bytes
    table = (out / "gpu.md").read_text()
    assert "INT8 variants labelled cpu" in table and "torch" in table
    # The one-screen summary: a pass/fail line per check.
    assert proc.stderr.count("  pass  ") + proc.stderr.count("  FAIL  ") >= 8


def test_a_spent_budget_skips_sections_but_still_writes_the_figures(tmp_path):
    proc = _gpu_check("--device", "cpu", "--quick", "--budget", "5", "--output", str(tmp_path))
    assert proc.returncode == 1
    raw = json.loads((tmp_path / "gpu.json").read_text())["results"]
    assert set(raw) == SECTIONS
    assert all("budget" in s["error"] for s in raw.values())


def test_a_step_over_its_limit_is_cut():
    import time

    from optimizers.errors import time_limit
    with pytest.raises(TimeoutError, match="the step did not finish within 0.2 s"):
        with time_limit(0.2, "the step"):
            time.sleep(2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_cuda_without_one_is_one_line_and_exit_2(tmp_path):
    proc = _gpu_check("--output", str(tmp_path))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA device" in lines[0] and "--device cpu" in lines[0]
    assert not (tmp_path / "gpu.json").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_int8_runs_on_the_cpu_and_memory_is_the_variants(tmp_path):
    proc = _gpu_check("--device", "cuda", "--quick", "--output", str(tmp_path))
    raw = json.loads((tmp_path / "gpu.json").read_text())["results"]
    variants = {v["name"]: v["device"] for v in raw["sweep"]["variants"]}
    assert variants["int8-static"] == "cpu" and variants["baseline"].startswith("cuda")
    assert raw["memory"]["method"] == "cuda_peak_over_resident"
    assert proc.returncode in (0, 1), proc.stderr


def test_dry_run_lists_every_cell_and_carried_wheels_that_fit_and_install(tmp_path):
    """``make perf-gpu ARGS=--dry-run``: the same script on the CPU, then each cell and the
    wheels a lent machine would be given, under the 64 MiB a call carries; exit 0. A carried
    wheel installs with pip, offline, into a folder of its own and is importable from there."""
    out = tmp_path / "out"
    proc = _gpu_check("--dry-run", "--rounds", "2", "--output", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "gpu.json").read_text())
    assert set(doc["cells"]) == SECTIONS and set(doc["results"]) == SECTIONS
    carried = doc["carry"]
    assert {w["name"] for w in carried["wheels"]} == {"torchao", "torch-pruning"}
    assert carried["fits"] and 0 < carried["total_bytes"] < 64 * 2**20
    for name in SECTIONS:
        assert f"  {name}: " in proc.stderr
    assert "MiB of 64 MiB: fits" in proc.stderr
    wheel = out / "carry" / next(w["file"] for w in carried["wheels"]
                                 if w["name"] == "torch-pruning")
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                           "--target", str(target), str(wheel)], capture_output=True, text=True,
                          timeout=scaled(120))
    assert done.returncode == 0, done.stderr
    check = subprocess.run([sys.executable, "-c", "import torch_pruning; print("
                            "torch_pruning.__file__)"], cwd=tmp_path, capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(target)},
                           timeout=scaled(120))
    assert check.returncode == 0 and str(target) in check.stdout, check.stderr
