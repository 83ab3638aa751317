"""Where a model's time and arithmetic go, module by module: ``torch.profiler`` op times
mapped to the modules that ran them, and each module's multiply-adds.

Each leaf module's call is wrapped in a ``record_function`` range (a forward pre-hook opens
it, the forward hook closes it), so the profiler's inclusive CPU time of that range is the
time of the ops the module ran. A module's share is that time over the time of every op in
the profiled forwards; what no module ran (functional ops between modules) is the rest.
"""

from __future__ import annotations

import os

import torch
from torch import nn

PROFILED_RUNS = 10
RANGE_PREFIX = "module::"


def _leaves(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(n, m) for n, m in model.named_modules() if n and not list(m.children())]


def module_shares(model: nn.Module, example: torch.Tensor, runs: int = PROFILED_RUNS
                  ) -> dict[str, float]:
    """{leaf module name: its share of the forward's op time}, from ``runs`` profiled
    forwards of ``example`` after one unprofiled warm-up."""
    from torch.profiler import ProfilerActivity, profile
    # Kineto logs its start and stop (and a GPU probe on machines without one) to stderr,
    # which is the progress bar's: quiet unless someone asked for its log.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    open_ranges: dict[str, list] = {}
    handles = []

    def enter(name):
        def hook(module, args):
            rf = torch.autograd.profiler.record_function(RANGE_PREFIX + name)
            rf.__enter__()
            open_ranges.setdefault(name, []).append(rf)
        return hook

    def leave(name):
        def hook(module, args, output):
            stack = open_ranges.get(name)
            if stack:
                stack.pop().__exit__(None, None, None)
        return hook

    for name, module in _leaves(model):
        handles.append(module.register_forward_pre_hook(enter(name)))
        handles.append(module.register_forward_hook(leave(name)))
    model.eval()
    # On a GPU the kernels' time is the latency; the host's is only their launching.
    cuda = example.is_cuda
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    try:
        with torch.inference_mode():
            model(example)
            with profile(activities=activities) as prof:
                for _ in range(runs):
                    model(example)
                if cuda:
                    torch.cuda.synchronize(example.device)
    finally:
        for h in handles:
            h.remove()
    events = prof.key_averages()
    inclusive, own = (("device_time_total", "self_device_time_total") if cuda
                      else ("cpu_time_total", "self_cpu_time_total"))
    total = sum(getattr(e, own, 0.0) for e in events) or 1.0
    return {e.key[len(RANGE_PREFIX):]: getattr(e, inclusive, 0.0) / total for e in events
            if e.key.startswith(RANGE_PREFIX)}


def module_macs(model: nn.Module, example: torch.Tensor) -> dict[str, int]:
    """{module name: multiply-adds per sample} of every convolution and linear layer the
    forward calls (the first call of a module shared by several places)."""
    macs: dict[str, int] = {}
    handles = []

    def count(name):
        def hook(module, args, output):
            if name in macs or not isinstance(output, torch.Tensor):
                return
            out = output.dequantize() if output.is_quantized else output
            batch = max(out.shape[0], 1)
            if isinstance(module, nn.Linear):
                macs[name] = out.numel() // batch * module.in_features
            else:
                kernel = module.weight.shape[1:].numel()
                macs[name] = out.numel() // batch * kernel
        return hook

    for name, module in model.named_modules():
        if isinstance(module, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)):
            handles.append(module.register_forward_hook(count(name)))
    try:
        with torch.inference_mode():
            model(example)
    finally:
        for h in handles:
            h.remove()
    return macs


def module_params(model: nn.Module) -> dict[str, int]:
    """{module name: parameters it holds itself}."""
    return {n: sum(p.numel() for p in m.parameters(recurse=False))
            for n, m in model.named_modules()}
