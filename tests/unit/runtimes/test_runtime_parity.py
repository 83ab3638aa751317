"""Each runtime on a trained toy model (the seed CNN on digits, two epochs: parity means
something only when the model predicts more than one class): fp32 under every runtime agrees
with eager to float rounding; static INT8 quantized by ONNX Runtime and by NNCF, on the
engine's calibration batches, stays within a few examples of eager; precision is asked for
and recorded; what a runtime cannot do is one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from benchmarks.runtimes import Calibration, RuntimeConfig, prepare  # noqa: E402
from benchmarks.runtimes.parity import parity  # noqa: E402
from benchmarks.spec import runtimes as registry  # noqa: E402
from helpers import ROOT, scaled  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(digits):
    from benchmarks.zoo.models import build_model
    from optimizers.training import fit
    torch.manual_seed(0)
    model = build_model("seed_cnn", digits.num_classes, digits.in_channels, digits.input_size)
    data = digits.train_data(32, 0)
    fit(model, data.epochs(("parity-test",)), 2, device=torch.device("cpu"), lr=1e-3, seed=0)
    model.eval()
    x = torch.cat([x for x, _ in digits.batches("test", 512)])
    y = torch.cat([y for _, y in digits.batches("test", 512)])
    calibration = [b for b, *_ in data.epochs(("calibration",))()][:4]
    with torch.inference_mode():
        reference = model(x)
    assert len(set(reference.argmax(1).tolist())) == 10  # trained: every class predicted
    return model, x, y, reference, calibration


def _available(name):
    if not registry.get(name).available():
        pytest.skip(f"{name} is not installed")


@pytest.mark.parametrize("name", ["eager", "compile", "ort", "openvino"])
def test_fp32_under_each_runtime_matches_eager(trained, tmp_path, name):
    _available(name)
    model, x, y, reference, _ = trained
    ready = prepare(RuntimeConfig(name, threads=1), model, x[:32], workdir=tmp_path)
    with torch.inference_mode():
        logits = ready.fn(x)
    figures = parity(reference, logits, y)
    assert figures["max_abs"] < 1e-3 and figures["top1_agree"] == 1.0, figures
    assert figures["p_value_vs_eager"] == 1.0 and figures["badge"] == "ok"
    assert ready.precision == "fp32" and ready.ops["verdict"] == "float"
    assert ready.ops["float_kernels"] == 3  # two convs and the classifier
    if name == "openvino":  # fp32 asked for, and the hint the compiled model reports kept
        assert ready.details["precision_hint"] == {"asked": "f32", "recorded": "f32"}
    if name in ("ort", "openvino"):
        assert all(p.exists() for p in ready.artefacts)


@pytest.mark.parametrize("name", ["ort", "openvino"])
def test_static_int8_by_the_runtimes_own_quantizer(trained, tmp_path, name):
    _available(name)
    model, x, y, reference, batches = trained
    calibration = Calibration(batches)
    ready = prepare(RuntimeConfig(name, precision="int8"), model, x[:32],
                    calibration=calibration, workdir=tmp_path)
    figures = parity(reference, ready.fn(x), y)
    assert ready.precision == "int8" and ready.ops["int8_real"]
    assert ready.ops["int_kernels"] == 3 and ready.ops["float_kernels"] == 0
    assert figures["top1_agree"] >= 0.95 and figures["p_value_vs_eager"] >= 0.05, figures
    if name == "ort":
        assert ready.details["quantization"]["activations"] == "uint8"
        assert ready.details["quantization"]["calibration_samples"] == calibration.samples


def test_precision_that_a_runtime_lacks_is_said(trained, tmp_path):
    model, x, *_ = trained
    if registry.get("ort").available():
        with pytest.raises(RuntimeError, match="fp32 only"):
            prepare(RuntimeConfig("ort", precision="bf16"), model, x[:8], workdir=tmp_path)
    if registry.get("openvino").available():
        ready = prepare(RuntimeConfig("openvino", precision="bf16"), model, x[:8],
                        workdir=tmp_path)
        assert ready.details["precision_hint"]["asked"] == "bf16"
        # This CPU (AVX2, no bf16) runs it fp32, and the cell says so; one with bf16, bf16.
        assert ready.precision in ("fp32", "bf16")
        if ready.precision == "fp32":
            assert "ran fp32" in ready.notes[0]
    with pytest.raises(RuntimeError, match="quantizes INT8 itself"):
        prepare(RuntimeConfig("ort", precision="int8"), model, x[:8], workdir=tmp_path)


def test_a_runtime_config_refuses_bad_values_in_one_line():
    with pytest.raises(ValueError, match="unknown runtime 'tensorrt'"):
        RuntimeConfig("tensorrt")
    with pytest.raises(ValueError, match="runtime.threads"):
        RuntimeConfig("ort", threads=0)
    with pytest.raises(RuntimeError, match="openvino runs on cpu"):
        RuntimeConfig("openvino", device="cuda")


def test_openvino_and_nncf_send_no_telemetry():
    """Imported in a fresh interpreter (not under pytest, whose presence NNCF already reads
    as a reason to stay quiet): NNCF's switch is set and openvino_telemetry cannot load, so
    both libraries take their no-telemetry stubs."""
    if not registry.get("openvino").available():
        pytest.skip("openvino is not installed")
    code = ("import sys, benchmarks.runtimes.openvino, os, nncf\n"
            "from nncf.telemetry import wrapper\n"
            "print(sys.modules['openvino_telemetry'] is None, os.environ['NNCF_CI'],\n"
            "      isinstance(wrapper.telemetry, wrapper.NNCFTelemetryStub))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=scaled(120))
    assert out.stdout.split() == ["True", "1", "True"], out.stderr[-500:]


def test_closer_to_fp32_names_the_side_only_beyond_noise():
    """Twenty examples where only eager parts from the float model's top-1: the runtime's
    quantization is the more faithful, beyond noise; two such examples are within it."""
    import torch

    from benchmarks.runtimes.parity import closer_to_fp32
    n = 200
    fp32 = torch.nn.functional.one_hot(torch.arange(n) % 10, 10).float()
    runtime = fp32.clone()
    eager = fp32.clone()
    eager[:20] = torch.roll(fp32[:20], 1, dims=1)
    versus = closer_to_fp32(fp32, eager, runtime)
    assert versus["closer"] == "runtime" and versus["p_value"] < 0.05
    assert (versus["runtime_agree"], versus["eager_agree"]) == (1.0, 0.9)
    assert (versus["only_runtime_agrees"], versus["only_eager_agrees"]) == (20, 0)
    assert closer_to_fp32(fp32, runtime, eager)["closer"] == "eager"
    eager = fp32.clone()
    eager[:2] = torch.roll(fp32[:2], 1, dims=1)
    assert closer_to_fp32(fp32, eager, runtime)["closer"] == "neither, within noise"
