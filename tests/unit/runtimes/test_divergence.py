"""Where a runtime's quantized graph parts ways with the float model (issue 34): ONNX Runtime's
QDQ graph of a small CNN stays within rounding of the float model's activations layer by
layer; with one conv's weights mis-scaled, the diagnosis names that layer."""

from __future__ import annotations

import pytest
import torch
from torch import nn

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv3, self.bn3 = nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        x = torch.relu(self.bn3(self.conv3(x)))
        return self.head(x.mean((2, 3)))


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    from benchmarks.runtimes.base import Calibration, export_onnx
    from benchmarks.runtimes.ort import quantize
    torch.manual_seed(0)
    model = Net().eval()
    for bn in (model.bn1, model.bn2, model.bn3):  # statistics as training would leave them
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 2.0)
    folder = tmp_path_factory.mktemp("divergence")
    source = export_onnx(model, torch.randn(1, 3, 16, 16), folder / "net.onnx")
    calibration = Calibration([torch.randn(16, 3, 16, 16) for _ in range(4)])
    return model, quantize(source, folder / "net.int8.onnx", calibration)


def test_a_healthy_graph_stays_within_rounding_layer_by_layer(quantized):
    from benchmarks.runtimes.divergence import parts_ways, parts_ways_line
    model, path = quantized
    found = parts_ways(path, model, torch.randn(8, 3, 16, 16))
    assert [c["module"] for c in found["layers"]] == ["bn1", "bn2", "bn3"]
    assert all("batch norm folded in" in c["op"] for c in found["layers"])
    # Rounding to the nearest step leaves about a quarter of a step on average.
    assert 0.1 < found["layers"][0]["error_steps"] < 0.5
    assert found["first"] is None
    assert parts_ways_line(found).startswith("no quantized layer parts ways alone (3 compared)")


def test_a_mis_scaled_conv_is_named_where_the_outputs_part_ways(quantized, tmp_path):
    from onnx import numpy_helper

    from benchmarks.runtimes.divergence import parts_ways, parts_ways_line
    model, path = quantized
    graph = onnx.load(str(path))
    (scale,) = [t for t in graph.graph.initializer if t.name == "conv2.weight_scale"]
    scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * 3, scale.name))
    broken = tmp_path / "broken.onnx"
    onnx.save(graph, str(broken))
    found = parts_ways(broken, model, torch.randn(8, 3, 16, 16))
    assert found["first"]["module"] == "bn2"  # conv2, its batch norm folded in
    assert found["layers"][0]["error_steps"] < 0.5 < 2 < found["first"]["error_steps"]
    assert parts_ways_line(found).startswith("parts ways at bn2 (Conv with its batch norm "
                                             "folded in)")
