"""The op census on hand-built graphs: ONNX graphs written node by node (float convs between
quantize/dequantize pairs, fused QLinearConv, a plain fp32 graph), one of them run through
ONNX Runtime's own optimiser on purpose so that its convs stay float; OpenVINO runtime layers;
PyTorch's FX INT8 modules and a graph that computes in float between quantize/dequantize
calls. Its verdict: INT8 for real, "INT8 in name only", or float."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.runtimes.census import (
    NAME_ONLY,
    REAL,
    count_onnx,
    count_openvino,
    module_census,
    onnx_census,
    verdict,
)

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def test_verdict_is_real_from_half_of_the_convs_and_matmuls():
    assert verdict(2, 2, 4, source="x").int8_real
    assert verdict(2, 2, 4, source="x").verdict == REAL
    # Fewer than half on integer kernels: in name only, however many Q/DQ nodes there are.
    assert verdict(1, 2, 4, source="x").verdict == NAME_ONLY
    assert not verdict(1, 2, 4, source="x").int8_real
    # Q/DQ around nothing but float kernels is INT8 in name only too; no Q/DQ is float.
    assert verdict(0, 3, 2, source="x").verdict == NAME_ONLY
    assert verdict(0, 3, 0, source="x").verdict == "float"


def test_onnx_op_names_whatever_their_domain():
    # ResNet-18 as ONNX Runtime optimised it with signed activations (S8S8), counted here:
    # 9 QLinearConv + a QGemm against 11 float Conv.
    ops = count_onnx(["QLinearConv"] * 9 + ["QGemm"] + ["Conv"] * 11 + ["QuantizeLinear"] * 22
                     + ["DequantizeLinear"] * 41 + ["Add"] * 8, "hand")
    assert (ops.int_kernels, ops.float_kernels, ops.quant_dequant) == (10, 11, 63)
    assert ops.verdict == NAME_ONLY and ops.total_ops == 92
    fp32 = count_onnx(["Conv"] * 20 + ["Gemm", "ReduceMean", "Reshape"], "hand")
    assert fp32.verdict == "float" and fp32.float_kernels == 21


def _qdq_conv_graph(path, *, gap: bool, convs: int = 3):
    """x -> [Q -> DQ -> Conv(DQ(int8 weight)) -> (Sigmoid) -> Q -> DQ] x convs, signed int8
    activations. With ``gap``, a float Sigmoid sits between each Conv and its output Q: ONNX
    Runtime cannot fuse those convs into QLinearConv, so they run float around Q/DQ."""
    nodes, inits = [], []
    scale = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    zero = numpy_helper.from_array(np.array(0, np.int8), "z")
    inits += [scale, zero]
    current = "x"
    for i in range(convs):
        w = numpy_helper.from_array(
            np.random.default_rng(i).integers(-8, 8, (4, 4, 3, 3)).astype(np.int8), f"w{i}")
        ws = numpy_helper.from_array(np.array(0.01, np.float32), f"ws{i}")
        inits += [w, ws]
        nodes += [helper.make_node("QuantizeLinear", [current, "s", "z"], [f"q{i}"]),
                  helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"dq{i}"]),
                  helper.make_node("DequantizeLinear", [f"w{i}", f"ws{i}"], [f"wf{i}"]),
                  helper.make_node("Conv", [f"dq{i}", f"wf{i}"], [f"c{i}"], pads=[1, 1, 1, 1])]
        out = f"c{i}"
        if gap:
            nodes.append(helper.make_node("Sigmoid", [out], [f"g{i}"]))
            out = f"g{i}"
        current = out
    nodes += [helper.make_node("QuantizeLinear", [current, "s", "z"], ["qo"]),
              helper.make_node("DequantizeLinear", ["qo", "s", "z"], ["y"])]
    graph = helper.make_graph(
        nodes, "hand", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return model


def test_a_qdq_graph_written_by_hand_with_float_convs_is_int8_in_name_only(tmp_path):
    model = _qdq_conv_graph(tmp_path / "gap.onnx", gap=True)
    ops = onnx_census(model)
    assert (ops.int_kernels, ops.float_kernels) == (0, 3)
    assert ops.quant_dequant == 3 * 3 + 2 and ops.verdict == NAME_ONLY


def test_onnx_runtime_leaves_those_convs_float_and_the_census_reads_its_graph(tmp_path):
    """Built on purpose: run through ONNX Runtime's own optimiser (ORT_ENABLE_ALL), the
    graph whose convs have no Q right after them keeps float Convs between Q/DQ nodes, and
    the census of the graph the session serialised says "INT8 in name only"; the same graph
    without the gap is fused into QLinearConv, INT8 for real."""
    pytest.importorskip("onnxruntime")
    from benchmarks.runtimes.ort import session
    for gap, expected in ((True, NAME_ONLY), (False, REAL)):
        path = tmp_path / f"g{gap}.onnx"
        _qdq_conv_graph(path, gap=gap)
        optimized = tmp_path / f"g{gap}.optimized.onnx"
        sess = session(path, 1, "cpu", optimized)
        sess.run(None, {"x": np.zeros((1, 4, 8, 8), np.float32)})
        ops = onnx_census(optimized)
        assert ops.verdict == expected, (gap, ops)
        if gap:
            assert ops.float_kernels == 3 and ops.quant_dequant > 0


def test_qoperator_form_written_by_hand_is_int8_for_real():
    ops = count_onnx(["QuantizeLinear", "QLinearConv", "QLinearConv", "QLinearAdd",
                      "QLinearMatMul", "DequantizeLinear"], "hand")
    assert (ops.int_kernels, ops.float_kernels, ops.quant_dequant) == (3, 0, 2)
    assert ops.int8_real


def test_openvino_runtime_layers_by_precision():
    layers = ([("Convolution", "u8")] * 20 + [("FullyConnected", "u8"), ("FakeQuantize", "f32"),
              ("Pooling", "u8"), ("Reorder", "u8"), ("Const", "i8")])
    ops = count_openvino(layers, "hand")
    assert (ops.int_kernels, ops.float_kernels, ops.quant_dequant) == (21, 0, 1)
    assert ops.verdict == REAL
    bf16 = count_openvino([("Convolution", "bf16")] * 3 + [("FullyConnected", "f32")], "hand")
    assert bf16.verdict == "float" and bf16.float_kernels == 4


def test_torch_modules_fx_int8_and_a_float_graph_between_quantize_calls():
    torch = pytest.importorskip("torch")
    from torch import nn

    from optimizers.quantization import select_engine, static_fx
    select_engine()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 36, 3))
    assert module_census(model).verdict == "float"
    fx = static_fx(model.eval(), [torch.randn(4, 1, 8, 8)])
    ops = module_census(fx)
    assert (ops.int_kernels, ops.float_kernels) == (2, 0) and ops.quant_dequant >= 2
    assert ops.verdict == REAL

    class FloatBetween(nn.Module):
        """pt2e's reference graph in miniature: quantize, dequantize, then a float conv."""

        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(4, 1, 3, 3))

        def forward(self, x):
            x = torch.quantize_per_tensor(x, 0.1, 0, torch.quint8).dequantize()
            return torch.nn.functional.conv2d(x, self.weight)
    graph = torch.fx.symbolic_trace(FloatBetween())
    ops = module_census(graph)
    assert ops.float_kernels == 1 and ops.int_kernels == 0 and ops.quant_dequant == 2
    assert ops.verdict == NAME_ONLY
