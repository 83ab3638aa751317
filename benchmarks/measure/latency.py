"""Latency: the timed calls of a variant, their raw samples kept.

Statistics are derived from the samples in ``benchmarks.report.records.LatencyStats``. A clock
is swappable (``Clock`` on a CPU, ``CudaClock``'s events on a GPU), so tests check the
statistics with a fake one. The thread count a variant is timed on is pinned here too
(``pinned_threads``): the same threads for every variant of a sweep.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field

import torch
from torch import nn

from benchmarks.measure.cores import claimed_cores


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
    # The timed loop's wall time by the clock's host time (warm-up excluded, the device's
    # pending work included): calls / window is the rate sustained, preemptions and all.
    window_ms: float = 0.0
    # Stop at the call that ends nearest ``min_time_s`` (once ``min_runs`` are in) rather than
    # the first past it: an interleaved round's slice is often under two calls of a slow
    # model, and going past it every visit doubled that model's timing.
    nearest: bool = False
    # Each warm-up call's host time (ms): what the first call after another model costs.
    warmup_ms: list[float] = field(default_factory=list)

    def run(self, fn: Callable[[], object]) -> list[float]:
        wall0 = time.perf_counter()
        clock = self.clock
        warm = []
        for _ in range(self.warmup):
            t0 = clock.host_ms()
            fn()
            warm.append(clock.host_ms() - t0)
        clock.synchronize()
        self.warmup_ms = warm
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
        spent = last = 0.0
        window0 = clock.host_ms()
        while self._more(len(samples), spent, last):
            token = clock.start()
            fn()
            ms = clock.stop(token)
            samples.append(ms)
            before = spent
            if clock.device_timed:
                # Budget by host time for the loop; exact figures come from the events.
                spent = (time.perf_counter() - wall0) * 1000.0
            else:
                spent += ms
            last = spent - before
        resolved = clock.finish()
        self.window_ms = clock.host_ms() - window0
        self.samples_ms = samples if resolved is None else resolved
        self.wall_s = time.perf_counter() - wall0
        return self.samples_ms

    def _more(self, runs: int, spent_ms: float, last_ms: float) -> bool:
        """Whether to time another call, ``spent_ms`` of the budget used, the last call
        ``last_ms`` long."""
        if runs < self.min_runs:
            return True
        budget = self.min_time_s * 1000.0
        if runs >= self.max_runs or spent_ms >= budget:
            return False
        # Nearest: another call of about the last one's length overshoots the budget by
        # less than stopping now falls short of it.
        return not self.nearest or spent_ms + last_ms / 2 < budget


def measure_latency(model: nn.Module | Callable, example: torch.Tensor,
                    device: torch.device, *, autocast: AbstractContextManager | None = None,
                    min_runs: int = 10, min_time_s: float = 1.0, warmup: int = 3,
                    nearest: bool = False) -> LatencyTracker:
    """``model``: a module, or any callable of the batch (a runtime cell's session);
    ``nearest``: ``LatencyTracker.nearest``."""
    x = example.to(device)
    if isinstance(model, nn.Module):
        model.eval()
    tracker = LatencyTracker(min_runs=min_runs, min_time_s=min_time_s, warmup=warmup,
                             clock=CudaClock() if device.type == "cuda" else Clock(),
                             nearest=nearest)
    ctx = autocast or nullcontext()
    with torch.inference_mode(), ctx:
        tracker.run(lambda: model(x))
    return tracker


@contextmanager
def pinned_threads(threads: int, pin: bool = True):
    """Run with a fixed intra-op thread count on as many fixed cores, restoring both after;
    yields the cores' claim (``benchmarks.measure.cores.CoreClaim``), None unpinned.

    The cores are claimed from the last the process may use down (the OS and its interrupts
    favour the first), skipping those another timing process of the product holds: two runs
    on one machine are timed on cores of their own, and a run that finds none free says so
    (``CoreClaim.shared``). Pinning steadied ResNet-18's p50 across repeats here (CV 2.8-4.3%
    pinned against 5.5-6.1% free to migrate). ``pin=False`` sets only the count."""
    before = torch.get_num_threads()
    affinity = _affinity() if pin else None
    torch.set_num_threads(threads)
    with claimed_cores(threads, affinity) if affinity else nullcontext() as claim:
        moved = claim is not None and set(claim.cores) != affinity
        try:
            if moved:
                os.sched_setaffinity(0, claim.cores)
            yield claim
        finally:
            torch.set_num_threads(before)
            if moved:
                os.sched_setaffinity(0, affinity)


def _affinity() -> set[int] | None:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):  # not Linux
        return None
