"""Helpers the tests share (imported by name: ``from helpers import ...``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
    code = ("import time;"
            "from benchmarks.service.store import ResultsStore;"
            f"s=ResultsStore({str(store_path)!r});"
            "r=s.start_run(model='m',dataset='d',device='cpu',spec={},environment={});"
            "s.add_variant(r, {'name':'baseline'}); print(r, flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()




def torchvision_weights_file(torch_home: Path, name: str, weights: str = "DEFAULT",
                             favour: int | None = None):
    """Fabricated weights of torchvision's ``name`` (seeded random, 1000 classes) saved where
    torch hub keeps ``weights``' file under ``torch_home``; with ``favour``, the classifier
    answers that class for every input. Returns (path, state dict)."""
    import torch
    from torchvision.models import get_model

    from benchmarks import catalogue
    torch.manual_seed(1)
    model = get_model(name, num_classes=1000)
    if favour is not None:
        head = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
        with torch.no_grad():
            head.weight.zero_()
            head.bias.zero_()
            head.bias[favour] = 10.0
    entry = catalogue.entry("torchvision", name)
    url = entry["urls"][entry["default"] if weights == "DEFAULT" else weights]
    target = Path(torch_home) / "hub" / "checkpoints" / os.path.basename(url)
    target.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), target)
    return target, model.state_dict()
