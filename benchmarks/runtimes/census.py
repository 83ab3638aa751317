"""The op census: how many convolutions and matmuls run integer kernels, how many float ones,
and how many quantize/dequantize nodes, read from each runtime's own optimized graph.

- ONNX Runtime: the graph it serialises after its optimisations (``optimized_model_filepath``):
  a QDQ pair around a ``Conv`` it could not fuse stays a float ``Conv``; a fused one is a
  ``QLinearConv``.
- OpenVINO: the compiled model's runtime graph, each layer's ``layerType`` and
  ``runtimePrecision`` (``u8``/``i8`` for integer kernels).
- eager PyTorch: the modules (FX's quantized ``Conv2d``/``Linear``) and, for a graph module,
  its quantize/dequantize calls (pt2e's reference graph computes in float between them).

A verdict goes with it: INT8 for real when at least half of the convolutions and matmuls run
integer kernels, else "INT8 in name only" (an INT8 cell that mostly runs float kernels between
quantize/dequantize pairs, slower than fp32 in the cases the issue cites). Torch-free here;
the torch modules' census imports torch when called.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from benchmarks.measure import precisions

REAL, NAME_ONLY, FLOAT = "INT8", "INT8 in name only", "float"

# ONNX (and onnxruntime's contrib) ops, by op_type whatever their domain (com.microsoft.nchwc's
# blocked Conv is a float Conv).
# The integer ones are the integer precisions' (``measure.precisions``: ``onnx_ops``).
ONNX_INT = precisions.integer_onnx_ops()
ONNX_FLOAT = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "FusedConv", "FusedGemm",
                        "FusedMatMul", "NhwcFusedConv", "TransposeMatMul", "Attention",
                        "MultiHeadAttention", "LSTM", "GRU", "RNN", "Einsum"})
ONNX_QDQ = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
# OpenVINO CPU plugin layer types that are convolutions or matmuls, and integer precisions.
OV_COMPUTE = frozenset({"Convolution", "GroupConvolution", "Deconvolution",
                        "ConvolutionBackpropData", "FullyConnected", "MatMul",
                        "FullyConnectedCompressed", "BinaryConvolution"})
OV_INT = precisions.integer_openvino()
OV_QDQ = frozenset({"FakeQuantize", "Quantize", "Dequantize", "FakeConvert"})
# PyTorch module class names (torch.ao.nn.quantized, .intrinsic.quantized, .dynamic).
TORCH_INT = ("quantized",)
TORCH_COMPUTE = ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                 "ConvTranspose3d", "Linear", "ConvReLU1d", "ConvReLU2d", "ConvReLU3d",
                 "LinearReLU", "ConvAdd2d", "ConvAddReLU2d", "LSTM", "GRU", "Bilinear")


@dataclass(frozen=True)
class Ops:
    int_kernels: int        # convolutions and matmuls on integer kernels
    float_kernels: int      # convolutions and matmuls on float kernels
    quant_dequant: int      # quantize / dequantize nodes
    int8_real: bool         # at least half of the convs and matmuls on integer kernels
    verdict: str            # REAL, NAME_ONLY, or FLOAT (a float cell)
    source: str             # which graph was read
    total_ops: int = 0      # every node of that graph

    def to_dict(self) -> dict:
        return asdict(self)


def verdict(int_kernels: int, float_kernels: int, quant_dequant: int, *, source: str,
            total_ops: int = 0) -> Ops:
    """The census's verdict: a cell with any integer kernel or quantize node is INT8, for real
    when at least half of its convs and matmuls run integer kernels."""
    compute = int_kernels + float_kernels
    real = compute > 0 and 2 * int_kernels >= compute
    quantized = int_kernels > 0 or quant_dequant > 0
    return Ops(int_kernels, float_kernels, quant_dequant, real,
               REAL if real else NAME_ONLY if quantized else FLOAT, source, total_ops)


def ran_in(ops: dict, float_precision: str) -> str:
    """The precision a census says a cell ran in: the quantized precision where most of its
    convs and matmuls ran integer kernels, "int8+fp32" (quantized + ``float_precision``) where
    some did, else ``float_precision``."""
    quantized = precisions.quantized()
    if ops["int8_real"]:
        return quantized
    return f"{quantized}+{float_precision}" if ops["int_kernels"] else float_precision


def count_onnx(op_types: Iterable[str], source: str) -> Ops:
    """The census of an ONNX graph's nodes, given by op_type."""
    counts = Counter(op_types)
    return verdict(sum(n for op, n in counts.items() if op in ONNX_INT),
                   sum(n for op, n in counts.items() if op in ONNX_FLOAT),
                   sum(n for op, n in counts.items() if op in ONNX_QDQ),
                   source=source, total_ops=sum(counts.values()))


def onnx_census(model, source: str = "ONNX graph") -> Ops:
    """``model``: an onnx ModelProto or the path of a .onnx file."""
    import onnx
    if not hasattr(model, "graph"):
        model = onnx.load(str(model), load_external_data=False)
    return count_onnx((n.op_type for n in model.graph.node), source)


def count_openvino(layers: Iterable[tuple[str, str]], source: str) -> Ops:
    """The census of an OpenVINO runtime graph given as (layerType, runtimePrecision) pairs."""
    ints = floats = qdq = total = 0
    for layer_type, precision in layers:
        total += 1
        if layer_type in OV_COMPUTE:
            if precision.lower() in OV_INT:
                ints += 1
            else:
                floats += 1
        elif layer_type in OV_QDQ:
            qdq += 1
    return verdict(ints, floats, qdq, source=source, total_ops=total)


def openvino_layers(compiled) -> list[tuple[str, str]]:
    """(layerType, runtimePrecision) of every layer of a compiled model's runtime graph."""
    out = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        layer = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
        precision = info["runtimePrecision"].astype(str) if "runtimePrecision" in info else ""
        out.append((layer, precision))
    return out


def openvino_float_precision(layers: list[tuple[str, str]]) -> str | None:
    """The precision most of the float convolutions and matmuls ran in ("f32", "bf16")."""
    seen = Counter(p.lower() for t, p in layers if t in OV_COMPUTE and p.lower() not in OV_INT)
    return seen.most_common(1)[0][0] if seen else None


def module_census(model, source: str = "PyTorch modules") -> Ops:
    """The census of a PyTorch model: its quantized conv/linear modules against its float
    ones, and, in a graph module (FX, torch.export), the quantize/dequantize calls and the
    float conv/linear calls of a graph that computes between them (pt2e's reference graph)."""
    ints = floats = qdq = 0
    for module in model.modules():
        cls = type(module)
        name, where = cls.__name__, cls.__module__
        if name in TORCH_COMPUTE:
            if any(part in where for part in TORCH_INT):
                ints += 1
            elif "intrinsic" not in where and "qat" not in where:
                # (a float fused container's own conv is counted as its child)
                floats += 1
    graph = getattr(model, "graph", None)
    total = 0
    if graph is not None and hasattr(graph, "nodes"):
        for node in graph.nodes:
            total += 1
            target = node.target
            label = getattr(target, "__name__", None) or str(target)
            if "quantize" in label or label == "dequantize":
                qdq += 1
            elif node.op == "call_function" and _float_compute(label):
                floats += 1
    return verdict(ints, floats, qdq, source=source, total_ops=total)


def _float_compute(label: str) -> bool:
    """An aten convolution or matmul called in a graph (pt2e's float compute)."""
    base = label.split(".")[0]
    return base in ("conv1d", "conv2d", "conv3d", "convolution", "linear", "addmm", "mm",
                    "bmm", "matmul")
