"""Automatic mixed precision at inference: weights stay fp32, autocast picks per-op dtypes.

Only ``torch.amp`` is used (``torch.cuda.amp`` is deprecated). fp16 is the CUDA default
(tensor cores); bf16 is the CPU default because fp16 CPU kernels are scarce and bf16 keeps
fp32's exponent range. The engine wraps inference in ``Outcome.autocast(device_type)``.
"""

from __future__ import annotations

import copy
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

from .base import Context, Outcome
from .settings import AmpSettings
from .training import AMP_TORCH_DTYPES


def autocast_context(device_type: str, dtype_name: str | None) -> AbstractContextManager:
    """``torch.autocast`` for "fp16"/"bf16", or a no-op for None."""
    if dtype_name is None:
        return nullcontext()
    return torch.autocast(device_type=device_type, dtype=AMP_TORCH_DTYPES[dtype_name])


def apply(model: nn.Module, settings: AmpSettings, ctx: Context,
          device_type: str | None = None) -> Outcome:
    """A copy of ``model`` (fp32 weights) plus the autocast dtype to run it under.

    ``device_type`` overrides where the model will run (a chain passes "cpu" after INT8).
    """
    device_type = device_type or ctx.device.type
    dtype_name = settings.resolved(device_type)
    copied = copy.deepcopy(model).eval()
    # One-sample smoke run: an op without a kernel for this dtype fails here, as one line,
    # rather than in the middle of the timed loop.
    device = torch.device("cpu") if device_type == "cpu" else ctx.device
    try:
        with torch.inference_mode(), autocast_context(device_type, dtype_name):
            copy.deepcopy(copied).to(device)(ctx.example_input[:1].to(device))
    except Exception as exc:
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RuntimeError(f"autocast {dtype_name} on {device_type} fails for this model: "
                           f"{line}") from exc
    config = {"dtype": dtype_name, "device_type": device_type, "weights": "fp32",
              "requested": settings.dtype}
    return Outcome(model=copied, config={"amp": config},
                   autocast_dtype=AMP_TORCH_DTYPES[dtype_name])
