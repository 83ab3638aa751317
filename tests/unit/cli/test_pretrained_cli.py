"""Pretrained catalogue models through the CLI, as a user runs them: weights fabricated in a
temporary torch hub cache, an ImageNet-style folder generated here, no network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from helpers import ROOT, run_cli, scaled, torchvision_weights_file

GOLDFISH = "n01443537"  # ImageNet-1k class 1


@pytest.fixture
def imagenet_folder(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "images"
    (folder / GOLDFISH).mkdir(parents=True)
    for i in range(10):
        pixels = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)  # not square: crop works
        Image.fromarray(pixels).save(folder / GOLDFISH / f"{i}.png")
    return folder


@pytest.mark.slow
def test_pretrained_model_scored_as_loaded_on_imagenet_ids(tmp_path, imagenet_folder):
    torch_home = tmp_path / "torch"
    # Weights whose classifier answers class 1 for any image: 100% only if the folder's id
    # maps to index 1, the weights load, and nothing retrains the head.
    torchvision_weights_file(torch_home, "mobilenet_v3_large", favour=1)
    out = tmp_path / "run.json"
    proc = run_cli("run", "--model", "torchvision:mobilenet_v3_large", "--weights", "DEFAULT",
                   "--epochs", "0", "--dataset", f"imagefolder:{imagenet_folder}",
                   "--labels", "imagenet", "--min-time", "0.05", "--quiet",
                   "--json", str(out), "--store", str(tmp_path / "r.db"),
                   env={"TORCH_HOME": str(torch_home), "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    baseline = doc["variants"][0]
    assert baseline["accuracy"] == 1.0
    assert baseline["raw"]["cache"] == {"hits": 0, "misses": 0}  # nothing was trained
    model = baseline["config"]["model"]
    assert model["weights"] == "DEFAULT" and model["head"].startswith("kept")
    assert "no training" in model["baseline"]
    data = doc["environment"]["data"]
    assert data["input_shape"] == [3, 224, 224]
    assert data["pipeline"]["resize"] == 232 and data["pipeline"]["interpolation"] == "bilinear"
    assert data["normalization"]["mean"] == [0.485, 0.456, 0.406]


def test_absent_weights_are_refused_at_once(tmp_path, imagenet_folder):
    args = ["run", "--model", "torchvision:mobilenet_v3_large", "--weights", "DEFAULT",
            "--epochs", "0", "--dataset", f"imagefolder:{imagenet_folder}", "--labels",
            "imagenet", "--store", str(tmp_path / "r.db")]
    env = {"TORCH_HOME": str(tmp_path / "empty"), "HF_HUB_OFFLINE": "1"}
    t0 = time.monotonic()
    proc = run_cli(*args, env=env)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "mobilenet_v3_large-5c1a4163.pth" in lines[0]
    assert str(tmp_path / "empty" / "hub" / "checkpoints") in lines[0]
    assert elapsed < 5, elapsed
    # Why it is fast: the refusal comes before torch is imported at all.
    code = (f"import sys; from benchmarks.cli.main import main; rc = main({args!r}); "
            f"print(rc, 'torch' in sys.modules)")
    probe = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                           text=True, timeout=60, env={**os.environ, **env})
    assert probe.stdout.split() == ["2", "False"], probe.stderr
    assert not (tmp_path / "r.db").exists()  # nothing ran, nothing was stored


@pytest.mark.slow
# Both run alone: the memory admission allows half of what is available, and beside other test
# files CI had 4.3 GiB available where ResNet-18 at 224 asks 2.5 GiB (its accuracy pass scores
# 256 images at once, whatever the batch size) and ResNet-50 about 4 GiB.
@pytest.mark.serial
@pytest.mark.parametrize("model", ["timm:resnet18", "torchvision:resnet50"])
def test_catalogue_models_prune_and_quantize_at_224(tmp_path, model):
    out = tmp_path / "run.json"
    proc = run_cli("run", "--model", model, "--dataset", "synthetic", "--input-shape",
                   "3,224,224", "--batch-size", "8", "--prune", "0.5", "--prune-method",
                   "channel", "--finetune-epochs", "0", "--int8", "static",
                   "--calibration-batches", "1", "--min-time", "0.05", "--timing-rounds", "1",
                   "--quiet", "--json", str(out), "--store", str(tmp_path / "r.db"),
                   timeout=scaled(900))
    assert proc.returncode == 0, proc.stderr
    variants = {v["name"]: v for v in json.loads(out.read_text())["variants"]}
    assert set(variants) == {"baseline", "prune-channel-0.5", "int8-static"}
    pruned = variants["prune-channel-0.5"]
    assert pruned["config"]["prune"]["scope"] == "model"
    assert pruned["params"] < 0.35 * variants["baseline"]["params"]
    assert variants["int8-static"]["config"]["int8"]["path"] == "fx"
    assert all(v["latency_ms"]["p50"] > 0 for v in variants.values())
