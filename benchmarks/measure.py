"""Measurements: latency, peak memory, size, parameters, FLOPs.

Each is measured by the same code for every variant, on the same inputs. Latency keeps its raw
samples (statistics are derived in ``results.LatencyStats``). Trackers are context managers:
``with tracker.track(): run()``.
"""

from __future__ import annotations

import gzip
import io
import os
import time
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

CPU_MEMORY_METHOD = "live_tensor_bytes"  # weights + input + peak of tensors alive in a forward
CUDA_MEMORY_METHOD = "cuda_max_memory_allocated"


# -- latency -------------------------------------------------------------------------------

class Clock:
    """perf_counter on a CPU. Swappable, so tests can check the statistics with a fake clock."""

    def start(self):
        return time.perf_counter()

    def stop(self, token) -> float:
        return (time.perf_counter() - token) * 1000.0

    def finish(self) -> None:
        pass


class CudaClock(Clock):
    """CUDA events: they time the kernels on the device, not the host's launch of them.
    Events are read after one synchronize at the end, so timing adds no stall per run."""

    def __init__(self):
        self.pending: list[tuple] = []

    def start(self):
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def stop(self, token) -> float:
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        self.pending.append((token, end))
        return float("nan")  # resolved in finish()

    def finish(self) -> None:
        torch.cuda.synchronize()


@dataclass
class LatencyTracker:
    """At least ``min_runs`` timed runs and about ``min_time_s`` of samples, after warm-up."""

    min_runs: int = 10
    min_time_s: float = 1.0
    warmup: int = 3
    max_runs: int = 10_000
    clock: Clock = field(default_factory=Clock)
    samples_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0

    def run(self, fn: Callable[[], object]) -> list[float]:
        wall0 = time.perf_counter()
        for _ in range(self.warmup):
            fn()
        if isinstance(self.clock, CudaClock):
            torch.cuda.synchronize()
        samples: list[float] = []
        spent = 0.0
        while len(samples) < self.min_runs or (spent < self.min_time_s * 1000.0
                                               and len(samples) < self.max_runs):
            token = self.clock.start()
            fn()
            ms = self.clock.stop(token)
            samples.append(ms)
            if isinstance(self.clock, CudaClock):
                # Budget by host time for the loop; exact figures come from the events.
                spent = (time.perf_counter() - wall0) * 1000.0
            else:
                spent += ms
        self.clock.finish()
        if isinstance(self.clock, CudaClock):
            samples = [s.elapsed_time(e) for s, e in self.clock.pending]
            self.clock.pending.clear()
        self.samples_ms = samples
        self.wall_s = time.perf_counter() - wall0
        return samples


def measure_latency(model: nn.Module, example: torch.Tensor, device: torch.device, *,
                    autocast: AbstractContextManager | None = None, min_runs: int = 10,
                    min_time_s: float = 1.0, warmup: int = 3) -> LatencyTracker:
    x = example.to(device)
    model.eval()
    tracker = LatencyTracker(min_runs=min_runs, min_time_s=min_time_s, warmup=warmup,
                             clock=CudaClock() if device.type == "cuda" else Clock())
    ctx = autocast or nullcontext()
    with torch.inference_mode(), ctx:
        tracker.run(lambda: model(x))
    return tracker


# -- memory --------------------------------------------------------------------------------

