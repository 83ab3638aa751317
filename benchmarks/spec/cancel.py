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


class Cancelled(BaseException):
    """Raised between phases, files or chunks when ``should_stop()`` says so.

    A BaseException, as ``KeyboardInterrupt`` and asyncio's ``CancelledError`` are: a stop is
    not an error, and the many ``except Exception`` fallbacks that try another way (channel
    pruning's block-by-block path, an exporter's "this format cannot carry it" note, an
    image that will not decode) would otherwise take a cancel for a failure and go on: an
    export cancelled mid-pruning ended "failed: channel pruning cannot handle this model"."""


def check_stop(should_stop: StopCheck | None) -> None:
    """Raise Cancelled if ``should_stop`` (None: never) says the job must stop."""
    if should_stop is not None and should_stop():
        raise Cancelled()
