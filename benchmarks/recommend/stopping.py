"""The one place a recommendation asks whether to stop.

``Stop()`` is what the runner's phases, the search loop and the final timing all call: the
caller's ``should_stop`` (the dashboard's Cancel and the worker's time limit reach every job
kind through it), the wall-time budget, and Ctrl-C (``interrupted``, set where the
KeyboardInterrupt is caught). Once it says stop it keeps saying so, with the reason. The
search also ends early on its own (``soft_end``) to leave the final timing the time it needs;
that is not a stop, so the final rounds still run. The final timing runs even where the budget
ran out in the search's last wave (``unless_budget``): its rounds are what the speed-up's
interval is drawn from, and three search rounds cannot give a 95% interval. Cancel and Ctrl-C
still stop it.

``started`` is when the command started (the CLI passes its process's start, so the budget
covers the interpreter's imports, the data load and the baseline too).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

REASONS = {"cancelled": "cancelled", "budget": "the wall-time budget ran out",
           "interrupted": "interrupted (Ctrl-C)"}


def process_age_s() -> float:
    """How long this process has run (its interpreter's start and imports included), from
    Linux's /proc; 0 where that cannot be read (the budget then starts at the call)."""
    try:
        with open("/proc/self/stat") as f:
            # The fields after the command's name, which may hold spaces: starttime is 22nd.
            fields = f.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


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

    def unless_budget(self) -> Callable[[], bool]:
        """A stop check that the budget does not trip: Cancel, the worker's limit, Ctrl-C."""
        def check() -> bool:
            if self.reason in ("cancelled", "interrupted"):
                return True
            if self.external is not None and self.external():
                self.reason = "cancelled"  # a cancel says more than a spent budget
                return True
            return False
        return check

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
