"""Export: a stored variant rebuilt from the weights cache and written as safetensors (with its
architecture), a torch.export program and ONNX; every artefact reloaded independently and
scored on the run's test split; refusals in one line, exit 2, nothing written. The worker's
and the Results page's exports are in tests/system/test_export_jobs.py; the sweep they share is
conftest's ``export_sweep``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.export import codec, files, load, writers
from benchmarks.export.variant import export_variant
from benchmarks.store.database import ResultsStore
from helpers import FAST_CLI


def stored(store: Path, run_id: str, name: str) -> dict:
    return next(v for v in ResultsStore(store).run(run_id)["variants"] if v["name"] == name)


def split_of(card: dict):
    """The run's test split, normalised as the card says its input must be."""
    from benchmarks.zoo.datasets import load_dataset
    data = load_dataset(card["dataset"])
    norm = card["input"]["normalization"]
    assert norm == data.normalization  # the card names what the model expects
    return list(data.batches("test", 256))


def score(fn, batches) -> tuple[float, torch.Tensor]:
    logits = torch.cat([fn(x).float() for x, _ in batches])
    labels = torch.cat([y for _, y in batches])
    return (logits.argmax(1) == labels).float().mean().item(), logits


@pytest.mark.parametrize("name", ["prune-channel-0.5", "distill-T4", "int8-static", "amp"])
def test_export_round_trips(export_sweep, tmp_path, cli, name):
    store, run_id = export_sweep
    out = tmp_path / name
    p = cli("export", run_id, name, "--out", str(out), "--store", str(store))
    assert p.returncode == 0, p.stderr
    card = json.loads((out / files.CARD_NAME).read_text())
    variant = stored(store, run_id, name)
    accuracy = variant["accuracy"]
    assert card["variant"] == name and card["run_id"] == run_id
    assert card["techniques"] == variant["techniques"] and card["settings"] == variant["config"]
    assert card["metrics"]["accuracy_ci"] == variant["accuracy_ci"]
    assert card["environment"]["torch"] == torch.__version__
    # Every file is hashed in the card; nothing else is in the folder; one mode for all.
    assert set(card["files"]) | {files.CARD_NAME} == {f.name for f in out.iterdir()}
    assert {f.stat().st_mode & 0o777 for f in out.iterdir()} == {files.FILE_MODE}
    for file, entry in card["files"].items():
        assert files.sha256(out / file) == entry["sha256"]
    batches = split_of(card)

    # 1. safetensors + architecture, rebuilt without the store or the cache.
    assert card["formats"]["safetensors"]["status"] == "written"
    loaded = load.load_exported(out)
    acc, torch_logits = score(loaded, batches)
    assert abs(acc - accuracy) <= 0.001
    if name == "prune-channel-0.5":  # the pruned shapes are in the architecture
        pruned = card["architecture"]["pruned"]
        assert pruned["0"]["tensors"]["weight"][0] == 32 and pruned["2"]["attributes"] == {
            "in_channels": 32, "out_channels": 64}

    # 2. the ExportedProgram, where PyTorch can trace the variant.
    pt2 = card["formats"]["pt2"]
    if name == "int8-static":  # FX INT8's packed weights are TorchScript objects export cannot trace
        assert pt2["status"] == "not exported" and "torch.export" in pt2["reason"]
        assert not (out / files.PT2_NAME).exists()
    else:
        program = torch.export.load(str(out / files.PT2_NAME)).module()
        with torch.inference_mode():
            acc, _ = score(program, batches)
        assert abs(acc - accuracy) <= 0.001

    # 3. ONNX for the float variants, under onnxruntime.
    onnx = card["formats"]["onnx"]
    if name == "int8-static":
        assert onnx["status"] == "not exported" and "float variants" in onnx["reason"]
        return
    import onnxruntime
    session = onnxruntime.InferenceSession(str(out / files.ONNX_NAME),
                                           providers=["CPUExecutionProvider"])
    acc, onnx_logits = score(lambda x: torch.from_numpy(
        session.run(None, {"input": x.numpy()})[0]), batches)
    reference = torch_logits
    if name == "amp":  # the ONNX graph is fp32: held to the fp32 weights' logits
        assert "fp32 graph" in onnx["note"]
        loaded.autocast = None
        _, reference = score(loaded, batches)
    assert np.allclose(onnx_logits, reference, **writers.ONNX_TOLERANCE)
    assert abs(acc - accuracy) <= 0.001 or name == "amp"