class LiveTensorBytes(TorchDispatchMode):
    """Counts the bytes of every tensor storage an op creates until it is freed, and keeps the
    peak. It sees PyTorch's own allocations (tracemalloc does not), at op granularity: a
    kernel's internal scratch space is not counted."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, int] = {}
        self.current = 0
        self.peak = 0

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)

    def _track(self, t: torch.Tensor) -> None:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        key, size = storage.data_ptr(), storage.nbytes()
        if size == 0 or key in self.live:
            return
        self.live[key] = size
        self.current += size
        self.peak = max(self.peak, self.current)
        weakref.finalize(storage, self._free, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out


def state_bytes(model: nn.Module) -> int:
    """Bytes of the weights and buffers the model holds in memory."""
    total = 0
    for value in _state_tensors(model.state_dict()):
        total += value.untyped_storage().nbytes() if value.is_quantized else \
            value.numel() * value.element_size()
    return total


def measure_peak_memory(model: nn.Module, example: torch.Tensor, device: torch.device, *,
                        autocast: AbstractContextManager | None = None) -> tuple[int, str]:
    """Peak bytes of one forward pass, model weights and input included, and the method."""
    x = example.to(device)
    ctx = autocast or nullcontext()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        with torch.inference_mode(), ctx:
            model(x)
        torch.cuda.synchronize(device)
        return int(torch.cuda.max_memory_allocated(device)), CUDA_MEMORY_METHOD
    tracker = LiveTensorBytes()
    with torch.inference_mode(), ctx, tracker:
        model(x)
    return state_bytes(model) + x.numel() * x.element_size() + tracker.peak, CPU_MEMORY_METHOD


# -- size, parameters, FLOPs ---------------------------------------------------------------

def _state_tensors(state: dict):
    """Every tensor of a state dict, including those inside the tuples quantized layers pack."""
    for value in state.values():
        for t in tree_flatten(value)[0]:
            if isinstance(t, torch.Tensor):
                yield t
            elif hasattr(t, "__getstate__") and type(t).__name__.endswith("PackedParamsBase"):
                yield from (x for x in tree_flatten(t.__getstate__())[0]
                            if isinstance(x, torch.Tensor))


def serialized_size(model: nn.Module) -> tuple[int, int]:
    """(bytes torch.save(state_dict) writes, the same gzipped): what a user ships. Unstructured
    sparsity only pays off compressed, so both are shown."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    raw = buf.getvalue()
    return len(raw), len(gzip.compress(raw, compresslevel=6, mtime=0))


def count_params(model: nn.Module) -> tuple[int, int]:
    """(parameters, non-zero parameters). Quantized layers keep their weights packed outside
    ``parameters()``, so those are counted from the state dict's weight tensors."""
    params = list(model.parameters())
    if params:
        return (sum(p.numel() for p in params),
                sum(int(torch.count_nonzero(p.detach())) for p in params))
    total = nonzero = 0
    for key, value in model.state_dict().items():
        for t in _weight_tensors(key, value):
            data = t.int_repr() if t.is_quantized else t
            total += data.numel()
            nonzero += int(torch.count_nonzero(data))
    return total, nonzero


def _weight_tensors(key: str, value):
    if isinstance(value, torch.Tensor):
        if key.endswith(("weight", "bias")) and value.is_floating_point() or value.is_quantized:
            yield value
        return
    # Packed quantized parameters: (weight, bias) tuples or packed objects.
    for t in _state_tensors({key: value}):
        if t.is_quantized or t.is_floating_point():
            yield t


def count_flops(model: nn.Module, example: torch.Tensor, device: torch.device) -> int | None:
    """FLOPs per sample of one forward pass (torch.utils.flop_counter), or None when the
    counter sees no op it knows (quantized kernels are invisible to it)."""
    from torch.utils.flop_counter import FlopCounterMode
    x = example.to(device)
    counter = FlopCounterMode(display=False)
    try:
        with torch.inference_mode(), counter:
            model(x)
    except Exception:
        return None
    total = counter.get_total_flops()
    return int(total // x.shape[0]) if total else None


@contextmanager
def pinned_threads(threads: int):
    """Run with a fixed intra-op thread count on as many fixed cores, restoring both after.

    The cores are the last ones the process may use: the OS and its interrupts favour the
    first. Pinning steadied ResNet-18's p50 across repeats here (CV 2.8-4.3% pinned against
    5.5-6.1% free to migrate)."""
    before = torch.get_num_threads()
    affinity = _affinity()
    torch.set_num_threads(threads)
    if affinity and threads < len(affinity):
        os.sched_setaffinity(0, sorted(affinity)[-threads:])
    try:
        yield
    finally:
        torch.set_num_threads(before)
        if affinity and threads < len(affinity):
            os.sched_setaffinity(0, affinity)


def _affinity() -> set[int] | None:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):  # not Linux
        return None
