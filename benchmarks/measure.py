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
from torch.utils._pytree import tree_flatten, tree_map

from optimizers.counting import FlopCount, count_flops, count_params, state_tensors  # noqa: F401

# Both methods mean the same thing: the variant's weights + its input + the peak of what its
# forward pass allocates on top, whatever else is resident (the baseline, other variants, the
# cuBLAS workspace, garbage not yet collected).
CPU_MEMORY_METHOD = "live_tensor_bytes"  # weights + input + peak of tensors alive in a forward
CUDA_MEMORY_METHOD = "cuda_peak_over_resident"  # weights + input + (max allocated - before)


# -- latency -------------------------------------------------------------------------------

class Clock:
    """perf_counter on a CPU. Swappable, so tests can check the statistics with a fake clock."""

    # True where the clock times a device that runs asynchronously from the host (CUDA).
    device_timed = False

    def start(self):
        return time.perf_counter()

    def stop(self, token) -> float:
        return (time.perf_counter() - token) * 1000.0

    def finish(self) -> list[float] | None:
        """Resolve pending samples (device clocks); None keeps what ``stop`` returned."""
        return None

    def synchronize(self) -> None:
        pass

    def host_ms(self) -> float:
        return time.perf_counter() * 1000.0


class CudaClock(Clock):
    """CUDA events: they time the kernels on the device, not the host's launch of them.
    Events are read after one synchronize at the end, so timing adds no stall per run."""

    device_timed = True

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

    def finish(self) -> list[float]:
        torch.cuda.synchronize()
        samples = [s.elapsed_time(e) for s, e in self.pending]
        self.pending.clear()
        return samples

    def synchronize(self) -> None:
        torch.cuda.synchronize()


# Host-side launch time is taken on this many calls, each started on an idle device.
HOST_PROBES = 5


