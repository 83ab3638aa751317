"""Every registered model builds for the data set, trains one step and is measured."""

import pytest
import torch
import torch.nn.functional as F

from benchmarks.measure.latency import measure_latency
from benchmarks.measure.memory import measure_peak_memory
from benchmarks.zoo.models import (
    build_model,
    check_input_fits,
    create_model,
    default_student,
    list_models,
    model_entry,
)
from optimizers.counting import count_flops

SHAPES = [(1, 8, 8), (3, 32, 32)]


@pytest.mark.parametrize("name", list_models())
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_model_trains_one_step_and_measures(name, shape):
    torch.manual_seed(0)
    c, h, w = shape
    model = create_model(name, num_classes=7, in_channels=c, input_size=(h, w))
    x, y = torch.randn(4, c, h, w), torch.randint(0, 7, (4,))
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))
    model.eval()
    assert model(x).shape == (4, 7)
    tracker = measure_latency(model, x, torch.device("cpu"), min_runs=3, min_time_s=0,
                                      warmup=1)
    assert len(tracker.samples_ms) == 3
    peak, _ = measure_peak_memory(model, x, torch.device("cpu"))
    assert peak > 0
    assert count_flops(model, x[:1], torch.device("cpu")).dense > 0


@pytest.mark.parametrize("name", list_models())
def test_students_belong_to_the_family(name):
    student = default_student(name)
    if student is not None:
        assert model_entry(student).family == model_entry(name).family
        a = sum(p.numel() for p in create_model(name, 10, 1, (8, 8)).parameters())
        b = sum(p.numel() for p in create_model(student, 10, 1, (8, 8)).parameters())
        assert b < a


def test_unknown_model_lists_the_choices():
    with pytest.raises(ValueError, match="unknown model 'nope'; choose one of .*seed_cnn"):
        create_model("nope", 10, 1)


def test_resnet_uses_the_standard_stem_for_larger_images():
    small = create_model("resnet18", 10, 3, (32, 32))
    large = create_model("resnet18", 10, 3, (64, 64))
    assert small.conv1.kernel_size == (3, 3) and large.conv1.kernel_size == (7, 7)


def test_user_factory(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text("import torch.nn as nn\n"
                 "def build(num_classes, in_channels):\n"
                 "    return nn.Sequential(nn.Flatten(), nn.LazyLinear(num_classes))\n"
                 "def bad(num_classes, in_channels):\n    return 42\n"
                 "def boom(num_classes, in_channels):\n    raise RuntimeError('nope')\n")
    model = build_model(f"{f}:build", 10, 1, (8, 8))
    check_input_fits(model, torch.randn(2, 1, 8, 8), 10, "mine")
    with pytest.raises(ValueError, match="returned int, not a torch.nn.Module"):
        build_model(f"{f}:bad", 10, 1, (8, 8))
    with pytest.raises(ValueError, match="raised RuntimeError: nope"):
        build_model(f"{f}:boom", 10, 1, (8, 8))
    with pytest.raises(ValueError, match="has no function 'missing'"):
        build_model(f"{f}:missing", 10, 1, (8, 8))
    with pytest.raises(ValueError, match="does not exist"):
        build_model(f"{tmp_path / 'absent.py'}:build", 10, 1, (8, 8))
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    with pytest.raises(ValueError, match="failed to import: ModuleNotFoundError"):
        build_model(f"{broken}:build", 10, 1, (8, 8))


def test_user_factory_outside_allowed_folder_is_refused(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text("def build(n, c):\n    raise SystemExit('must never run')\n")
    allowed = tmp_path / "models"
    allowed.mkdir()
    with pytest.raises(ValueError, match="outside the allowed models folder"):
        build_model(f"{f}:build", 10, 1, (8, 8), allowed_dir=allowed)


def test_input_shape_that_does_not_fit_is_one_line():
    model = create_model("seed_cnn", 10, 1, (8, 8))
    with pytest.raises(ValueError, match="input shape 1x16x16 does not fit model seed_cnn"):
        check_input_fits(model, torch.randn(2, 1, 16, 16), 10, "seed_cnn")
