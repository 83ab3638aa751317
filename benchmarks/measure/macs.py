"""Which precision a model's multiply-adds run in, counted per layer: the roofline places a
variant on the roof of the precision most of them run in (``roofline.variant_precision``).

A technique's name says what it asks for, not what runs: dynamic INT8 quantizes a CNN's
linear layers only, so 98% of seed_cnn's multiply-adds stay in fp32 convolutions, and an
"int8" label put it on the int8 roof, eight times too high. Here one forward of the example
batch is watched by hooks on every convolution and linear layer (float, quantized, dynamic or
fused): a quantized module's multiply-adds count as int8, a float one's as the dtype its output
came out in (bf16 or fp16 under autocast, or a model cast to half; else fp32). A graph that computes between quantize/dequantize calls
(pt2e's reference graph) has no such modules: nothing is counted (None), and the roofline
falls back on the runtime's kernel census or the technique's declared precision.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from torch import nn

from benchmarks.measure import precisions
from optimizers.counting import DENSE_LAYERS, layer_macs

# Class names of the layers counted (torch.nn, torch.ao.nn.quantized, .dynamic, .intrinsic).
CONV = ("Conv1d", "Conv2d", "Conv3d", "ConvReLU1d", "ConvReLU2d", "ConvReLU3d", "ConvAdd2d",
        "ConvAddReLU2d", "ConvBn1d", "ConvBn2d", "ConvBn3d", "ConvBnReLU2d")
LINEAR = ("Linear", "LinearReLU", "LinearBn1d")


def dtype_precision(dtype: torch.dtype) -> str:
    """The registered precision a float layer whose output is ``dtype`` runs in
    (``measure.precisions``: bf16 for bfloat16); the dtype's own name where none is
    registered for it (the roofline then leaves it off, saying so)."""
    name = str(dtype).removeprefix("torch.")
    return precisions.by_dtype(name) or name


def _quantized(module: nn.Module) -> bool:
    return "quantized" in type(module).__module__


def _leaf_compute(module: nn.Module) -> bool:
    """A layer that multiplies itself: a quantized one, or a float one with a weight of its
    own (a float fused container's conv is its child; a QAT conv's weight is its own)."""
    if type(module).__name__ not in CONV + LINEAR and not isinstance(module, DENSE_LAYERS):
        return False
    return _quantized(module) or isinstance(getattr(module, "weight", None), torch.Tensor)


def layer_calls(model: nn.Module, example: torch.Tensor,
                autocast_dtype: torch.dtype | None = None) -> list[tuple[str, int, str]]:
    """(layer name, multiply-adds, precision) of each call of a convolution or linear layer
    in one forward of ``example``, in call order (a layer called twice, twice)."""
    calls: list[tuple[str, int, str]] = []

    def hook(name):
        def count(module, inputs, output):
            if not isinstance(output, torch.Tensor) or not inputs or \
                    not isinstance(inputs[0], torch.Tensor):
                return
            # (a dynamic INT8 linear returns fp32 but multiplies in int8: its class says so)
            precision = precisions.quantized() if _quantized(module) else \
                dtype_precision(output.dtype)
            calls.append((name, layer_macs(module, inputs[0], output), precision))
        return count

    handles = [m.register_forward_hook(hook(name)) for name, m in model.named_modules()
               if _leaf_compute(m)]
    if not handles:
        return calls
    autocast = (torch.autocast(example.device.type, dtype=autocast_dtype)
                if autocast_dtype is not None else nullcontext())
    try:
        with torch.inference_mode(), autocast:
            model(example)
    finally:
        for h in handles:
            h.remove()
    return calls


def layers_run(model: nn.Module, example: torch.Tensor, device=None,
               autocast_dtype: torch.dtype | None = None) -> list[dict] | None:
    """Every convolution and linear layer one forward of ``example`` ran, in call order:
    [{"layer": its name, "type": its class, "precision", "macs": per batch}] (what a kernel
    census matches oneDNN's primitives against); None where the model has no such layer or
    the forward fails."""
    x = example.to(device) if device is not None else example
    types = {name: type(m).__name__ for name, m in model.named_modules()}
    try:
        calls = layer_calls(model, x, autocast_dtype)
    except Exception:  # a placement hint: a model it cannot run keeps its label
        return None
    layers = [{"layer": name, "type": types.get(name, "?"), "precision": precision,
               "macs": int(n)} for name, n, precision in calls if n]
    return layers or None


def mac_census(model: nn.Module, example: torch.Tensor, device=None,
               autocast_dtype: torch.dtype | None = None) -> dict | None:
    """{"macs": {precision: multiply-adds per batch}, "precision": the one most run in,
    "share": its fraction, "source"}; None where no convolution or linear layer ran."""
    x = example.to(device) if device is not None else example
    try:
        calls = layer_calls(model, x, autocast_dtype)
    except Exception:  # the census is a placement hint: a model it cannot run keeps its label
        return None
    counts: dict[str, int] = {}
    for _, n, precision in calls:
        if n:
            counts[precision] = counts.get(precision, 0) + int(n)
    total = sum(counts.values())
    if not total:
        return None
    top = max(counts, key=counts.get)
    return {"macs": counts, "precision": top, "share": counts[top] / total,
            "source": "forward hooks on the convolutions and linear layers"}
