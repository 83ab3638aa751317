"""The one place a recommendation asks whether to stop.

``Stop()`` is what the runner's phases, the search loop and the final timing all call: the
caller's ``should_stop`` (the dashboard's Cancel and the worker's time limit reach every job
kind through it), the wall-time budget, and Ctrl-C (``interrupted``, set where the
KeyboardInterrupt is caught). Once it says stop it keeps saying so, with the reason. The
search also ends early on its own (``soft_end``) to leave the final timing the time it needs;
that is not a stop, so the final rounds still run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

REASONS = {"cancelled": "cancelled", "budget": "the wall-time budget ran out",
           "interrupted": "interrupted (Ctrl-C)"}


class Stop:
    def __init__(self, should_stop: Callable[[], bool] | None = None,
                 budget_s: float | None = None, started: float | None = None):
        self.started = time.monotonic() if started is None else started
        self.deadline = self.started + budget_s if budget_s else math.inf
        self.external = should_stop
        self.reason: str | None = None

    def __call__(self) -> bool:
        if self.reason is None:
            if self.external is not None and self.external():
                self.reason = "cancelled"
            elif time.monotonic() >= self.deadline:
                self.reason = "budget"
        return self.reason is not None

    def interrupt(self) -> None:
        self.reason = self.reason or "interrupted"

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    @property
    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def soft_end(self, reserve_s: float) -> bool:
        """Whether what is left of the budget is below ``reserve_s`` (the search then ends, so
        the final timing fits)."""
        return self.remaining_s < reserve_s

    def describe(self) -> str | None:
        return None if self.reason is None else REASONS[self.reason]
