"""A schedule is a setting of the technique: per-group ratios for channel and L1 pruning,
float groups kept for static and dynamic INT8, each recorded in the variant's config."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from optimizers import pruning, quantization
from optimizers.base import Context, TrainData
from optimizers.settings import Int8Settings, PruneSettings


def _ctx(x):
    return Context.of(train=TrainData(x, torch.zeros(len(x), dtype=torch.long), 8),
                   example_input=x[:4], num_classes=10, in_channels=1)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                         nn.Flatten(), nn.Linear(16 * 64, 10)).eval()


def _schedule(technique, groups):
    return json.dumps({"technique": technique, "groups": groups, "note": "kept as written"})


def _widths(model):
    return {n: tuple(m.weight.shape[:2]) for n, m in model.named_modules()
            if isinstance(m, (nn.Conv2d, nn.Linear))}


def test_a_channel_schedule_prunes_each_named_group_by_its_own_ratio():
    model, x = _model(), torch.randn(8, 1, 8, 8)
    settings = PruneSettings(0.0, "channel", 0,
                             schedule=_schedule("prune.channel", {"0": 0.5, "4": 0.25}))
    out = pruning.apply(model, settings, _ctx(x))
    assert _widths(out.model) == {"0": (8, 1), "2": (16, 8), "4": (12, 16), "7": (10, 768)}
    config = out.config["prune"]
    assert config["schedule"]["groups"] == {"0": 0.5, "4": 0.25}
    assert config["schedule"]["note"] == "kept as written"
    assert out.model(x).shape == (8, 10)


def test_groups_a_schedule_leaves_out_take_the_ratio():
    model, x = _model(), torch.randn(8, 1, 8, 8)
    settings = PruneSettings(0.5, "channel", 0,
                             schedule=_schedule("prune.channel", {"0": 0.0}))
    widths = _widths(pruning.apply(model, settings, _ctx(x)).model)
    assert widths["0"] == (16, 1) and widths["2"] == (8, 16) and widths["4"] == (8, 8)


def test_an_l1_schedule_sets_each_layers_sparsity():
    model, x = _model(), torch.randn(8, 1, 8, 8)
    settings = PruneSettings(0.0, "l1", 0,
                             schedule=_schedule("prune.l1", {"0": 0.5, "7": 0.25}))
    layers = pruning.apply(model, settings, _ctx(x)).layer_sparsity
    assert layers["0"] == pytest.approx(0.5, abs=0.01)
    assert layers["7"] == pytest.approx(0.25, abs=0.01)
    assert layers["2"] == 0.0 and layers["4"] == 0.0


def test_a_schedule_naming_layers_the_model_lacks_is_refused():
    model, x = _model(), torch.randn(8, 1, 8, 8)
    for technique in ("prune.channel", "prune.l1"):
        settings = PruneSettings(0.0, technique.split(".")[1], 0,
                                 schedule=_schedule(technique, {"features.9": 0.5}))
        with pytest.raises(ValueError, match="does not have: features.9"):
            pruning.apply(model, settings, _ctx(x))


def test_a_schedule_changes_the_cache_key_and_only_then():
    ctx = _ctx(torch.randn(4, 1, 8, 8))
    plain = PruneSettings(0.5, "channel")
    scheduled = PruneSettings(0.5, "channel", schedule=_schedule("prune.channel", {"0": 0.5}))
    assert pruning.cache_key(plain, ctx) == ("prune", "channel", 0.5, 2, 1e-4, 0)
    assert pruning.cache_key(scheduled, ctx)[:6] == pruning.cache_key(plain, ctx)
    assert pruning.cache_key(scheduled, ctx) != pruning.cache_key(plain, ctx)


def test_static_int8_keeps_a_schedules_float_groups_float():
    model, x = _model(), torch.randn(16, 1, 8, 8)
    settings = Int8Settings("static", 2, schedule=_schedule(
        "int8.static", {"0": 1, "2": 0, "4": 1, "7": 0}))
    out = quantization.apply(model, settings, _ctx(x))
    quantized = {name.split("._packed_params")[0] for name in
                 quantization.int8_weight_modules(out.model)}
    assert {"0", "4"} <= quantized and not {"2", "7"} & quantized
    assert out.config["int8"]["schedule"]["groups"]["2"] == 0
    assert out.model(x).shape == (16, 10)
    # An export rebuilds the same structure from the recorded config.
    rebuilt = quantization.rebuild_structure(_model(), out.config["int8"], x[:2])
    assert set(quantization.int8_weight_modules(rebuilt)) == \
        set(quantization.int8_weight_modules(out.model))


def test_dynamic_int8_keeps_a_schedules_float_layers_float():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).eval()
    x = torch.randn(8, 1, 8, 8)
    settings = Int8Settings("dynamic", schedule=_schedule("int8.dynamic", {"1": 0, "3": 1}))
    out = quantization.apply(model, settings, _ctx(x))
    assert type(out.model[1]) is nn.Linear and type(out.model[3]) is not nn.Linear


def test_the_schedule_must_fit_the_mode():
    text = _schedule("int8.static", {"0": 1})
    with pytest.raises(ValueError, match="needs int8.mode static, got 'dynamic'"):
        Int8Settings("dynamic", schedule=text)
