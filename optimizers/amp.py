"""Automatic mixed precision at inference: weights stay fp32, autocast picks per-op dtypes.

Only ``torch.amp`` is used (``torch.cuda.amp`` is deprecated). fp16 is the CUDA default
(tensor cores); bf16 is the CPU default because fp16 CPU kernels are scarce and bf16 keeps
fp32's exponent range. The engine wraps inference in ``Outcome.autocast(device_type)`` (``optimizers.precision``).
"""

from __future__ import annotations

import copy
import torch
from torch import nn

from .base import Context, Outcome
from .errors import first_line
from .settings import AmpSettings
from .precision import AMP_TORCH_DTYPES, autocast


def apply(model: nn.Module, settings: AmpSettings, ctx: Context) -> Outcome:
    """A copy of ``model`` (fp32 weights) plus the autocast dtype to run it under.

    In a chain whose earlier step decided where the model runs (INT8: the CPU), autocast is
    kept only where it changes the output: INT8 kernels ignore it, and that is recorded
    rather than pretended."""
    device = ctx.model_device or ctx.device
    device_type = device.type
    dtype_name = settings.resolved(device_type)
    if ctx.model_device is not None:
        skipped = _no_effect(model, dtype_name, device, ctx)
        if skipped is not None:
            return Outcome(model=model, config={"amp": {"dtype": dtype_name,
                                                        "skipped": skipped}})
    copied = copy.deepcopy(model).eval()
    # One-sample smoke run: an op without a kernel for this dtype fails here, as one line,
    # rather than in the middle of the timed loop.
    try:
        with torch.inference_mode(), autocast(device_type, dtype_name):
            copy.deepcopy(copied).to(device)(ctx.example_input[:1].to(device))
    except Exception as exc:
        raise RuntimeError(f"autocast {dtype_name} on {device_type} fails for this model: "
                           f"{first_line(exc)}") from exc
    config = {"dtype": dtype_name, "device_type": device_type, "weights": "fp32",
              "requested": settings.dtype}
    return Outcome(model=copied, config={"amp": config},
                   autocast_dtype=AMP_TORCH_DTYPES[dtype_name])


def _no_effect(model: nn.Module, dtype_name: str, device: torch.device,
               ctx: Context) -> str | None:
    """Why autocast is not applied to this model, or None when it changes the output."""
    x = ctx.example_input[:2].to(device)
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
