"""One line for an error: what the CLI prints, the dashboard shows and a variant records.

Import-light (no torch): the optimizers, the engine and the dashboard all use it.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


def first_line(error: BaseException | str, limit: int = 300) -> str:
    """The first non-empty line of an error's message; the exception's type name if it has
    none (an empty string for an empty text)."""
    lines = [ln.strip() for ln in str(error).strip().splitlines() if ln.strip()]
    if lines:
        return lines[0][:limit]
    return type(error).__name__ if isinstance(error, BaseException) else ""


def described(exc: BaseException, limit: int = 400) -> str:
    """``Type: first line``, for errors whose type says something (RuntimeError, OOM...)."""
    text = first_line(exc, limit)
    name = type(exc).__name__
    return name if text == name else f"{name}: {text}"[:limit]


@contextmanager
def time_limit(seconds: float, what: str):
    """TimeoutError once ``seconds`` have passed, where a signal can interrupt the work (the
    main thread, as in the CLI and the queue's worker); elsewhere no limit."""
    if threading.current_thread() is not threading.main_thread() or \
            not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise TimeoutError(f"{what} did not finish within {seconds:g} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
