"""Automatic mixed precision at inference: weights stay fp32, autocast picks per-op dtypes.

Only ``torch.amp`` is used (``torch.cuda.amp`` is deprecated). fp16 is the CUDA default
(tensor cores); bf16 is the CPU default because fp16 CPU kernels are scarce and bf16 keeps
fp32's exponent range. The engine wraps inference in ``Outcome.autocast(device_type)``
(``optimizers.precision``).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from optimizers.base import Context, Outcome
from optimizers.errors import first_line
from optimizers.precision import AMP_TORCH_DTYPES, autocast
from optimizers.settings import AmpSettings


def apply(model: nn.Module, settings: AmpSettings, ctx: Context) -> Outcome:
    """A copy of ``model`` plus the autocast dtype to run it under.

    On the CPU the weights stay fp32 and autocast picks per-op dtypes. On CUDA the model is
    prepared the way a deployer would: weights cast once to the AMP dtype (under
    ``inference_mode`` autocast would otherwise re-cast every fp32 weight on every call) and,
    for convolutional models, channels-last memory, which tensor cores want; autocast stays on
    for the ops that need fp32. What was done is recorded; where the model refuses it, plain
    autocast is used and the reason recorded.

    In a chain whose earlier step decided where the model runs (INT8: the CPU), autocast is
    kept only where it changes the output: INT8 kernels ignore it, and that is recorded
    rather than pretended."""
    device = ctx.lineage.model_device or ctx.device
    device_type = device.type
    dtype_name = settings.resolved(device_type)
    if ctx.lineage.model_device is not None:
        skipped = _no_effect(model, dtype_name, device, ctx)
        if skipped is not None:
            return Outcome(model=model, config={"amp": {"dtype": dtype_name,
                                                        "skipped": skipped}})
    copied = copy.deepcopy(model).eval()
    config = {"dtype": dtype_name, "device_type": device_type, "weights": "fp32",
              "memory_format": "contiguous", "requested": settings.dtype}
    memory_format = None
    if device_type == "cuda":
        prepared, fmt, why = _deployed(copied, dtype_name, device, ctx)
        if prepared is not None:
            copied, memory_format = prepared, fmt
            config.update(weights=f"{dtype_name} (cast once)",
                          memory_format="channels_last" if fmt is not None else "contiguous")
        else:
            config["weights_note"] = f"kept fp32: {why}"
    # One-sample smoke run: an op without a kernel for this dtype fails here, as one line,
    # rather than in the middle of the timed loop.
    try:
        _forward(copy.deepcopy(copied).to(device), dtype_name, device, ctx, memory_format)
    except Exception as exc:
        raise RuntimeError(f"autocast {dtype_name} on {device_type} fails for this model: "
                           f"{first_line(exc)}") from exc
    return Outcome(model=copied, config={"amp": config},
                   autocast_dtype=AMP_TORCH_DTYPES[dtype_name], memory_format=memory_format)


def _forward(model: nn.Module, dtype_name: str, device: torch.device, ctx: Context,
             memory_format=None) -> torch.Tensor:
    x = ctx.data.example_input[:1].to(device)
    if memory_format is not None:
        x = x.contiguous(memory_format=memory_format)
    with torch.inference_mode(), autocast(device.type, dtype_name):
        return model(x)


def _deployed(model: nn.Module, dtype_name: str, device: torch.device, ctx: Context):
    """(the model with weights cast once and channels-last for CNNs, its memory format or
    None, why not): the prepared model when it runs, else (None, None, the reason)."""
    prepared = copy.deepcopy(model).to(device=device, dtype=AMP_TORCH_DTYPES[dtype_name])
    fmt = torch.channels_last if any(isinstance(m, nn.Conv2d) for m in prepared.modules()) \
        else None
    if fmt is not None:
        prepared = prepared.to(memory_format=fmt)
    try:
        _forward(prepared, dtype_name, device, ctx, fmt)
    except Exception as exc:
        return None, None, first_line(exc)
    return prepared, fmt, None


def _no_effect(model: nn.Module, dtype_name: str, device: torch.device,
               ctx: Context) -> str | None:
    """Why autocast is not applied to this model, or None when it changes the output."""
    x = ctx.data.example_input[:2].to(device)
    try:
        with torch.inference_mode():
            plain = model(x)
            with autocast(device.type, dtype_name):
                cast = model(x)
    except Exception as exc:
        return f"autocast {dtype_name} fails on this model: {first_line(exc)}"
    if cast.dtype == plain.dtype and torch.equal(cast, plain):
        return ("its kernels ignore autocast (INT8): the output is identical with and "
                "without it, so autocast is not applied")
    return None
