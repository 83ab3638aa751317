"""Progress, and a variant's phases timed by one context manager.

``ProgressEvent`` is what a running sweep tells its caller (the CLI's progress line, the
queue's job row, an executor's stream); ``reporter`` turns a caller's callback into the
``report(variant, index, phase, fraction)`` the runner's parts call.

``with tracker.track("accuracy"):`` checks for a cancel before the phase starts, says which
phase is running (progress, and the phase a failure is blamed on), and adds the phase's wall
time to ``result.phase_s`` (what the estimate of the next sweep learns from), as
optimum-benchmark's trackers time what runs inside them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from benchmarks.spec.cancel import Cancelled

__all__ = ["PhaseTracker", "ProgressEvent", "ProgressFn", "Report", "reporter"]


@dataclass
class ProgressEvent:
    variant: str         # the variant's name, or "baseline-training"
    index: int           # 0-based position in the sweep (-1 for the baseline's training)
    total: int           # number of variants
    phase: str
    fraction: float = 0.0  # within the phase, 0..1

    def describe(self) -> str:
        where = f"{self.index + 1}/{self.total} " if self.index >= 0 else ""
        return f"{where}{self.variant}: {self.phase}"


ProgressFn = Callable[[ProgressEvent], None]
# (variant name, its index, the phase, the fraction done)
Report = Callable[[str, int, str, float], None]


def reporter(on_progress: ProgressFn | None, total: int) -> Report:
    def report(variant: str, index: int, phase: str, fraction: float = 0.0) -> None:
        if on_progress is not None:
            on_progress(ProgressEvent(variant, index, total, phase, fraction))
    return report


class PhaseTracker:
    def __init__(self, phase_s: dict[str, float], report: Callable[[str, float], None],
                 stop: Callable[[], bool]):
        self.phase_s, self.report, self.stop = phase_s, report, stop
        self.current = "build"  # what a failure before the first phase is blamed on

    @contextmanager
    def track(self, name: str) -> Iterator[None]:
        if self.stop():
            raise Cancelled()
        self.current = name
        self.report(name, 0.0)
        t0 = time.perf_counter()
        yield
        # Only a phase that finished: a failed one's partial time would mislead the estimate.
        self.phase_s[name] = self.phase_s.get(name, 0.0) + time.perf_counter() - t0
