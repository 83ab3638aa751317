"""The one exception that stops work its owner cancelled (or that reached its time limit), and
the one check every job kind makes.

The worker hands each job a ``should_stop`` (a callable: True once the job's owner clicked
Cancel, its wall-time limit passed, or the server went away). Job code calls
``check_stop(should_stop)`` at every point where stopping is safe: between phases, files,
artefacts and chunks of a long write. It raises ``Cancelled``; the code that made partial
files removes them on the way out (``try``/``except Cancelled``, or a temporary name renamed
only when whole), and the worker ends the job ``cancelled`` (``failed`` past its limit).
"""

from __future__ import annotations

from collections.abc import Callable

StopCheck = Callable[[], bool]


class Cancelled(Exception):
    """Raised between phases, files or chunks when ``should_stop()`` says so."""


def check_stop(should_stop: StopCheck | None) -> None:
    """Raise Cancelled if ``should_stop`` (None: never) says the job must stop."""
    if should_stop is not None and should_stop():
        raise Cancelled()
