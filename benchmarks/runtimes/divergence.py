"""Where a runtime's quantized graph parts ways with the float model it was made from.

For a cell whose parity is "off", the first layer whose activations differ from the float
model's by more than the layer's own quantization step, read from the runtime's own graph:

- **The runtime's side.** ONNX Runtime's QDQ graph (``ort.quantize``) keeps the exporter's
  value names: a compute node (Conv, Gemm, MatMul) writes the float value the exporter named,
  a QuantizeLinear with that value's step (its scale) takes it, and the DequantizeLinear after
  it is what the next layer reads. Those dequantized values become graph outputs and the graph
  runs once, unoptimised, on a batch of test inputs: each is the activation as the runtime's
  quantization leaves it (the quantizer folds a ReLU into the zero point: this value is
  clipped as the float model's ReLU output is).
- **The float side.** The same float model exported again (``torch.onnx.export``, dynamo): the
  values of its FX graph, under the same names, from an interpreter run on the same batch.
- **The verdict.** Per layer, in graph order: the mean absolute difference in quantization
  steps (the value's scale). Rounding alone leaves about a quarter of a step (measured: 0.24
  at ResNet-18's first conv), and error grows through depth in a healthy graph too (to about
  one step at its last convs), so a layer parts ways where its error is beyond ``FAR_STEPS``
  *and* ``JUMP`` times the worst before it: where the outputs start to differ, named by the
  module the exporter recorded (``pkg.torch.onnx.name_scopes``). Where none jumps, the line
  says the error grew with depth and how far.

Only a graph runtime that exposes its intermediate values can say this: ONNX Runtime here;
OpenVINO's compiled model does not, and its cells say so.
"""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

# A layer parts ways where its mean error is above this many of its quantization steps and
# JUMP times the largest of the layers before it: rounding leaves about a quarter of a step,
# and a healthy ResNet-18's error grows smoothly to about one step by its last layers.
FAR_STEPS = 1.0
JUMP = 2.0
COMPUTE_OPS = ("Conv", "Gemm", "MatMul")


def quantized_layers(graph) -> list[dict]:
    """Each compute node of a QDQ graph with the names of its float output, the dequantized
    value the next layer reads, its step (the QuantizeLinear's scale initializer) and its
    module: in graph order."""
    from onnx import numpy_helper
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    initial = {t.name: t for t in graph.initializer}
    out = []
    for node in graph.node:
        if node.op_type not in COMPUTE_OPS:
            continue
        value = node.output[0]
        quant = next((c for c in consumers.get(value, []) if c.op_type == "QuantizeLinear"),
                     None)
        if quant is None or quant.input[1] not in initial:
            continue  # a layer left in float: nothing to measure its step by
        dequant = next((c for c in consumers.get(quant.output[0], [])
                        if c.op_type == "DequantizeLinear"), None)
        if dequant is None:
            continue
        scale = numpy_helper.to_array(initial[quant.input[1]])
        meta = {p.key: p.value for p in node.metadata_props}
        folded = "FuseBatchNormIntoConv" in meta.get("pkg.onnxscript.rewriter.rule_name", "")
        out.append({"value": value, "read": dequant.output[0],
                    "op": node.op_type + (" with its batch norm folded in" if folded else ""),
                    "step": float(scale.mean()), "module": _module(node)})
    return out


def _module(node) -> str | None:
    """The module the exporter recorded for a node: the deepest named scope."""
    meta = {p.key: p.value for p in node.metadata_props}
    try:
        scopes = ast.literal_eval(meta.get("pkg.torch.onnx.name_scopes", "[]"))
    except (ValueError, SyntaxError):
        return None
    named = [s for s in scopes[:-1] if s]  # the last is the op itself
    return named[-1] if named else None


def runtime_values(path: Path, names: list[str], x) -> dict:
    """{name: array} of ``names`` from the ONNX graph at ``path`` on ``x``, run unoptimised
    on the CPU (every value it names still exists)."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    model = onnx.load(str(path))
    have = {o.name for o in model.graph.output}
    for name in names:
        if name not in have:
            model.graph.output.append(onnx.helper.make_tensor_value_info(
                name, onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: np.ascontiguousarray(x.numpy(), dtype=np.float32)}
    return dict(zip(names, sess.run(names, feed)))


def float_values(model, x) -> dict:
    """{name: tensor} of every value of ``model``'s exported FX graph on ``x`` (the graph the
    ONNX exporter translates, so the names are its values')."""
    import torch
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        program = torch.onnx.export(model, (x,), dynamo=True, verbose=False)
    module = program.exported_program.module()
    seen: dict = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            if isinstance(result, torch.Tensor):
                seen[node.name] = result.detach()
            return result
    with torch.no_grad():
        Recorder(module).run(x)
    return seen


def parts_ways(path: Path, float_model, x) -> dict:
    """Where the QDQ graph at ``path`` parts from ``float_model`` on the batch ``x``: the
    first layer beyond ``FAR_STEPS`` steps (None where none is), with every compared layer's
    error in steps, in graph order."""
    import numpy as np
    import onnx
    layers = quantized_layers(onnx.load(str(path)).graph)
    ours = float_values(float_model.cpu().eval(), x.cpu())
    layers = [layer for layer in layers if layer["value"] in ours]
    if not layers:
        raise RuntimeError("no quantized layer of the graph matches a value of the float "
                           "model's export: nothing to compare")
    theirs = runtime_values(path, [layer["read"] for layer in layers], x.cpu())
    compared = []
    for layer in layers:
        ref = ours[layer["value"]].float().numpy()
        got = theirs[layer["read"]]
        if ref.shape != got.shape or layer["step"] <= 0:
            continue
        error = float(np.abs(got - ref).mean())
        compared.append({"module": layer["module"], "value": layer["value"], "op": layer["op"],
                         "error_steps": error / layer["step"],
                         "relative": error / max(float(np.abs(ref).mean()), 1e-12)})
    first, worst = None, 0.0
    for c in compared:
        if c["error_steps"] > FAR_STEPS and c["error_steps"] > JUMP * worst:
            first = c
            break
        worst = max(worst, c["error_steps"])
    return {"first": first, "layers": compared, "far_steps": FAR_STEPS, "jump": JUMP,
            "examples": int(x.shape[0])}


def parts_ways_line(found: dict) -> str:
    """The sentence an "off" cell carries."""
    first = found["first"]
    if first is None:
        last = found["layers"][-1]
        return (f"no quantized layer parts ways alone ({len(found['layers'])} compared): the "
                f"error grows with depth, to {last['error_steps']:.1f} quantization steps at "
                f"{last['module'] or last['value']}")
    where = first["module"] or first["value"]
    before = found["layers"].index(first)
    return (f"parts ways at {where} ({first['op']}): its activations are "
            f"{first['error_steps']:.1f} quantization steps from the float model's on "
            f"average, the {before} quantized layer(s) before it within "
            f"{found['far_steps']:g}")