@dataclass
class LatencyTracker:
    """At least ``min_runs`` timed runs and about ``min_time_s`` of samples, after warm-up.

    On a device clock it also takes ``host_samples_ms``: the host's time to issue one call
    when the device is idle (synchronized first, not after). An event time per call about
    that long means the device waited on the host: the run is launch-bound, and the figure
    is launch overhead, not kernel time."""

    min_runs: int = 10
    min_time_s: float = 1.0
    warmup: int = 3
    max_runs: int = 10_000
    clock: Clock = field(default_factory=Clock)
    samples_ms: list[float] = field(default_factory=list)
    host_samples_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0

    def run(self, fn: Callable[[], object]) -> list[float]:
        wall0 = time.perf_counter()
        clock = self.clock
        for _ in range(self.warmup):
            fn()
        clock.synchronize()
        if clock.device_timed:
            host = []
            for _ in range(HOST_PROBES):
                clock.synchronize()
                t0 = clock.host_ms()
                fn()
                host.append(clock.host_ms() - t0)
            clock.synchronize()
            self.host_samples_ms = host
        samples: list[float] = []
        spent = 0.0
        while len(samples) < self.min_runs or (spent < self.min_time_s * 1000.0
                                               and len(samples) < self.max_runs):
            token = clock.start()
            fn()
            ms = clock.stop(token)
            samples.append(ms)
            if clock.device_timed:
                # Budget by host time for the loop; exact figures come from the events.
                spent = (time.perf_counter() - wall0) * 1000.0
            else:
                spent += ms
        resolved = clock.finish()
        self.samples_ms = samples if resolved is None else resolved
        self.wall_s = time.perf_counter() - wall0
        return self.samples_ms


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
    peak, and the total ever created (every op output once). It sees PyTorch's own allocations
    (tracemalloc does not), at op granularity: a kernel's internal scratch space is not
    counted."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, int] = {}
        self.current = 0
        self.peak = 0
        self.total = 0

    def __enter__(self):
        # Autocast's state reads as off inside __torch_dispatch__: it is taken on entry.
        self.autocast_dtype = torch.get_autocast_dtype("cpu") \
            if torch.is_autocast_enabled("cpu") else None
        return super().__enter__()

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
        self.total += size
        self.peak = max(self.peak, self.current)
        weakref.finalize(storage, self._free, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except RuntimeError:
            # In inference mode under a dispatch mode, einsum (MaxViT's attention) arrives
            # whole, past CPU autocast, with bf16 and fp32 operands: cast them as autocast
            # does for the matmuls einsum becomes.
            if self.autocast_dtype is None:
                raise
            args, kwargs = tree_map(
                lambda t: t.to(self.autocast_dtype) if isinstance(t, torch.Tensor)
                and t.is_floating_point() else t, (args, kwargs))
            out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out


def state_bytes(model: nn.Module) -> int:
    """Bytes of the weights and buffers the model holds in memory."""
    total = 0
    for value in state_tensors(model.state_dict()):
        total += value.untyped_storage().nbytes() if value.is_quantized else \
            value.numel() * value.element_size()
    return total


class CudaAllocator:
    """The CUDA caching allocator's counters, behind a seam so tests can fake them."""

    def __init__(self, device: torch.device):
        self.device = device

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def allocated(self) -> int:
        return int(torch.cuda.memory_allocated(self.device))

    def peak(self) -> int:
        return int(torch.cuda.max_memory_allocated(self.device))


def peak_over_resident(model: nn.Module, x: torch.Tensor, ctx: AbstractContextManager,
                       alloc: CudaAllocator) -> int:
    """Bytes a forward pass allocates above what is resident when it starts."""
    import gc
    with torch.inference_mode(), ctx:
        model(x)  # warm-up: lazily created workspaces are resident from here on
        gc.collect()
        alloc.synchronize()
        before = alloc.allocated()
        alloc.reset_peak()
        model(x)
        alloc.synchronize()
    return max(0, alloc.peak() - before)


def measure_peak_memory(model: nn.Module, example: torch.Tensor, device: torch.device, *,
                        autocast: AbstractContextManager | None = None,
                        allocator: CudaAllocator | None = None) -> tuple[int, str]:
    """Peak bytes of one forward pass of this variant: its weights, its input and the peak of
    what the forward allocates on top, and the method. On CUDA the process-wide peak would
    count whatever else is resident (the baseline stays on the GPU for the whole sweep; the
    cuBLAS workspace is never freed), so the peak is taken over what was allocated just
    before, after a warm-up call has created the workspace and garbage is collected."""
    x = example.to(device)
    ctx = autocast or nullcontext()
    if device.type == "cuda":
        over = peak_over_resident(model, x, ctx, allocator or CudaAllocator(device))
        return state_bytes(model) + x.numel() * x.element_size() + over, CUDA_MEMORY_METHOD
    tracker = LiveTensorBytes()
    with torch.inference_mode(), ctx, tracker:
        model(x)
    return state_bytes(model) + x.numel() * x.element_size() + tracker.peak, CPU_MEMORY_METHOD


def measure_traffic(model: nn.Module, example: torch.Tensor, device: torch.device, *,
                    autocast: AbstractContextManager | None = None) -> int:
    """Bytes one forward of ``example`` moves, at least: the weights read once, the input read
    once, and every op's output written once and read once by the op that consumes it. Fused
    or cached kernels move less, so this is the roofline's conservative (low) intensity."""
    x = example.to(device)
    tracker = LiveTensorBytes()
    with torch.inference_mode(), autocast or nullcontext(), tracker:
        model(x)
    return state_bytes(model) + x.numel() * x.element_size() + 2 * tracker.total


# -- size, parameters, FLOPs ---------------------------------------------------------------

def serialized_size(model: nn.Module) -> tuple[int, int]:
    """(bytes torch.save(state_dict) writes, the same gzipped): what a user ships. Unstructured
    sparsity only pays off compressed, so both are shown."""
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    raw = buf.getvalue()
    return len(raw), len(gzip.compress(raw, compresslevel=6, mtime=0))


@contextmanager
def pinned_threads(threads: int, pin: bool = True):
    """Run with a fixed intra-op thread count on as many fixed cores, restoring both after.

    The cores are the last ones the process may use: the OS and its interrupts favour the
    first. Pinning steadied ResNet-18's p50 across repeats here (CV 2.8-4.3% pinned against
    5.5-6.1% free to migrate). ``pin=False`` sets only the count, for processes that share a
    machine with others doing the same (Ray nodes on one host would all take the last core)."""
    before = torch.get_num_threads()
    affinity = _affinity() if pin else None
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
