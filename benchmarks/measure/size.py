"""Size: the bytes a user ships. Parameters and FLOPs are counted in ``optimizers.counting``."""

from __future__ import annotations

import gzip
import io

import torch
from torch import nn


def serialized_size(model: nn.Module) -> tuple[int, int]:
    """(bytes torch.save(state_dict) writes, the same gzipped): what a user ships. Unstructured
    sparsity only pays off compressed, so both are shown."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    raw = buf.getvalue()
    return len(raw), len(gzip.compress(raw, compresslevel=6, mtime=0))