def test_refusals_are_one_line_exit_2_and_write_nothing(export_sweep, tmp_path, cli):
    store, run_id = export_sweep
    out = tmp_path / "out"
    file = tmp_path / "a-file"
    file.write_text("x")
    empty_cache = tmp_path / "empty-cache"
    cases = [
        (["no-such-run", "baseline", "--out", str(out)], {}, "'no-such-run' is not in"),
        ([run_id, "no-such-variant", "--out", str(out)], {}, "its variants: baseline"),
        ([run_id, "distill-T4", "--out", str(file)], {}, "is a file"),
        # Trained weights gone from the cache: never retrained for an export.
        ([run_id, "distill-T4", "--out", str(out)],
         {"COMPRESSION_BENCH_CACHE": str(empty_cache)}, "cannot be rebuilt exactly"),
    ]
    for args, env, needle in cases:
        p = cli("export", *args, "--store", str(store), env=env)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.startswith("error: ") and p.stderr.count("\n") == 1, p.stderr
        assert needle in p.stderr, p.stderr
    assert not out.exists() and file.read_text() == "x"


def test_a_failed_variant_and_a_variant_that_no_longer_reproduces_are_refused(export_sweep,
                                                                             tmp_path):
    store_path, run_id = export_sweep
    store = ResultsStore(store_path)
    run = store.run(run_id)
    copy_id = store.start_run(model=run["model"], dataset=run["dataset"], device=run["device"],
                              spec=run["spec"], environment=run["environment"])
    for position, variant in enumerate(run["variants"]):
        if variant["name"] == "amp":
            variant = {**variant, "error": "build failed: boom"}
        if variant["name"] == "distill-T4":  # stored predictions no rebuild can match
            bits = bytearray(__import__("base64").b64decode(variant["raw"]["correct_bits"]))
            bits[0] ^= 0xFF
            variant["raw"]["correct_bits"] = __import__("base64").b64encode(bytes(bits)).decode()
        store.add_variant(copy_id, variant, position)
    with pytest.raises(ValueError, match="failed in run") as failed:
        export_variant(store, copy_id, "amp", tmp_path / "a")
    with pytest.raises(ValueError, match="no longer reproducible") as moved:
        export_variant(store, copy_id, "distill-T4", tmp_path / "d")
    for err in (failed, moved):
        assert "\n" not in str(err.value)
    assert not (tmp_path / "a").exists() and not (tmp_path / "d").exists()


