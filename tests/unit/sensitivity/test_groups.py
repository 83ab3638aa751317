"""The unit of the map is a group: Torch-Pruning's dependency groups (a coupled residual
block is one), a layer's weight for L1, a fused op's quantizers for INT8; a model one graph
cannot span is grouped block by block; a technique with no groups says so."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from benchmarks.sensitivity.groups import Group, check_schedule, find_groups
from optimizers.base import Context, TrainData


def _ctx(shape=(1, 8, 8)):
    x = torch.randn(4, *shape)
    return Context.of(train=TrainData(x, torch.zeros(4, dtype=torch.long)), example_input=x,
                   num_classes=10, in_channels=shape[0])


def test_a_coupled_residual_block_is_one_group():
    from benchmarks.zoo.models import build_model
    torch.manual_seed(0)
    model = build_model("resnet10", 10, 1, (8, 8)).eval()
    groups, info = find_groups(model, "prune.channel", _ctx(), "resnet10")
    assert info["scope"] == "model"
    stem = next(g for g in groups if "conv1" in g.modules)
    # The stem's output, the first block's output and the residual's sum are one width: the
    # stem, the block's second convolution, their batch norms and every reader change
    # together.
    assert {"conv1", "bn1", "layer1.0.conv2", "layer1.0.bn2", "layer1.0.conv1",
            "layer2.0.conv1", "layer2.0.downsample.0"} <= set(stem.modules)
    assert stem.channels == 64
    inner = next(g for g in groups if g.root == "layer1.0.conv1")
    assert inner.modules == ("layer1.0.conv1", "layer1.0.bn1", "layer1.0.conv2")
    # The classifier is never a root: the logits keep their meaning.
    assert all(g.root != "fc" for g in groups)


def test_l1_groups_are_each_layers_weight_and_int8_groups_are_fused_ops():
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1), nn.Flatten(),
                          nn.Linear(8 * 64, 10)).eval()
    l1, _ = find_groups(model, "prune.l1", _ctx(), "m")
    assert [g.modules for g in l1] == [("0",), ("3",), ("5",)]
    static, info = find_groups(model, "int8.static", _ctx(), "m")
    assert info["scope"] == "fx"
    assert [(g.root, g.modules) for g in static] == [("0", ("0", "1", "2")), ("3", ("3",)),
                                                      ("5", ("5",))]
    first = static[0].observers
    assert first[1] == "weight" and all(o.startswith("activation_post_process")
                                        for o in (first[0], first[2]))
    dynamic, _ = find_groups(model, "int8.dynamic", _ctx(), "m")
    assert [g.root for g in dynamic] == ["5"]


def test_a_technique_with_no_groups_on_this_model_names_the_model():
    convs = nn.Sequential(nn.Conv2d(1, 10, 8), nn.Flatten()).eval()
    with pytest.raises(ValueError, match="int8.dynamic finds no groups on model convs.py:build"
                                         ".*has none \\(its last layer, 0, is a Conv2d\\)"):
        find_groups(convs, "int8.dynamic", _ctx(), "convs.py:build")


class Windowed(nn.Module):
    """Stands for windowed attention: a relative-position index (Swin, MaxViT), on whose
    graph Torch-Pruning's group search does not finish, so channel pruning goes block by
    block."""

    def __init__(self, channels):
        super().__init__()
        self.register_buffer("relative_position_index", torch.zeros(1, dtype=torch.long))
        self.proj = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        return self.proj(x)


def test_a_model_one_graph_cannot_span_is_grouped_block_by_block():
    block = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 8, 3, padding=1))
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), block, Windowed(8), nn.Flatten(),
                          nn.Linear(8 * 64, 10)).eval()
    groups, info = find_groups(model, "prune.channel", _ctx(), "windowed")
    assert info["scope"] == "blocks" and "windowed attention" in info["why"]
    assert [(g.root, g.modules) for g in groups] == [("1.0", ("1.0", "1.2"))]


def test_a_schedule_naming_groups_the_model_lacks_or_written_for_another_is_refused():
    groups = [Group("conv1", ("conv1", "bn1"), "prune.channel", 64),
              Group("layer1.0.conv1", ("layer1.0.conv1",), "prune.channel", 64)]
    ok = {"model": "resnet10", "technique": "prune.channel", "groups": {"conv1": 0.5}}
    check_schedule(ok, groups, "resnet10")
    with pytest.raises(ValueError, match="groups model resnet10 does not have for "
                                         "prune.channel: bn1, fc \\(its groups: conv1, "
                                         "layer1.0.conv1\\)"):
        check_schedule({**ok, "groups": {"bn1": 0.5, "fc": 0.25}}, groups, "resnet10")
    with pytest.raises(ValueError, match="written for model seed_cnn; this run's model is "
                                         "resnet10"):
        check_schedule({**ok, "model": "seed_cnn"}, groups, "resnet10")
