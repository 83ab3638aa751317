"""The one autocast helper: mixed precision by name ("fp16"/"bf16") or torch dtype, or none.

Only ``torch.amp`` is used (``torch.cuda.amp`` is deprecated). Training, evaluation, the
timed loops, the AMP technique and the distributed benchmark all enter autocast here.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

AMP_TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def amp_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in AMP_TORCH_DTYPES:
        raise ValueError(f"amp dtype must be one of {', '.join(AMP_TORCH_DTYPES)}; got {dtype!r}")
    return AMP_TORCH_DTYPES[dtype]


def autocast(device_type: str, dtype: str | torch.dtype | None) -> AbstractContextManager:
    """``torch.autocast`` for a dtype, or a no-op for None."""
    resolved = amp_dtype(dtype)
    if resolved is None:
        return nullcontext()
    return torch.autocast(device_type=device_type, dtype=resolved)
