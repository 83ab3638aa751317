"""Where a model's time and arithmetic go, module by module: each leaf module's time from
many interleaved timed forwards (medians), and each module's multiply-adds and the work of
the modules without weights.

Each leaf module's call is timed by its own forward hooks (a pre-hook reads the clock, the
forward hook reads it again): ``perf_counter`` on a CPU, CUDA events on a GPU (the kernels'
time, not their launching). One round is one forward, every module timed in it, so the
modules' samples are interleaved: a slow stretch of a loaded machine lands on all of them
alike, and a preemption lands in one module's sample of one round, which the median over
the rounds discards. (A profiler's sum of a few forwards keeps every preemption it caught:
a ReLU at a third of the time.) What the rounds' forwards spent outside every leaf
(functional ops between modules, the hooks themselves) is ``OTHER``. The shares are the
medians over their sum, so they add to one.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

from benchmarks.measure.macs import layer_calls

OTHER = ""  # the key of the time no leaf module ran ("" is the root's name, never a leaf's)
MIN_ROUNDS = 15
MAX_ROUNDS = 400
ROUNDS_TIME_S = 0.5  # rounds are added until they took this long (or MAX_ROUNDS)
WARMUP = 3
METHOD = "hooks-median"  # recorded with the shares (and part of their cache key)


def _leaves(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [(n, m) for n, m in model.named_modules() if n and not list(m.children())]


class _HostClock:
    def mark(self):
        return time.perf_counter()

    def resolve(self, start, end) -> float:
        return (end - start) * 1000.0

    def sync(self) -> None:
        pass


class _CudaClock:
    def __init__(self, device):
        self.device = device

    def mark(self):
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def resolve(self, start, end) -> float:
        return start.elapsed_time(end)

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)


def module_times(model: nn.Module, example: torch.Tensor, *, min_rounds: int = MIN_ROUNDS,
                 max_rounds: int = MAX_ROUNDS, min_time_s: float = ROUNDS_TIME_S) -> dict:
    """{"modules": {leaf name: median ms per forward}, "other_ms", "total_ms" (medians),
    "rounds", "spread" ({leaf: the interquartile range over its median})}: each leaf's
    time summed over its calls in a forward, from ``min_rounds`` to ``max_rounds`` timed
    forwards of ``example`` (about ``min_time_s`` of them) after warm-up."""
    clock = _CudaClock(example.device) if example.is_cuda else _HostClock()
    leaves = _leaves(model)
    marks: list[tuple[str, object, object]] = []
    open_marks: dict[str, list] = {}
    handles = []

    def enter(name):
        def hook(module, args):
            open_marks.setdefault(name, []).append(clock.mark())
        return hook

    def leave(name):
        def hook(module, args, output):
            stack = open_marks.get(name)
            if stack:
                marks.append((name, stack.pop(), clock.mark()))
        return hook

    for name, module in leaves:
        handles.append(module.register_forward_pre_hook(enter(name)))
        handles.append(module.register_forward_hook(leave(name)))
    model.eval()
    per_module: dict[str, list[float]] = {name: [] for name, _ in leaves}
    totals: list[float] = []
    others: list[float] = []
    try:
        with torch.inference_mode():
            for _ in range(WARMUP):
                model(example)
            clock.sync()
            spent, wall0 = 0.0, time.perf_counter()
            while len(totals) < min_rounds or (spent < min_time_s and len(totals) < max_rounds):
                marks.clear()
                start = clock.mark()
                model(example)
                end = clock.mark()
                clock.sync()
                total = clock.resolve(start, end)
                this = dict.fromkeys(per_module, 0.0)
                for name, a, b in marks:
                    this[name] += clock.resolve(a, b)
                for name, ms in this.items():
                    per_module[name].append(ms)
                totals.append(total)
                others.append(max(0.0, total - sum(this.values())))
                spent = time.perf_counter() - wall0
    finally:
        for h in handles:
            h.remove()
    medians = {name: statistics.median(v) for name, v in per_module.items() if v}
    return {"modules": medians, "other_ms": statistics.median(others),
            "total_ms": statistics.median(totals), "rounds": len(totals),
            "spread": {name: _iqr(v) / medians[name] if medians[name] else 0.0
                       for name, v in per_module.items() if v}}


def _iqr(values: list[float]) -> float:
    if len(values) < 4:
        return 0.0
    q = statistics.quantiles(values, n=4)
    return q[2] - q[0]


def module_shares(model: nn.Module, example: torch.Tensor, **rounds) -> dict[str, float]:
    """{leaf module name: its share of the forward's time, OTHER: what no leaf ran}, adding
    to one: each entry's median over interleaved rounds (``module_times``) over the sum of
    the medians."""
    return shares_of(module_times(model, example, **rounds))


def shares_of(timed: dict) -> dict[str, float]:
    """``module_shares`` of what ``module_times`` measured."""
    entries = {**timed["modules"], OTHER: timed["other_ms"]}
    total = sum(entries.values()) or 1.0
    return {name: ms / total for name, ms in entries.items()}


def module_work(model: nn.Module, example: torch.Tensor) -> dict[str, int]:
    """{leaf name: elements it outputs per sample} of every leaf holding no parameters (a
    ReLU, a pooling, a flatten): its work, which shrinks with the channels it is given, as a
    layer's multiply-adds do."""
    work: dict[str, int] = {}
    handles = []

    def count(name):
        def hook(module, args, output):
            if isinstance(output, torch.Tensor) and name not in work:
                work[name] = output.numel() // max(output.shape[0] if output.dim() else 1, 1)
        return hook

    for name, module in _leaves(model):
        if not any(True for _ in module.parameters(recurse=False)):
            handles.append(module.register_forward_hook(count(name)))
    try:
        with torch.inference_mode():
            model(example)
    finally:
        for h in handles:
            h.remove()
    return work


def module_macs(model: nn.Module, example: torch.Tensor) -> dict[str, int]:
    """{module name: multiply-adds per sample} of every convolution and linear layer the
    forward calls (the first call of a module shared by several places), counted as the
    roofline's census counts them (``benchmarks.measure.macs``)."""
    batch = max(example.shape[0], 1)
    macs: dict[str, int] = {}
    for name, n, _ in layer_calls(model, example):
        macs.setdefault(name, n // batch)
    return macs


def module_params(model: nn.Module) -> dict[str, int]:
    """{module name: parameters it holds itself}."""
    return {n: sum(p.numel() for p in m.parameters(recurse=False))
            for n, m in model.named_modules()}