def test_int8_weights_round_trip_through_safetensors():
    """INT8 state (per-channel weights, packed Linear parameters, their dtype) as plain
    tensors and back, bit for bit."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    from optimizers.quantization import select_engine
    select_engine()
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 36, 3)).eval()
    x = torch.randn(8, 1, 8, 8)
    prepared = prepare_fx(model, get_default_qconfig_mapping("x86"), example_inputs=(x,))
    prepared(x)
    quantized = convert_fx(prepared)
    tensors, layout = codec.encode_state(quantized.state_dict())
    assert all(not t.is_quantized for t in tensors.values())
    state = codec.decode_state(tensors, json.loads(json.dumps(layout)))
    twin = convert_fx(prepare_fx(torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(4 * 36, 3)).eval(), get_default_qconfig_mapping("x86"),
        example_inputs=(x,)))
    twin.load_state_dict(state, strict=True)
    assert torch.equal(twin(x), quantized(x))


BRANCHY = '''
import torch
from torch import nn


class ShapeBranch(nn.Module):
    """Python control flow on a shape: FX cannot trace it, so static INT8 takes pt2e."""

    def __init__(self, num_classes, in_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, 8, 3)
        self.fc = nn.Linear(8 * 36, num_classes)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        if x.shape[-1] > 4:
            x = x * 1.0
        return self.fc(x.flatten(1))


def build(num_classes, in_channels):
    return ShapeBranch(num_classes, in_channels)
'''


@pytest.mark.slow
def test_user_models_ship_their_source_and_pt2e_int8_exports_as_a_program(tmp_path, cli):
    """A user's factory file travels with its weights (channel-pruned, BatchNorm and SE
    layers included); torchao's pt2e INT8 graph (what static INT8 takes where FX cannot
    trace) exports as a .pt2, and the card says why its weights cannot be rebuilt from
    modules."""
    from helpers import ROOT
    store = tmp_path / "s.db"
    branchy = tmp_path / "branchy.py"
    branchy.write_text(BRANCHY)
    for model, args in ((f"{ROOT}/models/se_net.py:build", ["--prune", "0.5", "--prune-method",
                                                            "channel"]),
                        (f"{branchy}:build", ["--int8", "static"])):
        p = cli("run", "--model", model, *args, *FAST_CLI, "--store", str(store))
        assert p.returncode == 0, p.stderr
    branch_run, se_run = (r["run_id"] for r in ResultsStore(store).runs())

    out = tmp_path / "se"
    assert cli("export", se_run, "prune-channel-0.5", "--out", str(out), "--store",
               str(store)).returncode == 0
    card = json.loads((out / files.CARD_NAME).read_text())
    assert card["architecture"]["source"]["kind"] == "file"
    assert (out / files.SOURCE_NAME).read_text() == (ROOT / "models/se_net.py").read_text()
    assert {n: f["status"] for n, f in card["formats"].items()} == dict.fromkeys(
        files.FORMATS, "written")
    pruned = card["architecture"]["pruned"]
    assert any("num_features" in c["attributes"] for c in pruned.values())  # BatchNorm too
    acc, _ = score(load.load_exported(out), split_of(card))
    assert abs(acc - stored(store, se_run, "prune-channel-0.5")["accuracy"]) <= 0.001

    out = tmp_path / "branchy"
    assert cli("export", branch_run, "int8-static", "--out", str(out), "--store",
               str(store)).returncode == 0
    card = json.loads((out / files.CARD_NAME).read_text())
    assert card["settings"]["int8"]["path"] == "pt2e"
    assert card["formats"]["pt2"]["status"] == "written"
    assert card["formats"]["safetensors"]["status"] == "not exported"
    assert "pt2e" in card["formats"]["safetensors"]["reason"]
    assert load.PT2E_OPS_MODULE in card["formats"]["pt2"]["note"]
    acc, _ = score(load.load_program(out), split_of(card))
    assert abs(acc - stored(store, branch_run, "int8-static")["accuracy"]) <= 0.001


# -- where the files go: a non-empty folder, one mode, a full disk ------------------------------

def test_a_non_empty_out_folder_needs_force_and_every_file_has_one_mode(export_sweep,
                                                                          tmp_path, cli):
    import stat
    store, run_id = export_sweep
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    p = cli("export", run_id, "int8-static", "--out", str(out), "--store", str(store))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "is not empty (1 entries: notes.txt)" in p.stderr and "--force" in p.stderr
    assert [f.name for f in out.iterdir()] == ["notes.txt"]
    p = cli("export", run_id, "int8-static", "--out", str(out), "--store", str(store), "--force")
    assert p.returncode == 0, p.stderr
    assert (out / "notes.txt").read_text() == "mine"  # --force replaces the export's files
    exported = [f for f in out.iterdir() if f.name != "notes.txt"]
    assert {f.name for f in exported} >= {files.CARD_NAME, files.WEIGHTS_NAME}
    assert {stat.S_IMODE(f.stat().st_mode) for f in exported} == {files.FILE_MODE}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging folder left
    zipped = files.archive(out)
    assert stat.S_IMODE(zipped.stat().st_mode) == files.FILE_MODE
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "out.zip"]


def test_a_full_disk_during_an_export_is_one_line_and_leaves_nothing(export_sweep, tmp_path,
                                                                      monkeypatch):
    """Injected: the weights' writer fails with ENOSPC after writing part of its file."""
    import errno

    import safetensors.torch

    from benchmarks.spec.atomic import DiskFull
    store, run_id = export_sweep

    def full(tensors, path, metadata=None):
        Path(path).write_bytes(b"\0" * 4096)
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(safetensors.torch, "save_file", full)
    with pytest.raises(DiskFull) as caught:
        export_variant(ResultsStore(store), run_id, "int8-static", tmp_path / "out")
    assert str(caught.value).startswith(f"no space left on device in {tmp_path} (")
    assert "model.safetensors" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_an_export_onto_a_real_full_tmpfs_exits_2_and_leaves_nothing(export_sweep, tmp_path,
                                                                       cli):
    from helpers import small_tmpfs
    store, run_id = export_sweep
    with small_tmpfs(tmp_path / "mnt", "600k", leave_free=50_000) as mnt:
        p = cli("export", run_id, "int8-static", "--out", str(mnt / "out"), "--store", str(store))
        assert p.returncode == 2, p.stderr
        assert p.stderr.startswith(f"error: no space left on device in {mnt} (")
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
        assert sorted(f.name for f in mnt.iterdir()) == ["filler"]
