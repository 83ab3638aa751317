"""torch.compile: its default mode (Inductor), or ``compile-freeze`` with Inductor's freezing
(``torch._inductor.config.freezing``, given as this compile's option: weights folded into the
graph as constants, so its recompiles freeze too). The compile happens on the first call, so
``prepare_s`` includes that call. The census reads the module compiled: Inductor's generated
kernels are not inspected (its INT8 path is the FX modules' own kernels)."""

from __future__ import annotations

import copy
import time

from benchmarks.runtimes.base import Prepared, RuntimeConfig
from benchmarks.runtimes.census import module_census
from benchmarks.runtimes.eager import torch_precision
from optimizers.errors import described


def prepare(config: RuntimeConfig, model, example, *, autocast_dtype=None, **_) -> Prepared:
    import torch

    from optimizers.precision import autocast
    t0 = time.perf_counter()
    freeze = config.name == "compile-freeze"
    # Its own copy: a frozen graph holds the weights as constants, and two compiles of one
    # module object would share dynamo's cache entries.
    target = copy.deepcopy(model)
    compiled = torch.compile(target, options={"freezing": True} if freeze else None)
    try:
        with torch.inference_mode(), autocast(example.device.type, autocast_dtype):
            compiled(example)
    except Exception as exc:
        raise RuntimeError(f"torch.compile failed: {described(exc)}") from None
    ops = module_census(model, "PyTorch modules compiled (Inductor's kernels not read)")
    ops = ops.to_dict()
    return Prepared(fn=compiled, precision=torch_precision(ops, config.precision, autocast_dtype),
                    version=torch.__version__, prepare_s=time.perf_counter() - t0, ops=ops,
                    details={"mode": "default", "freezing": freeze})
