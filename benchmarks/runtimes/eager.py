"""Eager PyTorch: the variant as built (FX INT8 modules, autocast), the reference of every
other runtime. Its census reads the modules (and a graph module's quantize/dequantize calls:
pt2e's reference graph computes in float between them)."""

from __future__ import annotations

import time

from benchmarks.runtimes.base import Prepared, RuntimeConfig
from benchmarks.measure import precisions
from benchmarks.runtimes.census import module_census, ran_in


def torch_precision(ops: dict, asked: str, autocast_dtype) -> str:
    """What a PyTorch module runs in: int8 where its census says so, else autocast's dtype,
    else fp32."""
    if ops["int_kernels"]:
        return ran_in(ops, precisions.DEFAULT)
    if autocast_dtype is not None:
        return precisions.by_dtype(str(autocast_dtype).removeprefix("torch.")) or asked
    return precisions.DEFAULT


def prepare(config: RuntimeConfig, model, example, *, autocast_dtype=None, **_) -> Prepared:
    import torch
    t0 = time.perf_counter()
    ops = module_census(model).to_dict()
    return Prepared(fn=model, precision=torch_precision(ops, config.precision, autocast_dtype),
                    version=torch.__version__, prepare_s=time.perf_counter() - t0, ops=ops)
