"""SQNR and cosine similarity on known signals, per-layer diagnostics of real variants, and
the examples that flipped."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from benchmarks.report.stats import pack_bits
from benchmarks.sensitivity.diagnostics import cosine, flips, layer_diagnostics, sqnr_db


def test_sqnr_of_known_signals():
    torch.manual_seed(0)
    x = torch.randn(1000, dtype=torch.float64)
    noise = torch.randn(1000, dtype=torch.float64)
    for target_db in (0.0, 20.0, 40.0):
        # Noise scaled so its power is the signal's over 10^(dB/10): SQNR is that many dB.
        scaled = noise * (x.norm() / noise.norm()) / math.sqrt(10 ** (target_db / 10))
        assert sqnr_db(x, x + scaled) == pytest.approx(target_db, abs=1e-6)
    assert sqnr_db(x, x) == math.inf
    assert sqnr_db(x, torch.zeros(1000, dtype=torch.float64)) == pytest.approx(0.0)
    assert sqnr_db(torch.zeros(3), torch.ones(3)) is None
    assert sqnr_db(x, x[:10]) is None


def test_cosine_of_known_signals():
    x = torch.tensor([1.0, 0.0])
    assert cosine(x, torch.tensor([0.0, 2.0])) == pytest.approx(0.0)
    assert cosine(x, torch.tensor([3.0, 0.0])) == pytest.approx(1.0)
    assert cosine(x, -x) == pytest.approx(-1.0)
    assert cosine(x, torch.tensor([1.0, 1.0])) == pytest.approx(1 / math.sqrt(2))


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_sqnr_reads_quantized_tensors():
    torch.manual_seed(0)
    x = torch.rand(200_000) * 2 - 1
    step = 2 / 255
    q = torch.quantize_per_tensor(x, scale=step, zero_point=128, dtype=torch.quint8)
    # A uniform signal on [-1, 1] (power 1/3) rounded to a grid of ``step`` (noise power
    # step^2 / 12): 20 log10(2 / step) = 48.13 dB.
    assert sqnr_db(x, q) == pytest.approx(20 * math.log10(2 / step), abs=0.1)


def _tiny():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                         nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 10)).eval()


def test_a_perturbed_layer_shows_where_the_outputs_start_to_drift():
    base = _tiny()
    with torch.no_grad():
        base[2].bias.zero_()  # so the layer's output is scaled by exactly 1.1
    variant = copy.deepcopy(base)
    with torch.no_grad():
        variant[2].weight.mul_(1.1)
    report = layer_diagnostics(base, variant, torch.randn(4, 1, 8, 8))
    by_layer = {r["layer"]: r for r in report["layers"]}
    assert set(by_layer) == {"0", "2", "5"} and report["skipped"] == 0
    assert by_layer["0"]["sqnr_db"] == 200.0 and by_layer["0"]["cosine"] == pytest.approx(1.0)
    assert by_layer["2"]["sqnr_db"] == pytest.approx(20.0, abs=0.01)  # 10% of the signal
    assert by_layer["5"]["sqnr_db"] < 200.0
    assert report["output"]["sqnr_db"] == by_layer["5"]["sqnr_db"]


def test_an_int8_op_is_compared_with_the_batch_norm_and_relu_it_folds_in():
    from optimizers import quantization
    torch.manual_seed(0)
    base = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Flatten(), nn.Linear(8 * 64, 10)).eval()
    with torch.no_grad():
        base[1].running_mean.uniform_(-1, 1)
        base[1].running_var.uniform_(0.5, 2)
    x = torch.randn(16, 1, 8, 8)
    quantization.select_engine()
    int8 = quantization.static_fx(copy.deepcopy(base), [x])
    report = layer_diagnostics(base, int8, x)
    by_layer = {r["layer"]: r for r in report["layers"]}
    # Against the raw convolution (before its batch norm and ReLU) it would read ~0 dB.
    assert by_layer["0"]["sqnr_db"] > 25 and by_layer["4"]["sqnr_db"] > 20


def test_a_pruned_layer_is_skipped_the_one_reading_it_is_compared():
    from optimizers import pruning
    from optimizers.base import Context, TrainData
    from optimizers.settings import PruneSettings
    base = _tiny()
    x = torch.randn(4, 1, 8, 8)
    ctx = Context.of(train=TrainData(x, torch.zeros(4, dtype=torch.long)), example_input=x,
                  num_classes=10, in_channels=1)
    pruned = pruning.apply(base, PruneSettings(0.5, "channel", 0), ctx).model
    report = layer_diagnostics(base, pruned, x)
    assert [r["layer"] for r in report["layers"]] == ["5"] and report["skipped"] == 2


def test_a_student_is_compared_by_its_output_only():
    base, student = _tiny(), nn.Sequential(nn.Flatten(), nn.Linear(64, 10)).eval()
    report = layer_diagnostics(base, student, torch.randn(2, 1, 8, 8), corresponds=False)
    assert report["layers"] == [] and "student" in report["note"]
    assert report["output"]["cosine"] is not None


def test_flips_from_correctness_bits():
    base = [True, True, False, False, True]
    mine = [True, False, True, False, False]
    found = flips(pack_bits(base), pack_bits(mine), 5)
    assert found["became_wrong"] == [1, 4] and found["became_right"] == [2]
    assert found["counts"] == {"became_wrong": 2, "became_right": 1}
